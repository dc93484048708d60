"""Checkpoint files and the kvstore/updater glue the Module layer uses (``mx.model``).

* ``save_checkpoint`` / ``load_checkpoint`` / ``load_params``: ``prefix-symbol.json`` and
  ``prefix-%04d.params`` (``arg:<name>`` / ``aux:<name>`` keys). Every file is written to a
  temporary name in the same directory and renamed over the target, so an interrupted save
  leaves either the old file or the new one, never half of one.
* ``_create_kvstore``, ``_initialize_kvstore``, ``_update_params``,
  ``_update_params_on_kvstore``: how a Module decides where updates run and how gradients from
  several devices meet (see MXNET_SEMANTICS 2.6/2.7).
* ``BatchEndParam``: what batch-end and score-end callbacks receive.
"""
import logging
import os
from collections import namedtuple

import numpy as np

from . import kvstore as kvs
from . import ndarray as nd
from . import symbol as sym
from .context import cpu

__all__ = ["BatchEndParam", "save_checkpoint", "load_checkpoint", "load_params"]

BatchEndParam = namedtuple('BatchEndParams', ['epoch', 'nbatch', 'eval_metric', 'locals'])

# MXNet turns update_on_kvstore off for the 'local' store when a parameter is bigger than this
# (number of elements), to keep huge updates off the store's single thread.
_LOCAL_KVSTORE_MAX_UPDATE_SIZE = 1024 * 1024 * 16


# ---------------------------------------------------------------------------------------------
# checkpoints
# ---------------------------------------------------------------------------------------------
def _params_save_dict(arg_params, aux_params):
    """What a ``.params`` file holds: ``arg:<name>`` / ``aux:<name>`` -> the array on the CPU
    (``save_checkpoint`` and ``BaseModule.save_params`` write it)."""
    save_dict = {'arg:%s' % k: v.as_in_context(cpu()) for k, v in arg_params.items()}
    save_dict.update({'aux:%s' % k: v.as_in_context(cpu()) for k, v in aux_params.items()})
    return save_dict


def save_checkpoint(prefix, epoch, symbol, arg_params, aux_params, remove_amp_cast=True):
    """Write ``prefix-symbol.json`` (unless ``symbol`` is None) and ``prefix-%04d.params``."""
    if symbol is not None:
        symbol.save('%s-symbol.json' % prefix, remove_amp_cast=remove_amp_cast)
    param_name = '%s-%04d.params' % (prefix, epoch)
    nd.save(param_name, _params_save_dict(arg_params, aux_params))
    logging.info('Saved checkpoint to "%s"', param_name)


def load_params(prefix, epoch):
    """Read ``prefix-%04d.params`` into ``(arg_params, aux_params)``."""
    fname = '%s-%04d.params' % (prefix, epoch)
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
    update_on_kvstore = bool(int(os.getenv('MXNET_UPDATE_ON_KVSTORE', '1')))
    if kvstore is None:
        kv = None
    elif isinstance(kvstore, kvs.KVStoreBase):
        kv = kvstore
    elif isinstance(kvstore, str):
        if num_device == 1 and 'dist' not in kvstore:
            kv = None
        else:
            kv = kvs.create(kvstore)
            if kvstore == 'local' and arg_params:
                max_size = max(int(np.prod(param.shape)) for param in arg_params.values())
                if max_size > _LOCAL_KVSTORE_MAX_UPDATE_SIZE:
                    update_on_kvstore = False
    else:
        raise TypeError('kvstore must be KVStore, str or None, got %s' % type(kvstore).__name__)
    if kv is None:
        update_on_kvstore = False
    else:
        update_on_kvstore &= bool(kv.is_capable(kvs.KVStoreBase.OPTIMIZER))
    return kv, update_on_kvstore


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


def _update_params_on_kvstore(param_arrays, grad_arrays, kvstore, param_names):
    """Updates run on the store: push the device gradients, the store sums them, updates its
    weight and the new weight is pulled into every device copy. Params without a gradient array
    (fixed ones) are skipped."""
    for index, (arg_list, grad_list) in enumerate(zip(param_arrays, grad_arrays)):
        if grad_list[0] is None:
            continue
        name = param_names[index]
        if grad_list[0].stype == 'default' and arg_list[0].stype == 'default':
            kvstore.pushpull(name, grad_list, out=arg_list, priority=-index)
        else:
            kvstore.push(name, grad_list, priority=-index)
            kvstore.pull(name, out=arg_list, priority=-index)


def _update_params(param_arrays, grad_arrays, updater, num_device, kvstore=None,
                   param_names=None, param_positions=None):
    """Updates run in the module: gradients are summed across devices through the store (if
    any), then the updater is called once per device with the keys ``i*num_device + k``.

    ``i`` is the parameter's position in ``param_arrays``, or ``param_positions[position]``
    when given: modules sharing one updater (buckets) key a parameter's optimizer state the
    same way, whatever subset of the parameters each of them has."""
    updates = [[] for _ in range(num_device)]
    for index, (arg_list, grad_list) in enumerate(zip(param_arrays, grad_arrays)):
        if grad_list[0] is None:
            continue
        if kvstore:
            name = param_names[index]
            if grad_list[0].stype == 'default' and arg_list[0].stype == 'default':
                # with no ``out`` the summed gradient replaces every device's gradient
                kvstore.pushpull(name, grad_list, priority=-index)
            else:
                kvstore.push(name, grad_list, priority=-index)
                kvstore.pull(name, out=grad_list, priority=-index)
        key = index if param_positions is None else param_positions[index]
        for k, (weight, grad) in enumerate(zip(arg_list, grad_list)):
            updates[k].append((key * num_device + k, grad, weight))
    for dev_updates in updates:
        if dev_updates:
            indices, grads, weights = zip(*dev_updates)
            updater(list(indices), list(grads), list(weights))


def _multiple_callbacks(callbacks, *args, **kwargs):
    """Call one callback or each of a list of them."""
    if isinstance(callbacks, list):
        for cb in callbacks:
            cb(*args, **kwargs)
        return
    if callbacks:
        callbacks(*args, **kwargs)
