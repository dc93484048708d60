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

from ..scalar_rnn import gru_unit, gru_unit_grad, lstm_unit, lstm_unit_grad, vanilla_unit, vanilla_unit_grad
from .jit import task_count

__all__ = ["rnn_gemm", "rnn_column_sum", "rnn_lstm_step", "rnn_lstm_step_backward",
           "rnn_gru_step", "rnn_gru_step_backward", "rnn_vanilla_step",
           "rnn_vanilla_step_backward", "reverse_axes"]

# a gate unit costs about four element-wise adds (several transcendental functions)
_COST = 4.0


def _launch_rows(serial, parallel, rows, units, *args):
    """Run serial(*args, 0, rows) or split the rows over the threads."""
    parts = task_count(units, rows, cost=_COST, per_thread=4)
    if parts > 1:
        parallel(*args, rows, parts)
    else:
        serial(*args, 0, rows)


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
@njit(cache=True)
def _lstm_fwd(gx, gh, bx, bh, c_prev, gates, c, h, y, offset, lo, hi):
    nh = c.shape[1]
    for j in range(lo, hi):
        for k in range(nh):
            a = gx[j, k] + gh[j, k] + bx[k] + bh[k]
            b = gx[j, nh + k] + gh[j, nh + k] + bx[nh + k] + bh[nh + k]
            q = gx[j, 2 * nh + k] + gh[j, 2 * nh + k] + bx[2 * nh + k] + bh[2 * nh + k]
            d = gx[j, 3 * nh + k] + gh[j, 3 * nh + k] + bx[3 * nh + k] + bh[3 * nh + k]
            i, f, g, o, ct, ht = lstm_unit(a, b, q, d, c_prev[j, k])
            gates[j, k] = i
            gates[j, nh + k] = f
            gates[j, 2 * nh + k] = g
            gates[j, 3 * nh + k] = o
            c[j, k] = ct
            h[j, k] = ht
            y[j, offset + k] = ht


@njit(cache=True, parallel=True)
def _lstm_fwd_par(gx, gh, bx, bh, c_prev, gates, c, h, y, offset, rows, nchunks):
    step = (rows + nchunks - 1) // nchunks
    for ch in prange(nchunks):
        _lstm_fwd(gx, gh, bx, bh, c_prev, gates, c, h, y, offset, ch * step,
                  min(rows, (ch + 1) * step))


def rnn_lstm_step(gx, gh, bx, bh, c_prev, gates, c, h, y, offset):
    """One LSTM step: gates/c/h (and y's columns) from gx + gh + biases and c_prev."""
    _launch_rows(_lstm_fwd, _lstm_fwd_par, c.shape[0], c.size, gx, gh, bx, bh, c_prev, gates,
                 c, h, y, offset)


@njit(cache=True)
def _lstm_bwd(dy, offset, dh, dc, gates, c, c_prev, dg, lo, hi):
    nh = c.shape[1]
    for j in range(lo, hi):
        for k in range(nh):
            dai, daf, dag, dao, dcp = lstm_unit_grad(
                dh[j, k] + dy[j, offset + k], dc[j, k], gates[j, k], gates[j, nh + k],
                gates[j, 2 * nh + k], gates[j, 3 * nh + k], c[j, k], c_prev[j, k])
            dg[j, k] = dai
            dg[j, nh + k] = daf
            dg[j, 2 * nh + k] = dag
            dg[j, 3 * nh + k] = dao
            dc[j, k] = dcp


@njit(cache=True, parallel=True)
def _lstm_bwd_par(dy, offset, dh, dc, gates, c, c_prev, dg, rows, nchunks):
    step = (rows + nchunks - 1) // nchunks
    for ch in prange(nchunks):
        _lstm_bwd(dy, offset, dh, dc, gates, c, c_prev, dg, ch * step,
                  min(rows, (ch + 1) * step))


def rnn_lstm_step_backward(dy, offset, dh, dc, gates, c, c_prev, dg):
    """Pre-activation gradients dg of one LSTM step from dh (+ y's columns of dy) and dc.

    dc is replaced by the gradient of c_prev; dh is only read (the caller then sets it to
    dg @ W_h)."""
    _launch_rows(_lstm_bwd, _lstm_bwd_par, c.shape[0], c.size, dy, offset, dh, dc, gates, c,
                 c_prev, dg)


# ---------------------------------------------------------------------------------------------
# GRU
# ---------------------------------------------------------------------------------------------
@njit(cache=True)
def _gru_fwd(gx, gh, bx, bh, h_prev, gates, h, y, offset, lo, hi):
    nh = h.shape[1]
    for j in range(lo, hi):
        for k in range(nh):
            ar = gx[j, k] + gh[j, k] + bx[k] + bh[k]
            az = gx[j, nh + k] + gh[j, nh + k] + bx[nh + k] + bh[nh + k]
            xn = gx[j, 2 * nh + k] + bx[2 * nh + k]
            hn = gh[j, 2 * nh + k] + bh[2 * nh + k]
            r, z, n, ht = gru_unit(ar, az, xn, hn, h_prev[j, k])
            gates[j, k] = r
            gates[j, nh + k] = z
            gates[j, 2 * nh + k] = n
            gates[j, 3 * nh + k] = hn
            h[j, k] = ht
            y[j, offset + k] = ht


@njit(cache=True, parallel=True)
def _gru_fwd_par(gx, gh, bx, bh, h_prev, gates, h, y, offset, rows, nchunks):
    step = (rows + nchunks - 1) // nchunks
    for ch in prange(nchunks):
        _gru_fwd(gx, gh, bx, bh, h_prev, gates, h, y, offset, ch * step,
                 min(rows, (ch + 1) * step))


def rnn_gru_step(gx, gh, bx, bh, h_prev, gates, h, y, offset):
    """One GRU step (cuDNN form): gates/h (and y's columns) from gx, gh, biases and h_prev."""
    _launch_rows(_gru_fwd, _gru_fwd_par, h.shape[0], h.size, gx, gh, bx, bh, h_prev, gates, h,
                 y, offset)


@njit(cache=True)
def _gru_bwd(dy, offset, dh, gates, h_prev, dgx, dgh, lo, hi):
    nh = h_prev.shape[1]
    for j in range(lo, hi):
        for k in range(nh):
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


@njit(cache=True, parallel=True)
def _gru_bwd_par(dy, offset, dh, gates, h_prev, dgx, dgh, rows, nchunks):
    step = (rows + nchunks - 1) // nchunks
    for ch in prange(nchunks):
        _gru_bwd(dy, offset, dh, gates, h_prev, dgx, dgh, ch * step,
                 min(rows, (ch + 1) * step))


def rnn_gru_step_backward(dy, offset, dh, gates, h_prev, dgx, dgh):
    """Pre-activation gradients of one GRU step: dgx (input side) and dgh (recurrent side).

    dh (carried gradient; y's columns of dy are added) is replaced by the direct part of the
    gradient of h_prev (dh * z); the caller then adds dgh @ W_h."""
    _launch_rows(_gru_bwd, _gru_bwd_par, h_prev.shape[0], h_prev.size, dy, offset, dh, gates,
                 h_prev, dgx, dgh)


# ---------------------------------------------------------------------------------------------
# vanilla RNN (tanh / relu)
# ---------------------------------------------------------------------------------------------
@njit(cache=True)
def _vanilla_fwd(gx, gh, bx, bh, h, y, offset, relu, lo, hi):
    nh = h.shape[1]
    for j in range(lo, hi):
        for k in range(nh):
            ht = vanilla_unit(gx[j, k] + gh[j, k] + bx[k] + bh[k], relu)
            h[j, k] = ht
            y[j, offset + k] = ht


@njit(cache=True, parallel=True)
def _vanilla_fwd_par(gx, gh, bx, bh, h, y, offset, relu, rows, nchunks):
    step = (rows + nchunks - 1) // nchunks
    for ch in prange(nchunks):
        _vanilla_fwd(gx, gh, bx, bh, h, y, offset, relu, ch * step, min(rows, (ch + 1) * step))


def rnn_vanilla_step(gx, gh, bx, bh, h, y, offset, relu):
    """One vanilla RNN step: h = act(gx + gh + biases), also written to y's columns."""
    _launch_rows(_vanilla_fwd, _vanilla_fwd_par, h.shape[0], h.size, gx, gh, bx, bh, h, y,
                 offset, bool(relu))


@njit(cache=True)
def _vanilla_bwd(dy, offset, dh, h, dg, relu, lo, hi):
    nh = h.shape[1]
    for j in range(lo, hi):
        for k in range(nh):
            dg[j, k] = vanilla_unit_grad(dh[j, k] + dy[j, offset + k], h[j, k], relu)


@njit(cache=True, parallel=True)
def _vanilla_bwd_par(dy, offset, dh, h, dg, relu, rows, nchunks):
    step = (rows + nchunks - 1) // nchunks
    for ch in prange(nchunks):
        _vanilla_bwd(dy, offset, dh, h, dg, relu, ch * step, min(rows, (ch + 1) * step))


def rnn_vanilla_step_backward(dy, offset, dh, h, dg, relu):
    """Pre-activation gradient dg of one vanilla step from dh (+ y's columns of dy)."""
    _launch_rows(_vanilla_bwd, _vanilla_bwd_par, h.shape[0], h.size, dy, offset, dh, h, dg,
                 bool(relu))


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
