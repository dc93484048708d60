"""Sequence operators over a time axis with per-sequence lengths: SequenceMask,
SequenceReverse and SequenceLast.

Data is (steps, batch, ...) with ``axis=0`` (the default) or (batch, steps, ...) with
``axis=1``. With ``use_sequence_length`` a second input ``sequence_length`` (batch,) gives every
sequence's length (integers, stored in any dtype); without it every sequence is full length.
The lengths get no gradient (a zero one where one is asked for).
"""
from .common import prod
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

    @staticmethod
    def _zero_length_grad(k, p, in_grads, req):
        if p.use_sequence_length and req[1] == "write":
            k.fill(in_grads[1], 0.0)


@register
class SequenceMask(_SequenceOp):
    """Set every step past its sequence's length to ``value``."""
    name = "SequenceMask"
    params = {
        "use_sequence_length": Bool(False, "take the lengths from the sequence_length input"),
        "value": Float(0.0, "the value masked steps get"),
        "axis": Int(0, "the time axis: 0 (steps, batch, ...) or 1 (batch, steps, ...)"),
    }

    def infer_shape(self, p, in_shapes):
        in_shapes, data = self._infer_inputs(p, in_shapes)
        return in_shapes, [data]

    def forward(self, p, k, inputs, outputs, is_train, state):
        view = self._view3(inputs[0].shape)
        k.sequence_mask(inputs[0].reshape(view), self._lengths(p, inputs),
                        outputs[0].reshape(view), p.value, p.use_sequence_length, p.axis == 1)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[0] != "null":
            view = self._view3(inputs[0].shape)
            k.sequence_mask(out_grads[0].reshape(view), self._lengths(p, inputs),
                            in_grads[0].reshape(view), 0.0, p.use_sequence_length, p.axis == 1,
                            accumulate=(req[0] == "add"))
        self._zero_length_grad(k, p, in_grads, req)


@register
class SequenceReverse(_SequenceOp):
    """Reverse the first ``length`` steps of every sequence; later steps stay in place."""
    name = "SequenceReverse"
    params = {
        "use_sequence_length": Bool(False, "take the lengths from the sequence_length input"),
        "axis": Int(0, "the time axis (only 0 is supported, as in MXNet)"),
    }
    axes = (0,)

    def infer_shape(self, p, in_shapes):
        in_shapes, data = self._infer_inputs(p, in_shapes)
        return in_shapes, [data]

    def forward(self, p, k, inputs, outputs, is_train, state):
        view = self._view3(inputs[0].shape)
        k.sequence_reverse(inputs[0].reshape(view), self._lengths(p, inputs),
                           outputs[0].reshape(view), p.use_sequence_length, False)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[0] != "null":
            # reversing is its own inverse: the gradient is reversed the same way
            view = self._view3(inputs[0].shape)
            k.sequence_reverse(out_grads[0].reshape(view), self._lengths(p, inputs),
                               in_grads[0].reshape(view), p.use_sequence_length, False,
                               accumulate=(req[0] == "add"))
        self._zero_length_grad(k, p, in_grads, req)


@register
class SequenceLast(_SequenceOp):
    """The last valid step of every sequence: data without its time axis."""
    name = "SequenceLast"
    params = {
        "use_sequence_length": Bool(False, "take the lengths from the sequence_length input"),
        "axis": Int(0, "the time axis: 0 (steps, batch, ...) or 1 (batch, steps, ...)"),
    }

    def infer_shape(self, p, in_shapes):
        in_shapes, data = self._infer_inputs(p, in_shapes)
        if data is None:
            return in_shapes, [None]
        return in_shapes, [data[:p.axis] + data[p.axis + 1:]]

    def forward(self, p, k, inputs, outputs, is_train, state):
        view = self._view3(inputs[0].shape)
        k.sequence_last(inputs[0].reshape(view), self._lengths(p, inputs),
                        outputs[0].reshape(outputs[0].size), p.use_sequence_length, p.axis == 1)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[0] != "null":
            view = self._view3(inputs[0].shape)
            k.sequence_last_backward(out_grads[0].reshape(out_grads[0].size),
                                     self._lengths(p, inputs), in_grads[0].reshape(view),
                                     p.use_sequence_length, p.axis == 1,
                                     accumulate=(req[0] == "add"))
        self._zero_length_grad(k, p, in_grads, req)
