"""CUDA kernels of the fused RNN operator: the functions of ``kernels/cpu/rnn.py`` with the same
signatures (the operator drives the loops and never branches on the device).

Matrix products use the tiled shared-memory GEMM of ``kernels/cuda/nn.py`` (transpose flags,
so no transposed copies); the gate math of one step is a grid-stride kernel over the
(batch, hidden) units calling the same per-unit functions as the CPU half
(``kernels/rnn_math.py``, compiled here as device functions). ``reverse_axes`` maps every
output element to its mirrored source.
"""
from numba import cuda

from .. import rnn_math as M
from ..math_build import compiled
from .memory import flat, launch_config
from .nn import _column_sums_k, _gemm

__all__ = ["rnn_gemm", "rnn_column_sum", "rnn_lstm_step", "rnn_lstm_step_backward",
           "rnn_gru_step", "rnn_gru_step_backward", "rnn_vanilla_step",
           "rnn_vanilla_step_backward", "reverse_axes"]

K = compiled(M, cuda.jit(device=True))


def rnn_gemm(a, b, out, trans_a=False, trans_b=False, accumulate=False, scratch=None):
    """out = op(a) @ op(b) (or out += ...); ``scratch`` is unused (the GEMM accumulates in
    place)."""
    _gemm(a, b, out, trans_a, trans_b, accumulate)


def rnn_column_sum(src, dst):
    """dst (C,) = sum over the rows of src (R, C)."""
    _column_sums_k[launch_config(dst.shape[0])](src, dst, False)


# ---------------------------------------------------------------------------------------------
# one time step of gate math: one kernel per direction for the three cell kinds (M.LSTM, M.GRU,
# M.VANILLA); an array a kind does not use is another 2-D array of the step, never touched
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _step_forward_k(cell, gx, gh, bx, bh, prev, gates, c, h, y, offset, relu):
    nh = h.shape[1]
    for u in range(cuda.grid(1), h.shape[0] * nh, cuda.gridsize(1)):
        j = u // nh
        k = u % nh
        if cell == M.LSTM:
            K.lstm_forward_unit(j, k, nh, gx, gh, bx, bh, prev, gates, c, h, y, offset)
        elif cell == M.GRU:
            K.gru_forward_unit(j, k, nh, gx, gh, bx, bh, prev, gates, h, y, offset)
        else:
            K.vanilla_forward_unit(j, k, gx, gh, bx, bh, h, y, offset, relu)


@cuda.jit
def _step_backward_k(cell, dy, offset, dh, dc, gates, state, prev, dg, dgh, relu):
    nh = dh.shape[1]
    for u in range(cuda.grid(1), dh.shape[0] * nh, cuda.gridsize(1)):
        j = u // nh
        k = u % nh
        if cell == M.LSTM:
            K.lstm_backward_unit(j, k, nh, dy, offset, dh, dc, gates, state, prev, dg)
        elif cell == M.GRU:
            K.gru_backward_unit(j, k, nh, dy, offset, dh, gates, prev, dg, dgh)
        else:
            K.vanilla_backward_unit(j, k, dy, offset, dh, state, dg, relu)


def rnn_lstm_step(gx, gh, bx, bh, c_prev, gates, c, h, y, offset):
    _step_forward_k[launch_config(h.size)](M.LSTM, gx, gh, bx, bh, c_prev, gates, c, h, y,
                                           offset, False)


def rnn_lstm_step_backward(dy, offset, dh, dc, gates, c, c_prev, dg):
    _step_backward_k[launch_config(dh.size)](M.LSTM, dy, offset, dh, dc, gates, c, c_prev, dg,
                                             dg, False)


def rnn_gru_step(gx, gh, bx, bh, h_prev, gates, h, y, offset):
    _step_forward_k[launch_config(h.size)](M.GRU, gx, gh, bx, bh, h_prev, gates, h, h, y,
                                           offset, False)


def rnn_gru_step_backward(dy, offset, dh, gates, h_prev, dgx, dgh):
    _step_backward_k[launch_config(dh.size)](M.GRU, dy, offset, dh, dh, gates, h_prev, h_prev,
                                             dgx, dgh, False)


def rnn_vanilla_step(gx, gh, bx, bh, h, y, offset, relu):
    _step_forward_k[launch_config(h.size)](M.VANILLA, gx, gh, bx, bh, h, h, h, h, y, offset,
                                           bool(relu))


def rnn_vanilla_step_backward(dy, offset, dh, h, dg, relu):
    _step_backward_k[launch_config(dh.size)](M.VANILLA, dy, offset, dh, dh, h, h, h, dg, dg,
                                             bool(relu))


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
