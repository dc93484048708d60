"""CPU kernels of the tensor family: strided copies, take / pick / one_hot / where, sorting.

Shape manipulations (transpose, slice, concat, split, tile, broadcast ...) are described by the
operators as one strided view (offset, shape, element strides) of a flat array; here a view is
made with numpy's ``as_strided`` and copied by numpy's C loops. Gathers with index rules
(clip / wrap, shared with the CUDA half through ``kernels/scalar_tensor.py``) and their
scatter-add gradients are numba loops.
"""
import numba
import numpy as np
from numba import njit, prange
from numpy.lib.stride_tricks import as_strided

from .. import cache_stamp  # noqa: F401  (stamps the cache entries made below)
from ..scalar_lookup import picked_offset
from ..scalar_tensor import histogram_bin, resolve_index, row_put_offsets
from .elemwise import assign, store
from .jit import ParallelLoop

__all__ = ["strided_gather", "strided_scatter", "indices_in_range", "take_forward",
           "take_backward", "put_rows", "zero_rows", "pick_forward", "pick_backward",
           "pick_assign", "one_hot_forward",
           "where_forward", "where_backward", "axis_ranks", "rank_select", "rank_mask",
           "rank_select_backward", "range_fill", "nd_indices_in_range", "gather_nd",
           "scatter_nd", "ravel_index", "unravel_index", "histogram_count"]

# gathers and scatters cost about four element-wise adds per element (index arithmetic and
# scattered reads)
_COST = 4.0


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _flat(x):
    """x as a flat C-order array (a view when x is C-contiguous, else a copy: for reading)."""
    return np.ascontiguousarray(x).reshape(-1)


def _view(flat, offset, shape, strides):
    item = flat.itemsize
    return as_strided(flat[offset:], shape=tuple(shape),
                      strides=tuple(int(s) * item for s in strides))


def _bits(x):
    """A view numba can move around: float16 (unsupported by numba on the CPU) as uint16."""
    return x.view(np.uint16) if x.dtype == np.float16 else x


def _math(x):
    """A flat array numba can compute with: float16 goes through float32."""
    x = _flat(x)
    return x.astype(np.float32) if x.dtype == np.float16 else x


def _out(dst, math=False):
    """(flat C-order buffer to write into, whether to copy it back into dst afterwards).

    dst itself when it is C-contiguous (every buffer lightmod allocates is); a copy otherwise,
    or a float32 copy of float16 data when the kernel computes (``math``)."""
    if dst.flags.c_contiguous and not (math and dst.dtype == np.float16):
        return dst.reshape(-1), False
    dtype = np.float32 if (math and dst.dtype == np.float16) else dst.dtype
    return np.ascontiguousarray(dst, dtype=dtype).reshape(-1), True


def _finish(dst, buf, back):
    if back:
        np.copyto(dst, buf.reshape(dst.shape), casting="unsafe")


def _write(loop, out, *args, math=False):
    """Run the ParallelLoop ``loop`` (sized by out) as ``loop(out's flat buffer, *args)``: loops
    that only move elements get the buffer's raw bits, ``math`` loops compute into it (float16
    through float32)."""
    if out.size == 0:
        return
    buf, back = _out(out, math=math)
    loop.pick(out.size)(buf if math else _bits(buf), *args)
    _finish(out, buf, back)


def _accumulator(grad, req):
    """(flat buffer a scatter-add gradient adds into, zeroed for 'write'; whether to copy it
    back into grad afterwards)."""
    acc, back = _out(grad, math=True)
    if req == "write":
        acc[:] = 0
    return acc, back


# ---------------------------------------------------------------------------------------------
# strided copies
# ---------------------------------------------------------------------------------------------
def strided_gather(dst, src, offset, shape, strides, req="write"):
    """dst (req) the view of src starting at element ``offset`` with ``shape``/``strides``.

    dst is C-contiguous with prod(shape) elements; strides are in elements (0 broadcasts,
    negative walks backwards).
    """
    if req == "null" or dst.size == 0:
        return
    view = _view(_flat(src), offset, shape, strides)
    buf, back = _out(dst)
    assign(buf.reshape(tuple(shape)), view, req)
    _finish(dst, buf, back)


def strided_scatter(dst, src, offset, shape, strides, req="write"):
    """The view of dst (offset, shape, strides) (req) src; the view must not overlap itself."""
    if req == "null" or src.size == 0:
        return
    buf, back = _out(dst)
    assign(_view(buf, offset, shape, strides), src.reshape(tuple(shape)), req)
    _finish(dst, buf, back)


# ---------------------------------------------------------------------------------------------
# take
# ---------------------------------------------------------------------------------------------
def indices_in_range(idx, n):
    """True when every index (truncated toward zero) lies in [0, n)."""
    if idx.size == 0:
        return True
    t = np.trunc(idx.astype(np.float64)) if idx.dtype.kind == "f" else idx
    return bool(np.all((t >= 0) & (t < n)))


def _take_impl(out, data, idx, outer, n, inner, wrap):
    m = idx.size
    for r in prange(outer * m):
        o = r // m
        src = (o * n + resolve_index(idx[r - o * m], n, wrap)) * inner
        dst = r * inner
        for t in range(inner):
            out[dst + t] = data[src + t]


_take = ParallelLoop(_take_impl, cost=_COST)


def _take_grad_rows_impl(grad, gout, idx, outer, n, inner, wrap):
    # rows of different `o` never collide, so they can run in parallel
    m = idx.size
    for o in prange(outer):
        for j in range(m):
            dst = (o * n + resolve_index(idx[j], n, wrap)) * inner
            src = (o * m + j) * inner
            for t in range(inner):
                grad[dst + t] += gout[src + t]


def _take_grad_cols_impl(grad, gout, idx, n, inner, wrap, chunks):
    # outer == 1: split the columns into contiguous chunks instead (their sums are independent)
    m = idx.size
    for c in prange(chunks):
        t0 = c * inner // chunks
        t1 = (c + 1) * inner // chunks
        for j in range(m):
            dst = resolve_index(idx[j], n, wrap) * inner
            src = j * inner
            for t in range(t0, t1):
                grad[dst + t] += gout[src + t]


_take_grad_rows = ParallelLoop(_take_grad_rows_impl, cost=_COST)
_take_grad_cols_parallel = njit(cache=True, nogil=True, parallel=True)(_take_grad_cols_impl)


def take_forward(out, data, idx, outer, n, inner, wrap):
    """out[o, j, t] = data[o, index(idx[j]), t] over data viewed as (outer, n, inner)."""
    _write(_take, out, _bits(_flat(data)), _math(idx), outer, n, inner, bool(wrap))


def take_backward(grad, gout, idx, outer, n, inner, wrap, req):
    """grad (req) the scatter-add of gout back to the rows take read (repeats accumulate)."""
    if req == "null":
        return
    acc, back = _accumulator(grad, req)
    g, ix = _math(gout), _math(idx)
    if outer > 1 or not _take_grad_rows.runs_parallel(gout.size):
        _take_grad_rows(gout.size, acc, g, ix, outer, n, inner, bool(wrap))
    else:
        _take_grad_cols_parallel(acc, g, ix, n, inner, bool(wrap),
                                 max(1, min(inner // 8, numba.get_num_threads())))
    _finish(grad, acc, back)


# ---------------------------------------------------------------------------------------------
# put_rows / zero_rows (index_copy)
# ---------------------------------------------------------------------------------------------
def _put_rows_impl(out, values, idx, n, inner, from_values):
    # parallel over columns, rows in index order within each: a repeated index keeps its
    # last row whatever the thread count
    for t in prange(inner):
        for j in range(idx.size):
            dst, src = row_put_offsets(idx[j], j, t, n, inner)
            if from_values:
                out[dst] = values[src]
            else:
                out[dst] = 0


_put_rows = ParallelLoop(_put_rows_impl, cost=_COST)


def put_rows(out, values, idx, n, inner):
    """out[index(idx[j]), t] = values[j, t] over out viewed as (n, inner) (a repeated index:
    the last one's row)."""
    _write(_put_rows, out, _bits(_flat(values)), _math(idx), n, inner, True)


def zero_rows(out, idx, n, inner):
    """out[index(idx[j]), :] = 0 over out viewed as (n, inner)."""
    _write(_put_rows, out, _bits(_flat(out)), _math(idx), n, inner, False)


# ---------------------------------------------------------------------------------------------
# pick
# ---------------------------------------------------------------------------------------------
def _pick_impl(out, data, idx, n, inner, wrap):
    for r in prange(out.size):
        out[r] = data[picked_offset(r, idx[r], n, inner, wrap)]


def _pick_grad_impl(grad, gout, idx, n, inner, wrap):
    for r in prange(gout.size):
        grad[picked_offset(r, idx[r], n, inner, wrap)] += gout[r]


_pick = ParallelLoop(_pick_impl, cost=_COST)
_pick_grad = ParallelLoop(_pick_grad_impl, cost=_COST)


def pick_forward(out, data, idx, outer, n, inner, wrap):
    """out[o, t] = data[o, index(idx[o, t]), t] over data viewed as (outer, n, inner)."""
    _write(_pick, out, _bits(_flat(data)), _math(idx), n, inner, bool(wrap))


def pick_backward(grad, gout, idx, outer, n, inner, wrap, req):
    """grad (req) gout placed at the picked positions (zeros elsewhere for 'write')."""
    if req == "null":
        return
    acc, back = _accumulator(grad, req)
    _pick_grad.pick(gout.size)(acc, _math(gout), _math(idx), n, inner, bool(wrap))
    _finish(grad, acc, back)


def _pick_assign_impl(out, values, idx, n, inner, wrap):
    for r in prange(values.size):
        out[picked_offset(r, idx[r], n, inner, wrap)] = values[r]


_pick_assign = ParallelLoop(_pick_assign_impl, cost=_COST)


def pick_assign(out, values, idx, outer, n, inner, wrap):
    """out[o, index(idx[o, t]), t] = values[o, t] over out viewed as (outer, n, inner); the
    other elements of out are left as they are."""
    if values.size == 0:
        return
    fn = _pick_assign.pick(values.size)
    buf, back = _out(out, math=True)
    fn(buf, _math(values), _math(idx), n, inner, bool(wrap))
    _finish(out, buf, back)


# ---------------------------------------------------------------------------------------------
# one_hot
# ---------------------------------------------------------------------------------------------
def _one_hot_impl(out, idx, depth, on, off):
    for i in prange(idx.size):
        j = int(idx[i])
        base = i * depth
        for d in range(depth):
            out[base + d] = on if d == j else off


_one_hot = ParallelLoop(_one_hot_impl, cost=_COST)


def one_hot_forward(out, idx, depth, on_value, off_value):
    """out[i, :] = off_value except on_value at int(idx[i]) when that lies in [0, depth)."""
    if out.size == 0:
        return
    acc, back = _out(out, math=True)
    fn = _one_hot.pick(out.size)
    dt = acc.dtype.type
    fn(acc, _math(idx), depth, dt(on_value), dt(off_value))
    _finish(out, acc, back)


# ---------------------------------------------------------------------------------------------
# where
# ---------------------------------------------------------------------------------------------
def _where_impl(out, cond, x, y, inner):
    for i in prange(out.size):
        out[i] = x[i] if cond[i // inner] != 0 else y[i]


def _where_grad_impl(gx, gy, cond, g, inner, want_x, add_x, want_y, add_y):
    for i in prange(g.size):
        take_x = cond[i // inner] != 0
        if want_x:
            v = g[i] if take_x else 0.0
            store(gx, i, v, add_x)
        if want_y:
            v = 0.0 if take_x else g[i]
            store(gy, i, v, add_y)


_where = ParallelLoop(_where_impl, cost=_COST)
_where_grad = ParallelLoop(_where_grad_impl, cost=_COST)


def where_gradients_wanted(gx, gy, gout, req_x, req_y):
    """(want_x, want_y): which of where's input gradients are written (both False when gout
    is empty). Pure Python, shared with the CUDA half."""
    if gout.size == 0:
        return False, False
    return gx is not None and req_x != "null", gy is not None and req_y != "null"


def where_forward(out, cond, x, y, inner):
    """out = x where cond != 0 else y; cond has one entry per ``inner`` elements."""
    _write(_where, out, _math(cond), _bits(_flat(x)), _bits(_flat(y)), inner)


def where_backward(gx, gy, cond, gout, inner, req_x, req_y):
    """gx (req_x) gout where cond else 0; gy (req_y) the rest. None/'null' grads are skipped."""
    want_x, want_y = where_gradients_wanted(gx, gy, gout, req_x, req_y)
    if not (want_x or want_y):
        return
    g = _math(gout)
    ax, back_x = _out(gx, math=True) if want_x else (g, False)
    ay, back_y = _out(gy, math=True) if want_y else (g, False)
    fn = _where_grad.pick(gout.size)
    fn(ax, ay, _math(cond), g, inner, want_x, req_x == "add", want_y, req_y == "add")
    _finish(gx, ax, back_x)
    _finish(gy, ay, back_y)


# ---------------------------------------------------------------------------------------------
# sorting: the (stable) rank of every element along its axis, then selections by rank
# ---------------------------------------------------------------------------------------------
def axis_ranks(ranks, data, outer, n, inner, ascend):
    """ranks[o, j, t] = the position of data[o, j, t] in its (outer, :, inner) line sorted
    stably (equal values keep their order, in both directions, as in MXNet)."""
    x = np.ascontiguousarray(data).reshape(outer, n, inner)
    if ascend:
        order = np.argsort(x, axis=1, kind="stable")
    else:   # stable descending: the ascending sort of the reversed line, read backwards
        order = (n - 1) - np.argsort(x[:, ::-1], axis=1, kind="stable")[:, ::-1]
    out = np.empty((outer, n, inner), dtype=np.int64)
    np.put_along_axis(out, order, np.arange(n, dtype=np.int64).reshape(1, n, 1), axis=1)
    np.copyto(ranks, out.reshape(ranks.shape), casting="unsafe")


def _rank_select_impl(values, indices, data, ranks, n, inner, k, want_values, want_indices):
    for i in prange(ranks.size):
        r = ranks[i]
        if r < k:
            q = i // inner
            o = q // n
            t = i - q * inner
            dst = (o * k + r) * inner + t
            if want_values:
                values[dst] = data[i]
            if want_indices:
                indices[dst] = q - o * n


def _rank_grad_impl(grad, gout, ranks, n, inner, k, add):
    for i in prange(ranks.size):
        r = ranks[i]
        v = 0.0
        if r < k:
            q = i // inner
            v = gout[((q // n) * k + r) * inner + (i - q * inner)]
        store(grad, i, v, add)


_rank_select = ParallelLoop(_rank_select_impl, cost=_COST)
_rank_grad = ParallelLoop(_rank_grad_impl, cost=_COST)


def rank_select(values, indices, data, ranks, outer, n, inner, k):
    """values[o, r, t] / indices[o, r, t] = the element of rank r < k (and its position) of
    each line of data viewed (outer, n, inner); either output may be None."""
    if ranks.size == 0 or (values is None and indices is None):
        return
    vbuf, vback = _out(values) if values is not None else (None, False)
    ibuf, iback = _out(indices, math=True) if indices is not None else (None, False)
    src = _bits(_flat(data))
    fn = _rank_select.pick(ranks.size)
    fn(_bits(vbuf) if vbuf is not None else src, ibuf if ibuf is not None else src, src,
       _flat(ranks), n, inner, k, values is not None, indices is not None)
    if values is not None:
        _finish(values, vbuf, vback)
    if indices is not None:
        _finish(indices, ibuf, iback)


def rank_mask(mask, ranks, k):
    """mask = 1 where the rank is below k, else 0."""
    np.copyto(mask, (np.asarray(ranks) < k).reshape(mask.shape), casting="unsafe")


def rank_select_backward(grad, gout, ranks, outer, n, inner, k, req):
    """grad (req) the gradient of the selected values sent back to their positions."""
    if req == "null" or grad.size == 0:
        return
    acc, back = _out(grad, math=True)
    fn = _rank_grad.pick(grad.size)
    fn(acc, _math(gout), _flat(ranks), n, inner, k, req == "add")
    _finish(grad, acc, back)


# ---------------------------------------------------------------------------------------------
# arithmetic progressions (arange, linspace)
# ---------------------------------------------------------------------------------------------
def _range_fill_impl(out, start, step, repeat):
    for i in prange(out.size):
        out[i] = start + (i // repeat) * step


_range_fill = ParallelLoop(_range_fill_impl, cost=1.0)


def range_fill(out, start, step, repeat):
    """out[i] = start + (i // repeat) * step, computed in float64 and rounded into out."""
    _write(_range_fill, out, float(start), float(step), int(repeat), math=True)


# ---------------------------------------------------------------------------------------------
# gather_nd, scatter_nd: indices (m, count) address the first m axes of a (.., inner) array
# ---------------------------------------------------------------------------------------------
def _nd_offset_impl(idx, y, count, dims, strides):
    off = 0
    for m in range(dims.size):
        j = int(idx[m * count + y])
        if j < 0:
            j += dims[m]
        off += j * strides[m]
    return off


_nd_offset = njit(cache=True, nogil=True)(_nd_offset_impl)


def _gather_nd_impl(out, data, idx, dims, strides, inner):
    count = out.size // inner
    for y in prange(count):
        src = _nd_offset(idx, y, count, dims, strides)
        for t in range(inner):
            out[y * inner + t] = data[src + t]


def _scatter_nd_impl(out, src, idx, dims, strides, inner, add):
    # serial: repeated indices collide (their values add up, or the last one wins)
    count = src.size // inner
    for y in range(count):
        dst = _nd_offset(idx, y, count, dims, strides)
        for t in range(inner):
            store(out, dst + t, src[y * inner + t], add)


_gather_nd = ParallelLoop(_gather_nd_impl, cost=_COST)
_scatter_nd = njit(cache=True, nogil=True)(_scatter_nd_impl)


def nd_indices_in_range(idx, dims):
    """True when every row m of idx (m, count) lies in [-dims[m], dims[m])."""
    if idx.size == 0:
        return True
    t = np.trunc(np.asarray(idx, dtype=np.float64)).reshape(len(dims), -1)
    d = np.asarray(dims, dtype=np.float64).reshape(-1, 1)
    return bool(np.all((t >= -d) & (t < d)))


def gather_nd(out, data, idx, dims, strides, inner):
    """out[y, t] = data[sum_m index(idx[m, y]) * strides[m] + t] (negative indices wrap once)."""
    _write(_gather_nd, out, _bits(_flat(data)), _math(idx), np.asarray(dims, dtype=np.int64),
           np.asarray(strides, dtype=np.int64), int(inner))


def scatter_nd(out, src, idx, dims, strides, inner, req="write"):
    """out[sum_m index(idx[m, y]) * strides[m] + t] (req) src[y, t]; other elements of out are
    left as they are ('add' sums repeated indices)."""
    if req == "null" or src.size == 0:
        return
    add = req == "add"
    buf, back = _out(out, math=add)
    _scatter_nd(buf if add else _bits(buf), _math(src) if add else _bits(_flat(src)),
                _math(idx), np.asarray(dims, dtype=np.int64),
                np.asarray(strides, dtype=np.int64), int(inner), add)
    _finish(out, buf, back)


# ---------------------------------------------------------------------------------------------
# ravel_multi_index, unravel_index
# ---------------------------------------------------------------------------------------------
def _ravel_impl(out, coords, strides):
    count = out.size
    for n in prange(count):
        flat_index = 0
        for m in range(strides.size):
            flat_index += int(coords[m * count + n]) * strides[m]
        out[n] = flat_index


def _unravel_impl(out, flat_index, dims, strides):
    count = flat_index.size
    for n in prange(count):
        x = int(flat_index[n])
        for m in range(strides.size):
            q = x // strides[m]
            out[m * count + n] = q % dims[m] if dims[m] > 0 else q


_ravel = ParallelLoop(_ravel_impl, cost=_COST)
_unravel = ParallelLoop(_unravel_impl, cost=_COST)


def ravel_index(out, coords, strides):
    """out[n] = sum_m int(coords[m, n]) * strides[m]."""
    _write(_ravel, out, _math(coords), np.asarray(strides, dtype=np.int64), math=True)


def unravel_index(out, flat_index, dims, strides):
    """out[m, n] = (int(flat_index[n]) // strides[m]) % dims[m] (no modulo where dims[m] is
    not positive: the leading dim may be left open as -1)."""
    if out.size == 0:
        return
    buf, back = _out(out, math=True)
    _unravel.pick(flat_index.size)(buf, _math(flat_index), np.asarray(dims, dtype=np.int64),
                                   np.asarray(strides, dtype=np.int64))
    _finish(out, buf, back)


# ---------------------------------------------------------------------------------------------
# histogram
# ---------------------------------------------------------------------------------------------
def _histogram_impl(counts, data, edges, uniform, lo, hi):
    # serial: every element adds to a shared count
    nbins = counts.size
    for i in range(data.size):
        b = histogram_bin(data[i], edges, nbins, uniform, lo, hi)
        if b >= 0:
            counts[b] += 1


_histogram = njit(cache=True, nogil=True)(_histogram_impl)


def histogram_count(counts, data, edges, lo, hi):
    """counts[b] = how many elements of data fall in bin b: [edges[b], edges[b+1]) with the
    last bin closed; edges None: counts.size equal bins over [lo, hi]. Others are ignored."""
    acc = np.zeros(counts.size, dtype=np.int64)
    if data.size:
        uniform = edges is None
        _histogram(acc, _math(data), _math(data) if uniform else _math(edges), uniform,
                   float(lo), float(hi))
    np.copyto(counts, acc.reshape(counts.shape), casting="unsafe")
