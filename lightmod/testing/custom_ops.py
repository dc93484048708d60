"""A custom operator (``mx.operator.CustomOp``) the registry tests apply ``Custom`` with.

``op_type="lightmod_testing_softsign"``: y = x / (1 + |x|), dy/dx = 1 / (1 + |x|)^2. On the CPU
it computes on the arrays' memory (``numpy_view``), on a GPU with NDArray arithmetic; results
are stored with ``self.assign`` so every req is honoured.
"""
import numpy as np

from .. import ndarray as _nd
from .. import operator as _operator

__all__ = ["SOFTSIGN"]

SOFTSIGN = "lightmod_testing_softsign"


def _on_host(array):
    return array.context.device_type != "gpu"


class _Softsign(_operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        if _on_host(in_data[0]):
            x = in_data[0].numpy_view()
            value = x / (1.0 + np.abs(x))
        else:
            value = in_data[0] / (1.0 + _nd.abs(in_data[0]))
        self.assign(out_data[0], req[0], value)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        if _on_host(in_data[0]):
            x = in_data[0].numpy_view()
            grad = out_grad[0].numpy_view() / (1.0 + np.abs(x)) ** 2
        else:
            scale = 1.0 + _nd.abs(in_data[0])
            grad = out_grad[0] / (scale * scale)
        self.assign(in_grad[0], req[0], grad)


@_operator.register(SOFTSIGN)
class _SoftsignProp(_operator.CustomOpProp):
    def create_operator(self, ctx, in_shapes, in_dtypes):
        return _Softsign()
