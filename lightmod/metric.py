"""Evaluation metrics (``mx.metric``), MXNet 1.9.1 behaviour.

Every metric keeps a local pair ``sum_metric / num_inst`` (cleared by ``reset_local()``, e.g.
by ``Speedometer(auto_reset=True)``) and a global pair ``global_sum_metric /
global_num_inst`` (cleared only by ``reset()``). ``get()`` is the local value,
``get_global()`` the global one, NaN before any update.

Labels and predictions are lists of NDArrays (or numpy arrays); a bare array is accepted
where MXNet accepts one. The per-batch arithmetic follows MXNet's (float32 where MXNet
computes on float32 arrays) and the sums are Python floats (float64), so values equal
MXNet's — under numpy 2 the per-batch numpy scalars are converted explicitly, because numpy 2
would otherwise keep float32 sums.

Most metrics score one (label, prediction) pair at a time: they derive from ``_PairwiseMetric``
and only say how a pair turns into ``(sum, count)``; the loop over the pairs, the shape check
and the bookkeeping live once, in the base classes.

Where MXNet 1.9.1 is wrong lightmod is right, and says so: ``get_config()`` of F1, MCC and
PearsonCorrelation includes ``average`` (MXNet drops it, so a JSON round trip silently went
back to 'macro'); TopKAccuracy does not append its ``_k`` suffix twice when recreated from its
config; PearsonCorrelation(average='micro') keeps separate local and global pooled
statistics (MXNet's ``get_global()`` returned 0.0 and ``reset_local()`` did not clear the
pooled sums); TopKAccuracy counts 1-D predictions in the global sum too;
``CompositeEvalMetric.get_metric`` raises ValueError for a bad index instead of returning it;
the F1/MCC error for more than two classes names the metric.
"""
import math

import numpy

from . import registry
from .base import numeric_types, string_types
from .ndarray.ndarray import NDArray

__all__ = ["EvalMetric", "CompositeEvalMetric", "Accuracy", "TopKAccuracy", "F1", "MCC",
           "Perplexity", "MAE", "MSE", "RMSE", "CrossEntropy", "NegativeLogLikelihood",
           "PearsonCorrelation", "PCC", "Loss", "Torch", "Caffe", "CustomMetric", "np",
           "create", "register", "alias", "check_label_shapes"]

_ARRAY_TYPES = (NDArray, numpy.ndarray)
_NAN = float("nan")


def _as_numpy(x):
    """A numpy view/copy of a label or prediction (NDArray, numpy array or nested list)."""
    if isinstance(x, NDArray):
        return x._host_view()
    return numpy.asarray(x)


def check_label_shapes(labels, preds, wrap=False, shape=False):
    """Raise ValueError unless labels and preds have the same length (or, with
    ``shape=True``, the same shape); with ``wrap=True`` bare arrays become one-element lists."""
    if not shape:
        label_shape, pred_shape = len(labels), len(preds)
    else:
        label_shape, pred_shape = labels.shape, preds.shape
    if label_shape != pred_shape:
        raise ValueError(f"Shape of labels {label_shape} does not match shape of predictions {pred_shape}"
                         )
    if wrap:
        if isinstance(labels, _ARRAY_TYPES):
            labels = [labels]
        if isinstance(preds, _ARRAY_TYPES):
            preds = [preds]
    return labels, preds


def _pick(mapping, names):
    """The values of ``mapping`` named by ``names`` in that order; all of them for None."""
    return list(mapping.values()) if names is None else [mapping[key] for key in names]


class EvalMetric:
    """Base class of metrics: ``update(labels, preds)`` accumulates, ``get()`` reports.

    ``output_names``/``label_names`` select, in ``update_dict``, which named outputs and
    labels the metric sees. Extra constructor keywords are kept in ``_kwargs`` and reported
    by ``get_config()``, whose dict recreates the metric through ``create(**config)`` or,
    as JSON, ``create(json_string)``.
    """

    # what a cleared instance count is (MCC and PCC count in floats, as in MXNet)
    _empty_count = 0

    def __init__(self, name, output_names=None, label_names=None, **kwargs):
        self.name = str(name)
        self.output_names, self.label_names = output_names, label_names
        self._has_global_stats = kwargs.pop("has_global_stats", False)
        self._kwargs = kwargs
        self.reset()

    def __str__(self):
        return "EvalMetric: %s" % (dict(self.get_name_value()),)

    def get_config(self):
        """The constructor arguments plus ``metric`` (the class name)."""
        return dict(self._kwargs, metric=type(self).__name__, name=self.name,
                    output_names=self.output_names, label_names=self.label_names)

    def update_dict(self, label, pred):
        """Update from dicts ``{name: array}`` (filtered by label_names/output_names)."""
        chosen_preds = _pick(pred, self.output_names)
        self.update(_pick(label, self.label_names), chosen_preds)

    def update(self, labels, preds):
        """Accumulate one batch; every concrete metric implements it."""
        raise NotImplementedError("%s does not implement update()" % type(self).__name__)

    def reset(self):
        """Clear the local and the global accumulators."""
        # not through reset_local(): a subclass's reset_local may need attributes that its
        # __init__ only sets after this base __init__ (which calls reset) has returned
        self.global_sum_metric, self.global_num_inst = 0.0, self._empty_count
        self.sum_metric, self.num_inst = 0.0, self._empty_count

    def reset_local(self):
        """Clear the local accumulators only."""
        self.sum_metric, self.num_inst = 0.0, self._empty_count

    def _value(self, total, count):
        """What ``get()`` reports for an accumulated pair with ``count`` > 0."""
        return total / count

    def get(self):
        """``(name, value)`` of the local accumulators; NaN before any update."""
        return (self.name, self._value(self.sum_metric, self.num_inst) if self.num_inst else _NAN)

    def get_global(self):
        """``(name, value)`` of the global accumulators (local ones if the metric keeps
        none)."""
        if not self._has_global_stats:
            return self.get()
        count = self.global_num_inst
        return (self.name, self._value(self.global_sum_metric, count) if count else _NAN)

    @staticmethod
    def _pairs(name, value):
        if not isinstance(name, list):
            name = [name]
        if not isinstance(value, list):
            value = [value]
        return list(zip(name, value))

    def get_name_value(self):
        """``[(name, value), ...]`` of the local values."""
        return self._pairs(*self.get())

    def get_global_name_value(self):
        """``[(name, value), ...]`` of the global values."""
        if self._has_global_stats:
            return self._pairs(*self.get_global())
        return self.get_name_value()

    def _add(self, value, count):
        """Add one batch's sum and count to both accumulators."""
        self.sum_metric += value
        self.global_sum_metric += value
        self.num_inst += count
        self.global_num_inst += count


class _PairwiseMetric(EvalMetric):
    """A metric that adds up a ``(sum, count)`` per (label, prediction) pair, both as numpy."""

    def _score(self, label, pred):
        raise NotImplementedError

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            self._add(*self._score(_as_numpy(label), _as_numpy(pred)))


register = registry.get_register_func(EvalMetric, "metric")
alias = registry.get_alias_func(EvalMetric, "metric")
_create = registry.get_create_func(EvalMetric, "metric")


def create(metric, *args, **kwargs):
    """Build a metric from a name ('acc', 'f1', ...), a JSON config string, a config dict,
    an EvalMetric (returned as is), a callable ``feval(label, pred)`` (→ CustomMetric) or a
    list of any of these (→ CompositeEvalMetric)."""
    if isinstance(metric, list):
        return CompositeEvalMetric([create(item, *args, **kwargs) for item in metric])
    if callable(metric):
        return CustomMetric(metric, *args, **kwargs)
    return _create(metric, *args, **kwargs)


@register
@alias("composite")
class CompositeEvalMetric(EvalMetric):
    """Several metrics updated together; ``get()`` returns lists of names and values."""

    def __init__(self, metrics=None, name="composite", output_names=None, label_names=None):
        self.metrics = [create(m) for m in (metrics or [])]
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    def add(self, metric):
        """Append a metric (anything ``create`` accepts)."""
        self.metrics.append(create(metric))

    def get_metric(self, index):
        """The child metric at ``index``."""
        try:
            return self.metrics[index]
        except IndexError:
            raise ValueError(f"Metric index {index} is out of range 0 and {len(self.metrics)}"
                             ) from None

    def update_dict(self, labels, preds):
        # the composite narrows the dicts first; each child then applies its own names
        if self.label_names is not None:
            labels = {key: value for key, value in labels.items() if key in self.label_names}
        if self.output_names is not None:
            preds = {key: value for key, value in preds.items() if key in self.output_names}
        for child in self.metrics:
            child.update_dict(labels, preds)

    def update(self, labels, preds):
        for child in self.metrics:
            child.update(labels, preds)

    def reset(self):
        for child in self.metrics:
            child.reset()

    def reset_local(self):
        for child in self.metrics:
            child.reset_local()

    @staticmethod
    def _concat(results):
        """Join the children's ``(name, value)`` results, where either may itself be a list."""
        names, values = [], []
        for name, value in results:
            names += [name] if isinstance(name, string_types) else name
            values += [value] if isinstance(value, numeric_types) else value
        return names, values

    def get(self):
        return self._concat([child.get() for child in self.metrics])

    def get_global(self):
        return self._concat([child.get_global() for child in self.metrics])

    def get_config(self):
        return dict(super().get_config(), metrics=[child.get_config() for child in self.metrics])


@register
@alias("acc")
class Accuracy(_PairwiseMetric):
    """Fraction of correct predictions. A prediction whose shape differs from the label's is
    reduced with argmax over ``axis``; both are then cast to int32 and flattened."""

    def __init__(self, axis=1, name="accuracy", output_names=None, label_names=None):
        super().__init__(name, axis=axis, output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self.axis = axis

    def _score(self, label, pred):
        if pred.shape != label.shape:
            pred = numpy.argmax(pred, axis=self.axis)
        guessed, truth = pred.astype("int32").ravel(), label.astype("int32").ravel()
        check_label_shapes(truth, guessed)
        return int(numpy.count_nonzero(guessed == truth)), len(guessed)


@register
@alias("top_k_accuracy", "top_k_acc")
class TopKAccuracy(_PairwiseMetric):
    """Fraction of samples whose label is among the ``top_k`` highest-scoring classes."""

    def __init__(self, top_k=1, name="top_k_accuracy", output_names=None, label_names=None):
        super().__init__(name, top_k=top_k, output_names=output_names,
                         label_names=label_names, has_global_stats=True)
        self.top_k = top_k
        if not self.top_k > 1:
            raise AssertionError("Please use Accuracy if top_k is no more than 1")
        suffix = "_%d" % self.top_k
        if not self.name.endswith(suffix):  # a name from get_config() already has it
            self.name += suffix

    def _score(self, label, pred):
        if pred.ndim > 2:
            raise AssertionError("Predictions should be no more than 2 dims (got shape %s)"
                                 % (pred.shape,))
        # after argpartition the top_k best classes of each row fill its last top_k columns
        order = numpy.argpartition(pred.astype("float32"), -self.top_k)
        truth = label.astype("int32")
        check_label_shapes(truth, order)
        truth = truth.ravel()
        if order.ndim == 1:
            return int(numpy.count_nonzero(order == truth)), order.shape[0]
        best = order[:, max(order.shape[1] - self.top_k, 0):]
        return int(numpy.count_nonzero(best == truth[:, None])), order.shape[0]


class _Confusion:
    """Counts of a binary confusion matrix: class 1 is the positive class."""

    def __init__(self):
        self.tp = self.fp = self.fn = self.tn = 0

    @property
    def total(self):
        return self.tp + self.fp + self.fn + self.tn

    def count(self, predicted_pos, actual_pos):
        """Add the samples of one batch, given as two boolean vectors."""
        self.tp += int(numpy.count_nonzero(predicted_pos & actual_pos))
        self.fp += int(numpy.count_nonzero(predicted_pos & ~actual_pos))
        self.fn += int(numpy.count_nonzero(~predicted_pos & actual_pos))
        self.tn += int(numpy.count_nonzero(~predicted_pos & ~actual_pos))

    def f1(self):
        """Harmonic mean of precision and recall; an empty ratio counts as 0."""
        def share(part, rest):
            return float(part) / (part + rest) if part + rest > 0 else 0.0
        precision, recall = share(self.tp, self.fp), share(self.tp, self.fn)
        if precision + recall <= 0:
            return 0.0
        return 2 * precision * recall / (precision + recall)

    def mcc(self):
        """Matthews correlation: ``(tp*tn - fp*fn) / sqrt(product of the four margins)``,
        where a margin that is zero is left out of the product; 0 without samples."""
        if not self.total:
            return 0.0
        tp, fp, fn, tn = float(self.tp), float(self.fp), float(self.fn), float(self.tn)
        product = 1.0
        for margin in (tp + fp, tp + fn, tn + fp, tn + fn):
            product = product * margin if margin != 0.0 else product
        return (tp * tn - fp * fn) / math.sqrt(product)


class _BinaryScore(EvalMetric):
    """F1 and MCC: argmax predictions against 0/1 labels, counted into a local and a global
    ``_Confusion``. With ``average='macro'`` every update adds its own score as one instance
    (the counts start afresh for each update); with ``'micro'`` the counts pool over updates
    and the value is the score of the pooled counts (``num_inst`` is then the sample count)."""

    _score_name = None  # the _Confusion method that gives the score

    def __init__(self, name, output_names, label_names, average):
        self.average = average
        self._counts = None
        super().__init__(name=name, output_names=output_names, label_names=label_names,
                         has_global_stats=True, average=average)

    def reset(self):
        self._counts = (_Confusion(), _Confusion())
        super().reset()

    def reset_local(self):
        self._counts = (_Confusion(), self._counts[1])
        super().reset_local()

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        local, overall = self._counts
        for label, pred in zip(labels, preds):
            scores, truth = _as_numpy(pred), _as_numpy(label).astype("int32")
            check_label_shapes(truth, scores)
            if len(numpy.unique(truth)) > 2:
                raise ValueError("%s currently only supports binary classification."
                                 % type(self).__name__)
            predicted_pos, actual_pos = numpy.argmax(scores, axis=1) == 1, truth.ravel() == 1
            local.count(predicted_pos, actual_pos)
            overall.count(predicted_pos, actual_pos)
        local_score = getattr(local, self._score_name)()
        overall_score = getattr(overall, self._score_name)()
        if self.average == "macro":
            self._add(local_score, 1)
            self._counts = (_Confusion(), _Confusion())
        else:
            self.sum_metric, self.num_inst = local_score * local.total, local.total
            self.global_sum_metric, self.global_num_inst = overall_score * overall.total, overall.total


@register
class F1(_BinaryScore):
    """Binary F1 score of argmax predictions. ``average='macro'`` averages the per-update
    scores (``num_inst`` counts updates); ``'micro'`` pools the counts (``num_inst`` counts
    samples)."""

    _score_name = "f1"

    def __init__(self, name="f1", output_names=None, label_names=None, average="macro"):
        super().__init__(name, output_names, label_names, average)


@register
class MCC(_BinaryScore):
    """Binary Matthews correlation coefficient, 'macro' (per update) or 'micro' (pooled)."""

    _score_name = "mcc"
    _empty_count = 0.0
    _average = property(lambda self: self.average)  # MXNet's attribute name for MCC

    def __init__(self, name="mcc", output_names=None, label_names=None, average="macro"):
        super().__init__(name, output_names, label_names, average)


@register
class Perplexity(EvalMetric):
    """``exp(-sum(log p[label]) / n)`` over the predictions' class ``axis``.

    Out-of-range labels are clipped to the valid classes (as MXNet's ``pick``); positions
    whose label equals ``ignore_label`` do not count.
    """

    def __init__(self, ignore_label, axis=-1, name="perplexity", output_names=None,
                 label_names=None):
        super().__init__(name, ignore_label=ignore_label, output_names=output_names,
                         label_names=label_names, has_global_stats=True)
        self.ignore_label = ignore_label
        self.axis = axis

    def update(self, labels, preds):
        if isinstance(labels, _ARRAY_TYPES):
            labels = [labels]
        if isinstance(preds, _ARRAY_TYPES):
            preds = [preds]
        if len(labels) != len(preds):
            raise AssertionError("Perplexity: %d labels but %d predictions"
                                 % (len(labels), len(preds)))
        loss = 0.0
        num = 0
        for label, pred in zip(labels, preds):
            label = _as_numpy(label)
            pred = _as_numpy(pred)
            if label.size != pred.size / pred.shape[-1]:
                raise AssertionError("shape mismatch: %s vs. %s" % (label.shape, pred.shape))
            label = label.reshape((label.size,))
            classes = numpy.moveaxis(pred, self.axis, -1)
            classes = classes.reshape((-1, classes.shape[-1]))
            index = numpy.clip(label.astype("int32"), 0, classes.shape[1] - 1)
            picked = classes[numpy.arange(classes.shape[0]), index]
            if self.ignore_label is not None:
                ignore = (label == self.ignore_label).astype(picked.dtype)
                num -= float(ignore.sum())
                picked = picked * (1 - ignore) + ignore
            floor = numpy.asarray(1e-10, dtype=picked.dtype)
            loss -= float(numpy.log(numpy.maximum(floor, picked)).sum())
            num += picked.size
        self._add(loss, num)

    def _value(self, total, count):
        return math.exp(total / count)


class _RegressionError(_PairwiseMetric):
    """MAE, MSE and RMSE: every (label, prediction) pair adds its ``_error`` of ``label - pred``
    as one instance, so the value is the mean over pairs of a per-pair mean. A 1-D array is
    read as a column of shape (n, 1) before the subtraction."""

    def __init__(self, name, output_names, label_names):
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    @staticmethod
    def _error(diff):
        raise NotImplementedError

    def _score(self, label, pred):
        label, pred = (a.reshape(a.shape[0], 1) if a.ndim == 1 else a for a in (label, pred))
        return float(self._error(label - pred)), 1


def _regression_metric(class_name, default_name, error, doc):
    """A registered ``_RegressionError`` class: ``error`` maps ``label - pred`` to the pair's
    error; only the metric's default name differs in the constructor."""

    def __init__(self, name=default_name, output_names=None, label_names=None):
        _RegressionError.__init__(self, name, output_names, label_names)

    __init__.__qualname__ = class_name + ".__init__"
    return register(type(class_name, (_RegressionError,), {
        "__doc__": doc, "__module__": __name__, "__init__": __init__,
        "_error": staticmethod(error)}))


MAE = _regression_metric(
    "MAE", "mae", lambda diff: numpy.abs(diff).mean(),
    "Mean absolute error, averaged over updates (each update's mean counts once).")
MSE = _regression_metric(
    "MSE", "mse", lambda diff: (diff ** 2.0).mean(),
    "Mean squared error, averaged over updates.")
RMSE = _regression_metric(
    "RMSE", "rmse", lambda diff: numpy.sqrt((diff ** 2.0).mean()),
    "Root mean squared error per update, averaged over updates.")


class _PickedLogLoss(_PairwiseMetric):
    """Sum of ``-log(pred[i, label[i]] + eps)`` over the rows of each prediction, one instance
    per row."""

    def __init__(self, eps, name, output_names, label_names):
        super().__init__(name, eps=eps, output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self.eps = eps

    def _score(self, label, pred):
        label = label.ravel()
        rows = pred.shape[0]
        if label.shape[0] != rows:
            raise AssertionError("label has %d entries but pred has %d rows (shapes %s, %s)"
                                 % (label.shape[0], rows, label.shape, pred.shape))
        chosen = pred[numpy.arange(rows, dtype=numpy.int64), numpy.int64(label)]
        return float((-numpy.log(chosen + self.eps)).sum()), rows


@register
@alias("ce")
class CrossEntropy(_PickedLogLoss):
    """Mean of ``-log(p[label] + eps)`` over samples."""

    def __init__(self, eps=1e-12, name="cross-entropy", output_names=None, label_names=None):
        super().__init__(eps, name, output_names, label_names)


@register
@alias("nll_loss")
class NegativeLogLikelihood(_PickedLogLoss):
    """Mean negative log-likelihood ``-log(p[label] + eps)`` over samples."""

    def __init__(self, eps=1e-12, name="nll-loss", output_names=None, label_names=None):
        super().__init__(eps, name, output_names, label_names)


class _PooledMoments:
    """Running count, means, sums of squared deviations and co-deviation of two streams
    (MXNet's incremental update order, float64)."""

    def __init__(self):
        self.count_l = self.mean_l = self.sse_l = 0
        self.count_p = self.mean_p = self.sse_p = 0
        self.conv = 0

    @staticmethod
    def _variance(values, count, mean, m_2):
        count += len(values)
        delta = values - mean
        mean += numpy.sum(delta / count)
        m_2 += numpy.sum(delta * (values - mean))
        return count, mean, m_2

    def update(self, label, pred):
        self.count_l, self.mean_l, self.sse_l = self._variance(label, self.count_l,
                                                               self.mean_l, self.sse_l)
        self.conv = self.conv + numpy.sum((label - self.mean_l) * (pred - self.mean_p))
        self.count_p, self.mean_p, self.sse_p = self._variance(pred, self.count_p,
                                                               self.mean_p, self.sse_p)

    def pearsonr(self):
        n = self.count_l
        return float(self.conv / ((n - 1) * numpy.sqrt(self.sse_p / (n - 1))
                                  * numpy.sqrt(self.sse_l / (n - 1))))


@register
@alias("pearsonr")
class PearsonCorrelation(EvalMetric):
    """Pearson correlation of flattened predictions and labels: 'macro' averages the
    per-update coefficients, 'micro' pools all samples (MXNet's running update formulas)."""

    def __init__(self, name="pearsonr", output_names=None, label_names=None, average="macro"):
        self.average = average
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True, average=average)

    def reset(self):
        self._local, self._global = _PooledMoments(), _PooledMoments()
        super().reset()

    def reset_local(self):
        self._local = _PooledMoments()
        super().reset_local()

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label = _as_numpy(label)
            pred = _as_numpy(pred)
            check_label_shapes(label, pred, False, True)
            label = label.ravel().astype(numpy.float64)
            pred = pred.ravel().astype(numpy.float64)
            if self.average == "macro":
                self._add(float(numpy.corrcoef(pred, label)[0, 1]), 1)
            else:
                self.num_inst += 1
                self.global_num_inst += 1
                self._local.update(label, pred)
                self._global.update(label, pred)

    def get(self):
        if self.average == "micro" and self.num_inst:
            return (self.name, self._local.pearsonr())
        return super().get()

    def get_global(self):
        if self.average == "micro" and self.global_num_inst:
            return (self.name, self._global.pearsonr())
        return super().get_global()


def _gorodkin(confusion):
    """Multiclass correlation of a confusion matrix (rows: predicted, columns: true class).
    Its entries are whole counts, so the integer identities used below are exact in float64;
    NaN when either marginal is concentrated in a single class."""
    total = confusion.sum()
    predicted, actual = confusion.sum(axis=1), confusion.sum(axis=0)
    spread_pred = total * total - numpy.dot(predicted, predicted)
    spread_true = total * total - numpy.dot(actual, actual)
    if spread_pred == 0 or spread_true == 0:
        return float("nan")
    agreement = total * numpy.trace(confusion) - numpy.dot(predicted, actual)
    return float(agreement / (spread_pred * spread_true) ** 0.5)


@register
class PCC(EvalMetric):
    """Multiclass Pearson ("Gorodkin") correlation from a confusion matrix that grows with the
    largest class seen; equals MCC for two classes. ``num_inst`` counts updates, and the
    value is always that of the whole accumulated matrix (local or global)."""

    _empty_count = 0.0

    def __init__(self, name="pcc", output_names=None, label_names=None, has_global_stats=True):
        self.k = 2
        super().__init__(name=name, output_names=output_names, label_names=label_names,
                         has_global_stats=has_global_stats)

    def _widen(self, classes):
        """Make room in both matrices for class codes up to ``classes - 1``."""
        extra = classes - self.k
        if extra > 0:
            self.lcm, self.gcm = (numpy.pad(m, ((0, extra), (0, extra))) for m in (self.lcm, self.gcm))
            self.k = classes

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            truth = _as_numpy(label).astype("int32")
            guess = _as_numpy(pred)
            guess = guess.argmax(axis=1) if guess.shape != truth.shape else guess.astype("int32")
            guess, truth = guess.ravel(), truth.ravel()
            self._widen(int(max(guess.max(), truth.max())) + 1)
            for matrix in (self.lcm, self.gcm):
                numpy.add.at(matrix, (guess, truth), 1)
        self.num_inst += 1
        self.global_num_inst += 1

    # the sums are derived from the matrices, so that get() = sum / count is the matrix's value
    @property
    def sum_metric(self):
        return _gorodkin(self.lcm) * self.num_inst

    @property
    def global_sum_metric(self):
        return _gorodkin(self.gcm) * self.global_num_inst

    def reset(self):
        self.gcm = numpy.zeros((self.k, self.k))
        self.global_num_inst = self._empty_count
        self.reset_local()

    def reset_local(self):
        self.lcm = numpy.zeros((self.k, self.k))
        self.num_inst = self._empty_count


@register
class Loss(EvalMetric):
    """Mean of the prediction values (for loss outputs); labels are ignored."""

    def __init__(self, name="loss", output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    def update(self, _, preds):
        for pred in ([preds] if isinstance(preds, _ARRAY_TYPES) else preds):
            values = _as_numpy(pred)
            self._add(float(values.sum()), values.size)


@register
class Torch(Loss):
    """Loss metric under MXNet's legacy name 'torch'."""

    def __init__(self, name="torch", output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names)


@register
class Caffe(Loss):
    """Loss metric under MXNet's legacy name 'caffe'."""

    def __init__(self, name="caffe", output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names)


@register
class CustomMetric(EvalMetric):
    """A metric from ``feval(label, pred)`` on numpy arrays, returning either a value (one
    instance) or a ``(sum_metric, num_inst)`` pair."""

    def __init__(self, feval, name=None, allow_extra_outputs=False, output_names=None,
                 label_names=None):
        if name is None:
            name = feval.__name__
            if "<" in name:
                name = "custom(%s)" % name
        super().__init__(name, feval=feval, allow_extra_outputs=allow_extra_outputs,
                         output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self._feval = feval
        self._allow_extra_outputs = allow_extra_outputs

    def update(self, labels, preds):
        if not self._allow_extra_outputs:
            labels, preds = check_label_shapes(labels, preds, True)
        for pred, label in zip(preds, labels):
            result = self._feval(_as_numpy(label), _as_numpy(pred))
            self._add(*(result if isinstance(result, tuple) else (result, 1)))

    def get_config(self):
        # a Python function has no JSON form; MXNet refuses the same way
        raise NotImplementedError("CustomMetric cannot be serialized")


def np(numpy_feval, name=None, allow_extra_outputs=False):
    """Turn ``numpy_feval(label, pred)`` into a CustomMetric (usable as a decorator)."""
    def feval(label, pred):
        return numpy_feval(label, pred)
    feval.__name__ = numpy_feval.__name__
    return CustomMetric(feval, name, allow_extra_outputs)
