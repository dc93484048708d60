"""CUDA kernels for the normalisation operators: the functions and signatures of
``kernels/cpu/norm.py``.

Statistics are reduced by one block per channel (BatchNorm), per (sample, channel)
(InstanceNorm) or per row (LayerNorm / L2Normalization) with a shared-memory tree in float64;
the same block then writes its elements, so no statistics travel through global scratch.
LRN works element-wise with its channel window.
"""
import math

from numba import cuda, float64

from ..scalar_norm import REQ_ADD, REQ_WRITE, bn_input_grad_coefficients, req_code  # noqa: F401
from .memory import launch_config
from .nn import _SHARED, REDUCE_THREADS, _block_reduce

__all__ = ["req_code", "bn_forward", "bn_backward", "bn_update_moving", "instance_norm_forward",
           "instance_norm_backward", "row_norm_forward", "row_norm_backward",
           "param_grad_columns", "lrn_forward", "lrn_backward"]



def _flat(a):
    return a.reshape(a.size)


def _blocks(n):
    return max(1, min(int(n), 4096))


@cuda.jit(device=True)
def _store(dst, i, value, code):
    # scalar_norm.store_req's rule; array-taking helpers stay per half (numba's CUDA simulator
    # cannot hand its device arrays to a CPU-compiled function)
    if code == REQ_WRITE:
        dst[i] = value
    elif code == REQ_ADD:
        dst[i] += value


@cuda.jit(device=True)
def _put(dst, i, value, code):
    if code == 2:
        dst[i] += value
    else:
        dst[i] = value


# ---------------------------------------------------------------------------------------------
# BatchNorm over x (outer, C, inner) flattened; element (o, c, i) at (o * C + c) * inner + i
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _bn_forward_k(x, y, dims, gamma, beta, mean_out, invstd_out, var_out, moving_mean,
                  moving_var, eps, batch_stats, fix_gamma):
    part = cuda.shared.array(_SHARED, float64)
    outer, C, inner = dims
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    count = outer * inner
    for c in range(cuda.blockIdx.x, C, cuda.gridDim.x):
        if batch_stats:
            s = 0.0
            for j in range(tid, count, nt):
                o = j // inner
                s += x[(o * C + c) * inner + j - o * inner]
            mean = _block_reduce(part, s, False) / count
            s = 0.0
            for j in range(tid, count, nt):
                o = j // inner
                d = x[(o * C + c) * inner + j - o * inner] - mean
                s += d * d
            var = _block_reduce(part, s, False) / count
            if tid == 0:
                var_out[c] = var
        else:
            mean = float64(moving_mean[c])
            var = float64(moving_var[c])
        invstd = 1.0 / math.sqrt(var + eps)
        if tid == 0:
            mean_out[c] = mean
            invstd_out[c] = invstd
        g = 1.0 if fix_gamma else float64(gamma[c])
        scale = g * invstd
        shift = float64(beta[c]) - mean * scale
        for j in range(tid, count, nt):
            o = j // inner
            k = (o * C + c) * inner + j - o * inner
            y[k] = x[k] * scale + shift


def bn_forward(x, y, gamma, beta, mean_out, invstd_out, var_out, moving_mean, moving_var, eps,
               batch_stats, fix_gamma):
    """See kernels/cpu/norm.py: normalise x (outer, C, inner) per channel."""
    C = x.shape[1]
    _bn_forward_k[_blocks(C), REDUCE_THREADS](_flat(x), _flat(y), tuple(x.shape), gamma, beta,
                                              mean_out, invstd_out, var_out, moving_mean,
                                              moving_var, float(eps), bool(batch_stats),
                                              bool(fix_gamma))


@cuda.jit
def _bn_backward_k(x, dy, dx, dims, gamma, mean_in, invstd_in, dgamma, dbeta, batch_stats,
                   fix_gamma, req_x, req_g, req_b):
    part = cuda.shared.array(_SHARED, float64)
    outer, C, inner = dims
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    count = outer * inner
    for c in range(cuda.blockIdx.x, C, cuda.gridDim.x):
        mean = float64(mean_in[c])
        invstd = float64(invstd_in[c])
        s1 = 0.0
        s2 = 0.0
        for j in range(tid, count, nt):
            o = j // inner
            k = (o * C + c) * inner + j - o * inner
            g = float64(dy[k])
            s1 += g
            s2 += g * (x[k] - mean)
        sdy = _block_reduce(part, s1, False)
        sdyx = _block_reduce(part, s2, False) * invstd
        if tid == 0:
            _store(dgamma, c, 0.0 if fix_gamma else sdyx, req_g)
            _store(dbeta, c, sdy, req_b)
        if req_x == 0:
            continue
        a, b, shift = bn_input_grad_coefficients(sdy, sdyx, count, mean, invstd,
                                                 1.0 if fix_gamma else float64(gamma[c]),
                                                 batch_stats)
        for j in range(tid, count, nt):
            o = j // inner
            k = (o * C + c) * inner + j - o * inner
            _put(dx, k, a * dy[k] + b * x[k] + shift, req_x)


def bn_backward(x, dy, dx, gamma, mean, invstd, dgamma, dbeta, batch_stats, fix_gamma, req_x,
                req_g, req_b):
    C = x.shape[1]
    _bn_backward_k[_blocks(C), REDUCE_THREADS](_flat(x), _flat(dy), _flat(dx), tuple(x.shape),
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
# InstanceNorm over x (N, C, S): one block per (n, c)
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _in_forward_k(x, y, dims, gamma, beta, mean_out, var_out, eps):
    part = cuda.shared.array(_SHARED, float64)
    N, C, S = dims
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    for p in range(cuda.blockIdx.x, N * C, cuda.gridDim.x):
        c = p % C
        base = p * S
        s = 0.0
        for i in range(tid, S, nt):
            s += x[base + i]
        mean = _block_reduce(part, s, False) / S
        s = 0.0
        for i in range(tid, S, nt):
            d = x[base + i] - mean
            s += d * d
        var = _block_reduce(part, s, False) / S
        if tid == 0:
            mean_out[p] = mean
            var_out[p] = var
        scale = float64(gamma[c]) / math.sqrt(var + eps)
        shift = float64(beta[c]) - mean * scale
        for i in range(tid, S, nt):
            y[base + i] = x[base + i] * scale + shift


def instance_norm_forward(x, y, gamma, beta, mean_out, var_out, eps):
    N, C = x.shape[0], x.shape[1]
    _in_forward_k[_blocks(N * C), REDUCE_THREADS](_flat(x), _flat(y), tuple(x.shape), gamma,
                                                  beta, _flat(mean_out), _flat(var_out),
                                                  float(eps))


@cuda.jit
def _in_backward_dx_k(x, dy, dx, dims, gamma, mean_in, var_in, eps, req_x):
    part = cuda.shared.array(_SHARED, float64)
    N, C, S = dims
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    for p in range(cuda.blockIdx.x, N * C, cuda.gridDim.x):
        c = p % C
        base = p * S
        mean = float64(mean_in[p])
        invstd = 1.0 / math.sqrt(float64(var_in[p]) + eps)
        s1 = 0.0
        s2 = 0.0
        for i in range(tid, S, nt):
            d = float64(dy[base + i])
            s1 += d
            s2 += d * (x[base + i] - mean) * invstd
        mdy = _block_reduce(part, s1, False) / S
        mdyx = _block_reduce(part, s2, False) / S
        g = float64(gamma[c])
        for i in range(tid, S, nt):
            xhat = (x[base + i] - mean) * invstd
            _put(dx, base + i, g * invstd * (dy[base + i] - mdy - xhat * mdyx), req_x)


@cuda.jit
def _in_backward_params_k(x, dy, dims, mean_in, var_in, dgamma, dbeta, eps, req_g, req_b):
    part = cuda.shared.array(_SHARED, float64)
    N, C, S = dims
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    for c in range(cuda.blockIdx.x, C, cuda.gridDim.x):
        tg = 0.0
        tb = 0.0
        for n in range(N):
            p = n * C + c
            mean = float64(mean_in[p])
            invstd = 1.0 / math.sqrt(float64(var_in[p]) + eps)
            for i in range(tid, S, nt):
                d = float64(dy[p * S + i])
                tb += d
                tg += d * (x[p * S + i] - mean) * invstd
        sg = _block_reduce(part, tg, False)
        sb = _block_reduce(part, tb, False)
        if tid == 0:
            _store(dgamma, c, sg, req_g)
            _store(dbeta, c, sb, req_b)


def instance_norm_backward(x, dy, dx, gamma, mean, var, dgamma, dbeta, eps, req_x, req_g, req_b):
    N, C = x.shape[0], x.shape[1]
    dims = tuple(x.shape)
    xf, dyf = _flat(x), _flat(dy)
    if req_x != 0:
        _in_backward_dx_k[_blocks(N * C), REDUCE_THREADS](xf, dyf, _flat(dx), dims, gamma,
                                                          _flat(mean), _flat(var), float(eps),
                                                          req_x)
    if req_g != 0 or req_b != 0:
        _in_backward_params_k[_blocks(C), REDUCE_THREADS](xf, dyf, dims, _flat(mean),
                                                          _flat(var), dgamma, dbeta, float(eps),
                                                          req_g, req_b)


# ---------------------------------------------------------------------------------------------
# Row normalisation over the middle axis A of x (outer, A, inner): one block per row
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _row_forward_k(x, y, dims, gamma, beta, stat1, stat2, eps, mode):
    part = cuda.shared.array(_SHARED, float64)
    outer, A, inner = dims
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    for r in range(cuda.blockIdx.x, outer * inner, cuda.gridDim.x):
        o = r // inner
        base = o * A * inner + r - o * inner
        if mode == 0:
            s = 0.0
            for a in range(tid, A, nt):
                s += x[base + a * inner]
            mean = _block_reduce(part, s, False) / A
            s = 0.0
            for a in range(tid, A, nt):
                d = x[base + a * inner] - mean
                s += d * d
            std = math.sqrt(_block_reduce(part, s, False) / A + eps)
            if tid == 0:
                stat1[r] = mean
                stat2[r] = std
            for a in range(tid, A, nt):
                k = base + a * inner
                y[k] = (x[k] - mean) / std * gamma[a] + beta[a]
        else:
            s = 0.0
            for a in range(tid, A, nt):
                v = float64(x[base + a * inner])
                s += v * v
            norm = math.sqrt(_block_reduce(part, s, False) + eps)
            if tid == 0:
                stat1[r] = norm
            for a in range(tid, A, nt):
                k = base + a * inner
                y[k] = x[k] / norm


def row_norm_forward(x, y, gamma, beta, stat1, stat2, eps, mode):
    rows = x.shape[0] * x.shape[2]
    _row_forward_k[_blocks(rows), REDUCE_THREADS](_flat(x), _flat(y), tuple(x.shape), gamma,
                                                  beta, stat1, stat2, float(eps), int(mode))


@cuda.jit
def _row_backward_k(x, y, dy, dx, dims, gamma, stat1, stat2, mode, accumulate):
    part = cuda.shared.array(_SHARED, float64)
    outer, A, inner = dims
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    code = 2 if accumulate else 1
    for r in range(cuda.blockIdx.x, outer * inner, cuda.gridDim.x):
        o = r // inner
        base = o * A * inner + r - o * inner
        if mode == 0:
            mean = float64(stat1[r])
            inv = 1.0 / float64(stat2[r])
            s1 = 0.0
            s2 = 0.0
            for a in range(tid, A, nt):
                k = base + a * inner
                gy = float64(dy[k]) * gamma[a]
                s1 += gy
                s2 += gy * (x[k] - mean) * inv
            m1 = _block_reduce(part, s1, False) / A
            m2 = _block_reduce(part, s2, False) / A
            for a in range(tid, A, nt):
                k = base + a * inner
                xhat = (x[k] - mean) * inv
                _put(dx, k, inv * (dy[k] * gamma[a] - m1 - xhat * m2), code)
        else:
            inv = 1.0 / float64(stat1[r])
            s = 0.0
            for a in range(tid, A, nt):
                k = base + a * inner
                s += float64(dy[k]) * y[k]
            total = _block_reduce(part, s, False)
            for a in range(tid, A, nt):
                k = base + a * inner
                _put(dx, k, (dy[k] - y[k] * total) * inv, code)


def row_norm_backward(x, y, dy, dx, gamma, stat1, stat2, mode, accumulate=False):
    rows = x.shape[0] * x.shape[2]
    _row_backward_k[_blocks(rows), REDUCE_THREADS](_flat(x), _flat(y), _flat(dy), _flat(dx),
                                                   tuple(x.shape), gamma, stat1, stat2,
                                                   int(mode), bool(accumulate))


@cuda.jit
def _param_grad_k(x, dy, dims, stat1, stat2, dgamma, dbeta, req_g, req_b):
    part = cuda.shared.array(_SHARED, float64)
    outer, A, inner = dims
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    rows = outer * inner
    for a in range(cuda.blockIdx.x, A, cuda.gridDim.x):
        tg = 0.0
        tb = 0.0
        for r in range(tid, rows, nt):
            o = r // inner
            k = (o * A + a) * inner + r - o * inner
            d = float64(dy[k])
            tb += d
            tg += d * (x[k] - stat1[r]) / stat2[r]
        sg = _block_reduce(part, tg, False)
        sb = _block_reduce(part, tb, False)
        if tid == 0:
            _store(dgamma, a, sg, req_g)
            _store(dbeta, a, sb, req_b)


def param_grad_columns(x, dy, mean, std, dgamma, dbeta, req_g, req_b):
    A = x.shape[1]
    _param_grad_k[_blocks(A), REDUCE_THREADS](_flat(x), _flat(dy), tuple(x.shape), mean, std,
                                              dgamma, dbeta, req_g, req_b)


# ---------------------------------------------------------------------------------------------
# LRN across channels of x (N, C, S): window [c - h, c + h], h = (nsize - 1) // 2
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _lrn_forward_k(x, y, norm, dims, half, salpha, knorm, beta):
    N, C, S = dims
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        s_ = i % S
        t = i // S
        c = t % C
        n = t // C
        lo = max(c - half, 0)
        hi = min(c + half + 1, C)
        acc = 0.0
        for cc in range(lo, hi):
            v = x[(n * C + cc) * S + s_]
            acc += v * v
        t2 = acc * salpha + knorm
        norm[i] = t2
        y[i] = x[i] * t2 ** (-beta)


def lrn_forward(x, y, norm, nsize, alpha, beta, knorm):
    xf = _flat(x)
    _lrn_forward_k[launch_config(xf.size)](xf, _flat(y), _flat(norm), tuple(x.shape),
                                           (int(nsize) - 1) // 2, float(alpha) / nsize,
                                           float(knorm), float(beta))


@cuda.jit
def _lrn_tmp_k(x, norm, dy, tmp, beta):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        tmp[i] = dy[i] * x[i] * norm[i] ** (-beta - 1.0)


@cuda.jit
def _lrn_backward_k(x, norm, dy, dx, tmp, dims, half, salpha, beta, accumulate):
    N, C, S = dims
    coef = -2.0 * beta * salpha
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        s_ = i % S
        t = i // S
        c = t % C
        n = t // C
        lo = max(c - half, 0)
        hi = min(c + half + 1, C)
        acc = 0.0
        for cc in range(lo, hi):
            acc += tmp[(n * C + cc) * S + s_]
        v = dy[i] * norm[i] ** (-beta) + coef * x[i] * acc
        if accumulate:
            dx[i] += v
        else:
            dx[i] = v


def lrn_backward(x, norm, dy, dx, tmp, nsize, alpha, beta, accumulate=False):
    xf, nf, dyf, tf = _flat(x), _flat(norm), _flat(dy), _flat(tmp)
    cfg = launch_config(xf.size)
    _lrn_tmp_k[cfg](xf, nf, dyf, tf, float(beta))
    _lrn_backward_k[cfg](xf, nf, dyf, _flat(dx), tf, tuple(x.shape), (int(nsize) - 1) // 2,
                         float(alpha) / nsize, float(beta), bool(accumulate))
