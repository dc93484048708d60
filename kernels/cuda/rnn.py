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
from .memory import flat, launch_config
from .nn import _column_sums_k, _gemm

__all__ = ["rnn_gemm", "rnn_column_sum", "rnn_lstm_step", "rnn_lstm_step_backward",
           "rnn_gru_step", "rnn_gru_step_backward", "rnn_vanilla_step",
           "rnn_vanilla_step_backward", "reverse_axes"]

_lstm_forward_unit = cuda.jit(device=True)(M.lstm_forward_unit)
_lstm_backward_unit = cuda.jit(device=True)(M.lstm_backward_unit)
_gru_forward_unit = cuda.jit(device=True)(M.gru_forward_unit)
_gru_backward_unit = cuda.jit(device=True)(M.gru_backward_unit)
_vanilla_forward_unit = cuda.jit(device=True)(M.vanilla_forward_unit)
_vanilla_backward_unit = cuda.jit(device=True)(M.vanilla_backward_unit)


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
        _lstm_forward_unit(u // nh, u % nh, gx, gh, bx, bh, c_prev, gates, c, h, y, offset)


def rnn_lstm_step(gx, gh, bx, bh, c_prev, gates, c, h, y, offset):
    _lstm_fwd_k[launch_config(c.size)](gx, gh, bx, bh, c_prev, gates, c, h, y, offset)


@cuda.jit
def _lstm_bwd_k(dy, offset, dh, dc, gates, c, c_prev, dg):
    nh = c.shape[1]
    for u in range(cuda.grid(1), c.shape[0] * nh, cuda.gridsize(1)):
        _lstm_backward_unit(u // nh, u % nh, dy, offset, dh, dc, gates, c, c_prev, dg)


def rnn_lstm_step_backward(dy, offset, dh, dc, gates, c, c_prev, dg):
    _lstm_bwd_k[launch_config(c.size)](dy, offset, dh, dc, gates, c, c_prev, dg)


# ---------------------------------------------------------------------------------------------
# GRU
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _gru_fwd_k(gx, gh, bx, bh, h_prev, gates, h, y, offset):
    nh = h.shape[1]
    for u in range(cuda.grid(1), h.shape[0] * nh, cuda.gridsize(1)):
        _gru_forward_unit(u // nh, u % nh, gx, gh, bx, bh, h_prev, gates, h, y, offset)


def rnn_gru_step(gx, gh, bx, bh, h_prev, gates, h, y, offset):
    _gru_fwd_k[launch_config(h.size)](gx, gh, bx, bh, h_prev, gates, h, y, offset)


@cuda.jit
def _gru_bwd_k(dy, offset, dh, gates, h_prev, dgx, dgh):
    nh = h_prev.shape[1]
    for u in range(cuda.grid(1), h_prev.shape[0] * nh, cuda.gridsize(1)):
        _gru_backward_unit(u // nh, u % nh, dy, offset, dh, gates, h_prev, dgx, dgh)


def rnn_gru_step_backward(dy, offset, dh, gates, h_prev, dgx, dgh):
    _gru_bwd_k[launch_config(h_prev.size)](dy, offset, dh, gates, h_prev, dgx, dgh)


# ---------------------------------------------------------------------------------------------
# vanilla RNN (tanh / relu)
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _vanilla_fwd_k(gx, gh, bx, bh, h, y, offset, relu):
    nh = h.shape[1]
    for u in range(cuda.grid(1), h.shape[0] * nh, cuda.gridsize(1)):
        _vanilla_forward_unit(u // nh, u % nh, gx, gh, bx, bh, h, y, offset, relu)


def rnn_vanilla_step(gx, gh, bx, bh, h, y, offset, relu):
    _vanilla_fwd_k[launch_config(h.size)](gx, gh, bx, bh, h, y, offset, bool(relu))


@cuda.jit
def _vanilla_bwd_k(dy, offset, dh, h, dg, relu):
    nh = h.shape[1]
    for u in range(cuda.grid(1), h.shape[0] * nh, cuda.gridsize(1)):
        _vanilla_backward_unit(u // nh, u % nh, dy, offset, dh, h, dg, relu)


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
