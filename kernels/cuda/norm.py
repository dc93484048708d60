"""CUDA kernels for the normalisation operators: the functions and signatures of
``kernels/cpu/norm.py``.

Statistics are reduced by one block per channel (BatchNorm), per (sample, channel)
(InstanceNorm) or per row (LayerNorm / L2Normalization) with a shared-memory tree in float64;
the same block then writes its elements, so no statistics travel through global scratch.
LRN works element-wise with its channel window.
"""
import math

from numba import cuda, float64

from ..scalar_index import unravel3
from ..scalar_norm import accumulate_req, bn_input_grad_coefficients, lrn_window, req_code, store_req  # noqa: F401
from .memory import flat, launch_config
from .nn import _SHARED, REDUCE_THREADS, _block_reduce

__all__ = ["req_code", "bn_forward", "bn_backward", "bn_update_moving", "instance_norm_forward",
           "instance_norm_backward", "row_norm_forward", "row_norm_backward",
           "param_grad_columns", "lrn_forward", "lrn_backward"]

# the request store of scalar_norm compiled as a device function from its Python source (the
# simulator cannot pass its arrays to the njit-compiled one)
_store = cuda.jit(device=True)(store_req.py_func)


def _blocks(n):
    return max(1, min(int(n), 4096))


# ---------------------------------------------------------------------------------------------
# A group of elements (a channel, a row) reduced by one block: element j of the group lies at
# _strided(base, j, run, gap), the group being runs of `run` contiguous elements `gap` apart
# ---------------------------------------------------------------------------------------------
@cuda.jit(device=True)
def _strided(base, j, run, gap):
    r = j // run
    return base + r * gap + j - r * run


@cuda.jit(device=True)
def _block_mean_var(part, x, base, count, run, gap):
    """Mean and biased variance of a group, in float64 and two passes (mean first)."""
    s = 0.0
    for j in range(cuda.threadIdx.x, count, cuda.blockDim.x):
        s += x[_strided(base, j, run, gap)]
    mean = _block_reduce(part, s, False) / count
    s = 0.0
    for j in range(cuda.threadIdx.x, count, cuda.blockDim.x):
        d = x[_strided(base, j, run, gap)] - mean
        s += d * d
    return mean, _block_reduce(part, s, False) / count


@cuda.jit(device=True)
def _block_affine(y, x, base, count, run, gap, scale, shift):
    """y = x * scale + shift over a group."""
    for j in range(cuda.threadIdx.x, count, cuda.blockDim.x):
        k = _strided(base, j, run, gap)
        y[k] = x[k] * scale + shift


@cuda.jit(device=True)
def _block_grad_sums(part, dy, x, base, count, run, gap, mean, scale):
    """(sum of dy, sum of dy * (x - mean) * scale) over a group, in float64."""
    s1 = 0.0
    s2 = 0.0
    for j in range(cuda.threadIdx.x, count, cuda.blockDim.x):
        k = _strided(base, j, run, gap)
        g = float64(dy[k])
        s1 += g
        s2 += g * (x[k] - mean) * scale
    return _block_reduce(part, s1, False), _block_reduce(part, s2, False)


# ---------------------------------------------------------------------------------------------
# BatchNorm over x (outer, C, inner) flattened; channel c is `outer` runs of `inner` elements
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _bn_forward_k(x, y, dims, gamma, beta, mean_out, invstd_out, var_out, moving_mean,
                  moving_var, eps, batch_stats, fix_gamma):
    part = cuda.shared.array(_SHARED, float64)
    outer, C, inner = dims
    first = cuda.threadIdx.x == 0
    for c in range(cuda.blockIdx.x, C, cuda.gridDim.x):
        if batch_stats:
            mean, var = _block_mean_var(part, x, c * inner, outer * inner, inner, C * inner)
            if first:
                var_out[c] = var
        else:
            mean = float64(moving_mean[c])
            var = float64(moving_var[c])
        invstd = 1.0 / math.sqrt(var + eps)
        if first:
            mean_out[c] = mean
            invstd_out[c] = invstd
        g = 1.0 if fix_gamma else float64(gamma[c])
        scale = g * invstd
        _block_affine(y, x, c * inner, outer * inner, inner, C * inner, scale,
                      float64(beta[c]) - mean * scale)


def bn_forward(x, y, gamma, beta, mean_out, invstd_out, var_out, moving_mean, moving_var, eps,
               batch_stats, fix_gamma):
    """See kernels/cpu/norm.py: normalise x (outer, C, inner) per channel."""
    C = x.shape[1]
    _bn_forward_k[_blocks(C), REDUCE_THREADS](flat(x), flat(y), tuple(x.shape), gamma, beta,
                                              mean_out, invstd_out, var_out, moving_mean,
                                              moving_var, float(eps), bool(batch_stats),
                                              bool(fix_gamma))


@cuda.jit
def _bn_backward_k(x, dy, dx, dims, gamma, mean_in, invstd_in, dgamma, dbeta, batch_stats,
                   fix_gamma, req_x, req_g, req_b):
    part = cuda.shared.array(_SHARED, float64)
    outer, C, inner = dims
    count = outer * inner
    for c in range(cuda.blockIdx.x, C, cuda.gridDim.x):
        mean = float64(mean_in[c])
        invstd = float64(invstd_in[c])
        sdy, sdyx = _block_grad_sums(part, dy, x, c * inner, count, inner, C * inner, mean, 1.0)
        sdyx *= invstd
        if cuda.threadIdx.x == 0:
            _store(dgamma, c, 0.0 if fix_gamma else sdyx, req_g)
            _store(dbeta, c, sdy, req_b)
        if req_x == 0:
            continue
        a, b, shift = bn_input_grad_coefficients(sdy, sdyx, count, mean, invstd,
                                                 1.0 if fix_gamma else float64(gamma[c]),
                                                 batch_stats)
        for j in range(cuda.threadIdx.x, count, cuda.blockDim.x):
            k = _strided(c * inner, j, inner, C * inner)
            _store(dx, k, a * dy[k] + b * x[k] + shift, req_x)


def bn_backward(x, dy, dx, gamma, mean, invstd, dgamma, dbeta, batch_stats, fix_gamma, req_x,
                req_g, req_b):
    C = x.shape[1]
    _bn_backward_k[_blocks(C), REDUCE_THREADS](flat(x), flat(dy), flat(dx), tuple(x.shape),
                                               gamma, mean, invstd, dgamma, dbeta,
                                               bool(batch_stats), bool(fix_gamma), req_x, req_g,
                                               req_b)


@cuda.jit
def _bn_update_moving_k(moving_mean, moving_var, mean, var, momentum):
    for c in range(cuda.grid(1), moving_mean.size, cuda.gridsize(1)):
        moving_mean[c] = moving_mean[c] * momentum + mean[c] * (1.0 - momentum)
        moving_var[c] = moving_var[c] * momentum + var[c] * (1.0 - momentum)


def bn_update_moving(moving_mean, moving_var, mean, var, momentum):
    _bn_update_moving_k[launch_config(moving_mean.size)](moving_mean, moving_var, mean, var,
                                                         float(momentum))


# ---------------------------------------------------------------------------------------------
# InstanceNorm over x (N, C, S): one block per (n, c), a single run of S elements
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _in_forward_k(x, y, dims, gamma, beta, mean_out, var_out, eps):
    part = cuda.shared.array(_SHARED, float64)
    N, C, S = dims
    for p in range(cuda.blockIdx.x, N * C, cuda.gridDim.x):
        c = p % C
        mean, var = _block_mean_var(part, x, p * S, S, S, S)
        if cuda.threadIdx.x == 0:
            mean_out[p] = mean
            var_out[p] = var
        scale = float64(gamma[c]) / math.sqrt(var + eps)
        _block_affine(y, x, p * S, S, S, S, scale, float64(beta[c]) - mean * scale)


def instance_norm_forward(x, y, gamma, beta, mean_out, var_out, eps):
    N, C = x.shape[0], x.shape[1]
    _in_forward_k[_blocks(N * C), REDUCE_THREADS](flat(x), flat(y), tuple(x.shape), gamma,
                                                  beta, flat(mean_out), flat(var_out),
                                                  float(eps))


@cuda.jit
def _in_backward_dx_k(x, dy, dx, dims, gamma, mean_in, var_in, eps, req_x):
    part = cuda.shared.array(_SHARED, float64)
    N, C, S = dims
    for p in range(cuda.blockIdx.x, N * C, cuda.gridDim.x):
        base = p * S
        mean = float64(mean_in[p])
        invstd = 1.0 / math.sqrt(float64(var_in[p]) + eps)
        sdy, sdyx = _block_grad_sums(part, dy, x, base, S, S, S, mean, invstd)
        mdy = sdy / S
        mdyx = sdyx / S
        g = float64(gamma[p % C])
        for i in range(cuda.threadIdx.x, S, cuda.blockDim.x):
            xhat = (x[base + i] - mean) * invstd
            _store(dx, base + i, g * invstd * (dy[base + i] - mdy - xhat * mdyx), req_x)


@cuda.jit
def _in_backward_params_k(x, dy, dims, mean_in, var_in, dgamma, dbeta, eps, req_g, req_b):
    part = cuda.shared.array(_SHARED, float64)
    N, C, S = dims
    for c in range(cuda.blockIdx.x, C, cuda.gridDim.x):
        tg = 0.0
        tb = 0.0
        for n in range(N):
            p = n * C + c
            mean = float64(mean_in[p])
            invstd = 1.0 / math.sqrt(float64(var_in[p]) + eps)
            for i in range(cuda.threadIdx.x, S, cuda.blockDim.x):
                d = float64(dy[p * S + i])
                tb += d
                tg += d * (x[p * S + i] - mean) * invstd
        sg = _block_reduce(part, tg, False)
        sb = _block_reduce(part, tb, False)
        if cuda.threadIdx.x == 0:
            _store(dgamma, c, sg, req_g)
            _store(dbeta, c, sb, req_b)


def instance_norm_backward(x, dy, dx, gamma, mean, var, dgamma, dbeta, eps, req_x, req_g, req_b):
    N, C = x.shape[0], x.shape[1]
    dims = tuple(x.shape)
    xf, dyf = flat(x), flat(dy)
    if req_x != 0:
        _in_backward_dx_k[_blocks(N * C), REDUCE_THREADS](xf, dyf, flat(dx), dims, gamma,
                                                          flat(mean), flat(var), float(eps),
                                                          req_x)
    if req_g != 0 or req_b != 0:
        _in_backward_params_k[_blocks(C), REDUCE_THREADS](xf, dyf, dims, flat(mean),
                                                          flat(var), dgamma, dbeta, float(eps),
                                                          req_g, req_b)


# ---------------------------------------------------------------------------------------------
# Row normalisation over the middle axis A of x (outer, A, inner): one block per row, whose A
# elements are `inner` apart
# ---------------------------------------------------------------------------------------------
@cuda.jit(device=True)
def _row_start(r, A, inner):
    """Flat index of the first element of row r = o * inner + i: x[o, 0, i]."""
    o = r // inner
    return o * A * inner + r - o * inner


@cuda.jit
def _row_forward_k(x, y, dims, gamma, beta, stat1, stat2, eps, mode):
    part = cuda.shared.array(_SHARED, float64)
    outer, A, inner = dims
    for r in range(cuda.blockIdx.x, outer * inner, cuda.gridDim.x):
        base = _row_start(r, A, inner)
        if mode == 0:
            mean, var = _block_mean_var(part, x, base, A, 1, inner)
            std = math.sqrt(var + eps)
            if cuda.threadIdx.x == 0:
                stat1[r] = mean
                stat2[r] = std
            for a in range(cuda.threadIdx.x, A, cuda.blockDim.x):
                k = base + a * inner
                y[k] = (x[k] - mean) / std * gamma[a] + beta[a]
        else:
            s = 0.0
            for a in range(cuda.threadIdx.x, A, cuda.blockDim.x):
                v = float64(x[base + a * inner])
                s += v * v
            norm = math.sqrt(_block_reduce(part, s, False) + eps)
            if cuda.threadIdx.x == 0:
                stat1[r] = norm
            for a in range(cuda.threadIdx.x, A, cuda.blockDim.x):
                k = base + a * inner
                y[k] = x[k] / norm


def row_norm_forward(x, y, gamma, beta, stat1, stat2, eps, mode):
    rows = x.shape[0] * x.shape[2]
    _row_forward_k[_blocks(rows), REDUCE_THREADS](flat(x), flat(y), tuple(x.shape), gamma,
                                                  beta, stat1, stat2, float(eps), int(mode))


@cuda.jit
def _row_backward_k(x, y, dy, dx, dims, gamma, stat1, stat2, mode, req):
    part = cuda.shared.array(_SHARED, float64)
    outer, A, inner = dims
    for r in range(cuda.blockIdx.x, outer * inner, cuda.gridDim.x):
        base = _row_start(r, A, inner)
        if mode == 0:
            mean = float64(stat1[r])
            inv = 1.0 / float64(stat2[r])
            s1 = 0.0
            s2 = 0.0
            for a in range(cuda.threadIdx.x, A, cuda.blockDim.x):
                k = base + a * inner
                gy = float64(dy[k]) * gamma[a]
                s1 += gy
                s2 += gy * (x[k] - mean) * inv
            m1 = _block_reduce(part, s1, False) / A
            m2 = _block_reduce(part, s2, False) / A
            for a in range(cuda.threadIdx.x, A, cuda.blockDim.x):
                k = base + a * inner
                xhat = (x[k] - mean) * inv
                _store(dx, k, inv * (dy[k] * gamma[a] - m1 - xhat * m2), req)
        else:
            inv = 1.0 / float64(stat1[r])
            s = 0.0
            for a in range(cuda.threadIdx.x, A, cuda.blockDim.x):
                k = base + a * inner
                s += float64(dy[k]) * y[k]
            total = _block_reduce(part, s, False)
            for a in range(cuda.threadIdx.x, A, cuda.blockDim.x):
                k = base + a * inner
                _store(dx, k, (dy[k] - y[k] * total) * inv, req)


def row_norm_backward(x, y, dy, dx, gamma, stat1, stat2, mode, accumulate=False):
    rows = x.shape[0] * x.shape[2]
    _row_backward_k[_blocks(rows), REDUCE_THREADS](flat(x), flat(y), flat(dy), flat(dx),
                                                   tuple(x.shape), gamma, stat1, stat2,
                                                   int(mode), accumulate_req(accumulate))


@cuda.jit
def _param_grad_k(x, dy, dims, stat1, stat2, dgamma, dbeta, req_g, req_b):
    part = cuda.shared.array(_SHARED, float64)
    outer, A, inner = dims
    for a in range(cuda.blockIdx.x, A, cuda.gridDim.x):
        tg = 0.0
        tb = 0.0
        for r in range(cuda.threadIdx.x, outer * inner, cuda.blockDim.x):
            k = _strided(a * inner, r, inner, A * inner)
            d = float64(dy[k])
            tb += d
            tg += d * (x[k] - stat1[r]) / stat2[r]
        sg = _block_reduce(part, tg, False)
        sb = _block_reduce(part, tb, False)
        if cuda.threadIdx.x == 0:
            _store(dgamma, a, sg, req_g)
            _store(dbeta, a, sb, req_b)


def param_grad_columns(x, dy, mean, std, dgamma, dbeta, req_g, req_b):
    A = x.shape[1]
    _param_grad_k[_blocks(A), REDUCE_THREADS](flat(x), flat(dy), tuple(x.shape), mean, std,
                                              dgamma, dbeta, req_g, req_b)


# ---------------------------------------------------------------------------------------------
# LRN across channels of x (N, C, S): window scalar_norm.lrn_window, h = (nsize - 1) // 2
# ---------------------------------------------------------------------------------------------
@cuda.jit(device=True)
def _window_sum(src, i, dims, half, squares):
    """Sum of src over the LRN window of element i's channel (of the squares with squares)."""
    N, C, S = dims
    n, c, s_ = unravel3(i, C, S)
    lo, hi = lrn_window(c, half, C)
    acc = 0.0
    for cc in range(lo, hi):
        v = src[(n * C + cc) * S + s_]
        acc += v * v if squares else v
    return acc


@cuda.jit
def _lrn_forward_k(x, y, norm, dims, half, salpha, knorm, beta):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        t = _window_sum(x, i, dims, half, True) * salpha + knorm
        norm[i] = t
        y[i] = x[i] * t ** (-beta)


def lrn_forward(x, y, norm, nsize, alpha, beta, knorm):
    xf = flat(x)
    _lrn_forward_k[launch_config(xf.size)](xf, flat(y), flat(norm), tuple(x.shape),
                                           (int(nsize) - 1) // 2, float(alpha) / nsize,
                                           float(knorm), float(beta))


@cuda.jit
def _lrn_tmp_k(x, norm, dy, tmp, beta):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        tmp[i] = dy[i] * x[i] * norm[i] ** (-beta - 1.0)


@cuda.jit
def _lrn_backward_k(x, norm, dy, dx, tmp, dims, half, salpha, beta, req):
    coef = -2.0 * beta * salpha
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        acc = _window_sum(tmp, i, dims, half, False)
        _store(dx, i, dy[i] * norm[i] ** (-beta) + coef * x[i] * acc, req)


def lrn_backward(x, norm, dy, dx, tmp, nsize, alpha, beta, accumulate=False):
    xf, nf, dyf, tf = flat(x), flat(norm), flat(dy), flat(tmp)
    cfg = launch_config(xf.size)
    _lrn_tmp_k[cfg](xf, nf, dyf, tf, float(beta))
    _lrn_backward_k[cfg](xf, nf, dyf, flat(dx), tf, tuple(x.shape), (int(nsize) - 1) // 2,
                         float(alpha) / nsize, float(beta), accumulate_req(accumulate))
