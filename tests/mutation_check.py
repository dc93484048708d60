"""Mutation check: break lightmod on purpose and require the property tests to notice.

Each mutant is a small, plausible bug, applied by patching one function or method (and
undone afterwards). Most mutants target a line of the Module contract
(``docs/module_contract.md``) and are checked against the contract properties of
:mod:`lightmod.testing.contract`, all in one process: patch, run the properties meant to
catch it, undo. The mutant is *caught* when one of them fails. A control run of every
property without a mutant must pass first, so a failure really comes from the mutant. A few
mutants target pytest tests (the lifecycle state machine, the registry-derived operator
tests) and run those in a fresh pytest process.

Hypothesis runs under the ``lightmod-mutation`` profile (derandomized, no shrinking: we only
need to know that something fails).

Run ``python tests/mutation_check.py [mutant ...]``: it prints one line per mutant and exits 0
when every mutant was caught (tests/test_mutation.py runs it in CI).
"""
import os
import subprocess
import sys
import time
import warnings

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS_DIR)
STATE_MACHINE = "tests/test_module_state_machine.py"
EXAMPLES = 8        # hypothesis examples per contract property in a mutation run


# ---------------------------------------------------------------------------------------------
# patching
# ---------------------------------------------------------------------------------------------
_PATCHES = []


def patch(owner, name, replacement):
    """Replace ``owner.name`` until :func:`undo_patches`."""
    _PATCHES.append((owner, name, owner.__dict__.get(name, _MISSING)))
    setattr(owner, name, replacement)


_MISSING = object()


def undo_patches():
    while _PATCHES:
        owner, name, original = _PATCHES.pop()
        if original is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, original)


def wrap(owner, name, make_replacement):
    """Patch ``owner.name`` with ``make_replacement(original)``."""
    original = getattr(owner, name)
    patch(owner, name, make_replacement(original))


def _module():
    from lightmod.module import Module
    return Module


# ---------------------------------------------------------------------------------------------
# the mutants: each docstring says what bug it plants
# ---------------------------------------------------------------------------------------------
def forward_none_means_train():
    """forward(is_train=None) always runs in training mode, whatever bind's for_training."""
    wrap(_module(), "forward", lambda original: lambda self, batch, is_train=None:
         original(self, batch, True if is_train is None else is_train))


def forward_none_means_inference():
    """forward(is_train=None) always runs in inference mode."""
    wrap(_module(), "forward", lambda original: lambda self, batch, is_train=None:
         original(self, batch, False if is_train is None else is_train))


def _op_class(name):
    from lightmod.operator import registry
    return type(registry.get(name))


def _forward_with_mode(op_name, mode):
    cls = _op_class(op_name)
    wrap(cls, "forward", lambda original: lambda self, p, k, inputs, outputs, is_train, state:
         original(self, p, k, inputs, outputs, mode(is_train), state))


def dropout_in_inference():
    """Dropout drops values in inference mode too."""
    _forward_with_mode("Dropout", lambda is_train: True)


def dropout_never():
    """Dropout is the identity in training mode too."""
    _forward_with_mode("Dropout", lambda is_train: False)


def batchnorm_moving_stats_in_training():
    """BatchNorm normalises with the moving statistics in training mode (and never updates
    them)."""
    _forward_with_mode("BatchNorm", lambda is_train: False)


def fixed_params_forgotten():
    """The constructor drops fixed_param_names: frozen parameters get trained."""
    def make(original):
        def __init__(self, *args, **kwargs):
            kwargs.pop("fixed_param_names", None)
            original(self, *args, **kwargs)
        return __init__
    wrap(_module(), "__init__", make)


def _map_grad_req(mapping):
    def make(original):
        def bind(self, data_shapes, label_shapes=None, for_training=True,
                 inputs_need_grad=False, force_rebind=False, shared_module=None,
                 grad_req="write"):
            if isinstance(grad_req, dict):
                grad_req = {k: mapping.get(v, v) for k, v in grad_req.items()}
            else:
                grad_req = mapping.get(grad_req, grad_req)
            return original(self, data_shapes, label_shapes, for_training, inputs_need_grad,
                            force_rebind, shared_module, grad_req)
        return bind
    wrap(_module(), "bind", make)


def grad_req_add_as_write():
    """grad_req 'add' overwrites the gradient instead of accumulating it."""
    _map_grad_req({"add": "write"})


def grad_req_null_as_write():
    """grad_req 'null' still allocates and computes a gradient."""
    _map_grad_req({"null": "write"})


def input_grads_zero():
    """get_input_grads returns zeros (the data gradient is never computed)."""
    from lightmod import ndarray as nd
    wrap(_module(), "get_input_grads", lambda original: lambda self, merge=True:
         [nd.zeros(g.shape) for g in original(self, merge)])


def input_grads_reversed_devices():
    """get_input_grads merges the devices' slices in reverse order."""
    from lightmod import ndarray as nd

    def make(original):
        def get_input_grads(self, merge_multi_context=True):
            per_device = original(self, merge_multi_context=False)
            return [nd.concatenate(list(reversed(grads))) for grads in per_device]
        return get_input_grads
    wrap(_module(), "get_input_grads", make)


def _optimizer_class():
    from lightmod.optimizer import Optimizer
    return Optimizer


def lr_mult_attributes_ignored():
    """The symbol's __lr_mult__ attributes are not read."""
    def set_lr_mult(self, args_lr_mult):
        self.lr_mult = dict(args_lr_mult)
    patch(_optimizer_class(), "set_lr_mult", set_lr_mult)


def wd_mult_attributes_ignored():
    """The symbol's __wd_mult__ attributes are not read."""
    def set_wd_mult(self, args_wd_mult):
        self.wd_mult = {n: 0.0 for n in self.idx2name.values()
                        if not (n.endswith("_weight") or n.endswith("_gamma"))}
        self.wd_mult.update(args_wd_mult)
    patch(_optimizer_class(), "set_wd_mult", set_wd_mult)
    from lightmod.optimizer import SGD
    patch(SGD, "set_wd_mult", set_wd_mult)


def biases_decayed():
    """Weight decay applies to biases too."""
    def set_wd_mult(self, args_wd_mult):
        self.wd_mult = {}
        self._wd_mult_from_symbol()
        self.wd_mult.update(args_wd_mult)
    patch(_optimizer_class(), "set_wd_mult", set_wd_mult)
    from lightmod.optimizer import SGD
    patch(SGD, "set_wd_mult", set_wd_mult)


def explicit_lr_mult_ignored():
    """Optimizer.set_lr_mult keeps the symbol's multipliers and drops the ones passed in."""
    wrap(_optimizer_class(), "set_lr_mult", lambda original: lambda self, args:
         original(self, {}))


def rescale_grad_per_device():
    """init_optimizer divides the gradient by the per-device batch instead of the whole
    batch (the sum over devices then counts every sample ``num_devices`` times too much)."""
    def make(original):
        def init_optimizer(self, kvstore='local', optimizer='sgd',
                           optimizer_params=(('learning_rate', 0.01),), force_init=False):
            if isinstance(optimizer, str) and self.binded:
                params = dict(optimizer_params)
                params.setdefault("rescale_grad",
                                  len(self._context) / float(self._exec_group.batch_size))
                optimizer_params = params
            return original(self, kvstore, optimizer, optimizer_params, force_init)
        return init_optimizer
    wrap(_module(), "init_optimizer", make)


def rescale_grad_forgotten():
    """init_optimizer leaves rescale_grad at 1 (the gradient is the batch's sum)."""
    def make(original):
        def init_optimizer(self, kvstore='local', optimizer='sgd',
                           optimizer_params=(('learning_rate', 0.01),), force_init=False):
            if isinstance(optimizer, str):
                optimizer_params = dict(dict(optimizer_params), rescale_grad=1.0)
            return original(self, kvstore, optimizer, optimizer_params, force_init)
        return init_optimizer
    wrap(_module(), "init_optimizer", make)


def kvstore_pull_before_push():
    """The store hands out the weight before applying this step's update (one step
    behind)."""
    from lightmod.kvstore.kvstore import KVStore

    def pushpull(self, key, value, out=None, priority=0):
        if out is None:
            self.push(key, value, priority)
            self.pull(key, value, priority)
            return
        self.pull(key, out, priority)
        self.push(key, value, priority)
    patch(KVStore, "pushpull", pushpull)


def kvstore_sums_first_device_only():
    """The store keeps the first device's gradient instead of the sum over devices."""
    from lightmod.kvstore.kvstore import KVStore
    wrap(KVStore, "push", lambda original: lambda self, key, value, priority=0:
         original(self, key, value[:1] if isinstance(value, (list, tuple)) and
                  isinstance(key, (str, int)) else value, priority))


def _wrap_init_params(change):
    """Patch init_params: ``change(self, call)`` edits the call's arguments (a dict), or
    returns False to skip the call."""
    def make(original):
        def init_params(self, initializer=None, arg_params=None, aux_params=None,
                        allow_missing=False, force_init=False, allow_extra=False):
            from lightmod.initializer import Uniform
            call = dict(initializer=initializer or Uniform(0.01), arg_params=arg_params,
                        aux_params=aux_params, allow_missing=allow_missing,
                        force_init=force_init, allow_extra=allow_extra)
            if change(self, call) is False:
                return None
            return original(self, **call)
        return init_params
    wrap(_module(), "init_params", make)


def allow_missing_always():
    """init_params fills missing parameters silently even with allow_missing=False."""
    _wrap_init_params(lambda self, call: call.update(allow_missing=True))


def allow_extra_always():
    """set_params accepts unknown names even with allow_extra=False."""
    wrap(_module(), "set_params", lambda original: lambda self, arg_params, aux_params,
         allow_missing=False, force_init=True, allow_extra=False:
         original(self, arg_params, aux_params, allow_missing, force_init, True))


def force_init_ignored():
    """init_params(force_init=True) on initialised parameters does nothing."""
    _wrap_init_params(lambda self, call: False if self.params_initialized else None)


def set_params_without_force():
    """set_params defaults to force_init=False, so it is ignored once parameters exist."""
    wrap(_module(), "set_params", lambda original: lambda self, arg_params, aux_params,
         allow_missing=False, force_init=False, allow_extra=False:
         original(self, arg_params, aux_params, allow_missing, force_init, allow_extra))


def update_leaves_params_clean():
    """update() does not mark the cached parameters stale, so get_params returns old
    values."""
    def make(original):
        def update(self):
            original(self)
            self._params_dirty = False
        return update
    wrap(_module(), "update", make)


def get_params_first_device():
    """get_params takes the first device's values instead of the average over devices."""
    def _sync_params_from_devices(self):
        group = self._exec_group
        for name, arrays in zip(group.param_names, group.param_arrays):
            arrays[0].copyto(self._arg_params[name])
        for name, arrays in zip(group.aux_names, group.aux_arrays):
            arrays[0].copyto(self._aux_params[name])
        self._params_dirty = False
    patch(_module(), "_sync_params_from_devices", _sync_params_from_devices)


def aux_states_not_synced():
    """Synchronising from the devices copies the arguments but not the auxiliary states."""
    def make(original):
        def _sync_params_from_devices(self):
            saved = {k: v.copy() for k, v in self._aux_params.items()}
            original(self)
            for k, v in saved.items():
                v.copyto(self._aux_params[k])
        return _sync_params_from_devices
    wrap(_module(), "_sync_params_from_devices", make)


def set_params_drops_aux():
    """set_params ignores aux_params (moving statistics keep their old values)."""
    wrap(_module(), "set_params", lambda original: lambda self, arg_params, aux_params,
         allow_missing=False, force_init=True, allow_extra=False:
         original(self, arg_params, None, True, force_init, allow_extra))


def optimizer_states_not_saved():
    """save_optimizer_states writes the states of a fresh optimizer (momentum lost)."""
    def make(original):
        def save_optimizer_states(self, fname):
            from lightmod import optimizer as opt
            saved = self._updater, self._update_on_kvstore
            self._updater, self._update_on_kvstore = opt.get_updater(self._optimizer), False
            try:
                original(self, fname)
            finally:
                self._updater, self._update_on_kvstore = saved
        return save_optimizer_states
    wrap(_module(), "save_optimizer_states", make)


def optimizer_states_not_loaded():
    """load_optimizer_states reads nothing."""
    patch(_module(), "load_optimizer_states", lambda self, fname: None)


def reshape_drops_parameters():
    """Re-shaping the executors for a new batch size leaves the parameters zero instead of
    keeping their values."""
    from lightmod.module.executor_group import DataParallelExecutorGroup

    def make(original):
        def reshape(self, data_shapes, label_shapes):
            changed = (list(data_shapes) != list(self.data_shapes)
                       or (label_shapes is not None and self.label_shapes is not None
                           and list(label_shapes) != list(self.label_shapes)))
            original(self, data_shapes, label_shapes)
            if changed:
                for arrays in self.param_arrays:
                    for array in arrays:
                        array[:] = 0
        return reshape
    wrap(DataParallelExecutorGroup, "reshape", make)


def _batches_without_pad(iterator):
    for batch in iterator:
        batch.pad = 0
        yield batch


def predict_keeps_padding():
    """predict() returns the padded rows of the last batch too."""
    from lightmod.module.base_module import BaseModule

    def make(original):
        def predict(self, eval_data, num_batch=None, merge_batches=True, reset=True,
                    always_output_list=False, sparse_row_id_fn=None):
            if reset:
                eval_data.reset()
            return original(self, _PadFree(eval_data), num_batch, merge_batches, False,
                            always_output_list, sparse_row_id_fn)
        return predict
    wrap(BaseModule, "predict", make)


def _pad_free_class():
    from lightmod.io import DataIter

    class PadFree(DataIter):
        """An iterator view whose batches claim no padding."""

        def __init__(self, inner):
            super().__init__(getattr(inner, "batch_size", 0))
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def __iter__(self):
            return _batches_without_pad(self.inner)

        def reset(self):
            self.inner.reset()
    return PadFree


def _PadFree(inner):
    return _pad_free_class()(inner)


class _PadFreeBase:
    """Delegates everything to the wrapped iterator."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __iter__(self):
        return _batches_without_pad(self.inner)

    def reset(self):
        self.inner.reset()


def iter_predict_keeps_padding():
    """iter_predict yields the padded rows of the last batch too."""
    from lightmod.module.base_module import BaseModule
    wrap(BaseModule, "iter_predict", lambda original: lambda self, eval_data, num_batch=None,
         reset=True, sparse_row_id_fn=None: (
             eval_data.reset() if reset else None,
             original(self, _PadFree(eval_data), num_batch, False, sparse_row_id_fn))[1])


def score_strips_padding():
    """score() leaves the padded rows out of the metric (MXNet scores whole batches)."""
    from lightmod import io
    from lightmod.module.base_module import BaseModule

    class Unpadded(_PadFreeBase):
        def __iter__(self):
            for batch in self.inner:
                real = batch.data[0].shape[0] - batch.pad
                yield io.DataBatch([d[0:real] for d in batch.data],
                                   [lab[0:real] for lab in batch.label], pad=0)

    wrap(BaseModule, "score", lambda original: lambda self, eval_data, eval_metric, *args,
         **kwargs: original(self, Unpadded(eval_data), eval_metric, *args, **kwargs))


def buckets_copy_parameters():
    """switch_bucket binds a new bucket on its own and copies the parameters into it, instead
    of sharing the default bucket's arrays (buckets then drift apart)."""
    from lightmod.module import BucketingModule

    def make(original):
        def switch_bucket(self, bucket_key, data_shapes, label_shapes=None):
            if self.binded and bucket_key not in self._buckets:
                symbol, data_names, label_names = self._call_sym_gen(bucket_key)
                module = self._new_module(symbol, data_names, label_names)
                module.bind(data_shapes, label_shapes, self._curr_module.for_training,
                            self._curr_module.inputs_need_grad, grad_req=self._grad_req)
                default = self._buckets[self._default_bucket_key]
                arg_params, aux_params = default.get_params()
                module.init_params(arg_params=arg_params, aux_params=aux_params,
                                   allow_missing=True)
                if default.optimizer_initialized:
                    module.borrow_optimizer(default)
                self._buckets[bucket_key] = module
            return original(self, bucket_key, data_shapes, label_shapes)
        return switch_bucket
    wrap(BucketingModule, "switch_bucket", make)


def buckets_own_optimizer_state():
    """A bucket that borrows the optimizer starts its own updater, so momentum is not
    shared between buckets."""
    def make(original):
        def borrow_optimizer(self, shared_module):
            original(self, shared_module)
            if self._updater is not None:
                from lightmod import optimizer as opt
                self._updater = opt.get_updater(self._optimizer)
        return borrow_optimizer
    wrap(_module(), "borrow_optimizer", make)


def uneven_split_drops_remainder():
    """Splitting a batch over devices drops the samples that do not divide evenly."""
    from lightmod.module import executor_group

    def _split_input_slice(batch_size, work_load_list):
        total = sum(work_load_list)
        slices, start = [], 0
        for load in work_load_list:
            size = max(1, batch_size * load // total)
            slices.append(slice(start, min(start + size, batch_size)))
            start += size
        return slices
    patch(executor_group, "_split_input_slice", _split_input_slice)


def _wrap_fit(change):
    """Patch BaseModule.fit: ``change(kwargs)`` edits its keyword arguments first (the
    properties pass everything but the training data by keyword)."""
    from lightmod.module.base_module import BaseModule

    def make(original):
        def fit(self, train_data, **kwargs):
            change(kwargs)
            return original(self, train_data, **kwargs)
        return fit
    wrap(BaseModule, "fit", make)


def _wrap_callback(kwargs, name, make_replacement):
    if callable(kwargs.get(name)):
        kwargs[name] = make_replacement(kwargs[name])


def fit_ignores_begin_epoch():
    """fit() counts epochs from 0 whatever begin_epoch says."""
    def change(kwargs):
        if kwargs.get("num_epoch") is not None:
            kwargs["num_epoch"] -= kwargs.pop("begin_epoch", 0)
    _wrap_fit(change)


def fit_skips_first_batch_callback():
    """fit() does not call batch_end_callback after the first batch of an epoch."""
    def skipping(callback):
        return lambda param: callback(param) if param.nbatch != 0 else None
    _wrap_fit(lambda kwargs: _wrap_callback(kwargs, "batch_end_callback", skipping))


def fit_ignores_stop_training():
    """fit() swallows StopTraining raised by an epoch-end callback and trains on."""
    from lightmod.fit_callbacks import StopTraining

    def swallowing(callback):
        def call(*args):
            try:
                callback(*args)
            except StopTraining:
                pass
        return call
    _wrap_fit(lambda kwargs: _wrap_callback(kwargs, "epoch_end_callback", swallowing))


def fit_skips_validation():
    """fit() never scores eval_data."""
    _wrap_fit(lambda kwargs: kwargs.update(eval_data=None))


def monitor_every_step():
    """Monitor collects on every step, ignoring its interval."""
    from lightmod.monitor import Monitor

    def tic(self):
        self.queue = []
        self.activated = True
        self.step += 1
    patch(Monitor, "tic", tic)


def monitor_without_arguments():
    """Monitor.toc reports the op outputs but not the arguments (weights)."""
    from lightmod.monitor import Monitor

    def make(original):
        def toc(self):
            saved = self.exes
            self.exes = []
            try:
                return original(self)
            finally:
                self.exes = saved
        return toc
    wrap(Monitor, "toc", make)


def forward_before_init_allowed():
    """forward() on a bound module without parameters runs on zeros instead of failing."""
    def make(original):
        def forward(self, data_batch, is_train=None):
            if self.binded and not self.params_initialized:
                self._exec_group.forward(data_batch, is_train)
                return None
            return original(self, data_batch, is_train)
        return forward
    wrap(_module(), "forward", make)


def update_without_optimizer_silent():
    """update() before init_optimizer returns quietly."""
    def make(original):
        def update(self):
            if not self.optimizer_initialized:
                return None
            return original(self)
        return update
    wrap(_module(), "update", make)


def sequential_backward_stops_early():
    """SequentialModule.backward runs the last module's backward only: the gradient never
    flows back to the earlier modules."""
    from lightmod.module import SequentialModule

    def backward(self, out_grads=None):
        self._modules[-1].backward(out_grads=out_grads)
    patch(SequentialModule, "backward", backward)


def python_loss_gradient_dropped():
    """PythonLossModule's backward ignores grad_func and hands back zeros."""
    from lightmod.module import PythonLossModule

    def make(original):
        def backward(self, out_grads=None):
            original(self, out_grads)
            self._scores_grad = self._scores_grad * 0
        return backward
    wrap(PythonLossModule, "backward", make)


def wrong_gradient_elemwise_mul():
    """elemwise_mul's gradient for lhs uses lhs instead of rhs (operands swapped)."""
    cls = _op_class("elemwise_mul")

    def make(original):
        def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
            original(self, p, k, out_grads, inputs, outputs, in_grads, req, state)
            if self.name == "elemwise_mul" and req[0] == "write":
                in_grads[0][...] = out_grads[0] * inputs[0]
        return backward
    wrap(cls, "backward", make)


class Mutant:
    """A mutant (``apply`` plants it) and what must catch it: contract property names
    (run in this process) or pytest node ids (run in a fresh pytest process)."""

    def __init__(self, apply, properties=(), tests=()):
        self.name = apply.__name__
        self.apply = apply
        self.properties = list(properties)
        self.tests = list(tests)

    @property
    def doc(self):
        return " ".join(self.apply.__doc__.split())


MUTANTS = [
    Mutant(forward_none_means_train, ["forward_mode_follows_for_training"]),
    Mutant(forward_none_means_inference, ["forward_mode_follows_for_training"]),
    Mutant(dropout_in_inference, ["dropout_only_in_training"]),
    Mutant(dropout_never, ["dropout_only_in_training"]),
    Mutant(batchnorm_moving_stats_in_training, ["forward_mode_follows_for_training",
                                                "auxiliary_states_round_trip"]),
    Mutant(fixed_params_forgotten, ["fixed_params_stay"]),
    Mutant(grad_req_add_as_write, ["grad_req_per_argument"]),
    Mutant(grad_req_null_as_write, ["grad_req_per_argument"]),
    Mutant(input_grads_zero, ["input_gradients"]),
    Mutant(input_grads_reversed_devices, ["input_gradients"]),
    Mutant(lr_mult_attributes_ignored, ["lr_and_wd_multipliers"]),
    Mutant(wd_mult_attributes_ignored, ["lr_and_wd_multipliers"]),
    Mutant(biases_decayed, ["lr_and_wd_multipliers", "fixed_params_stay"]),
    Mutant(explicit_lr_mult_ignored, ["optimizer_set_lr_mult"]),
    Mutant(rescale_grad_per_device, ["devices_equal_one", "kvstore_and_update_on_kvstore"],
           [STATE_MACHINE]),
    Mutant(rescale_grad_forgotten, ["lr_and_wd_multipliers"]),
    Mutant(kvstore_pull_before_push, ["kvstore_and_update_on_kvstore", "devices_equal_one"]),
    Mutant(kvstore_sums_first_device_only, ["kvstore_and_update_on_kvstore",
                                            "devices_equal_one"]),
    Mutant(allow_missing_always, ["init_and_set_params_flags"]),
    Mutant(allow_extra_always, ["init_and_set_params_flags"]),
    Mutant(force_init_ignored, ["init_and_set_params_flags"]),
    Mutant(set_params_without_force, ["init_and_set_params_flags"]),
    Mutant(update_leaves_params_clean, ["get_params_after_update"]),
    Mutant(get_params_first_device, ["get_params_averages_devices"]),
    Mutant(aux_states_not_synced, ["auxiliary_states_round_trip"]),
    Mutant(set_params_drops_aux, ["auxiliary_states_round_trip",
                                  "init_and_set_params_flags"]),
    Mutant(optimizer_states_not_saved, ["resume_equals_uninterrupted"]),
    Mutant(optimizer_states_not_loaded, ["resume_equals_uninterrupted"]),
    Mutant(reshape_drops_parameters, ["outputs_do_not_depend_on_batching"], [STATE_MACHINE]),
    Mutant(predict_keeps_padding, ["outputs_do_not_depend_on_batching"]),
    Mutant(iter_predict_keeps_padding, ["score_and_iter_predict_with_padding"]),
    Mutant(score_strips_padding, ["score_and_iter_predict_with_padding"]),
    Mutant(buckets_copy_parameters, ["buckets_share_parameters_and_optimizer"]),
    Mutant(buckets_own_optimizer_state, ["buckets_share_parameters_and_optimizer"]),
    Mutant(uneven_split_drops_remainder, ["devices_equal_one"]),
    Mutant(fit_ignores_begin_epoch, ["fit_runs_the_epochs"]),
    Mutant(fit_skips_first_batch_callback, ["fit_runs_the_epochs"]),
    Mutant(fit_ignores_stop_training, ["fit_runs_the_epochs"]),
    Mutant(fit_skips_validation, ["fit_runs_the_epochs"]),
    Mutant(monitor_every_step, ["monitor_reports_every_interval"]),
    Mutant(monitor_without_arguments, ["monitor_reports_every_interval"]),
    Mutant(forward_before_init_allowed, ["lifecycle_errors"]),
    Mutant(update_without_optimizer_silent, ["lifecycle_errors"]),
    Mutant(sequential_backward_stops_early, ["sequential_modules_chain"]),
    Mutant(python_loss_gradient_dropped, ["sequential_modules_chain"]),
    Mutant(wrong_gradient_elemwise_mul, tests=[
        "tests/test_registry_ops_property.py::test_operator_from_registry[elemwise_mul]"]),
]
BY_NAME = {m.name: m for m in MUTANTS}


# ---------------------------------------------------------------------------------------------
# running the properties in this process
# ---------------------------------------------------------------------------------------------
def _properties():
    os.environ["LIGHTMOD_HYPOTHESIS_PROFILE"] = "lightmod-mutation"
    from lightmod.testing import contract
    return contract.build_properties(max_examples=EXAMPLES)


def _reason(err):
    """The first line of what went wrong, with hypothesis' groups unpacked."""
    inner = getattr(err, "exceptions", None)
    if inner:
        return "; ".join(_reason(e) for e in inner[:2])
    text = str(err).strip().splitlines()
    return "%s: %s" % (type(err).__name__, text[0][:90] if text else "")


def _failed(properties, names, reasons=None):
    """The names among ``names`` whose property fails; ``reasons`` collects why."""
    failed = []
    for name in names:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                properties[name]()
        except Exception as err:
            failed.append(name)
            if reasons is not None:
                reasons.append("%s: %s" % (name, _reason(err)))
    return failed


def check_properties(mutants, out=sys.stdout, verbose=False):
    """Control run, then each mutant against its properties; {name: caught?}."""
    properties = _properties()
    results = {}
    start = time.time()
    failed = _failed(properties, sorted({p for m in mutants for p in m.properties}))
    results["control"] = not failed
    out.write("%-36s %s (%.0fs)%s\n" % ("control (no mutant)", "passes" if not failed else
                                        "FAILS", time.time() - start,
                                        " " + ", ".join(failed) if failed else ""))
    for mutant in mutants:
        start = time.time()
        reasons = []
        mutant.apply()
        try:
            failed = _failed(properties, mutant.properties, reasons)
        finally:
            undo_patches()
        results[mutant.name] = bool(failed)
        out.write("%-36s %s (%.1fs) %s\n" % (mutant.name, "caught" if failed else "SURVIVED",
                                             time.time() - start, ", ".join(failed)))
        if verbose:
            out.write("".join("    %s\n" % r for r in reasons))
        out.flush()
    return results


# ---------------------------------------------------------------------------------------------
# running pytest tests in a fresh process
# ---------------------------------------------------------------------------------------------
# `python -c` puts the working directory (the repository root) first on sys.path, where the
# source tree would shadow the installed lightmod (whose kernels package only exists once
# installed): drop it, as the `pytest` command does.
_BOOT = """
import os, sys
sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != {root!r}]
sys.path.insert(0, {tests_dir!r})
import mutation_check
mode, names = sys.argv[1], sys.argv[2].split(",") if sys.argv[2] else []
if mode == "properties":
    mutants = [mutation_check.BY_NAME[n] for n in names]
    results = mutation_check.check_properties(mutants, verbose=bool(os.environ.get("VERBOSE")))
    sys.exit(0 if all(results.values()) else 1)
import pytest
if names[0] != "none":
    mutation_check.BY_NAME[names[0]].apply()
sys.exit(pytest.main(sys.argv[3:]))
"""


def _child(args, timeout):
    env = dict(os.environ)
    env["LIGHTMOD_HYPOTHESIS_PROFILE"] = "lightmod-mutation"
    env.setdefault("PYTHONHASHSEED", "0")
    cmd = [sys.executable, "-c", _BOOT.format(root=ROOT, tests_dir=TESTS_DIR)] + list(args)
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def run_tests(mutant_name, tests, timeout=300):
    """Run pytest ``tests`` with mutant ``mutant_name`` applied ('none': unmutated); returns
    ``(exit code, names of the failed tests, seconds)``."""
    start = time.time()
    proc = _child(["tests", mutant_name, "-q", "-p", "no:cacheprovider", "--tb=no", "-rf"]
                  + list(tests), timeout)
    failed = [line.split()[1] for line in proc.stdout.splitlines()
              if line.startswith("FAILED ")]
    if proc.returncode not in (0, 1):
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
    return proc.returncode, failed, time.time() - start


def check(names=None, out=sys.stdout):
    """Run the controls and every mutant (or those named); returns {name: caught?} with
    'control' mapped to whether the unmutated tests and properties passed."""
    mutants = [BY_NAME[n] for n in names] if names else MUTANTS
    results = {"control": True}
    with_properties = [m for m in mutants if m.properties]
    if with_properties:
        proc = _child(["properties", ",".join(m.name for m in with_properties)], 1800)
        out.write(proc.stdout)
        for line in proc.stdout.splitlines():
            fields = line.split()
            if fields and fields[0] in BY_NAME:
                results[fields[0]] = fields[1] == "caught"
            elif line.startswith("control"):
                results["control"] = "passes" in line
        if proc.returncode not in (0, 1):
            out.write(proc.stderr[-3000:])
            results["control"] = False
    with_tests = [m for m in mutants if m.tests]
    if with_tests:
        control_tests = sorted({t for m in with_tests for t in m.tests})
        code, failed, secs = run_tests("none", control_tests)
        results["control"] &= code == 0
        out.write("%-36s %s (%.0fs)%s\n" % ("control (pytest tests)", "passes" if code == 0
                                            else "FAILS", secs, "" if code == 0 else
                                            " " + str(failed)))
        for mutant in with_tests:
            code, failed, secs = run_tests(mutant.name, mutant.tests)
            caught = code == 1 and bool(failed)
            results[mutant.name] = results.get(mutant.name, False) or caught
            out.write("%-36s %s (%.0fs) %s\n" % (
                mutant.name + " [pytest]", "caught" if caught else
                "SURVIVED (exit code %d)" % code, secs,
                ", ".join(f.split("::", 1)[-1] for f in failed)))
    for mutant in mutants:
        results.setdefault(mutant.name, False)
    return results


def main(argv=None):
    results = check(argv if argv else None)
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
