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

Where MXNet 1.9.1 is wrong lightmod is right, and says so: ``get_config()`` of F1, MCC and
PearsonCorrelation includes ``average`` (MXNet drops it, so a JSON round trip silently went
back to 'macro'); TopKAccuracy does not append its ``_k`` suffix twice when recreated from its
config; PearsonCorrelation(average='micro') keeps separate local and global pooled
statistics (MXNet's ``get_global()`` returned 0.0 and ``reset_local()`` did not clear the
pooled sums); TopKAccuracy counts 1-D predictions in the global sum too;
``CompositeEvalMetric.get_metric`` raises ValueError for a bad index instead of returning it.
"""
import math
from collections import OrderedDict

import numpy

from . import registry
from .base import numeric_types, string_types
from .ndarray.ndarray import NDArray

__all__ = ["EvalMetric", "CompositeEvalMetric", "Accuracy", "TopKAccuracy", "F1", "MCC",
           "Perplexity", "MAE", "MSE", "RMSE", "CrossEntropy", "NegativeLogLikelihood",
           "PearsonCorrelation", "PCC", "Loss", "Torch", "Caffe", "CustomMetric", "np",
           "create", "register", "alias", "check_label_shapes"]

_ARRAY_TYPES = (NDArray, numpy.ndarray)


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
        raise ValueError("Shape of labels {} does not match shape of predictions {}"
                         .format(label_shape, pred_shape))
    if wrap:
        if isinstance(labels, _ARRAY_TYPES):
            labels = [labels]
        if isinstance(preds, _ARRAY_TYPES):
            preds = [preds]
    return labels, preds


class EvalMetric:
    """Base class of metrics: ``update(labels, preds)`` accumulates, ``get()`` reports.

    ``output_names``/``label_names`` select, in ``update_dict``, which named outputs and
    labels the metric sees. Extra constructor keywords are kept in ``_kwargs`` and reported
    by ``get_config()``, whose dict recreates the metric through ``create(**config)`` or,
    as JSON, ``create(json_string)``.
    """

    def __init__(self, name, output_names=None, label_names=None, **kwargs):
        self.name = str(name)
        self.output_names = output_names
        self.label_names = label_names
        self._has_global_stats = kwargs.pop("has_global_stats", False)
        self._kwargs = kwargs
        self.reset()

    def __str__(self):
        return "EvalMetric: {}".format(dict(self.get_name_value()))

    def get_config(self):
        """The constructor arguments plus ``metric`` (the class name)."""
        config = self._kwargs.copy()
        config.update({"metric": type(self).__name__, "name": self.name,
                       "output_names": self.output_names, "label_names": self.label_names})
        return config

    def update_dict(self, label, pred):
        """Update from dicts ``{name: array}`` (filtered by label_names/output_names)."""
        if self.output_names is not None:
            pred = [pred[name] for name in self.output_names]
        else:
            pred = list(pred.values())
        if self.label_names is not None:
            label = [label[name] for name in self.label_names]
        else:
            label = list(label.values())
        self.update(label, pred)

    def update(self, labels, preds):
        """Accumulate one batch; every concrete metric implements it."""
        raise NotImplementedError("%s does not implement update()" % type(self).__name__)

    def reset(self):
        """Clear the local and the global accumulators."""
        self.num_inst = 0
        self.sum_metric = 0.0
        self.global_num_inst = 0
        self.global_sum_metric = 0.0

    def reset_local(self):
        """Clear the local accumulators only."""
        self.num_inst = 0
        self.sum_metric = 0.0

    def get(self):
        """``(name, value)`` of the local accumulators; NaN before any update."""
        if self.num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, self.sum_metric / self.num_inst)

    def get_global(self):
        """``(name, value)`` of the global accumulators (local ones if the metric keeps
        none)."""
        if self._has_global_stats:
            if self.global_num_inst == 0:
                return (self.name, float("nan"))
            return (self.name, self.global_sum_metric / self.global_num_inst)
        return self.get()

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


register = registry.get_register_func(EvalMetric, "metric")
alias = registry.get_alias_func(EvalMetric, "metric")
_create = registry.get_create_func(EvalMetric, "metric")


def create(metric, *args, **kwargs):
    """Build a metric from a name ('acc', 'f1', ...), a JSON config string, a config dict,
    an EvalMetric (returned as is), a callable ``feval(label, pred)`` (→ CustomMetric) or a
    list of any of these (→ CompositeEvalMetric)."""
    if callable(metric):
        return CustomMetric(metric, *args, **kwargs)
    if isinstance(metric, list):
        composite = CompositeEvalMetric()
        for child in metric:
            composite.add(create(child, *args, **kwargs))
        return composite
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
            raise ValueError("Metric index {} is out of range 0 and {}"
                             .format(index, len(self.metrics))) from None

    def update_dict(self, labels, preds):
        if self.label_names is not None:
            labels = OrderedDict([i for i in labels.items() if i[0] in self.label_names])
        if self.output_names is not None:
            preds = OrderedDict([i for i in preds.items() if i[0] in self.output_names])
        for metric in self.metrics:
            metric.update_dict(labels, preds)

    def update(self, labels, preds):
        for metric in self.metrics:
            metric.update(labels, preds)

    def reset(self):
        for metric in self.metrics:
            metric.reset()

    def reset_local(self):
        for metric in self.metrics:
            metric.reset_local()

    @staticmethod
    def _collect(results):
        names, values = [], []
        for name, value in results:
            if isinstance(name, string_types):
                name = [name]
            if isinstance(value, numeric_types):
                value = [value]
            names.extend(name)
            values.extend(value)
        return (names, values)

    def get(self):
        return self._collect(m.get() for m in self.metrics)

    def get_global(self):
        return self._collect(m.get_global() for m in self.metrics)

    def get_config(self):
        config = super().get_config()
        config.update({"metrics": [m.get_config() for m in self.metrics]})
        return config


@register
@alias("acc")
class Accuracy(EvalMetric):
    """Fraction of correct predictions. A prediction whose shape differs from the label's is
    reduced with argmax over ``axis``; both are then cast to int32 and flattened."""

    def __init__(self, axis=1, name="accuracy", output_names=None, label_names=None):
        super().__init__(name, axis=axis, output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self.axis = axis

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            pred = _as_numpy(pred)
            label = _as_numpy(label)
            if pred.shape != label.shape:
                pred = numpy.argmax(pred, axis=self.axis)
            pred = pred.astype("int32").ravel()
            label = label.astype("int32").ravel()
            check_label_shapes(label, pred)
            self._add(int((pred == label).sum()), len(pred))


@register
@alias("top_k_accuracy", "top_k_acc")
class TopKAccuracy(EvalMetric):
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

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            pred = _as_numpy(pred)
            if pred.ndim > 2:
                raise AssertionError("Predictions should be no more than 2 dims (got shape %s)"
                                     % (pred.shape,))
            ranked = numpy.argpartition(pred.astype("float32"), -self.top_k)
            label = _as_numpy(label).astype("int32")
            check_label_shapes(label, ranked)
            num_samples = ranked.shape[0]
            if ranked.ndim == 1:
                correct = int((ranked.ravel() == label.ravel()).sum())
            else:
                num_classes = ranked.shape[1]
                top_k = min(num_classes, self.top_k)
                correct = 0
                for j in range(top_k):
                    correct += int((ranked[:, num_classes - 1 - j] == label.ravel()).sum())
            self._add(correct, num_samples)


class _BinaryClassificationMetrics:
    """Confusion-matrix counts (local and global) for binary F1 and MCC."""

    def __init__(self):
        self.reset_stats()

    def update_binary_stats(self, label, pred):
        pred = _as_numpy(pred)
        label = _as_numpy(label).astype("int32")
        pred_label = numpy.argmax(pred, axis=1)
        check_label_shapes(label, pred)
        if len(numpy.unique(label)) > 2:
            raise ValueError("%s currently only supports binary classification."
                             % type(self).__name__)
        pred_true = pred_label == 1
        label_true = label.ravel() == 1
        pred_false = ~pred_true
        label_false = ~label_true
        true_pos = int((pred_true & label_true).sum())
        false_pos = int((pred_true & label_false).sum())
        false_neg = int((pred_false & label_true).sum())
        true_neg = int((pred_false & label_false).sum())
        self.true_positives += true_pos
        self.global_true_positives += true_pos
        self.false_positives += false_pos
        self.global_false_positives += false_pos
        self.false_negatives += false_neg
        self.global_false_negatives += false_neg
        self.true_negatives += true_neg
        self.global_true_negatives += true_neg

    @staticmethod
    def _ratio(num, other):
        return float(num) / (num + other) if num + other > 0 else 0.0

    @property
    def precision(self):
        return self._ratio(self.true_positives, self.false_positives)

    @property
    def global_precision(self):
        return self._ratio(self.global_true_positives, self.global_false_positives)

    @property
    def recall(self):
        return self._ratio(self.true_positives, self.false_negatives)

    @property
    def global_recall(self):
        return self._ratio(self.global_true_positives, self.global_false_negatives)

    @staticmethod
    def _f(precision, recall):
        if precision + recall > 0:
            return 2 * precision * recall / (precision + recall)
        return 0.0

    @property
    def fscore(self):
        return self._f(self.precision, self.recall)

    @property
    def global_fscore(self):
        return self._f(self.global_precision, self.global_recall)

    def f1(self, use_global=False):
        """``fscore`` or, with ``use_global``, ``global_fscore``."""
        return self.global_fscore if use_global else self.fscore

    def matthewscc(self, use_global=False):
        """Matthews correlation coefficient; zero factors of the denominator are skipped and
        no samples give 0."""
        if use_global:
            if not self.global_total_examples:
                return 0.0
            tp, fp = float(self.global_true_positives), float(self.global_false_positives)
            fn, tn = float(self.global_false_negatives), float(self.global_true_negatives)
        else:
            if not self.total_examples:
                return 0.0
            tp, fp = float(self.true_positives), float(self.false_positives)
            fn, tn = float(self.false_negatives), float(self.true_negatives)
        denom = 1.0
        for term in (tp + fp, tp + fn, tn + fp, tn + fn):
            if term != 0.0:
                denom *= term
        return ((tp * tn) - (fp * fn)) / math.sqrt(denom)

    @property
    def total_examples(self):
        return (self.false_negatives + self.false_positives + self.true_negatives
                + self.true_positives)

    @property
    def global_total_examples(self):
        return (self.global_false_negatives + self.global_false_positives
                + self.global_true_negatives + self.global_true_positives)

    def local_reset_stats(self):
        self.false_positives = 0
        self.false_negatives = 0
        self.true_positives = 0
        self.true_negatives = 0

    def reset_stats(self):
        self.local_reset_stats()
        self.global_false_positives = 0
        self.global_false_negatives = 0
        self.global_true_positives = 0
        self.global_true_negatives = 0


def _binary_update(metric, stats, average, labels, preds, score):
    """``update`` of F1 and MCC: count the batch into ``stats`` (a
    _BinaryClassificationMetrics), then 'macro' adds this update's ``score(stats, use_global)``
    as one instance and clears the counts, 'micro' reports the pooled score times the pooled
    number of samples."""
    labels, preds = check_label_shapes(labels, preds, True)
    for label, pred in zip(labels, preds):
        stats.update_binary_stats(label, pred)
    if average == "macro":
        metric.sum_metric += score(stats, False)
        metric.global_sum_metric += score(stats, True)
        metric.num_inst += 1
        metric.global_num_inst += 1
        stats.reset_stats()
    else:
        metric.sum_metric = score(stats, False) * stats.total_examples
        metric.global_sum_metric = score(stats, True) * stats.global_total_examples
        metric.num_inst = stats.total_examples
        metric.global_num_inst = stats.global_total_examples


@register
class F1(EvalMetric):
    """Binary F1 score of argmax predictions. ``average='macro'`` averages the per-update
    scores (``num_inst`` counts updates); ``'micro'`` pools the counts (``num_inst`` counts
    samples)."""

    def __init__(self, name="f1", output_names=None, label_names=None, average="macro"):
        self.average = average
        self.metrics = _BinaryClassificationMetrics()
        super().__init__(name=name, output_names=output_names, label_names=label_names,
                         has_global_stats=True, average=average)

    def update(self, labels, preds):
        _binary_update(self, self.metrics, self.average, labels, preds,
                       _BinaryClassificationMetrics.f1)

    def reset(self):
        self.sum_metric = 0.0
        self.num_inst = 0
        self.global_num_inst = 0
        self.global_sum_metric = 0.0
        self.metrics.reset_stats()

    def reset_local(self):
        self.sum_metric = 0.0
        self.num_inst = 0
        self.metrics.local_reset_stats()


@register
class MCC(EvalMetric):
    """Binary Matthews correlation coefficient, 'macro' (per update) or 'micro' (pooled)."""

    def __init__(self, name="mcc", output_names=None, label_names=None, average="macro"):
        self._average = average
        self._metrics = _BinaryClassificationMetrics()
        super().__init__(name=name, output_names=output_names, label_names=label_names,
                         has_global_stats=True, average=average)

    def update(self, labels, preds):
        _binary_update(self, self._metrics, self._average, labels, preds,
                       _BinaryClassificationMetrics.matthewscc)

    def reset(self):
        self.sum_metric = 0.0
        self.num_inst = 0.0
        self.global_sum_metric = 0.0
        self.global_num_inst = 0.0
        self._metrics.reset_stats()

    def reset_local(self):
        self.sum_metric = 0.0
        self.num_inst = 0.0
        self._metrics.local_reset_stats()


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

    def get(self):
        if self.num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, math.exp(self.sum_metric / self.num_inst))

    def get_global(self):
        if self.global_num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, math.exp(self.global_sum_metric / self.global_num_inst))


def _add_per_pair(metric, labels, preds, error):
    """``update`` of MAE, MSE and RMSE: each (label, prediction) pair adds
    ``error(label, pred)`` as one instance; 1-D arrays are taken as (n, 1) columns."""
    labels, preds = check_label_shapes(labels, preds, True)
    for label, pred in zip(labels, preds):
        label = _as_numpy(label)
        pred = _as_numpy(pred)
        if label.ndim == 1:
            label = label.reshape(label.shape[0], 1)
        if pred.ndim == 1:
            pred = pred.reshape(pred.shape[0], 1)
        metric._add(float(error(label, pred)), 1)


@register
class MAE(EvalMetric):
    """Mean absolute error, averaged over updates (each update's mean counts once)."""

    def __init__(self, name="mae", output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    def update(self, labels, preds):
        _add_per_pair(self, labels, preds, lambda label, pred: numpy.abs(label - pred).mean())


@register
class MSE(EvalMetric):
    """Mean squared error, averaged over updates."""

    def __init__(self, name="mse", output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    def update(self, labels, preds):
        _add_per_pair(self, labels, preds, lambda label, pred: ((label - pred) ** 2.0).mean())


@register
class RMSE(EvalMetric):
    """Root mean squared error per update, averaged over updates."""

    def __init__(self, name="rmse", output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    def update(self, labels, preds):
        _add_per_pair(self, labels, preds, lambda label, pred: numpy.sqrt(((label - pred) ** 2.0).mean()))


def _picked_log_loss(label, pred, eps):
    """``sum(-log(pred[i, label[i]] + eps))`` and the number of samples."""
    label = _as_numpy(label).ravel()
    pred = _as_numpy(pred)
    num = pred.shape[0]
    if label.shape[0] != num:
        raise AssertionError("label has %d entries but pred has %d rows (shapes %s, %s)"
                             % (label.shape[0], num, label.shape, pred.shape))
    prob = pred[numpy.arange(num, dtype=numpy.int64), numpy.int64(label)]
    return float((-numpy.log(prob + eps)).sum()), num


@register
@alias("ce")
class CrossEntropy(EvalMetric):
    """Mean of ``-log(p[label] + eps)`` over samples."""

    def __init__(self, eps=1e-12, name="cross-entropy", output_names=None, label_names=None):
        super().__init__(name, eps=eps, output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self.eps = eps

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            self._add(*_picked_log_loss(label, pred, self.eps))


@register
@alias("nll_loss")
class NegativeLogLikelihood(EvalMetric):
    """Mean negative log-likelihood ``-log(p[label] + eps)`` over samples."""

    def __init__(self, eps=1e-12, name="nll-loss", output_names=None, label_names=None):
        super().__init__(name, eps=eps, output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self.eps = eps

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            self._add(*_picked_log_loss(label, pred, self.eps))


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
        super().reset()
        if self.average == "micro":
            self._local = _PooledMoments()
            self._global = _PooledMoments()

    def reset_local(self):
        super().reset_local()
        if self.average == "micro":
            self._local = _PooledMoments()

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
        if self.num_inst == 0:
            return (self.name, float("nan"))
        if self.average == "macro":
            return (self.name, self.sum_metric / self.num_inst)
        return (self.name, self._local.pearsonr())

    def get_global(self):
        if self.global_num_inst == 0:
            return (self.name, float("nan"))
        if self.average == "macro":
            return (self.name, self.global_sum_metric / self.global_num_inst)
        return (self.name, self._global.pearsonr())


@register
class PCC(EvalMetric):
    """Multiclass Pearson ("Gorodkin") correlation from a confusion matrix that grows with the
    largest class seen; equals MCC for two classes. ``num_inst`` counts updates."""

    def __init__(self, name="pcc", output_names=None, label_names=None, has_global_stats=True):
        self.k = 2
        super().__init__(name=name, output_names=output_names, label_names=label_names,
                         has_global_stats=has_global_stats)

    def _grow(self, inc):
        self.lcm = numpy.pad(self.lcm, ((0, inc), (0, inc)), "constant", constant_values=0)
        self.gcm = numpy.pad(self.gcm, ((0, inc), (0, inc)), "constant", constant_values=0)
        self.k += inc

    @staticmethod
    def _calc_mcc(cmat):
        n = cmat.sum()
        x = cmat.sum(axis=1)
        y = cmat.sum(axis=0)
        cov_xx = numpy.sum(x * (n - x))
        cov_yy = numpy.sum(y * (n - y))
        if cov_xx == 0 or cov_yy == 0:
            return float("nan")
        i = cmat.diagonal()
        cov_xy = numpy.sum(i * n - x * y)
        return float(cov_xy / (cov_xx * cov_yy) ** 0.5)

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label = _as_numpy(label).astype("int32")
            pred = _as_numpy(pred)
            if pred.shape != label.shape:
                pred = pred.argmax(axis=1)
            else:
                pred = pred.astype("int32")
            pred = pred.ravel()
            label = label.ravel()
            n = max(pred.max(), label.max())
            if n >= self.k:
                self._grow(int(n) + 1 - self.k)
            batch_cm = numpy.zeros((self.k, self.k))
            numpy.add.at(batch_cm, (pred, label), 1)
            self.lcm += batch_cm
            self.gcm += batch_cm
        self.num_inst += 1
        self.global_num_inst += 1

    @property
    def sum_metric(self):
        return self._calc_mcc(self.lcm) * self.num_inst

    @property
    def global_sum_metric(self):
        return self._calc_mcc(self.gcm) * self.global_num_inst

    def reset(self):
        self.global_num_inst = 0.0
        self.gcm = numpy.zeros((self.k, self.k))
        self.reset_local()

    def reset_local(self):
        self.num_inst = 0.0
        self.lcm = numpy.zeros((self.k, self.k))


@register
class Loss(EvalMetric):
    """Mean of the prediction values (for loss outputs); labels are ignored."""

    def __init__(self, name="loss", output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    def update(self, _, preds):
        if isinstance(preds, _ARRAY_TYPES):
            preds = [preds]
        for pred in preds:
            pred = _as_numpy(pred)
            self._add(float(pred.sum()), pred.size)


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
            if name.find("<") != -1:
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
            reval = self._feval(_as_numpy(label), _as_numpy(pred))
            if isinstance(reval, tuple):
                sum_metric, num_inst = reval
                self._add(sum_metric, num_inst)
            else:
                self._add(reval, 1)

    def get_config(self):
        # a Python function has no JSON form; MXNet refuses the same way
        raise NotImplementedError("CustomMetric cannot be serialized")


def np(numpy_feval, name=None, allow_extra_outputs=False):
    """Turn ``numpy_feval(label, pred)`` into a CustomMetric (usable as a decorator)."""
    def feval(label, pred):
        return numpy_feval(label, pred)
    feval.__name__ = numpy_feval.__name__
    return CustomMetric(feval, name, allow_extra_outputs)
