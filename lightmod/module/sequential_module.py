"""SequentialModule: a chain of modules, each one's outputs feeding the next one's data."""
import copy
import logging

from ..base import NotBoundError
from ..initializer import Uniform
from .base_module import BaseModule, _check_lifecycle

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

        self._label_shapes = None
        self._data_shapes = None
        self._meta_keys = {getattr(SequentialModule, x)
                           for x in dir(SequentialModule) if x.startswith('META_')}

    def add(self, module, **kwargs):
        """Append ``module``; returns self so calls can be chained."""
        for key in kwargs:
            if key not in self._meta_keys:
                raise ValueError('Unknown meta "%s", a typo? (known: %s)'
                                 % (key, sorted(self._meta_keys)))
        self._modules.append(module)
        self._metas.append(kwargs)

        # a new module invalidates whatever was bound or initialised
        self.binded = False
        self.params_initialized = False
        self.optimizer_initialized = False
        return self

    @property
    def data_names(self):
        if self._modules:
            return self._modules[0].data_names
        return []

    @property
    def output_names(self):
        if self._modules:
            return self._modules[-1].output_names
        return []

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
        arg_params = {}
        aux_params = {}
        for module in self._modules:
            arg, aux = module.get_params()
            arg_params.update(arg)
            aux_params.update(aux)
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

        def _check_name(known_names, new_names, layer):
            for name in new_names:
                if name in known_names:
                    first = known_names[name]
                    raise ValueError('Duplicated parameter names: name "%s" in layer %d (%s) is '
                                     'already used in layer %d (%s).'
                                     % (name, layer, type(self._modules[layer]).__name__,
                                        first, type(self._modules[first]).__name__))
                known_names[name] = layer

        arg_names = {}
        aux_names = {}
        for i_layer, module in enumerate(self._modules):
            arg, aux = module.get_params()
            _check_name(arg_names, arg.keys(), i_layer)
            _check_name(aux_names, aux.keys(), i_layer)

        self.params_initialized = True

    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req='write'):
        """Bind every module; each later module gets the previous one's output shapes and
        computes input gradients when training (they flow back through the chain)."""
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
        self._label_shapes = label_shapes

        my_data_shapes = data_shapes
        anybody_ever_needs_label = False
        for i_layer, module in enumerate(self._modules):
            meta = self._metas[i_layer]
            if meta.get(SequentialModule.META_TAKE_LABELS, False):
                my_label_shapes = label_shapes
                anybody_ever_needs_label = True
            else:
                my_label_shapes = None

            my_inputs_need_grad = bool(inputs_need_grad or (for_training and i_layer > 0))

            if meta.get(SequentialModule.META_AUTO_WIRING, False):
                data_names = module.data_names
                if len(data_names) != len(my_data_shapes):
                    raise ValueError("auto_wiring: layer %d takes %d inputs but the previous "
                                     "layer gives %d" % (i_layer, len(data_names),
                                                         len(my_data_shapes)))
                my_data_shapes = [(new_name, shape) for (new_name, (_, shape))
                                  in zip(data_names, my_data_shapes)]

            module.bind(data_shapes=my_data_shapes, label_shapes=my_label_shapes,
                        for_training=for_training, inputs_need_grad=my_inputs_need_grad,
                        force_rebind=force_rebind, shared_module=None, grad_req=grad_req)

            # the next module's data are this module's outputs
            my_data_shapes = module.output_shapes

        if not anybody_ever_needs_label:
            # nobody needs labels: drop them so update_metric is a no-op
            self._label_shapes = None
        self.binded = True

    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """Install the optimizer on every module."""
        _check_lifecycle(self, "init_optimizer()", params=True)
        if self.optimizer_initialized and not force_init:
            self.logger.warning('optimizer already initialized, ignoring.')
            return

        for module in self._modules:
            module.init_optimizer(kvstore=kvstore, optimizer=optimizer,
                                  optimizer_params=optimizer_params, force_init=force_init)

        self.optimizer_initialized = True

    def forward(self, data_batch, is_train=None):
        """Run the modules in order, feeding each one's outputs to the next."""
        _check_lifecycle(self, "forward()", params=True)

        # copy the batch so that its data can be replaced between layers
        data_batch = copy.copy(data_batch)

        for i_layer, module in enumerate(self._modules):
            module.forward(data_batch, is_train=is_train)

            if i_layer + 1 == len(self._modules):
                break

            data_batch.data = module.get_outputs()
            if hasattr(data_batch, 'provide_data'):
                data_names = [x[0] for x in module.output_shapes]
                if len(data_names) != len(data_batch.data):
                    raise ValueError("layer %d: %d output names for %d outputs"
                                     % (i_layer, len(data_names), len(data_batch.data)))
                data_batch.provide_data = [(name, x.shape) for name, x in
                                           zip(data_names, data_batch.data)]

    def backward(self, out_grads=None):
        """Run the modules backwards, each one's input gradients being the previous one's head
        gradients."""
        _check_lifecycle(self, "backward()", params=True)

        for i_layer, module in reversed(list(enumerate(self._modules))):
            module.backward(out_grads=out_grads)
            if i_layer == 0:
                break
            out_grads = module.get_input_grads()

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
        for meta, module in zip(self._metas, self._modules):
            if meta.get(SequentialModule.META_TAKE_LABELS, False):
                module.update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon):
        _check_lifecycle(self, "install_monitor()")
        for module in self._modules:
            module.install_monitor(mon)
