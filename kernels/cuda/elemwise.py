"""CUDA launchers of the element-wise family (grid-stride loops over the math in
``kernels/scalar.py``), mirroring ``kernels/cpu/elemwise.py`` function for function.

Broadcast gradients are reduced in the same kernel that computes them: one thread per element
of the input's gradient walks the dims it was broadcast along. float16
goes through float32 device copies, as on the CPU.
"""
import numpy as np
from numba import cuda

from .. import scalar as S
from ..cpu.elemwise import broadcast_plan, reduce_plan
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
        v = g[i] * S.unary_grad(code, x[i], y[i])
        if acc:
            dx[i] += v
        else:
            dx[i] = v


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
        # sum over the broadcast dims (red) at element j of the input's own dims (keep)
        base_o = S.strided_offset(j, keep, so)
        base_b = S.strided_offset(j, keep, sother)
        v = 0.0
        for r in range(nred):
            io = base_o + S.strided_offset(r, red, so)
            ib = base_b + S.strided_offset(r, red, sother)
            if which == 0:
                v += g[io] * S.binary_grad_lhs(code, x[j], other[ib])
            else:
                v += g[io] * S.binary_grad_rhs(code, other[ib], x[j])
        if acc:
            dx[j] += v
        else:
            dx[j] = v


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
        if reverse:
            v = g[i] * S.binary_grad_rhs(code, s, x[i])
        else:
            v = g[i] * S.binary_grad_lhs(code, x[i], s)
        if acc:
            dx[i] += v
        else:
            dx[i] = v


@cuda.jit
def _clip_kernel(x, lo, hi, out):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = S.clip(x[i], lo, hi)


@cuda.jit
def _clip_grad_kernel(x, lo, hi, g, dx, acc):
    for i in range(cuda.grid(1), dx.shape[0], cuda.gridsize(1)):
        v = g[i] * S.clip_grad(x[i], lo, hi)
        if acc:
            dx[i] += v
        else:
            dx[i] = v


@cuda.jit
def _hard_sigmoid_kernel(x, alpha, beta, out):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = S.hard_sigmoid(x[i], alpha, beta)


@cuda.jit
def _hard_sigmoid_grad_kernel(x, alpha, beta, g, dx, acc):
    for i in range(cuda.grid(1), dx.shape[0], cuda.gridsize(1)):
        v = g[i] * S.hard_sigmoid_grad(x[i], alpha, beta)
        if acc:
            dx[i] += v
        else:
            dx[i] = v


@cuda.jit
def _sum_reduced_kernel(src, dst, keep, red, nred, strides, acc):
    for j in range(cuda.grid(1), dst.shape[0], cuda.gridsize(1)):
        base = S.strided_offset(j, keep, strides)
        v = 0.0
        for r in range(nred):
            v += src[base + S.strided_offset(r, red, strides)]
        if acc:
            dst[j] += v
        else:
            dst[j] = v


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
    plan = broadcast_plan(tuple(a.shape), tuple(b.shape))
    fa, fb, fg = _flat_in(a), _flat_in(b), _flat_in(g)
    for which, (dx, req, x, other) in enumerate(((da, req_a, fa, fb), (db, req_b, fb, fa))):
        if dx is None or req == "null" or dx.size == 0:
            continue
        keep, red, nred, so, sother = reduce_plan(plan, which)
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


def elemwise_clip(x, a_min, a_max, out):
    if out.size == 0:
        return
    fo, back = _flat_out(out)
    _clip_kernel[launch_config(fo.size)](
        _flat_in(x), _scalar_for(x, a_min), _scalar_for(x, a_max), fo)
    _finish(out, fo, back)


def elemwise_clip_backward(x, a_min, a_max, g, dx, req):
    if req == "null" or dx.size == 0:
        return
    fo, back = _flat_out(dx, req)
    _clip_grad_kernel[launch_config(fo.size)](
        _flat_in(x), _scalar_for(x, a_min), _scalar_for(x, a_max), _flat_in(g), fo,
        req == "add")
    _finish(dx, fo, back)


def elemwise_hard_sigmoid(x, alpha, beta, out):
    if out.size == 0:
        return
    fo, back = _flat_out(out)
    _hard_sigmoid_kernel[launch_config(fo.size)](
        _flat_in(x), _scalar_for(x, alpha), _scalar_for(x, beta), fo)
    _finish(out, fo, back)


def elemwise_hard_sigmoid_backward(x, alpha, beta, g, dx, req):
    if req == "null" or dx.size == 0:
        return
    fo, back = _flat_out(dx, req)
    _hard_sigmoid_grad_kernel[launch_config(fo.size)](
        _flat_in(x), _scalar_for(x, alpha), _scalar_for(x, beta), _flat_in(g), fo,
        req == "add")
    _finish(dx, fo, back)


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
