"""mx.gluon.loss: per-sample losses against MXNet 1.9.1's golden values
(tests/fixtures/make_gluon_loss_golden.py), on NDArrays and composed into a symbol graph,
gradients against numeric ones, Modules trained through them (MXNet's own tests), and the
errors."""
import json
import os

import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = json.load(open(os.path.join(HERE, "fixtures", "gluon_loss_golden.json")))
INPUTS = {k: np.array(v, np.float32) for k, v in GOLDEN["inputs"].items()}


def _case(name):
    case = GOLDEN["cases"][name]
    loss = getattr(mx.gluon.loss, case["class"])(**case["kwargs"])
    arrays = [INPUTS[case["pred"]], INPUTS[case["label"]]]
    arrays += [None if e is None else INPUTS[e] for e in case["extra"]]
    return loss, arrays, np.array(case["loss"], np.float32)


@pytest.mark.parametrize("name", sorted(GOLDEN["cases"]))
def test_ndarray_losses_match_mxnet(name):
    loss, arrays, expected = _case(name)
    got = loss(*[None if a is None else mx.nd.array(a) for a in arrays])
    assert isinstance(got, mx.nd.NDArray)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got.asnumpy(), expected, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("name", sorted(GOLDEN["cases"]))
def test_symbol_losses_match_mxnet(name):
    loss, arrays, expected = _case(name)
    names = ["pred", "label", "extra0", "extra1"]
    variables = [None if a is None else mx.sym.Variable(n) for n, a in zip(names, arrays)]
    out = loss(*variables)
    assert isinstance(out, mx.sym.Symbol)
    feed = {n: a.shape for n, a in zip(names, arrays) if a is not None}
    ex = out.simple_bind(mx.cpu(), grad_req="null", **feed)
    for n, a in zip(names, arrays):
        if a is not None:
            ex.arg_dict[n][:] = a
    ex.forward(is_train=False)
    np.testing.assert_allclose(ex.outputs[0].asnumpy(), expected, rtol=2e-5, atol=2e-5)


def test_l2_gradient_through_make_loss():
    """d/dpred of mean(L2) summed by make_loss: (pred - label) / (elements per sample)."""
    pred, label = INPUTS["scores"], INPUTS["targets"]
    out = mx.sym.make_loss(mx.gluon.loss.L2Loss()(mx.sym.Variable("pred"),
                                                  mx.sym.Variable("label")))
    ex = out.simple_bind(mx.cpu(), pred=pred.shape, label=label.shape)
    ex.arg_dict["pred"][:] = pred
    ex.arg_dict["label"][:] = label
    ex.forward(is_train=True)
    ex.backward()
    np.testing.assert_allclose(ex.grad_dict["pred"].asnumpy(), (pred - label) / pred.shape[1],
                               rtol=1e-5, atol=1e-6)


def test_module_trains_through_an_l1_loss():
    """MXNet's own Module-with-Gluon-loss pattern: an MLP regressing with L1Loss and NAdam."""
    mx.random.seed(3)
    np.random.seed(3)
    data = mx.random.uniform(-1, 1, shape=(20, 10))
    label = mx.random.uniform(-1, 1, shape=(20, 1))
    it = mx.io.NDArrayIter(data, label, batch_size=5, label_name="label", shuffle=True)
    net = mx.sym.Variable("data")
    for i, hidden in enumerate((128, 64)):
        net = mx.sym.Activation(mx.sym.FullyConnected(net, num_hidden=hidden, name="fc%d" % i),
                                act_type="relu")
    net = mx.sym.FullyConnected(net, num_hidden=1, name="out")
    loss = mx.sym.make_loss(mx.gluon.loss.L1Loss()(net, mx.sym.Variable("label")))
    mod = mx.mod.Module(loss, data_names=("data",), label_names=("label",))
    mod.bind(it.provide_data, it.provide_label)
    mod.init_params(initializer=mx.init.Xavier(magnitude=2))
    before = mod.score(it, mx.metric.Loss())[0][1]
    it.reset()
    mod.fit(it, num_epoch=60, optimizer="nadam",
            optimizer_params={"learning_rate": 0.001, "wd": 0.0005}, eval_metric=mx.metric.Loss())
    after = mod.score(it, mx.metric.Loss())[0][1]
    assert after < 0.11 < before


def test_bad_arguments_and_other_gluon_names():
    with pytest.raises(ValueError, match="label_format can only be signed or binary"):
        mx.gluon.loss.LogisticLoss(label_format="ternary")
    pred = mx.nd.array(INPUTS["scores"])
    with pytest.raises(TypeError, match="weight must be a number"):
        mx.gluon.loss.L1Loss(weight="heavy")(pred, pred)
    with pytest.raises(MXNetError, match="mx.gluon.nn is not supported"):
        mx.gluon.nn
    with pytest.raises(MXNetError, match="CTCLoss: layout must be 'NTC' or 'TNC', got 'NCT'"):
        mx.gluon.loss.CTCLoss(layout="NCT")
    with pytest.raises(MXNetError, match="label_layout must be 'NT' or 'TN', got 'TT'"):
        mx.gluon.loss.CTCLoss(label_layout="TT")
    with pytest.raises(MXNetError, match=r"SDMLLoss: x1 and x2 must both be \(batch, dim\), "
                                         r"got \(5, 3\) and \(3, 5\)"):
        mx.gluon.loss.SDMLLoss()(pred, pred.T)
    with pytest.raises(AttributeError, match="NoSuchLoss"):
        mx.gluon.loss.NoSuchLoss
    assert mx.gluon.loss.SoftmaxCELoss is mx.gluon.loss.SoftmaxCrossEntropyLoss
    assert mx.gluon.loss.SigmoidBCELoss is mx.gluon.loss.SigmoidBinaryCrossEntropyLoss
    loss = mx.gluon.loss.HingeLoss()
    loss.hybridize()
    np.testing.assert_allclose(loss(pred, pred).asnumpy(), loss.forward(pred, pred).asnumpy())


def test_a_user_subclass_composes_on_both_backends():
    """Module code subclasses Loss with its own hybrid_forward (F is mx.sym or mx.nd)."""
    class CubedError(mx.gluon.loss.Loss):
        def __init__(self, **kwargs):
            super().__init__(None, 0, **kwargs)

        def hybrid_forward(self, F, pred, label):
            err = F.abs(pred - label)
            return self._weighted_mean(F, err * err * err, None)

    pred, label = INPUTS["scores"], INPUTS["targets"]
    expected = (np.abs(pred - label) ** 3).mean(axis=1)
    loss = CubedError(prefix="cubed_")
    np.testing.assert_allclose(loss(mx.nd.array(pred), mx.nd.array(label)).asnumpy(), expected,
                               rtol=1e-5)
    out = loss(mx.sym.Variable("p"), mx.sym.Variable("l"))
    ex = out.simple_bind(mx.cpu(), grad_req="null", p=pred.shape, l=label.shape)
    ex.arg_dict["p"][:] = pred
    ex.arg_dict["l"][:] = label
    ex.forward(is_train=False)
    np.testing.assert_allclose(ex.outputs[0].asnumpy(), expected, rtol=1e-5)
    with pytest.raises(TypeError, match="Loss is a loss without hybrid_forward"):
        mx.gluon.loss.Loss(None, 0)(mx.nd.array(pred), mx.nd.array(label))


def _numeric_gradient(f, x, eps=1e-3):
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        grad[i] = (f(up) - f(down)) / (2 * eps)
    return grad


@pytest.mark.parametrize("name", ["ctc_both_lengths", "triplet", "cosine_margin", "sdml",
                                  "poisson_rates"])
def test_gradient_through_make_loss_matches_numeric(name):
    """d(sum of the losses)/d(pred) through the bound graph, in float64, against central
    differences of the same graph's forward pass."""
    loss, arrays, _ = _case(name)
    names = ["pred", "label", "extra0", "extra1"]
    variables = [None if a is None else mx.sym.Variable(n) for n, a in zip(names, arrays)]
    out = mx.sym.make_loss(mx.sym.sum(loss(*variables)))
    feed = {n: a.shape for n, a in zip(names, arrays) if a is not None}
    reqs = {n: "write" if n == "pred" else "null" for n in feed}
    ex = out.simple_bind(mx.cpu(), grad_req=reqs, type_dict={n: np.float64 for n in feed},
                         **feed)
    for n, a in zip(names, arrays):
        if a is not None:
            ex.arg_dict[n][:] = a.astype(np.float64)

    def value(pred):
        ex.arg_dict["pred"][:] = pred
        return float(ex.forward(is_train=False)[0].asnumpy().sum())

    pred = arrays[0].astype(np.float64)
    expected = _numeric_gradient(value, pred)
    ex.arg_dict["pred"][:] = pred
    ex.forward(is_train=True)
    ex.backward()
    np.testing.assert_allclose(ex.grad_dict["pred"].asnumpy(), expected, rtol=1e-4, atol=1e-6)


def test_losses_take_their_extra_inputs_by_keyword():
    loss, arrays, expected = _case("ctc_label_lengths")
    got = loss(mx.nd.array(arrays[0]), mx.nd.array(arrays[1]),
               label_lengths=mx.nd.array(arrays[3]))
    np.testing.assert_allclose(got.asnumpy(), expected, rtol=2e-5, atol=2e-5)


def test_poisson_full_loss_of_a_zero_count_is_finite():
    """Stirling's term applies above 1 only: a count of 0 adds nothing (MXNet's mask times
    log(0) would give NaN)."""
    rates = np.array([[0.5, 2.0, 3.0]], np.float32)
    counts = np.array([[0.0, 1.0, 4.0]], np.float32)
    loss = mx.gluon.loss.PoissonNLLLoss(from_logits=False, compute_full=True)
    got = loss(mx.nd.array(rates), mx.nd.array(counts)).asnumpy()
    element = rates - counts * np.log(rates + 1e-8)
    element[0, 2] += 4 * np.log(4) - 4 + 0.5 * np.log(2 * np.pi * 4)
    np.testing.assert_allclose(got, [element.mean()], rtol=1e-5)


def _mlp(num_hidden, flatten=True):
    net = mx.sym.Variable("data")
    for i, hidden in enumerate((128, 64)):
        net = mx.sym.Activation(mx.sym.FullyConnected(net, num_hidden=hidden, flatten=flatten,
                                                      name="fc%d" % i), act_type="relu")
    return mx.sym.FullyConnected(net, num_hidden=num_hidden, flatten=flatten, name="out")


def test_module_trains_through_a_triplet_loss():
    """MXNet's test_triplet_loss: a Module whose labels are the positive and negative
    examples, trained with Adam until the triplet loss is near zero."""
    mx.random.seed(5)
    np.random.seed(5)
    data = mx.random.uniform(-1, 1, shape=(20, 10))
    pos = mx.random.uniform(-1, 1, shape=(20, 10))
    neg = mx.random.uniform(-1, 1, shape=(20, 10))
    it = mx.io.NDArrayIter(data, {"pos": pos, "neg": neg}, batch_size=10, shuffle=True)
    loss = mx.gluon.loss.TripletLoss()(_mlp(10), mx.sym.Variable("pos"),
                                       mx.sym.Variable("neg"))
    mod = mx.mod.Module(mx.sym.make_loss(loss), data_names=("data",),
                        label_names=("pos", "neg"))
    mod.fit(it, num_epoch=100, optimizer="adam", optimizer_params={"learning_rate": 0.01},
            initializer=mx.init.Xavier(magnitude=2), eval_metric=mx.metric.Loss())
    assert mod.score(it, eval_metric=mx.metric.Loss())[0][1] < 0.05


def test_module_trains_through_a_ctc_loss():
    """MXNet's test_ctc_loss_train: per-step scores from an MLP applied to every step, the
    label sequence 0 1 2 3 for every sample."""
    mx.random.seed(6)
    np.random.seed(6)
    data = mx.random.uniform(-1, 1, shape=(20, 20, 10))
    label = mx.nd.arange(4, repeat=20).reshape((20, 4))
    it = mx.io.NDArrayIter(data, label, batch_size=10, label_name="label", shuffle=True)
    loss = mx.gluon.loss.CTCLoss()(_mlp(5, flatten=False), mx.sym.Variable("label"))
    mod = mx.mod.Module(mx.sym.make_loss(loss), data_names=("data",), label_names=("label",))
    mod.bind(data_shapes=it.provide_data, label_shapes=it.provide_label)
    mod.init_params(initializer=mx.init.Xavier(magnitude=2))
    before = mod.score(it, eval_metric=mx.metric.Loss())[0][1]
    it.reset()
    mod.fit(it, num_epoch=100, optimizer="adam", optimizer_params={"learning_rate": 0.01},
            eval_metric=mx.metric.Loss())
    after = mod.score(it, eval_metric=mx.metric.Loss())[0][1]
    assert after < 10 < before
