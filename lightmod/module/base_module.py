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

from .. import arg_checks, metric, ndarray
from ..base import MXNetError, NotBoundError, _as_list, unimplemented_property
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



def _keeps_optimizer(module, force_init, notice="optimizer already initialized, ignoring."):
    """The start of every init_optimizer(): raise NotBoundError when the module is not ready
    for one; True (after warning ``notice``) when it has an optimizer that stays, since
    ``force_init`` is off."""
    _check_lifecycle(module, "init_optimizer()", params=True)
    if module.optimizer_initialized and not force_init:
        module.logger.warning(notice)
        return True
    return False

_PARAMETER_SUFFIXES = ("_weight", "_bias", "_gamma", "_beta")


def _attribute_view(attribute, doc, bound=False):
    """A read-only property returning ``self.<attribute>``; with ``bound`` it first raises
    NotBoundError on a module that is not bound."""
    public = attribute.lstrip("_")

    def read(module):
        if bound:
            _check_lifecycle(module, public)
        return getattr(module, attribute)
    return property(read, doc=doc)


def _check_input_names(symbol, names, typename, throw):
    """Check that every name in ``names`` is an argument of ``symbol``.

    A name the symbol lacks is reported with the symbol's non-parameter arguments as
    suggestions: as a ValueError when ``throw`` (data, state and fixed_param names), as a
    warning otherwise (label names, since a net without a loss layer has no label input).
    """
    _check_names_in(symbol.list_arguments(), names, typename, throw)


def _check_names_in(arguments, names, typename, throw):
    """:func:`_check_input_names` against a symbol's argument names already listed."""
    unknown = [name for name in names if name not in arguments]
    if not unknown:
        return
    suggestions = "\n\t".join(arg for arg in arguments if not arg.endswith(_PARAMETER_SUFFIXES))
    for name in unknown:
        message = ("You created Module with Module(..., %s_names=%s) but input with name '%s' "
                   "is not found in symbol.list_arguments(). Did you mean one of:\n\t%s"
                   % (typename, str(names), name, suggestions))
        if throw:
            raise ValueError(message)
        warnings.warn(message, stacklevel=2)


def _declared_inputs(symbol, data_names, label_names, state_names, fixed_param_names,
                     arguments=None):
    """The data, label, state and fixed-parameter names of a module, as four lists.

    ``None`` stands for no names. Each list is checked against the symbol's arguments
    (``arguments``, when the caller listed them already): unknown labels only warn, the other
    kinds raise ValueError.
    """
    if arguments is None:
        arguments = symbol.list_arguments()     # one walk of the graph for the four checks
    given = (data_names, label_names, state_names, fixed_param_names)
    lists = [[] if names is None else list(names) for names in given]
    for names, kind in zip(lists, ("data", "label", "state", "fixed_param")):
        _check_names_in(arguments, names, kind, kind != "label")
    return lists


def _check_names_match(data_names, data_shapes, name, throw):
    """The names in ``data_shapes`` must equal ``data_names`` as a set (order is free)."""
    actual = [x[0] for x in data_shapes]
    if sorted(data_names) != sorted(actual):
        msg = ("Data provided by %s_shapes don't match names specified by %s_names (%s vs. %s)"
               % (name, name, str(data_shapes), str(data_names)))
        if throw:
            raise ValueError(msg)
        warnings.warn(msg, stacklevel=2)


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


def _as_metric(value):
    """An EvalMetric as given, or the one ``metric.create`` makes from a name or list."""
    return value if isinstance(value, metric.EvalMetric) else metric.create(value)


def _feed_metric(module, eval_metric, batch):
    """Update ``eval_metric`` with ``batch``'s labels (per device for a list of batches)."""
    if isinstance(batch, list):
        module.update_metric(eval_metric, [part.label for part in batch], pre_sliced=True)
    else:
        module.update_metric(eval_metric, batch.label)


_NO_MORE_BATCHES = object()

_LIFECYCLE_FLAGS = ("binded", "for_training", "inputs_need_grad", "params_initialized",
                    "optimizer_initialized")


class _FitLoop:
    """The steps of one ``BaseModule.fit`` call, one method per step.

    ``fit_locals`` are fit's arguments; batch-end callbacks find them, together with the
    current ``epoch``, ``nbatch`` and ``data_batch``, in ``BatchEndParam.locals``.

    In a distributed run on several workers only rank 0 (the "chief") logs and runs the
    batch-end and epoch-end callbacks; the workers agree on stopping through the kvstore.
    """

    def __init__(self, module, fit_locals, train_metric, validation_metric):
        self.module = module
        self.fit_locals = fit_locals
        self.train_data = fit_locals["train_data"]
        self.train_metric = train_metric
        self.validation_metric = validation_metric
        self.dist_kv = _distributed_kvstore(module)
        self.chief = self.dist_kv is None or self.dist_kv.rank == 0

    def train_epoch(self, epoch):
        """Run every batch of ``train_data`` once and log the epoch's training metric.

        A batch's metric update reads its labels before the next batch is fetched (an
        iterator may reuse the label arrays). The epoch summary is taken after the last
        batch's metric update but before its batch-end callbacks run. Returns whether a
        callback asked to stop.
        """
        started = time.time()
        self.train_metric.reset()
        monitor = self.fit_locals["monitor"]
        batches = iter(self.train_data)
        upcoming = arg_checks.first_batch(batches, "fit", "train_data")
        stop = False
        nbatch = 0
        while upcoming is not _NO_MORE_BATCHES:
            data_batch = upcoming
            self._train_on(data_batch, monitor)
            upcoming = self._prefetch(batches)
            if monitor is not None:
                monitor.toc_print()
            last = upcoming is _NO_MORE_BATCHES
            if last:
                summary = self.train_metric.get_global_name_value()
            stop = self._end_batch(epoch, nbatch, data_batch, stop, last)
            if stop and not last:
                summary = self.train_metric.get_global_name_value()
                break
            nbatch += 1
        if self.chief:
            for name, value in summary:
                self.module.logger.info('Epoch[%d] Train-%s=%f', epoch, name, value)
            self.module.logger.info('Epoch[%d] Time cost=%.3f', epoch, time.time() - started)
        return stop

    def _train_on(self, data_batch, monitor):
        """One optimisation step on ``data_batch`` and the metric update for it."""
        if monitor is not None:
            monitor.tic()
        self.module.forward_backward(data_batch)
        self.module.update()
        _feed_metric(self.module, self.train_metric, data_batch)

    def _prefetch(self, batches):
        """The next batch, already prepared for, or _NO_MORE_BATCHES at the end."""
        try:
            batch = next(batches)
            self.module.prepare(batch, sparse_row_id_fn=self.fit_locals["sparse_row_id_fn"])
        except StopIteration:
            return _NO_MORE_BATCHES
        return batch

    def _end_batch(self, epoch, nbatch, data_batch, stop, last):
        """Batch-end callbacks (rank 0) and, across workers, the shared stop decision."""
        callbacks = self.fit_locals["batch_end_callback"]
        if callbacks is not None and self.chief:
            stop |= _call_all(callbacks, self._batch_end_param(epoch, nbatch, data_batch))
        if self.dist_kv is not None:
            # rank 0 decides; this also ends workers whose epochs are longer than rank 0's
            stop = self.dist_kv._agree_to_stop(stop, last_batch=last)
        return stop

    def _batch_end_param(self, epoch, nbatch, data_batch):
        scope = dict(self.fit_locals, epoch=epoch, nbatch=nbatch, data_batch=data_batch,
                     eval_metric=self.train_metric)
        return BatchEndParam(epoch=epoch, nbatch=nbatch, eval_metric=self.train_metric,
                             locals=scope)

    def sync_params(self):
        """Average the parameters over the devices (and take rank 0's across workers), write
        them back to every device, and return them as ``(arg_params, aux_params)``."""
        arg_params, aux_params = self.module.get_params()
        if self.dist_kv is not None:
            self.dist_kv._sync_params_from_rank0(arg_params, aux_params)
        self.module.set_params(arg_params, aux_params)
        return arg_params, aux_params

    def end_epoch(self, epoch, arg_params, aux_params):
        """Run the epoch-end callbacks (rank 0 only); True if one asked to stop."""
        if not self.chief:
            return False
        return _call_all(self.fit_locals["epoch_end_callback"], epoch, self.module.symbol,
                         arg_params, aux_params)

    def validate(self, epoch):
        """Score ``eval_data`` with the validation metric and log it; True if a validation
        callback asked to stop."""
        eval_data = self.fit_locals["eval_data"]
        if eval_data is None:
            return False
        stop = False
        try:
            results = self.module.score(
                eval_data, self.validation_metric, epoch=epoch,
                score_end_callback=self.fit_locals["eval_end_callback"],
                batch_end_callback=self.fit_locals["eval_batch_end_callback"])
        except StopTraining:
            stop = True
            results = self.validation_metric.get_name_value()
        if self.chief:
            for name, value in results:
                self.module.logger.info('Epoch[%d] Validation-%s=%f', epoch, name, value)
        return stop

    def finish_epoch(self, epoch, stop):
        """Rewind ``train_data``; True when training ends here (all workers agree)."""
        self.train_data.reset()
        if self.dist_kv is not None:
            stop = self.dist_kv._agree_to_stop(stop)
        if stop:
            self.module.logger.info('Epoch[%d] a callback asked to stop training', epoch)
        return stop


class BaseModule:
    """The module interface: a computation that can be bound, initialised, run and trained.

    A module goes through bind -> init_params -> init_optimizer before it can train; ``fit`` does
    all three. Subclasses implement the abstract methods below; the loops live here.
    """

    def __init__(self, logger=logging):
        self.logger = logger
        for flag in _LIFECYCLE_FLAGS:
            setattr(self, flag, False)
        self._symbol = None
        self._total_exec_bytes = 0

    # --- high-level loops ----------------------------------------------------------------------
    def forward_backward(self, data_batch):
        """A training-mode forward pass followed by a backward pass."""
        self.forward(data_batch, is_train=True)
        self.backward()

    def _inference_batches(self, eval_data, num_batch, reset, sparse_row_id_fn):
        """Yield ``(nbatch, batch)`` after running each batch forward in inference mode.

        Rewinds ``eval_data`` first when ``reset``; stops after ``num_batch`` batches.
        """
        if reset:
            eval_data.reset()
        for nbatch, batch in enumerate(eval_data):
            if nbatch == num_batch:
                return
            self.prepare(batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(batch, is_train=False)
            yield nbatch, batch

    def _unpadded_outputs(self, batch):
        """The current outputs without the rows that pad ``batch`` (views, not copies)."""
        return [out[0:out.shape[0] - batch.pad] for out in self.get_outputs()]

    def score(self, eval_data, eval_metric, num_batch=None, batch_end_callback=None,
              score_end_callback=None, reset=True, epoch=0, sparse_row_id_fn=None):
        """Run inference over ``eval_data`` and return ``eval_metric``'s ``(name, value)`` list.

        Padded samples of the last batch are evaluated too (MXNet does not strip them here).
        """
        _check_lifecycle(self, "score()", params=True)
        batches = self._inference_batches(eval_data, num_batch, reset, sparse_row_id_fn)
        eval_metric = _as_metric(eval_metric)
        eval_metric.reset()
        stop = False
        seen = 0
        for nbatch, eval_batch in batches:
            _feed_metric(self, eval_metric, eval_batch)
            if batch_end_callback is not None:
                stop |= _call_all(batch_end_callback, BatchEndParam(
                    epoch=epoch, nbatch=nbatch, eval_metric=eval_metric, locals=locals()))
            seen += 1
        if score_end_callback:
            # ``nbatch`` here is the number of batches scored
            stop |= _call_all(score_end_callback, BatchEndParam(
                epoch=epoch, nbatch=seen, eval_metric=eval_metric, locals=locals()))
        if stop:
            raise StopTraining("a score callback asked to stop")
        return eval_metric.get_name_value()

    def iter_predict(self, eval_data, num_batch=None, reset=True, sparse_row_id_fn=None):
        """Yield ``(outputs, nbatch, batch)`` per batch, outputs cut to the batch's real size.

        The outputs are the module's own arrays (no copy): use them before the next batch.
        """
        _check_lifecycle(self, "iter_predict()", params=True)
        for nbatch, batch in self._inference_batches(eval_data, num_batch, reset,
                                                     sparse_row_id_fn):
            yield self._unpadded_outputs(batch), nbatch, batch

    def predict(self, eval_data, num_batch=None, merge_batches=True, reset=True,
                always_output_list=False, sparse_row_id_fn=None):
        """Run inference and collect the outputs.

        ``eval_data`` is a DataIter, or one NDArray / numpy array fed as a single batch (then
        output 0 is returned, computed in the mode the module was bound for). For iterators the
        padding of each batch is stripped and, with ``merge_batches``, the batches are
        concatenated on axis 0; a single output is returned bare unless ``always_output_list``.
        """
        _check_lifecycle(self, "predict()", params=True)
        if isinstance(eval_data, np.ndarray):
            eval_data = ndarray.array(eval_data)
        if isinstance(eval_data, ndarray.NDArray):
            self.forward(DataBatch([eval_data]))
            return self.get_outputs()[0]
        if not isinstance(eval_data, DataIter):
            raise ValueError("eval_data must be of type NDArray or DataIter, got %s"
                             % type(eval_data).__name__)
        per_batch = [[out.copy() for out in self._unpadded_outputs(batch)] for _, batch in
                     self._inference_batches(eval_data, num_batch, reset, sparse_row_id_fn)]
        if not per_batch or not merge_batches:
            return per_batch
        expected = len(per_batch[0])
        for outs in per_batch:
            if len(outs) != expected:
                raise ValueError("Cannot merge batches, as num of outputs is not the same in "
                                 "mini-batches (%d vs. %d). Maybe bucketing is used?"
                                 % (len(outs), expected))
        merged = [ndarray.concatenate(list(column)) for column in zip(*per_batch)]
        if len(merged) == 1 and not always_output_list:
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

        A batch-end callback gets ``BatchEndParam(epoch, nbatch, eval_metric, locals)`` whose
        ``locals`` maps fit's argument names (``self`` included) to their values, plus the
        current ``epoch``, ``nbatch``, ``data_batch`` and the training ``eval_metric``.

        With a distributed kvstore on several workers, batch-end and epoch-end callbacks and
        the epoch log lines run on rank 0 only, rank 0's stop decision holds for all workers,
        and parameters are re-broadcast from rank 0 at the end of every epoch.
        """
        if num_epoch is None:
            raise ValueError("fit(): please specify number of epochs (num_epoch)")
        arg_checks.data_iter(train_data, "fit", "train_data")
        arg_checks.integer(num_epoch, "fit", "num_epoch")
        fit_locals = dict(locals())
        self._get_ready_to_train(fit_locals)
        # an EvalMetric given as eval_metric also serves validation unless one is named
        if validation_metric is None:
            validation_metric = eval_metric
        if eval_data is not None:
            validation_metric = _as_metric(validation_metric)
        loop = _FitLoop(self, fit_locals, _as_metric(eval_metric), validation_metric)

        for epoch in range(begin_epoch, num_epoch):
            stop = loop.train_epoch(epoch)
            arg_params, aux_params = loop.sync_params()
            stop |= loop.end_epoch(epoch, arg_params, aux_params)
            stop |= loop.validate(epoch)
            if loop.finish_epoch(epoch, stop):
                break

    def _get_ready_to_train(self, args):
        """fit's set-up: bind for training, install the monitor, initialise parameters and
        optimizer (each step keeps what an earlier call already did)."""
        train_data = args["train_data"]
        self.bind(data_shapes=train_data.provide_data, label_shapes=train_data.provide_label,
                  for_training=True, force_rebind=args["force_rebind"])
        if args["monitor"] is not None:
            self.install_monitor(args["monitor"])
        self.init_params(initializer=args["initializer"], arg_params=args["arg_params"],
                         aux_params=args["aux_params"], allow_missing=args["allow_missing"],
                         force_init=args["force_init"])
        self.init_optimizer(kvstore=args["kvstore"], optimizer=args["optimizer"],
                            optimizer_params=args["optimizer_params"])

    # --- abstract interface ---------------------------------------------------------------------
    # Subclasses override these; the base class only knows the contract.
    data_names = unimplemented_property(
        "%s must define data_names",
        doc="Names of the data inputs, in the order the module expects them.")
    output_names = unimplemented_property("%s must define output_names",
                                          doc="Names of the outputs.")
    data_shapes = unimplemented_property("%s must define data_shapes",
                                         doc="The bound data descriptions (DataDesc list).")
    label_shapes = unimplemented_property(
        "%s must define label_shapes", doc="The bound label descriptions (DataDesc list or None).")
    output_shapes = unimplemented_property(
        "%s must define output_shapes",
        doc="``[(name, shape)]`` of the outputs for the full batch.")

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
            warnings.warn(UserWarning("sparse_row_id_fn is not invoked for BaseModule."), stacklevel=2)

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
