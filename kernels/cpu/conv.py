"""CPU kernels for Convolution / Deconvolution: im2col and col2im in numba around BLAS products.

Every convolution is seen as 3-D: data ``(n, C, D, H, W)`` (1-D and 2-D data get leading
spatial dims of 1) and a geometry tuple ``g = (KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW,
OD, OH, OW)`` (kernel, stride, pad, dilate, output size). The column matrix has one row per
(channel, kernel offset) and one column per (sample, output position):
``col[(c*KD + kd)*KH*KW + kh*KW + kw, n*OD*OH*OW + (od*OH + oh)*OW + ow]``, so that a whole
chunk of the batch is one large matrix product ``weight (F, C*K) @ col (C*K, n*O)``, which BLAS
runs far faster than one small product per sample.

The kernels index flat (1-D) views of C-contiguous arrays through the ``*_run`` helpers, whose
offsets and counters are unsigned: numba then drops its negative-index check and LLVM
vectorises the runs (signed offsets made the same copies 10-15x slower). Each kernel works on
a range of its outer index (column rows, image channels, output planes) so that a ``prange``
launcher can split large calls over numba's threads (their count follows lightmod's thread
policy, kernels/threads.py); small calls run serially.
"""
import numpy as np
from numba import njit, prange, uint64

from .jit import task_count

__all__ = ["conv_gemm", "im2col",
           "col2im", "rows_to_batch", "batch_to_rows", "channel_sum", "add_channel_bias"]

_DUMMIES = {}


def _dummy(dtype):
    """A 1-element array standing in for an absent optional argument (one compiled signature)."""
    key = np.dtype(dtype)
    arr = _DUMMIES.get(key)
    if arr is None:
        arr = _DUMMIES[key] = np.zeros(1, dtype=key)
    return arr


def conv_gemm(a, b, out, trans_a=False, trans_b=False):
    """out = op(a) @ op(b) through BLAS (op transposes when asked); out must be C-contiguous."""
    np.matmul(a.T if trans_a else a, b.T if trans_b else b, out=out)


# ---------------------------------------------------------------------------------------------
# Runs: contiguous (or strided) element runs of flat arrays with unsigned indexing
# ---------------------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def copy_run(dst, d, src, s, n):
    """dst[d:d+n] = src[s:s+n] (d, s, n >= 0)."""
    d = uint64(d)
    s = uint64(s)
    for p in range(uint64(n)):
        dst[d + p] = src[s + p]


@njit(cache=True, inline="always")
def copy_run_strided(dst, d, src, s, stride, n):
    """dst[d + p] = src[s + p * stride] for p < n."""
    d = uint64(d)
    s = uint64(s)
    stride = uint64(stride)
    for p in range(uint64(n)):
        dst[d + p] = src[s + p * stride]


@njit(cache=True, inline="always")
def add_run(dst, d, src, s, n):
    """dst[d:d+n] += src[s:s+n]."""
    d = uint64(d)
    s = uint64(s)
    for p in range(uint64(n)):
        dst[d + p] += src[s + p]


@njit(cache=True, inline="always")
def add_run_strided(dst, d, stride, src, s, n):
    """dst[d + p * stride] += src[s + p] for p < n."""
    d = uint64(d)
    s = uint64(s)
    stride = uint64(stride)
    for p in range(uint64(n)):
        dst[d + p * stride] += src[s + p]


@njit(cache=True, inline="always")
def fill_run(dst, d, value, n):
    """dst[d:d+n] = value."""
    d = uint64(d)
    for p in range(uint64(n)):
        dst[d + p] = value


# ---------------------------------------------------------------------------------------------
# im2col
# ---------------------------------------------------------------------------------------------
@njit(cache=True)
def _valid_range(off, stride, size, count):
    """[lo, hi) of output positions o in [0, count) whose input o*stride + off lies in [0, size)."""
    lo = 0 if off >= 0 else (-off + stride - 1) // stride
    last = size - 1 - off
    hi = last // stride + 1 if last >= 0 else 0
    if hi > count:
        hi = count
    if lo > hi:
        lo = hi
    return lo, hi


@njit(cache=True)
def _im2col(x, col, dims, g, r0, r1):
    nb, C, D, H, W = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW = g
    O = OD * OH * OW
    width = nb * O
    zero = col.dtype.type(0)
    for r in range(r0, r1):
        kw = r % KW
        t = r // KW
        kh = t % KH
        t = t // KH
        kd = t % KD
        c = t // KD
        off = kw * DW - PW
        lo, hi = _valid_range(off, SW, W, OW)
        for n in range(nb):
            plane = (n * C + c) * D
            for od in range(OD):
                idd = od * SD - PD + kd * DD
                for oh in range(OH):
                    ih = oh * SH - PH + kh * DH
                    j0 = r * width + n * O + (od * OH + oh) * OW
                    if idd < 0 or idd >= D or ih < 0 or ih >= H:
                        fill_run(col, j0, zero, OW)
                        continue
                    fill_run(col, j0, zero, lo)
                    xb = ((plane + idd) * H + ih) * W + off + lo * SW
                    if SW == 1:
                        copy_run(col, j0 + lo, x, xb, hi - lo)
                    else:
                        copy_run_strided(col, j0 + lo, x, xb, SW, hi - lo)
                    fill_run(col, j0 + hi, zero, OW - hi)


@njit(cache=True, parallel=True)
def _im2col_parallel(x, col, dims, g, rows, parts):
    for i in prange(parts):
        _im2col(x, col, dims, g, i * rows // parts, (i + 1) * rows // parts)


def im2col(x, col, g):
    """Fill col (C*K, n*O) from x (n, C, D, H, W) for geometry g (see the module docstring)."""
    rows = col.shape[0]
    parts = task_count(col.size, rows)
    if parts > 1:
        _im2col_parallel(x.reshape(-1), col.reshape(-1), x.shape, g, rows, parts)
    else:
        _im2col(x.reshape(-1), col.reshape(-1), x.shape, g, 0, rows)


# ---------------------------------------------------------------------------------------------
# col2im: the adjoint of im2col, summing overlapping windows into the image
# ---------------------------------------------------------------------------------------------
@njit(cache=True)
def _col2im(col, x, dims, g, accumulate, c0, c1):
    """Channels [c0, c1) of x: each task owns whole channel planes, so tasks never collide."""
    nb, C, D, H, W = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW = g
    O = OD * OH * OW
    width = nb * O
    plane_size = D * H * W
    zero = x.dtype.type(0)
    for c in range(c0, c1):
        if not accumulate:
            for n in range(nb):
                fill_run(x, (n * C + c) * plane_size, zero, plane_size)
        for kd in range(KD):
            for kh in range(KH):
                for kw in range(KW):
                    r = ((c * KD + kd) * KH + kh) * KW + kw
                    off = kw * DW - PW
                    lo, hi = _valid_range(off, SW, W, OW)
                    for n in range(nb):
                        plane = (n * C + c) * D
                        for od in range(OD):
                            idd = od * SD - PD + kd * DD
                            if idd < 0 or idd >= D:
                                continue
                            for oh in range(OH):
                                ih = oh * SH - PH + kh * DH
                                if ih < 0 or ih >= H:
                                    continue
                                j0 = r * width + n * O + (od * OH + oh) * OW + lo
                                xb = ((plane + idd) * H + ih) * W + off + lo * SW
                                if SW == 1:
                                    add_run(x, xb, col, j0, hi - lo)
                                else:
                                    add_run_strided(x, xb, SW, col, j0, hi - lo)


@njit(cache=True, parallel=True)
def _col2im_parallel(col, x, dims, g, accumulate, parts):
    C = dims[1]
    for i in prange(parts):
        _col2im(col, x, dims, g, accumulate, i * C // parts, (i + 1) * C // parts)


def col2im(col, x, g, accumulate=False):
    """x (n, C, D, H, W) = (or +=) the sum of col's entries over the windows covering each pixel."""
    C = x.shape[1]
    parts = task_count(col.size, C)
    if parts > 1:
        _col2im_parallel(col.reshape(-1), x.reshape(-1), x.shape, g, accumulate, parts)
    else:
        _col2im(col.reshape(-1), x.reshape(-1), x.shape, g, accumulate, 0, C)


# ---------------------------------------------------------------------------------------------
# Layout moves between the GEMM layout (F, n*O) and the NCHW layout (n, F, O), fused with the
# bias work that touches the same elements anyway.
# ---------------------------------------------------------------------------------------------
@njit(cache=True)
def _rows_to_batch(rows, out, dims, bias, has_bias, accumulate, q0, q1):
    nb, F, O = dims
    width = nb * O
    for q in range(q0, q1):
        n = q // F
        f = q - n * F
        b = bias[f] if has_bias else out.dtype.type(0)
        src = uint64(f * width + n * O)
        dst = uint64(q * O)
        if accumulate:
            for o in range(uint64(O)):
                out[dst + o] += rows[src + o] + b
        else:
            for o in range(uint64(O)):
                out[dst + o] = rows[src + o] + b


def rows_to_batch(rows, out, bias=None, accumulate=False):
    """out (n, F, O) = (or +=) rows (F, n*O) rearranged, plus bias[f] when bias is given."""
    has_bias = bias is not None
    if not has_bias:
        bias = _dummy(out.dtype)
    planes = out.shape[0] * out.shape[1]
    args = (rows.reshape(-1), out.reshape(-1), out.shape, bias, has_bias, accumulate)
    parts = task_count(out.size, planes)
    if parts > 1:
        _rows_to_batch_parallel(*args, planes, parts)
    else:
        _rows_to_batch(*args, 0, planes)


@njit(cache=True, parallel=True)
def _rows_to_batch_parallel(rows, out, dims, bias, has_bias, accumulate, planes, parts):
    for i in prange(parts):
        _rows_to_batch(rows, out, dims, bias, has_bias, accumulate, i * planes // parts,
                       (i + 1) * planes // parts)


@njit(cache=True)
def _batch_to_rows(src, rows, dims, db, want_db, db_accumulate, f0, f1):
    nb, F, O = dims
    width = nb * O
    for f in range(f0, f1):
        s = 0.0
        for n in range(nb):
            a = uint64((n * F + f) * O)
            b = uint64(f * width + n * O)
            if want_db:
                for o in range(uint64(O)):
                    v = src[a + o]
                    rows[b + o] = v
                    s += v
            else:
                copy_run(rows, b, src, a, O)
        if want_db:
            if db_accumulate:
                db[f] += s
            else:
                db[f] = s


def batch_to_rows(src, rows, db=None, db_accumulate=False):
    """rows (F, n*O) = src (n, F, O) rearranged; when db is given also db[f] (+)= the sum of
    channel f."""
    want_db = db is not None
    if not want_db:
        db = _dummy(src.dtype)
    F = src.shape[1]
    args = (src.reshape(-1), rows.reshape(-1), src.shape, db, want_db, db_accumulate)
    parts = task_count(src.size, F)
    if parts > 1:
        _batch_to_rows_parallel(*args, F, parts)
    else:
        _batch_to_rows(*args, 0, F)


@njit(cache=True, parallel=True)
def _batch_to_rows_parallel(src, rows, dims, db, want_db, db_accumulate, F, parts):
    for i in prange(parts):
        _batch_to_rows(src, rows, dims, db, want_db, db_accumulate, i * F // parts,
                       (i + 1) * F // parts)


@njit(cache=True)
def _channel_sum(src, dims, out, accumulate):
    nb, F, O = dims
    for f in range(F):
        s = 0.0
        for n in range(nb):
            a = uint64((n * F + f) * O)
            for o in range(uint64(O)):
                s += src[a + o]
        if accumulate:
            out[f] += s
        else:
            out[f] = s


def channel_sum(src, out, accumulate=False):
    """out[f] (+)= sum over n, o of src (n, F, O) — the bias gradient."""
    _channel_sum(src.reshape(-1), src.shape, out, accumulate)


@njit(cache=True)
def _add_channel_bias(out, dims, bias):
    nb, F, O = dims
    for n in range(nb):
        for f in range(F):
            b = bias[f]
            a = uint64((n * F + f) * O)
            for o in range(uint64(O)):
                out[a + o] += b


def add_channel_bias(out, bias):
    """out (n, F, O) += bias[f]."""
    _add_channel_bias(out.reshape(-1), out.shape, bias)
