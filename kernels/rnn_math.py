"""What one (batch row j, hidden unit k) of a fused-RNN time step computes, for the three cell
kinds, written once for both kernel halves: ``kernels/cpu/rnn.py`` compiles these with ``njit``
and loops over the rows with ``prange``, ``kernels/cuda/rnn.py`` with ``cuda.jit(device=True)``,
one thread per unit (see ``kernels/math_build.py``). They read and write the step's arrays, so
they are left undecorated here; the gate math itself is ``kernels/scalar_rnn.py``.

Layouts are those of ``kernels/cpu/rnn.py``: gate pre-activations (N, G*H) in gate blocks of H
columns, saved gates (N, 4H), and this direction's columns [offset, offset + H) of ``y``/``dy``.
``nh`` is H (read once by the launcher: the loops are several times slower when every unit
reads it from the array).
"""
from .scalar_rnn import gru_unit, gru_unit_grad, lstm_unit, lstm_unit_grad, vanilla_unit, vanilla_unit_grad

# the cell kinds (the ``cell`` argument of the launchers' one kernel per direction)
LSTM = 0
GRU = 1
VANILLA = 2


def lstm_forward_unit(j, k, nh, gx, gh, bx, bh, c_prev, gates, c, h, y, offset):
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


def gru_forward_unit(j, k, nh, gx, gh, bx, bh, h_prev, gates, h, y, offset):
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


def vanilla_forward_unit(j, k, gx, gh, bx, bh, h, y, offset, relu):
    ht = vanilla_unit(gx[j, k] + gh[j, k] + bx[k] + bh[k], relu)
    h[j, k] = ht
    y[j, offset + k] = ht


def lstm_backward_unit(j, k, nh, dy, offset, dh, dc, gates, c, c_prev, dg):
    """dg (N, 4H) from dh + y's columns of dy and dc; dc is replaced by the gradient of
    c_prev."""
    dai, daf, dag, dao, dcp = lstm_unit_grad(
        dh[j, k] + dy[j, offset + k], dc[j, k], gates[j, k], gates[j, nh + k],
        gates[j, 2 * nh + k], gates[j, 3 * nh + k], c[j, k], c_prev[j, k])
    dg[j, k] = dai
    dg[j, nh + k] = daf
    dg[j, 2 * nh + k] = dag
    dg[j, 3 * nh + k] = dao
    dc[j, k] = dcp


def gru_backward_unit(j, k, nh, dy, offset, dh, gates, h_prev, dgx, dgh):
    """dgx (input side) and dgh (recurrent side); dh is replaced by the direct part of the
    gradient of h_prev."""
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


def vanilla_backward_unit(j, k, dy, offset, dh, h, dg, relu):
    dg[j, k] = vanilla_unit_grad(dh[j, k] + dy[j, offset + k], h[j, k], relu)
