"""BaseModule: the interface every module implements, and the training loops built on it.

``fit``, ``score``, ``predict`` and ``iter_predict`` are written once here against the abstract
interface (bind / init_params / init_optimizer / forward / backward / update / update_metric /
get_outputs ...), so Module, BucketingModule, SequentialModule and user subclasses share them.

The lifecycle flags (``binded``, ``for_training``, ``inputs_need_grad``, ``params_initialized``,
``optimizer_initialized``) are plain attributes because user subclasses assign them directly.
Where MXNet uses a bare ``assert`` on them, lightmod raises :class:`~lightmod.base.NotBoundError`
(an ``MXNetError`` and an ``AssertionError``) naming the missing call.
"""
import logging
import time
import warnings

import numpy as np

from .. import arg_checks, metric
from .. import ndarray
from ..base import MXNetError, NotBoundError, _as_list
from ..fit_callbacks import StopTraining
from ..initializer import Uniform
from ..io import DataBatch, DataDesc, DataIter
from ..model import BatchEndParam, _params_save_dict

__all__ = ["BaseModule"]


def _check_lifecycle(module, action, params=False, optimizer=False, bound=True):
    """Raise NotBoundError naming the first lifecycle step missing before ``action``."""
    if bound and not module.binded:
        raise NotBoundError("call bind() before %s" % action)
    if params and not module.params_initialized:
        raise NotBoundError("call init_params() (or set_params()/load) before %s" % action)
    if optimizer and not module.optimizer_initialized:
        raise NotBoundError("call init_optimizer() before %s" % action)


def _check_input_names(symbol, names, typename, throw):
    """Check that every name in ``names`` is an argument of ``symbol``.

    Unknown names raise ValueError when ``throw`` (data, state and fixed_param names) and only
    warn otherwise (label names: a net without a loss layer has no label argument).
    """
    args = symbol.list_arguments()
    for name in names:
        if name in args:
            continue
        candidates = [arg for arg in args
                      if not arg.endswith(("_weight", "_bias", "_gamma", "_beta"))]
        msg = ("You created Module with Module(..., %s_names=%s) but input with name '%s' is "
               "not found in symbol.list_arguments(). Did you mean one of:\n\t%s"
               % (typename, str(names), name, "\n\t".join(candidates)))
        if throw:
            raise ValueError(msg)
        warnings.warn(msg)


def _check_names_match(data_names, data_shapes, name, throw):
    """The names in ``data_shapes`` must equal ``data_names`` as a set (order is free)."""
    actual = [x[0] for x in data_shapes]
    if sorted(data_names) != sorted(actual):
        msg = ("Data provided by %s_shapes don't match names specified by %s_names (%s vs. %s)"
               % (name, name, str(data_shapes), str(data_names)))
        if throw:
            raise ValueError(msg)
        warnings.warn(msg)


def _to_data_desc(item, kind):
    """Normalise a ``(name, shape)`` pair or a DataDesc to a DataDesc with a tuple shape.

    A shape that is not a sequence of integers (an NDArray, say) raises TypeError before
    anything is bound, which is what MXNet users see (there it surfaces from the batch split).
    """
    desc = item if isinstance(item, DataDesc) else DataDesc(*item)
    shape = desc.shape
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in shape):
        raise TypeError("%s_shapes: the shape of %r must be a tuple of ints, got %s"
                        % (kind, desc.name, type(shape).__name__ if not isinstance(
                            shape, (tuple, list)) else repr(shape)))
    if isinstance(shape, tuple) and all(type(d) is int for d in shape):
        return desc
    return DataDesc(desc.name, tuple(int(d) for d in shape), desc.dtype, desc.layout)


def _parse_data_desc(data_names, label_names, data_shapes, label_shapes):
    """Turn data/label shape lists into DataDesc lists and check them against the names."""
    data_shapes = [_to_data_desc(x, "data") for x in data_shapes]
    _check_names_match(data_names, data_shapes, "data", True)
    if label_shapes is not None:
        label_shapes = [_to_data_desc(x, "label") for x in label_shapes]
        _check_names_match(label_names, label_shapes, "label", False)
    else:
        _check_names_match(label_names, [], "label", False)
    return data_shapes, label_shapes


def _distributed_kvstore(module):
    """The kvstore ``module`` trains with when it runs on several workers (lightmod's MPI store,
    which offers the fit hooks), else None. Looks into BucketingModule / SequentialModule."""
    candidates = [module, getattr(module, '_curr_module', None)]
    candidates += list(getattr(module, '_modules', None) or [])
    for candidate in candidates:
        kv = getattr(candidate, '_kvstore', None)
        if kv is not None and hasattr(kv, '_sync_params_from_rank0') and kv.num_workers > 1:
            return kv
    return None


def _call_all(callbacks, *args):
    """Call every callback in turn; return True if any of them asked to stop training.

    A :class:`StopTraining` raised by one callback does not keep the others from running.
    """
    stop = False
    if callbacks is None:
        return stop
    for callback in _as_list(callbacks):
        try:
            callback(*args)
        except StopTraining:
            stop = True
    return stop


class BaseModule:
    """The module interface: a computation that can be bound, initialised, run and trained.

    A module goes through bind -> init_params -> init_optimizer before it can train; ``fit`` does
    all three. Subclasses implement the abstract methods below; the loops live here.
    """

    def __init__(self, logger=logging):
        self.logger = logger
        self.binded = False
        self.for_training = False
        self.inputs_need_grad = False
        self.params_initialized = False
        self.optimizer_initialized = False
        self._symbol = None
        self._total_exec_bytes = 0

    # --- high-level loops ----------------------------------------------------------------------
    def forward_backward(self, data_batch):
        """A training-mode forward pass followed by a backward pass."""
        self.forward(data_batch, is_train=True)
        self.backward()

    def score(self, eval_data, eval_metric, num_batch=None, batch_end_callback=None,
              score_end_callback=None, reset=True, epoch=0, sparse_row_id_fn=None):
        """Run inference over ``eval_data`` and return ``eval_metric``'s ``(name, value)`` list.

        Padded samples of the last batch are evaluated too (MXNet does not strip them here).
        """
        _check_lifecycle(self, "score()", params=True)
        if reset:
            eval_data.reset()
        if not isinstance(eval_metric, metric.EvalMetric):
            eval_metric = metric.create(eval_metric)
        eval_metric.reset()
        stop = False
        actual_num_batch = 0
        for nbatch, eval_batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(eval_batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(eval_batch, is_train=False)
            if isinstance(eval_batch, list):
                self.update_metric(eval_metric, [eb.label for eb in eval_batch], pre_sliced=True)
            else:
                self.update_metric(eval_metric, eval_batch.label)
            if batch_end_callback is not None:
                stop |= _call_all(batch_end_callback, BatchEndParam(
                    epoch=epoch, nbatch=nbatch, eval_metric=eval_metric, locals=locals()))
            actual_num_batch += 1
        if score_end_callback:
            stop |= _call_all(score_end_callback, BatchEndParam(
                epoch=epoch, nbatch=actual_num_batch, eval_metric=eval_metric, locals=locals()))
        if stop:
            raise StopTraining("a score callback asked to stop")
        return eval_metric.get_name_value()

    def iter_predict(self, eval_data, num_batch=None, reset=True, sparse_row_id_fn=None):
        """Yield ``(outputs, nbatch, batch)`` per batch, outputs cut to the batch's real size.

        The outputs are the module's own arrays (no copy): use them before the next batch.
        """
        _check_lifecycle(self, "iter_predict()", params=True)
        if reset:
            eval_data.reset()
        for nbatch, eval_batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(eval_batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(eval_batch, is_train=False)
            pad = eval_batch.pad
            outputs = [out[0:out.shape[0] - pad] for out in self.get_outputs()]
            yield outputs, nbatch, eval_batch

    def predict(self, eval_data, num_batch=None, merge_batches=True, reset=True,
                always_output_list=False, sparse_row_id_fn=None):
        """Run inference and collect the outputs.

        ``eval_data`` is a DataIter, or one NDArray / numpy array fed as a single batch (then
        output 0 is returned, computed in the mode the module was bound for). For iterators the
        padding of each batch is stripped and, with ``merge_batches``, the batches are
        concatenated on axis 0; a single output is returned bare unless ``always_output_list``.
        """
        _check_lifecycle(self, "predict()", params=True)
        if isinstance(eval_data, (ndarray.NDArray, np.ndarray)):
            if isinstance(eval_data, np.ndarray):
                eval_data = ndarray.array(eval_data)
            self.forward(DataBatch([eval_data]))
            return self.get_outputs()[0]
        if not isinstance(eval_data, DataIter):
            raise ValueError("eval_data must be of type NDArray or DataIter, got %s"
                             % type(eval_data).__name__)
        if reset:
            eval_data.reset()
        output_list = []
        for nbatch, eval_batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(eval_batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(eval_batch, is_train=False)
            pad = eval_batch.pad
            output_list.append([out[0:out.shape[0] - pad].copy() for out in self.get_outputs()])
        if not output_list:
            return output_list
        if not merge_batches:
            return output_list
        num_outputs = len(output_list[0])
        for outs in output_list:
            if len(outs) != num_outputs:
                raise ValueError("Cannot merge batches, as num of outputs is not the same in "
                                 "mini-batches (%d vs. %d). Maybe bucketing is used?"
                                 % (len(outs), num_outputs))
        merged = [ndarray.concatenate([outs[i] for outs in output_list])
                  for i in range(num_outputs)]
        if num_outputs == 1 and not always_output_list:
            return merged[0]
        return merged

    def fit(self, train_data, eval_data=None, eval_metric='acc', epoch_end_callback=None,
            batch_end_callback=None, kvstore='local', optimizer='sgd',
            optimizer_params=(('learning_rate', 0.01),), eval_end_callback=None,
            eval_batch_end_callback=None, initializer=Uniform(0.01), arg_params=None,
            aux_params=None, allow_missing=False, force_rebind=False, force_init=False,
            begin_epoch=0, num_epoch=None, validation_metric=None, monitor=None,
            sparse_row_id_fn=None):
        """Train on ``train_data`` for epochs ``begin_epoch .. num_epoch-1``.

        Binds, initialises parameters and optimizer (keeping what is already there), then per
        epoch: forward_backward + update + update_metric per batch (the metric is updated before
        the next batch is fetched), logs ``Epoch[e] Train-<metric>=<v>`` and
        ``Epoch[e] Time cost=<s>``, syncs parameters across devices, runs the epoch-end
        callbacks, scores ``eval_data`` (``Epoch[e] Validation-<metric>=<v>``) and resets
        ``train_data``. A callback raising :class:`~lightmod.fit_callbacks.StopTraining` ends
        training after the current epoch's bookkeeping.

        With a distributed kvstore on several workers, batch-end and epoch-end callbacks and
        the epoch log lines run on rank 0 only, rank 0's stop decision holds for all workers,
        and parameters are re-broadcast from rank 0 at the end of every epoch.
        """
        if num_epoch is None:
            raise ValueError("fit(): please specify number of epochs (num_epoch)")
        arg_checks.data_iter(train_data, "fit", "train_data")
        arg_checks.integer(num_epoch, "fit", "num_epoch")
        self.bind(data_shapes=train_data.provide_data, label_shapes=train_data.provide_label,
                  for_training=True, force_rebind=force_rebind)
        if monitor is not None:
            self.install_monitor(monitor)
        self.init_params(initializer=initializer, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init)
        self.init_optimizer(kvstore=kvstore, optimizer=optimizer,
                            optimizer_params=optimizer_params)
        if validation_metric is None:
            validation_metric = eval_metric
        if not isinstance(eval_metric, metric.EvalMetric):
            eval_metric = metric.create(eval_metric)
        if eval_data is not None and not isinstance(validation_metric, metric.EvalMetric):
            validation_metric = metric.create(validation_metric)
        dist_kv = _distributed_kvstore(self)
        chief = dist_kv is None or dist_kv.rank == 0

        for epoch in range(begin_epoch, num_epoch):
            tic = time.time()
            eval_metric.reset()
            stop = False
            nbatch = 0
            data_iter = iter(train_data)
            end_of_batch = False
            next_data_batch = arg_checks.first_batch(data_iter, "fit", "train_data")
            while not end_of_batch:
                data_batch = next_data_batch
                if monitor is not None:
                    monitor.tic()
                self.forward_backward(data_batch)
                self.update()
                # the metric reads this batch's labels before the iterator may recycle them
                if isinstance(data_batch, list):
                    self.update_metric(eval_metric, [db.label for db in data_batch],
                                       pre_sliced=True)
                else:
                    self.update_metric(eval_metric, data_batch.label)
                try:
                    next_data_batch = next(data_iter)
                    self.prepare(next_data_batch, sparse_row_id_fn=sparse_row_id_fn)
                except StopIteration:
                    end_of_batch = True
                if monitor is not None:
                    monitor.toc_print()
                if end_of_batch:
                    # the epoch summary, taken before the last batch's callbacks run
                    eval_name_vals = eval_metric.get_global_name_value()
                if batch_end_callback is not None and chief:
                    stop |= _call_all(batch_end_callback, BatchEndParam(
                        epoch=epoch, nbatch=nbatch, eval_metric=eval_metric, locals=locals()))
                if dist_kv is not None:
                    # rank 0's word holds; also catches workers with epochs of unequal length
                    stop = dist_kv._agree_to_stop(stop, last_batch=end_of_batch)
                if stop and not end_of_batch:
                    end_of_batch = True
                    eval_name_vals = eval_metric.get_global_name_value()
                nbatch += 1

            toc = time.time()
            if chief:
                for name, val in eval_name_vals:
                    self.logger.info('Epoch[%d] Train-%s=%f', epoch, name, val)
                self.logger.info('Epoch[%d] Time cost=%.3f', epoch, (toc - tic))

            # sync parameters (and aux states) across devices, and across workers from rank 0
            arg_params_, aux_params_ = self.get_params()
            if dist_kv is not None:
                dist_kv._sync_params_from_rank0(arg_params_, aux_params_)
            self.set_params(arg_params_, aux_params_)

            if chief:
                stop |= _call_all(epoch_end_callback, epoch, self.symbol, arg_params_,
                                  aux_params_)

            if eval_data is not None:
                try:
                    res = self.score(eval_data, validation_metric,
                                     score_end_callback=eval_end_callback,
                                     batch_end_callback=eval_batch_end_callback, epoch=epoch)
                except StopTraining:
                    stop = True
                    res = validation_metric.get_name_value()
                if chief:
                    for name, val in res:
                        self.logger.info('Epoch[%d] Validation-%s=%f', epoch, name, val)

            train_data.reset()
            if dist_kv is not None:
                stop = dist_kv._agree_to_stop(stop)
            if stop:
                self.logger.info('Epoch[%d] a callback asked to stop training', epoch)
                break

    # --- abstract interface ---------------------------------------------------------------------
    # Subclasses override these; the base class only knows the contract.
    @property
    def data_names(self):
        """Names of the data inputs, in the order the module expects them."""
        raise NotImplementedError("%s must define data_names" % type(self).__name__)

    @property
    def output_names(self):
        """Names of the outputs."""
        raise NotImplementedError("%s must define output_names" % type(self).__name__)

    @property
    def data_shapes(self):
        """The bound data descriptions (DataDesc list)."""
        raise NotImplementedError("%s must define data_shapes" % type(self).__name__)

    @property
    def label_shapes(self):
        """The bound label descriptions (DataDesc list or None)."""
        raise NotImplementedError("%s must define label_shapes" % type(self).__name__)

    @property
    def output_shapes(self):
        """``[(name, shape)]`` of the outputs for the full batch."""
        raise NotImplementedError("%s must define output_shapes" % type(self).__name__)

    def get_params(self):
        """``(arg_params, aux_params)``: dicts of name -> NDArray."""
        raise NotImplementedError("%s must implement get_params()" % type(self).__name__)

    def init_params(self, initializer=Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        """Initialise the parameters and auxiliary states."""
        raise NotImplementedError("%s must implement init_params()" % type(self).__name__)

    def set_params(self, arg_params, aux_params, allow_missing=False, force_init=True,
                   allow_extra=False):
        """Assign parameter values (``init_params`` with no initializer)."""
        self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init,
                         allow_extra=allow_extra)

    def save_params(self, fname):
        """Save parameters to ``fname`` as ``arg:<name>`` / ``aux:<name>`` (NDArray list file)."""
        arg_params, aux_params = self.get_params()
        ndarray.save(fname, _params_save_dict(arg_params, aux_params))

    def load_params(self, fname):
        """Load parameters written by :meth:`save_params` and assign them with set_params."""
        save_dict = ndarray.load(fname)
        arg_params = {}
        aux_params = {}
        for k, value in save_dict.items():
            arg_type, _, name = k.partition(':')
            if arg_type == 'arg' and name:
                arg_params[name] = value
            elif arg_type == 'aux' and name:
                aux_params[name] = value
            else:
                raise ValueError("Invalid param file %s: key %r is neither 'arg:<name>' nor "
                                 "'aux:<name>'" % (fname, k))
        self.set_params(arg_params, aux_params)

    def get_states(self, merge_multi_context=True):
        """States of the module (a stateless module has none)."""
        _check_lifecycle(self, "get_states()", params=True)
        if merge_multi_context:
            raise MXNetError("get_states(merge_multi_context=True) is not supported; "
                             "call get_states(merge_multi_context=False)")
        return []

    def set_states(self, states=None, value=None):
        """Set the states (a stateless module accepts only nothing)."""
        _check_lifecycle(self, "set_states()", params=True)
        if states or value:
            raise ValueError("%s has no states to set" % type(self).__name__)

    def install_monitor(self, mon):
        """Install a :class:`~lightmod.monitor.Monitor` on every executor."""
        raise NotImplementedError("%s must implement install_monitor()" % type(self).__name__)

    def prepare(self, data_batch, sparse_row_id_fn=None):
        """Get ready for ``data_batch`` (switch bucket, pull sparse rows...). No-op here."""
        if sparse_row_id_fn is not None:
            warnings.warn(UserWarning("sparse_row_id_fn is not invoked for BaseModule."))

    def forward(self, data_batch, is_train=None):
        """Forward computation on one batch."""
        raise NotImplementedError("%s must implement forward()" % type(self).__name__)

    def backward(self, out_grads=None):
        """Backward computation (head gradients for non-loss outputs in ``out_grads``)."""
        raise NotImplementedError("%s must implement backward()" % type(self).__name__)

    def get_outputs(self, merge_multi_context=True):
        """Outputs of the last forward computation."""
        raise NotImplementedError("%s must implement get_outputs()" % type(self).__name__)

    def get_input_grads(self, merge_multi_context=True):
        """Gradients with respect to the inputs (needs ``inputs_need_grad``)."""
        raise NotImplementedError("%s must implement get_input_grads()" % type(self).__name__)

    def update(self):
        """Apply the optimizer to the gradients of the last backward pass."""
        raise NotImplementedError("%s must implement update()" % type(self).__name__)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Accumulate ``eval_metric`` on the last outputs."""
        raise NotImplementedError("%s must implement update_metric()" % type(self).__name__)

    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req='write'):
        """Allocate executors for the given input shapes."""
        raise NotImplementedError("%s must implement bind()" % type(self).__name__)

    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """Install the optimizer (and kvstore)."""
        raise NotImplementedError("%s must implement init_optimizer()" % type(self).__name__)

    @property
    def symbol(self):
        """The symbol of this module (None for modules without one)."""
        return self._symbol
