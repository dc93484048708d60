"""Checkpoint files and the kvstore/updater glue the Module layer uses (``mx.model``).

* ``save_checkpoint`` / ``load_checkpoint`` / ``load_params``: ``prefix-symbol.json`` and
  ``prefix-%04d.params`` (``arg:<name>`` / ``aux:<name>`` keys). Every file is written to a
  temporary name in the same directory and renamed over the target, so an interrupted save
  leaves either the old file or the new one, never half of one.
* ``_create_kvstore``, ``_initialize_kvstore``, ``_update_params``,
  ``_update_params_on_kvstore``: how a Module decides where updates run and how gradients from
  several devices meet. A kvstore named without 'dist' on a single device means no kvstore
  (updates run on the device); otherwise the kvstore sums the devices' gradients under each
  parameter's name and either updates the weights itself (``update_on_kvstore``) or hands the
  sum back to the Module's updater.
* ``BatchEndParam``: what batch-end and score-end callbacks receive.
"""
import logging
import os
import re
from collections import namedtuple

import numpy as np

from . import arg_checks
from . import kvstore as kvs
from . import ndarray as nd
from . import symbol as sym
from .base import MXNetError, _fsync_folder
from .context import cpu

__all__ = ["BatchEndParam", "save_checkpoint", "load_checkpoint", "load_params"]

BatchEndParam = namedtuple('BatchEndParams', ['epoch', 'nbatch', 'eval_metric', 'locals'])

# MXNet turns update_on_kvstore off for the 'local' store when a parameter is bigger than this
# (number of elements), to keep huge updates off the store's single thread.
_LOCAL_KVSTORE_MAX_UPDATE_SIZE = 1024 * 1024 * 16


# ---------------------------------------------------------------------------------------------
# checkpoints
# ---------------------------------------------------------------------------------------------
# Temporary files lightmod's writers leave when killed: atomic_write's ".<name>.<hex32>.tmp",
# possibly nested once (a writer asked to write to such a name).
_TMP_TAIL = r"\.[0-9a-f]{32}\.tmp"


def _checkpoint_paths(prefix, epoch):
    """(params, states, params backup, states backup) of one epoch. The backups are hidden
    files beside the checkpoint that hold the previous checkpoint of the epoch while it is
    re-saved."""
    arg_checks.integer(epoch, "checkpoint", "epoch")
    params = '%s-%04d.params' % (prefix, epoch)
    states = '%s-%04d.states' % (prefix, epoch)
    folder, base = os.path.split(prefix)
    backup = os.path.join(folder, '.%s-%04d' % (base, epoch))
    return params, states, backup + '.params.prev', backup + '.states.prev'


def _fsync_dir(path):
    """Make the renames and unlinks done in ``path``'s folder durable."""
    _fsync_folder(os.path.dirname(os.path.abspath(path)))


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _roll_back(prefix, epoch):
    """Bring one epoch back to a plain checkpoint (no backups) after an interrupted save.

    With ``-NNNN.params`` present the save finished, and the backups are dropped. Without it,
    the backup is the checkpoint: its states go back (an empty states backup stands for "no
    states"; without a states backup the states file is still the old one), then its params.
    Each step keeps :func:`_resolve_checkpoint`'s answer the same, so a kill here is harmless.
    """
    params, states, params_prev, states_prev = _checkpoint_paths(prefix, epoch)
    if os.path.exists(params):
        _unlink(params_prev)
        _unlink(states_prev)
        return
    if not os.path.exists(params_prev):
        _unlink(states_prev)        # left when a kill fell between deleting the two backups
        return
    if os.path.exists(states_prev):
        if os.path.getsize(states_prev):
            os.replace(states_prev, states)
        else:
            _unlink(states)
            _unlink(states_prev)
        _fsync_dir(states)
    os.replace(params_prev, params)
    _fsync_dir(params)


def _clean_leftovers(prefix):
    """Delete the temporary files killed writers left for ``prefix`` and roll back every
    interrupted save of it (one writer per prefix is assumed: another writer's temporary
    files would be deleted too)."""
    folder, base = os.path.split(prefix)
    names = r'(symbol\.json|\d{4,}\.params|\d{4,}\.states)'
    tmp_re = re.compile(r'^\.{1,2}%s-%s%s(%s)?$' % (re.escape(base), names, _TMP_TAIL, _TMP_TAIL))
    prev_re = re.compile(r'^\.%s-(\d{4,})\.(params|states)\.prev$' % re.escape(base))
    try:
        entries = os.listdir(folder or '.')
    except FileNotFoundError:
        raise MXNetError("save_checkpoint: the folder of prefix %r does not exist"
                         % prefix) from None
    for entry in entries:
        if tmp_re.match(entry):
            _unlink(os.path.join(folder, entry))
        match = prev_re.match(entry)
        if match:
            _roll_back(prefix, int(match.group(1)))


def write_checkpoint(prefix, epoch, write_symbol, write_params, write_states=None,
                     keep_states=False):
    """Write one checkpoint of ``prefix`` as a unit.

    ``write_symbol(path)``, ``write_params(path)`` and ``write_states(path)`` (None: no states)
    each write one file atomically (temporary file, fsync, rename). The files are MXNet's:
    ``prefix-symbol.json``, ``prefix-NNNN.params`` and ``prefix-NNNN.states``.

    Invariant, whenever the process dies: if ``prefix-NNNN.params`` exists, the states file
    beside it is the one saved with it (or absent when it was saved without states). The
    params file is therefore always renamed into place last. A re-save of an existing epoch
    would otherwise put new states beside old params, so the order is:

    1. roll back any interrupted save of this prefix and delete leftover temporary files;
    2. symbol file (shared by all epochs);
    3. if the epoch exists: rename its params to a hidden backup, then its states to a
       backup (an empty backup when it had no states), so no params file is visible while
       its states change; a states file left without params is deleted;
    4. the new states, then the new params (each renamed in, the folder fsynced);
    5. the backups are deleted.

    Between 3 and 5, :func:`_resolve_checkpoint` reads the backups, so a load finds the
    complete new checkpoint or the complete previous one. An exception in 3-4 rolls back at
    once; a kill is rolled back by the next save.

    ``keep_states=True`` (``mx.model.save_checkpoint``, which never writes states) leaves the
    epoch's states file alone and only replaces the params; whoever saves states beside them
    answers for their match.
    """
    params, states, params_prev, states_prev = _checkpoint_paths(prefix, epoch)
    _clean_leftovers(prefix)
    write_symbol('%s-symbol.json' % prefix)
    if keep_states:
        write_params(params)
        return
    try:
        if os.path.exists(params):
            os.replace(params, params_prev)
            _fsync_dir(params)
            if os.path.exists(states):
                os.replace(states, states_prev)
            else:
                with open(states_prev, 'wb') as marker:
                    os.fsync(marker.fileno())
            _fsync_dir(params)
        elif os.path.exists(states):
            _unlink(states)     # an orphan: no params were ever saved with it
        if write_states is not None:
            write_states(states)
        write_params(params)
    except BaseException:
        if not os.path.exists(params) and not os.path.exists(params_prev):
            _unlink(states)     # a first save: whatever states were written are orphans
        _roll_back(prefix, epoch)
        raise
    _unlink(params_prev)
    _unlink(states_prev)


def _resolve_checkpoint(prefix, epoch):
    """(params file, states file or None) of the checkpoint a load must read, or MXNetError
    naming what is missing. During an interrupted re-save the hidden backups are it."""
    params, states, params_prev, states_prev = _checkpoint_paths(prefix, epoch)
    if os.path.exists(params):
        return params, states if os.path.exists(states) else None
    if os.path.exists(params_prev):
        if os.path.exists(states_prev):
            return params_prev, states_prev if os.path.getsize(states_prev) else None
        return params_prev, states if os.path.exists(states) else None
    folder, base = os.path.split(prefix)
    found = []
    if os.path.isdir(folder or '.'):
        epoch_re = re.compile(r'^%s-(\d{4,})\.params$' % re.escape(base))
        found = sorted(int(m.group(1)) for m in map(epoch_re.match, os.listdir(folder or '.'))
                       if m)
    raise MXNetError("no checkpoint for epoch %d of prefix %r: %s does not exist (%s)"
                     % (epoch, prefix, params, "saved epochs: %s" % ", ".join(map(str, found))
                        if found else "no saved epoch found"))


def checkpoint_states_file(prefix, epoch):
    """The optimizer-states file that belongs to checkpoint ``epoch`` of ``prefix``
    (``Module.load(..., load_optimizer_states=True)``); MXNetError when it was saved without
    states or does not exist."""
    params, states = _resolve_checkpoint(prefix, epoch)
    if states is None:
        raise MXNetError("checkpoint %s has no optimizer states: %s-%04d.states does not exist "
                         "(save it with save_optimizer_states=True)" % (params, prefix, epoch))
    return states


def _params_save_dict(arg_params, aux_params):
    """What a ``.params`` file holds: ``arg:<name>`` / ``aux:<name>`` -> the array on the CPU
    (``save_checkpoint`` and ``BaseModule.save_params`` write it)."""
    save_dict = {'arg:%s' % k: v.as_in_context(cpu()) for k, v in arg_params.items()}
    save_dict.update({'aux:%s' % k: v.as_in_context(cpu()) for k, v in aux_params.items()})
    return save_dict


def save_checkpoint(prefix, epoch, symbol, arg_params, aux_params, remove_amp_cast=True):
    """Write ``prefix-symbol.json`` (unless ``symbol`` is None) and ``prefix-%04d.params``
    (each atomically; a ``.states`` file of the epoch is left as it is)."""
    def write_symbol(fname):
        if symbol is not None:
            symbol.save(fname, remove_amp_cast=remove_amp_cast)

    param_name = '%s-%04d.params' % (prefix, epoch)
    write_checkpoint(prefix, epoch, write_symbol,
                     lambda fname: nd.save(fname, _params_save_dict(arg_params, aux_params)),
                     keep_states=True)
    logging.info('Saved checkpoint to "%s"', param_name)


def load_params(prefix, epoch):
    """Read ``prefix-%04d.params`` into ``(arg_params, aux_params)``."""
    fname, _ = _resolve_checkpoint(prefix, epoch)
    save_dict = nd.load(fname)
    arg_params = {}
    aux_params = {}
    if not save_dict:
        logging.warning("Params file '%s' is empty", fname)
        return arg_params, aux_params
    for k, v in save_dict.items():
        tp, _, name = k.partition(':')
        if tp == 'arg':
            arg_params[name] = v
        elif tp == 'aux':
            aux_params[name] = v
    return arg_params, aux_params


def load_checkpoint(prefix, epoch):
    """Read a checkpoint: ``(symbol, arg_params, aux_params)``."""
    _resolve_checkpoint(prefix, epoch)     # a clear error before the symbol is read
    symbol = sym.load('%s-symbol.json' % prefix)
    arg_params, aux_params = load_params(prefix, epoch)
    return symbol, arg_params, aux_params


# ---------------------------------------------------------------------------------------------
# kvstore glue
# ---------------------------------------------------------------------------------------------
def _create_kvstore(kvstore, num_device, arg_params):
    """Decide the kvstore and whether updates run on it: ``(kv or None, update_on_kvstore)``.

    A string names a store to create, except that one device without 'dist' needs none. With
    no store there is nothing to update on. ``MXNET_UPDATE_ON_KVSTORE=0`` turns updating on the
    store off; the 'local' store also refuses when a parameter exceeds 16M elements.
    """
    if not (kvstore is None or isinstance(kvstore, (kvs.KVStoreBase, str))):
        raise TypeError('kvstore must be KVStore, str or None, got %s' % type(kvstore).__name__)
    wanted_on_store = os.getenv('MXNET_UPDATE_ON_KVSTORE', '1')
    # a single device on a single machine has nothing to aggregate: no store is made
    needs_store = isinstance(kvstore, str) and (num_device != 1 or 'dist' in kvstore)
    store = kvstore if isinstance(kvstore, kvs.KVStoreBase) else None
    if needs_store:
        store = kvs.create(kvstore)
    if store is None:
        return None, False
    on_store = bool(int(wanted_on_store)) and bool(store.is_capable(kvs.KVStoreBase.OPTIMIZER))
    if needs_store and kvstore == 'local' and arg_params:
        largest = max(int(np.prod(value.shape)) for value in arg_params.values())
        on_store = on_store and largest <= _LOCAL_KVSTORE_MAX_UPDATE_SIZE
    return store, on_store


def _initialize_kvstore(kvstore, param_arrays, arg_params, param_names, update_on_kvstore):
    """Register every parameter with the store under its name, from the CPU cache.

    When the store runs the updates, dense parameters are also broadcast to every device copy.
    """
    for idx, param_on_devs in enumerate(param_arrays):
        name = param_names[idx]
        if not update_on_kvstore or arg_params[name].stype != 'default':
            kvstore.init(name, arg_params[name])
        else:
            kvstore.broadcast(name, arg_params[name], out=param_on_devs)


def _exchange(kvstore, name, weights, grads, results, priority):
    """One parameter's round trip through the store: the device gradients go in and the store's
    answer lands in ``results``. Dense weight and gradient use a single pushpull; a sparse one
    needs push then pull. Priority: earlier layers first."""
    if grads[0].stype == 'default' and weights[0].stype == 'default':
        kvstore.pushpull(name, grads, out=results, priority=priority)
        return
    kvstore.push(name, grads, priority=priority)
    kvstore.pull(name, out=results, priority=priority)


def _trained(param_arrays, grad_arrays):
    """(position, per-device weights, per-device gradients) of the parameters that have a
    gradient (fixed parameters have None)."""
    pairs = enumerate(zip(param_arrays, grad_arrays))
    return [(i, weights, grads) for i, (weights, grads) in pairs if grads[0] is not None]


def _update_params_on_kvstore(param_arrays, grad_arrays, kvstore, param_names):
    """Updates run on the store: it sums the device gradients, applies its optimizer to its own
    weight and every device copy receives the new weight."""
    for i, weights, grads in _trained(param_arrays, grad_arrays):
        _exchange(kvstore, param_names[i], weights, grads, weights, -i)


def _update_params(param_arrays, grad_arrays, updater, num_device, kvstore=None,
                   param_names=None, param_positions=None):
    """Updates run in the module: the store (if any) replaces every device's gradient by their
    sum, then the updater runs once per device on all its parameters, each keyed
    ``position * num_device + device`` so every device copy keeps its own optimizer state.

    The position is the parameter's place in ``param_arrays``, or ``param_positions[place]``
    when given: modules sharing one updater (buckets) then key a parameter's state the same
    way, whatever subset of the parameters each of them has."""
    per_device = [([], [], []) for _ in range(num_device)]
    for i, weights, grads in _trained(param_arrays, grad_arrays):
        if kvstore:
            _exchange(kvstore, param_names[i], weights, grads, grads, -i)
        position = i if param_positions is None else param_positions[i]
        for dev, (weight, grad) in enumerate(zip(weights, grads)):
            keys, dev_grads, dev_weights = per_device[dev]
            keys.append(position * num_device + dev)
            dev_grads.append(grad)
            dev_weights.append(weight)
    for keys, dev_grads, dev_weights in per_device:
        if keys:
            updater(keys, dev_grads, dev_weights)


def _check_loaded_optimizer_states(module):
    """After ``Module.load_optimizer_states``: every loaded state must fit the bound parameter
    it will update (MXNetError naming the parameter and both shapes otherwise).

    Module updaters key states by ``index * num_device + device``, kvstore updaters by
    parameter name; a file of either kind may be loaded into either (MXNet allows it), so both
    kinds of key are checked against the parameter they stand for.
    """
    from .optimizer.states import check_states_fit
    if module._update_on_kvstore:
        updater = getattr(module._kvstore, "_updater", None)
        if not hasattr(updater, "states"):
            return      # the states live on a distributed store's servers
    else:
        updater = module._updater
    group = module._exec_group
    positions = getattr(module, "_optimizer_positions", None)    # buckets sharing an updater
    weights, names = {}, {}
    for i, (name, arrays) in enumerate(zip(group.param_names, group.param_arrays)):
        weights[name], names[name] = arrays[0], name
        position = i if positions is None else positions[name]
        for k, array in enumerate(arrays):
            weights[position * len(arrays) + k] = array
            names[position * len(arrays) + k] = name
    check_states_fit(updater, weights, names)


def _multiple_callbacks(callbacks, *args, **kwargs):
    """Call one callback or each of a list of them."""
    if isinstance(callbacks, list):
        for cb in callbacks:
            cb(*args, **kwargs)
        return
    if callbacks:
        callbacks(*args, **kwargs)
