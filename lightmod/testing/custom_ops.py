"""A custom operator (``mx.operator.CustomOp``) the registry property tests apply ``Custom`` with.

``op_type="lightmod_testing_softsign"``: y = x / (1 + |x|), dy/dx = 1 / (1 + |x|)^2, written
on the arrays' memory (``numpy_view``) and stored with ``self.assign`` so every req is honoured.
"""
import numpy as np

from .. import operator as _operator

__all__ = ["SOFTSIGN"]

SOFTSIGN = "lightmod_testing_softsign"


class _Softsign(_operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        x = in_data[0].numpy_view()
        self.assign(out_data[0], req[0], x / (1.0 + np.abs(x)))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        x = in_data[0].numpy_view()
        self.assign(in_grad[0], req[0], out_grad[0].numpy_view() / (1.0 + np.abs(x)) ** 2)


@_operator.register(SOFTSIGN)
class _SoftsignProp(_operator.CustomOpProp):
    def create_operator(self, ctx, in_shapes, in_dtypes):
        return _Softsign()
