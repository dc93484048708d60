"""mx.metric: the behaviours of MXNet 1.9.1's test_metric.py plus golden values MXNet produced
(tests/fixtures/make_init_metric_golden.py) for every metric, macro and micro."""
import copy
import json
import math
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lightmod as mx
from lightmod import metric as M

GOLDEN = json.load(open(os.path.join(os.path.dirname(__file__), "fixtures",
                                     "init_metric_golden.json")))["metrics"]


def nd(x, dtype="float32"):
    return mx.nd.array(np.asarray(x), dtype=dtype)


# ---------------------------------------------------------------------------------------------
# golden values
# ---------------------------------------------------------------------------------------------
def _golden_inputs(key):
    return [([np.asarray(l, np.float32) for l in labels], [np.asarray(p, np.float32)
                                                           for p in preds])
            for labels, preds in GOLDEN["inputs"][key]]


def _close(a, b, exact):
    if math.isnan(b):
        return math.isnan(a)
    return a == b if exact else abs(a - b) <= 1e-6 * max(1.0, abs(b))


# float32 sums whose order can differ between MXNet's reductions and numpy's: compare to
# 1e-6 relative; everything else must be bit-identical
INEXACT = {"perplexity_none", "perplexity_ignore0", "loss"}


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=[c["id"] for c in GOLDEN["cases"]])
@pytest.mark.parametrize("as_numpy", [False, True])
def test_metric_golden(case, as_numpy):
    metric = M.create(*case["args"], **case["kwargs"])
    exact = case["id"] not in INEXACT
    rec = case["record"]
    for i, (labels, preds) in enumerate(_golden_inputs(case["inputs"])):
        if not as_numpy:
            labels, preds = [nd(l) for l in labels], [nd(p) for p in preds]
        metric.update(labels, preds)
        checks = [(metric.get_name_value(), rec["name_value"][i])]
        if case["id"] == "pearsonr_micro":
            # MXNet's micro get_global() is always 0.0; lightmod's is the pooled value, which
            # equals the local one while reset_local() is never called
            assert metric.get_global_name_value() == metric.get_name_value()
        else:
            checks.append((metric.get_global_name_value(), rec["global_name_value"][i]))
        for got, want in checks:
            assert [n for n, _ in got] == [n for n, _ in want]
            for (_, g), (_, w) in zip(got, want):
                assert _close(g, w, exact), (case["id"], i, got, want)
        if case["id"] != "composite":
            assert float(metric.num_inst) == rec["num_inst"][i]
        if case["reset_local_after"] == i:
            metric.reset_local()
            assert all(math.isnan(v) for _, v in metric.get_name_value())
    if case["config"] is not None:
        config = metric.get_config()
        if case["args"][0] in ("f1", "mcc", "pearsonr"):
            # lightmod keeps `average` in the config (MXNet drops it); otherwise identical
            assert config.pop("average") == case["kwargs"].get("average", "macro")
        assert config == case["config"]


def test_small_golden_cases():
    pred = nd([[0.8, 0.2], [0.2, 0.8], [0, 1.]])
    label = nd([0, 1, 1])
    m = M.create("perplexity", -1)
    m.update([label], [pred])
    assert m.get()[1] == GOLDEN["perplexity_small"]
    # MXNet's test: exp(-sum(log p)/N) with the float32 sum
    p = pred.asnumpy()[np.arange(3), [0, 1, 1]]
    assert m.get()[1] == math.exp(-float(np.log(p).sum()) / 3)
    m = M.create("loss")
    m.update(None, nd([[0.3, 0.7], [0, 1.], [0.4, 0.6]]))
    assert m.get()[1] == pytest.approx(GOLDEN["loss_bare"], rel=1e-7)
    for name in ("mse", "mae", "rmse"):
        m = M.create(name)
        pred = nd([[1, 2, 3, 4]])
        m.update(nd(pred.asnumpy() + np.float32(0.1)), pred)
        assert m.get()[1] == GOLDEN[name + "_bare"]
    m = M.create("acc")
    m.update([nd([[0, 1, 1], [1, 0, 1]])],
             [nd([[0.3, 0.7], [0, 1.], [0.4, 0.6], [0.8, 0.2], [0.3, 0.5], [0.6, 0.4]])])
    assert m.get()[1] == GOLDEN["acc_2d_label"]


# ---------------------------------------------------------------------------------------------
# test_metric.py behaviours
# ---------------------------------------------------------------------------------------------
def _check_roundtrip(metric, *args, **kwargs):
    metric = M.create(metric, *args, **kwargs)
    metric2 = M.create(json.dumps(metric.get_config()))
    assert metric.get_config() == metric2.get_config()
    assert type(metric2) is type(metric)
    return metric2


def test_create_and_config_roundtrip():
    assert _check_roundtrip("acc", axis=0).axis == 0
    _check_roundtrip("f1")
    assert _check_roundtrip("f1", average="micro").average == "micro"
    assert _check_roundtrip("mcc", average="micro")._average == "micro"
    assert _check_roundtrip("perplexity", -1).ignore_label == -1
    assert _check_roundtrip("pearsonr", average="micro").average == "micro"
    _check_roundtrip("pcc")
    _check_roundtrip("nll_loss")
    _check_roundtrip("loss")
    composite = M.create(["acc", "f1"])
    comp2 = _check_roundtrip(composite)
    assert [type(m) for m in comp2.metrics] == [M.Accuracy, M.F1]
    assert _check_roundtrip("top_k_accuracy", top_k=3).name == "top_k_accuracy_3"


def test_create_aliases_and_forms():
    expected = {"acc": M.Accuracy, "accuracy": M.Accuracy, "top_k_accuracy": M.TopKAccuracy,
                "top_k_acc": M.TopKAccuracy, "ce": M.CrossEntropy,
                "crossentropy": M.CrossEntropy, "nll_loss": M.NegativeLogLikelihood,
                "mse": M.MSE, "rmse": M.RMSE, "mae": M.MAE, "f1": M.F1, "mcc": M.MCC,
                "pearsonr": M.PearsonCorrelation, "pcc": M.PCC, "loss": M.Loss,
                "composite": M.CompositeEvalMetric, "torch": M.Torch, "caffe": M.Caffe}
    for name, klass in expected.items():
        args = (-1,) if name == "perplexity" else ()
        kwargs = {"top_k": 2} if "top_k" in name else {}
        assert type(M.create(name, *args, **kwargs)) is klass, name
    assert type(M.create("Perplexity", ignore_label=None)) is M.Perplexity
    assert type(M.create("ACC")) is M.Accuracy
    acc = M.Accuracy()
    assert M.create(acc) is acc
    with pytest.raises(AssertionError):
        M.create(acc, axis=0)
    with pytest.raises(AssertionError, match="not registered"):
        M.create("no_such_metric")
    custom = M.create(lambda label, pred: 0.5)
    assert isinstance(custom, M.CustomMetric) and custom.name == "custom(<lambda>)"
    comp = M.create(["acc", M.MSE(), "ce"])
    assert isinstance(comp, M.CompositeEvalMetric) and len(comp.metrics) == 3
    assert comp.get_metric(1).name == "mse"
    with pytest.raises(ValueError, match="out of range"):
        comp.get_metric(7)
    assert type(M.create({"metric": "mae", "name": "m"})) is M.MAE
    assert mx.metric is M


def test_register_custom_metric_class():
    @M.register
    class HalfAcc(M.Accuracy):
        pass

    assert type(M.create("halfacc")) is HalfAcc


def test_nll_loss_and_acc():
    pred = nd([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]])
    label = nd([2, 1])
    m = M.create("nll_loss")
    m.update([label], [pred])
    p = pred.asnumpy()
    expected = -(np.log(p[0, 2] + 1e-12) + np.log(p[1, 1] + 1e-12)) / 2
    assert m.get()[1] == pytest.approx(float(expected), rel=1e-7)
    pred = nd([[0.3, 0.7], [0, 1.], [0.4, 0.6]])
    label = nd([0, 1, 1])
    m = M.create("acc")
    m.update([label], [pred])
    assert m.get()[1] == 2 / 3
    # label and pred as bare arrays / class ids with the label's shape
    m = M.Accuracy()
    m.update(nd([1, 0, 2]), nd([1, 1, 2]))
    assert m.get() == ("accuracy", 2 / 3)
    with pytest.raises(ValueError, match="does not match"):
        M.Accuracy().update([nd([0, 1])], [nd([[0.1, 0.9]] * 3)])
    with pytest.raises(ValueError, match="does not match"):
        M.Accuracy().update([nd([0, 1])], [nd([[0.1, 0.9]] * 2)] * 2)


def test_loss_update_forms():
    pred = nd([[0.3, 0.7], [0, 1.], [0.4, 0.6]])
    m1, m2 = M.create("loss"), M.create("loss")
    m1.update(None, [pred])
    m2.update(None, pred)
    assert m1.get()[1] == m2.get()[1]
    assert m1.num_inst == 6


def test_f1_binary_macro_and_micro():
    micro = M.create("f1", average="micro")
    macro = M.F1(average="macro")
    assert np.isnan(macro.get()[1]) and np.isnan(micro.get()[1])
    pred = nd([[0.9, 0.1], [0.8, 0.2]])
    label = nd([0, 0])
    macro.update([label], [pred])
    micro.update([label], [pred])
    assert macro.get()[1] == 0.0 and micro.get()[1] == 0.0
    macro.reset()
    micro.reset()
    pred11, label11 = nd([[0.1, 0.9], [0.5, 0.5]]), nd([1, 0])
    pred12, label12 = nd([[0.85, 0.15], [1.0, 0.0]]), nd([1, 0])
    pred21, label21 = nd([[0.6, 0.4]]), nd([0])
    pred22, label22 = nd([[0.2, 0.8]]), nd([1])
    micro.update([label11, label12], [pred11, pred12])
    macro.update([label11, label12], [pred11, pred12])
    assert micro.num_inst == 4 and macro.num_inst == 1
    fscore1 = 2.0 * 1 / (2 * 1 + 1 + 0)
    assert micro.get()[1] == pytest.approx(fscore1) and macro.get()[1] == pytest.approx(fscore1)
    micro.update([label21, label22], [pred21, pred22])
    macro.update([label21, label22], [pred21, pred22])
    assert micro.num_inst == 6 and macro.num_inst == 2
    fscore2 = 2.0 * 1 / (2 * 1 + 0 + 0)
    fscore_total = 2.0 * (1 + 1) / (2 * (1 + 1) + (1 + 0) + (0 + 0))
    assert micro.get()[1] == pytest.approx(fscore_total)
    assert macro.get()[1] == pytest.approx((fscore1 + fscore2) / 2)
    # the message names the metric (MXNet's named its private helper class)
    with pytest.raises(ValueError, match="^F1 currently only supports binary"):
        M.F1().update([nd([0, 1, 2])], [nd([[0.5, 0.5]] * 3)])
    with pytest.raises(ValueError, match="^MCC currently only supports binary"):
        M.MCC().update([nd([0, 1, 2])], [nd([[0.5, 0.5]] * 3)])


def test_mcc():
    micro = M.create("mcc", average="micro")
    assert np.isnan(micro.get()[1])
    micro.update([nd([0, 0])], [nd([[0.9, 0.1], [0.8, 0.2]])])
    assert micro.get()[1] == 0.0
    micro.reset()
    pred11, label11 = nd([[0.1, 0.9], [0.5, 0.5]]), nd([1, 0])
    pred12, label12 = nd([[0.85, 0.15], [1.0, 0.0]]), nd([1, 0])
    pred21, label21 = nd([[0.6, 0.4]]), nd([0])
    pred22, label22 = nd([[0.2, 0.8]]), nd([1])
    micro.update([label11, label12], [pred11, pred12])
    assert micro.num_inst == 4
    tp1, fp1, fn1, tn1 = 1, 0, 1, 2
    mcc1 = (tp1 * tn1 - fp1 * fn1) / np.sqrt((tp1 + fp1) * (tp1 + fn1) * (tn1 + fp1) * (tn1 + fn1))
    assert micro.get()[1] == pytest.approx(mcc1)
    micro.update([label21, label22], [pred21, pred22])
    assert micro.num_inst == 6
    tp, fp, fn, tn = 2, 0, 1, 3
    mcc_total = (tp * tn - fp * fn) / np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    assert micro.get()[1] == pytest.approx(mcc_total)


def test_perplexity_clips_and_ignores():
    pred = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4]], np.float32)
    m = M.Perplexity(ignore_label=None)
    m.update([nd([-1, 7, 2])], [nd(pred)])  # -1 → class 0, 7 → class 2
    want = math.exp(-float(np.log(np.array([0.7, 0.8, 0.4], np.float32)).sum()) / 3)
    assert m.get()[1] == pytest.approx(want, rel=1e-6)
    m = M.Perplexity(ignore_label=2)
    m.update([nd([0, 2, 1])], [nd(pred)])
    want = math.exp(-float(np.log(np.array([0.7, 0.3], np.float32)).sum()) / 2)
    assert m.get()[1] == pytest.approx(want, rel=1e-6)
    # class axis other than the last
    m = M.Perplexity(ignore_label=None, axis=0)
    m.update([nd([0, 2, 2])], [nd(pred.T.copy())])
    want = math.exp(-float(np.log(np.array([0.7, 0.8, 0.4], np.float32)).sum()) / 3)
    assert m.get()[1] == pytest.approx(want, rel=1e-6)
    with pytest.raises(AssertionError, match="shape mismatch"):
        M.Perplexity(None).update([nd([0, 1])], [nd(pred)])
    with pytest.raises(AssertionError, match="2 labels but 1 predictions"):
        M.Perplexity(None).update([nd([0, 1, 2])] * 2, [nd(pred)])
    m = M.Perplexity(None)
    m.update(nd([0, 2, 2]), nd(pred))  # bare arrays
    assert m.get()[1] == pytest.approx(want, rel=1e-6)


def test_pearsonr_macro_and_micro():
    pred1 = nd([[0.3, 0.7], [0, 1.], [0.4, 0.6]])
    label1 = nd([[1, 0], [0, 1], [0, 1]])
    pred2 = nd([[1, 2], [3, 2], [4, 6]])
    label2 = nd([[1, 0], [0, 1], [0, 1]])
    micro = M.create("pearsonr", average="micro")
    macro = M.create("pearsonr")
    assert np.isnan(micro.get()[1]) and np.isnan(macro.get()[1])
    for m in (micro, macro):
        m.update([label1], [pred1])
    r1 = np.corrcoef(pred1.asnumpy().ravel(), label1.asnumpy().ravel())[0, 1]
    assert micro.get()[1] == pytest.approx(r1) and macro.get()[1] == pytest.approx(r1)
    for m in (micro, macro):
        m.update([label2], [pred2])
    both_p = np.concatenate([pred1.asnumpy().ravel(), pred2.asnumpy().ravel()])
    both_l = np.concatenate([label1.asnumpy().ravel(), label2.asnumpy().ravel()])
    assert micro.get()[1] == pytest.approx(np.corrcoef(both_p, both_l)[0, 1])
    r2 = np.corrcoef(pred2.asnumpy().ravel(), label2.asnumpy().ravel())[0, 1]
    assert macro.get()[1] == pytest.approx((r1 + r2) / 2)
    # micro keeps separate local and global pools
    assert micro.get_global()[1] == pytest.approx(np.corrcoef(both_p, both_l)[0, 1])
    micro.reset_local()
    assert np.isnan(micro.get()[1])
    micro.update([label2], [pred2])
    assert micro.get()[1] == pytest.approx(r2)
    assert micro.get_global()[1] != pytest.approx(r2)
    with pytest.raises(ValueError):
        macro.update([nd([1, 2, 3])], [nd([1, 2])])


def _cm_batch(cm):
    n = len(cm)
    ident = np.identity(n)
    labels, preds = [], []
    for i in range(n):
        for j in range(n):
            labels += [i] * cm[i][j]
            preds += [ident[j]] * cm[i][j]
    return [nd(labels, "int32")], [nd(preds)]


def test_pcc():
    labels, preds = _cm_batch([[7, 3], [2, 5]])
    pcc = M.create("pcc")
    pcc.update(labels, preds)
    mcc = M.create("mcc")
    mcc.update(labels, preds)
    assert pcc.get()[1] == pytest.approx(mcc.get()[1])
    pear = M.create("pearsonr")
    pear.update(labels, [nd(p.asnumpy().argmax(axis=1)) for p in preds])
    assert pcc.get()[1] == pytest.approx(pear.get()[1])
    pcc.reset()
    pcc.update(labels, [nd(p.asnumpy().argmax(axis=1)) for p in preds])
    assert pcc.get()[1] == pytest.approx(mcc.get()[1])
    cm = [[23, 13, 3], [7, 19, 11], [2, 5, 17]]
    k = 3
    ref = sum(cm[a][a] * cm[b][c] - cm[a][b] * cm[c][a]
              for a in range(k) for b in range(k) for c in range(k)) / (
        sum(sum(cm[a][b] for b in range(k)) * sum(sum(cm[f][g] for g in range(k))
                                                  for f in range(k) if f != a)
            for a in range(k))
        * sum(sum(cm[b][a] for b in range(k)) * sum(sum(cm[f][g] for f in range(k))
                                                    for g in range(k) if g != a)
              for a in range(k))) ** 0.5
    labels, preds = _cm_batch(cm)
    pcc.reset()
    pcc.update(labels, preds)
    value = pcc.get()[1]
    assert value == pytest.approx(ref)
    # order, batch size and update frequency do not change the value — exactly
    lab = labels[0].asnumpy()
    prd = preds[0].asnumpy()
    pcc.reset()
    for i in reversed(range(len(lab))):
        pcc.update([nd(lab[i:i + 1], "int32")], [nd(prd[i:i + 1])])
    assert pcc.get()[1] == value
    assert pcc.num_inst == len(lab)


def test_single_array_input():
    pred = nd([[1, 2, 3, 4]])
    label = nd(pred.asnumpy() + np.float32(0.1))
    for name, want in (("mse", 0.01), ("mae", 0.1), ("rmse", 0.1)):
        m = M.create(name)
        m.update(label, pred)
        assert m.get()[1] == pytest.approx(want, rel=1e-5)


def test_custom_metric_and_np_decorator():
    def tuple_feval(label, pred):
        return float(np.abs(label - pred).sum()), label.size

    m = M.create(tuple_feval)
    assert m.name == "tuple_feval"
    m.update([nd([1, 2])], [nd([1, 4])])
    m.update([nd([0])], [nd([1])])
    assert m.get() == ("tuple_feval", 3.0 / 3)
    with pytest.raises(NotImplementedError, match="serialized"):
        m.get_config()

    @M.np
    def mean_err(label, pred):
        assert isinstance(label, np.ndarray) and isinstance(pred, np.ndarray)
        return float(np.mean(label != pred))

    assert isinstance(mean_err, M.CustomMetric) and mean_err.name == "mean_err"
    mean_err.update([nd([1, 2])], [nd([1, 3])])
    assert mean_err.get()[1] == 0.5
    extra = M.CustomMetric(lambda l, p: 1.0, name="x", allow_extra_outputs=True)
    extra.update([nd([1])], [nd([1]), nd([2])])
    assert extra.num_inst == 1


def test_update_dict_and_names():
    m = M.Accuracy(output_names=["out2"], label_names=["lab"])
    m.update_dict({"lab": nd([1, 0]), "other": nd([0, 0])},
                  {"out1": nd([[1, 0], [1, 0]]), "out2": nd([[0, 1], [1, 0]])})
    assert m.get()[1] == 1.0
    comp = M.CompositeEvalMetric(["acc", "mae"], label_names=["lab"], output_names=["o"])
    comp.update_dict({"lab": nd([1, 0]), "x": nd([5, 5])}, {"o": nd([1, 0]), "p": nd([0, 1])})
    assert comp.get() == (["accuracy", "mae"], [1.0, 0.0])
    assert comp.get_name_value() == [("accuracy", 1.0), ("mae", 0.0)]
    assert str(M.MAE()) == "EvalMetric: {'mae': nan}"


def _global_metric_inputs(rs, kind):
    if kind == "cls":
        pred = rs.rand(12, 4).astype(np.float32)
        return [nd(rs.randint(0, 4, 12))], [nd(pred / pred.sum(1, keepdims=True))]
    if kind == "bin":
        pred = rs.rand(12, 2).astype(np.float32)
        return [nd(rs.randint(0, 2, 12))], [nd(pred / pred.sum(1, keepdims=True))]
    if kind == "reg":
        return [nd(rs.rand(12, 3))], [nd(rs.rand(12, 3))]
    return [None], [nd(rs.rand(12, 3))]


GLOBAL_CASES = [("acc", {}, "cls"), ("top_k_accuracy", {"top_k": 3}, "cls"),
                ("f1", {}, "bin"), ("f1", {"average": "micro"}, "bin"),
                ("mcc", {}, "bin"), ("mcc", {"average": "micro"}, "bin"),
                ("perplexity", {"ignore_label": None}, "cls"),
                ("pearsonr", {}, "reg"), ("pearsonr", {"average": "micro"}, "reg"),
                ("pcc", {}, "cls"), ("nll_loss", {}, "cls"), ("ce", {}, "cls"),
                ("loss", {}, "loss"), ("mae", {}, "reg"), ("mse", {}, "reg"),
                ("rmse", {}, "reg")]


@pytest.mark.parametrize("name,kwargs,kind", GLOBAL_CASES)
def test_global_metric(name, kwargs, kind):
    """reset_local() never touches the global values: get_global() after 10 updates equals
    get() of a copy that was never reset; deepcopy works."""
    rs = np.random.RandomState(42)
    metric = M.create(name, **kwargs)
    shadow = copy.deepcopy(metric)
    for i in range(10):
        labels, preds = _global_metric_inputs(rs, kind)
        if kind == "loss":
            labels = None
        metric.update(labels, preds)
        shadow.update(labels, preds)
        if i % 3 == 2:
            metric.reset_local()
    assert metric.get_global() == shadow.get()
    assert copy.deepcopy(metric).get_global() == metric.get_global()
    metric.reset()
    assert np.isnan(metric.get_global()[1]) and np.isnan(metric.get()[1])


def test_global_metric_custom_and_composite():
    rs = np.random.RandomState(0)
    custom = M.create(lambda l, p: float((p.argmax(1) == l).mean()))
    comp = M.create(["acc", "ce"])
    shadows = [copy.deepcopy(custom), copy.deepcopy(comp)]
    for i in range(6):
        labels, preds = _global_metric_inputs(rs, "cls")
        for m in (custom, comp, *shadows):
            m.update(labels, preds)
        if i % 2:
            custom.reset_local()
            comp.reset_local()
    assert custom.get_global() == shadows[0].get()
    assert comp.get_global() == shadows[1].get()
    assert comp.get_global_name_value() == shadows[1].get_name_value()


@settings(max_examples=20, deadline=None)
@given(sizes=st.lists(st.integers(1, 9), min_size=1, max_size=5), seed=st.integers(0, 1000))
def test_property_accuracy_pools_samples(sizes, seed):
    """Accuracy is the pooled fraction whatever the batch split."""
    rs = np.random.RandomState(seed)
    n = sum(sizes)
    pred = rs.rand(n, 3).astype(np.float32)
    label = rs.randint(0, 3, n)
    m = M.Accuracy()
    start = 0
    for s in sizes:
        m.update([nd(label[start:start + s])], [nd(pred[start:start + s])])
        start += s
    assert m.get()[1] == float((pred.argmax(1) == label).sum()) / n
    assert m.num_inst == n


def test_base_reset_does_not_go_through_a_subclass_reset_local():
    """As in MXNet, EvalMetric.reset() clears the four accumulators itself, so a subclass whose
    reset_local() uses attributes set after the base __init__ still constructs."""
    class Windowed(M.EvalMetric):
        def __init__(self):
            super().__init__("windowed")
            self.window = []

        def reset_local(self):
            self.window.clear()
            super().reset_local()

        def update(self, labels, preds):
            self.window.append(1)
            self.sum_metric += 1.0
            self.global_sum_metric += 1.0
            self.num_inst += 1
            self.global_num_inst += 1

    metric = Windowed()
    metric.update(None, None)
    metric.reset_local()
    assert metric.window == [] and metric.num_inst == 0 and metric.global_num_inst == 1
    metric.reset()
    assert metric.get_global()[1] != metric.get_global()[1]  # NaN after a full reset
