"""SequentialModule, PythonModule and PythonLossModule."""
import logging

import numpy as np
import pytest

import lightmod as mx
from lightmod import nd
from lightmod.base import MXNetError, NotBoundError


def features_net():
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=6, name="fc1")
    net = mx.sym.Activation(net, act_type="tanh", name="act1")
    return mx.sym.FullyConnected(net, num_hidden=3, name="fc2")


def head_net():
    return mx.sym.SoftmaxOutput(mx.sym.Variable("data"), name="softmax")


def whole_net():
    return mx.sym.SoftmaxOutput(features_net(), name="softmax")


def start_params(seed=0):
    rng = np.random.RandomState(seed)
    return {"fc1_weight": nd.array(rng.uniform(-0.5, 0.5, (6, 4))),
            "fc1_bias": nd.array(rng.uniform(-0.1, 0.1, (6,))),
            "fc2_weight": nd.array(rng.uniform(-0.5, 0.5, (3, 6))),
            "fc2_bias": nd.array(rng.uniform(-0.1, 0.1, (3,)))}


def train_iter(n=16, batch=4):
    rng = np.random.RandomState(1)
    x = rng.uniform(-1, 1, (n, 4)).astype(np.float32)
    y = rng.randint(0, 3, n).astype(np.float32)
    return mx.io.NDArrayIter(x, y, batch_size=batch)


def reference_params(it, epochs=2):
    ref = mx.mod.Module(whole_net())
    ref.fit(it, num_epoch=epochs, arg_params=start_params(),
            optimizer_params={"learning_rate": 0.3})
    return {k: v.asnumpy() for k, v in ref.get_params()[0].items()}


def softmax_ce_grad(scores, labels):
    """d/dscores of softmax cross-entropy summed over the batch: softmax(scores) - onehot."""
    s = scores.asnumpy()
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(p)), labels.asnumpy().astype(int)] -= 1
    return p


def test_sequential_equals_one_module():
    it = train_iter()
    seq = mx.mod.SequentialModule()
    seq.add(mx.mod.Module(features_net(), label_names=None))
    seq.add(mx.mod.Module(head_net()), take_labels=True, auto_wiring=True)
    seq.fit(it, num_epoch=2, arg_params=start_params(), allow_missing=True,
            optimizer_params={"learning_rate": 0.3})
    want = reference_params(it)
    got, _ = seq.get_params()
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_allclose(got[k].asnumpy(), want[k], rtol=1e-5, atol=1e-6)
    assert seq.data_names == ["data"] and seq.output_names == ["softmax_output"]
    assert seq.output_shapes == [("softmax_output", (4, 3))]
    assert seq.label_shapes == it.provide_label
    res = dict(seq.score(it, "acc"))
    assert 0 <= res["accuracy"] <= 1


def test_python_loss_module_trains_like_softmax_output():
    it = train_iter()
    seq = mx.mod.SequentialModule()
    seq.add(mx.mod.Module(features_net(), label_names=None))
    seq.add(mx.mod.PythonLossModule(grad_func=softmax_ce_grad), take_labels=True,
            auto_wiring=True)
    seq.fit(it, num_epoch=2, arg_params=start_params(), allow_missing=True,
            optimizer_params={"learning_rate": 0.3})
    want = reference_params(it)
    got, _ = seq.get_params()
    for k in want:
        np.testing.assert_allclose(got[k].asnumpy(), want[k], rtol=1e-5, atol=1e-6)


def test_python_loss_module_details():
    loss = mx.mod.PythonLossModule(name="myloss")
    assert loss.output_names == ["myloss_output"]
    loss.bind([("data", (2, 3))], [("softmax_label", (2,))])
    assert loss.binded and loss.output_shapes == [("myloss_output", (2, 3))]
    loss.init_params()
    assert loss.get_params() == ({}, {})
    batch = mx.io.DataBatch([nd.ones((2, 3))], [nd.zeros((2,))])
    loss.forward(batch)
    assert loss.get_outputs()[0] is batch.data[0]
    with pytest.raises(MXNetError, match="grad_func"):
        loss.backward()
    with pytest.raises(ValueError):
        loss.backward(out_grads=[nd.ones((2, 3))])
    with pytest.raises(ValueError):
        mx.mod.PythonLossModule(data_names=("a", "b"))
    with pytest.raises(ValueError):
        loss.bind([("data", (2, 3))], grad_req="add", force_rebind=True)
    with pytest.raises(ValueError):
        loss.bind([("x", (2, 3))], force_rebind=True)

    with_grad = mx.mod.PythonLossModule(grad_func=lambda s, l: s.asnumpy() * 2)
    with_grad.bind([("data", (2, 3))], [("softmax_label", (2,))])
    with_grad.forward(batch)
    with_grad.backward()
    grad = with_grad.get_input_grads()[0]
    assert isinstance(grad, nd.NDArray)
    np.testing.assert_array_equal(grad.asnumpy(), np.full((2, 3), 2.0))
    metric = mx.metric.Accuracy()
    with_grad.update_metric(metric, [nd.array([0, 1])])
    assert metric.num_inst == 2


def test_python_module_subclass():
    class Doubler(mx.mod.PythonModule):
        def __init__(self):
            super().__init__(["data"], None, ["double_output"])
            self._out = None

        def _compute_output_shapes(self):
            return [("double_output", self._data_shapes[0][1])]

        def forward(self, data_batch, is_train=None):
            self._out = data_batch.data[0] * 2

        def get_outputs(self, merge_multi_context=True):
            return [self._out]

    mod = Doubler()
    mod.bind([("data", (2, 2))])
    mod.init_params()
    mod.init_optimizer()
    mod.update()
    assert mod.params_initialized and mod.optimizer_initialized
    out = mod.predict(nd.ones((2, 2)))
    np.testing.assert_array_equal(out.asnumpy(), np.full((2, 2), 2.0))
    metric = mx.metric.MSE()
    mod.update_metric(metric, [nd.ones((2, 2))])     # no labels bound: nothing to do
    assert metric.num_inst == 0


def test_sequential_errors_and_lifecycle(caplog):
    seq = mx.mod.SequentialModule()
    assert seq.data_names == [] and seq.output_names == []
    with pytest.raises(ValueError, match="empty"):
        seq.bind([("data", (2, 4))])
    with pytest.raises(ValueError, match="Unknown meta"):
        seq.add(mx.mod.Module(features_net(), label_names=None), take_label=True)
    seq.add(mx.mod.Module(features_net(), label_names=None))
    with pytest.raises(NotBoundError):
        seq.init_params()
    with pytest.raises(ValueError):
        seq.bind([("data", (2, 4))], shared_module=seq)
    seq.bind([("data", (2, 4))], for_training=False)
    with caplog.at_level(logging.WARNING):
        seq.bind([("data", (2, 4))])
    assert "Already bound" in caplog.text
    assert seq.label_shapes is None
    seq.init_params()
    with pytest.raises(NotBoundError):
        seq.get_input_grads()
    # duplicated parameter names across layers are rejected
    dup = mx.mod.SequentialModule()
    dup.add(mx.mod.Module(features_net(), label_names=None))
    dup.add(mx.mod.Module(features_net(), label_names=None), auto_wiring=True)
    dup.bind([("data", (2, 4))], for_training=False)
    with pytest.raises(ValueError, match="Duplicated parameter names"):
        dup.init_params()
