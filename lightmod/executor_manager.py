"""``mx.executor_manager``: the data-parallel helpers of MXNet's pre-Module training loop.

``_split_input_slice`` splits a batch over devices by work load; ``DataParallelExecutorManager``
binds one executor per device for a symbol (or, with ``sym_gen``, one set per bucket, sharing
parameters) and drives them batch by batch. It runs on the Module API's executor group
(``lightmod.module.executor_group``), so both paths compute alike.
"""
import logging

from . import ndarray as nd
from .base import MXNetError
from .context import cpu
from .module.executor_group import DataParallelExecutorGroup as _ModuleExecutorGroup
from .module.executor_group import _split_input_slice

# a module logger: logging.info() on the root logger would configure logging before
# the program's own basicConfig() and silence it
_LOG = logging.getLogger(__name__)

__all__ = ["DataParallelExecutorManager"]
_split_input_slice = _split_input_slice     # re-exported: programs import it from here


def _check_arguments(symbol):
    """Refuse a symbol whose argument or auxiliary-state names repeat (ValueError)."""
    for names, what in ((symbol.list_arguments(), "argument"),
                        (symbol.list_auxiliary_states(), "auxiliary param")):
        seen = set()
        for name in names:
            if name in seen:
                raise ValueError("Find duplicated %s name \"%s\", please make the weight name "
                                 "non-duplicated(using name arguments), arguments are %s"
                                 % (what, name, names))
            seen.add(name)


def _load_general(data, targets):
    """Copy each source array into its target: one array, or (slice, array) pairs per device."""
    for src, dst in zip(data, targets):
        if isinstance(dst, nd.NDArray):
            src.copyto(dst)
            continue
        if dst[-1][0].stop != src.shape[0]:
            raise MXNetError("Batch size miss match. Expected %d, got %d"
                             % (dst[-1][0].stop, src.shape[0]))
        for part, array in dst:
            src[part].copyto(array)


def _load_data(batch, targets):
    _load_general(batch.data, targets)


def _load_label(batch, targets):
    _load_general(batch.label, targets)


class DataParallelExecutorManager:
    """Executors for ``symbol`` on the devices ``ctx``, each taking its share of every batch
    (``work_load_list``, equal shares by default) of ``train_data``'s shapes.

    ``param_arrays`` / ``grad_arrays`` / ``aux_arrays`` list, per parameter, its array on every
    device; ``set_params`` copies values to all devices, ``copy_to`` writes the device average
    back. ``load_data_batch``, ``forward``, ``backward`` and ``update_metric`` act on the
    executors of the batch's bucket (``sym_gen(bucket_key)`` builds a bucket's symbol).
    """

    def __init__(self, symbol, ctx, train_data, arg_names, param_names, aux_names,
                 work_load_list=None, logger=None, sym_gen=None):
        logger = logger or _LOG
        logger.info("Start training with %s", str(ctx))
        if work_load_list is None:
            work_load_list = [1] * len(ctx)
        if not isinstance(work_load_list, list) or len(work_load_list) != len(ctx):
            raise MXNetError("Invalid settings for work load: work_load_list must be a list with "
                             "one entry per context (%d), got %r" % (len(ctx), work_load_list))
        _check_arguments(symbol)
        self.slices = _split_input_slice(train_data.batch_size, work_load_list)
        self.arg_names = arg_names
        self.param_names = param_names
        self.aux_names = aux_names
        self.ctx = ctx
        self.symbol = symbol
        self.sym_gen = sym_gen
        self._work_load_list = work_load_list
        self.execgrp = self._group(symbol, train_data.provide_data, train_data.provide_label, None)
        self.curr_execgrp = None
        if sym_gen is not None:
            self.execgrp_bucket = {train_data.default_bucket_key: self.execgrp}

    def _group(self, symbol, data_shapes, label_shapes, shared_group):
        return _ModuleExecutorGroup(symbol, self.ctx, self._work_load_list, data_shapes,
                                    label_shapes or None, self.param_names, for_training=True,
                                    inputs_need_grad=False, shared_group=shared_group)

    def install_monitor(self, monitor):
        if self.sym_gen is not None:
            raise NotImplementedError("Monitoring is not implemented for bucketing")
        self.execgrp.install_monitor(monitor)

    def set_params(self, arg_params, aux_params):
        """Copy the given parameter values to every device."""
        self.execgrp.set_params(arg_params, aux_params, allow_extra=True)

    def copy_to(self, arg_params, aux_params):
        """Write the average over devices of every parameter into ``arg_params`` and
        ``aux_params`` (in place, in their dtypes)."""
        for names, blocks, target in ((self.param_names, self.param_arrays, arg_params),
                                      (self.aux_names, self.aux_arrays, aux_params)):
            for name, block in zip(names, blocks):
                mean = sum(w.copyto(cpu()) for w in block) / len(block)
                mean.astype(target[name].dtype).copyto(target[name])

    # every bucket's executors share the default bucket's parameter and gradient arrays
    param_arrays = property(lambda self: self.execgrp.param_arrays,
                            doc="Per parameter, its array on every device.")
    grad_arrays = property(lambda self: self.execgrp.grad_arrays,
                           doc="Per parameter, its gradient array on every device.")
    aux_arrays = property(lambda self: self.execgrp.aux_arrays,
                          doc="Per auxiliary state, its array on every device.")

    def _group_for(self, batch):
        if self.sym_gen is None:
            return self.execgrp
        group = self.execgrp_bucket.get(batch.bucket_key)
        if group is None:
            names = [desc[0] for desc in self.execgrp.data_shapes]
            shapes = batch.provide_data or [(n, a.shape) for n, a in zip(names, batch.data)]
            group = self._group(self.sym_gen(batch.bucket_key), shapes, batch.provide_label,
                                self.execgrp)
            self.execgrp_bucket[batch.bucket_key] = group
        return group

    def load_data_batch(self, data_batch):
        """Take ``data_batch`` for the next ``forward``, on the executors of its bucket (built
        the first time the bucket is seen)."""
        self.curr_execgrp = self._group_for(data_batch)
        self._batch = data_batch

    def _current(self):
        if self.curr_execgrp is None:
            raise MXNetError("DataParallelExecutorManager: call load_data_batch() first")
        return self.curr_execgrp

    def forward(self, is_train=False):
        self._current().forward(self._batch, is_train=is_train)

    def backward(self):
        self._current().backward()

    def update_metric(self, metric, labels, pre_sliced=False):
        self._current().update_metric(metric, labels, pre_sliced)
