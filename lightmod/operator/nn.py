"""Neural-network layers: FullyConnected, Activation, LeakyReLU, Dropout, Embedding, softmax,
softmin, log_softmax, SoftmaxActivation (MXNet 1.9.1 names, parameters, defaults and shape rules).

Forward/backward call the kernel set ``k`` (``kernels/cpu/nn.py`` or ``kernels/cuda/nn.py``);
nothing here imports numba. Arrays are reshaped to the 2-D / 3-D views the kernels expect
(a free view for numpy arrays and numba device arrays alike).
"""
import math

import numpy as np

from .common import assign_shape, known, no_head_gradient, prod, zero_grads
from .registry import Bool, Enum, Float, Int, NoneAllowed, Operator, OptFloat, Shape, register

__all__ = ["OptBool", "ElementwiseOp"]


class OptBool(NoneAllowed, Bool):
    """A boolean that MXNet declares as 'boolean or None' (None reads as False)."""
    type_name = "boolean or None"
    none_value = False


class ElementwiseOp(Operator):
    """One input, one output of the same shape, inferred in both directions."""

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        in_shapes = list(in_shapes)
        if out_shapes and out_shapes[0] is not None:
            assign_shape(self, in_shapes, 0, "data", out_shapes[0], " (from the output)")
        return in_shapes


# ---------------------------------------------------------------------------------------------
# FullyConnected
# ---------------------------------------------------------------------------------------------
@register
class FullyConnected(Operator):
    name = "FullyConnected"
    inputs = ("data", "weight", "bias")
    params = {"num_hidden": Int(doc="Number of hidden nodes of the output."),
              "no_bias": Bool(False, doc="Whether to disable bias parameter."),
              "flatten": Bool(True, doc="Whether to collapse all but the first axis of the "
                                        "input data tensor.")}

    def list_inputs(self, p):
        return ["data", "weight"] if p.no_bias else ["data", "weight", "bias"]

    def check_params(self, p):
        if p.num_hidden < 1:
            raise self.error("num_hidden must be positive, got %d", p.num_hidden)

    @staticmethod
    def _in_features(p, dshape):
        """K: the length of one input row (0 when not known yet)."""
        if not p.flatten:
            return dshape[-1]
        rest = dshape[1:]
        return prod(rest) if all(rest) else 0     # 1-D data: empty product, K = 1

    @staticmethod
    def _out_shape(p, dshape):
        if not p.flatten:
            return tuple(dshape[:-1]) + (p.num_hidden,)
        return (dshape[0], p.num_hidden)

    def infer_shape(self, p, in_shapes):
        shapes = list(in_shapes)
        dshape = shapes[0]
        if not known(dshape):
            return shapes, [None]
        context = " for data %s" % (tuple(dshape),)
        assign_shape(self, shapes, 1, "weight", (p.num_hidden, self._in_features(p, dshape)),
                     context)
        if not p.no_bias:
            bias = shapes[2]
            # MXNet accepts a (H, 1) bias as well as (H,)
            expected = (p.num_hidden, 1) if bias is not None and len(bias) == 2 else \
                (p.num_hidden,)
            assign_shape(self, shapes, 2, "bias", expected, context)
        return shapes, [self._out_shape(p, dshape)]

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        shapes = list(in_shapes)
        out = out_shapes[0] if out_shapes else None
        # like MXNet: only the batch dim, and only while data still has unknown dims
        if known(shapes[0]) and not all(shapes[0]) and known(out) and out[0]:
            assign_shape(self, shapes, 0, "data", (out[0],) + tuple(shapes[0][1:]),
                         " (batch size from the output %s)" % (tuple(out),))
        return shapes

    def _views(self, p, x):
        """(rows, K) for the data as the kernels see it."""
        shape = tuple(x.shape)      # device arrays' shapes refuse negative indices
        if p.flatten:
            return shape[0], (prod(shape[1:]) if len(shape) > 1 else 1)
        return prod(shape[:-1]), shape[-1]

    def forward(self, p, k, inputs, outputs, is_train, state):
        x, w = inputs[0], inputs[1]
        rows, cols = self._views(p, x)
        bias = None if p.no_bias else inputs[2]
        k.fc_forward(x.reshape(rows, cols), w, bias, outputs[0].reshape(rows, p.num_hidden),
                     state)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if no_head_gradient(k, out_grads, in_grads, req):
            return
        dy = out_grads[0]
        x, w = inputs[0], inputs[1]
        rows, cols = self._views(p, x)
        req_b = "null" if p.no_bias else req[2]
        dx = in_grads[0].reshape(rows, cols) if req[0] != "null" else None
        db = None if req_b == "null" else in_grads[2]
        k.fc_backward(x.reshape(rows, cols), w, dy.reshape(rows, p.num_hidden), dx,
                      in_grads[1], db, req[0], req[1], req_b, state)


# ---------------------------------------------------------------------------------------------
# Activation
# ---------------------------------------------------------------------------------------------
@register
class Activation(ElementwiseOp):
    name = "Activation"
    unnamed_inputs = True
    params = {"act_type": Enum("relu", "sigmoid", "softrelu", "softsign", "tanh",
                               doc="Activation function to be applied.")}

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.activation_forward(inputs[0], outputs[0], p.act_type)

    def pointwise(self, p):
        return ("act", p.act_type, False)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if out_grads[0] is None:
            zero_grads(k, in_grads, req)
        elif req[0] != "null":
            k.activation_backward(inputs[0], outputs[0], out_grads[0], in_grads[0],
                                  p.act_type, req[0] == "add")


# ---------------------------------------------------------------------------------------------
# LeakyReLU
# ---------------------------------------------------------------------------------------------
@register
class LeakyReLU(Operator):
    name = "LeakyReLU"
    stateful = True         # act_type="rrelu" draws its slopes from the random stream
    inputs = ("data", "gamma")
    params = {"act_type": Enum("elu", "gelu", "leaky", "prelu", "rrelu", "selu",
                               default="leaky", doc="Activation function to be applied."),
              "slope": Float(0.25, doc="Init slope for the activation (for leaky and elu)."),
              "lower_bound": Float(0.125, doc="Lower bound of random slope (rrelu only)."),
              "upper_bound": Float(0.334, doc="Upper bound of random slope (rrelu only).")}
    input_init = {"gamma": '["Constant", {"value": 0.25}]'}

    def list_inputs(self, p):
        return ["data", "gamma"] if p.act_type == "prelu" else ["data"]

    def num_outputs(self, p):
        return 2 if p.act_type == "rrelu" else 1       # rrelu exposes its slope mask

    def list_outputs(self, p):
        return ["output", "mask"] if p.act_type == "rrelu" else ["output"]

    def infer_shape(self, p, in_shapes):
        shapes = list(in_shapes)
        dshape = shapes[0]
        if not known(dshape):
            return shapes, [None] * self.num_outputs(p)
        if p.act_type == "prelu":
            if len(dshape) < 2:
                raise self.error("prelu needs data with a channel axis (ndim >= 2), got "
                                 "shape %s", tuple(dshape))
            gamma = shapes[1]
            if gamma is None or len(gamma) == 0:
                shapes[1] = (dshape[1],)
            else:
                self._slope_axes(tuple(dshape), tuple(gamma))
        return shapes, [tuple(dshape)] * self.num_outputs(p)

    def _slope_axes(self, dshape, gshape):
        """Which of data's first two axes (batch, channel) gamma's slopes vary along.

        gamma's dims are matched right to left against data's axes 1 and 0 (a dim equal to
        the data's, or 1), so (C,) is one slope per channel, (N, C) one per sample and channel,
        (1,) one shared slope."""
        varies = [False, False]
        pos = len(gshape) - 1
        for axis in (1, 0):
            if pos >= 0 and gshape[pos] in (dshape[axis], 1):
                varies[axis] = gshape[pos] != 1 or dshape[axis] == 1
                pos -= 1
        if pos >= 0 or len(gshape) == 0:
            raise self.error("gamma has shape %s, expected (%d,) (one slope per channel of data "
                             "%s), (%d, %d) (one per sample and channel) or (1,)", gshape,
                             dshape[1], dshape, dshape[0], dshape[1])
        return varies

    def _prelu_views(self, x, gamma):
        """(x viewed as (outer, slopes, inner), gamma as a flat vector of slopes)."""
        shape = tuple(x.shape)
        by_sample, by_channel = self._slope_axes(shape, tuple(gamma.shape))
        rest = prod(shape[2:])
        if by_sample and by_channel:
            view = (1, shape[0] * shape[1], rest)
        elif by_sample:
            view = (1, shape[0], shape[1] * rest)
        elif by_channel:
            view = (shape[0], shape[1], rest)
        else:
            view = (1, 1, prod(shape))
        return view, gamma.reshape(gamma.size)

    def forward(self, p, k, inputs, outputs, is_train, state):
        x, out = inputs[0], outputs[0]
        if p.act_type == "prelu":
            view, gamma = self._prelu_views(x, inputs[1])
            k.prelu_forward(x.reshape(view), gamma, out.reshape(view))
        elif p.act_type == "rrelu":
            mask = outputs[1]
            if is_train:
                from .. import rng as _random
                u = _random.get_rng().random(tuple(x.shape), dtype=np.float32)
                k.rrelu_forward(x, u, p.lower_bound, p.upper_bound, mask, out)
            else:
                mean_slope = (p.lower_bound + p.upper_bound) / 2.0
                k.leaky_relu_forward(x, out, "leaky", mean_slope)
                k.fill(mask, mean_slope)
        else:
            k.leaky_relu_forward(x, out, p.act_type, p.slope)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if no_head_gradient(k, out_grads, in_grads, req):
            return
        dy = out_grads[0]
        x, y = inputs[0], outputs[0]
        if p.act_type == "prelu":
            view, gamma = self._prelu_views(x, inputs[1])
            k.prelu_backward(x.reshape(view), gamma, dy.reshape(view),
                             in_grads[0].reshape(view) if req[0] != "null" else None,
                             in_grads[1].reshape(gamma.size) if req[1] != "null" else None,
                             req[0], req[1])
        elif req[0] == "null":
            return
        elif p.act_type == "rrelu":
            k.rrelu_backward(y, outputs[1], dy, in_grads[0], req[0] == "add")
        else:
            k.leaky_relu_backward(x, y, dy, in_grads[0], p.act_type, p.slope, req[0] == "add")


# ---------------------------------------------------------------------------------------------
# Dropout
# ---------------------------------------------------------------------------------------------
@register
class Dropout(Operator):
    name = "Dropout"
    stateful = True         # draws its mask from the random stream
    params = {"p": Float(0.5, doc="Fraction of the input that gets dropped out during "
                                  "training time."),
              "mode": Enum("always", "training", default="training",
                           doc="Whether to only turn on dropout during training or to also "
                               "turn on for inference."),
              "axes": Shape((), doc="Axes for variational dropout kernel."),
              "cudnn_off": OptBool(False, doc="Whether to turn off cudnn in dropout operator "
                                              "(accepted; there is no cudnn here).")}

    def check_params(self, p):
        if not 0.0 <= p.p <= 1.0:
            raise self.error("p must be in [0, 1], got %s", p.p)

    def num_outputs(self, p):
        return 2                       # output and the (hidden) scaled keep-mask

    def num_visible_outputs(self, p):
        return 1

    def infer_shape(self, p, in_shapes):
        shape = in_shapes[0]
        return list(in_shapes), [shape, shape]

    def _mask_shape(self, p, shape):
        ndim = len(shape)
        axes = set()
        for ax in p.axes:
            if not -ndim <= ax < ndim:
                raise self.error("axes %s out of range for data of shape %s", p.axes,
                                 tuple(shape))
            axes.add(ax % ndim)
        return tuple(1 if d in axes else int(n) for d, n in enumerate(shape))

    def forward(self, p, k, inputs, outputs, is_train, state):
        x, out, mask = inputs[0], outputs[0], outputs[1]
        applied = p.p > 0 and (is_train or p.mode == "always")
        state["dropout_applied"] = applied
        if not applied:
            k.copy(out, x)
            return
        if p.p == 1.0:
            # MXNet scales the kept (here: none) by 1 / (1 - p) = inf, and 0 * inf is nan: the
            # output and the gradient are nan everywhere (test_operator.py::test_dropout)
            k.fill(mask, math.nan)
            k.fill(out, math.nan)
            return
        from .. import rng as _random
        shape = self._mask_shape(p, tuple(x.shape))
        u = state.get("dropout_uniforms")
        if u is None or u.shape != shape:
            u = state["dropout_uniforms"] = np.empty(shape, np.float32)
        _random.get_rng().random(out=u, dtype=np.float32)
        k.dropout_forward(x, u, p.p, mask, out)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        dy = out_grads[0]
        if dy is None:
            zero_grads(k, in_grads[:1], req[:1])
        elif req[0] == "null":
            return
        elif state.get("dropout_applied", False):
            k.dropout_backward(outputs[1], dy, in_grads[0], req[0] == "add")
        else:
            k.assign(in_grads[0], dy, req[0])


# ---------------------------------------------------------------------------------------------
# Embedding
# ---------------------------------------------------------------------------------------------
@register
class Embedding(Operator):
    name = "Embedding"
    inputs = ("data", "weight")
    params = {"input_dim": Int(doc="Vocabulary size of the input indices."),
              "output_dim": Int(doc="Dimension of the embedding vectors."),
              "dtype": Enum("bfloat16", "float16", "float32", "float64", "int32", "int64",
                            "int8", "uint8", default="float32", doc="Data type of weight."),
              "sparse_grad": Bool(False, doc="Compute row sparse gradient in the backward "
                                             "calculation: the weight's gradient array is "
                                             "row_sparse, holding the rows of the indices seen.")}

    def row_sparse_grad_inputs(self, p):
        return (1,) if p.sparse_grad else ()

    def check_params(self, p):
        if p.input_dim < 1 or p.output_dim < 1:
            raise self.error("input_dim and output_dim must be positive, got %d and %d",
                             p.input_dim, p.output_dim)

    def infer_shape(self, p, in_shapes):
        shapes = list(in_shapes)
        assign_shape(self, shapes, 1, "weight", (p.input_dim, p.output_dim),
                     " (input_dim=%d, output_dim=%d)" % (p.input_dim, p.output_dim))
        dshape = shapes[0]
        if not known(dshape):
            return shapes, [None]
        return shapes, [tuple(dshape) + (p.output_dim,)]

    def infer_type(self, p, in_types):
        types = list(in_types)
        if types[1] is None:
            types[1] = p.dtype
        return types, [types[1]]

    def forward(self, p, k, inputs, outputs, is_train, state):
        idx, weight = inputs
        k.embedding_forward(idx, weight, outputs[0].reshape(idx.size, p.output_dim))

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[0] != "null":
            raise self.error("cannot compute the gradient with respect to data (the "
                             "indices); bind data with grad_req 'null'")
        if req[1] == "null":
            return
        dy = out_grads[0]
        if dy is None:
            zero_grads(k, in_grads[1:], req[1:])
            return
        idx = inputs[0]
        k.embedding_backward(idx, dy.reshape(idx.size, p.output_dim), in_grads[1],
                             req[1] == "add")


@register
class SparseEmbedding(Embedding):
    """``contrib.SparseEmbedding``: Embedding whose weight gradient is always row_sparse (only
    the rows of the indices in the batch are nonzero, so optimizers update those rows lazily).
    ``deterministic`` is accepted: lightmod's gradient is always deterministic."""
    name = "_contrib_SparseEmbedding"
    params = {"input_dim": Int(doc="Vocabulary size of the input indices."),
              "output_dim": Int(doc="Dimension of the embedding vectors."),
              "dtype": Enum("bfloat16", "float16", "float32", "float64", "int32", "int64",
                            "int8", "uint8", default="float32", doc="Data type of weight."),
              "deterministic": Bool(False, doc="Force the backward gradient calculation to be "
                                               "executed based on a deterministic order.")}

    def row_sparse_grad_inputs(self, p):
        return (1,)


# ---------------------------------------------------------------------------------------------
# softmax, log_softmax, SoftmaxActivation
# ---------------------------------------------------------------------------------------------
def axis_view(shape, axis):
    """(outer, length, inner) of a shape around one axis."""
    return prod(shape[:axis]), int(shape[axis]), prod(shape[axis + 1:])


class _SoftmaxBase(Operator):
    use_log = False
    params = {"axis": Int(-1, doc="The axis along which to compute softmax."),
              "temperature": OptFloat(None, doc="Temperature parameter in softmax."),
              "dtype": Enum("float16", "float32", "float64", default=None, none_ok=True,
                            doc="Output data type (defaults to the input's)."),
              "use_length": OptBool(False, doc="Whether to use the length input as a mask "
                                               "over the data input.")}

    optional_inputs = ("length",)

    def list_inputs(self, p):
        return ["data", "length"] if p.use_length else ["data"]

    def _axis(self, p, shape):
        ndim = len(shape)
        if not -ndim <= p.axis < ndim:
            raise self.error("axis %d out of range for data of shape %s", p.axis, tuple(shape))
        return p.axis % ndim

    def infer_shape(self, p, in_shapes):
        shapes = list(in_shapes)
        dshape = shapes[0]
        if not known(dshape):
            return shapes, [None]
        axis = self._axis(p, dshape)
        if p.use_length:
            assign_shape(self, shapes, 1, "length", (tuple(dshape[:axis]) +
                         tuple(dshape[axis + 1:])) or (1,), " for data %s and axis %d"
                         % (tuple(dshape), p.axis))
        return shapes, [tuple(dshape)]

    def infer_type(self, p, in_types):
        types = list(in_types)
        return types, [p.dtype if p.dtype is not None else types[0]]

    def _temperature(self, p):
        return 1.0 if p.temperature is None else p.temperature

    def forward(self, p, k, inputs, outputs, is_train, state):
        x = inputs[0]
        shape = tuple(x.shape)
        view = axis_view(shape, self._axis(p, shape))
        length = inputs[1] if p.use_length else None
        k.softmax_forward(x.reshape(view), outputs[0].reshape(view), self._temperature(p),
                          self.use_log, length)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if no_head_gradient(k, out_grads, in_grads, req):
            return
        dy = out_grads[0]
        if p.use_length and req[1] == "write":
            k.fill(in_grads[1], 0.0)
        if req[0] == "null":
            return
        y = outputs[0]
        shape = tuple(y.shape)
        view = axis_view(shape, self._axis(p, shape))
        length = inputs[1] if p.use_length else None
        k.softmax_backward(y.reshape(view), dy.reshape(view), in_grads[0].reshape(view),
                           self._temperature(p), self.use_log, req[0] == "add", length)


@register
class Softmax(_SoftmaxBase):
    name = "softmax"


@register
class Softmin(_SoftmaxBase):
    """softmax(-x / temperature): the kernels take the negated temperature, and their row
    maximum is taken after scaling, so large inputs stay as stable as in softmax."""
    name = "softmin"

    def _temperature(self, p):
        return -super()._temperature(p)


@register
class LogSoftmax(_SoftmaxBase):
    name = "log_softmax"
    use_log = True
    infer_shape_backward = ElementwiseOp.infer_shape_backward   # MXNet fills data from out

    def check_params(self, p):
        if p.use_length:
            raise self.error("use_length=True needs a length input, which log_softmax does "
                             "not take (MXNet 1.9.1 rejects it too)")


@register
class SoftmaxActivation(ElementwiseOp):
    name = "SoftmaxActivation"
    unnamed_inputs = True
    params = {"mode": Enum("channel", "instance", default="instance",
                           doc="instance: softmax over the last axis; channel: softmax over "
                               "axis 1.")}

    @staticmethod
    def _view(p, shape):
        if p.mode == "channel" and len(shape) > 1:
            return axis_view(shape, 1)
        # 'instance' runs over the last axis (MXNet flattens to (prod(rest), last), verified)
        return (prod(shape[:-1]), int(shape[-1]), 1)

    def forward(self, p, k, inputs, outputs, is_train, state):
        x = inputs[0]
        view = self._view(p, tuple(x.shape))
        k.softmax_forward(x.reshape(view), outputs[0].reshape(view), 1.0, False, None)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if no_head_gradient(k, out_grads, in_grads, req):
            return
        dy = out_grads[0]
        if req[0] == "null":
            return
        y = outputs[0]
        view = self._view(p, tuple(y.shape))
        k.softmax_backward(y.reshape(view), dy.reshape(view), in_grads[0].reshape(view), 1.0,
                           False, req[0] == "add", None)
