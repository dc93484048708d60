"""A plain reference for what a Module computes: one float64 executor and numpy updates.

:class:`ReferenceNet` runs a symbol's forward and backward on a whole batch with a single
executor on ``cpu(0)`` in float64; :func:`sgd_step` is MXNet's SGD update written out in
numpy. Everything the Module adds on top -- splitting the batch over devices, summing their
gradients through the kvstore, ``rescale_grad``, re-shaping executors, sharing parameters
between buckets, checkpoints -- is what properties compare against this reference.
"""
import numpy as np

from .. import ndarray as _nd
from ..context import cpu

__all__ = ["ReferenceNet", "sgd_step", "weight_decay_applies"]


class ReferenceNet:
    """Forward/backward of ``symbol`` on one float64 executor per input shape."""

    def __init__(self, symbol, data_names, label_names):
        self.symbol = symbol
        self.data_names = list(data_names)
        self.label_names = list(label_names)
        self.input_names = self.data_names + self.label_names
        self.param_names = [n for n in symbol.list_arguments() if n not in self.input_names]
        self.aux_names = symbol.list_auxiliary_states()
        self._executors = {}

    def _executor(self, inputs):
        key = tuple(tuple(np.shape(inputs[n])) for n in self.input_names)
        exe = self._executors.get(key)
        if exe is None:
            shapes = {n: np.shape(inputs[n]) for n in self.input_names}
            exe = self.symbol.simple_bind(
                cpu(), grad_req={n: "write" for n in self.param_names},
                type_dict={n: np.float64 for n in self.symbol.list_arguments()}, **shapes)
            self._executors[key] = exe
        return exe

    def _load(self, params, inputs, aux=None):
        exe = self._executor(inputs)
        for name, value in list(params.items()) + list(inputs.items()):
            exe.arg_dict[name][:] = np.asarray(value, dtype=np.float64)
        for name, value in (aux or {}).items():
            exe.aux_dict[name][:] = np.asarray(value, dtype=np.float64)
        return exe

    def forward(self, params, inputs, is_train=False, aux=None):
        """The outputs (numpy) for parameter and input values ({name: array})."""
        exe = self._load(params, inputs, aux)
        exe.forward(is_train=is_train)
        return [o.asnumpy() for o in exe.outputs]

    def gradients(self, params, inputs, aux=None, out_grads=None):
        """{param: gradient of the batch} (loss heads need no head gradient)."""
        exe = self._load(params, inputs, aux)
        exe.forward(is_train=True)
        exe.backward(None if out_grads is None else
                     [_nd.array(g, dtype=np.float64) for g in out_grads])
        return {n: exe.grad_dict[n].asnumpy() for n in self.param_names}


def weight_decay_applies(name):
    """Whether a Module that creates its optimizer from a string decays this parameter
    (MXNet: only names ending in ``_weight`` or ``_gamma``)."""
    return name.endswith("_weight") or name.endswith("_gamma")


def sgd_step(weight, grad, mom, lr, momentum=0.0, wd=0.0, rescale_grad=1.0,
             clip_gradient=None):
    """One MXNet SGD update in float64; returns ``(new_weight, new_mom)``.

    ``g = clip(rescale_grad * grad) + wd * weight``; with momentum,
    ``mom = momentum * mom - lr * g`` and ``weight += mom``; without, ``weight -= lr * g``.
    """
    g = rescale_grad * np.asarray(grad, dtype=np.float64)
    if clip_gradient is not None:
        g = np.clip(g, -clip_gradient, clip_gradient)
    g = g + wd * weight
    if momentum:
        mom = momentum * mom - lr * g
        return weight + mom, mom
    return weight - lr * g, mom
