"""CUDA kernels of the nn and loss operators: the same functions, with the same signatures,
as ``kernels/cpu/nn.py`` (operators never branch on the device).

Element-wise work runs in grid-stride kernels that call the ``@njit`` math of
``kernels/scalar_nn.py``; softmax rows use one block per row with shared-memory reductions
(max, then sum); FullyConnected uses a register-tiled shared-memory GEMM with transpose flags, so the
backward needs no transposed copies; Embedding's backward scatters with atomics. Host arrays
(the uniforms Dropout and rrelu draw from ``lightmod.random``) are copied to the device here.
Scalars the operators need back (label counts) are reduced on the device and copied to the
host as one number.
"""
import math

import numpy as np
from numba import cuda, float32, float64

from .. import nn_math as NM
from .. import scalar_nn as S
from ..cuda_support import simulator_enabled
from ..math_build import compiled
from ..scalar_nn import ACTIVATIONS, LEAKY_TYPES, REGRESSION_KINDS
from .memory import fill

__all__ = list(S.KERNEL_NAMES)

# The simulator runs every thread as a Python thread: keep blocks small there.
THREADS = 32 if simulator_enabled() else 256
MAX_BLOCKS = 4096
REDUCE_THREADS = 32 if simulator_enabled() else 128     # power of two, <= _SHARED
_SHARED = 256


def _flat(a):
    """1-D view of a contiguous device array (reshape refuses anything needing a copy)."""
    return a.reshape(a.size)


def _grid(n):
    return max(1, min(MAX_BLOCKS, (n + THREADS - 1) // THREADS)), THREADS


def _to_device(host):
    return cuda.to_device(np.ascontiguousarray(host))


# ---------------------------------------------------------------------------------------------
# small element-wise helpers
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _mul_k(a, b, dst, accumulate):
    for i in range(cuda.grid(1), dst.size, cuda.gridsize(1)):
        if accumulate:
            dst[i] += a[i] * b[i]
        else:
            dst[i] = a[i] * b[i]


# ---------------------------------------------------------------------------------------------
# FullyConnected: register-tiled GEMM C (+)= op(A) @ op(B), op = optional transpose
# ---------------------------------------------------------------------------------------------
class _GemmTile:
    """A (bm x bn) block of C per block of threads, bk steps of the inner dimension per
    shared-memory tile, (tm x tn) results per thread."""

    def __init__(self, name, bm, bn, bk, tm, tn):
        self.name, self.bm, self.bn, self.bk, self.tm, self.tn = name, bm, bn, bk, tm, tn
        self.threads = (bm // tm) * (bn // tn)
        # the load patterns give every thread whole rows or columns of the tiles
        assert self.threads % bm == 0 and self.threads % bn == 0 and self.threads % bk == 0
        assert (bk * bm) % self.threads == 0 and (bk * bn) % self.threads == 0


if simulator_enabled():
    # tiny tiles, so the simulator tests' small products use both kernels
    GEMM_TILES = (_GemmTile("large", 8, 8, 4, 2, 2), _GemmTile("small", 4, 4, 4, 1, 1))
    GEMM_LARGE_MIN_BLOCKS = 4
else:
    # 256 threads each: 8x4 results per thread for large products, 2x2 for those that would
    # give fewer than GEMM_LARGE_MIN_BLOCKS large tiles (an H100 / H200 has 132 SMs: fewer
    # blocks than that leave SMs idle, and the small tiles give 8x as many). Measured on an
    # H200 (float32 GFLOP/s, 4096^3 / 1024^3 / 256x512x784): 128x64 tiles 20084 / 14550 /
    # 1817, 64x64 (4x4 per thread) 15923 / 13561 / 2542, 128x128 (8x8) 16440 / 7929 / 984,
    # 32x32 (2x2) 11497 / 10266 / 5340
    GEMM_TILES = (_GemmTile("large", 128, 64, 8, 8, 4), _GemmTile("small", 32, 32, 8, 2, 2))
    GEMM_LARGE_MIN_BLOCKS = 128


def _make_gemm(nbtype, tile):
    BM, BN, BK, TM, TN, THREADS = tile.bm, tile.bn, tile.bk, tile.tm, tile.tn, tile.threads
    THREADS_M, THREADS_N = BM // TM, BN // TN
    A_LOADS, B_LOADS = BK * BM // THREADS, BK * BN // THREADS
    A_WIDTH, B_WIDTH = BM + 1, BN + 1      # padded: column-wise stores hit distinct banks

    @cuda.jit
    def gemm(a, b, c, trans_a, trans_b, accumulate):
        a_tile = cuda.shared.array((BK, A_WIDTH), nbtype)
        b_tile = cuda.shared.array((BK, B_WIDTH), nbtype)
        acc = cuda.local.array((TM, TN), nbtype)
        a_next = cuda.local.array(A_LOADS, nbtype)
        b_next = cuda.local.array(B_LOADS, nbtype)
        a_frag = cuda.local.array(TM, nbtype)
        b_frag = cuda.local.array(TN, nbtype)
        t = cuda.threadIdx.x
        tx = t % THREADS_N
        ty = t // THREADS_N
        m, n = c.shape[0], c.shape[1]
        depth = a.shape[0] if trans_a else a.shape[1]
        m0 = cuda.blockIdx.y * BM
        n0 = cuda.blockIdx.x * BN
        # consecutive threads load consecutive addresses: along the inner dimension of a
        # row-major operand, along m (or n) of a transposed one
        if trans_a:
            a_k, a_m, a_k_step, a_m_step = t // BM, t % BM, THREADS // BM, 0
        else:
            a_k, a_m, a_k_step, a_m_step = t % BK, t // BK, 0, THREADS // BK
        if trans_b:
            b_k, b_n, b_k_step, b_n_step = t % BK, t // BK, 0, THREADS // BK
        else:
            b_k, b_n, b_k_step, b_n_step = t // BN, t % BN, THREADS // BN, 0
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = 0
        steps = (depth + BK - 1) // BK
        for step in range(steps + 1):
            if step < steps:
                # this step's loads, in flight while the previous step multiplies
                k0 = step * BK
                for e in range(A_LOADS):
                    kk = k0 + a_k + e * a_k_step
                    row = m0 + a_m + e * a_m_step
                    v = nbtype(0)
                    if row < m and kk < depth:
                        v = a[kk, row] if trans_a else a[row, kk]
                    a_next[e] = v
                for e in range(B_LOADS):
                    kk = k0 + b_k + e * b_k_step
                    col = n0 + b_n + e * b_n_step
                    v = nbtype(0)
                    if col < n and kk < depth:
                        v = b[col, kk] if trans_b else b[kk, col]
                    b_next[e] = v
            if step > 0:
                for kk in range(BK):
                    for i in range(TM):
                        a_frag[i] = a_tile[kk, ty + i * THREADS_M]
                    for j in range(TN):
                        b_frag[j] = b_tile[kk, tx + j * THREADS_N]
                    for i in range(TM):
                        for j in range(TN):
                            acc[i, j] += a_frag[i] * b_frag[j]
            cuda.syncthreads()
            if step < steps:
                for e in range(A_LOADS):
                    a_tile[a_k + e * a_k_step, a_m + e * a_m_step] = a_next[e]
                for e in range(B_LOADS):
                    b_tile[b_k + e * b_k_step, b_n + e * b_n_step] = b_next[e]
            cuda.syncthreads()
        for i in range(TM):
            row = m0 + ty + i * THREADS_M
            if row < m:
                for j in range(TN):
                    col = n0 + tx + j * THREADS_N
                    if col < n:
                        if accumulate:
                            c[row, col] += acc[i, j]
                        else:
                            c[row, col] = acc[i, j]
    return gemm


_GEMM = {"%s_%s" % (np.dtype(dt).name, tile.name): _make_gemm(nbtype, tile)
         for dt, nbtype in ((np.float32, float32), (np.float64, float64)) for tile in GEMM_TILES}


def _gemm(a, b, c, trans_a, trans_b, accumulate):
    dtype = np.dtype(c.dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError("FullyConnected on the GPU supports float32 and float64, got %s"
                        % dtype.name)
    m, n = c.shape
    if m == 0 or n == 0:
        return
    large, small = GEMM_TILES
    blocks = -(-m // large.bm) * -(-n // large.bn)
    tile = large if blocks >= GEMM_LARGE_MIN_BLOCKS else small
    grid = (-(-n // tile.bn), -(-m // tile.bm))
    _GEMM["%s_%s" % (dtype.name, tile.name)][grid, tile.threads](a, b, c, bool(trans_a),
                                                                 bool(trans_b), bool(accumulate))


@cuda.jit
def _add_bias_k(out, bias):
    cols = out.shape[1]
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i // cols, i % cols] += bias[i % cols]


@cuda.jit
def _column_sums_k(dy, db, accumulate):
    for j in range(cuda.grid(1), db.shape[0], cuda.gridsize(1)):
        s = 0.0
        for i in range(dy.shape[0]):
            s += dy[i, j]
        if accumulate:
            db[j] += s
        else:
            db[j] = s


def fc_forward(x, w, b, out, scratch):
    """out (N, H) = x (N, K) @ w (H, K)^T (+ b (H,)); b may be None."""
    _gemm(x, w, out, False, True, False)
    if b is not None:
        _add_bias_k[_grid(out.size)](out, _flat(b))


def fc_backward(x, w, dy, dx, dw, db, req_x, req_w, req_b, scratch):
    """Gradients of fc_forward; a gradient whose req is 'null' may be None."""
    if req_x != "null":
        _gemm(dy, w, dx, False, False, req_x == "add")
    if req_w != "null":
        _gemm(dy, x, dw, True, False, req_w == "add")
    if req_b != "null":
        db = _flat(db)
        _column_sums_k[_grid(db.size)](dy, db, req_b == "add")


# ---------------------------------------------------------------------------------------------
# Activation, LeakyReLU
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _act_fwd_k(x, out, code):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        out[i] = S.activation_value(x[i], code)


@cuda.jit
def _act_bwd_k(x, y, dy, dx, code, accumulate):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        g = dy[i] * S.activation_slope(x[i], y[i], code)
        if accumulate:
            dx[i] += g
        else:
            dx[i] = g


def activation_forward(x, out, act_type):
    xf = _flat(x)
    _act_fwd_k[_grid(xf.size)](xf, _flat(out), ACTIVATIONS[act_type])


def activation_backward(x, y, dy, dx, act_type, accumulate=False):
    xf = _flat(x)
    _act_bwd_k[_grid(xf.size)](xf, _flat(y), _flat(dy), _flat(dx), ACTIVATIONS[act_type],
                               accumulate)


@cuda.jit
def _leaky_fwd_k(x, out, code, slope):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        out[i] = S.leaky_value(x[i], code, slope)


@cuda.jit
def _leaky_bwd_k(x, y, dy, dx, code, slope, accumulate):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        g = dy[i] * S.leaky_slope(x[i], y[i], code, slope)
        if accumulate:
            dx[i] += g
        else:
            dx[i] = g


def leaky_relu_forward(x, out, act_type, slope):
    xf = _flat(x)
    _leaky_fwd_k[_grid(xf.size)](xf, _flat(out), LEAKY_TYPES[act_type], float(slope))


def leaky_relu_backward(x, y, dy, dx, act_type, slope, accumulate=False):
    xf = _flat(x)
    _leaky_bwd_k[_grid(xf.size)](xf, _flat(y), _flat(dy), _flat(dx), LEAKY_TYPES[act_type],
                                 float(slope), accumulate)


@cuda.jit
def _prelu_fwd_k(x, gamma, out):
    nc, inner = x.shape[1], x.shape[2]
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        o = i // (nc * inner)
        c = (i // inner) % nc
        j = i % inner
        g = gamma[c] if gamma.shape[0] > 1 else gamma[0]
        v = x[o, c, j]
        out[o, c, j] = v if v > 0 else g * v


@cuda.jit
def _prelu_dx_k(x, gamma, dy, dx, accumulate):
    nc, inner = x.shape[1], x.shape[2]
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        o = i // (nc * inner)
        c = (i // inner) % nc
        j = i % inner
        g = gamma[c] if gamma.shape[0] > 1 else gamma[0]
        d = dy[o, c, j]
        gx = d if x[o, c, j] > 0 else g * d
        if accumulate:
            dx[o, c, j] += gx
        else:
            dx[o, c, j] = gx


@cuda.jit
def _prelu_dgamma_k(x, dy, dgamma, accumulate):
    # one block per channel: sum of x * dy over the non-positive inputs of that channel
    part = cuda.shared.array(_SHARED, float64)
    c = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    inner = x.shape[2]
    count = x.shape[0] * inner
    s = 0.0
    for t in range(tid, count, nt):
        o = t // inner
        j = t % inner
        v = x[o, c, j]
        if v <= 0:
            s += v * dy[o, c, j]
    part[tid] = s
    cuda.syncthreads()
    step = nt // 2
    while step > 0:
        if tid < step:
            part[tid] += part[tid + step]
        cuda.syncthreads()
        step //= 2
    if tid == 0:
        if dgamma.shape[0] > 1:
            if accumulate:
                dgamma[c] += part[0]
            else:
                dgamma[c] = part[0]
        else:
            cuda.atomic.add(dgamma, 0, part[0])     # one shared slope: every channel adds


def prelu_forward(x, gamma, out):
    """x, out viewed as (outer, C, inner); gamma (C,) or (1,), broadcast over the rest."""
    _prelu_fwd_k[_grid(x.size)](x, _flat(gamma), out)


def prelu_backward(x, gamma, dy, dx, dgamma, req_x, req_gamma):
    """dx = dy * (x > 0 ? 1 : gamma); dgamma = sum over x <= 0 of x * dy (per channel)."""
    gamma = _flat(gamma)
    if req_x != "null":
        _prelu_dx_k[_grid(x.size)](x, gamma, dy, dx, req_x == "add")
    if req_gamma != "null":
        dgamma = _flat(dgamma)
        if dgamma.size == 1 and req_gamma == "write":
            fill(dgamma, 0.0)
        _prelu_dgamma_k[x.shape[1], REDUCE_THREADS](x, dy, dgamma, req_gamma == "add")


@cuda.jit
def _rrelu_fwd_k(x, u, lower, width, mask, out):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        m = lower + u[i] * width
        mask[i] = m
        v = x[i]
        out[i] = v if v > 0 else m * v


@cuda.jit
def _rrelu_bwd_k(y, mask, dy, dx, accumulate):
    for i in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        g = dy[i] if y[i] > 0 else dy[i] * mask[i]
        if accumulate:
            dx[i] += g
        else:
            dx[i] = g


def rrelu_forward(x, u, lower, upper, mask, out):
    """Training rrelu: slope = lower + u*(upper-lower) per element (u: host uniforms in [0,1))."""
    xf = _flat(x)
    _rrelu_fwd_k[_grid(xf.size)](xf, _flat(_to_device(u)), float(lower), float(upper - lower),
                                 _flat(mask), _flat(out))


def rrelu_backward(y, mask, dy, dx, accumulate=False):
    yf = _flat(y)
    _rrelu_bwd_k[_grid(yf.size)](yf, _flat(mask), _flat(dy), _flat(dx), accumulate)


# ---------------------------------------------------------------------------------------------
# Dropout
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _dropout_fwd_k(x, u, shape, ustrides, keep, mask, out):
    scale = 1.0 / keep if keep > 0 else 0.0
    full = u.size == x.size
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        j = i if full else S.broadcast_offset(i, shape, ustrides)
        m = scale if u[j] < keep else 0.0
        mask[i] = m
        out[i] = x[i] * m


def dropout_forward(x, u, p, mask, out):
    """mask = (u < 1-p) / (1-p) broadcast to x's shape; out = x * mask.

    ``u`` is a host array of uniforms in [0, 1) with x's ndim (1 on the axes the mask is
    shared over); it is copied to the device here.
    """
    xf = _flat(x)
    shape = tuple(int(d) for d in x.shape)
    ustrides = S.broadcast_strides(shape, u.shape)
    _dropout_fwd_k[_grid(xf.size)](xf, _flat(_to_device(u)), shape, ustrides, 1.0 - float(p),
                                   _flat(mask), _flat(out))


def dropout_backward(mask, dy, dx, accumulate=False):
    mf = _flat(mask)
    _mul_k[_grid(mf.size)](_flat(dy), mf, _flat(dx), accumulate)


# ---------------------------------------------------------------------------------------------
# Embedding
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _emb_fwd_k(idx, weight, out):
    dim = weight.shape[1]
    for t in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        i = t // dim
        d = t % dim
        out[i, d] = weight[S.clip_index(idx[i], weight.shape[0]), d]


@cuda.jit
def _emb_bwd_k(idx, dy, dweight):
    dim = dweight.shape[1]
    for t in range(cuda.grid(1), dy.size, cuda.gridsize(1)):
        i = t // dim
        d = t % dim
        cuda.atomic.add(dweight, (S.clip_index(idx[i], dweight.shape[0]), d), dy[i, d])


def embedding_forward(idx, weight, out):
    """out (n, D) = weight[clip(int(idx))] for idx flattened to (n,)."""
    _emb_fwd_k[_grid(out.size)](_flat(idx), weight, out)


def embedding_backward(idx, dy, dweight, accumulate=False):
    """dweight[clip(int(idx[i]))] += dy[i] (rows scattered with atomics, duplicates summed)."""
    if not accumulate:
        fill(dweight, 0.0)
    _emb_bwd_k[_grid(dy.size)](_flat(idx), dy, dweight)


# ---------------------------------------------------------------------------------------------
# softmax / log_softmax: one block per row of an (outer, L, inner) view
# ---------------------------------------------------------------------------------------------
@cuda.jit(device=True)
def _block_reduce(part, value, use_max):
    """Max or sum of `value` over the block (blockDim.x a power of two); all threads get it."""
    tid = cuda.threadIdx.x
    part[tid] = value
    cuda.syncthreads()
    step = cuda.blockDim.x // 2
    while step > 0:
        if tid < step:
            if use_max:
                if part[tid + step] > part[tid]:
                    part[tid] = part[tid + step]
            else:
                part[tid] += part[tid + step]
        cuda.syncthreads()
        step //= 2
    result = part[0]
    cuda.syncthreads()
    return result


@cuda.jit(device=True)
def _softmax_row(a, r, length, has_length):
    """Row r of an (outer, L, inner) view a: (outer index, inner index, the row's length)."""
    inner = a.shape[2]
    return r // inner, r % inner, S.row_length(length[r if has_length else 0], has_length,
                                               a.shape[1])


@cuda.jit
def _softmax_rows_k(x, out, inv_t, use_log, length, has_length):
    part = cuda.shared.array(_SHARED, float64)
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    full = x.shape[1]
    for r in range(cuda.blockIdx.x, x.shape[0] * x.shape[2], cuda.gridDim.x):
        o, j, n = _softmax_row(x, r, length, has_length)
        m = -math.inf
        for k in range(tid, n, nt):
            v = x[o, k, j] * inv_t
            if v > m:
                m = v
        m = _block_reduce(part, m, True)
        s = 0.0
        for k in range(tid, n, nt):
            s += math.exp(x[o, k, j] * inv_t - m)
        s = _block_reduce(part, s, False)
        for k in range(tid, full, nt):
            if k >= n:
                out[o, k, j] = 0
            elif use_log:
                out[o, k, j] = x[o, k, j] * inv_t - m - math.log(s)
            else:
                out[o, k, j] = math.exp(x[o, k, j] * inv_t - m) / s


@cuda.jit
def _softmax_grad_rows_k(y, dy, dx, inv_t, use_log, accumulate, length, has_length):
    part = cuda.shared.array(_SHARED, float64)
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    for r in range(cuda.blockIdx.x, y.shape[0] * y.shape[2], cuda.gridDim.x):
        o, j, n = _softmax_row(y, r, length, has_length)
        s = 0.0
        for k in range(tid, n, nt):
            s += S.softmax_grad_term(dy[o, k, j], y[o, k, j], use_log)
        s = _block_reduce(part, s, False)
        for k in range(tid, y.shape[1], nt):
            g = 0.0 if k >= n else S.softmax_grad_value(dy[o, k, j], y[o, k, j], s, inv_t, use_log)
            if accumulate:
                dx[o, k, j] += g
            else:
                dx[o, k, j] = g


def _length_arg(length, stand_in):
    """(lengths, has_length); without lengths any 1-D array stands in (element 0 is read)."""
    if length is not None:
        return _flat(length), True
    return _flat(stand_in), False


def _row_grid(rows):
    return max(1, min(rows, 65535)), REDUCE_THREADS


def softmax_forward(x, out, temperature=1.0, use_log=False, length=None):
    """(log-)softmax of x / temperature along axis 1 of (outer, L, inner) views.

    ``length`` (outer*inner values, or None): only the first int(length) elements of each row
    take part; the rest of the row is set to 0.
    """
    lengths, has_length = _length_arg(length, x)
    _softmax_rows_k[_row_grid(x.shape[0] * x.shape[2])](x, out, 1.0 / float(temperature),
                                                       use_log, lengths, has_length)


def softmax_backward(y, dy, dx, temperature=1.0, use_log=False, accumulate=False, length=None):
    """Gradient of softmax_forward from its output y."""
    lengths, has_length = _length_arg(length, y)
    _softmax_grad_rows_k[_row_grid(y.shape[0] * y.shape[2])](
        y, dy, dx, 1.0 / float(temperature), use_log, accumulate, lengths, has_length)


# ---------------------------------------------------------------------------------------------
# Loss heads
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _so_grad_k(prob, label, ograd, grad, ignore, use_ignore, alpha, scale, use_ograd,
               accumulate):
    ncls = prob.shape[1]
    inner = prob.shape[2]
    off_target = alpha / (ncls - 1) if ncls > 1 else 0.0
    for i in range(cuda.grid(1), prob.size, cuda.gridsize(1)):
        o = i // (ncls * inner)
        c = (i // inner) % ncls
        j = i % inner
        k = int(label[o * inner + j])
        if use_ignore and k == ignore:
            g = 0.0
        else:
            g = (prob[o, c, j] - ((1.0 - alpha) if c == k else off_target)) * scale
            if use_ograd:
                g *= ograd[o, c, j]
        if accumulate:
            grad[o, c, j] += g
        else:
            grad[o, c, j] = g


def softmax_output_backward(prob, label, ograd, grad, ignore_label, use_ignore, smooth_alpha,
                            scale, use_ograd, accumulate=False):
    """SoftmaxOutput's gradient on (outer, C, inner) views (see the CPU kernel)."""
    _so_grad_k[_grid(prob.size)](prob, _flat(label), ograd, grad, int(ignore_label),
                                 bool(use_ignore), float(smooth_alpha), float(scale),
                                 bool(use_ograd), accumulate)


@cuda.jit
def _reg_bwd_k(out, label, ograd, grad, kind, scale, use_ograd, accumulate):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        g = S.regression_diff(out[i], label[i], kind) * scale
        if use_ograd:
            g *= ograd[i]
        if accumulate:
            grad[i] += g
        else:
            grad[i] = g


def regression_backward(out, label, ograd, grad, kind, scale, use_ograd=False,
                        accumulate=False):
    """grad = f(out - label) * scale [* ograd] element-wise; kind 'diff' or 'sign'."""
    of = _flat(out)
    _reg_bwd_k[_grid(of.size)](of, _flat(label), _flat(ograd), _flat(grad),
                               REGRESSION_KINDS[kind], float(scale), bool(use_ograd),
                               accumulate)


@cuda.jit
def _count_k(x, value, greater, counter):
    n = 0
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        if greater:
            if x[i] > value:
                n += 1
        elif int(x[i]) == int(value):
            n += 1
    if n:
        cuda.atomic.add(counter, 0, n)


def _count(x, value, greater):
    counter = cuda.to_device(np.zeros(1, np.int64))
    xf = _flat(x)
    _count_k[_grid(xf.size)](xf, float(value), greater, counter)
    return int(counter.copy_to_host()[0])


def count_label_equal(label, value):
    """How many labels have int(label) == int(value) (SoftmaxOutput 'valid')."""
    return _count(label, int(value), False)


def count_greater(x, thresh):
    """How many elements exceed thresh (MakeLoss 'valid')."""
    return _count(x, thresh, True)


@cuda.jit
def _sl1_fwd_k(x, out, sigma2):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        out[i] = S.smooth_l1_value(x[i], sigma2)


@cuda.jit
def _sl1_bwd_k(x, dy, dx, sigma2, accumulate):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        g = dy[i] * S.smooth_l1_slope(x[i], sigma2)
        if accumulate:
            dx[i] += g
        else:
            dx[i] = g


def smooth_l1_forward(x, out, sigma):
    xf = _flat(x)
    _sl1_fwd_k[_grid(xf.size)](xf, _flat(out), float(sigma) ** 2)


def smooth_l1_backward(x, dy, dx, sigma, accumulate=False):
    xf = _flat(x)
    _sl1_bwd_k[_grid(xf.size)](xf, _flat(dy), _flat(dx), float(sigma) ** 2, accumulate)


K = compiled(NM, cuda.jit(device=True))


@cuda.jit
def _softmax_ce_fwd_k(x, label, out):
    # a single block: each thread sums the loss of its rows, then one reduction
    part = cuda.shared.array(_SHARED, float64)
    tid = cuda.threadIdx.x
    total = 0.0
    for r in range(tid, x.shape[0], cuda.blockDim.x):
        total += K.softmax_ce_row_loss(x, label, r, x.shape[1])
    total = _block_reduce(part, total, False)
    if tid == 0:
        out[0] = total


@cuda.jit
def _softmax_ce_bwd_k(x, label, ograd, dx, accumulate):
    for r in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        K.softmax_ce_row_grad(x, label, dx, r, x.shape[1], ograd[0], accumulate)


def softmax_ce_forward(x, label, out):
    """out (1,) = sum_r -log softmax(x[r])[label[r]] for x (N, C), label (N,)."""
    _softmax_ce_fwd_k[1, REDUCE_THREADS](x, _flat(label), out)


def softmax_ce_backward(x, label, ograd, dx, accumulate=False):
    """dx = (softmax(x) - onehot(label)) * ograd[0]."""
    _softmax_ce_bwd_k[_grid(x.shape[0])](x, _flat(label), ograd, dx, accumulate)
