"""BucketingModule: one Module per bucket key (e.g. sequence length), all sharing parameters.

``sym_gen(bucket_key)`` returns ``(symbol, data_names, label_names)``. It is called inside a
fresh :class:`~lightmod.name.NameManager`, so auto-generated names (``embedding0_weight``) are
the same in every bucket. The default bucket's module owns the parameters; every other bucket
is bound with ``shared_module=<default>``, so all buckets share parameter arrays, gradient
arrays (``grad_req='add'`` accumulates across buckets), the parameter cache and the optimizer.
"""
import logging
import warnings

import numpy as np

from .. import context as ctx
from .. import ndarray as nd
from .. import symbol as sym
from ..initializer import Uniform
from ..model import load_params
from ..name import NameManager
from .base_module import BaseModule, _check_input_names, _check_lifecycle
from .module import Module

__all__ = ["BucketingModule"]


class BucketingModule(BaseModule):
    """A module that switches between buckets of one family of symbols.

    Parameters
    ----------
    sym_gen : callable
        ``sym_gen(bucket_key) -> (symbol, data_names, label_names)``.
    default_bucket_key : hashable
        The bucket bound first; it should be the largest, so that the others fit in its memory.
    logger, context, work_load_list, fixed_param_names, state_names, group2ctxs,
    compression_params
        As for :class:`Module`; every bucket's Module gets them.
    """

    def __init__(self, sym_gen, default_bucket_key=None, logger=logging, context=ctx.cpu(),
                 work_load_list=None, fixed_param_names=None, state_names=None,
                 group2ctxs=None, compression_params=None):
        super().__init__(logger=logger)

        if default_bucket_key is None:
            raise ValueError("BucketingModule needs a default_bucket_key")
        self._default_bucket_key = default_bucket_key
        self._sym_gen = sym_gen

        symbol, data_names, label_names = self._call_sym_gen(default_bucket_key)
        data_names = list(data_names) if data_names is not None else []
        label_names = list(label_names) if label_names is not None else []
        state_names = list(state_names) if state_names is not None else []
        fixed_param_names = list(fixed_param_names) if fixed_param_names is not None else []

        _check_input_names(symbol, data_names, "data", True)
        _check_input_names(symbol, label_names, "label", False)
        _check_input_names(symbol, state_names, "state", True)
        _check_input_names(symbol, fixed_param_names, "fixed_param", True)

        self._compression_params = compression_params
        self._fixed_param_names = fixed_param_names
        self._state_names = state_names
        self._context = context
        self._work_load_list = work_load_list
        self._group2ctxs = group2ctxs

        self._buckets = {}
        self._curr_module = None
        self._curr_bucket_key = None
        self._params_dirty = False
        self._monitor = None
        self._grad_req = None

    def _reset_bind(self):
        """Forget every bucket."""
        self.binded = False
        self._buckets = {}
        self._curr_module = None
        self._curr_bucket_key = None

    def _call_sym_gen(self, *args, **kwargs):
        """``sym_gen`` under a fresh NameManager: auto names restart in every bucket."""
        with NameManager():
            return self._sym_gen(*args, **kwargs)

    def _new_module(self, symbol, data_names, label_names):
        return Module(symbol, data_names, label_names, logger=self.logger,
                      context=self._context, work_load_list=self._work_load_list,
                      fixed_param_names=self._fixed_param_names, state_names=self._state_names,
                      group2ctxs=self._group2ctxs, compression_params=self._compression_params)

    # --- names and shapes ----------------------------------------------------------------------
    @property
    def data_names(self):
        if self.binded:
            return self._curr_module.data_names
        _, data_names, _ = self._call_sym_gen(self._default_bucket_key)
        return data_names

    @property
    def output_names(self):
        if self.binded:
            return self._curr_module.output_names
        symbol, _, _ = self._call_sym_gen(self._default_bucket_key)
        return symbol.list_outputs()

    @property
    def data_shapes(self):
        _check_lifecycle(self, "data_shapes")
        return self._curr_module.data_shapes

    @property
    def label_shapes(self):
        _check_lifecycle(self, "label_shapes")
        return self._curr_module.label_shapes

    @property
    def output_shapes(self):
        _check_lifecycle(self, "output_shapes")
        return self._curr_module.output_shapes

    # --- parameters --------------------------------------------------------------------------
    def get_params(self):
        """The shared parameter cache, synced from the devices when stale.

        Every bucket refreshes the parameters it holds, not only the current one: a bucket
        may hold a subset of the parameters, and the others were last moved by other
        buckets. (MXNet syncs the current bucket only, leaving the rest stale, so a
        checkpoint saved while a smaller bucket is current can hold old values.)"""
        _check_lifecycle(self, "get_params()", params=True, bound=False)
        if self._params_dirty:
            for module in self._buckets.values():
                if module is not self._curr_module and module.binded:
                    module._params_dirty = True
                    module.get_params()
        self._curr_module._params_dirty = self._params_dirty
        params = self._curr_module.get_params()
        self._params_dirty = False
        return params

    def set_params(self, arg_params, aux_params, allow_missing=False, force_init=True,
                   allow_extra=False):
        """Assign parameter values (see :meth:`Module.set_params`)."""
        if not allow_missing:
            self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                             allow_missing=allow_missing, force_init=force_init)
            return

        if self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. "
                          "set_params call ignored.", stacklevel=2)
            return

        self._curr_module.set_params(arg_params, aux_params, allow_missing=allow_missing,
                                     force_init=force_init, allow_extra=allow_extra)
        # the devices were written directly: the cache is stale
        self._params_dirty = True
        self.params_initialized = True

    def init_params(self, initializer=Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        """Initialise the parameters (through the current bucket). Already initialised and
        not ``force_init``: silently nothing."""
        if self.params_initialized and not force_init:
            return
        _check_lifecycle(self, "init_params()")
        self._curr_module.init_params(initializer=initializer, arg_params=arg_params,
                                      aux_params=aux_params, allow_missing=allow_missing,
                                      force_init=force_init, allow_extra=allow_extra)
        self._params_dirty = False
        self.params_initialized = True

    def get_states(self, merge_multi_context=True):
        _check_lifecycle(self, "get_states()", params=True)
        return self._curr_module.get_states(merge_multi_context=merge_multi_context)

    def set_states(self, states=None, value=None):
        _check_lifecycle(self, "set_states()", params=True)
        self._curr_module.set_states(states, value)

    # --- binding -----------------------------------------------------------------------------
    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req='write'):
        """Bind the default bucket. ``force_rebind`` drops every bucket; parameters already
        initialised are carried over to the new default bucket."""
        # in case we already initialized params, keep it
        if self.params_initialized:
            arg_params, aux_params = self.get_params()

        if force_rebind:
            self._reset_bind()

        if self.binded:
            self.logger.warning('Already bound, ignoring bind()')
            return

        if shared_module is not None:
            raise ValueError('shared_module for BucketingModule is not supported')

        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._grad_req = grad_req

        symbol, data_names, label_names = self._call_sym_gen(self._default_bucket_key)
        if self._default_bucket_key in self._buckets:
            # a module created by load(): bind it as it is
            module = self._buckets[self._default_bucket_key]
        else:
            module = self._new_module(symbol, data_names, label_names)
        module.bind(data_shapes, label_shapes, for_training, inputs_need_grad,
                    force_rebind=False, shared_module=None, grad_req=self._grad_req)
        self._curr_module = module
        self._curr_bucket_key = self._default_bucket_key
        self._buckets[self._default_bucket_key] = module
        self.binded = True

        # copy back saved params, if already initialized
        if self.params_initialized:
            self.set_params(arg_params, aux_params)

    def switch_bucket(self, bucket_key, data_shapes, label_shapes=None):
        """Make ``bucket_key`` current, creating and binding its Module (sharing with the
        default bucket) when needed. A bound bucket is selected as it is."""
        _check_lifecycle(self, "switch_bucket()")
        module = self._buckets.get(bucket_key)
        if module is None:
            symbol, data_names, label_names = self._call_sym_gen(bucket_key)
            module = self._new_module(symbol, data_names, label_names)
            module.bind(data_shapes, label_shapes, self._curr_module.for_training,
                        self._curr_module.inputs_need_grad, force_rebind=False,
                        shared_module=self._buckets[self._default_bucket_key],
                        grad_req=self._grad_req)
            if self._monitor is not None:
                module.install_monitor(self._monitor)
            self._buckets[bucket_key] = module
        elif not module.binded:
            module.bind(data_shapes, label_shapes, self._curr_module.for_training,
                        self._curr_module.inputs_need_grad, force_rebind=False,
                        shared_module=self._buckets[self._default_bucket_key],
                        grad_req=self._grad_req)

        self._curr_module = module
        self._curr_bucket_key = bucket_key

    # --- optimizer ---------------------------------------------------------------------------
    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """Install the optimizer on the current bucket; every other bucket borrows it."""
        _check_lifecycle(self, "init_optimizer()", params=True)
        if self.optimizer_initialized and not force_init:
            self.logger.warning('optimizer already initialized, ignoring.')
            return

        self._curr_module.init_optimizer(kvstore, optimizer, optimizer_params,
                                         force_init=force_init)
        for mod in self._buckets.values():
            if mod is not self._curr_module:
                mod.borrow_optimizer(self._curr_module)

        self.optimizer_initialized = True

    # --- computation -------------------------------------------------------------------------
    def prepare(self, data_batch, sparse_row_id_fn=None):
        """Bind the batch's bucket if needed and prepare it, then switch back."""
        _check_lifecycle(self, "prepare()", params=True)
        bucket_key = data_batch.bucket_key
        original_bucket_key = self._curr_bucket_key
        self.switch_bucket(bucket_key, data_batch.provide_data, data_batch.provide_label)
        self._curr_module.prepare(data_batch, sparse_row_id_fn=sparse_row_id_fn)
        self.switch_bucket(original_bucket_key, None, None)

    def forward(self, data_batch, is_train=None):
        """Switch to the batch's bucket (``bucket_key``, ``provide_data``, ``provide_label``)
        and run its forward pass."""
        _check_lifecycle(self, "forward()", params=True)
        self.switch_bucket(data_batch.bucket_key, data_batch.provide_data,
                           data_batch.provide_label)
        self._curr_module.forward(data_batch, is_train=is_train)

    def backward(self, out_grads=None):
        _check_lifecycle(self, "backward()", params=True)
        self._curr_module.backward(out_grads=out_grads)

    def update(self):
        """Update the (shared) parameters with the current bucket's gradients."""
        _check_lifecycle(self, "update()", params=True, optimizer=True)
        self._params_dirty = True
        self._curr_module.update()

    def get_outputs(self, merge_multi_context=True):
        _check_lifecycle(self, "get_outputs()", params=True)
        return self._curr_module.get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context=True):
        _check_lifecycle(self, "get_input_grads()", params=True)
        return self._curr_module.get_input_grads(merge_multi_context=merge_multi_context)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        _check_lifecycle(self, "update_metric()", params=True)
        self._curr_module.update_metric(eval_metric, labels, pre_sliced)

    @property
    def symbol(self):
        """The current bucket's symbol."""
        _check_lifecycle(self, "symbol")
        return self._curr_module.symbol

    def install_monitor(self, mon):
        """Install ``mon`` on every bucket, present and future."""
        _check_lifecycle(self, "install_monitor()")
        self._monitor = mon
        for mod in self._buckets.values():
            mod.install_monitor(mon)

    # --- checkpoints -------------------------------------------------------------------------
    def save_checkpoint(self, prefix, epoch, remove_amp_cast=False):
        """Write ``prefix-%04d.params``, one ``prefix-<key>-symbol.json`` per bucket and
        ``prefix.buckets`` (the keys). No optimizer states.

        The symbols are regenerated with ``sym_gen(key)`` outside a fresh NameManager, as
        MXNet does, so auto-generated names may differ from the live ones.
        """
        if not self._buckets:
            raise ValueError("Empty BucketingModule cannot be saved")
        param_name = "%s-%04d.params" % (prefix, epoch)
        self.save_params(param_name)
        for bucket_key in self._buckets:
            symbol, _, _ = self._sym_gen(bucket_key)
            symbol.save("%s-%s-symbol.json" % (prefix, bucket_key),
                        remove_amp_cast=remove_amp_cast)
        nd.save("%s.buckets" % prefix, nd.array(list(self._buckets.keys()), dtype=np.int32))

    @staticmethod
    def load(prefix, epoch, sym_gen=None, default_bucket_key=None, **kwargs):
        """A BucketingModule from :meth:`save_checkpoint` files (bind it before use).

        ``kwargs`` go to the BucketingModule and to every bucket's Module.
        """
        if sym_gen is None:
            raise ValueError("sym_gen is required for loading BucketingModule")
        if default_bucket_key is None:
            raise ValueError("default_bucket_key is required for loading BucketingModule")
        buckets = nd.load("%s.buckets" % prefix)
        buckets = list(buckets[0].asnumpy().astype('int32'))
        bucketing_mod = BucketingModule(sym_gen, default_bucket_key, **kwargs)
        for bucket_key in buckets:
            _, data_names, label_names = sym_gen(bucket_key)
            symbol = sym.load("%s-%s-symbol.json" % (prefix, bucket_key))
            bucketing_mod._buckets[bucket_key] = Module(symbol, data_names, label_names,
                                                        **kwargs)
            if bucket_key == default_bucket_key:
                bucketing_mod._curr_module = bucketing_mod._buckets[bucket_key]
                arg_params, aux_params = load_params(prefix, epoch)
                bucketing_mod._curr_module._arg_params = arg_params
                bucketing_mod._curr_module._aux_params = aux_params
                bucketing_mod._curr_module.params_initialized = True
                bucketing_mod.params_initialized = True
        return bucketing_mod

    @staticmethod
    def load_dict(sym_dict=None, sym_gen=None, default_bucket_key=None, arg_params=None,
                  aux_params=None, **kwargs):
        """A BucketingModule from in-memory symbols ``{bucket_key: symbol}`` and parameters."""
        if sym_dict is None:
            raise ValueError("sym_dict needs to be provided for BucketingModule.load_dict")
        if arg_params is None:
            raise ValueError("arg_params need to be provided for BucketingModule.load_dict")
        if aux_params is None:
            raise ValueError("aux_params need to be provided for BucketingModule.load_dict")
        if default_bucket_key is None:
            raise ValueError("default_bucket_key needs to be provided for "
                             "BucketingModule.load_dict")
        bucketing_mod = BucketingModule(sym_gen, default_bucket_key, **kwargs)
        for bucket_key, loaded_sym in sym_dict.items():
            _, data_names, label_names = sym_gen(default_bucket_key)
            bucketing_mod._buckets[bucket_key] = Module(loaded_sym, data_names, label_names,
                                                        **kwargs)
            if bucket_key == default_bucket_key:
                bucketing_mod._curr_module = bucketing_mod._buckets[bucket_key]
                bucketing_mod._curr_module._arg_params = arg_params
                bucketing_mod._curr_module._aux_params = aux_params
                bucketing_mod._curr_module.params_initialized = True
                bucketing_mod.params_initialized = True
        return bucketing_mod
