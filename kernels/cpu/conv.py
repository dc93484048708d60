"""CPU kernels for Convolution / Deconvolution: im2col and col2im in numba around BLAS products.

Every convolution is seen as 3-D: data ``(n, C, D, H, W)`` (1-D and 2-D data get leading
spatial dims of 1) and a geometry tuple ``g = (KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW,
OD, OH, OW)`` (kernel, stride, pad, dilate, output size). The column matrix has one row per
(channel, kernel offset) and one column per (sample, output position):
``col[(c*KD + kd)*KH*KW + kh*KW + kw, n*OD*OH*OW + (od*OH + oh)*OW + ow]``, so that a whole
chunk of the batch is one large matrix product ``weight (F, C*K) @ col (C*K, n*O)``, which BLAS
runs far faster than one small product per sample.

Each kernel has a serial and a ``prange`` launcher around the same per-row function; the
parallel one is used only when the work is large enough to pay for waking the threads.
"""
import numpy as np
from numba import njit, prange

__all__ = ["conv_empty", "conv_fill", "conv_gemm", "conv_add", "conv_cast_into", "im2col", "col2im",
           "rows_to_batch", "batch_to_rows", "channel_sum", "add_channel_bias"]

# Element count from which the prange launchers are worth their thread wake-up.
PARALLEL_MIN = 1 << 15


_DUMMIES = {}


def _dummy(dtype):
    """A 1-element array standing in for an absent optional argument (one compiled signature)."""
    key = np.dtype(dtype)
    arr = _DUMMIES.get(key)
    if arr is None:
        arr = _DUMMIES[key] = np.zeros(1, dtype=key)
    return arr


def conv_empty(shape, dtype):
    """Uninitialised scratch / work array on this device."""
    return np.empty(shape, dtype=dtype)


def conv_fill(dst, value):
    """Set every element of dst to value."""
    dst[...] = value


def conv_gemm(a, b, out, trans_a=False, trans_b=False):
    """out = op(a) @ op(b) through BLAS (op transposes when asked); out must be C-contiguous."""
    np.matmul(a.T if trans_a else a, b.T if trans_b else b, out=out)


def conv_add(dst, src):
    """dst += src (same shapes)."""
    np.add(dst, src, out=dst)


def conv_cast_into(dst, src):
    """Copy src into dst converting the dtype (float16 <-> float32 staging)."""
    np.copyto(dst, src, casting="unsafe")


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
def _im2col_row(x, col, r, g):
    KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW = g
    nb, C, D, H, W = x.shape
    kw = r % KW
    t = r // KW
    kh = t % KH
    t = t // KH
    kd = t % KD
    c = t // KD
    O = OD * OH * OW
    off = kw * DW - PW
    lo, hi = _valid_range(off, SW, W, OW)
    zero = col.dtype.type(0)
    for n in range(nb):
        for od in range(OD):
            idd = od * SD - PD + kd * DD
            for oh in range(OH):
                ih = oh * SH - PH + kh * DH
                j0 = n * O + (od * OH + oh) * OW
                if idd < 0 or idd >= D or ih < 0 or ih >= H:
                    for ow in range(OW):
                        col[r, j0 + ow] = zero
                else:
                    for ow in range(lo):
                        col[r, j0 + ow] = zero
                    for ow in range(lo, hi):
                        col[r, j0 + ow] = x[n, c, idd, ih, ow * SW + off]
                    for ow in range(hi, OW):
                        col[r, j0 + ow] = zero


@njit(cache=True)
def _im2col_serial(x, col, g):
    for r in range(col.shape[0]):
        _im2col_row(x, col, r, g)


@njit(cache=True, parallel=True)
def _im2col_parallel(x, col, g):
    for r in prange(col.shape[0]):
        _im2col_row(x, col, r, g)


def im2col(x, col, g):
    """Fill col (C*K, n*O) from x (n, C, D, H, W) for geometry g (see the module docstring)."""
    if col.size >= PARALLEL_MIN:
        _im2col_parallel(x, col, g)
    else:
        _im2col_serial(x, col, g)


# ---------------------------------------------------------------------------------------------
# col2im: the adjoint of im2col, summing overlapping windows; one (sample, channel) plane per
# task so that no two tasks write the same element.
# ---------------------------------------------------------------------------------------------
@njit(cache=True)
def _col2im_plane(col, x, p, g, accumulate):
    KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW = g
    nb, C, D, H, W = x.shape
    n = p // C
    c = p % C
    O = OD * OH * OW
    if not accumulate:
        for i in range(D):
            for j in range(H):
                for q in range(W):
                    x[n, c, i, j, q] = 0
    for kd in range(KD):
        for kh in range(KH):
            for kw in range(KW):
                r = ((c * KD + kd) * KH + kh) * KW + kw
                off = kw * DW - PW
                lo, hi = _valid_range(off, SW, W, OW)
                for od in range(OD):
                    idd = od * SD - PD + kd * DD
                    if idd < 0 or idd >= D:
                        continue
                    for oh in range(OH):
                        ih = oh * SH - PH + kh * DH
                        if ih < 0 or ih >= H:
                            continue
                        j0 = n * O + (od * OH + oh) * OW
                        for ow in range(lo, hi):
                            x[n, c, idd, ih, ow * SW + off] += col[r, j0 + ow]


@njit(cache=True)
def _col2im_serial(col, x, g, accumulate):
    for p in range(x.shape[0] * x.shape[1]):
        _col2im_plane(col, x, p, g, accumulate)


@njit(cache=True, parallel=True)
def _col2im_parallel(col, x, g, accumulate):
    for p in prange(x.shape[0] * x.shape[1]):
        _col2im_plane(col, x, p, g, accumulate)


def col2im(col, x, g, accumulate=False):
    """x (n, C, D, H, W) = (or +=) the sum of col's entries over the windows covering each pixel."""
    if col.size >= PARALLEL_MIN and x.shape[0] * x.shape[1] > 1:
        _col2im_parallel(col, x, g, accumulate)
    else:
        _col2im_serial(col, x, g, accumulate)


# ---------------------------------------------------------------------------------------------
# Layout moves between the GEMM layout (F, n*O) and the NCHW layout (n, F, O), fused with the
# bias work that touches the same elements anyway.
# ---------------------------------------------------------------------------------------------
@njit(cache=True)
def _rows_to_batch_row(rows, out, bias, has_bias, accumulate, q):
    nb, F, O = out.shape
    n = q // F
    f = q % F
    b = bias[f] if has_bias else 0
    j0 = n * O
    if accumulate:
        for o in range(O):
            out[n, f, o] += rows[f, j0 + o] + b
    else:
        for o in range(O):
            out[n, f, o] = rows[f, j0 + o] + b


@njit(cache=True)
def _rows_to_batch_serial(rows, out, bias, has_bias, accumulate):
    for q in range(out.shape[0] * out.shape[1]):
        _rows_to_batch_row(rows, out, bias, has_bias, accumulate, q)


@njit(cache=True, parallel=True)
def _rows_to_batch_parallel(rows, out, bias, has_bias, accumulate):
    for q in prange(out.shape[0] * out.shape[1]):
        _rows_to_batch_row(rows, out, bias, has_bias, accumulate, q)


def rows_to_batch(rows, out, bias=None, accumulate=False):
    """out (n, F, O) = (or +=) rows (F, n*O) rearranged, plus bias[f] when bias is given."""
    has_bias = bias is not None
    if not has_bias:
        bias = _dummy(out.dtype)
    if out.size >= PARALLEL_MIN:
        _rows_to_batch_parallel(rows, out, bias, has_bias, accumulate)
    else:
        _rows_to_batch_serial(rows, out, bias, has_bias, accumulate)


@njit(cache=True)
def _batch_to_rows_channel(src, rows, db, want_db, db_accumulate, f):
    nb, F, O = src.shape
    s = 0.0
    for n in range(nb):
        j0 = n * O
        for o in range(O):
            v = src[n, f, o]
            rows[f, j0 + o] = v
            s += v
    if want_db:
        if db_accumulate:
            db[f] += s
        else:
            db[f] = s


@njit(cache=True)
def _batch_to_rows_serial(src, rows, db, want_db, db_accumulate):
    for f in range(src.shape[1]):
        _batch_to_rows_channel(src, rows, db, want_db, db_accumulate, f)


@njit(cache=True, parallel=True)
def _batch_to_rows_parallel(src, rows, db, want_db, db_accumulate):
    for f in prange(src.shape[1]):
        _batch_to_rows_channel(src, rows, db, want_db, db_accumulate, f)


def batch_to_rows(src, rows, db=None, db_accumulate=False):
    """rows (F, n*O) = src (n, F, O) rearranged; when db is given also db[f] (+)= sum of channel f."""
    want_db = db is not None
    if not want_db:
        db = _dummy(src.dtype)
    if src.size >= PARALLEL_MIN and src.shape[1] > 1:
        _batch_to_rows_parallel(src, rows, db, want_db, db_accumulate)
    else:
        _batch_to_rows_serial(src, rows, db, want_db, db_accumulate)


@njit(cache=True)
def _channel_sum_serial(src, out, accumulate):
    nb, F, O = src.shape
    for f in range(F):
        s = 0.0
        for n in range(nb):
            for o in range(O):
                s += src[n, f, o]
        if accumulate:
            out[f] += s
        else:
            out[f] = s


def channel_sum(src, out, accumulate=False):
    """out[f] (+)= sum over n, o of src (n, F, O) — the bias gradient."""
    _channel_sum_serial(src, out, accumulate)


@njit(cache=True)
def _add_channel_bias_serial(out, bias):
    nb, F, O = out.shape
    for n in range(nb):
        for f in range(F):
            b = bias[f]
            for o in range(O):
                out[n, f, o] += b


def add_channel_bias(out, bias):
    """out (n, F, O) += bias[f]."""
    _add_channel_bias_serial(out, bias)
