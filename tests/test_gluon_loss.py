"""mx.gluon.loss: per-sample losses against MXNet 1.9.1's golden values
(tests/fixtures/make_gluon_loss_golden.py), on NDArrays and composed into a symbol graph, a
Module trained through one, and the errors."""
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
    with pytest.raises(MXNetError, match="CTCLoss is not provided by lightmod .*L1Loss"):
        mx.gluon.loss.CTCLoss
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
