"""CUDA launchers of the element-wise family (grid-stride loops over the math in
``kernels/scalar.py``), mirroring ``kernels/cpu/elemwise.py`` function for function.

Broadcast gradients are reduced in the same kernel that computes them: one thread per element
of the input's gradient walks the dims it was broadcast along. float16
goes through float32 device copies, as on the CPU.
"""
import numpy as np
from numba import cuda

from .. import scalar as S
from ..cpu.elemwise import broadcast_plan, gradient_plans, reduce_plan
from ..elemwise_launchers import param_unary_launchers
from ..scalar import BINARY_CODES, UNARY_CODES
from .memory import copy, empty, flat, launch_config

__all__ = ["elemwise_unary", "elemwise_unary_backward", "elemwise_binary",
           "elemwise_binary_backward", "elemwise_scalar", "elemwise_scalar_backward",
           "elemwise_clip", "elemwise_clip_backward", "elemwise_hard_sigmoid",
           "elemwise_hard_sigmoid_backward", "sum_to_shape"]


# ---------------------------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _unary_kernel(code, x, out):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = S.unary(code, x[i])


@cuda.jit
def _unary_grad_kernel(code, x, y, g, dx, acc):
    for i in range(cuda.grid(1), dx.shape[0], cuda.gridsize(1)):
        S.store(dx, i, g[i] * S.unary_grad(code, x[i], y[i]), acc)


@cuda.jit
def _binary_kernel(code, a, b, out):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = S.binary(code, a[i], b[i])


@cuda.jit
def _bcast_kernel(code, a, b, out, shape, sa, sb):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = S.binary(code, a[S.strided_offset(i, shape, sa)],
                          b[S.strided_offset(i, shape, sb)])


@cuda.jit
def _binary_grad_kernel(code, which, x, other, g, dx, keep, red, nred, so, sother, acc):
    for j in range(cuda.grid(1), dx.shape[0], cuda.gridsize(1)):
        S.store(dx, j, S.broadcast_grad_sum(code, which, x, other, g, j, keep, red, nred, so,
                                            sother), acc)


@cuda.jit
def _scalar_kernel(code, x, s, out, reverse):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        if reverse:
            out[i] = S.binary(code, s, x[i])
        else:
            out[i] = S.binary(code, x[i], s)


@cuda.jit
def _scalar_grad_kernel(code, x, s, g, dx, reverse, acc):
    for i in range(cuda.grid(1), dx.shape[0], cuda.gridsize(1)):
        S.store(dx, i, g[i] * S.scalar_op_grad(code, x[i], s, reverse), acc)


@cuda.jit
def _param_unary_kernel(code, x, p, q, out):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = S.param_unary(code, x[i], p, q)


@cuda.jit
def _param_unary_grad_kernel(code, x, p, q, g, dx, acc):
    for i in range(cuda.grid(1), dx.shape[0], cuda.gridsize(1)):
        S.store(dx, i, g[i] * S.param_unary_grad(code, x[i], p, q), acc)


@cuda.jit
def _sum_reduced_kernel(src, dst, keep, red, nred, strides, acc):
    for j in range(cuda.grid(1), dst.shape[0], cuda.gridsize(1)):
        base = S.strided_offset(j, keep, strides)
        v = 0.0
        for r in range(nred):
            v += src[base + S.strided_offset(r, red, strides)]
        S.store(dst, j, v, acc)


# ---------------------------------------------------------------------------------------------
# argument preparation (float16 through float32 copies)
# ---------------------------------------------------------------------------------------------
def _flat_in(x):
    if x.dtype == np.float16:
        tmp = empty(x.shape, np.float32)
        copy(tmp, x)
        x = tmp
    return flat(x)


def _flat_out(out, req="write"):
    """(flat writable array, needs copy back): float16 outputs are computed in float32."""
    if out.dtype != np.float16:
        return flat(out), False
    tmp = empty(out.shape, np.float32)
    if req == "add":
        copy(tmp, out)
    return flat(tmp), True


def _finish(out, flat_tmp, copy_back):
    if copy_back:
        copy(out, flat_tmp.reshape(*out.shape) if out.ndim != 1 else flat_tmp)


def _scalar_for(x, value):
    dt = np.float32 if x.dtype in (np.float16, np.bool_) else x.dtype
    return np.dtype(dt).type(value)


# ---------------------------------------------------------------------------------------------
# launchers
# ---------------------------------------------------------------------------------------------
def elemwise_unary(name, x, out):
    if out.size == 0:
        return
    fo, back = _flat_out(out)
    _unary_kernel[launch_config(fo.size)](UNARY_CODES[name], _flat_in(x), fo)
    _finish(out, fo, back)


def elemwise_unary_backward(name, x, y, g, dx, req):
    if req == "null" or dx.size == 0:
        return
    fo, back = _flat_out(dx, req)
    _unary_grad_kernel[launch_config(fo.size)](
        UNARY_CODES[name], _flat_in(x), _flat_in(y), _flat_in(g), fo, req == "add")
    _finish(dx, fo, back)


def elemwise_binary(name, a, b, out):
    if out.size == 0:
        return
    code = BINARY_CODES[name]
    fo, back = _flat_out(out)
    if tuple(a.shape) == tuple(b.shape):
        _binary_kernel[launch_config(fo.size)](code, _flat_in(a), _flat_in(b), fo)
    else:
        _, shape, sa, sb, _, _ = broadcast_plan(tuple(a.shape), tuple(b.shape))
        _bcast_kernel[launch_config(fo.size)](code, _flat_in(a), _flat_in(b), fo, shape, sa, sb)
    _finish(out, fo, back)


def elemwise_binary_backward(name, a, b, g, da, db, req_a, req_b):
    code = BINARY_CODES[name]
    fa, fb, fg = _flat_in(a), _flat_in(b), _flat_in(g)
    for which, dx, req, (keep, red, nred, so, sother) in gradient_plans(a, b, da, db, req_a,
                                                                       req_b):
        x, other = (fa, fb) if which == 0 else (fb, fa)
        fo, back = _flat_out(dx, req)
        _binary_grad_kernel[launch_config(fo.size)](
            code, which, x, other, fg, fo, keep, red, nred, so, sother, req == "add")
        _finish(dx, fo, back)


def elemwise_scalar(name, x, scalar, out, reverse=False):
    if out.size == 0:
        return
    fo, back = _flat_out(out)
    _scalar_kernel[launch_config(fo.size)](
        BINARY_CODES[name], _flat_in(x), _scalar_for(x, scalar), fo, bool(reverse))
    _finish(out, fo, back)


def elemwise_scalar_backward(name, x, scalar, g, dx, req, reverse=False):
    if req == "null" or dx.size == 0:
        return
    fo, back = _flat_out(dx, req)
    _scalar_grad_kernel[launch_config(fo.size)](
        BINARY_CODES[name], _flat_in(x), _scalar_for(x, scalar), _flat_in(g), fo,
        bool(reverse), req == "add")
    _finish(dx, fo, back)


def _elemwise_param_unary(code, x, p, q, out):
    if out.size == 0:
        return
    fo, back = _flat_out(out)
    _param_unary_kernel[launch_config(fo.size)](
        code, _flat_in(x), _scalar_for(x, p), _scalar_for(x, q), fo)
    _finish(out, fo, back)


def _elemwise_param_unary_backward(code, x, p, q, g, dx, req):
    if req == "null" or dx.size == 0:
        return
    fo, back = _flat_out(dx, req)
    _param_unary_grad_kernel[launch_config(fo.size)](
        code, _flat_in(x), _scalar_for(x, p), _scalar_for(x, q), _flat_in(g), fo,
        req == "add")
    _finish(dx, fo, back)


(elemwise_clip, elemwise_clip_backward, elemwise_hard_sigmoid,
 elemwise_hard_sigmoid_backward) = param_unary_launchers(_elemwise_param_unary,
                                                         _elemwise_param_unary_backward)


def sum_to_shape(src, dst, req="write"):
    """dst (req) src summed over the dims along which dst's shape broadcasts to src's."""
    if req == "null" or dst.size == 0:
        return
    plan = broadcast_plan(tuple(dst.shape), tuple(src.shape))
    if plan[0] != tuple(src.shape):
        raise ValueError("sum_to_shape: %s does not broadcast to %s"
                         % (tuple(dst.shape), tuple(src.shape)))
    keep, red, nred, so, _ = reduce_plan(plan, 0)
    fo, back = _flat_out(dst, req)
    _sum_reduced_kernel[launch_config(fo.size)](_flat_in(src), fo, keep, red, nred, so,
                                                req == "add")
    _finish(dst, fo, back)
