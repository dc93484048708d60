"""CPU launchers of the element-wise family, plus host-memory helpers of the CPU kernel set.

The math lives in ``kernels/scalar.py`` (shared with the CUDA half). Every launcher has a serial
loop for small arrays and a ``prange`` loop for large ones (``jit.parallel_loop``). Broadcasting is
reduced to a canonical form (``broadcast_plan``): adjacent dims that broadcast the same way are
merged, so a bias add over (N, C, H, W) becomes a 3-d walk with per-input element strides.
float16 arrays are computed through float32 copies (numba's CPU float16 support is partial).
"""
import functools

import numpy as np
from numba import njit, prange

from .. import scalar as S
from ..elemwise_launchers import param_unary_launchers
from ..scalar import BINARY_CODES, UNARY_CODES
from .jit import parallel_loop

__all__ = ["empty", "zeros", "full", "fill", "copy", "shares_memory", "from_host", "to_host",
           "assign",
           "assign_scalar",
           "broadcast_plan", "elemwise_unary", "elemwise_unary_backward", "elemwise_binary",
           "elemwise_binary_backward", "elemwise_scalar", "elemwise_scalar_backward",
           "elemwise_clip", "elemwise_clip_backward", "elemwise_hard_sigmoid",
           "elemwise_hard_sigmoid_backward", "sum_to_shape"]

# ---------------------------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------------------------
def empty(shape, dtype):
    return np.empty(shape, dtype=dtype)


def zeros(shape, dtype):
    return np.zeros(shape, dtype=dtype)


def full(shape, value, dtype):
    return np.full(shape, value, dtype=dtype)


def fill(dst, value):
    dst[...] = value


def copy(dst, src):
    """dst[...] = src with an unsafe cast (src may be a broadcastable host array)."""
    np.copyto(dst, src, casting="unsafe")


def shares_memory(a, b):
    """Whether arrays a and b may overlap in memory."""
    return np.may_share_memory(a, b)


def from_host(arr, dtype=None):
    """A fresh C-contiguous array owning a copy of arr."""
    return np.array(arr, dtype=dtype, copy=True, order="C")


def to_host(arr):
    return np.array(arr, copy=True)


def assign(dst, src, req):
    """Store src into dst following a gradient request ('write', 'add', 'null')."""
    if req == "write":
        np.copyto(dst, src, casting="unsafe")
    elif req == "add":
        dst += src


def assign_scalar(dst, value, req):
    """Store the constant value into every element of dst following a gradient request."""
    if req == "write":
        dst[...] = value
    elif req == "add":
        dst += value


# ---------------------------------------------------------------------------------------------
# broadcasting plans (pure Python, shared with the CUDA half)
# ---------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def broadcast_plan(shape_a, shape_b):
    """Describe ``a op b`` under numpy broadcasting in a collapsed canonical form.

    Returns ``(out_shape, shape, strides_a, strides_b, bcast_a, bcast_b)``: the full output
    shape; the collapsed shape (adjacent dims merged when both inputs broadcast the same way);
    each input's element strides over the collapsed shape (0 on broadcast dims); and per
    collapsed dim whether a (resp. b) is broadcast along it. Raises ValueError when the shapes
    are incompatible.
    """
    nd = max(len(shape_a), len(shape_b))
    sa = (1,) * (nd - len(shape_a)) + tuple(shape_a)
    sb = (1,) * (nd - len(shape_b)) + tuple(shape_b)
    out = []
    for x, y in zip(sa, sb):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise ValueError("shapes %s and %s cannot be broadcast together"
                             % (tuple(shape_a), tuple(shape_b)))
    groups = []   # [kind, size] with kind = (a broadcast, b broadcast)
    for x, y, n in zip(sa, sb, out):
        if n == 1:
            continue
        kind = (x == 1, y == 1)
        if groups and groups[-1][0] == kind:
            groups[-1][1] *= n
        else:
            groups.append([kind, n])
    if not groups:
        groups = [[(False, False), 1]]
    shape = tuple(n for _, n in groups)

    def strides(which):
        st, acc = [0] * len(groups), 1
        for i in range(len(groups) - 1, -1, -1):
            if not groups[i][0][which]:
                st[i] = acc
                acc *= groups[i][1]
        return tuple(st)

    return (tuple(out), shape, strides(0), strides(1),
            tuple(g[0][0] for g in groups), tuple(g[0][1] for g in groups))


def contiguous_strides(shape):
    st, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        st[i] = acc
        acc *= shape[i]
    return tuple(st)


def reduce_plan(plan, which):
    """For the gradient of input ``which`` (0 = a, 1 = b) of a broadcast binary op: the shapes
    of the kept and reduced index spaces, the output strides and the other input's strides."""
    _, shape, sa, sb, ba, bb = plan
    bcast = ba if which == 0 else bb
    keep = tuple(1 if f else n for n, f in zip(shape, bcast))
    red = tuple(n if f else 1 for n, f in zip(shape, bcast))
    nred = 1
    for n in red:
        nred *= n
    return keep, red, nred, contiguous_strides(shape), (sb if which == 0 else sa)


def gradient_plans(a, b, da, db, req_a, req_b):
    """The inputs of ``a op b`` whose gradient is wanted, as ``(which, dx, req, plan)`` with
    ``plan = reduce_plan(...)`` for that input (0 = a, 1 = b)."""
    plan = broadcast_plan(tuple(a.shape), tuple(b.shape))
    for which, (dx, req) in enumerate(((da, req_a), (db, req_b))):
        if dx is not None and req != "null" and dx.size:
            yield which, dx, req, reduce_plan(plan, which)


# ---------------------------------------------------------------------------------------------
# argument preparation
# ---------------------------------------------------------------------------------------------
def _flat_in(x):
    """A contiguous 1-d view (or copy) of x; float16 goes through float32."""
    if x.dtype == np.float16:
        x = x.astype(np.float32)
    return np.ascontiguousarray(x).reshape(-1)


def _flat_out(out):
    """A writable contiguous 1-d array aliasing out when possible; (flat, needs_copy_back)."""
    if out.dtype != np.float16 and out.flags.c_contiguous:
        return out.reshape(-1), False
    dtype = np.float32 if out.dtype == np.float16 else out.dtype
    return np.ascontiguousarray(out, dtype=dtype).reshape(-1), True


def _finish(out, flat, copy_back):
    if copy_back:
        np.copyto(out, flat.reshape(out.shape), casting="unsafe")


def _scalar_for(x, value):
    """The scalar as the array's dtype (MXNet casts the scalar to DType before the op)."""
    dt = np.float32 if x.dtype == np.float16 else x.dtype
    if dt == np.bool_:
        return np.float32(value)
    return np.dtype(dt).type(value)


def _acc(req):
    return req == "add"


# ---------------------------------------------------------------------------------------------
# jitted loops
# ---------------------------------------------------------------------------------------------
# scalar.store (a gradient request's write or add) inlined into the loops' numba IR (see there)
store = njit(inline="always")(S.store)

# The cheap hot operators get loops of their own that call the tiny per-op functions of
# scalar.py directly (inlined, so the loop vectorises); everything else shares one loop that
# dispatches on the code per element. Blocks of BLOCK elements are the prange work unit.
# Every block loop runs over the views ``a[lo:hi]`` from index 0: numba then knows no index is
# negative and drops the wrap-around check, which lets LLVM vectorise the loop (indexing
# ``a[i]`` with ``i`` in ``range(lo, hi)`` made ``x * 0.9`` 8x slower than numpy).
BLOCK = 1 << 14


@njit(inline="always")
def _map1(fn, x, out, lo, hi):
    xs, os = x[lo:hi], out[lo:hi]
    for i in range(os.size):
        os[i] = fn(xs[i])


@njit(inline="always", error_model="numpy")
def _unary_block(code, x, out, lo, hi):
    if code == S.U_RELU:
        _map1(S.relu, x, out, lo, hi)
    elif code == S.U_SQUARE:
        _map1(S.square, x, out, lo, hi)
    elif code == S.U_NEGATIVE:
        _map1(S.negative, x, out, lo, hi)
    else:
        xs, os = x[lo:hi], out[lo:hi]
        for i in range(os.size):
            os[i] = S.unary(code, xs[i])


@parallel_loop(error_model="numpy")
def _unary(code, x, out):
    n = x.size
    for blk in prange((n + BLOCK - 1) // BLOCK):
        _unary_block(code, x, out, blk * BLOCK, min(n, (blk + 1) * BLOCK))


@njit(inline="always")
def _map_grad(fn, x, y, g, dx, acc, lo, hi):
    xs, ys, gs, ds = x[lo:hi], y[lo:hi], g[lo:hi], dx[lo:hi]
    if acc:
        for i in range(ds.size):
            ds[i] += gs[i] * fn(xs[i], ys[i])
    else:
        for i in range(ds.size):
            ds[i] = gs[i] * fn(xs[i], ys[i])


@njit(inline="always", error_model="numpy")
def _unary_grad_block(code, x, y, g, dx, acc, lo, hi):
    if code == S.U_RELU:
        _map_grad(S.relu_grad, x, y, g, dx, acc, lo, hi)
    elif code == S.U_SIGMOID:
        _map_grad(S.sigmoid_grad, x, y, g, dx, acc, lo, hi)
    elif code == S.U_TANH:
        _map_grad(S.tanh_grad, x, y, g, dx, acc, lo, hi)
    elif code == S.U_SQUARE:
        _map_grad(S.square_grad, x, y, g, dx, acc, lo, hi)
    else:
        xs, ys, gs, ds = x[lo:hi], y[lo:hi], g[lo:hi], dx[lo:hi]
        for i in range(ds.size):
            store(ds, i, gs[i] * S.unary_grad(code, xs[i], ys[i]), acc)


@parallel_loop(error_model="numpy")
def _unary_grad(code, x, y, g, dx, acc):
    n = x.size
    for blk in prange((n + BLOCK - 1) // BLOCK):
        _unary_grad_block(code, x, y, g, dx, acc, blk * BLOCK, min(n, (blk + 1) * BLOCK))


@njit(inline="always")
def _map2(fn, a, b, out, lo, hi):
    as_, bs, os = a[lo:hi], b[lo:hi], out[lo:hi]
    for i in range(os.size):
        os[i] = fn(as_[i], bs[i])


@njit(inline="always", error_model="numpy")
def _binary_block(code, a, b, out, lo, hi):
    if code == S.B_ADD:
        _map2(S.add, a, b, out, lo, hi)
    elif code == S.B_SUB:
        _map2(S.sub, a, b, out, lo, hi)
    elif code == S.B_MUL:
        _map2(S.mul, a, b, out, lo, hi)
    elif code == S.B_DIV:
        _map2(S.div, a, b, out, lo, hi)
    else:
        as_, bs, os = a[lo:hi], b[lo:hi], out[lo:hi]
        for i in range(os.size):
            os[i] = S.binary(code, as_[i], bs[i])


@parallel_loop(error_model="numpy")
def _binary(code, a, b, out):
    n = out.size
    for blk in prange((n + BLOCK - 1) // BLOCK):
        _binary_block(code, a, b, out, blk * BLOCK, min(n, (blk + 1) * BLOCK))


@parallel_loop(error_model="numpy")
def _bcast(code, a, b, out, shape, sa, sb):
    for i in prange(out.size):
        out[i] = S.binary(code, a[S.strided_offset(i, shape, sa)], b[S.strided_offset(i, shape, sb)])


@parallel_loop(error_model="numpy")
def _binary_grad(code, which, x, other, g, dx, keep, red, nred, so, sother, acc):
    for j in prange(dx.size):
        store(dx, j, S.broadcast_grad_sum(code, which, x, other, g, j, keep, red, nred, so,
                                            sother), acc)


@njit(inline="always")
def _map_scalar(fn, x, s, out, reverse, lo, hi):
    xs, os = x[lo:hi], out[lo:hi]
    if reverse:
        for i in range(os.size):
            os[i] = fn(s, xs[i])
    else:
        for i in range(os.size):
            os[i] = fn(xs[i], s)


@njit(inline="always", error_model="numpy")
def _scalar_block(code, x, s, out, reverse, lo, hi):
    if code == S.B_ADD:
        _map_scalar(S.add, x, s, out, reverse, lo, hi)
    elif code == S.B_SUB:
        _map_scalar(S.sub, x, s, out, reverse, lo, hi)
    elif code == S.B_MUL:
        _map_scalar(S.mul, x, s, out, reverse, lo, hi)
    elif code == S.B_DIV:
        _map_scalar(S.div, x, s, out, reverse, lo, hi)
    else:
        xs, os = x[lo:hi], out[lo:hi]
        for i in range(os.size):
            if reverse:
                os[i] = S.binary(code, s, xs[i])
            else:
                os[i] = S.binary(code, xs[i], s)


@parallel_loop(error_model="numpy")
def _scalar(code, x, s, out, reverse):
    n = x.size
    for blk in prange((n + BLOCK - 1) // BLOCK):
        _scalar_block(code, x, s, out, reverse, blk * BLOCK, min(n, (blk + 1) * BLOCK))


@parallel_loop(error_model="numpy")
def _scalar_grad(code, x, s, g, dx, reverse, acc):
    for i in prange(x.size):
        store(dx, i, g[i] * S.scalar_op_grad(code, x[i], s, reverse), acc)


@parallel_loop(error_model="numpy")
def _param_unary(code, x, p, q, out):
    for i in prange(x.size):
        out[i] = S.param_unary(code, x[i], p, q)


@parallel_loop(error_model="numpy")
def _param_unary_grad(code, x, p, q, g, dx, acc):
    for i in prange(x.size):
        store(dx, i, g[i] * S.param_unary_grad(code, x[i], p, q), acc)


# ---------------------------------------------------------------------------------------------
# launchers (the k.* functions operators call)
# ---------------------------------------------------------------------------------------------
_NUMPY_BROADCAST = {"add": np.add, "sub": np.subtract, "mul": np.multiply,
                    "div": np.divide}


def elemwise_unary(name, x, out):
    """out = f(x) for the unary function ``name`` (see scalar.UNARY_CODES)."""
    code = UNARY_CODES[name]
    if out.size == 0:
        return
    fo, back = _flat_out(out)
    _unary(out.size, code, _flat_in(x), fo)
    _finish(out, fo, back)


def elemwise_unary_backward(name, x, y, g, dx, req):
    """dx (req) g * f'(x); y = f(x) is the forward output."""
    if req == "null" or dx.size == 0:
        return
    code = UNARY_CODES[name]
    fo, back = _flat_out(dx)
    _unary_grad(dx.size, code, _flat_in(x), _flat_in(y), _flat_in(g), fo, _acc(req))
    _finish(dx, fo, back)


def elemwise_binary(name, a, b, out):
    """out = a op b with numpy broadcasting (out has the broadcast shape)."""
    code = BINARY_CODES[name]
    if out.size == 0:
        return
    if a.shape != b.shape and name in _NUMPY_BROADCAST:
        # numpy's broadcasting loops are as fast as ours for plain arithmetic (bias adds)
        with np.errstate(all="ignore"):
            _NUMPY_BROADCAST[name](a, b, out=out, casting="unsafe")
        return
    fo, back = _flat_out(out)
    if a.shape == b.shape:
        _binary(out.size, code, _flat_in(a), _flat_in(b), fo)
    else:
        _, shape, sa, sb, _, _ = broadcast_plan(tuple(a.shape), tuple(b.shape))
        _bcast(out.size, code, _flat_in(a), _flat_in(b), fo, shape, sa, sb)
    _finish(out, fo, back)


def elemwise_binary_backward(name, a, b, g, da, db, req_a, req_b):
    """Gradients of a op b w.r.t. a and b, summed over the dims each input was broadcast on."""
    code = BINARY_CODES[name]
    if name in ("add", "sub"):
        # d/da = 1, d/db = +-1: the gradients are g summed to each input's shape
        sum_to_shape(g, da, req_a)
        if db is not None and req_b != "null":
            sum_to_shape(g if name == "add" else -g, db, req_b)
        return
    fa, fb, fg = _flat_in(a), _flat_in(b), _flat_in(g)
    for which, dx, req, (keep, red, nred, so, sother) in gradient_plans(a, b, da, db, req_a,
                                                                       req_b):
        x, other = (fa, fb) if which == 0 else (fb, fa)
        fo, back = _flat_out(dx)
        _binary_grad(dx.size * nred, code, which, x, other, fg, fo, keep, red, nred, so, sother,
                     _acc(req))
        _finish(dx, fo, back)


def elemwise_scalar(name, x, scalar, out, reverse=False):
    """out = x op scalar (reverse: scalar op x); the scalar is cast to x's dtype first."""
    code = BINARY_CODES[name]
    if out.size == 0:
        return
    fo, back = _flat_out(out)
    _scalar(out.size, code, _flat_in(x), _scalar_for(x, scalar), fo, bool(reverse))
    _finish(out, fo, back)


def elemwise_scalar_backward(name, x, scalar, g, dx, req, reverse=False):
    if req == "null" or dx.size == 0:
        return
    code = BINARY_CODES[name]
    fo, back = _flat_out(dx)
    _scalar_grad(dx.size, code, _flat_in(x), _scalar_for(x, scalar), _flat_in(g), fo, bool(reverse),
                 _acc(req))
    _finish(dx, fo, back)


def _elemwise_param_unary(code, x, p, q, out):
    if out.size == 0:
        return
    fo, back = _flat_out(out)
    _param_unary(out.size, code, _flat_in(x), _scalar_for(x, p), _scalar_for(x, q), fo)
    _finish(out, fo, back)


def _elemwise_param_unary_backward(code, x, p, q, g, dx, req):
    if req == "null" or dx.size == 0:
        return
    fo, back = _flat_out(dx)
    _param_unary_grad(dx.size, code, _flat_in(x), _scalar_for(x, p), _scalar_for(x, q),
                      _flat_in(g), fo, _acc(req))
    _finish(dx, fo, back)


(elemwise_clip, elemwise_clip_backward, elemwise_hard_sigmoid,
 elemwise_hard_sigmoid_backward) = param_unary_launchers(_elemwise_param_unary,
                                                         _elemwise_param_unary_backward)


def sum_to_shape(src, dst, req="write"):
    """dst (req) src summed over the dims along which dst's shape broadcasts to src's shape."""
    if req == "null" or dst is None:
        return
    nd = src.ndim
    dshape = (1,) * (nd - dst.ndim) + tuple(dst.shape)
    axes = tuple(i for i in range(nd) if dshape[i] == 1 and src.shape[i] != 1)
    total = src.sum(axis=axes, keepdims=True, dtype=np.float64 if src.dtype == np.float16
                    else None) if axes else src
    total = np.asarray(total).reshape(dst.shape)
    if req == "add":
        dst += total.astype(dst.dtype, copy=False)
    else:
        np.copyto(dst, total, casting="unsafe")
