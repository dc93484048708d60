"""CPU kernels for the normalisation operators: BatchNorm, InstanceNorm, LayerNorm,
L2Normalization and LRN.

Arrays arrive as 3-D views ``(outer, A, inner)`` around the axis that matters (the channel
axis for BatchNorm, the normalised axis for LayerNorm / L2Normalization, channels for LRN).
Statistics are accumulated in float64 and variances are computed in two passes (mean first),
which keeps float32 results within rounding of MXNet's. Gradient requests are passed as ints:
0 null, 1 write, 2 add (see ``req_code``); the per-channel gradient math is in
``kernels/scalar_norm.py``, shared with the CUDA half.
"""
import math

from numba import njit, prange, uint64

from .. import cache_stamp  # noqa: F401  (stamps the cache entries made below)
from ..scalar_norm import bn_input_grad_coefficients, lrn_window, req_code, store_req  # noqa: F401
from .jit import parallel_loop

__all__ = ["req_code", "bn_forward", "bn_backward", "bn_update_moving", "instance_norm_forward",
           "instance_norm_backward", "row_norm_forward", "row_norm_backward",
           "param_grad_columns", "lrn_forward", "lrn_backward"]

# one element of these loops costs about half an element-wise add (the parallel threshold
# doubles)
_COST = 0.5


# ---------------------------------------------------------------------------------------------
# Runs of flat arrays with unsigned offsets (vectorised by LLVM; see kernels/cpu/conv.py). The
# sums are float64 with fastmath so they vectorise too (reassociated: the rounding differs
# from a sequential sum by far less than float32's).
# ---------------------------------------------------------------------------------------------
@njit(cache=True, inline="always", fastmath=True)
def _run_sum(src, s, n):
    s = uint64(s)
    acc = 0.0
    for i in range(uint64(n)):
        acc += src[s + i]
    return acc


@njit(cache=True, inline="always", fastmath=True)
def _run_sq_dev(src, s, n, mean):
    s = uint64(s)
    acc = 0.0
    for i in range(uint64(n)):
        d = src[s + i] - mean
        acc += d * d
    return acc


@njit(cache=True, inline="always", fastmath=True)
def _run_dot_dev(a, b, s, n, mean):
    """sum of a[i] * (b[i] - mean) over a run."""
    s = uint64(s)
    acc = 0.0
    for i in range(uint64(n)):
        acc += a[s + i] * (b[s + i] - mean)
    return acc


@njit(cache=True, inline="always")
def _store3(dst, a, b, c, value, accumulate):
    """dst[a, b, c] += value (accumulate) or = value."""
    if accumulate:
        dst[a, b, c] += value
    else:
        dst[a, b, c] = value


@njit(cache=True, inline="always")
def _mean_var(v):
    """Mean and biased variance of the 1-d array v, in float64 and two passes (mean first)."""
    n = v.shape[0]
    s = 0.0
    for i in range(n):
        s += v[i]
    mean = s / n
    ss = 0.0
    for i in range(n):
        d = v[i] - mean
        ss += d * d
    return mean, ss / n


@njit(cache=True, inline="always")
def _run_affine(dst, src, s, n, scale, shift, accumulate):
    s = uint64(s)
    if accumulate:
        for i in range(uint64(n)):
            dst[s + i] += src[s + i] * scale + shift
    else:
        for i in range(uint64(n)):
            dst[s + i] = src[s + i] * scale + shift


# ---------------------------------------------------------------------------------------------
# BatchNorm: statistics per channel c of x (outer, C, inner), flattened; the elements of
# channel c are `outer` runs of `inner` contiguous elements
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _bn_forward_channel(x, y, dims, gamma, beta, mean_out, invstd_out, var_out, moving_mean,
                        moving_var, eps, batch_stats, fix_gamma, c):
    outer, C, inner = dims
    if batch_stats:
        s = 0.0
        for o in range(outer):
            s += _run_sum(x, (o * C + c) * inner, inner)
        count = outer * inner
        mean = s / count
        ss = 0.0
        for o in range(outer):
            ss += _run_sq_dev(x, (o * C + c) * inner, inner, mean)
        var = ss / count
        var_out[c] = var
    else:
        mean = float(moving_mean[c])
        var = float(moving_var[c])
    invstd = 1.0 / math.sqrt(var + eps)
    mean_out[c] = mean
    invstd_out[c] = invstd
    g = 1.0 if fix_gamma else float(gamma[c])
    scale = x.dtype.type(g * invstd)
    shift = x.dtype.type(float(beta[c]) - mean * g * invstd)
    for o in range(outer):
        _run_affine(y, x, (o * C + c) * inner, inner, scale, shift, False)


@parallel_loop(cost=_COST)
def _bn_forward(x, y, dims, gamma, beta, mean_out, invstd_out, var_out, moving_mean, moving_var,
                eps, batch_stats, fix_gamma):
    for c in prange(dims[1]):
        _bn_forward_channel(x, y, dims, gamma, beta, mean_out, invstd_out, var_out, moving_mean,
                            moving_var, eps, batch_stats, fix_gamma, c)


def bn_forward(x, y, gamma, beta, mean_out, invstd_out, var_out, moving_mean, moving_var, eps,
               batch_stats, fix_gamma):
    """y = (x - mean) * invstd * gamma + beta per channel of x (outer, C, inner).

    batch_stats: mean / biased variance of the batch (var_out receives the variance), else the
    moving statistics. mean_out / invstd_out receive the statistics used (MXNet's hidden
    outputs: the mean and 1 / sqrt(var + eps)). fix_gamma uses 1 for gamma.
    """
    args = (x.reshape(-1), y.reshape(-1), x.shape, gamma, beta, mean_out, invstd_out, var_out,
            moving_mean, moving_var, float(eps), bool(batch_stats), bool(fix_gamma))
    _bn_forward(x.size if x.shape[1] > 1 else 0, *args)


@njit(cache=True, nogil=True)
def _bn_backward_channel(x, dy, dx, dims, gamma, mean_in, invstd_in, dgamma, dbeta, batch_stats,
                         fix_gamma, req_x, req_g, req_b, c):
    outer, C, inner = dims
    mean = float(mean_in[c])
    invstd = float(invstd_in[c])
    sdy = 0.0
    sdyx = 0.0
    for o in range(outer):
        base = (o * C + c) * inner
        sdy += _run_sum(dy, base, inner)
        sdyx += _run_dot_dev(dy, x, base, inner, mean)
    sdyx *= invstd  # sum of dy * xhat
    store_req(dgamma, c, 0.0 if fix_gamma else sdyx, req_g)
    store_req(dbeta, c, sdy, req_b)
    if req_x == 0:
        return
    a, b, shift = bn_input_grad_coefficients(sdy, sdyx, outer * inner, mean, invstd,
                                             1.0 if fix_gamma else float(gamma[c]), batch_stats)
    a, b, shift = x.dtype.type(a), x.dtype.type(b), x.dtype.type(shift)
    for o in range(outer):
        base = uint64((o * C + c) * inner)
        if req_x == 2:
            for i in range(uint64(inner)):
                dx[base + i] += a * dy[base + i] + b * x[base + i] + shift
        else:
            for i in range(uint64(inner)):
                dx[base + i] = a * dy[base + i] + b * x[base + i] + shift


@parallel_loop(cost=_COST)
def _bn_backward(x, dy, dx, dims, gamma, mean_in, invstd_in, dgamma, dbeta, batch_stats,
                 fix_gamma, req_x, req_g, req_b):
    for c in prange(dims[1]):
        _bn_backward_channel(x, dy, dx, dims, gamma, mean_in, invstd_in, dgamma, dbeta,
                             batch_stats, fix_gamma, req_x, req_g, req_b, c)


def bn_backward(x, dy, dx, gamma, mean, invstd, dgamma, dbeta, batch_stats, fix_gamma, req_x,
                req_g, req_b):
    """Gradients of bn_forward; absent gradients may be passed as any array with req 0."""
    args = (x.reshape(-1), dy.reshape(-1), dx.reshape(-1), x.shape, gamma, mean, invstd, dgamma,
            dbeta, bool(batch_stats), bool(fix_gamma), req_x, req_g, req_b)
    _bn_backward(x.size if x.shape[1] > 1 else 0, *args)


@njit(cache=True, nogil=True)
def _bn_update_moving(moving_mean, moving_var, mean, var, momentum):
    for c in range(moving_mean.shape[0]):
        moving_mean[c] = moving_mean[c] * momentum + mean[c] * (1.0 - momentum)
        moving_var[c] = moving_var[c] * momentum + var[c] * (1.0 - momentum)


def bn_update_moving(moving_mean, moving_var, mean, var, momentum):
    """moving = moving * momentum + batch * (1 - momentum), for mean and variance."""
    _bn_update_moving(moving_mean, moving_var, mean, var, float(momentum))


# ---------------------------------------------------------------------------------------------
# InstanceNorm: statistics per (n, c) of x (N, C, S); gamma / beta per channel
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _in_forward_channel(x, y, gamma, beta, mean_out, var_out, eps, c):
    N, C, S = x.shape
    for n in range(N):
        mean, var = _mean_var(x[n, c])
        mean_out[n, c] = mean
        var_out[n, c] = var
        scale = float(gamma[c]) / math.sqrt(var + eps)
        shift = float(beta[c]) - mean * scale
        for i in range(S):
            y[n, c, i] = x[n, c, i] * scale + shift


@parallel_loop(cost=_COST)
def _in_forward(x, y, gamma, beta, mean_out, var_out, eps):
    for c in prange(x.shape[1]):
        _in_forward_channel(x, y, gamma, beta, mean_out, var_out, eps, c)


def instance_norm_forward(x, y, gamma, beta, mean_out, var_out, eps):
    """y = (x - mean) / sqrt(var + eps) * gamma[c] + beta[c], statistics per (n, c) over S."""
    args = (x, y, gamma, beta, mean_out, var_out, float(eps))
    _in_forward(x.size if x.shape[1] > 1 else 0, *args)


@njit(cache=True, nogil=True)
def _in_backward_channel(x, dy, dx, gamma, mean_in, var_in, dgamma, dbeta, eps, req_x, req_g,
                         req_b, c):
    N, C, S = x.shape
    g = float(gamma[c])
    tg = 0.0
    tb = 0.0
    for n in range(N):
        mean = float(mean_in[n, c])
        invstd = 1.0 / math.sqrt(float(var_in[n, c]) + eps)
        sdy = 0.0
        sdyx = 0.0
        for i in range(S):
            d = float(dy[n, c, i])
            sdy += d
            sdyx += d * (x[n, c, i] - mean) * invstd
        tg += sdyx
        tb += sdy
        if req_x != 0:
            mdy = sdy / S
            mdyx = sdyx / S
            for i in range(S):
                xhat = (x[n, c, i] - mean) * invstd
                v = g * invstd * (dy[n, c, i] - mdy - xhat * mdyx)
                _store3(dx, n, c, i, v, req_x == 2)
    store_req(dgamma, c, tg, req_g)
    store_req(dbeta, c, tb, req_b)


@parallel_loop(cost=_COST)
def _in_backward(x, dy, dx, gamma, mean_in, var_in, dgamma, dbeta, eps, req_x, req_g, req_b):
    for c in prange(x.shape[1]):
        _in_backward_channel(x, dy, dx, gamma, mean_in, var_in, dgamma, dbeta, eps, req_x,
                             req_g, req_b, c)


def instance_norm_backward(x, dy, dx, gamma, mean, var, dgamma, dbeta, eps, req_x, req_g, req_b):
    args = (x, dy, dx, gamma, mean, var, dgamma, dbeta, float(eps), req_x, req_g, req_b)
    _in_backward(x.size if x.shape[1] > 1 else 0, *args)


# ---------------------------------------------------------------------------------------------
# Row normalisation over the middle axis A of x (outer, A, inner): LayerNorm (mode 0,
# (x - mean) / sqrt(var + eps) * gamma[a] + beta[a]) and L2Normalization (mode 1,
# x / sqrt(sum x^2 + eps)). Row r = o * inner + i; stat1 / stat2 are (outer * inner,).
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _row_forward(x, y, gamma, beta, stat1, stat2, eps, mode, r):
    outer, A, inner = x.shape
    o = r // inner
    i = r % inner
    if mode == 0:
        mean, var = _mean_var(x[o, :, i])
        std = math.sqrt(var + eps)
        stat1[r] = mean
        stat2[r] = std
        inv = 1.0 / std
        for a in range(A):
            y[o, a, i] = (x[o, a, i] - mean) * inv * gamma[a] + beta[a]
    else:
        ss = 0.0
        for a in range(A):
            v = float(x[o, a, i])
            ss += v * v
        norm = math.sqrt(ss + eps)
        stat1[r] = norm
        inv = 1.0 / norm
        for a in range(A):
            y[o, a, i] = x[o, a, i] * inv


@parallel_loop(cost=_COST)
def _rows_forward(x, y, gamma, beta, stat1, stat2, eps, mode):
    for r in prange(x.shape[0] * x.shape[2]):
        _row_forward(x, y, gamma, beta, stat1, stat2, eps, mode, r)


def row_norm_forward(x, y, gamma, beta, stat1, stat2, eps, mode):
    """Normalise each row of x (outer, A, inner) over A; mode 0 LayerNorm, 1 L2Normalization.

    LayerNorm writes the row means to stat1 and sqrt(var + eps) to stat2; L2Normalization
    writes the row norms sqrt(sum x^2 + eps) to stat1 (gamma, beta, stat2 unused).
    """
    args = (x, y, gamma, beta, stat1, stat2, float(eps), int(mode))
    _rows_forward(x.size if x.shape[0] * x.shape[2] > 1 else 0, *args)


@njit(cache=True, nogil=True)
def _row_backward(x, y, dy, dx, gamma, stat1, stat2, mode, accumulate, r):
    outer, A, inner = x.shape
    o = r // inner
    i = r % inner
    if mode == 0:
        mean = float(stat1[r])
        inv = 1.0 / float(stat2[r])
        s1 = 0.0
        s2 = 0.0
        for a in range(A):
            gy = float(dy[o, a, i]) * gamma[a]
            s1 += gy
            s2 += gy * (x[o, a, i] - mean) * inv
        s1 /= A
        s2 /= A
        for a in range(A):
            xhat = (x[o, a, i] - mean) * inv
            v = inv * (dy[o, a, i] * gamma[a] - s1 - xhat * s2)
            _store3(dx, o, a, i, v, accumulate)
    else:
        inv = 1.0 / float(stat1[r])
        s = 0.0
        for a in range(A):
            s += float(dy[o, a, i]) * y[o, a, i]
        for a in range(A):
            v = (dy[o, a, i] - y[o, a, i] * s) * inv
            _store3(dx, o, a, i, v, accumulate)


@parallel_loop(cost=_COST)
def _rows_backward(x, y, dy, dx, gamma, stat1, stat2, mode, accumulate):
    for r in prange(x.shape[0] * x.shape[2]):
        _row_backward(x, y, dy, dx, gamma, stat1, stat2, mode, accumulate, r)


def row_norm_backward(x, y, dy, dx, gamma, stat1, stat2, mode, accumulate=False):
    """dx (+)= gradient of row_norm_forward with respect to x."""
    args = (x, y, dy, dx, gamma, stat1, stat2, int(mode), bool(accumulate))
    _rows_backward(x.size if x.shape[0] * x.shape[2] > 1 else 0, *args)


@njit(cache=True, nogil=True)
def _param_grad_column(x, dy, stat1, stat2, dgamma, dbeta, req_g, req_b, a):
    outer, A, inner = x.shape
    tg = 0.0
    tb = 0.0
    for o in range(outer):
        for i in range(inner):
            r = o * inner + i
            d = float(dy[o, a, i])
            tb += d
            tg += d * (x[o, a, i] - stat1[r]) / stat2[r]
    store_req(dgamma, a, tg, req_g)
    store_req(dbeta, a, tb, req_b)


@parallel_loop(cost=_COST)
def _param_grad(x, dy, stat1, stat2, dgamma, dbeta, req_g, req_b):
    for a in prange(x.shape[1]):
        _param_grad_column(x, dy, stat1, stat2, dgamma, dbeta, req_g, req_b, a)


def param_grad_columns(x, dy, mean, std, dgamma, dbeta, req_g, req_b):
    """LayerNorm's dgamma[a] = sum dy * (x - mean) / std and dbeta[a] = sum dy over rows."""
    args = (x, dy, mean, std, dgamma, dbeta, req_g, req_b)
    _param_grad(x.size if x.shape[1] > 1 else 0, *args)


# ---------------------------------------------------------------------------------------------
# LRN across channels of x (N, C, S): window [c - h, c + h] with h = (nsize - 1) // 2 and
# norm = knorm + alpha / nsize * sum x^2. For even nsize the window holds nsize - 1 channels:
# that is what MXNet 1.9.1 (oneDNN) computes, checked against its outputs.
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _lrn_forward_sample(x, y, norm, half, salpha, knorm, beta, n):
    N, C, S = x.shape
    for c in range(C):
        lo, hi = lrn_window(c, half, C)
        for i in range(S):
            norm[n, c, i] = 0
        for cc in range(lo, hi):
            for i in range(S):
                v = x[n, cc, i]
                norm[n, c, i] += v * v
        for i in range(S):
            t = norm[n, c, i] * salpha + knorm
            norm[n, c, i] = t
            y[n, c, i] = x[n, c, i] * t ** (-beta)


@parallel_loop(cost=_COST)
def _lrn_forward(x, y, norm, half, salpha, knorm, beta):
    for n in prange(x.shape[0]):
        _lrn_forward_sample(x, y, norm, half, salpha, knorm, beta, n)


def lrn_forward(x, y, norm, nsize, alpha, beta, knorm):
    args = (x, y, norm, (int(nsize) - 1) // 2, float(alpha) / nsize, float(knorm), float(beta))
    _lrn_forward(x.size if x.shape[0] > 1 else 0, *args)


@njit(cache=True, nogil=True)
def _lrn_backward_sample(x, norm, dy, dx, tmp, half, salpha, beta, accumulate, n):
    N, C, S = x.shape
    for c in range(C):
        for i in range(S):
            tmp[n, c, i] = dy[n, c, i] * x[n, c, i] * norm[n, c, i] ** (-beta - 1.0)
    coef = -2.0 * beta * salpha
    for c in range(C):
        lo, hi = lrn_window(c, half, C)
        for i in range(S):
            s = 0.0
            for cc in range(lo, hi):
                s += tmp[n, cc, i]
            v = dy[n, c, i] * norm[n, c, i] ** (-beta) + coef * x[n, c, i] * s
            _store3(dx, n, c, i, v, accumulate)


@parallel_loop(cost=_COST)
def _lrn_backward(x, norm, dy, dx, tmp, half, salpha, beta, accumulate):
    for n in prange(x.shape[0]):
        _lrn_backward_sample(x, norm, dy, dx, tmp, half, salpha, beta, accumulate, n)


def lrn_backward(x, norm, dy, dx, tmp, nsize, alpha, beta, accumulate=False):
    """dx (+)= LRN gradient; tmp is scratch shaped like x."""
    args = (x, norm, dy, dx, tmp, (int(nsize) - 1) // 2, float(alpha) / nsize, float(beta),
            bool(accumulate))
    _lrn_backward(x.size if x.shape[0] > 1 else 0, *args)
