"""SequentialModule: a chain of modules, each one's outputs feeding the next one's data."""
import copy
import logging

from ..base import NotBoundError
from ..initializer import Uniform
from .base_module import BaseModule, _check_lifecycle, _keeps_optimizer

__all__ = ["SequentialModule"]


class SequentialModule(BaseModule):
    """Modules run one after another.

    ``add(module, take_labels=True)`` marks a module that consumes the labels (usually the
    last, a loss); ``auto_wiring=True`` renames the previous module's outputs to this module's
    data names.
    """
    META_TAKE_LABELS = 'take_labels'
    META_AUTO_WIRING = 'auto_wiring'

    def __init__(self, logger=logging):
        super().__init__(logger=logger)
        self._modules = []
        self._metas = []
        self._data_shapes = self._label_shapes = None
        self._meta_keys = {self.META_TAKE_LABELS, self.META_AUTO_WIRING}

    def add(self, module, **kwargs):
        """Append ``module``; returns self so calls can be chained."""
        unknown = [key for key in kwargs if key not in self._meta_keys]
        if unknown:
            raise ValueError('Unknown meta "%s", a typo? (known: %s)'
                             % (unknown[0], sorted(self._meta_keys)))
        self._modules.append(module)
        self._metas.append(kwargs)
        # the chain changed: it must be bound, initialised and given an optimizer again
        self.binded = self.params_initialized = self.optimizer_initialized = False
        return self

    def _takes_labels(self, position):
        return bool(self._metas[position].get(self.META_TAKE_LABELS, False))

    @property
    def data_names(self):
        return self._modules[0].data_names if self._modules else []

    @property
    def output_names(self):
        return self._modules[-1].output_names if self._modules else []

    @property
    def data_shapes(self):
        _check_lifecycle(self, "data_shapes")
        return self._modules[0].data_shapes

    @property
    def label_shapes(self):
        _check_lifecycle(self, "label_shapes")
        return self._label_shapes

    @property
    def output_shapes(self):
        _check_lifecycle(self, "output_shapes")
        return self._modules[-1].output_shapes

    def get_params(self):
        """The union of every module's parameters."""
        _check_lifecycle(self, "get_params()", params=True)
        arg_params, aux_params = {}, {}
        for module in self._modules:
            args, auxs = module.get_params()
            arg_params.update(args)
            aux_params.update(auxs)
        return arg_params, aux_params

    def init_params(self, initializer=Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        """Initialise every module; parameter names must be unique across modules."""
        if self.params_initialized and not force_init:
            return
        _check_lifecycle(self, "init_params()")
        for module in self._modules:
            module.init_params(initializer=initializer, arg_params=arg_params,
                               aux_params=aux_params, allow_missing=allow_missing,
                               force_init=force_init, allow_extra=allow_extra)

        # every parameter (and every aux state) name must belong to one module only
        owners = ({}, {})
        for position, module in enumerate(self._modules):
            for names, owner_of in zip(module.get_params(), owners):
                for name in names:
                    first = owner_of.setdefault(name, position)
                    if first != position:
                        raise ValueError(
                            'Duplicated parameter names: name "%s" in layer %d (%s) is already '
                            'used in layer %d (%s).' % (name, position, type(module).__name__,
                                                        first, type(self._modules[first]).__name__))
        self.params_initialized = True

    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req='write'):
        """Bind every module in turn.

        The first module gets ``data_shapes``; each later one gets the previous module's
        output shapes (renamed to its own data names with ``auto_wiring``) and computes input
        gradients when training, since they are the previous module's head gradients. Only
        modules added with ``take_labels`` get ``label_shapes``; when there is none, the
        chain keeps no label shapes.
        """
        if self.binded and not force_rebind:
            self.logger.warning('Already bound, ignoring bind()')
            return
        if inputs_need_grad and not for_training:
            raise ValueError("bind(): inputs_need_grad=True requires for_training=True")
        if shared_module is not None:
            raise ValueError('Shared module is not supported by SequentialModule')
        if not self._modules:
            raise ValueError('Attempting to bind an empty SequentialModule')

        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        incoming = data_shapes
        for position, module in enumerate(self._modules):
            if self._metas[position].get(self.META_AUTO_WIRING, False):
                incoming = self._rewire(position, module, incoming)
            module.bind(data_shapes=incoming,
                        label_shapes=label_shapes if self._takes_labels(position) else None,
                        for_training=for_training,
                        inputs_need_grad=bool(inputs_need_grad or (for_training and position)),
                        force_rebind=force_rebind, shared_module=None, grad_req=grad_req)
            incoming = module.output_shapes
        any_takes_labels = any(self._takes_labels(k) for k in range(len(self._modules)))
        self._label_shapes = label_shapes if any_takes_labels else None
        self.binded = True

    @staticmethod
    def _rewire(position, module, shapes):
        """``shapes`` under ``module``'s data names, in order (auto_wiring)."""
        names = module.data_names
        if len(names) != len(shapes):
            raise ValueError("auto_wiring: layer %d takes %d inputs but the previous layer "
                             "gives %d" % (position, len(names), len(shapes)))
        return [(name, shape) for name, (_, shape) in zip(names, shapes)]

    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """Give every module the same kind of optimizer (each its own instance)."""
        if _keeps_optimizer(self, force_init):
            return
        settings = dict(kvstore=kvstore, optimizer=optimizer,
                        optimizer_params=optimizer_params, force_init=force_init)
        for module in self._modules:
            module.init_optimizer(**settings)
        self.optimizer_initialized = True

    def forward(self, data_batch, is_train=None):
        """Run the modules in order, feeding each one's outputs to the next."""
        _check_lifecycle(self, "forward()", params=True)
        # a shallow copy whose data (and provide_data) are swapped between modules
        batch = copy.copy(data_batch)
        last = len(self._modules) - 1
        for position, module in enumerate(self._modules):
            module.forward(batch, is_train=is_train)
            if position < last:
                self._pass_outputs_on(position, module, batch)

    @staticmethod
    def _pass_outputs_on(position, module, batch):
        """Make ``module``'s outputs the data of ``batch``."""
        batch.data = module.get_outputs()
        if not hasattr(batch, 'provide_data'):
            return
        names = [name for name, _ in module.output_shapes]
        if len(names) != len(batch.data):
            raise ValueError("layer %d: %d output names for %d outputs"
                             % (position, len(names), len(batch.data)))
        batch.provide_data = [(name, array.shape) for name, array in zip(names, batch.data)]

    def backward(self, out_grads=None):
        """Run the modules backwards; each module's input gradients are the head gradients of
        the module before it."""
        _check_lifecycle(self, "backward()", params=True)
        heads = out_grads
        for position in range(len(self._modules) - 1, -1, -1):
            module = self._modules[position]
            module.backward(out_grads=heads)
            if position:
                heads = module.get_input_grads()

    def update(self):
        _check_lifecycle(self, "update()", params=True, optimizer=True)
        for module in self._modules:
            module.update()

    def get_outputs(self, merge_multi_context=True):
        _check_lifecycle(self, "get_outputs()", params=True)
        return self._modules[-1].get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context=True):
        _check_lifecycle(self, "get_input_grads()", params=True)
        if not self.inputs_need_grad:
            raise NotBoundError("bind with inputs_need_grad=True before get_input_grads()")
        return self._modules[0].get_input_grads(merge_multi_context=merge_multi_context)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Update the metric with the outputs of every module that takes labels."""
        _check_lifecycle(self, "update_metric()", params=True)
        for position, module in enumerate(self._modules):
            if self._takes_labels(position):
                module.update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon):
        _check_lifecycle(self, "install_monitor()")
        for module in self._modules:
            module.install_monitor(mon)
