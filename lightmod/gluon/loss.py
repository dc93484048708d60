"""``mx.gluon.loss``: MXNet's loss functions as callables on Symbols or NDArrays.

Module programs use them to build a loss into a symbol graph (``loss = L1Loss()(pred, label)``
then ``mx.sym.make_loss(loss)``), or to score NDArray outputs. Each call composes the operators
of the module its first argument belongs to (``mx.sym`` for a Symbol, ``mx.nd`` otherwise) and
returns one loss per sample: the element losses averaged over every axis but ``batch_axis``
(summed, for ``KLDivLoss``).

``weight`` scales every loss; ``sample_weight`` (a call argument) multiplies the element losses
before the average, broadcast against them. The classes hold no parameters: ``hybridize`` is
accepted and changes nothing.
"""
from .. import ndarray as _nd
from .. import symbol as _sym
from ..base import MXNetError

__all__ = ["Loss", "L2Loss", "L1Loss", "SigmoidBinaryCrossEntropyLoss", "SigmoidBCELoss",
           "SoftmaxCrossEntropyLoss", "SoftmaxCELoss", "KLDivLoss", "HuberLoss", "HingeLoss",
           "SquaredHingeLoss", "LogisticLoss"]


def _backend(x):
    """The operator module for ``x``: mx.sym for a Symbol, mx.nd for anything else."""
    return _sym if isinstance(x, _sym.Symbol) else _nd


def _like(F, label, pred):
    """``label`` given ``pred``'s shape (same number of elements, e.g. (N,) for (N, 1))."""
    if F is _sym:
        return F.reshape_like(label, pred)
    return label.reshape(pred.shape)


class Loss:
    """The base class: ``loss(pred, label, *extra)`` -> per-sample losses.

    Subclasses define ``hybrid_forward(F, pred, label, ...)`` with ``F`` the operator module
    of ``pred``, as MXNet's loss blocks do. Block keywords (``prefix``, ``params``) are
    accepted and unused: a loss holds no parameters."""

    def __init__(self, weight, batch_axis, **kwargs):
        self._weight = weight
        self._batch_axis = batch_axis

    def __repr__(self):
        return "%s(batch_axis=%s, w=%s)" % (type(self).__name__, self._batch_axis, self._weight)

    def __call__(self, pred, label, *args):
        compose = getattr(self, "hybrid_forward", None)
        if compose is None:
            raise TypeError("%s is a loss without hybrid_forward(F, pred, label, ...): subclass "
                            "Loss and define it" % type(self).__name__)
        return compose(_backend(pred), pred, label, *args)

    def forward(self, pred, label, *args):
        return self(pred, label, *args)

    def hybridize(self, active=True, **kwargs):
        """Nothing to compile: the call already composes operators."""

    def _weighted_mean(self, F, loss, sample_weight, weight=None, reduce="mean"):
        """Scale the element losses (``sample_weight`` broadcast, then ``weight``) and average
        them per sample (``reduce="sum"``: add them up)."""
        if sample_weight is not None:
            loss = F.broadcast_mul(loss, sample_weight)
        weight = self._weight if weight is None else weight
        if weight is not None:
            if not isinstance(weight, (int, float)):
                raise TypeError("%s: weight must be a number, got %r"
                                % (type(self).__name__, weight))
            loss = loss * weight
        return getattr(F, reduce)(loss, axis=self._batch_axis, exclude=True)


class L2Loss(Loss):
    """Half the squared error, ``weight / 2 * (label - pred)^2``, averaged per sample."""

    def __init__(self, weight=1.0, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        loss = F.square(_like(F, label, pred) - pred)
        whole = 1.0 if self._weight is None else self._weight
        return self._weighted_mean(F, loss, sample_weight, whole / 2.0)


class L1Loss(Loss):
    """The absolute error ``|label - pred|``, averaged per sample."""

    def __init__(self, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        return self._weighted_mean(F, F.abs(_like(F, label, pred) - pred), sample_weight)


def _softplus(F, x):
    """log(1 + exp(x)), without overflow (the softrelu activation)."""
    return F.Activation(x, act_type="softrelu")


class SigmoidBinaryCrossEntropyLoss(Loss):
    """Binary cross-entropy of ``sigmoid(pred)`` (or of ``pred`` itself with
    ``from_sigmoid=True``) against labels in [0, 1]. The optional ``pos_weight`` (a call
    argument, broadcast) scales the loss of the positive term."""

    def __init__(self, from_sigmoid=False, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._from_sigmoid = from_sigmoid

    def hybrid_forward(self, F, pred, label, sample_weight=None, pos_weight=None):
        label = _like(F, label, pred)
        if not self._from_sigmoid:
            # -[y log s(x) + (1 - y) log(1 - s(x))] written with softplus(-|x|), which never
            # overflows: max(x, 0) - x y + log(1 + exp(-|x|))
            if pos_weight is None:
                loss = F.relu(pred) - pred * label + _softplus(F, -F.abs(pred))
            else:
                scale = F.broadcast_mul(pos_weight - 1, label) + 1
                loss = pred - pred * label + scale * (_softplus(F, -F.abs(pred)) +
                                                      F.relu(-pred))
        else:
            eps = 1e-12
            positive = F.log(pred + eps) * label
            if pos_weight is not None:
                positive = F.broadcast_mul(positive, pos_weight)
            loss = -(positive + F.log(1.0 - pred + eps) * (1.0 - label))
        return self._weighted_mean(F, loss, sample_weight)


SigmoidBCELoss = SigmoidBinaryCrossEntropyLoss


class SoftmaxCrossEntropyLoss(Loss):
    """Cross-entropy of ``softmax(pred)`` along ``axis`` (``pred`` taken as log-probabilities
    with ``from_logits=True``): against class indices (``sparse_label=True``) or against a
    distribution of ``pred``'s shape."""

    def __init__(self, axis=-1, sparse_label=True, from_logits=False, weight=None,
                 batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._axis = axis
        self._sparse_label = sparse_label
        self._from_logits = from_logits

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        if not self._from_logits:
            pred = F.log_softmax(pred, axis=self._axis)
        if self._sparse_label:
            loss = -F.pick(pred, label, axis=self._axis, keepdims=True)
        else:
            loss = -F.sum(pred * _like(F, label, pred), axis=self._axis, keepdims=True)
        return self._weighted_mean(F, loss, sample_weight)


SoftmaxCELoss = SoftmaxCrossEntropyLoss


class KLDivLoss(Loss):
    """Kullback-Leibler divergence ``label * (log(label) - pred)``, ``pred`` being
    log-probabilities (``from_logits=True``, the default) or scores turned into them by a
    log-softmax along ``axis``; summed per sample, not averaged."""

    def __init__(self, from_logits=True, axis=-1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._from_logits = from_logits
        self._axis = axis

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        if not self._from_logits:
            pred = F.log_softmax(pred, axis=self._axis)
        loss = label * (F.log(label + 1e-12) - pred)
        return self._weighted_mean(F, loss, sample_weight, reduce="sum")


class HuberLoss(Loss):
    """Smooth L1: ``0.5 / rho * e^2`` where ``e = |label - pred| <= rho``, else
    ``e - 0.5 * rho``."""

    def __init__(self, rho=1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._rho = rho

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        err = F.abs(_like(F, label, pred) - pred)
        loss = F.where(err > self._rho, err - 0.5 * self._rho,
                       (0.5 / self._rho) * F.square(err))
        return self._weighted_mean(F, loss, sample_weight)


class HingeLoss(Loss):
    """``max(0, margin - pred * label)`` for labels in {-1, 1}."""

    def __init__(self, margin=1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def _element_loss(self, F, pred, label):
        return F.relu(self._margin - pred * _like(F, label, pred))

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        return self._weighted_mean(F, self._element_loss(F, pred, label), sample_weight)


class SquaredHingeLoss(HingeLoss):
    """``max(0, margin - pred * label)^2`` for labels in {-1, 1}."""

    def _element_loss(self, F, pred, label):
        return F.square(super()._element_loss(F, pred, label))


class LogisticLoss(Loss):
    """``log(1 + exp(-pred * label))`` for labels in {-1, 1} (``label_format='signed'``) or
    {0, 1} (``'binary'``, mapped to {-1, 1} first)."""

    def __init__(self, weight=None, batch_axis=0, label_format="signed", **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        if label_format not in ("signed", "binary"):
            raise ValueError("label_format can only be signed or binary, received %s."
                             % label_format)
        self._label_format = label_format

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        label = _like(F, label, pred)
        if self._label_format == "binary":
            label = 2 * label - 1
        margin = pred * label
        loss = F.relu(-margin) + _softplus(F, -F.abs(margin))
        return self._weighted_mean(F, loss, sample_weight)


_NOT_PROVIDED = ("CTCLoss", "TripletLoss", "PoissonNLLLoss", "CosineEmbeddingLoss", "SDMLLoss")


def __getattr__(name):
    if name in _NOT_PROVIDED:
        raise MXNetError("mx.gluon.loss.%s is not provided by lightmod (its losses: %s)"
                         % (name, ", ".join(__all__[1:])))
    raise AttributeError("module 'mx.gluon.loss' has no attribute %r" % name)
