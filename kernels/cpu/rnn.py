"""CPU kernels of the fused RNN operator: matrix products and one time step of gate math.

The operator (``lightmod/operator/rnn_op.py``) drives the layer / direction / time loops and
calls these. Matrix products go to BLAS through numpy; the element-wise gate math of one step
(forward and backward) is one numba pass over the (batch, hidden) units, using the per-unit
functions of ``kernels/scalar_rnn.py`` that the CUDA half (``kernels/cuda/rnn.py``, same
signatures) calls too.

Layouts: gate pre-activations of one step are (N, G*H) with gate blocks of H columns in MXNet's
order (LSTM i, f, g, o; GRU r, z, n); ``y`` is the (N, D*H) output row block of the step, where
this direction writes columns [offset, offset + H). Saved gates are (N, 4H): LSTM i, f, g, o
(activated); GRU r, z, n and W_hn h + b_hn.
"""
import numpy as np
from numba import njit, prange

from .. import rnn_math as M
from .jit import parallel_loop

__all__ = ["rnn_gemm", "rnn_column_sum", "rnn_lstm_step", "rnn_lstm_step_backward",
           "rnn_gru_step", "rnn_gru_step_backward", "rnn_vanilla_step",
           "rnn_vanilla_step_backward", "reverse_axes"]

# a gate unit costs about four element-wise adds (several transcendental functions)
_COST = 4.0

# the per-unit math of kernels/rnn_math.py, inlined into the loops below
_lstm_forward_unit = njit(cache=True, inline="always")(M.lstm_forward_unit)
_lstm_backward_unit = njit(cache=True, inline="always")(M.lstm_backward_unit)
_gru_forward_unit = njit(cache=True, inline="always")(M.gru_forward_unit)
_gru_backward_unit = njit(cache=True, inline="always")(M.gru_backward_unit)
_vanilla_forward_unit = njit(cache=True, inline="always")(M.vanilla_forward_unit)
_vanilla_backward_unit = njit(cache=True, inline="always")(M.vanilla_backward_unit)


# ---------------------------------------------------------------------------------------------
# matrix products and bias sums
# ---------------------------------------------------------------------------------------------
def rnn_gemm(a, b, out, trans_a=False, trans_b=False, accumulate=False, scratch=None):
    """out = op(a) @ op(b) (or out += ...); op transposes when trans_* is set.

    ``scratch`` (a dict) keeps the temporary an accumulating product needs between calls.
    """
    a = a.T if trans_a else a
    b = b.T if trans_b else b
    if not accumulate:
        np.matmul(a, b, out=out)
        return
    tmp = None if scratch is None else scratch.get(("rnn_gemm", out.shape, out.dtype))
    if tmp is None:
        tmp = np.empty(out.shape, out.dtype)
        if scratch is not None:
            scratch[("rnn_gemm", out.shape, out.dtype)] = tmp
    np.matmul(a, b, out=tmp)
    out += tmp


def rnn_column_sum(src, dst):
    """dst (C,) = sum over the rows of src (R, C)."""
    np.sum(src, axis=0, out=dst)


# ---------------------------------------------------------------------------------------------
# LSTM
# ---------------------------------------------------------------------------------------------
@parallel_loop(cost=_COST)
def _lstm_fwd(gx, gh, bx, bh, c_prev, gates, c, h, y, offset):
    for j in prange(c.shape[0]):
        for k in range(c.shape[1]):
            _lstm_forward_unit(j, k, gx, gh, bx, bh, c_prev, gates, c, h, y, offset)


def rnn_lstm_step(gx, gh, bx, bh, c_prev, gates, c, h, y, offset):
    """One LSTM step: gates/c/h (and y's columns) from gx + gh + biases and c_prev."""
    _lstm_fwd(c.size, gx, gh, bx, bh, c_prev, gates, c, h, y, offset)


@parallel_loop(cost=_COST)
def _lstm_bwd(dy, offset, dh, dc, gates, c, c_prev, dg):
    for j in prange(c.shape[0]):
        for k in range(c.shape[1]):
            _lstm_backward_unit(j, k, dy, offset, dh, dc, gates, c, c_prev, dg)


def rnn_lstm_step_backward(dy, offset, dh, dc, gates, c, c_prev, dg):
    """Pre-activation gradients dg of one LSTM step from dh (+ y's columns of dy) and dc.

    dc is replaced by the gradient of c_prev; dh is only read (the caller then sets it to
    dg @ W_h)."""
    _lstm_bwd(c.size, dy, offset, dh, dc, gates, c, c_prev, dg)


# ---------------------------------------------------------------------------------------------
# GRU
# ---------------------------------------------------------------------------------------------
@parallel_loop(cost=_COST)
def _gru_fwd(gx, gh, bx, bh, h_prev, gates, h, y, offset):
    for j in prange(h.shape[0]):
        for k in range(h.shape[1]):
            _gru_forward_unit(j, k, gx, gh, bx, bh, h_prev, gates, h, y, offset)


def rnn_gru_step(gx, gh, bx, bh, h_prev, gates, h, y, offset):
    """One GRU step (cuDNN form): gates/h (and y's columns) from gx, gh, biases and h_prev."""
    _gru_fwd(h.size, gx, gh, bx, bh, h_prev, gates, h, y, offset)


@parallel_loop(cost=_COST)
def _gru_bwd(dy, offset, dh, gates, h_prev, dgx, dgh):
    for j in prange(h_prev.shape[0]):
        for k in range(h_prev.shape[1]):
            _gru_backward_unit(j, k, dy, offset, dh, gates, h_prev, dgx, dgh)


def rnn_gru_step_backward(dy, offset, dh, gates, h_prev, dgx, dgh):
    """Pre-activation gradients of one GRU step: dgx (input side) and dgh (recurrent side).

    dh (carried gradient; y's columns of dy are added) is replaced by the direct part of the
    gradient of h_prev (dh * z); the caller then adds dgh @ W_h."""
    _gru_bwd(h_prev.size, dy, offset, dh, gates, h_prev, dgx, dgh)


# ---------------------------------------------------------------------------------------------
# vanilla RNN (tanh / relu)
# ---------------------------------------------------------------------------------------------
@parallel_loop(cost=_COST)
def _vanilla_fwd(gx, gh, bx, bh, h, y, offset, relu):
    for j in prange(h.shape[0]):
        for k in range(h.shape[1]):
            _vanilla_forward_unit(j, k, gx, gh, bx, bh, h, y, offset, relu)


def rnn_vanilla_step(gx, gh, bx, bh, h, y, offset, relu):
    """One vanilla RNN step: h = act(gx + gh + biases), also written to y's columns."""
    _vanilla_fwd(h.size, gx, gh, bx, bh, h, y, offset, bool(relu))


@parallel_loop(cost=_COST)
def _vanilla_bwd(dy, offset, dh, h, dg, relu):
    for j in prange(h.shape[0]):
        for k in range(h.shape[1]):
            _vanilla_backward_unit(j, k, dy, offset, dh, h, dg, relu)


def rnn_vanilla_step_backward(dy, offset, dh, h, dg, relu):
    """Pre-activation gradient dg of one vanilla step from dh (+ y's columns of dy)."""
    _vanilla_bwd(h.size, dy, offset, dh, h, dg, bool(relu))


# ---------------------------------------------------------------------------------------------
# reverse (flip) along axes, for the ``reverse`` operator
# ---------------------------------------------------------------------------------------------
def reverse_axes(src, dst, axes, accumulate=False):
    """dst = src reversed along ``axes`` (or dst += ...)."""
    flipped = np.flip(src, axis=tuple(axes)) if axes else src
    if accumulate:
        dst += flipped
    else:
        np.copyto(dst, flipped)
