"""Loss heads and gradient-shaping ops: SoftmaxOutput (Softmax), the regression outputs,
MakeLoss, make_loss, BlockGrad (stop_gradient), smooth_l1, softmax_cross_entropy, SVMOutput.

Loss heads (``is_loss``) ignore the incoming head gradient and give the label a zero
gradient. Normalisation rules follow MXNet 1.9.1
(spec section 4.3), including its quirks: 'batch' divides a non-multi_output SoftmaxOutput's
gradient by the number of labels, and multi_output divides by the spatial size unless
'valid'.
"""
from .common import assign_shape, data_grad_needed, known, prod, zero_grads
from .nn import ElementwiseOp
from .registry import Bool, Enum, Float, Operator, merge_shape, register


def _zero_label_grad(k, in_grads, req):
    """Labels get a zero gradient ('add' leaves the buffer as it is)."""
    zero_grads(k, in_grads[1:], req[1:])


class _LossHead(Operator):
    """A loss output layer: forward passes the data through (subclasses may transform it);
    backward ignores the head gradient, gives the labels a zero gradient and the data the
    loss's own gradient, written by ``data_gradient`` (added into ``grad`` when
    ``accumulate``). Shapes: nothing is known until the data's shape is; then ``fill_label_shape``
    checks or infers the label's shape in ``shapes`` for the data shape ``dshape`` (a tuple),
    and the output has the data's shape."""

    def infer_shape(self, p, in_shapes):
        shapes = list(in_shapes)
        if not known(shapes[0]):
            return shapes, [None]
        dshape = tuple(shapes[0])
        self.fill_label_shape(p, shapes, dshape)
        return shapes, [dshape]

    def fill_label_shape(self, p, shapes, dshape):
        raise NotImplementedError

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.copy(outputs[0], inputs[0])

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        _zero_label_grad(k, in_grads, req)
        if req[0] != "null":
            self.data_gradient(p, k, inputs, outputs, in_grads[0], req[0] == "add")

    def data_gradient(self, p, k, inputs, outputs, grad, accumulate):
        raise NotImplementedError


# ---------------------------------------------------------------------------------------------
# SoftmaxOutput
# ---------------------------------------------------------------------------------------------
@register
class SoftmaxOutput(_LossHead):
    name = "SoftmaxOutput"
    aliases = ("Softmax",)
    inputs = ("data", "label")
    is_loss = True
    params = {"grad_scale": Float(1.0, doc="Scales the gradient by a float factor."),
              "ignore_label": Float(-1.0, doc="Label value ignored in backward when "
                                              "use_ignore is set."),
              "multi_output": Bool(False, doc="Softmax over axis 1 of (N, C, ...) data, one "
                                              "label per position."),
              "use_ignore": Bool(False, doc="Rows whose label is ignore_label get no "
                                            "gradient."),
              "preserve_shape": Bool(False, doc="Softmax over the last axis."),
              "normalization": Enum("batch", "null", "valid", default="null",
                                    doc="Normalizes the gradient."),
              "out_grad": Bool(False, doc="Multiplies the gradient element-wise (MXNet 1.9.1 "
                                          "multiplies by the output)."),
              "smooth_alpha": Float(0.0, doc="Label smoothing: target 1-alpha on the label, "
                                             "alpha/(C-1) on the other classes.")}

    def _label_shapes(self, dshape):
        """The label layouts multi_output accepts, preferred (the inferred one) first."""
        n = dshape[0]
        rest = tuple(dshape[2:])
        flat = (n, prod(rest) if all(rest) else 0)
        return [flat, (n,) + rest, (n, 1) + rest]

    def fill_label_shape(self, p, shapes, dshape):
        label = shapes[1]
        if label is not None and tuple(label) == dshape:
            return                                # probabilities as label: nothing to check
        if p.multi_output:
            if len(dshape) < 2:
                raise self.error("multi_output needs data of shape (N, C, ...), got %s",
                                 dshape)
            candidates = self._label_shapes(dshape)
            if label is None or len(label) == 0:
                shapes[1] = candidates[0]
            else:
                for cand in candidates:
                    try:
                        shapes[1] = merge_shape(tuple(label), cand)
                        break
                    except ValueError:
                        continue
                else:
                    raise self.error("label has shape %s, expected %s or %s for data %s",
                                     tuple(label), candidates[0], candidates[1], dshape)
        elif len(dshape) > 1:
            assign_shape(self, shapes, 1, "label", dshape[:-1], " for data %s" % (dshape,))

    @staticmethod
    def _view(p, shape):
        """(outer, classes, inner) view the softmax runs over."""
        size = prod(shape)
        if p.multi_output:
            n, c = int(shape[0]), int(shape[1])
            return n, c, size // (n * c)
        if p.preserve_shape:
            return size // int(shape[-1]), int(shape[-1]), 1
        n = int(shape[0])
        return n, size // n, 1

    def forward(self, p, k, inputs, outputs, is_train, state):
        x = inputs[0]
        view = self._view(p, tuple(x.shape))
        k.softmax_forward(x.reshape(view), outputs[0].reshape(view), 1.0, False, None)

    def data_gradient(self, p, k, inputs, outputs, grad, accumulate):
        label, prob = inputs[1], outputs[0]
        # out_grad=True: MXNet 1.9.1 multiplies by the op's *output*, not by the head gradient
        # (verified against 1.9.1, with the executor and with autograd); we match its numbers.
        use_ograd, ograd = p.out_grad, prob
        if tuple(label.shape) == tuple(prob.shape):
            # probabilities as label: no normalisation
            k.regression_backward(prob, label, ograd, grad, "diff", p.grad_scale, use_ograd,
                                  accumulate)
            return
        view = self._view(p, tuple(prob.shape))
        if p.normalization == "valid":
            count = label.size - k.count_label_equal(label, p.ignore_label)
            norm = float(max(count, 1))
        elif p.normalization == "batch":
            # MXNet reshapes the label to (N, rest) with multi_output, to 1-D otherwise
            norm = float(view[0] if p.multi_output else label.size)
        else:
            norm = 1.0
        if p.multi_output and p.normalization != "valid":
            norm *= view[2]
        k.softmax_output_backward(prob.reshape(view), label, ograd.reshape(view),
                                  grad.reshape(view), p.ignore_label, p.use_ignore,
                                  p.smooth_alpha, p.grad_scale / norm, use_ograd, accumulate)


# ---------------------------------------------------------------------------------------------
# Regression heads
# ---------------------------------------------------------------------------------------------
class _RegressionOutput(_LossHead):
    inputs = ("data", "label")
    is_loss = True
    params = {"grad_scale": Float(1.0, doc="Scale the gradient by a float factor.")}
    grad_kind = "diff"

    def fill_label_shape(self, p, shapes, dshape):
        label = shapes[1]
        if label is None or len(label) == 0:
            # an (N, 1) output takes an (N,) label
            shapes[1] = (dshape[0],) if len(dshape) == 2 and dshape[1] == 1 else dshape
        elif all(dshape) and all(label) and (label[0] != dshape[0]
                                              or prod(label) != prod(dshape)):
            raise self.error("label has shape %s, expected %s (or the same number of "
                             "elements per sample) for data %s", tuple(label),
                             (dshape[0],) if dshape[1:] == (1,) else dshape, dshape)

    def data_gradient(self, p, k, inputs, outputs, grad, accumulate):
        label, out = inputs[1], outputs[0]
        per_sample = label.size // label.shape[0] if label.ndim else 1
        k.regression_backward(out, label.reshape(out.shape), out, grad, self.grad_kind,
                              p.grad_scale / per_sample, False, accumulate)


@register
class LinearRegressionOutput(_RegressionOutput):
    name = "LinearRegressionOutput"


@register
class MAERegressionOutput(_RegressionOutput):
    name = "MAERegressionOutput"
    grad_kind = "sign"


@register
class LogisticRegressionOutput(_RegressionOutput):
    name = "LogisticRegressionOutput"

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.activation_forward(inputs[0], outputs[0], "sigmoid")


# ---------------------------------------------------------------------------------------------
# MakeLoss, make_loss, BlockGrad
# ---------------------------------------------------------------------------------------------
@register
class MakeLoss(Operator):
    name = "MakeLoss"
    is_loss = True
    params = {"grad_scale": Float(1.0, doc="Gradient scale as a supplement to unary and "
                                           "binary operators."),
              "valid_thresh": Float(0.0, doc="Elements above this count as valid for "
                                             "normalization 'valid'."),
              "normalization": Enum("batch", "null", "valid", default="null",
                                    doc="Normalizes the gradient.")}

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.copy(outputs[0], inputs[0])

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[0] == "null":
            return
        x = inputs[0]
        if p.normalization == "batch":
            norm = float(x.shape[0])
        elif p.normalization == "valid":
            norm = float(max(k.count_greater(x, p.valid_thresh), 1))
        else:
            norm = 1.0
        k.assign_scalar(in_grads[0], p.grad_scale / norm, req[0])


@register
class MakeLossLower(ElementwiseOp):
    """``make_loss``: identity whose gradient is ones; its output is named 'loss'."""
    name = "make_loss"
    is_loss = True
    params = {}

    def list_outputs(self, p):
        return ["loss"]

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.copy(outputs[0], inputs[0])

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[0] != "null":
            k.assign_scalar(in_grads[0], 1.0, req[0])


@register
class BlockGrad(ElementwiseOp):
    name = "BlockGrad"
    aliases = ("stop_gradient",)
    params = {}
    head_grad_unused = True
    blocks_gradient = True

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.copy(outputs[0], inputs[0])

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        zero_grads(k, in_grads, req)


# ---------------------------------------------------------------------------------------------
# smooth_l1, softmax_cross_entropy
# ---------------------------------------------------------------------------------------------
@register
class SmoothL1(ElementwiseOp):
    name = "smooth_l1"
    params = {"scalar": Float(1.0, doc="sigma: the quadratic part covers |x| < 1/sigma^2.")}

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.smooth_l1_forward(inputs[0], outputs[0], p.scalar)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if out_grads[0] is None:
            zero_grads(k, in_grads, req)
        elif req[0] != "null":
            k.smooth_l1_backward(inputs[0], out_grads[0], in_grads[0], p.scalar,
                                 req[0] == "add")


@register
class SoftmaxCrossEntropy(Operator):
    name = "softmax_cross_entropy"
    inputs = ("data", "label")
    params = {}

    def infer_shape(self, p, in_shapes):
        shapes = list(in_shapes)
        dshape = shapes[0]
        if not known(dshape):
            return shapes, [(1,)]
        if len(dshape) != 2:
            raise self.error("data must be 2-D (batch, classes), got shape %s", tuple(dshape))
        assign_shape(self, shapes, 1, "label", (dshape[0],), " (one class index per row of "
                     "data %s)" % (tuple(dshape),))
        return shapes, [(1,)]

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.softmax_ce_forward(inputs[0], inputs[1], outputs[0])

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[1] != "null":
            raise self.error("cannot compute the gradient with respect to label; bind label "
                             "with grad_req 'null'")
        if not data_grad_needed(k, out_grads, in_grads, req):
            return
        k.softmax_ce_backward(inputs[0], inputs[1], out_grads[0], in_grads[0],
                              req[0] == "add")


# ---------------------------------------------------------------------------------------------
# SVMOutput
# ---------------------------------------------------------------------------------------------
@register
class SVMOutput(_LossHead):
    """Support-vector-machine head: the output is the data itself; the gradient is the hinge
    loss's (L2-SVM, or L1-SVM with ``use_linear``) with one label per row of the data viewed as
    (rows, classes), classes being its last axis.

    MXNet 1.9.1 always writes this gradient, even under grad_req 'add'; lightmod accumulates
    under 'add' (its executor relies on 'add' to sum gradients of shared intermediates)."""
    name = "SVMOutput"
    inputs = ("data", "label")
    is_loss = True
    params = {"margin": Float(1.0, doc="The loss function penalizes outputs that lie outside "
                                       "this margin."),
              "regularization_coefficient": Float(1.0, doc="Regularization parameter for the "
                                                          "SVM: the gradient's scale."),
              "use_linear": Bool(False, doc="Use the L1-SVM (linear) objective instead of the "
                                            "L2-SVM (squared) one.")}

    def fill_label_shape(self, p, shapes, dshape):
        if len(dshape) < 2:
            raise self.error("data must have at least 2 dimensions (batch, classes), got shape %s",
                             dshape)
        assign_shape(self, shapes, 1, "label", dshape[:-1], " (one class index per row of data %s)"
                     % (dshape,))

    def data_gradient(self, p, k, inputs, outputs, grad, accumulate):
        x = inputs[0]
        classes = int(tuple(x.shape)[-1])
        view = (x.size // classes, classes)
        k.svm_output_backward(x.reshape(view), inputs[1].reshape(view[0]), grad.reshape(view),
                              p.margin, p.regularization_coefficient, p.use_linear, accumulate)
