"""CUDA kernels of the reduction family: axis reductions (shared-memory tree reductions), their
fused gradients, arg-reductions, and batched matrix products.

Same functions and arguments as ``kernels/cpu/reduce.py``. A reduction over the collapsed
``cshape``/``raxes`` becomes "kept" and "reduced" index spaces with input strides each; short
reductions run one thread per output, long ones one block per output folding a shared-memory
tree. What each element contributes and how values combine (``reduce_map``,
``reduce_combine``, ``reduce_finish``) and the per-element gradients (``reduce_grad``) are the
``@njit`` functions of ``kernels/scalar_tensor.py``, shared with the CPU half. Accumulators are
float64. Matrix products reuse the tiled shared-memory GEMM of ``nn.py`` (FullyConnected's),
one launch per matrix of the batch.
"""
from numba import cuda, float64

from .. import scalar_tensor as S
from ..cpu.reduce import output_strides
from ..cuda_support import simulator_enabled
from ..scalar import strided_offset
from ..scalar_tensor import reduce_combine, reduce_finish, reduce_grad, reduce_identity, reduce_map
from .memory import flat
from .memory import launch_config as launch
from .nn import _gemm

__all__ = ["reduce_axes", "reduce_axes_backward", "arg_reduce", "matmul_batched"]

# threads of a tree-reduction block (a power of two; the simulator runs each thread as a Python
# thread, so its blocks stay small)
TREE = 32 if simulator_enabled() else 128
TREE_MIN = 2 * TREE     # reductions at least this long use one block per output


def _split(cshape, raxes):
    """Kept and reduced index spaces: (kshape, kstrides, rshape, rstrides) over the input."""
    st, acc = [0] * len(cshape), 1
    for d in range(len(cshape) - 1, -1, -1):
        st[d] = acc
        acc *= cshape[d]
    kshape = tuple(int(cshape[d]) for d in range(len(cshape)) if d not in raxes)
    kstrides = tuple(st[d] for d in range(len(cshape)) if d not in raxes)
    rshape = tuple(int(cshape[d]) for d in raxes)
    rstrides = tuple(st[d] for d in raxes)
    return kshape or (1,), kstrides or (0,), rshape or (1,), rstrides or (0,)


# ---------------------------------------------------------------------------------------------
# forward
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _reduce_thread_kernel(dst, src, kshape, kstrides, rshape, rstrides, nred, kind, add):
    # one thread per output element: for short reductions
    for o in range(cuda.grid(1), dst.size, cuda.gridsize(1)):
        base = strided_offset(o, kshape, kstrides)
        acc = reduce_identity(kind)
        for j in range(nred):
            acc = reduce_combine(kind, acc,
                                 reduce_map(kind, src[base + strided_offset(j, rshape, rstrides)]))
        v = reduce_finish(kind, acc, nred)
        if add:
            dst[o] += v
        else:
            dst[o] = v


@cuda.jit
def _reduce_tree_kernel(dst, src, kshape, kstrides, rshape, rstrides, nred, kind, add):
    # one block per output element: threads stride over the reduced elements, then fold a
    # shared-memory tree of TREE partial results
    buf = cuda.shared.array(TREE, float64)
    tid = cuda.threadIdx.x
    for o in range(cuda.blockIdx.x, dst.size, cuda.gridDim.x):
        base = strided_offset(o, kshape, kstrides)
        acc = reduce_identity(kind)
        for j in range(tid, nred, TREE):
            acc = reduce_combine(kind, acc,
                                 reduce_map(kind, src[base + strided_offset(j, rshape, rstrides)]))
        buf[tid] = acc
        cuda.syncthreads()
        step = TREE // 2
        while step > 0:
            if tid < step:
                buf[tid] = reduce_combine(kind, buf[tid], buf[tid + step])
            cuda.syncthreads()
            step //= 2
        if tid == 0:
            v = reduce_finish(kind, buf[0], nred)
            if add:
                dst[o] += v
            else:
                dst[o] = v
        cuda.syncthreads()


def reduce_axes(dst, src, cshape, raxes, kind, req="write"):
    """dst (req) the reduction ``kind`` (scalar_tensor.R_*) of src over axes raxes of cshape."""
    if req == "null" or dst.size == 0:
        return
    kshape, kstrides, rshape, rstrides = _split(cshape, tuple(raxes))
    nred = 1
    for d in rshape:
        nred *= d
    args = (flat(dst), flat(src), kshape, kstrides, rshape, rstrides, nred, int(kind),
            req == "add")
    if nred >= TREE_MIN:
        _reduce_tree_kernel[min(dst.size, 65535), TREE](*args)
    else:
        _reduce_thread_kernel[launch(dst.size)](*args)


# ---------------------------------------------------------------------------------------------
# backward
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _reduce_grad_kernel(gin, gout, x, y, shape, bstrides, kind, count, add):
    for i in range(cuda.grid(1), gin.size, cuda.gridsize(1)):
        o = strided_offset(i, shape, bstrides)
        v = gout[o] * reduce_grad(kind, x[i], y[o], count)
        if add:
            gin[i] += v
        else:
            gin[i] = v


_NEEDS_VALUES = (S.R_MAX, S.R_MIN, S.R_PROD, S.R_NANSUM, S.R_NANPROD, S.R_SUMSQ, S.R_NORM1,
                 S.R_NORM2)


def reduce_axes_backward(gin, gout, data, out, cshape, raxes, kind, req):
    """gin (req) gout broadcast over the reduced axes times d out / d data (per element)."""
    if req == "null" or gin.size == 0:
        return
    fin, fg = flat(gin), flat(gout)
    if kind in _NEEDS_VALUES:
        x, y = flat(data), flat(out)
    else:
        x, y = fin, fg          # not read by the gradient rule; any arrays of the right sizes
    count = 1
    for a in raxes:
        count *= cshape[a]
    _reduce_grad_kernel[launch(gin.size)](fin, fg, x, y, tuple(int(d) for d in cshape),
                                          output_strides(cshape, tuple(raxes)), int(kind),
                                          float(count), req == "add")


# ---------------------------------------------------------------------------------------------
# argmax / argmin
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _arg_kernel(out, data, n, inner, is_max):
    for r in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        o = r // inner
        base = o * n * inner + (r - o * inner)
        best = data[base]
        pos = 0
        if best == best:                  # a NaN is the extreme: the first one wins
            for j in range(1, n):
                v = data[base + j * inner]
                if v != v:
                    pos = j
                    break
                if (is_max and v > best) or (not is_max and v < best):
                    best = v
                    pos = j
        out[r] = pos


def arg_reduce(out, data, outer, n, inner, is_max):
    """out[o, t] = the first position of the max (min) along n of data viewed (outer, n, inner);
    a NaN counts as the extreme (numpy's and MXNet's rule)."""
    if out.size == 0:
        return
    _arg_kernel[launch(out.size)](flat(out), flat(data), n, inner, bool(is_max))


# ---------------------------------------------------------------------------------------------
# matrix products
# ---------------------------------------------------------------------------------------------
def matmul_batched(c, a, b, transpose_a, transpose_b, req="write"):
    """c[i] (req) op(a[i]) @ op(b[i]) for 3-d arrays (batch first); op transposes when asked."""
    if req == "null" or c.size == 0:
        return
    for i in range(c.shape[0]):
        _gemm(a[i], b[i], c[i], bool(transpose_a), bool(transpose_b), req == "add")
