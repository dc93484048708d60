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
import math
import threading
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np
from numba import njit, prange, uint64

from .. import cache_stamp  # noqa: F401  (stamps the cache entries made below)
from .. import threads as _threads
from ..scalar_nn import ACT_RELU, activation_value
from . import gemm
from .blas import gemm_accumulate, gemm_function
from .fused import _affine_act_rows, _dummy, _epilogue_args
from .jit import PARALLEL_MIN, task_count

__all__ = ["conv_gemm", "conv_gemm_add", "cols_forward", "cols_backward", "rows_forward",
           "rows_backward_data", "im2col",
           "col2im", "rows_to_batch", "batch_to_rows", "channel_sum", "add_channel_bias",
           "transpose_planes", "im2row", "row2im", "rows_to_nchw", "bn_fold",
           "channel_last_pool", "conv_rows_workers", "conv_rows_last"]

def conv_gemm(a, b, out, trans_a=False, trans_b=False):
    """out = op(a) @ op(b) (op transposes when asked); out must be C-contiguous. In parts on
    lightmod's threads (kernels/cpu/gemm.py) where they take it, else through numpy's BLAS."""
    if not gemm.product(a, b, out, trans_a, trans_b):
        np.matmul(a.T if trans_a else a, b.T if trans_b else b, out=out)


def conv_gemm_add(a, b, out, trans_a=False, trans_b=False):
    """out += op(a) @ op(b): on lightmod's threads where they take it, else one GEMM with
    beta = 1 where BLAS takes the layout (a weight gradient summed over the chunks of a batch),
    else a product and an add."""
    if gemm.product(a, b, out, trans_a, trans_b, accumulate=True):
        return
    a = a.T if trans_a else a
    b = b.T if trans_b else b
    if not gemm_accumulate(a, b, out):
        out += np.matmul(a, b)


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
@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True, parallel=True)
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
@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True, parallel=True)
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
@njit(cache=True, nogil=True)
def _rows_to_batch(rows, out, dims, scale, shift, mode, act, accumulate, q0, q1):
    nb, F, O = dims
    width = nb * O
    for q in range(q0, q1):
        n = q // F
        f = q - n * F
        s = scale[f] if mode == 2 else out.dtype.type(1)
        b = shift[f] if mode >= 1 else out.dtype.type(0)
        src = uint64(f * width + n * O)
        dst = uint64(q * O)
        if accumulate:
            for o in range(uint64(O)):
                out[dst + o] += rows[src + o] + b
        elif act < 0 and mode < 2:
            for o in range(uint64(O)):
                out[dst + o] = rows[src + o] + b
        else:
            for o in range(uint64(O)):
                v = rows[src + o] * s + b
                if act == ACT_RELU:
                    v = v if v > 0 else out.dtype.type(0)
                elif act >= 0:
                    v = activation_value(v, act)
                out[dst + o] = v


def rows_to_batch(rows, out, bias=None, accumulate=False, scale=None, act=-1):
    """out (n, F, O) = (or +=) rows (F, n*O) rearranged, plus bias[f] when bias is given; a
    write may also scale each channel first and apply an activation (code, -1 for none).
    With n == 1 the two layouts are the same, and ``rows`` may be ``out`` itself: each element
    is read before it is written at the same place (the inference plan's epilogue of a
    feature-major fully connected output)."""
    if accumulate and (scale is not None or act >= 0):
        raise ValueError("rows_to_batch: scale and activation apply to writes only")
    scale, bias, mode = _epilogue_args(out.dtype, scale, bias)
    planes = out.shape[0] * out.shape[1]
    args = (rows.reshape(-1), out.reshape(-1), out.shape, scale, bias, mode, act, accumulate)
    parts = task_count(out.size, planes)
    if parts > 1:
        _rows_to_batch_parallel(*args, planes, parts)
    else:
        _rows_to_batch(*args, 0, planes)


@njit(cache=True, nogil=True, parallel=True)
def _rows_to_batch_parallel(rows, out, dims, scale, shift, mode, act, accumulate, planes, parts):
    for i in prange(parts):
        _rows_to_batch(rows, out, dims, scale, shift, mode, act, accumulate,
                       i * planes // parts, (i + 1) * planes // parts)


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True, parallel=True)
def _batch_to_rows_parallel(src, rows, dims, db, want_db, db_accumulate, F, parts):
    for i in prange(parts):
        _batch_to_rows(src, rows, dims, db, want_db, db_accumulate, i * F // parts,
                       (i + 1) * F // parts)


# ---------------------------------------------------------------------------------------------
# The column layout chunk by chunk in one compiled call (one thread): im2col, the BLAS products
# (numpy's OpenBLAS called from the compiled loop, blas.gemm_function) and the layout passes of
# every chunk without a return to Python. Small chunks keep a chunk's columns and products in
# the core's L2 cache; in one call they cost no Python dispatch each, and a sample-split slice
# holds the GIL far less often (LeNet's conv1: 2 x 16 chunks per slice and pass).
# ---------------------------------------------------------------------------------------------
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
# From this many output positions per image, cols_forward multiplies image by image straight
# into the output: a product (F, C*K) @ (C*K, O) of one image is already that image's (F, O)
# block of y, so the layout pass back from the chunk's (F, m*O) product falls away, and the
# bias rides in the product (y filled with it, then beta = 1). LeNet's conv1 (24x24 outputs)
# and the ResNet stem (32x32), a 32- or 16-image slice on one thread: 293 -> 268 us and
# 453 -> 389 us; the products keep their speed at these widths. Narrower images keep the
# chunks (their products would be too thin).
IMAGE_PRODUCT_MIN_POSITIONS = 256


@njit(cache=True, nogil=True)
def _plane_epilogue(out, F, O, scale, shift, mode, act):
    """In place on out (F, O) flat: out = act(out * scale[f] + shift[f]) with mode 2, act(out)
    otherwise (the same arithmetic as _rows_to_batch's)."""
    for f in range(F):
        s = scale[f] if mode == 2 else out.dtype.type(1)
        b = shift[f] if mode == 2 else out.dtype.type(0)
        base = uint64(f * O)
        for o in range(uint64(O)):
            v = out[base + o]
            if mode == 2:
                v = v * s + b
            if act == ACT_RELU:
                v = v if v > 0 else out.dtype.type(0)
            elif act >= 0:
                v = activation_value(v, act)
            out[base + o] = v


@njit(cache=True, nogil=True)
def _cols_forward(gemm, x, xdims, w2, col, res, y, g, chunk, scale, shift, mode, act,
                  per_image):
    n, C, D, H, W = xdims
    F, CK = w2.shape
    O = g[12] * g[13] * g[14]
    image = C * D * H * W
    one = y.dtype.type(1)
    zero = y.dtype.type(0)
    if per_image:
        for i in range(n):
            _im2col(x[i * image:(i + 1) * image], col, (1, C, D, H, W), g, 0, CK)
            out = y[i * F * O:(i + 1) * F * O]
            beta = zero
            if mode == 1:
                # (b + product: the bits of the chunked path's product + b)
                for f in range(F):
                    fill_run(out, f * O, shift[f], O)
                beta = one
            gemm(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, F, O, CK, one, w2.ctypes.data, CK,
                 col.ctypes.data, O, beta, out.ctypes.data, O)
            if mode == 2 or act >= 0:
                _plane_epilogue(out, F, O, scale, shift, mode, act)
        return
    for n0 in range(0, n, chunk):
        m = min(chunk, n - n0)
        width = m * O
        _im2col(x[n0 * image:(n0 + m) * image], col, (m, C, D, H, W), g, 0, CK)
        gemm(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, F, width, CK, one, w2.ctypes.data, CK,
             col.ctypes.data, width, zero, res.ctypes.data, width)
        _rows_to_batch(res, y[n0 * F * O:(n0 + m) * F * O], (m, F, O), scale, shift, mode, act,
                       False, 0, m * F)


def _compiled_gemm_for(dtype, *arrays):
    """gemm_function(dtype) when every array given is C-contiguous of that dtype (flat views
    of them are the arrays themselves), else None."""
    for a in arrays:
        if a is not None and (a.dtype != dtype or not a.flags.c_contiguous):
            return None
    return gemm_function(dtype)


def cols_forward(x, w2, col, res, y, g, chunk, scale=None, shift=None, act=-1):
    """y (n, F, O) = act(w2 (F, C*K) @ columns(x (n, C, D, H, W)) * scale[f] + shift[f]),
    ``chunk`` images per product (one image per product, straight into y, from
    IMAGE_PRODUCT_MIN_POSITIONS output positions unless the batch is one chunk of several
    images), in one call on the calling thread: col and res are scratch of at least
    C*K*chunk*O and F*chunk*O elements; a batch of one chunk leaves its column matrix in col.
    False (nothing done) where numpy's BLAS cannot be called from compiled code."""
    gemm = _compiled_gemm_for(y.dtype, x, w2, col, res, y)
    if gemm is None:
        return False
    scale, shift, mode = _epilogue_args(y.dtype, scale, shift)
    # (a batch that is one chunk keeps the chunked product: the operator's backward may reuse
    # the column matrix of the whole batch, which the image products do not leave in col)
    n = x.shape[0]
    per_image = (g[12] * g[13] * g[14] >= IMAGE_PRODUCT_MIN_POSITIONS
                 and (chunk < n or n == 1))
    _cols_forward(gemm, x.reshape(-1), x.shape, w2, col.reshape(-1), res.reshape(-1),
                  y.reshape(-1), g, chunk, scale, shift, mode, act, per_image)
    return True


@njit(cache=True, nogil=True)
def _cols_backward(gemm, x, xdims, w2, dy, col, dyt, dx, dw, db, g, chunk, want_x, add_x,
                   want_w, add_w, want_b, add_b):
    n, C, D, H, W = xdims
    F, CK = w2.shape
    O = g[12] * g[13] * g[14]
    image = C * D * H * W
    one = dy.dtype.type(1)
    zero = dy.dtype.type(0)
    for n0 in range(0, n, chunk):
        m = min(chunk, n - n0)
        width = m * O
        # dy's chunk as rows (F, m*O), the bias gradient summed on the way
        _batch_to_rows(dy[n0 * F * O:(n0 + m) * F * O], dyt, (m, F, O), db, want_b,
                       add_b or n0 > 0, 0, F)
        if want_w:
            _im2col(x[n0 * image:(n0 + m) * image], col, (m, C, D, H, W), g, 0, CK)
            beta = one if (add_w or n0 > 0) else zero
            gemm(_ROW_MAJOR, _NO_TRANS, _TRANS, F, CK, width, one, dyt.ctypes.data, width,
                 col.ctypes.data, width, beta, dw.ctypes.data, CK)
        if want_x:
            # the column gradient (C*K, m*O) = w2^T @ dyt, in the column buffer
            gemm(_ROW_MAJOR, _TRANS, _NO_TRANS, CK, width, F, one, w2.ctypes.data, CK,
                 dyt.ctypes.data, width, zero, col.ctypes.data, width)
            _col2im(col, dx[n0 * image:(n0 + m) * image], (m, C, D, H, W), g, add_x, 0, C)


def cols_backward(x, w2, dy, dx, dw, db, g, chunk, col, dyt, req_x, req_w, req_b):
    """Gradients of cols_forward (reqs 'write', 'add' or 'null'; an array whose req is 'null'
    may be None): dx (n, C, D, H, W), dw (F, C*K), db (F,) from dy (n, F, O), in one call on
    the calling thread; col and dyt are scratch as in cols_forward. False (nothing done)
    where numpy's BLAS cannot be called from compiled code."""
    gemm = _compiled_gemm_for(dy.dtype, x, w2, dy, dx, dw, db, col, dyt)
    if gemm is None:
        return False
    dummy = _dummy(dy.dtype)
    _cols_backward(gemm, x.reshape(-1), x.shape, w2, dy.reshape(-1), col.reshape(-1),
                   dyt.reshape(-1), dummy if dx is None else dx.reshape(-1),
                   dummy.reshape(1, 1) if dw is None else dw, dummy if db is None else
                   db.reshape(-1), g, chunk, req_x != "null", req_x == "add", req_w != "null",
                   req_w == "add", req_b != "null", req_b == "add")
    return True


@njit(cache=True, nogil=True)
def _rows_forward(gemm, xt, xdims, wt, rows, res, y, g, chunk, keep, scale, shift, mode, act):
    n, C, D, H, W = xdims
    F, R = wt.shape
    O = g[12] * g[13] * g[14]
    image = C * D * H * W
    one = y.dtype.type(1)
    zero = y.dtype.type(0)
    for n0 in range(0, n, chunk):
        m = min(chunk, n - n0)
        height = m * O
        start = n0 * O * R if keep else 0
        patches = rows[start:start + height * R]
        _im2row(xt[n0 * image:(n0 + m) * image], patches, (m, C, D, H, W), g, 0, height)
        gemm(_ROW_MAJOR, _NO_TRANS, _TRANS, height, F, R, one, patches.ctypes.data, R,
             wt.ctypes.data, R, zero, res.ctypes.data, F)
        _rows_to_nchw(res, y[n0 * F * O:(n0 + m) * F * O], (m, F, O), scale, shift, mode, act,
                      0, m * F)


def rows_forward(xt, wt, rows, res, y, dims, g, chunk, keep=False, scale=None, shift=None,
                 act=-1):
    """y (n, F, O) = act(patches(xt) @ wt^T * scale[f] + shift[f]) for channel-last data xt
    (n, D, H, W, C) (``dims`` its channel-first shape) and weights wt (F, K*C) in patch order,
    ``chunk`` images per product, in one call on the calling thread: the patch-row chunk loop
    of the row layout. res is scratch of chunk*O*F elements, rows of chunk*O*K*C, or with
    ``keep`` of n*O*K*C: then every chunk's rows stay in place (for the weight gradient).
    False (nothing done) where numpy's BLAS cannot be called from compiled code."""
    gemm = _compiled_gemm_for(y.dtype, xt, wt, rows, res, y)
    if gemm is None:
        return False
    scale, shift, mode = _epilogue_args(y.dtype, scale, shift)
    _rows_forward(gemm, xt.reshape(-1), dims, wt, rows.reshape(-1), res.reshape(-1),
                  y.reshape(-1), g, chunk, keep, scale, shift, mode, act)
    return True


@njit(cache=True, nogil=True)
def _rows_backward_data(gemm, dyt, wt, rows, dxt, xdims, g, chunk):
    n, C, D, H, W = xdims
    F, R = wt.shape
    O = g[12] * g[13] * g[14]
    image = C * D * H * W
    one = dyt.dtype.type(1)
    zero = dyt.dtype.type(0)
    for n0 in range(0, n, chunk):
        m = min(chunk, n - n0)
        height = m * O
        gemm(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, height, R, F, one,
             dyt[n0 * O * F:].ctypes.data, F, wt.ctypes.data, R, zero, rows.ctypes.data, R)
        _row2im(rows, dxt[n0 * image:(n0 + m) * image], (m, C, D, H, W), g, 0, m)


def rows_backward_data(dyt, wt, rows, dxt, dims, g, chunk):
    """dxt (n, D, H, W, C) += the data gradient of rows_forward from the channel-last output
    gradient dyt (n*O, F), ``chunk`` images per product, in one call on the calling thread
    (rows: scratch of chunk*O*K*C elements). False (nothing done) where numpy's BLAS cannot
    be called from compiled code."""
    gemm = _compiled_gemm_for(dxt.dtype, dyt, wt, rows, dxt)
    if gemm is None:
        return False
    _rows_backward_data(gemm, dyt.reshape(-1), wt, rows.reshape(-1), dxt.reshape(-1), dims, g,
                        chunk)
    return True


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
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


# ---------------------------------------------------------------------------------------------
# The row (patch-per-output-pixel) layout of the CPU convolution.
#
# Data moved to channel-last order (n, D, H, W, C) makes the patch of one output pixel a few
# contiguous runs of KW*C (or C) elements, so a patch matrix with one ROW per (sample, output
# pixel) and columns ordered (kd, kh, kw, c) is cheap to build; BLAS then multiplies the tall
# matrix rows (m*O, K*C) by the weights (F, K*C)^T at close to its peak (measured on this
# machine: ~2x the rate of the (F, C*K) @ (C*K, m*O) product for F = 20..64). The result
# (m*O, F) goes back to NCHW in one pass that also applies the epilogue: a per-channel scale
# and shift (bias, or BatchNorm folded in) and an activation.
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _transpose_planes(src, dst, dims, accumulate, p0, p1):
    _, A, B = dims
    for q in range(p0, p1):
        base = uint64(q * A * B)
        for a0 in range(0, A, 16):        # 16 x 16 tiles keep both sides in L1
            a1 = min(A, a0 + 16)
            for b in range(B):
                s = base + uint64(a0 * B + b)
                d = base + uint64(b * A + a0)
                if accumulate:
                    for a in range(uint64(a1 - a0)):
                        dst[d + a] += src[s + a * uint64(B)]
                else:
                    for a in range(uint64(a1 - a0)):
                        dst[d + a] = src[s + a * uint64(B)]


@njit(cache=True, nogil=True, parallel=True)
def _transpose_planes_parallel(src, dst, dims, accumulate, parts):
    m = dims[0]
    for i in prange(parts):
        _transpose_planes(src, dst, dims, accumulate, i * m // parts, (i + 1) * m // parts)


def transpose_planes(src, dst, accumulate=False):
    """dst (m, B, A) = (or +=) src (m, A, B) with its last two axes swapped."""
    m = src.shape[0]
    args = (src.reshape(-1), dst.reshape(-1), src.shape, accumulate)
    parts = task_count(src.size, m)
    if parts > 1:
        _transpose_planes_parallel(*args, parts)
    else:
        _transpose_planes(*args, 0, m)


@njit(cache=True, nogil=True)
def _im2row(xt, rows, dims, g, q0, q1):
    nb, C, D, H, W = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW = g
    O = OD * OH * OW
    width = KD * KH * KW * C
    run = KW * C
    zero = rows.dtype.type(0)
    for q in range(q0, q1):            # q = n*O + o: one output pixel, one row
        n = q // O
        o = q - n * O
        ow = o % OW
        t = o // OW
        oh = t % OH
        od = t // OH
        iw0 = ow * SW - PW
        whole = DW == 1 and iw0 >= 0 and iw0 + KW <= W
        dst = q * width
        for kd in range(KD):
            idd = od * SD - PD + kd * DD
            for kh in range(KH):
                ih = oh * SH - PH + kh * DH
                if idd < 0 or idd >= D or ih < 0 or ih >= H:
                    fill_run(rows, dst, zero, run)
                    dst += run
                    continue
                src = (((n * D + idd) * H + ih) * W) * C
                if whole:
                    copy_run(rows, dst, xt, src + iw0 * C, run)
                    dst += run
                    continue
                for kw in range(KW):
                    iw = iw0 + kw * DW
                    if iw < 0 or iw >= W:
                        fill_run(rows, dst, zero, C)
                    else:
                        copy_run(rows, dst, xt, src + iw * C, C)
                    dst += C


@njit(cache=True, nogil=True, parallel=True)
def _im2row_parallel(xt, rows, dims, g, count, parts):
    for i in prange(parts):
        _im2row(xt, rows, dims, g, i * count // parts, (i + 1) * count // parts)


def im2row(xt, rows, dims, g):
    """Fill rows (n*O, KD*KH*KW*C) from channel-last data xt (n, D, H, W, C); ``dims`` is the
    channel-first shape (n, C, D, H, W) and g the geometry (see the module docstring)."""
    count = rows.shape[0]
    parts = task_count(rows.size, count, per_thread=2)
    if parts > 1:
        _im2row_parallel(xt.reshape(-1), rows.reshape(-1), dims, g, count, parts)
    else:
        _im2row(xt.reshape(-1), rows.reshape(-1), dims, g, 0, count)


@njit(cache=True, nogil=True)
def _row2im(rows, xt, dims, g, n0, n1):
    """Images [n0, n1) of xt (channel-last) += the patch rows; tasks own whole images."""
    nb, C, D, H, W = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW = g
    O = OD * OH * OW
    width = KD * KH * KW * C
    for n in range(n0, n1):
        for o in range(O):
            ow = o % OW
            t = o // OW
            oh = t % OH
            od = t // OH
            iw0 = ow * SW - PW
            whole = DW == 1 and iw0 >= 0 and iw0 + KW <= W
            src = (n * O + o) * width
            for kd in range(KD):
                idd = od * SD - PD + kd * DD
                for kh in range(KH):
                    ih = oh * SH - PH + kh * DH
                    if idd < 0 or idd >= D or ih < 0 or ih >= H:
                        src += KW * C
                        continue
                    dst = (((n * D + idd) * H + ih) * W) * C
                    if whole:
                        add_run(xt, dst + iw0 * C, rows, src, KW * C)
                        src += KW * C
                        continue
                    for kw in range(KW):
                        iw = iw0 + kw * DW
                        if iw >= 0 and iw < W:
                            add_run(xt, dst + iw * C, rows, src, C)
                        src += C


@njit(cache=True, nogil=True, parallel=True)
def _row2im_parallel(rows, xt, dims, g, parts):
    nb = dims[0]
    for i in prange(parts):
        _row2im(rows, xt, dims, g, i * nb // parts, (i + 1) * nb // parts)


def row2im(rows, xt, dims, g):
    """xt (n, D, H, W, C) += the patch rows (n*O, KD*KH*KW*C) summed over overlapping windows
    (the adjoint of im2row; xt is not cleared first)."""
    nb = dims[0]
    parts = task_count(rows.size, nb)
    if parts > 1:
        _row2im_parallel(rows.reshape(-1), xt.reshape(-1), dims, g, parts)
    else:
        _row2im(rows.reshape(-1), xt.reshape(-1), dims, g, 0, nb)


@njit(cache=True, nogil=True)
def _rows_to_nchw(res, out, dims, scale, shift, mode, act, q0, q1):
    """out[n, f, o] = act(res[n*O + o, f] * scale[f] + shift[f]) for planes q = n*F + f."""
    nb, F, O = dims
    for q in range(q0, q1):
        n = q // F
        f = q - n * F
        s = scale[f] if mode == 2 else out.dtype.type(1)
        b = shift[f] if mode >= 1 else out.dtype.type(0)
        src = uint64(n * O * F + f)
        dst = uint64(q * O)
        F_ = uint64(F)
        if act < 0:
            for o in range(uint64(O)):
                out[dst + o] = res[src + o * F_] * s + b
        elif act == ACT_RELU:
            for o in range(uint64(O)):
                v = res[src + o * F_] * s + b
                out[dst + o] = v if v > 0 else out.dtype.type(0)
        else:
            for o in range(uint64(O)):
                out[dst + o] = activation_value(res[src + o * F_] * s + b, act)


@njit(cache=True, nogil=True, parallel=True)
def _rows_to_nchw_parallel(res, out, dims, scale, shift, mode, act, planes, parts):
    for i in prange(parts):
        _rows_to_nchw(res, out, dims, scale, shift, mode, act, i * planes // parts,
                      (i + 1) * planes // parts)


def rows_to_nchw(res, out, scale=None, shift=None, act=-1):
    """out (n, F, O) = act(res (n*O, F) * scale[f] + shift[f]): the transpose back to
    channel-first with the epilogue fused. scale / shift may be None (1 / 0); act is an
    activation code of ``kernels.scalar_nn.ACTIVATIONS`` or -1 for none."""
    scale, shift, mode = _epilogue_args(out.dtype, scale, shift)
    planes = out.shape[0] * out.shape[1]
    args = (res.reshape(-1), out.reshape(-1), out.shape, scale, shift, mode, act)
    parts = task_count(out.size, planes, cost=2.0)
    if parts > 1:
        _rows_to_nchw_parallel(*args, planes, parts)
    else:
        _rows_to_nchw(*args, 0, planes)


@njit(cache=True, nogil=True)
def _bn_fold(gamma, beta, mean, var, bias, scale, shift, eps, fix_gamma, has_bias):
    for f in range(scale.size):
        g = 1.0 if fix_gamma else gamma[f]
        s = g / math.sqrt(var[f] + eps)
        b = bias[f] if has_bias else 0.0
        scale[f] = s
        shift[f] = beta[f] + (b - mean[f]) * s


def bn_fold(gamma, beta, mean, var, bias, scale, shift, eps, fix_gamma):
    """Per-channel scale and shift of BatchNorm with moving statistics applied to a layer's
    output with bias ``bias`` (None: no bias): BN(y + bias) = y * scale + shift."""
    has_bias = bias is not None
    _bn_fold(gamma, beta, mean, var, bias.reshape(-1) if has_bias else _dummy(scale.dtype),
             scale, shift, float(eps), bool(fix_gamma), has_bias)


# ---------------------------------------------------------------------------------------------
# Global pooling of channel-last data (the inference plan keeps a convolution's output in the
# row layout (n, O, C) when only convolutions, element-wise operators and a global pooling
# read it; the pooling then reduces along O with the channels as the contiguous axis).
# ---------------------------------------------------------------------------------------------
POOL_LAST_MAX, POOL_LAST_AVG, POOL_LAST_SUM = 0, 1, 2


@njit(cache=True, nogil=True)
def _channel_last_pool(src, out, dims, kind, n0, n1):
    _, O, C = dims
    C_ = uint64(C)
    for n in range(n0, n1):
        dst = uint64(n * C)
        base = uint64(n * O * C)
        copy_run(out, dst, src, base, C)
        for o in range(1, O):
            s = base + uint64(o) * C_
            if kind == POOL_LAST_MAX:
                for c in range(C_):
                    v = src[s + c]
                    if v > out[dst + c]:
                        out[dst + c] = v
            else:
                add_run(out, dst, src, s, C)
        if kind == POOL_LAST_AVG:
            scale = out.dtype.type(1.0 / O)
            for c in range(C_):
                out[dst + c] *= scale


@njit(cache=True, nogil=True, parallel=True)
def _channel_last_pool_parallel(src, out, dims, kind, parts):
    nb = dims[0]
    for i in prange(parts):
        _channel_last_pool(src, out, dims, kind, i * nb // parts, (i + 1) * nb // parts)


def channel_last_pool(src, out, pool_type):
    """out (n, C) = the max / avg / sum of channel-last src (n, O, C) over its O positions
    (global pooling; pool_type 'max', 'avg' or 'sum')."""
    kind = {"max": POOL_LAST_MAX, "avg": POOL_LAST_AVG, "sum": POOL_LAST_SUM}[pool_type]
    nb = src.shape[0]
    args = (src.reshape(-1), out.reshape(-1), src.shape, kind)
    parts = task_count(src.size, nb)
    if parts > 1:
        _channel_last_pool_parallel(*args, parts)
    else:
        _channel_last_pool(*args, 0, nb)


# ---------------------------------------------------------------------------------------------
# A whole channel-last convolution with one parallel region: the images are split between
# Python threads, each building its patch rows, multiplying them with a one-thread BLAS product
# and applying the epilogue, chunk after chunk, with the GIL released throughout. Alternating
# numba's parallel loops with two-thread BLAS products hands the cores over three times per
# chunk, and a BLAS thread that spins on while numba's wait for a core makes every hand-over
# cost a time slice on a busy machine (measured on the ResNet block, 2 cores, load ~10: 200 ms
# per batch of 32 that way, 40-48 ms split between threads; the bits are the same).
# ---------------------------------------------------------------------------------------------
_pool = None
_pool_lock = threading.Lock()


def _workers(count):
    global _pool
    with _pool_lock:
        if _pool is None or _pool._max_workers < count:
            _pool = ThreadPoolExecutor(count, thread_name_prefix="lightmod-conv")
        return _pool


def conv_rows_workers(images, work):
    """How many threads ``conv_rows_last`` splits ``images`` images of ``work`` patch-row
    elements in all between (its ``rows`` scratch has one block per thread)."""
    if work < PARALLEL_MIN or images < 2:
        return 1
    return max(1, min(images, _threads.refresh()))


def conv_rows_last(xt, wt, y_rows, rows, dims, g, chunk, scale=None, shift=None, act=-1):
    """y_rows (n*O, F) = act(patches(xt) @ wt.T * scale[f] + shift[f]): a convolution of
    channel-last data xt (n, D, H, W, C) (``dims`` its channel-first shape, g the geometry),
    weights wt (F, K*C) in patch order, written channel-last. rows (P, chunk*O, K*C) is scratch:
    the images are split into P parts run at once, ``chunk`` images per product."""
    n = dims[0]
    parts = rows.shape[0]
    O = g[12] * g[13] * g[14]
    scale, shift, mode = _epilogue_args(y_rows.dtype, scale, shift)
    epilogue = mode > 0 or act >= 0
    flat_x = xt.reshape(n, -1)
    wt_t = wt.T

    def run(part):
        buf = rows[part]
        for n0 in range(part * n // parts, (part + 1) * n // parts, chunk):
            m = min(chunk, (part + 1) * n // parts - n0)
            patches = buf[:m * O]
            _im2row(flat_x[n0:n0 + m].reshape(-1), patches.reshape(-1),
                    (m,) + tuple(dims[1:]), g, 0, m * O)
            out = y_rows[n0 * O:(n0 + m) * O]
            np.matmul(patches, wt_t, out=out)
            if epilogue:
                _affine_act_rows(out.reshape(-1), out.shape, scale, shift, mode, act, 0,
                                 out.shape[0])

    run_parts(run, parts)


def run_parts(run, parts):
    """run(part) for part in range(parts): part 0 on this thread, the others on the pool's
    threads, with OpenBLAS set to one thread meanwhile (each part multiplies on its own)."""
    if parts == 1:
        run(0)
        return
    blas = _threads.blas_threads()
    _threads.set_blas_threads(1)
    futures = []
    try:
        futures = [_workers(parts - 1).submit(run, part) for part in range(1, parts)]
        run(0)
    finally:
        wait(futures)
        if blas is not None:
            _threads.set_blas_threads(blas)
    for future in futures:
        future.result()     # a worker's error
