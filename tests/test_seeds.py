"""The seed documents' user subclasses (DetModule on BaseModule, OldModule overriding bind) run
on lightmod with only their imports changed; lightmod's own mx.mod.DetModule behaves the same.
"""
import numpy as np
import pytest
from fixtures.module_nets import same_array
from fixtures.seed_modules import DetModule as SeedDetModule
from fixtures.seed_modules import OldModule

import lightmod as mx
from lightmod import nd


def det_net():
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=6, name="backbone_conv1")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.FullyConnected(net, num_hidden=5, name="backbone_conv2")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.FullyConnected(net, num_hidden=3, name="rpn_cls")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def data_iter(n=16, batch=4, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.uniform(-1, 1, (n, 4)).astype(np.float32)
    y = rng.randint(0, 3, n).astype(np.float32)
    return mx.io.NDArrayIter(x, y, batch_size=batch)


INIT = dict(initializer=mx.init.Uniform(0.5))


@pytest.mark.parametrize("det_cls", [SeedDetModule, mx.mod.DetModule])
def test_det_module_freezes_by_fragment(det_cls):
    mx.random.seed(3)
    it = data_iter()
    mod = det_cls(det_net(), data_names=["data"], label_names=["softmax_label"],
                  context=[mx.cpu(0), mx.cpu(1)], fixed_param=["backbone"],
                  excluded_param=["conv2"])
    assert mod._fixed_param_names == ["backbone_conv1_weight", "backbone_conv1_bias"]
    mod.fit(it, num_epoch=2, optimizer_params={"learning_rate": 0.5}, **INIT,
            epoch_end_callback=lambda *a: None)
    # compare with a plain Module trained from the same start with the same frozen names
    mx.random.seed(3)
    ref = mx.mod.Module(det_net(), context=[mx.cpu(0), mx.cpu(1)],
                        fixed_param_names=["backbone_conv1_weight", "backbone_conv1_bias"])
    ref.fit(it, num_epoch=2, optimizer_params={"learning_rate": 0.5}, **INIT)
    got, want = mod.get_params()[0], ref.get_params()[0]
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_allclose(got[k].asnumpy(), want[k].asnumpy(), rtol=1e-6, atol=1e-7)
    # frozen parameters did not move; the others did
    mx.random.seed(3)
    start = mx.mod.Module(det_net())
    start.bind(it.provide_data, it.provide_label)
    start.init_params(**INIT)
    init = start.get_params()[0]
    np.testing.assert_array_equal(got["backbone_conv1_weight"].asnumpy(),
                                  init["backbone_conv1_weight"].asnumpy())
    assert not np.allclose(got["backbone_conv2_weight"].asnumpy(),
                           init["backbone_conv2_weight"].asnumpy())


@pytest.mark.parametrize("det_cls", [SeedDetModule, mx.mod.DetModule])
def test_det_module_checkpoint_round_trip(det_cls, tmp_path):
    prefix = str(tmp_path / "det")
    it = data_iter()
    mod = det_cls(det_net(), data_names=["data"], label_names=["softmax_label"],
                  fixed_param=["rpn"])
    mod.bind(it.provide_data, it.provide_label)
    mod.init_params(**INIT)
    mod.init_optimizer(optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    for batch in it:
        mod.forward_backward(batch)
        mod.update()
        mod.update_metric(mx.metric.Accuracy(), batch.label)
    mod.save_checkpoint(prefix, 3, save_optimizer_states=True)

    loaded = det_cls.load(prefix, 3, load_optimizer_states=True, data_names=["data"],
                          label_names=["softmax_label"], fixed_param=["rpn"])
    assert isinstance(loaded, det_cls)
    loaded.bind(it.provide_data, it.provide_label)
    loaded.init_optimizer(optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    it.reset()
    batch = next(iter(it))
    for m in (mod, loaded):
        m.forward_backward(batch)
        m.update()
    for k, v in mod.get_params()[0].items():
        np.testing.assert_array_equal(v.asnumpy(), loaded.get_params()[0][k].asnumpy())
    loaded.forward(batch, is_train=False)
    assert loaded.output_shapes == [("softmax_output", (4, 3))]
    assert loaded.get_outputs()[0].shape == (4, 3)


def test_seed_det_module_states_inputs_and_reshape():
    a = mx.sym.Variable("a")
    b = mx.sym.Variable("b")
    net = mx.sym.FullyConnected(a + b, num_hidden=2, name="fc")
    mod = SeedDetModule(net, data_names=["a", "b"])
    mod.bind([("a", (3, 4)), ("b", (3, 4))], inputs_need_grad=True)
    mod.init_params()
    mod.forward(mx.io.DataBatch([nd.ones((3, 4)), nd.ones((3, 4))]))
    mod.backward([nd.ones((3, 2))])
    ga, gb = mod.get_input_grads()
    np.testing.assert_allclose(ga.asnumpy(), gb.asnumpy())
    mod.forward(mx.io.DataBatch([nd.ones((5, 4)), nd.ones((5, 4))]))    # reshapes itself
    assert mod.get_outputs()[0].shape == (5, 2)
    assert mod.get_states(merge_multi_context=False) == []


def test_old_module_bind_override():
    it = data_iter()
    mod = OldModule(det_net(), context=[mx.cpu(0), mx.cpu(1)])
    mod.fit(it, num_epoch=2, optimizer_params={"learning_rate": 0.5}, **INIT)
    assert mod.binded and mod.params_initialized and mod.optimizer_initialized
    score = dict(mod.score(it, "acc"))
    assert 0.0 <= score["accuracy"] <= 1.0
    # bucketing-style sharing through the overridden bind
    other = OldModule(det_net(), context=[mx.cpu(0), mx.cpu(1)])
    other.bind([("data", (2, 4))], [("softmax_label", (2,))], shared_module=mod)
    assert other.params_initialized and other._arg_params is mod._arg_params
    assert other._optimizer is mod._optimizer
    e1, e2 = mod._exec_group.execs[0], other._exec_group.execs[0]
    assert same_array(e1.arg_dict["rpn_cls_weight"], e2.arg_dict["rpn_cls_weight"])
    # re-binding an already initialised OldModule copies the cached parameters
    mod.bind([("data", (8, 4))], [("softmax_label", (8,))], force_rebind=True)
    dev = mod._exec_group.execs[1].arg_dict["rpn_cls_weight"].asnumpy()
    np.testing.assert_array_equal(dev, mod.get_params()[0]["rpn_cls_weight"].asnumpy())


def test_old_module_in_bucketing_style_switch():
    """OldModule subclasses Module, so BucketingModule-like sharing code accepts it."""
    mod = OldModule(det_net())
    mod.bind([("data", (4, 4))], [("softmax_label", (4,))])
    mod.init_params(**INIT)
    small = mx.mod.Module(det_net())
    small.bind([("data", (2, 4))], [("softmax_label", (2,))], shared_module=mod)
    assert same_array(small._exec_group.execs[0].grad_dict["rpn_cls_bias"],
                      mod._exec_group.execs[0].grad_dict["rpn_cls_bias"])
