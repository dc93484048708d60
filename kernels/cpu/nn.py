"""CPU kernels of the nn and loss operators (FullyConnected, activations, softmax family,
Dropout, Embedding, loss heads).

Matrix products go to BLAS, cut into parts for lightmod's own threads (kernels/cpu/gemm.py);
numba does the rest. Element-wise
kernels are written once as a ``_range`` function over [lo, hi) and launched either directly
(small arrays, or when the thread policy of ``kernels/threads.py`` says one thread) or through
a ``_par`` wrapper that splits the range over the threads with ``prange``. A ``_range``
function first takes the views ``a[lo:hi]`` and loops over them from 0: numba then knows every
index is non-negative, drops the wrap-around check and vectorises the loop (indexing
``a[i]`` with ``i`` from ``range(lo, hi)`` was 10-20x slower for ReLU). The per-element math
comes from ``kernels/scalar_nn.py``, shared with the CUDA half; ``kernels/cuda/nn.py`` exposes
the same functions with the same signatures.

Conventions: arrays are C-contiguous; shapes are already arranged by the operator (e.g. softmax
takes an (outer, axis, inner) view); ``accumulate=True`` adds into the destination (req 'add')
instead of overwriting it; ``scratch`` is a dict private to the calling node where a kernel may
keep buffers between calls.
"""
import math

import numpy as np
from numba import njit, prange

from .. import cache_stamp  # noqa: F401  (stamps the cache entries made below)
from .. import nn_math as NM
from .. import scalar_nn as S
from .. import threads as _threads
from ..math_build import compiled
from ..scalar_nn import ACTIVATIONS, LEAKY_TYPES, REGRESSION_KINDS
from . import gemm
from .blas import gemm_accumulate
from .fused import add_row_bias
from .jit import parallel_loop, task_count

__all__ = list(S.KERNEL_NAMES)



def _flat(a):
    """1-D view of a C-contiguous array (never a copy: kernels write through it)."""
    if not a.flags.c_contiguous:
        raise ValueError("nn kernels need C-contiguous arrays")
    return a.reshape(-1)


def _launch(serial, parallel, n, *args):
    """Run ``serial(*args, 0, n)`` or split [0, n) over threads with ``parallel``."""
    parts = task_count(n, n, per_thread=4)
    if parts > 1:
        parallel(*args, n, parts)
    else:
        serial(*args, 0, n)


def _launch_rows(serial, parallel, rows, work, *args):
    """Run ``serial(*args, 0, rows)`` or split [0, rows) over threads with ``parallel``,
    deciding on the total work (rows x row length)."""
    parts = task_count(work, rows, per_thread=4)
    if parts > 1:
        parallel(*args, rows, parts)
    else:
        serial(*args, 0, rows)


# ---------------------------------------------------------------------------------------------
# FullyConnected: out = x w^T + b ; dx = dy w ; dw = dy^T x ; db = sum_rows dy
# ---------------------------------------------------------------------------------------------
def _matmul_into(a, b, out, accumulate, scratch, key, trans_a=False, trans_b=False):
    """out = op(a) @ op(b) (+= with ``accumulate``): on lightmod's threads (kernels/cpu/gemm.py)
    where it can, else through numpy."""
    if gemm.product(a, b, out, trans_a, trans_b, accumulate):
        return
    a = a.T if trans_a else a
    b = b.T if trans_b else b
    if not accumulate:
        np.matmul(a, b, out=out)
        return
    if gemm_accumulate(a, b, out):      # one pass: the GEMM adds into out itself
        return
    buf = scratch.get(key)
    if buf is None or buf.shape != out.shape or buf.dtype != out.dtype:
        buf = scratch[key] = np.empty(out.shape, out.dtype)
    np.matmul(a, b, out=buf)
    out += buf


@njit(cache=True, nogil=True)
def _column_sums(dy, db, accumulate):
    if not accumulate:
        for j in range(db.shape[0]):
            db[j] = 0
    for i in range(dy.shape[0]):
        for j in range(dy.shape[1]):
            db[j] += dy[i, j]


# Which products go through the transposed form in fc_forward: few rows (a batch of at most
# FC_TRANSPOSED_MAX_ROWS), many outputs, and enough multiply-adds per output element that
# the extra pass is small beside the product. Measured at one and two threads (float32):
# 32 x 800 -> 500 0.44 -> 0.31 ms, 64 x 800 -> 500 0.68 -> 0.59 ms, 32 x 200 -> 800
# 0.20 -> 0.15 ms; 128 x 784 -> 512 no clear change; 320 x 200 -> 800 1.07 -> 1.24 ms (a loss)
# and 64 x 500 -> 10 8 -> 10 us (a loss).
FC_TRANSPOSED_MAX_ROWS = 64
FC_TRANSPOSED_MIN_HIDDEN = 128
FC_TRANSPOSED_MIN_K = 32


@parallel_loop()
def _transpose_rows_bias(t, b, out, has_bias):
    """out (N, H) = t (H, N)^T (+ b (H,)), in blocks of 16 output rows: each block reads
    16-element runs of t's rows and writes whole rows of out."""
    n, h = out.shape
    for blk in prange((n + 15) // 16):
        i0 = blk * 16
        i1 = min(n, i0 + 16)
        for j in range(h):
            bias = b[j] if has_bias else out.dtype.type(0)
            src = t[j]
            for i in range(i0, i1):
                out[i, j] = src[i] + bias


def fc_forward(x, w, b, out, scratch):
    """out (N, H) = x (N, K) @ w (H, K)^T (+ b (H,)); b may be None.

    A small batch with many outputs (see FC_TRANSPOSED_MAX_ROWS) is computed as
    t (H, N) = w @ x^T, then transposed into out with the bias added in the same pass:
    OpenBLAS (Zen 4, float32) runs x @ w^T for such shapes 15-30% slower than w @ x^T.
    """
    _threads.refresh()          # BLAS threads follow the machine's load
    n, k = x.shape
    h = w.shape[0]
    if (1 < n <= FC_TRANSPOSED_MAX_ROWS and h >= FC_TRANSPOSED_MIN_HIDDEN
            and k >= FC_TRANSPOSED_MIN_K
            and out.flags.c_contiguous and x.dtype == w.dtype == out.dtype
            and out.dtype in (np.float32, np.float64)):
        t = scratch.get("fc_t")
        if t is None or t.shape != (h, n) or t.dtype != out.dtype:
            t = scratch["fc_t"] = np.empty((h, n), out.dtype)
        _matmul_into(w, x, t, False, scratch, None, trans_b=True)
        has_bias = b is not None
        _transpose_rows_bias(out.size, t, b.reshape(-1) if has_bias else _no_bias(out.dtype),
                             out, has_bias)
        return
    _matmul_into(x, w, out, False, scratch, None, trans_b=True)
    if b is not None:
        add_row_bias(out, b.reshape(-1))


_NO_BIAS = {}


def _no_bias(dtype):
    """A 1-element stand-in for an absent bias (one compiled signature per dtype)."""
    arr = _NO_BIAS.get(dtype)
    if arr is None:
        arr = _NO_BIAS[dtype] = np.zeros(1, dtype)
    return arr


def fc_backward(x, w, dy, dx, dw, db, req_x, req_w, req_b, scratch):
    """Gradients of fc_forward; a gradient whose req is 'null' may be None."""
    _threads.refresh()
    # the two products have the same multiply-adds: one thread each (gemm.product_pair)
    paired = req_x != "null" and req_w != "null" and gemm.product_pair(
        (dy, w, dx, False, False, req_x == "add"), (dy, x, dw, True, False, req_w == "add"))
    if req_x != "null" and not paired:
        _matmul_into(dy, w, dx, req_x == "add", scratch, "fc_dx")
    if req_w != "null" and not paired:
        _matmul_into(dy, x, dw, req_w == "add", scratch, "fc_dw", trans_a=True)
    if req_b != "null":
        _column_sums(dy, db.reshape(-1), req_b == "add")


# ---------------------------------------------------------------------------------------------
# Activation (relu maps NaN to 0, as MXNet's Activation does)
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _act_fwd(x, out, code, lo, hi):
    xs, os = x[lo:hi], out[lo:hi]
    if code == S.ACT_RELU:        # the common case with its branch folded away
        for i in range(xs.size):
            os[i] = S.activation_value(xs[i], S.ACT_RELU)
    else:
        for i in range(xs.size):
            os[i] = S.activation_value(xs[i], code)


@njit(cache=True, nogil=True, parallel=True)
def _act_fwd_par(x, out, code, n, nchunks):
    step = (n + nchunks - 1) // nchunks
    for c in prange(nchunks):
        _act_fwd(x, out, code, c * step, min(n, (c + 1) * step))


@njit(cache=True, nogil=True)
def _act_bwd(x, y, dy, dx, code, accumulate, lo, hi):
    xs, ys, dys, dxs = x[lo:hi], y[lo:hi], dy[lo:hi], dx[lo:hi]
    if code == S.ACT_RELU and not accumulate:
        for i in range(xs.size):
            dxs[i] = dys[i] * S.activation_slope(xs[i], ys[i], S.ACT_RELU)
        return
    for i in range(xs.size):
        g = dys[i] * S.activation_slope(xs[i], ys[i], code)
        if accumulate:
            dxs[i] += g
        else:
            dxs[i] = g


@njit(cache=True, nogil=True, parallel=True)
def _act_bwd_par(x, y, dy, dx, code, accumulate, n, nchunks):
    step = (n + nchunks - 1) // nchunks
    for c in prange(nchunks):
        _act_bwd(x, y, dy, dx, code, accumulate, c * step, min(n, (c + 1) * step))


def _sigmoid_numpy(x, out):
    np.negative(x, out=out)
    np.exp(out, out=out)            # overflows to inf for x < -88: 1 / (1 + inf) = 0
    np.add(out, 1, out=out)
    np.reciprocal(out, out=out)


# Activations whose forward runs on numpy's SIMD loops: numba has no vectorised exp / tanh on
# the CPU (that needs Intel's SVML), and numpy's are 3-6x faster (sigmoid on 128x512 float32:
# 0.13 ms vs 0.78 ms). The values agree with the scalar_nn formulas to float32 round-off.
_NUMPY_FORWARD = {"sigmoid": _sigmoid_numpy, "tanh": lambda x, out: np.tanh(x, out=out)}


def activation_forward(x, out, act_type):
    numpy_forward = _NUMPY_FORWARD.get(act_type)
    if numpy_forward is not None:
        with np.errstate(over="ignore"):
            numpy_forward(x, out)
        return
    xf = _flat(x)
    _launch(_act_fwd, _act_fwd_par, xf.size, xf, _flat(out), ACTIVATIONS[act_type])


def activation_backward(x, y, dy, dx, act_type, accumulate=False):
    xf = _flat(x)
    _launch(_act_bwd, _act_bwd_par, xf.size, xf, _flat(y), _flat(dy), _flat(dx),
            ACTIVATIONS[act_type], accumulate)


# ---------------------------------------------------------------------------------------------
# LeakyReLU: leaky / elu / selu / gelu element-wise, prelu per channel, rrelu with a mask
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _leaky_fwd(x, out, code, slope, lo, hi):
    xs, os = x[lo:hi], out[lo:hi]
    for i in range(xs.size):
        os[i] = S.leaky_value(xs[i], code, slope)


@njit(cache=True, nogil=True, parallel=True)
def _leaky_fwd_par(x, out, code, slope, n, nchunks):
    step = (n + nchunks - 1) // nchunks
    for c in prange(nchunks):
        _leaky_fwd(x, out, code, slope, c * step, min(n, (c + 1) * step))


@njit(cache=True, nogil=True)
def _leaky_bwd(x, y, dy, dx, code, slope, accumulate, lo, hi):
    xs, ys, dys, dxs = x[lo:hi], y[lo:hi], dy[lo:hi], dx[lo:hi]
    for i in range(xs.size):
        g = dys[i] * S.leaky_slope(xs[i], ys[i], code, slope)
        if accumulate:
            dxs[i] += g
        else:
            dxs[i] = g


@njit(cache=True, nogil=True, parallel=True)
def _leaky_bwd_par(x, y, dy, dx, code, slope, accumulate, n, nchunks):
    step = (n + nchunks - 1) // nchunks
    for c in prange(nchunks):
        _leaky_bwd(x, y, dy, dx, code, slope, accumulate, c * step, min(n, (c + 1) * step))


def leaky_relu_forward(x, out, act_type, slope):
    xf = _flat(x)
    _launch(_leaky_fwd, _leaky_fwd_par, xf.size, xf, _flat(out), LEAKY_TYPES[act_type],
            float(slope))


def leaky_relu_backward(x, y, dy, dx, act_type, slope, accumulate=False):
    xf = _flat(x)
    _launch(_leaky_bwd, _leaky_bwd_par, xf.size, xf, _flat(y), _flat(dy), _flat(dx),
            LEAKY_TYPES[act_type], float(slope), accumulate)


@njit(cache=True, nogil=True)
def _prelu_fwd(x, gamma, out, lo, hi):
    # x, out: (outer, C, inner); gamma: (C,) or (1,)
    per_channel = gamma.shape[0] > 1
    for o in range(lo, hi):
        for c in range(x.shape[1]):
            g = gamma[c] if per_channel else gamma[0]
            for i in range(x.shape[2]):
                v = x[o, c, i]
                out[o, c, i] = v if v > 0 else g * v


@njit(cache=True, nogil=True, parallel=True)
def _prelu_fwd_par(x, gamma, out, n, nchunks):
    step = (n + nchunks - 1) // nchunks
    for c in prange(nchunks):
        _prelu_fwd(x, gamma, out, c * step, min(n, (c + 1) * step))


@njit(cache=True, nogil=True)
def _prelu_bwd(x, gamma, dy, dx, dgamma, want_x, acc_x, want_g, acc_g):
    outer, nc, inner = x.shape
    per_channel = gamma.shape[0] > 1
    total = 0.0
    for c in range(nc):
        g = gamma[c] if per_channel else gamma[0]
        s = 0.0
        for o in range(outer):
            for i in range(inner):
                v = x[o, c, i]
                d = dy[o, c, i]
                if v > 0:
                    gx = d
                else:
                    gx = g * d
                    s += v * d
                if want_x:
                    if acc_x:
                        dx[o, c, i] += gx
                    else:
                        dx[o, c, i] = gx
        if want_g and per_channel:
            if acc_g:
                dgamma[c] += s
            else:
                dgamma[c] = s
        total += s
    if want_g and not per_channel:
        if acc_g:
            dgamma[0] += total
        else:
            dgamma[0] = total


def prelu_forward(x, gamma, out):
    """x, out viewed as (outer, C, inner); gamma (C,) or (1,), broadcast over the rest."""
    _launch_rows(_prelu_fwd, _prelu_fwd_par, x.shape[0], x.size, x, gamma.reshape(-1), out)


def prelu_backward(x, gamma, dy, dx, dgamma, req_x, req_gamma):
    """dx = dy * (x > 0 ? 1 : gamma); dgamma = sum over x <= 0 of x * dy (per channel)."""
    want_x, want_g = req_x != "null", req_gamma != "null"
    dx = dx if want_x else dy
    dgamma = dgamma.reshape(-1) if want_g else gamma.reshape(-1)
    _prelu_bwd(x, gamma.reshape(-1), dy, dx, dgamma, want_x, req_x == "add",
               want_g, req_gamma == "add")


@njit(cache=True, nogil=True)
def _rrelu_fwd(x, u, lower, width, mask, out, lo, hi):
    xs, us, ms, os = x[lo:hi], u[lo:hi], mask[lo:hi], out[lo:hi]
    for i in range(xs.size):
        m = lower + us[i] * width
        ms[i] = m
        v = xs[i]
        os[i] = v if v > 0 else m * v


@njit(cache=True, nogil=True, parallel=True)
def _rrelu_fwd_par(x, u, lower, width, mask, out, n, nchunks):
    step = (n + nchunks - 1) // nchunks
    for c in prange(nchunks):
        _rrelu_fwd(x, u, lower, width, mask, out, c * step, min(n, (c + 1) * step))


@njit(cache=True, nogil=True)
def _rrelu_bwd(y, mask, dy, dx, accumulate, lo, hi):
    ys, ms, dys, dxs = y[lo:hi], mask[lo:hi], dy[lo:hi], dx[lo:hi]
    for i in range(ys.size):
        g = dys[i] if ys[i] > 0 else dys[i] * ms[i]
        if accumulate:
            dxs[i] += g
        else:
            dxs[i] = g


@njit(cache=True, nogil=True, parallel=True)
def _rrelu_bwd_par(y, mask, dy, dx, accumulate, n, nchunks):
    step = (n + nchunks - 1) // nchunks
    for c in prange(nchunks):
        _rrelu_bwd(y, mask, dy, dx, accumulate, c * step, min(n, (c + 1) * step))


def rrelu_forward(x, u, lower, upper, mask, out):
    """Training rrelu: slope = lower + u*(upper-lower) per element (u: host uniforms in [0,1))."""
    xf = _flat(x)
    _launch(_rrelu_fwd, _rrelu_fwd_par, xf.size, xf, _flat(u), float(lower),
            float(upper - lower), _flat(mask), _flat(out))


def rrelu_backward(y, mask, dy, dx, accumulate=False):
    yf = _flat(y)
    _launch(_rrelu_bwd, _rrelu_bwd_par, yf.size, yf, _flat(mask), _flat(dy), _flat(dx),
            accumulate)


# ---------------------------------------------------------------------------------------------
# Dropout
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _dropout_fwd(x, u, shape, ustrides, keep, mask, out, lo, hi):
    scale = 1.0 / keep if keep > 0 else 0.0
    full = u.size == x.size
    xs, ms, os = x[lo:hi], mask[lo:hi], out[lo:hi]
    for t in range(xs.size):
        i = lo + t
        j = i if full else S.broadcast_offset(i, shape, ustrides)
        m = scale if u[j] < keep else 0.0
        ms[t] = m
        os[t] = xs[t] * m


@njit(cache=True, nogil=True, parallel=True)
def _dropout_fwd_par(x, u, shape, ustrides, keep, mask, out, n, nchunks):
    step = (n + nchunks - 1) // nchunks
    for c in prange(nchunks):
        _dropout_fwd(x, u, shape, ustrides, keep, mask, out, c * step, min(n, (c + 1) * step))


@njit(cache=True, nogil=True)
def _mul_into(a, b, dst, accumulate, lo, hi):
    av, bv, dv = a[lo:hi], b[lo:hi], dst[lo:hi]
    for i in range(av.size):
        if accumulate:
            dv[i] += av[i] * bv[i]
        else:
            dv[i] = av[i] * bv[i]


@njit(cache=True, nogil=True, parallel=True)
def _mul_into_par(a, b, dst, accumulate, n, nchunks):
    step = (n + nchunks - 1) // nchunks
    for c in prange(nchunks):
        _mul_into(a, b, dst, accumulate, c * step, min(n, (c + 1) * step))


def dropout_forward(x, u, p, mask, out):
    """mask = (u < 1-p) / (1-p) broadcast to x's shape; out = x * mask.

    ``u`` is a host array of uniforms in [0, 1) with x's ndim (1 on the axes the mask is
    shared over).
    """
    xf = _flat(x)
    shape = tuple(int(d) for d in x.shape)
    ustrides = S.broadcast_strides(shape, u.shape)
    _launch(_dropout_fwd, _dropout_fwd_par, xf.size, xf, _flat(np.ascontiguousarray(u)),
            shape, ustrides, 1.0 - float(p), _flat(mask), _flat(out))


def dropout_backward(mask, dy, dx, accumulate=False):
    mf = _flat(mask)
    _launch(_mul_into, _mul_into_par, mf.size, _flat(dy), mf, _flat(dx), accumulate)


# ---------------------------------------------------------------------------------------------
# Embedding
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _emb_fwd(idx, weight, out, lo, hi):
    vocab = weight.shape[0]
    for i in range(lo, hi):
        j = S.clip_index(idx[i], vocab)
        for d in range(weight.shape[1]):
            out[i, d] = weight[j, d]


@njit(cache=True, nogil=True, parallel=True)
def _emb_fwd_par(idx, weight, out, n, nchunks):
    step = (n + nchunks - 1) // nchunks
    for c in prange(nchunks):
        _emb_fwd(idx, weight, out, c * step, min(n, (c + 1) * step))


@njit(cache=True, nogil=True)
def _emb_bwd(idx, dy, dweight, accumulate):
    vocab = dweight.shape[0]
    if not accumulate:
        dweight[:] = 0
    for i in range(idx.shape[0]):
        j = S.clip_index(idx[i], vocab)
        for d in range(dweight.shape[1]):
            dweight[j, d] += dy[i, d]


def embedding_forward(idx, weight, out):
    """out (n, D) = weight[clip(int(idx))] for idx flattened to (n,)."""
    idx = _flat(idx)
    _launch_rows(_emb_fwd, _emb_fwd_par, idx.size, idx.size * weight.shape[1], idx, weight, out)


def embedding_backward(idx, dy, dweight, accumulate=False):
    """dweight[clip(int(idx[i]))] += dy[i] (rows scattered, duplicates summed)."""
    _emb_bwd(_flat(idx), dy, dweight, accumulate)


# ---------------------------------------------------------------------------------------------
# softmax / log_softmax over the middle axis of an (outer, L, inner) view
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _softmax_rows(x, out, inv_t, use_log, length, has_length, lo, hi):
    inner = x.shape[2]
    for r in range(lo, hi):
        o = r // inner
        j = r - o * inner
        n = S.row_length(length[r if has_length else 0], has_length, x.shape[1])
        for k in range(n, x.shape[1]):
            out[o, k, j] = 0
        if n == 0:
            continue
        m = -np.inf
        for k in range(n):
            v = x[o, k, j] * inv_t
            if v > m:
                m = v
        s = 0.0
        if use_log:
            for k in range(n):
                s += math.exp(x[o, k, j] * inv_t - m)
            shift = m + math.log(s)
            for k in range(n):
                out[o, k, j] = x[o, k, j] * inv_t - shift
        else:
            for k in range(n):          # keep the exponentials: one exp per element
                e = math.exp(x[o, k, j] * inv_t - m)
                out[o, k, j] = e
                s += e
            inv_s = 1.0 / s
            for k in range(n):
                out[o, k, j] *= inv_s


@njit(cache=True, nogil=True, parallel=True)
def _softmax_rows_par(x, out, inv_t, use_log, length, has_length, n, nchunks):
    step = (n + nchunks - 1) // nchunks
    for c in prange(nchunks):
        _softmax_rows(x, out, inv_t, use_log, length, has_length, c * step,
                      min(n, (c + 1) * step))


@njit(cache=True, nogil=True)
def _softmax_grad_rows(y, dy, dx, inv_t, use_log, accumulate, length, has_length, lo, hi):
    inner = y.shape[2]
    for r in range(lo, hi):
        o = r // inner
        j = r - o * inner
        n = S.row_length(length[r if has_length else 0], has_length, y.shape[1])
        s = 0.0
        for k in range(n):
            s += S.softmax_grad_term(dy[o, k, j], y[o, k, j], use_log)
        for k in range(y.shape[1]):
            g = 0.0 if k >= n else S.softmax_grad_value(dy[o, k, j], y[o, k, j], s, inv_t, use_log)
            if accumulate:
                dx[o, k, j] += g
            else:
                dx[o, k, j] = g


@njit(cache=True, nogil=True, parallel=True)
def _softmax_grad_rows_par(y, dy, dx, inv_t, use_log, accumulate, length, has_length, n,
                           nchunks):
    step = (n + nchunks - 1) // nchunks
    for c in prange(nchunks):
        _softmax_grad_rows(y, dy, dx, inv_t, use_log, accumulate, length, has_length,
                           c * step, min(n, (c + 1) * step))


@njit(cache=True, nogil=True)
def _shifted_rows(x, out, inv_t, lo, hi):
    """out[r] = x[r] * inv_t - max(x[r] * inv_t) for the rows [lo, hi) of (rows, L) arrays."""
    for r in range(lo, hi):
        m = -np.inf
        for k in range(x.shape[1]):
            v = x[r, k] * inv_t
            if v > m:
                m = v
        for k in range(x.shape[1]):
            out[r, k] = x[r, k] * inv_t - m


@njit(cache=True, nogil=True, parallel=True)
def _shifted_rows_par(x, out, inv_t, n, nchunks):
    step = (n + nchunks - 1) // nchunks
    for c in prange(nchunks):
        _shifted_rows(x, out, inv_t, c * step, min(n, (c + 1) * step))


@njit(cache=True, nogil=True)
def _normalised_rows(out, lo, hi):
    """Divide each row [lo, hi) of out by its sum (added up in float64)."""
    for r in range(lo, hi):
        s = 0.0
        for k in range(out.shape[1]):
            s += out[r, k]
        inv_s = 1.0 / s
        for k in range(out.shape[1]):
            out[r, k] *= inv_s


@njit(cache=True, nogil=True, parallel=True)
def _normalised_rows_par(out, n, nchunks):
    step = (n + nchunks - 1) // nchunks
    for c in prange(nchunks):
        _normalised_rows(out, c * step, min(n, (c + 1) * step))


def _softmax_contiguous_rows(x, out, inv_t):
    """softmax of the rows of C-contiguous (rows, L) arrays in three passes: the shifted
    values, numpy's exp in place (vectorised, where numba's scalar exp is not: about 4x faster
    on a (1280, 1000) float32 head) and the division by the row sums."""
    rows = x.shape[0]
    _launch_rows(_shifted_rows, _shifted_rows_par, rows, x.size, x, out, inv_t)
    np.exp(out, out=out)
    _launch_rows(_normalised_rows, _normalised_rows_par, rows, out.size, out)


def softmax_forward(x, out, temperature=1.0, use_log=False, length=None):
    """(log-)softmax of x / temperature along axis 1 of (outer, L, inner) views.

    ``length`` (outer*inner values, or None): only the first int(length) elements of each row
    take part; the rest of the row is set to 0.
    """
    if (x.shape[2] == 1 and length is None and not use_log and x.shape[1] > 0
            and x.dtype == out.dtype and x.dtype.kind == "f" and x.flags.c_contiguous
            and out.flags.c_contiguous):
        _softmax_contiguous_rows(x.reshape(x.shape[0], x.shape[1]),
                                 out.reshape(out.shape[0], out.shape[1]),
                                 1.0 / float(temperature))
        return
    rows = x.shape[0] * x.shape[2]
    has_length = length is not None       # without lengths x stands in (element 0 is read)
    _launch_rows(_softmax_rows, _softmax_rows_par, rows, x.size, x, out,
                 1.0 / float(temperature), use_log,
                 _flat(length if has_length else x), has_length)


def softmax_backward(y, dy, dx, temperature=1.0, use_log=False, accumulate=False, length=None):
    """Gradient of softmax_forward from its output y."""
    rows = y.shape[0] * y.shape[2]
    has_length = length is not None
    _launch_rows(_softmax_grad_rows, _softmax_grad_rows_par, rows, y.size, y, dy, dx,
                 1.0 / float(temperature), use_log, accumulate,
                 _flat(length if has_length else y), has_length)


# ---------------------------------------------------------------------------------------------
# Loss heads
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _so_grad_rows(prob, label, ograd, grad, ignore, use_ignore, alpha, scale, use_ograd,
                  accumulate, lo, hi):
    ncls = prob.shape[1]
    inner = prob.shape[2]
    off_target = alpha / (ncls - 1) if ncls > 1 else 0.0
    on_target = 1.0 - alpha
    for r in range(lo, hi):
        o = r // inner
        j = r - o * inner
        k = int(label[r])
        skip = use_ignore and k == ignore
        for c in range(ncls):
            if skip:
                g = 0.0
            else:
                g = (prob[o, c, j] - (on_target if c == k else off_target)) * scale
                if use_ograd:
                    g *= ograd[o, c, j]
            if accumulate:
                grad[o, c, j] += g
            else:
                grad[o, c, j] = g


@njit(cache=True, nogil=True, parallel=True)
def _so_grad_rows_par(prob, label, ograd, grad, ignore, use_ignore, alpha, scale, use_ograd,
                      accumulate, n, nchunks):
    step = (n + nchunks - 1) // nchunks
    for c in prange(nchunks):
        _so_grad_rows(prob, label, ograd, grad, ignore, use_ignore, alpha, scale, use_ograd,
                      accumulate, c * step, min(n, (c + 1) * step))


def softmax_output_backward(prob, label, ograd, grad, ignore_label, use_ignore, smooth_alpha,
                            scale, use_ograd, accumulate=False):
    """SoftmaxOutput's gradient on (outer, C, inner) views; row r = o*inner + j reads label[r].

    grad = (prob - target) * scale [* ograd], target 1-alpha on int(label), alpha/(C-1)
    elsewhere (no 1 at all for out-of-range labels); rows whose label is ignore_label are 0
    when use_ignore. ``ograd`` is read only when use_ograd (pass prob otherwise).
    """
    rows = prob.shape[0] * prob.shape[2]
    _launch_rows(_so_grad_rows, _so_grad_rows_par, rows, prob.size, prob, _flat(label), ograd,
                 grad, int(ignore_label), bool(use_ignore), float(smooth_alpha), float(scale),
                 bool(use_ograd), accumulate)


@njit(cache=True, nogil=True)
def _reg_bwd(out, label, ograd, grad, kind, scale, use_ograd, accumulate, lo, hi):
    os, ls, ogs, gs = out[lo:hi], label[lo:hi], ograd[lo:hi], grad[lo:hi]
    for i in range(os.size):
        g = S.regression_diff(os[i], ls[i], kind) * scale
        if use_ograd:
            g *= ogs[i]
        if accumulate:
            gs[i] += g
        else:
            gs[i] = g


@njit(cache=True, nogil=True, parallel=True)
def _reg_bwd_par(out, label, ograd, grad, kind, scale, use_ograd, accumulate, n, nchunks):
    step = (n + nchunks - 1) // nchunks
    for c in prange(nchunks):
        _reg_bwd(out, label, ograd, grad, kind, scale, use_ograd, accumulate, c * step,
                 min(n, (c + 1) * step))


def regression_backward(out, label, ograd, grad, kind, scale, use_ograd=False,
                        accumulate=False):
    """grad = f(out - label) * scale [* ograd] element-wise; kind 'diff' or 'sign'."""
    of = _flat(out)
    _launch(_reg_bwd, _reg_bwd_par, of.size, of, _flat(label), _flat(ograd), _flat(grad),
            REGRESSION_KINDS[kind], float(scale), bool(use_ograd), accumulate)


@njit(cache=True, nogil=True)
def _count_label_equal(label, value):
    n = 0
    for i in range(label.size):
        if int(label[i]) == value:
            n += 1
    return n


@njit(cache=True, nogil=True)
def _count_greater(x, thresh):
    n = 0
    for i in range(x.size):
        if x[i] > thresh:
            n += 1
    return n


def count_label_equal(label, value):
    """How many labels have int(label) == int(value) (SoftmaxOutput 'valid')."""
    return int(_count_label_equal(_flat(label), int(value)))


def count_greater(x, thresh):
    """How many elements exceed thresh (MakeLoss 'valid')."""
    return int(_count_greater(_flat(x), float(thresh)))


@njit(cache=True, nogil=True)
def _sl1_fwd(x, out, sigma2, lo, hi):
    xs, os = x[lo:hi], out[lo:hi]
    for i in range(xs.size):
        os[i] = S.smooth_l1_value(xs[i], sigma2)


@njit(cache=True, nogil=True, parallel=True)
def _sl1_fwd_par(x, out, sigma2, n, nchunks):
    step = (n + nchunks - 1) // nchunks
    for c in prange(nchunks):
        _sl1_fwd(x, out, sigma2, c * step, min(n, (c + 1) * step))


@njit(cache=True, nogil=True)
def _sl1_bwd(x, dy, dx, sigma2, accumulate, lo, hi):
    xs, dys, dxs = x[lo:hi], dy[lo:hi], dx[lo:hi]
    for i in range(xs.size):
        g = dys[i] * S.smooth_l1_slope(xs[i], sigma2)
        if accumulate:
            dxs[i] += g
        else:
            dxs[i] = g


@njit(cache=True, nogil=True, parallel=True)
def _sl1_bwd_par(x, dy, dx, sigma2, accumulate, n, nchunks):
    step = (n + nchunks - 1) // nchunks
    for c in prange(nchunks):
        _sl1_bwd(x, dy, dx, sigma2, accumulate, c * step, min(n, (c + 1) * step))


def smooth_l1_forward(x, out, sigma):
    xf = _flat(x)
    _launch(_sl1_fwd, _sl1_fwd_par, xf.size, xf, _flat(out), float(sigma) ** 2)


def smooth_l1_backward(x, dy, dx, sigma, accumulate=False):
    xf = _flat(x)
    _launch(_sl1_bwd, _sl1_bwd_par, xf.size, xf, _flat(dy), _flat(dx), float(sigma) ** 2,
            accumulate)


# the row math of kernels/nn_math.py, inlined into the loops below
K = compiled(NM, njit(cache=True, inline="always"))


@njit(cache=True, nogil=True)
def _softmax_ce_fwd(x, label, out):
    total = 0.0
    for r in range(x.shape[0]):
        total += K.softmax_ce_row_loss(x, label, r, x.shape[1])
    out[0] = total


@njit(cache=True, nogil=True)
def _softmax_ce_bwd(x, label, ograd, dx, accumulate):
    for r in range(x.shape[0]):
        K.softmax_ce_row_grad(x, label, dx, r, x.shape[1], ograd[0], accumulate)


def softmax_ce_forward(x, label, out):
    """out (1,) = sum_r -log softmax(x[r])[label[r]] for x (N, C), label (N,)."""
    _softmax_ce_fwd(x, _flat(label), out)


def softmax_ce_backward(x, label, ograd, dx, accumulate=False):
    """dx = (softmax(x) - onehot(label)) * ograd[0]."""
    _softmax_ce_bwd(x, _flat(label), ograd, dx, accumulate)
