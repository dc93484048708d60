"""CPU kernels of the reduction family: axis reductions, their fused gradients, arg-reductions,
and (batched) matrix products.

A reduction is described by the operators in a collapsed form: ``cshape`` (adjacent axes of the
same kind merged) and ``raxes``, the reduced axes of ``cshape``. The forward pass uses numpy's
reductions (C loops, pairwise sums); the backward pass is one numba loop that broadcasts the
output gradient back and multiplies it by the per-element derivative from
``kernels/scalar_tensor.py`` (shared with the CUDA half), without temporaries. Matrix products
go to BLAS through ``np.matmul``.
"""
import numpy as np
from numba import prange

from .. import scalar_tensor as S
from ..scalar import strided_offset
from . import gemm
from .elemwise import assign
from .jit import ParallelLoop

__all__ = ["reduce_axes", "reduce_axes_backward", "arg_reduce", "matmul_batched"]

# one gradient element costs about four element-wise adds (strided offsets, a derivative)
_COST = 4.0


def _count(cshape, raxes):
    n = 1
    for a in raxes:
        n *= cshape[a]
    return n


def output_strides(cshape, raxes):
    """Element strides of the (contiguous) output over cshape; 0 on reduced axes (pure
    Python, shared with the CUDA half)."""
    st, acc = [0] * len(cshape), 1
    for d in range(len(cshape) - 1, -1, -1):
        if d not in raxes:
            st[d] = acc
            acc *= cshape[d]
    return tuple(st)


def _math(x):
    x = np.ascontiguousarray(x).reshape(-1)
    return x.astype(np.float32) if x.dtype == np.float16 else x


def _store(dst, value, req):
    value = np.reshape(value, dst.shape)
    if req == "add":
        dst += value.astype(dst.dtype, copy=False)
    else:
        np.copyto(dst, value, casting="unsafe")


# ---------------------------------------------------------------------------------------------
# forward
# ---------------------------------------------------------------------------------------------
def reduce_axes(dst, src, cshape, raxes, kind, req="write"):
    """dst (req) the reduction ``kind`` (scalar_tensor.R_*) of src over axes raxes of cshape."""
    if req == "null":
        return
    x = np.ascontiguousarray(src).reshape(tuple(cshape))
    if x.dtype == np.float16:
        x = x.astype(np.float32)
    ax = tuple(raxes)
    with np.errstate(all="ignore"):
        if kind == S.R_SUM:
            r = np.sum(x, axis=ax)
        elif kind == S.R_MEAN:
            r = np.sum(x, axis=ax) / _count(cshape, raxes)
        elif kind == S.R_PROD:
            r = np.prod(x, axis=ax)
        elif kind == S.R_MAX:
            r = np.max(x, axis=ax)
        elif kind == S.R_MIN:
            r = np.min(x, axis=ax)
        elif kind == S.R_NANSUM:
            r = np.nansum(x, axis=ax)
        elif kind == S.R_NANPROD:
            r = np.nanprod(x, axis=ax)
        elif kind == S.R_SUMSQ:
            r = np.sum(np.square(x), axis=ax)
        elif kind == S.R_NORM1:
            r = np.sum(np.abs(x), axis=ax)
        elif kind == S.R_NORM2:
            r = np.sqrt(np.sum(np.square(x), axis=ax))
        elif kind == S.R_NONFINITE:
            r = np.sum(~np.isfinite(x), axis=ax, dtype=np.float64)
        else:
            raise ValueError("unknown reduction kind %r" % (kind,))
    _store(dst, np.asarray(r), req)


# ---------------------------------------------------------------------------------------------
# backward: one fused loop (broadcast the head gradient, multiply by d out / d x)
# ---------------------------------------------------------------------------------------------
def _reduce_grad_impl(gin, gout, x, y, head, hstrides, last, lstride, kind, count, add):
    # rows of the last collapsed dim: one strided offset per row, then a contiguous inner loop
    # (the request is branched on outside it, so the inner loop stays simple)
    for r in prange(gin.size // last):
        base = strided_offset(r, head, hstrides)
        i0 = r * last
        if add:
            for t in range(last):
                o = base + t * lstride
                gin[i0 + t] += gout[o] * S.reduce_grad(kind, x[i0 + t], y[o], count)
        else:
            for t in range(last):
                o = base + t * lstride
                gin[i0 + t] = gout[o] * S.reduce_grad(kind, x[i0 + t], y[o], count)


_reduce_grad = ParallelLoop(_reduce_grad_impl, cost=_COST, error_model="numpy")


def reduce_axes_backward(gin, gout, data, out, cshape, raxes, kind, req):
    """gin (req) gout broadcast over the reduced axes times d out / d data (per element)."""
    if req == "null" or gin.size == 0:
        return
    if kind in (S.R_SUM, S.R_MEAN):
        # a plain broadcast: numpy's vectorised multiply beats any loop here
        scale = 1.0 if kind == S.R_SUM else 1.0 / _count(cshape, raxes)
        kept = tuple(1 if d in raxes else n for d, n in enumerate(cshape))
        g = np.asarray(gout).reshape(kept) * scale
        if not gin.flags.c_contiguous:
            return _store(gin, np.broadcast_to(g, tuple(cshape)), req)
        assign(gin.reshape(tuple(cshape)), g, req)
        return
    back = gin.dtype == np.float16 or not gin.flags.c_contiguous
    acc = np.ascontiguousarray(gin, dtype=np.float32 if gin.dtype == np.float16 else
                               gin.dtype).reshape(-1) if back else gin.reshape(-1)
    g, x, y = _math(gout), _math(data), _math(out)
    fn = _reduce_grad.pick(gin.size)
    ost = np.array(output_strides(cshape, raxes), dtype=np.int64)
    fn(acc, g, x, y, np.array(cshape[:-1], dtype=np.int64), ost[:-1], int(cshape[-1]),
       int(ost[-1]), kind, float(_count(cshape, raxes)), req == "add")
    if back:
        np.copyto(gin, acc.reshape(gin.shape), casting="unsafe")


# ---------------------------------------------------------------------------------------------
# argmax / argmin
# ---------------------------------------------------------------------------------------------
def arg_reduce(out, data, outer, n, inner, is_max):
    """out[o, t] = the first position of the max (min) along n of data viewed (outer, n, inner);
    a NaN counts as the extreme (numpy's and MXNet's rule)."""
    x = np.ascontiguousarray(data).reshape(outer, n, inner)
    pos = np.argmax(x, axis=1) if is_max else np.argmin(x, axis=1)
    np.copyto(out, pos.reshape(out.shape), casting="unsafe")


# ---------------------------------------------------------------------------------------------
# matrix products
# ---------------------------------------------------------------------------------------------
def matmul_batched(c, a, b, transpose_a, transpose_b, req="write"):
    """c[i] (req) op(a[i]) @ op(b[i]) for 3-d arrays (batch first); op transposes when asked.

    On lightmod's threads (kernels/cpu/gemm.py) where it can: one matrix cut into parts, or
    a batch a matrix a part. Otherwise BLAS through numpy, transposed operands passed as
    transposed views, not copies.
    """
    if req == "null":
        return
    if c.shape[0] == 1:
        if gemm.product(a[0], b[0], c[0], transpose_a, transpose_b, req == "add"):
            return
    elif gemm.product_batched(a, b, c, transpose_a, transpose_b, req == "add"):
        return
    A = a.transpose(0, 2, 1) if transpose_a else a
    B = b.transpose(0, 2, 1) if transpose_b else b
    if c.shape[0] == 1:          # one matrix: the plain 2-d BLAS call
        A, B, C = A[0], B[0], c[0]
    else:
        C = c
    if req == "add":
        C += np.matmul(A, B)
    else:
        np.matmul(A, B, out=C)
