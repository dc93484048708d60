"""The Updater: applies an optimizer to ``(index, grad, weight)`` calls and keeps its states.

It sits above ``optimizer.py`` (the rules) and ``states.py`` (the ``.states`` pickles), which
both stay free of it. ``lightmod.optimizer`` re-exports it, and also names it as
``lightmod.optimizer.optimizer.Updater``, where MXNet 1.9.1 defines it.
"""
from ..base import py_str
from ..ndarray import NDArray
from .checks import check_hyper_parameters
from .states import check_state_fits, dumps_states, loads_states

__all__ = ["Updater", "get_updater"]


class Updater:
    """Applies an optimizer to ``(index, grad, weight)`` calls, creating each index's state on
    first use (``states``), as ``mx.optimizer.get_updater`` does.

    Called with lists (the Module passes one device's parameters at once), optimizers with
    ``aggregate_num > 0`` receive same-dtype weights in groups of ``aggregate_num``.
    """

    def __init__(self, optimizer):
        check_hyper_parameters(optimizer)     # the rule's own numbers, set after Optimizer's
        self.optimizer = optimizer
        self.states = {}
        self.states_synced = {}
        self.aggregate_updates = optimizer.aggregate_num > 0

    def __call__(self, index, grad, weight):
        if not isinstance(index, (list, tuple)):
            indices, grads, weights = [index], [grad], [weight]
        else:
            indices, grads, weights = list(index), list(grad), list(weight)
        if weights:
            self.optimizer._set_current_context(weights[0].context.device_id)
        for i, idx in enumerate(indices):
            if isinstance(idx, bytes):
                idx = indices[i] = py_str(idx)
            if idx not in self.states:
                self.states[idx] = self.optimizer.create_state_multi_precision(idx, weights[i])
                self.states_synced[idx] = True
            elif not self.states_synced[idx]:
                check_state_fits(self, idx, weights[i])     # a loaded state of another net
                self.states[idx] = self.sync_state_context(self.states[idx], weights[i].context)
                self.states_synced[idx] = True
        if self.aggregate_updates:
            by_dtype = {}
            for i, w, g in zip(indices, weights, grads):
                by_dtype.setdefault(w.dtype, []).append((i, w, g))
            step = self.optimizer.aggregate_num
            for group in by_dtype.values():
                g_indices, g_weights, g_grads = zip(*group)
                for start in range(0, len(g_indices), step):
                    chunk = slice(start, start + step)
                    states = [self.states[i] for i in g_indices[chunk]]
                    self.optimizer.update_multi_precision(g_indices[chunk], g_weights[chunk],
                                                          g_grads[chunk], states)
        else:
            for i, w, g in zip(indices, weights, grads):
                self.optimizer.update_multi_precision(i, w, g, self.states[i])

    def sync_state_context(self, state, context):
        """Move a state (NDArray or nested tuple/list of them) to ``context``."""
        if isinstance(state, NDArray):
            return state.as_in_context(context)
        if isinstance(state, (tuple, list)):
            synced = [self.sync_state_context(s, context) for s in state]
            return tuple(synced) if isinstance(state, tuple) else synced
        return state

    def set_states(self, states):
        """Load states pickled by ``get_states`` (here or by MXNet). Only the classes such a
        file can hold are accepted; anything else raises MXNetError and runs nothing. A
        ``(states, optimizer)`` pickle replaces the optimizer too."""
        loaded = loads_states(states)
        if isinstance(loaded, tuple) and len(loaded) == 2:
            self.states, self.optimizer = loaded
        else:
            self.states = loaded
        self.states_synced = dict.fromkeys(self.states.keys(), False)

    def get_states(self, dump_optimizer=False):
        """Pickle ``states`` (or ``(states, optimizer)``) in MXNet's layout, so MXNet 1.9.1 can
        load the bytes."""
        return dumps_states((self.states, self.optimizer) if dump_optimizer else self.states)


def get_updater(optimizer):
    """An Updater for ``optimizer`` (what kvstores and Modules call per update)."""
    return Updater(optimizer)
