"""Modules written in Python instead of a Symbol: PythonModule and PythonLossModule.

They have no parameters; they are meant to sit in a SequentialModule next to symbolic modules
(a custom loss at the end of a chain, for example).
"""
import logging

from .. import ndarray as nd
from ..base import MXNetError
from ..initializer import Uniform
from .base_module import BaseModule, _attribute_view, _check_lifecycle

__all__ = ["PythonModule", "PythonLossModule"]


def _listed(names):
    """Tuples of names become lists; anything else (a list, None) is kept as given."""
    return list(names) if isinstance(names, tuple) else names


class PythonModule(BaseModule):
    """A parameter-free module computed in Python.

    Subclasses implement ``_compute_output_shapes`` and forward/backward/get_outputs/
    get_input_grads. ``bind`` only records the input shapes and asks the subclass for the
    output shapes; there are no executors, parameters or optimizer.
    """

    def __init__(self, data_names, label_names, output_names, logger=logging):
        super().__init__(logger=logger)
        self._data_names = _listed(data_names)
        self._label_names = _listed(label_names)
        self._output_names = output_names
        # set by bind
        self._data_shapes = self._label_shapes = self._output_shapes = None

    data_names = _attribute_view("_data_names", "Names of the data inputs.")
    output_names = _attribute_view("_output_names", "Names of the outputs.")
    data_shapes = _attribute_view("_data_shapes", "The bound data shapes (None before bind).")
    label_shapes = _attribute_view("_label_shapes", "The bound label shapes (None before bind or "
                                            "without labels).")
    output_shapes = _attribute_view("_output_shapes", "``[(name, shape)]`` of the outputs, computed "
                                              "at bind.")

    def get_params(self):
        """No parameters: two empty dicts."""
        return {}, {}

    def init_params(self, initializer=Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        """Nothing to initialise; the module counts as initialised."""
        self.params_initialized = True

    def update(self):
        """No parameters: nothing to update."""

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Update ``eval_metric`` with the outputs (only when bound with labels)."""
        if self._label_shapes is None:
            # nothing to compare the outputs with
            return
        if pre_sliced:
            raise RuntimeError("PythonModule does not support presliced labels")
        eval_metric.update(labels, self.get_outputs())

    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req='write'):
        """Record the shapes and compute the output shapes."""
        if self.binded and not force_rebind:
            self.logger.warning('Already bound, ignoring bind()')
            return
        if grad_req != 'write':
            raise ValueError("Python module only support write gradient, got grad_req=%r"
                             % (grad_req,))
        data_names = [x[0] for x in data_shapes]
        if data_names != list(self._data_names):
            raise ValueError("data_shapes names %s do not match data_names %s"
                             % (data_names, self._data_names))
        if label_shapes is not None:
            label_names = [x[0] for x in label_shapes]
            if self._label_names is None or label_names != list(self._label_names):
                raise ValueError("label_shapes names %s do not match label_names %s"
                                 % (label_names, self._label_names))

        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._data_shapes = data_shapes
        self._label_shapes = label_shapes
        self._output_shapes = self._compute_output_shapes()
        self.binded = True

    def _compute_output_shapes(self):
        """``[(name, shape)]`` of the outputs, from ``self._data_shapes`` (subclass hook)."""
        raise NotImplementedError("%s must implement _compute_output_shapes()"
                                  % type(self).__name__)

    def init_optimizer(self, kvstore='local', optimizer='sgd',
                       optimizer_params=(('learning_rate', 0.01),), force_init=False):
        """No parameters: nothing to optimise; the module counts as ready."""
        self.optimizer_initialized = True

    def install_monitor(self, mon):
        """No executors: a monitor has nothing to watch here."""


class PythonLossModule(PythonModule):
    """A loss computed in Python: outputs its input scores; the gradient comes from
    ``grad_func(scores, labels)`` (or a subclass's ``_backward_impl``)."""

    def __init__(self, name='pyloss', data_names=('data',), label_names=('softmax_label',),
                 logger=logging, grad_func=None):
        super().__init__(data_names, label_names, [name + '_output'], logger=logger)
        self._name = name
        if len(data_names) != 1 or len(label_names) != 1:
            raise ValueError("PythonLossModule takes exactly one data and one label input, got "
                             "%s and %s" % (list(data_names), list(label_names)))

        self._scores = None
        self._labels = None
        self._scores_grad = None

        if grad_func is not None and not callable(grad_func):
            raise TypeError("grad_func must be callable")
        self._grad_func = grad_func

    def _compute_output_shapes(self):
        return [(self._name + '_output', self._data_shapes[0][1])]

    def forward(self, data_batch, is_train=None):
        """Keep the scores (and, when training, the labels) for backward."""
        self._scores = data_batch.data[0]
        training = self.for_training if is_train is None else is_train
        if training:
            self._labels = data_batch.label[0]

    def get_outputs(self, merge_multi_context=True):
        """The scores, unchanged."""
        if merge_multi_context is not True:
            raise ValueError("PythonLossModule only supports merge_multi_context=True")
        return [self._scores]

    def backward(self, out_grads=None):
        """Compute the gradient of the loss with respect to the scores."""
        if out_grads is not None:
            raise ValueError('For a loss module, out_grads should be None')
        _check_lifecycle(self, "backward()")
        if not self.for_training:
            raise MXNetError("re-bind with for_training=True to run backward")
        self._backward_impl()

    def _backward_impl(self):
        """``grad_func(scores, labels)`` becomes the input gradient; subclasses without a
        grad_func override this."""
        if self._grad_func is None:
            raise MXNetError("PythonLossModule %r has no grad_func; pass grad_func= or "
                             "override _backward_impl in a subclass" % self._name)
        grad = self._grad_func(self._scores, self._labels)
        if not isinstance(grad, nd.NDArray):
            grad = nd.array(grad)
        self._scores_grad = grad

    def get_input_grads(self, merge_multi_context=True):
        """The gradient computed by the last backward."""
        if merge_multi_context is not True:
            raise ValueError("PythonLossModule only supports merge_multi_context=True")
        return [self._scores_grad]
