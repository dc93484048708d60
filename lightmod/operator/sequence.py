"""Sequence operators over a time axis with per-sequence lengths: SequenceMask,
SequenceReverse and SequenceLast.

Data is (steps, batch, ...) with ``axis=0`` (the default) or (batch, steps, ...) with
``axis=1``. With ``use_sequence_length`` a second input ``sequence_length`` (batch,) gives every
sequence's length (integers, stored in any dtype); without it every sequence is full length.
The lengths get no gradient (a zero one where one is asked for).
"""
from .common import prod, zero_grads
from .registry import Bool, Float, Int, Operator, merge_shape, register

__all__ = ["SequenceMask", "SequenceReverse", "SequenceLast"]


class _SequenceOp(Operator):
    """What the three operators share: inputs, the time axis, lengths and the 3-D view."""
    inputs = ("data",)
    optional_inputs = ("sequence_length",)     # an input only with use_sequence_length
    axes = (0, 1)

    def check_params(self, p):
        if p.axis not in self.axes:
            raise self.error("axis must be %s, got %d", " or ".join(map(str, self.axes)), p.axis)

    def list_inputs(self, p):
        return ["data", "sequence_length"] if p.use_sequence_length else ["data"]

    def _check_data(self, p, data):
        if len(data) < 2:
            raise self.error("data has shape %s: expected at least 2 dims (steps and batch)",
                             data)

    def _batch(self, p, data):
        return data[1 - p.axis]

    def _infer_inputs(self, p, in_shapes):
        in_shapes = list(in_shapes)
        data = in_shapes[0]
        if data is None:
            return in_shapes, None
        data = tuple(data)
        self._check_data(p, data)
        in_shapes[0] = data
        if p.use_sequence_length:
            try:
                in_shapes[1] = merge_shape(in_shapes[1], (self._batch(p, data),))
            except ValueError:
                raise self.error("sequence_length has shape %s, expected (%d,) (one length per "
                                 "sequence of data %s)", tuple(in_shapes[1]),
                                 self._batch(p, data), data) from None
        return in_shapes, data

    def infer_type(self, p, in_types):
        dtype = in_types[0]
        types = list(in_types)
        if p.use_sequence_length and types[1] is None:
            types[1] = dtype
        return types, [dtype]

    @staticmethod
    def _view3(shape):
        return (int(shape[0]), int(shape[1]), prod(shape[2:]))

    def _lengths(self, p, inputs):
        # without lengths the kernels never read this argument
        return inputs[1] if p.use_sequence_length else inputs[0]

    def infer_shape(self, p, in_shapes):
        in_shapes, data = self._infer_inputs(p, in_shapes)
        return in_shapes, [None if data is None else self.out_shape(p, data)]

    def out_shape(self, p, data):
        return data

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[0] != "null":
            self.data_gradient(p, k, out_grads[0], self._lengths(p, inputs), in_grads[0],
                               self._view3(inputs[0].shape), req[0] == "add")
        zero_grads(k, in_grads[1:], req[1:])       # the lengths get none

    def data_gradient(self, p, k, dy, lengths, dx, view, accumulate):
        """Write (or add) the gradient of data, seen as ``view`` (steps, batch, rest)."""
        raise NotImplementedError


class _StepMap(_SequenceOp):
    """SequenceMask and SequenceReverse: the output has data's shape, and the gradient is the
    same map (``apply``) of the head gradient, masked steps getting zero."""

    def apply(self, p, k, src, lengths, dst, masked_value, accumulate):
        raise NotImplementedError

    def forward(self, p, k, inputs, outputs, is_train, state):
        view = self._view3(inputs[0].shape)
        masked_value = p.get("value", 0.0)     # SequenceMask's parameter (Reverse masks nothing)
        self.apply(p, k, inputs[0].reshape(view), self._lengths(p, inputs),
                   outputs[0].reshape(view), masked_value, False)

    def data_gradient(self, p, k, dy, lengths, dx, view, accumulate):
        self.apply(p, k, dy.reshape(view), lengths, dx.reshape(view), 0.0, accumulate)


def _lengths_first(**params):
    """Every sequence operator's parameters start with use_sequence_length."""
    return {"use_sequence_length": Bool(False, "take the lengths from the sequence_length input"),
            **params}


_AXIS = Int(0, "the time axis: 0 (steps, batch, ...) or 1 (batch, steps, ...)")


@register
class SequenceMask(_StepMap):
    """Set every step past its sequence's length to ``value``."""
    name = "SequenceMask"
    params = _lengths_first(value=Float(0.0, "the value masked steps get"), axis=_AXIS)

    def apply(self, p, k, src, lengths, dst, masked_value, accumulate):
        k.sequence_mask(src, lengths, dst, masked_value, p.use_sequence_length, p.axis == 1,
                        accumulate=accumulate)


@register
class SequenceReverse(_StepMap):
    """Reverse the first ``length`` steps of every sequence; later steps stay in place."""
    name = "SequenceReverse"
    params = _lengths_first(axis=Int(0, "the time axis (only 0 is supported, as in MXNet)"))
    axes = (0,)

    def apply(self, p, k, src, lengths, dst, masked_value, accumulate):
        # nothing is masked; reversing is its own inverse, so the gradient is reversed too
        k.sequence_reverse(src, lengths, dst, p.use_sequence_length, False,
                           accumulate=accumulate)


@register
class SequenceLast(_SequenceOp):
    """The last valid step of every sequence: data without its time axis."""
    name = "SequenceLast"
    params = _lengths_first(axis=_AXIS)

    def out_shape(self, p, data):
        return data[:p.axis] + data[p.axis + 1:]

    def forward(self, p, k, inputs, outputs, is_train, state):
        view = self._view3(inputs[0].shape)
        k.sequence_last(inputs[0].reshape(view), self._lengths(p, inputs),
                        outputs[0].reshape(outputs[0].size), p.use_sequence_length, p.axis == 1)

    def data_gradient(self, p, k, dy, lengths, dx, view, accumulate):
        k.sequence_last_backward(dy.reshape(dy.size), lengths, dx.reshape(view),
                                 p.use_sequence_length, p.axis == 1, accumulate=accumulate)
