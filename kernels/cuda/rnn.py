"""CUDA kernels of the fused RNN operator: the functions of ``kernels/cpu/rnn.py`` with the same
signatures (the operator drives the loops and never branches on the device).

Matrix products use the tiled shared-memory GEMM of ``kernels/cuda/nn.py`` (transpose flags,
so no transposed copies); the gate math of one step is a grid-stride kernel over the
(batch, hidden) units calling the same per-unit ``@njit`` functions as the CPU half
(``kernels/scalar_rnn.py``). ``reverse_axes`` maps every output element to its mirrored source.
"""
from numba import cuda

from ..scalar_rnn import gru_unit, gru_unit_grad, lstm_unit, lstm_unit_grad, vanilla_unit, vanilla_unit_grad
from .memory import flat, launch_config
from .nn import _column_sums_k, _gemm

__all__ = ["rnn_gemm", "rnn_column_sum", "rnn_lstm_step", "rnn_lstm_step_backward",
           "rnn_gru_step", "rnn_gru_step_backward", "rnn_vanilla_step",
           "rnn_vanilla_step_backward", "reverse_axes"]


def rnn_gemm(a, b, out, trans_a=False, trans_b=False, accumulate=False, scratch=None):
    """out = op(a) @ op(b) (or out += ...); ``scratch`` is unused (the GEMM accumulates in
    place)."""
    _gemm(a, b, out, trans_a, trans_b, accumulate)


def rnn_column_sum(src, dst):
    """dst (C,) = sum over the rows of src (R, C)."""
    _column_sums_k[launch_config(dst.shape[0])](src, dst, False)


# ---------------------------------------------------------------------------------------------
# LSTM
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _lstm_fwd_k(gx, gh, bx, bh, c_prev, gates, c, h, y, offset):
    nh = c.shape[1]
    for u in range(cuda.grid(1), c.shape[0] * nh, cuda.gridsize(1)):
        j = u // nh
        k = u % nh
        i, f, g, o, ct, ht = lstm_unit(
            gx[j, k] + gh[j, k] + bx[k] + bh[k],
            gx[j, nh + k] + gh[j, nh + k] + bx[nh + k] + bh[nh + k],
            gx[j, 2 * nh + k] + gh[j, 2 * nh + k] + bx[2 * nh + k] + bh[2 * nh + k],
            gx[j, 3 * nh + k] + gh[j, 3 * nh + k] + bx[3 * nh + k] + bh[3 * nh + k],
            c_prev[j, k])
        gates[j, k] = i
        gates[j, nh + k] = f
        gates[j, 2 * nh + k] = g
        gates[j, 3 * nh + k] = o
        c[j, k] = ct
        h[j, k] = ht
        y[j, offset + k] = ht


def rnn_lstm_step(gx, gh, bx, bh, c_prev, gates, c, h, y, offset):
    _lstm_fwd_k[launch_config(c.size)](gx, gh, bx, bh, c_prev, gates, c, h, y, offset)


@cuda.jit
def _lstm_bwd_k(dy, offset, dh, dc, gates, c, c_prev, dg):
    nh = c.shape[1]
    for u in range(cuda.grid(1), c.shape[0] * nh, cuda.gridsize(1)):
        j = u // nh
        k = u % nh
        dai, daf, dag, dao, dcp = lstm_unit_grad(
            dh[j, k] + dy[j, offset + k], dc[j, k], gates[j, k], gates[j, nh + k],
            gates[j, 2 * nh + k], gates[j, 3 * nh + k], c[j, k], c_prev[j, k])
        dg[j, k] = dai
        dg[j, nh + k] = daf
        dg[j, 2 * nh + k] = dag
        dg[j, 3 * nh + k] = dao
        dc[j, k] = dcp


def rnn_lstm_step_backward(dy, offset, dh, dc, gates, c, c_prev, dg):
    _lstm_bwd_k[launch_config(c.size)](dy, offset, dh, dc, gates, c, c_prev, dg)


# ---------------------------------------------------------------------------------------------
# GRU
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _gru_fwd_k(gx, gh, bx, bh, h_prev, gates, h, y, offset):
    nh = h.shape[1]
    for u in range(cuda.grid(1), h.shape[0] * nh, cuda.gridsize(1)):
        j = u // nh
        k = u % nh
        hn = gh[j, 2 * nh + k] + bh[2 * nh + k]
        r, z, n, ht = gru_unit(gx[j, k] + gh[j, k] + bx[k] + bh[k],
                               gx[j, nh + k] + gh[j, nh + k] + bx[nh + k] + bh[nh + k],
                               gx[j, 2 * nh + k] + bx[2 * nh + k], hn, h_prev[j, k])
        gates[j, k] = r
        gates[j, nh + k] = z
        gates[j, 2 * nh + k] = n
        gates[j, 3 * nh + k] = hn
        h[j, k] = ht
        y[j, offset + k] = ht


def rnn_gru_step(gx, gh, bx, bh, h_prev, gates, h, y, offset):
    _gru_fwd_k[launch_config(h.size)](gx, gh, bx, bh, h_prev, gates, h, y, offset)


@cuda.jit
def _gru_bwd_k(dy, offset, dh, gates, h_prev, dgx, dgh):
    nh = h_prev.shape[1]
    for u in range(cuda.grid(1), h_prev.shape[0] * nh, cuda.gridsize(1)):
        j = u // nh
        k = u % nh
        dar, daz, dxn, dhn, dhp = gru_unit_grad(
            dh[j, k] + dy[j, offset + k], gates[j, k], gates[j, nh + k],
            gates[j, 2 * nh + k], gates[j, 3 * nh + k], h_prev[j, k])
        dgx[j, k] = dar
        dgx[j, nh + k] = daz
        dgx[j, 2 * nh + k] = dxn
        dgh[j, k] = dar
        dgh[j, nh + k] = daz
        dgh[j, 2 * nh + k] = dhn
        dh[j, k] = dhp


def rnn_gru_step_backward(dy, offset, dh, gates, h_prev, dgx, dgh):
    _gru_bwd_k[launch_config(h_prev.size)](dy, offset, dh, gates, h_prev, dgx, dgh)


# ---------------------------------------------------------------------------------------------
# vanilla RNN (tanh / relu)
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _vanilla_fwd_k(gx, gh, bx, bh, h, y, offset, relu):
    nh = h.shape[1]
    for u in range(cuda.grid(1), h.shape[0] * nh, cuda.gridsize(1)):
        j = u // nh
        k = u % nh
        ht = vanilla_unit(gx[j, k] + gh[j, k] + bx[k] + bh[k], relu)
        h[j, k] = ht
        y[j, offset + k] = ht


def rnn_vanilla_step(gx, gh, bx, bh, h, y, offset, relu):
    _vanilla_fwd_k[launch_config(h.size)](gx, gh, bx, bh, h, y, offset, bool(relu))


@cuda.jit
def _vanilla_bwd_k(dy, offset, dh, h, dg, relu):
    nh = h.shape[1]
    for u in range(cuda.grid(1), h.shape[0] * nh, cuda.gridsize(1)):
        j = u // nh
        k = u % nh
        dg[j, k] = vanilla_unit_grad(dh[j, k] + dy[j, offset + k], h[j, k], relu)


def rnn_vanilla_step_backward(dy, offset, dh, h, dg, relu):
    _vanilla_bwd_k[launch_config(h.size)](dy, offset, dh, h, dg, bool(relu))


# ---------------------------------------------------------------------------------------------
# reverse (flip) along axes
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _reverse_k(src, dst, shape, flips, accumulate):
    for i in range(cuda.grid(1), dst.shape[0], cuda.gridsize(1)):
        rest = i
        offset = 0
        stride = 1
        for d in range(len(shape) - 1, -1, -1):
            coord = rest % shape[d]
            rest //= shape[d]
            if flips[d]:
                coord = shape[d] - 1 - coord
            offset += coord * stride
            stride *= shape[d]
        if accumulate:
            dst[i] += src[offset]
        else:
            dst[i] = src[offset]


def reverse_axes(src, dst, axes, accumulate=False):
    """dst = src reversed along ``axes`` (or dst += ...)."""
    if dst.size == 0:
        return
    shape = tuple(int(d) for d in src.shape)
    flips = tuple(1 if d in axes else 0 for d in range(len(shape)))
    out = flat(dst)
    _reverse_k[launch_config(out.size)](flat(src), out, shape, flips, accumulate)
