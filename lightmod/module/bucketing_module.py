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
from .base_module import BaseModule, _check_lifecycle, _declared_inputs, _keeps_optimizer
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

        # the default bucket's symbol checks the names every bucket will be given
        default_symbol, data_names, label_names = self._call_sym_gen(default_bucket_key)
        _, _, self._state_names, self._fixed_param_names = _declared_inputs(
            default_symbol, data_names, label_names, state_names, fixed_param_names)
        # what every bucket's Module is constructed with, besides its symbol and names
        self._context = context
        self._work_load_list = work_load_list
        self._group2ctxs = group2ctxs
        self._compression_params = compression_params

        self._buckets = {}
        self._curr_module = self._curr_bucket_key = None
        self._params_dirty = False
        self._monitor = None
        self._grad_req = None

    def _reset_bind(self):
        """Forget every bucket."""
        self.binded = False
        self._buckets = {}
        self._curr_module = self._curr_bucket_key = None

    def _call_sym_gen(self, *args, **kwargs):
        """``sym_gen`` under a fresh NameManager: auto names restart in every bucket."""
        with NameManager():
            return self._sym_gen(*args, **kwargs)

    def _new_module(self, symbol, data_names, label_names):
        """A Module for one bucket, configured like this BucketingModule."""
        return Module(symbol, data_names, label_names, logger=self.logger,
                      context=self._context, work_load_list=self._work_load_list,
                      fixed_param_names=self._fixed_param_names, state_names=self._state_names,
                      group2ctxs=self._group2ctxs, compression_params=self._compression_params)

    # --- names and shapes ----------------------------------------------------------------------
    @property
    def data_names(self):
        if self.binded:
            return self._curr_module.data_names
        return self._call_sym_gen(self._default_bucket_key)[1]

    @property
    def output_names(self):
        if self.binded:
            return self._curr_module.output_names
        return self._call_sym_gen(self._default_bucket_key)[0].list_outputs()

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
        """Assign parameter values (see :meth:`Module.set_params`).

        The lenient form (``allow_missing``) writes into the current bucket's devices, which
        every bucket shares, and leaves the host cache stale.
        """
        if allow_missing and self.params_initialized and not force_init:
            warnings.warn("Parameters already initialized and force_init=False. "
                          "set_params call ignored.", stacklevel=2)
        elif allow_missing:
            self._curr_module.set_params(arg_params, aux_params, allow_missing=True,
                                         force_init=force_init, allow_extra=allow_extra)
            self._params_dirty = self.params_initialized = True
        else:
            self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                             allow_missing=False, force_init=force_init)

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
        kept = self.get_params() if self.params_initialized else None
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
        key = self._default_bucket_key
        # a module made by load() is bound as it is; otherwise the generator makes one
        default = self._buckets.get(key)
        if default is None:
            default = self._new_module(*self._call_sym_gen(key))
        default.bind(data_shapes, label_shapes, for_training, inputs_need_grad,
                     force_rebind=False, shared_module=None, grad_req=grad_req)
        self._buckets[key] = self._curr_module = default
        self._curr_bucket_key = key
        self.binded = True
        if kept is not None:
            self.set_params(*kept)

    def switch_bucket(self, bucket_key, data_shapes, label_shapes=None):
        """Make ``bucket_key`` the current bucket.

        A bucket seen for the first time gets a Module from ``sym_gen`` (and the installed
        monitor, if any); a bucket not bound yet (a new one, or one made by ``load``) is bound
        for ``data_shapes``/``label_shapes`` sharing the default bucket's memory. A bound
        bucket is taken as it is.
        """
        _check_lifecycle(self, "switch_bucket()")
        module = self._buckets.get(bucket_key)
        fresh = module is None
        if fresh:
            module = self._buckets[bucket_key] = self._new_module(*self._call_sym_gen(bucket_key))
        if not module.binded:
            module.bind(data_shapes, label_shapes, self._curr_module.for_training,
                        self._curr_module.inputs_need_grad, force_rebind=False,
                        shared_module=self._buckets[self._default_bucket_key],
                        grad_req=self._grad_req)
        if fresh and self._monitor is not None:
            module.install_monitor(self._monitor)
        self._curr_module, self._curr_bucket_key = module, bucket_key

    # --- optimizer ---------------------------------------------------------------------------
    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """Install the optimizer on the current bucket; every other bucket borrows it."""
        if _keeps_optimizer(self, force_init):
            return
        owner = self._curr_module
        owner.init_optimizer(kvstore, optimizer, optimizer_params, force_init=force_init)
        for module in self._buckets.values():
            if module is not owner:
                module.borrow_optimizer(owner)
        self.optimizer_initialized = True

    # --- computation -------------------------------------------------------------------------
    def prepare(self, data_batch, sparse_row_id_fn=None):
        """Let the batch's bucket (bound here if new) prepare for it; the current bucket
        stays current."""
        _check_lifecycle(self, "prepare()", params=True)
        current = self._curr_bucket_key
        self.switch_bucket(data_batch.bucket_key, data_batch.provide_data,
                           data_batch.provide_label)
        self._curr_module.prepare(data_batch, sparse_row_id_fn=sparse_row_id_fn)
        self.switch_bucket(current, None, None)

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
        for module in self._buckets.values():
            module.install_monitor(mon)

    # --- checkpoints -------------------------------------------------------------------------
    def save_checkpoint(self, prefix, epoch, remove_amp_cast=False):
        """Write ``prefix-%04d.params``, one ``prefix-<key>-symbol.json`` per bucket and
        ``prefix.buckets`` (the keys). No optimizer states.

        The symbols are regenerated with ``sym_gen(key)`` outside a fresh NameManager, as
        MXNet does, so auto-generated names may differ from the live ones.
        """
        if not self._buckets:
            raise ValueError("Empty BucketingModule cannot be saved")
        self.save_params("%s-%04d.params" % (prefix, epoch))
        keys = list(self._buckets)
        for key in keys:
            self._sym_gen(key)[0].save("%s-%s-symbol.json" % (prefix, key),
                                       remove_amp_cast=remove_amp_cast)
        nd.save("%s.buckets" % prefix, nd.array(keys, dtype=np.int32))

    @staticmethod
    def load(prefix, epoch, sym_gen=None, default_bucket_key=None, **kwargs):
        """A BucketingModule from :meth:`save_checkpoint` files (bind it before use).

        ``kwargs`` go to the BucketingModule and to every bucket's Module.
        """
        if sym_gen is None:
            raise ValueError("sym_gen is required for loading BucketingModule")
        if default_bucket_key is None:
            raise ValueError("default_bucket_key is required for loading BucketingModule")
        keys = nd.load("%s.buckets" % prefix)[0].asnumpy().astype('int32')
        symbols = {key: sym.load("%s-%s-symbol.json" % (prefix, key)) for key in keys}
        return BucketingModule._assemble(sym_gen, default_bucket_key, symbols,
                                         lambda key: sym_gen(key),
                                         lambda: load_params(prefix, epoch), kwargs)

    @staticmethod
    def load_dict(sym_dict=None, sym_gen=None, default_bucket_key=None, arg_params=None,
                  aux_params=None, **kwargs):
        """A BucketingModule from in-memory symbols ``{bucket_key: symbol}`` and parameters.

        Every bucket takes its data and label names from ``sym_gen(default_bucket_key)``.
        """
        for value, what in ((sym_dict, "sym_dict needs to be provided"),
                            (arg_params, "arg_params need to be provided"),
                            (aux_params, "aux_params need to be provided"),
                            (default_bucket_key, "default_bucket_key needs to be provided")):
            if value is None:
                raise ValueError("%s for BucketingModule.load_dict" % what)
        return BucketingModule._assemble(sym_gen, default_bucket_key, sym_dict,
                                         lambda key: sym_gen(default_bucket_key),
                                         lambda: (arg_params, aux_params), kwargs)

    @staticmethod
    def _assemble(sym_gen, default_bucket_key, symbols, names_of, params, kwargs):
        """A BucketingModule whose buckets are unbound Modules over ``symbols`` (a dict
        key -> Symbol), named by ``names_of(key)``; when the default key is among them, its
        Module becomes current and holds ``params()`` as initialised parameters."""
        loaded = BucketingModule(sym_gen, default_bucket_key, **kwargs)
        for key, symbol in symbols.items():
            _, data_names, label_names = names_of(key)
            loaded._buckets[key] = Module(symbol, data_names, label_names, **kwargs)
            if key == default_bucket_key:
                module = loaded._curr_module = loaded._buckets[key]
                module._arg_params, module._aux_params = params()
                module.params_initialized = loaded.params_initialized = True
        return loaded
