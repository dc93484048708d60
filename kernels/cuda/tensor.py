"""CUDA kernels of the tensor family: strided copies, take / pick / one_hot / where, sorting.

Same functions and arguments as ``kernels/cpu/tensor.py``; every kernel is a grid-stride loop
over one flat array. The index rule is ``kernels/scalar_tensor.py``'s ``resolve_index``, which
the CPU loops call too; strided offsets are ``kernels/scalar.py``'s; fills, request-aware copies
and launch sizes come from ``memory.py``. take's gradient accumulates with atomics (repeated
indices collide); pick's never collides. Sorting ranks every element in parallel by counting
the elements that come before it (O(n) each: fine for rows of up to a few thousand).
"""
import numpy as np
from numba import cuda

from ..cpu.tensor import where_gradients_wanted
from ..scalar import store, strided_offset
from ..scalar_lookup import picked_offset
from ..scalar_tensor import histogram_bin, resolve_index, row_put_offsets
from .memory import assign, fill, flat
from .memory import launch_config as launch

__all__ = ["strided_gather", "strided_scatter", "indices_in_range", "take_forward",
           "put_rows", "zero_rows",
           "take_backward", "pick_forward", "pick_backward", "pick_assign", "one_hot_forward",
           "where_forward", "where_backward", "axis_ranks", "rank_select", "rank_mask",
           "rank_select_backward", "range_fill", "nd_indices_in_range", "gather_nd",
           "scatter_nd", "ravel_index", "unravel_index", "histogram_count"]


# ---------------------------------------------------------------------------------------------
# gradient buffers
# ---------------------------------------------------------------------------------------------
def _accumulator(grad, req):
    """(flat buffer atomics can add into, whether to copy it back into grad afterwards):
    grad itself when it is float32/float64, else a float32 copy."""
    if grad.dtype in (np.float32, np.float64):
        buf = flat(grad)
        if req == "write":
            fill(buf, 0)
        return buf, False
    buf = cuda.device_array(grad.size, dtype=np.float32)
    if req == "write":
        fill(buf, 0)
    else:
        assign(buf, flat(grad), "write")
    return buf, True


# ---------------------------------------------------------------------------------------------
# strided copies
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _gather_kernel(dst, src, offset, shape, strides, add):
    for i in range(cuda.grid(1), dst.size, cuda.gridsize(1)):
        v = src[offset + strided_offset(i, shape, strides)]
        store(dst, i, v, add)


@cuda.jit
def _scatter_kernel(dst, src, offset, shape, strides, add):
    for i in range(cuda.grid(1), src.size, cuda.gridsize(1)):
        j = offset + strided_offset(i, shape, strides)
        store(dst, j, src[i], add)


def _tuples(shape, strides):
    shape = tuple(int(d) for d in shape) or (1,)
    strides = tuple(int(s) for s in strides) or (0,)
    return shape, strides


def strided_gather(dst, src, offset, shape, strides, req="write"):
    """dst (req) the view of src (element offset, shape, element strides); see the CPU half."""
    if req == "null" or dst.size == 0:
        return
    shape, strides = _tuples(shape, strides)
    _gather_kernel[launch(dst.size)](flat(dst), flat(src), int(offset), shape, strides,
                                     req == "add")


def strided_scatter(dst, src, offset, shape, strides, req="write"):
    """The view of dst (offset, shape, strides) (req) src; the view must not overlap itself."""
    if req == "null" or src.size == 0:
        return
    shape, strides = _tuples(shape, strides)
    _scatter_kernel[launch(src.size)](flat(dst), flat(src), int(offset), shape, strides,
                                      req == "add")


# ---------------------------------------------------------------------------------------------
# take
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _bad_index_kernel(idx, n, flag):
    for i in range(cuda.grid(1), idx.size, cuda.gridsize(1)):
        j = int(idx[i])
        if j < 0 or j >= n:
            flag[0] = 1


def indices_in_range(idx, n):
    """True when every index (truncated toward zero) lies in [0, n)."""
    if idx.size == 0:
        return True
    flag = cuda.to_device(np.zeros(1, dtype=np.int32))
    _bad_index_kernel[launch(idx.size)](flat(idx), n, flag)
    return int(flag.copy_to_host()[0]) == 0


@cuda.jit
def _take_kernel(out, data, idx, n, inner, wrap):
    m = idx.size
    for r in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        q = r // inner
        t = r - q * inner
        o = q // m
        j = q - o * m
        out[r] = data[(o * n + resolve_index(idx[j], n, wrap)) * inner + t]


@cuda.jit
def _take_grad_kernel(grad, gout, idx, n, inner, wrap):
    m = idx.size
    for r in range(cuda.grid(1), gout.size, cuda.gridsize(1)):
        q = r // inner
        t = r - q * inner
        o = q // m
        j = q - o * m
        cuda.atomic.add(grad, (o * n + resolve_index(idx[j], n, wrap)) * inner + t, gout[r])


def _gather(kernel, out, data, idx, n, inner, wrap):
    """out = data gathered by idx with take's or pick's ``kernel``."""
    if out.size:
        kernel[launch(out.size)](flat(out), flat(data), flat(idx), n, inner, bool(wrap))


def _gather_backward(kernel, grad, gout, idx, n, inner, wrap, req):
    """grad (req) gout added back to the positions the gather read, by its gradient
    ``kernel``."""
    if req == "null":
        return
    buf, back = _accumulator(grad, req)
    if gout.size:
        kernel[launch(gout.size)](buf, flat(gout), flat(idx), n, inner, bool(wrap))
    if back:
        assign(flat(grad), buf, "write")


def take_forward(out, data, idx, outer, n, inner, wrap):
    """out[o, j, t] = data[o, index(idx[j]), t] over data viewed as (outer, n, inner)."""
    _gather(_take_kernel, out, data, idx, n, inner, wrap)


def take_backward(grad, gout, idx, outer, n, inner, wrap, req):
    """grad (req) the scatter-add of gout back to the rows take read (atomics on repeats)."""
    _gather_backward(_take_grad_kernel, grad, gout, idx, n, inner, wrap, req)


# ---------------------------------------------------------------------------------------------
# put_rows / zero_rows (index_copy)
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _put_rows_kernel(out, values, idx, n, inner, from_values):
    # a thread per column, rows in index order: a repeated index keeps its last row
    for t in range(cuda.grid(1), inner, cuda.gridsize(1)):
        for j in range(idx.size):
            dst, src = row_put_offsets(idx[j], j, t, n, inner)
            if from_values:
                out[dst] = values[src]
            else:
                out[dst] = 0


def put_rows(out, values, idx, n, inner):
    """out[index(idx[j]), t] = values[j, t] over out viewed as (n, inner) (a repeated index:
    the last one's row)."""
    if out.size and idx.size:
        _put_rows_kernel[launch(inner)](flat(out), flat(values), flat(idx), n, inner, True)


def zero_rows(out, idx, n, inner):
    """out[index(idx[j]), :] = 0 over out viewed as (n, inner)."""
    if out.size and idx.size:
        _put_rows_kernel[launch(inner)](flat(out), flat(out), flat(idx), n, inner, False)


# ---------------------------------------------------------------------------------------------
# pick
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _pick_kernel(out, data, idx, n, inner, wrap):
    for r in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[r] = data[picked_offset(r, idx[r], n, inner, wrap)]


@cuda.jit
def _pick_grad_kernel(grad, gout, idx, n, inner, wrap):
    for r in range(cuda.grid(1), gout.size, cuda.gridsize(1)):
        grad[picked_offset(r, idx[r], n, inner, wrap)] += gout[r]


def pick_forward(out, data, idx, outer, n, inner, wrap):
    """out[o, t] = data[o, index(idx[o, t]), t] over data viewed as (outer, n, inner)."""
    _gather(_pick_kernel, out, data, idx, n, inner, wrap)


def pick_backward(grad, gout, idx, outer, n, inner, wrap, req):
    """grad (req) gout placed at the picked positions (zeros elsewhere for 'write')."""
    _gather_backward(_pick_grad_kernel, grad, gout, idx, n, inner, wrap, req)


@cuda.jit
def _pick_assign_kernel(out, values, idx, n, inner, wrap):
    for r in range(cuda.grid(1), values.size, cuda.gridsize(1)):
        out[picked_offset(r, idx[r], n, inner, wrap)] = values[r]


def pick_assign(out, values, idx, outer, n, inner, wrap):
    """out[o, index(idx[o, t]), t] = values[o, t]; the other elements are left as they are."""
    if values.size == 0:
        return
    _pick_assign_kernel[launch(values.size)](flat(out), flat(values), flat(idx), n, inner,
                                             bool(wrap))


# ---------------------------------------------------------------------------------------------
# one_hot
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _one_hot_kernel(out, idx, depth, on, off):
    for r in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        i = r // depth
        d = r - i * depth
        out[r] = on if int(idx[i]) == d else off


def one_hot_forward(out, idx, depth, on_value, off_value):
    """out[i, :] = off_value except on_value at int(idx[i]) when that lies in [0, depth)."""
    if out.size == 0:
        return
    _one_hot_kernel[launch(out.size)](flat(out), flat(idx), depth, float(on_value),
                                      float(off_value))


# ---------------------------------------------------------------------------------------------
# where
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _where_kernel(out, cond, x, y, inner):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        if cond[i // inner] != 0:
            out[i] = x[i]
        else:
            out[i] = y[i]


@cuda.jit
def _where_grad_kernel(gx, gy, cond, g, inner, want_x, add_x, want_y, add_y):
    for i in range(cuda.grid(1), g.size, cuda.gridsize(1)):
        take_x = cond[i // inner] != 0
        gi = g[i]
        if want_x:
            v = gi if take_x else gi * 0
            store(gx, i, v, add_x)
        if want_y:
            v = gi * 0 if take_x else gi
            store(gy, i, v, add_y)


def where_forward(out, cond, x, y, inner):
    """out = x where cond != 0 else y; cond has one entry per ``inner`` elements."""
    if out.size == 0:
        return
    _where_kernel[launch(out.size)](flat(out), flat(cond), flat(x), flat(y), inner)


def where_backward(gx, gy, cond, gout, inner, req_x, req_y):
    """gx (req_x) gout where cond else 0; gy (req_y) the rest. None/'null' grads are skipped."""
    want_x, want_y = where_gradients_wanted(gx, gy, gout, req_x, req_y)
    if not (want_x or want_y):
        return
    g = flat(gout)
    fx = flat(gx) if want_x else g
    fy = flat(gy) if want_y else g
    _where_grad_kernel[launch(gout.size)](fx, fy, flat(cond), g, inner, want_x,
                                          req_x == "add", want_y, req_y == "add")


# ---------------------------------------------------------------------------------------------
# sorting: the (stable) rank of every element along its axis, then selections by rank
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _rank_kernel(ranks, data, n, inner, ascend):
    # rank = how many elements of the line come before this one in a stable sort: O(n) per
    # element, every element in parallel
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        q = i // inner
        o = q // n
        j = q - o * n
        t = i - q * inner
        base = o * n * inner + t
        v = data[i]
        r = 0
        for jj in range(n):
            w = data[base + jj * inner]
            if ascend:
                before = w < v
            else:
                before = w > v
            if before or (w == v and jj < j):
                r += 1
        ranks[i] = r


@cuda.jit
def _rank_select_kernel(values, indices, data, ranks, n, inner, k, want_values, want_indices):
    for i in range(cuda.grid(1), ranks.size, cuda.gridsize(1)):
        r = ranks[i]
        if r < k:
            q = i // inner
            o = q // n
            dst = (o * k + r) * inner + (i - q * inner)
            if want_values:
                values[dst] = data[i]
            if want_indices:
                indices[dst] = q - o * n


@cuda.jit
def _rank_mask_kernel(mask, ranks, k):
    for i in range(cuda.grid(1), ranks.size, cuda.gridsize(1)):
        mask[i] = 1 if ranks[i] < k else 0


@cuda.jit
def _rank_grad_kernel(grad, gout, ranks, n, inner, k, add):
    for i in range(cuda.grid(1), ranks.size, cuda.gridsize(1)):
        r = ranks[i]
        v = gout[0] * 0
        if r < k:
            q = i // inner
            v = gout[((q // n) * k + r) * inner + (i - q * inner)]
        store(grad, i, v, add)


def axis_ranks(ranks, data, outer, n, inner, ascend):
    """ranks[o, j, t] = the position of data[o, j, t] in its (outer, :, inner) line sorted
    stably (equal values keep their order, in both directions, as in MXNet)."""
    if data.size:
        _rank_kernel[launch(data.size)](flat(ranks), flat(data), n, inner, bool(ascend))


def rank_select(values, indices, data, ranks, outer, n, inner, k):
    """values[o, r, t] / indices[o, r, t] = the element of rank r < k (and its position) of
    each line of data viewed (outer, n, inner); either output may be None."""
    if ranks.size == 0 or (values is None and indices is None):
        return
    src = flat(data)
    _rank_select_kernel[launch(ranks.size)](
        flat(values) if values is not None else src,
        flat(indices) if indices is not None else src, src, flat(ranks), n, inner, k,
        values is not None, indices is not None)


def rank_mask(mask, ranks, k):
    """mask = 1 where the rank is below k, else 0."""
    if ranks.size:
        _rank_mask_kernel[launch(ranks.size)](flat(mask), flat(ranks), k)


def rank_select_backward(grad, gout, ranks, outer, n, inner, k, req):
    """grad (req) the gradient of the selected values sent back to their positions."""
    if req == "null" or grad.size == 0:
        return
    _rank_grad_kernel[launch(grad.size)](flat(grad), flat(gout), flat(ranks), n, inner, k,
                                         req == "add")


# ---------------------------------------------------------------------------------------------
# arithmetic progressions (arange, linspace)
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _range_fill_kernel(out, start, step, repeat):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = start + (i // repeat) * step


def range_fill(out, start, step, repeat):
    """out[i] = start + (i // repeat) * step, computed in float64 and rounded into out."""
    if out.size == 0:
        return
    _range_fill_kernel[launch(out.size)](flat(out), float(start), float(step), int(repeat))


# ---------------------------------------------------------------------------------------------
# gather_nd, scatter_nd: indices (m, count) address the first m axes of a (.., inner) array
# ---------------------------------------------------------------------------------------------
@cuda.jit(device=True)
def _nd_offset(idx, y, count, dims, strides):
    off = 0
    for m in range(len(dims)):
        j = int(idx[m * count + y])
        if j < 0:
            j += dims[m]
        off += j * strides[m]
    return off


@cuda.jit
def _nd_bad_index_kernel(idx, dims, count, flag):
    for i in range(cuda.grid(1), idx.size, cuda.gridsize(1)):
        n = dims[i // count]
        j = int(idx[i])
        if j < -n or j >= n:
            flag[0] = 1


@cuda.jit
def _gather_nd_kernel(out, data, idx, dims, strides, inner):
    count = out.size // inner
    for r in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        y = r // inner
        out[r] = data[_nd_offset(idx, y, count, dims, strides) + r - y * inner]


@cuda.jit
def _scatter_nd_kernel(out, src, idx, dims, strides, inner):
    count = src.size // inner
    for r in range(cuda.grid(1), src.size, cuda.gridsize(1)):
        y = r // inner
        out[_nd_offset(idx, y, count, dims, strides) + r - y * inner] = src[r]


@cuda.jit
def _scatter_nd_add_kernel(out, src, idx, dims, strides, inner):
    # repeated indices collide: atomics (out is a float32/float64 accumulator)
    count = src.size // inner
    for r in range(cuda.grid(1), src.size, cuda.gridsize(1)):
        y = r // inner
        cuda.atomic.add(out, _nd_offset(idx, y, count, dims, strides) + r - y * inner, src[r])


def _int_tuple(values):
    return tuple(int(v) for v in values)


def nd_indices_in_range(idx, dims):
    """True when every row m of idx (m, count) lies in [-dims[m], dims[m])."""
    if idx.size == 0:
        return True
    flag = cuda.to_device(np.zeros(1, dtype=np.int32))
    _nd_bad_index_kernel[launch(idx.size)](flat(idx), _int_tuple(dims), idx.size // len(dims),
                                           flag)
    return int(flag.copy_to_host()[0]) == 0


def gather_nd(out, data, idx, dims, strides, inner):
    """out[y, t] = data[sum_m index(idx[m, y]) * strides[m] + t] (negative indices wrap once)."""
    if out.size == 0:
        return
    _gather_nd_kernel[launch(out.size)](flat(out), flat(data), flat(idx), _int_tuple(dims),
                                        _int_tuple(strides), int(inner))


def scatter_nd(out, src, idx, dims, strides, inner, req="write"):
    """out[...] (req) src scattered by idx; 'add' accumulates repeated indices (atomics)."""
    if req == "null" or src.size == 0:
        return
    if req == "add":
        buf, back = _accumulator(out, "add")
        _scatter_nd_add_kernel[launch(src.size)](buf, flat(src), flat(idx), _int_tuple(dims),
                                                 _int_tuple(strides), int(inner))
        if back:
            assign(flat(out), buf, "write")
        return
    _scatter_nd_kernel[launch(src.size)](flat(out), flat(src), flat(idx), _int_tuple(dims),
                                         _int_tuple(strides), int(inner))


# ---------------------------------------------------------------------------------------------
# ravel_multi_index, unravel_index
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _ravel_kernel(out, coords, strides):
    count = out.size
    for n in range(cuda.grid(1), count, cuda.gridsize(1)):
        flat_index = 0
        for m in range(len(strides)):
            flat_index += int(coords[m * count + n]) * strides[m]
        out[n] = flat_index


@cuda.jit
def _unravel_kernel(out, flat_index, dims, strides):
    count = flat_index.size
    for n in range(cuda.grid(1), count, cuda.gridsize(1)):
        x = int(flat_index[n])
        for m in range(len(strides)):
            q = x // strides[m]
            out[m * count + n] = q % dims[m] if dims[m] > 0 else q


def ravel_index(out, coords, strides):
    """out[n] = sum_m int(coords[m, n]) * strides[m]."""
    if out.size == 0:
        return
    _ravel_kernel[launch(out.size)](flat(out), flat(coords), _int_tuple(strides))


def unravel_index(out, flat_index, dims, strides):
    """out[m, n] = (int(flat_index[n]) // strides[m]) % dims[m] (no modulo where dims[m] is
    not positive)."""
    if out.size == 0:
        return
    _unravel_kernel[launch(flat_index.size)](flat(out), flat(flat_index), _int_tuple(dims),
                                             _int_tuple(strides))


# ---------------------------------------------------------------------------------------------
# histogram
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _histogram_kernel(counts, data, edges, uniform, lo, hi):
    nbins = counts.size
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        b = histogram_bin(data[i], edges, nbins, uniform, lo, hi)
        if b >= 0:
            cuda.atomic.add(counts, b, 1)


def histogram_count(counts, data, edges, lo, hi):
    """counts[b] = how many elements of data fall in bin b (see the CPU half)."""
    acc = cuda.to_device(np.zeros(counts.size, dtype=np.int64))
    if data.size:
        uniform = edges is None
        _histogram_kernel[launch(data.size)](acc, flat(data), flat(data if uniform else edges),
                                             uniform, float(lo), float(hi))
    assign(flat(counts), acc, "write")
