"""Checkpoint helpers for models built from RNN cells (``mx.rnn.save_rnn_checkpoint``...).

Fused cells keep their weights packed; these helpers save them unpacked (one array per layer,
direction and gate, as the unfused cells name them) and pack them again on load, like MXNet.
"""
import warnings

from .rnn_cell import BaseRNNCell

__all__ = ["rnn_unroll", "save_rnn_checkpoint", "load_rnn_checkpoint", "do_rnn_checkpoint"]


def _as_cells(cells):
    return [cells] if isinstance(cells, BaseRNNCell) else cells


def rnn_unroll(cell, length, inputs=None, begin_state=None, input_prefix="", layout="NTC"):
    """Deprecated: call ``cell.unroll`` instead.

    ``input_prefix`` is accepted for old scripts and ignored (MXNet 1.9.1 forwards it to
    ``unroll``, which does not take it, so the call always fails there).
    """
    warnings.warn("rnn_unroll is deprecated. Please call cell.unroll directly.", stacklevel=2)
    return cell.unroll(length=length, inputs=inputs, begin_state=begin_state, layout=layout)


def save_rnn_checkpoint(cells, prefix, epoch, symbol, arg_params, aux_params):
    """``model.save_checkpoint`` after unpacking the weights of ``cells`` (a cell or a list)."""
    from ..model import save_checkpoint
    for cell in _as_cells(cells):
        arg_params = cell.unpack_weights(arg_params)
    save_checkpoint(prefix, epoch, symbol, arg_params, aux_params)


def load_rnn_checkpoint(cells, prefix, epoch):
    """``model.load_checkpoint``, then pack the weights of ``cells``; returns
    ``(symbol, arg_params, aux_params)``."""
    from ..model import load_checkpoint
    sym, arg, aux = load_checkpoint(prefix, epoch)
    for cell in _as_cells(cells):
        arg = cell.pack_weights(arg)
    return sym, arg, aux


def do_rnn_checkpoint(cells, prefix, period=1):
    """An epoch-end callback saving ``prefix`` every ``period`` epochs with the weights
    unpacked (see ``save_rnn_checkpoint``)."""
    period = int(max(1, period))

    def _callback(iter_no, sym=None, arg=None, aux=None):
        if (iter_no + 1) % period == 0:
            save_rnn_checkpoint(cells, prefix, iter_no + 1, sym, arg, aux)
    return _callback
