"""``mx.gluon.loss``: MXNet's loss functions as callables on Symbols or NDArrays.

Module programs use them to build a loss into a symbol graph (``loss = L1Loss()(pred, label)``
then ``mx.sym.make_loss(loss)``), or to score NDArray outputs. Each call composes the operators
of the module its first argument belongs to (``mx.sym`` for a Symbol, ``mx.nd`` otherwise) and
returns one loss per sample: the element losses averaged over every axis but ``batch_axis``
(summed, for ``KLDivLoss`` and ``TripletLoss``; ``CTCLoss`` computes one per sequence,
``CosineEmbeddingLoss`` one per pair as a column, ``SDMLLoss`` one per row of its batch, and
``PoissonNLLLoss`` the mean over every element, as MXNet's do).

``weight`` scales every loss; ``sample_weight`` (a call argument) multiplies the element losses
before the average, broadcast against them. The classes hold no parameters: ``hybridize`` is
accepted and changes nothing.
"""
import numpy as np

from .. import ndarray as _nd
from .. import symbol as _sym
from ..base import MXNetError

__all__ = ["Loss", "L2Loss", "L1Loss", "SigmoidBinaryCrossEntropyLoss", "SigmoidBCELoss",
           "SoftmaxCrossEntropyLoss", "SoftmaxCELoss", "KLDivLoss", "HuberLoss", "HingeLoss",
           "SquaredHingeLoss", "LogisticLoss", "CTCLoss", "TripletLoss", "PoissonNLLLoss",
           "CosineEmbeddingLoss", "SDMLLoss"]


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

    def __call__(self, pred, label, *args, **kwargs):
        compose = getattr(self, "hybrid_forward", None)
        if compose is None:
            raise TypeError("%s is a loss without hybrid_forward(F, pred, label, ...): subclass "
                            "Loss and define it" % type(self).__name__)
        return compose(_backend(pred), pred, label, *args, **kwargs)

    def forward(self, pred, label, *args, **kwargs):
        return self(pred, label, *args, **kwargs)

    def hybridize(self, active=True, **kwargs):
        """Nothing to compile: the call already composes operators."""

    def _weighted(self, F, loss, sample_weight, weight=None):
        """The losses scaled by ``sample_weight`` (broadcast), then by ``weight`` (the loss's
        own when None)."""
        if sample_weight is not None:
            loss = F.broadcast_mul(loss, sample_weight)
        weight = self._weight if weight is None else weight
        if weight is not None:
            if not isinstance(weight, (int, float)):
                raise TypeError("%s: weight must be a number, got %r"
                                % (type(self).__name__, weight))
            loss = loss * weight
        return loss

    def _weighted_mean(self, F, loss, sample_weight, weight=None, reduce="mean"):
        """Scale the element losses (``_weighted``) and average them per sample
        (``reduce="sum"``: add them up)."""
        loss = self._weighted(F, loss, sample_weight, weight)
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


class CTCLoss(Loss):
    """Connectionist temporal classification: the negative log-likelihood of each label
    sequence under the per-step class scores ``pred`` (before softmax; the last class is the
    blank), summed over every alignment (the ``CTCLoss`` operator, blank last).

    ``layout`` is ``pred``'s, ``'NTC'`` (batch, steps, classes) or ``'TNC'``; ``label_layout``
    the labels', ``'NT'`` or ``'TN'``. Labels are padded with -1, unless ``label_lengths`` gives
    each sequence's length; ``pred_lengths`` gives each sequence's number of steps. Either may
    be left out (None). One loss per sequence."""

    def __init__(self, layout="NTC", label_layout="NT", weight=None, **kwargs):
        if layout not in ("NTC", "TNC"):
            raise MXNetError("CTCLoss: layout must be 'NTC' or 'TNC', got %r" % (layout,))
        if label_layout not in ("NT", "TN"):
            raise MXNetError("CTCLoss: label_layout must be 'NT' or 'TN', got %r"
                             % (label_layout,))
        super().__init__(weight, label_layout.index("N"), **kwargs)
        self._layout = layout
        self._label_layout = label_layout

    def hybrid_forward(self, F, pred, label, pred_lengths=None, label_lengths=None,
                       sample_weight=None):
        if self._layout == "NTC":
            pred = F.swapaxes(pred, dim1=0, dim2=1)      # the operator takes steps first
        if self._label_layout == "TN":
            label = F.swapaxes(label, dim1=0, dim2=1)
        inputs = {"data": pred, "label": label}
        if pred_lengths is not None:
            inputs["data_lengths"] = pred_lengths
        if label_lengths is not None:
            inputs["label_lengths"] = label_lengths
        loss = F.CTCLoss(use_data_lengths=pred_lengths is not None,
                         use_label_lengths=label_lengths is not None, blank_label="last",
                         **inputs)
        return self._weighted(F, loss, sample_weight)


class TripletLoss(Loss):
    """``max(|positive - pred|^2 - |negative - pred|^2 + margin, 0)`` per sample, the squared
    distances summed over every axis but ``batch_axis`` (``positive`` and ``negative`` take
    ``pred``'s shape: they need only its number of elements)."""

    def __init__(self, margin=1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F, pred, positive, negative):
        positive = _like(F, positive, pred)
        negative = _like(F, negative, pred)
        gap = F.sum(F.square(positive - pred) - F.square(negative - pred),
                    axis=self._batch_axis, exclude=True)
        return self._weighted(F, F.relu(gap + self._margin), None)


class PoissonNLLLoss(Loss):
    """The negative log-likelihood of counts ``target`` under Poisson rates: ``exp(pred) -
    target * pred`` for log-rates (``from_logits=True``), else ``pred - target * log(pred +
    epsilon)``; with ``compute_full`` plus Stirling's approximation of ``log(target!)``,
    ``target * log(target) - target + log(2 * pi * target) / 2``, for targets above 1 (where
    MXNet's product with a mask gives NaN for a target of 0, this adds 0). Returns the mean
    over every element (shape (1,)), weighted first."""

    def __init__(self, weight=None, from_logits=True, batch_axis=0, compute_full=False,
                 **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._log_rates = from_logits           # pred holds log(rate)
        self._with_factorial = compute_full     # add Stirling's log(target!)

    def hybrid_forward(self, F, pred, target, sample_weight=None, epsilon=1e-08):
        counts = _like(F, target, pred)
        if self._log_rates:
            rate, log_rate = F.exp(pred), pred
        else:
            rate, log_rate = pred, F.log(pred + epsilon)
        nll = rate - counts * log_rate
        if self._with_factorial:
            nll = nll + _stirling_log_factorial(F, counts)
        return F.mean(self._weighted(F, nll, sample_weight))


def _stirling_log_factorial(F, counts):
    """Stirling's approximation of log(counts!) where counts exceed 1, else 0 (computed on
    1 there, whose log is 0, so no log(0) is ever taken)."""
    above_one = counts > 1
    n = F.where(above_one, counts, F.ones_like(counts))
    return (n * F.log(n) - n + 0.5 * F.log(2 * np.pi * n)) * above_one


class CosineEmbeddingLoss(Loss):
    """For pairs ``input1``, ``input2`` (vectors along the last axis) and labels 1 (alike) or
    -1 (unlike): ``1 - cos`` for label 1, ``max(cos - margin, 0)`` for label -1, 0 for any
    other label, with ``cos`` the cosine similarity (its denominator at least 1e-12). One
    loss per pair, as a column (shape (batch, 1))."""

    def __init__(self, weight=None, batch_axis=0, margin=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F, input1, input2, label, sample_weight=None):
        input1 = _like(F, input1, input2)
        label = label.reshape((-1, 1))
        norms = F.norm(input1, axis=-1) * F.norm(input2, axis=-1)
        dot = F.sum(input1 * input2, axis=-1)
        cos = (dot / F.maximum(norms, 1e-12)).reshape((-1, 1))
        alike = (1 - cos) * (label == 1)
        unlike = F.relu((label == -1) * (cos - self._margin))
        return self._weighted(F, alike + unlike, sample_weight)


class SDMLLoss(Loss):
    """Smoothed deep metric learning over a batch of aligned pairs: row i of ``x1`` belongs
    with row i of ``x2`` and with no other. Each row's negative squared distances to every
    row of ``x2`` are turned into log-probabilities (log-softmax), and the loss is their
    KL divergence from the smoothed identity: ``1 - smoothing_parameter`` on the diagonal,
    the rest spread evenly over the other rows. One loss per row, times ``weight``.
    ``x1`` and ``x2`` are (batch, dim)."""

    def __init__(self, smoothing_parameter=0.3, weight=1.0, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self.smoothing_parameter = smoothing_parameter
        self.kl_loss = KLDivLoss(from_logits=True)

    def hybrid_forward(self, F, x1, x2):
        if F is _nd and (x1.ndim != 2 or x1.shape != x2.shape):
            raise MXNetError("SDMLLoss: x1 and x2 must both be (batch, dim), got %s and %s"
                             % (x1.shape, x2.shape))
        diffs = F.broadcast_sub(F.expand_dims(x1, axis=1), F.expand_dims(x2, axis=0))
        distances = F.sum(F.square(diffs), axis=2)              # (batch, batch)
        ones = F.ones_like(distances)
        gold = F.diag(F.diag(ones))                             # the identity
        others = F.sum(ones, axis=1, keepdims=True) - 1         # batch - 1, per row
        smoothing = self.smoothing_parameter
        labels = gold * (1 - smoothing) + F.broadcast_div((1 - gold) * smoothing, others)
        loss = self.kl_loss(F.log_softmax(-distances, axis=1), labels)
        return self._weighted(F, loss, None)
