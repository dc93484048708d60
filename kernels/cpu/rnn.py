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

from .. import cache_stamp  # noqa: F401  (stamps the cache entries made below)
from .. import rnn_math as M
from ..math_build import compiled
from . import gemm
from .jit import parallel_loop

__all__ = ["rnn_gemm", "rnn_column_sum", "rnn_lstm_step", "rnn_lstm_step_backward",
           "rnn_gru_step", "rnn_gru_step_backward", "rnn_vanilla_step",
           "rnn_vanilla_step_backward", "reverse_axes"]

# a gate unit costs about four element-wise adds (several transcendental functions)
_COST = 4.0

# the per-unit math of kernels/rnn_math.py, inlined into the loops below
K = compiled(M, njit(cache=True, inline="always"))


# ---------------------------------------------------------------------------------------------
# matrix products and bias sums
# ---------------------------------------------------------------------------------------------
def rnn_gemm(a, b, out, trans_a=False, trans_b=False, accumulate=False, scratch=None):
    """out = op(a) @ op(b) (or out += ...); op transposes when trans_* is set. On lightmod's
    threads (kernels/cpu/gemm.py) where it can, else through numpy.

    ``scratch`` (a dict) keeps the temporary an accumulating numpy product needs between calls.
    """
    if gemm.product(a, b, out, trans_a, trans_b, accumulate):
        return
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
# one time step of gate math: one loop per direction for the three cell kinds (M.LSTM, M.GRU,
# M.VANILLA); an array a kind does not use is another 2-D array of the step, never touched
# ---------------------------------------------------------------------------------------------
@parallel_loop(cost=_COST)
def _step_forward(cell, gx, gh, bx, bh, prev, gates, c, h, y, offset, relu, lo, hi):
    # the cell kind is tested per row: a test per unit would stop the unit loop vectorising
    nh = h.shape[1]
    for j in prange(lo, hi):
        if cell == M.LSTM:
            for k in range(nh):
                K.lstm_forward_unit(j, k, nh, gx, gh, bx, bh, prev, gates, c, h, y, offset)
        elif cell == M.GRU:
            for k in range(nh):
                K.gru_forward_unit(j, k, nh, gx, gh, bx, bh, prev, gates, h, y, offset)
        else:
            for k in range(nh):
                K.vanilla_forward_unit(j, k, gx, gh, bx, bh, h, y, offset, relu)


@parallel_loop(cost=_COST)
def _step_backward(cell, dy, offset, dh, dc, gates, state, prev, dg, dgh, relu, lo, hi):
    nh = dh.shape[1]
    for j in prange(lo, hi):
        if cell == M.LSTM:
            for k in range(nh):
                K.lstm_backward_unit(j, k, nh, dy, offset, dh, dc, gates, state, prev, dg)
        elif cell == M.GRU:
            for k in range(nh):
                K.gru_backward_unit(j, k, nh, dy, offset, dh, gates, prev, dg, dgh)
        else:
            for k in range(nh):
                K.vanilla_backward_unit(j, k, dy, offset, dh, state, dg, relu)


def rnn_lstm_step(gx, gh, bx, bh, c_prev, gates, c, h, y, offset):
    """One LSTM step: gates/c/h (and y's columns) from gx + gh + biases and c_prev."""
    _step_forward(h.size, M.LSTM, gx, gh, bx, bh, c_prev, gates, c, h, y, offset, False, 0,
                  h.shape[0])


def rnn_lstm_step_backward(dy, offset, dh, dc, gates, c, c_prev, dg):
    """Pre-activation gradients dg of one LSTM step from dh (+ y's columns of dy) and dc.

    dc is replaced by the gradient of c_prev; dh is only read (the caller then sets it to
    dg @ W_h)."""
    _step_backward(dh.size, M.LSTM, dy, offset, dh, dc, gates, c, c_prev, dg, dg, False, 0,
                   dh.shape[0])


def rnn_gru_step(gx, gh, bx, bh, h_prev, gates, h, y, offset):
    """One GRU step (cuDNN form): gates/h (and y's columns) from gx, gh, biases and h_prev."""
    _step_forward(h.size, M.GRU, gx, gh, bx, bh, h_prev, gates, h, h, y, offset, False, 0,
                  h.shape[0])


def rnn_gru_step_backward(dy, offset, dh, gates, h_prev, dgx, dgh):
    """Pre-activation gradients of one GRU step: dgx (input side) and dgh (recurrent side).

    dh (carried gradient; y's columns of dy are added) is replaced by the direct part of the
    gradient of h_prev (dh * z); the caller then adds dgh @ W_h."""
    _step_backward(dh.size, M.GRU, dy, offset, dh, dh, gates, h_prev, h_prev, dgx, dgh, False,
                   0, dh.shape[0])


def rnn_vanilla_step(gx, gh, bx, bh, h, y, offset, relu):
    """One vanilla RNN step: h = act(gx + gh + biases), also written to y's columns."""
    _step_forward(h.size, M.VANILLA, gx, gh, bx, bh, h, h, h, h, y, offset, bool(relu), 0,
                  h.shape[0])


def rnn_vanilla_step_backward(dy, offset, dh, h, dg, relu):
    """Pre-activation gradient dg of one vanilla step from dh (+ y's columns of dy)."""
    _step_backward(dh.size, M.VANILLA, dy, offset, dh, dh, h, h, h, dg, dg, bool(relu), 0,
                   dh.shape[0])


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
