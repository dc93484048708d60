"""Module behaviour as in MXNet 1.9.1's test_module.py (our own tests), plus lifecycle errors,
optimizer wiring (rescale_grad, idx2name, update_on_kvstore), checkpoints and fit/score/predict.
"""
import logging
import os
from collections import namedtuple

import numpy as np
import pytest
from fixtures.module_nets import hand_lstm

import lightmod as mx
from lightmod import nd
from lightmod.base import MXNetError, NotBoundError
from lightmod.fit_callbacks import EarlyStopping, StopTraining
from lightmod.module.base_module import _parse_data_desc


@pytest.fixture(autouse=True)
def _seed():
    mx.random.seed(0)
    np.random.seed(0)


def mlp(num_in=None, hidden=8, classes=3):
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=hidden, name="fc1")
    net = mx.sym.Activation(net, act_type="relu", name="relu1")
    net = mx.sym.FullyConnected(net, num_hidden=classes, name="fc2")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def toy_data(n=24, dim=6, classes=3, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.uniform(-1, 1, (n, dim)).astype(np.float32)
    y = rng.randint(0, classes, n).astype(np.float32)
    return x, y


def bound_mlp(batch=8, dim=6, context=None, **bind_kw):
    mod = mx.mod.Module(mlp(), context=context or mx.cpu())
    mod.bind(data_shapes=[("data", (batch, dim))], label_shapes=[("softmax_label", (batch,))],
             **bind_kw)
    return mod


def params_np(mod):
    arg, aux = mod.get_params()
    return {k: v.asnumpy() for k, v in arg.items()}, {k: v.asnumpy() for k, v in aux.items()}


# --- data layouts, dtypes, contexts (test_module_dtype / layout / input_grads / ctx_group) ----
def test_module_dtype_fp16_with_tnc_layout():
    dshape = (3, 8, 7)
    sym = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu", __layout__="TNC")
    mod = mx.mod.Module(sym, ("data",), None, context=[mx.cpu(0), mx.cpu(1)])
    mod.bind(data_shapes=[mx.io.DataDesc("data", dshape, np.float16, layout="TNC")])
    mod.init_params()
    mod.forward(mx.io.DataBatch(data=[mx.nd.ones(dshape, dtype=np.float16)], label=None))
    mod.backward([mx.nd.ones(dshape, dtype=np.float16)])
    for x in mod.get_outputs():
        assert x.dtype == np.float16
    # the batch axis of 'TNC' is 1: each device got 4 of the 8
    per_dev = mod.get_outputs(merge_multi_context=False)[0]
    assert [o.shape for o in per_dev] == [(3, 4, 7), (3, 4, 7)]


def test_module_layout_merges_on_batch_axis():
    dshape = (3, 8, 7)
    sym = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu", __layout__="TNC")
    mod = mx.mod.Module(sym, ("data",), None, context=[mx.cpu(0), mx.cpu(1)])
    mod.bind(data_shapes=[mx.io.DataDesc("data", dshape, layout="TNC")])
    mod.init_params()
    x = np.random.uniform(-1, 1, dshape).astype(np.float32)
    mod.forward(mx.io.DataBatch(data=[mx.nd.array(x)], label=None))
    mod.backward([mx.nd.ones(dshape)])
    out = mod.get_outputs()[0]
    assert out.shape == dshape
    np.testing.assert_array_equal(out.asnumpy(), np.maximum(x, 0))
    for part in mod.get_outputs(merge_multi_context=False)[0]:
        assert part.shape == (3, 4, 7)
    assert mod.output_shapes == [(sym.list_outputs()[0], dshape)]


def test_module_bind_rejects_array_shapes():
    sym = mx.sym.Activation(mx.sym.Variable("data"), act_type="relu")
    mod = mx.mod.Module(sym, ("data",), None)
    with pytest.raises(TypeError):
        mod.bind(data_shapes=[("data", mx.nd.array([10, 10]))])
    assert mod.binded is False
    mod.bind(data_shapes=[("data", (10, 10))])
    assert mod.binded is True


def test_module_input_grads_follow_data_names_order():
    a = mx.sym.Variable("a", __layout__="NC")
    b = mx.sym.Variable("b", __layout__="NC")
    c = mx.sym.Variable("c", __layout__="NC")
    out = a + 2 * b + 3 * c
    mod = mx.mod.Module(out, data_names=["b", "c", "a"], label_names=None,
                        context=[mx.cpu(0), mx.cpu(1)])
    mod.bind(data_shapes=[["b", (5, 5)], ["c", (5, 5)], ["a", (5, 5)]], label_shapes=None,
             inputs_need_grad=True)
    mod.init_params()
    mod.forward(mx.io.DataBatch(data=[nd.ones((5, 5)), nd.ones((5, 5)), nd.ones((5, 5))]))
    mod.backward(out_grads=[nd.ones((5, 5))])
    b_grad, c_grad, a_grad = [g.asnumpy() for g in mod.get_input_grads()]
    assert np.all(a_grad == 1) and np.all(b_grad == 2) and np.all(c_grad == 3)
    assert a_grad.shape == (5, 5)


def test_get_input_grads_needs_inputs_need_grad():
    mod = bound_mlp()
    mod.init_params()
    with pytest.raises(NotBoundError, match="inputs_need_grad"):
        mod.get_input_grads()


def _ctx_group_net():
    with mx.AttrScope(ctx_group="dev1"):
        a = mx.sym.Variable("a")
        a = a * 2
    with mx.AttrScope(ctx_group="dev2"):
        b = mx.sym.Variable("b")
        c = a + b
    return c


@pytest.mark.parametrize("ctxs, group2ctxs, grad_ctxs", [
    ([mx.cpu(0)], {"dev1": mx.cpu(1), "dev2": mx.cpu(2)}, [mx.cpu(1), mx.cpu(2)]),
    ([mx.cpu(0), mx.cpu(1)], [{"dev1": mx.cpu(2), "dev2": mx.cpu(3)},
                              {"dev1": mx.cpu(4), "dev2": mx.cpu(5)}], None),
    ([mx.cpu(0), mx.cpu(1)], {"dev1": mx.cpu(2), "dev2": mx.cpu(3)}, None),
    ([mx.cpu(0), mx.cpu(1)], {"dev1": [mx.cpu(2)], "dev2": [mx.cpu(3)]}, None),
    ([mx.cpu(0), mx.cpu(1)], {"dev1": [mx.cpu(2), mx.cpu(4)], "dev2": [mx.cpu(3), mx.cpu(5)]},
     None),
])
def test_module_ctx_group(ctxs, group2ctxs, grad_ctxs):
    net = _ctx_group_net()
    shape = (2, 5)
    results = []
    for g2c in (group2ctxs, None):
        mod = mx.mod.Module(net, context=ctxs, data_names=["a", "b"], label_names=None,
                            group2ctxs=g2c)
        mod.bind(data_shapes=[["a", shape], ["b", shape]], inputs_need_grad=True)
        mod.init_params()
        mod.forward(mx.io.DataBatch(data=[nd.ones(shape), nd.ones(shape)]), is_train=True)
        mod.backward([nd.ones(shape)])
        results.append(mod.get_input_grads())
    grouped, plain = results
    if grad_ctxs is not None:
        assert grouped[0].context == grad_ctxs[0]
        assert grouped[1].context == grad_ctxs[1]
    for g, p in zip(grouped, plain):
        np.testing.assert_array_equal(g.asnumpy(), p.asnumpy())
    np.testing.assert_array_equal(grouped[0].asnumpy(), np.full(shape, 2.0))
    np.testing.assert_array_equal(grouped[1].asnumpy(), np.ones(shape))


def test_group2ctxs_wrong_length():
    net = _ctx_group_net()
    mod = mx.mod.Module(net, context=[mx.cpu(0), mx.cpu(1)], data_names=["a", "b"],
                        label_names=None, group2ctxs=[{"dev1": mx.cpu(2)}])
    with pytest.raises(ValueError, match="group2ctxs"):
        mod.bind(data_shapes=[["a", (2, 5)], ["b", (2, 5)]])


def test_several_cpu_contexts_are_separate_replicas():
    ctxs = [mx.cpu(0), mx.cpu(1), mx.cpu(2)]
    mod = bound_mlp(batch=9, context=ctxs)
    mod.init_params()
    group = mod._exec_group
    for name_arrays in group.param_arrays:
        assert [a.context for a in name_arrays] == ctxs
        # three distinct arrays: writing one leaves the others alone
        name_arrays[0][:] = 5.0
        assert not np.all(name_arrays[1].asnumpy() == 5.0)
    for _name, arrays in zip(group.data_names, group.data_arrays):
        assert [dst.context for _, dst in arrays] == ctxs
        assert [dst.shape[0] for _, dst in arrays] == [3, 3, 3]


# --- names ---------------------------------------------------------------------------------------
def test_module_name_checks():
    sym = mlp()
    with pytest.raises(ValueError, match="data_names"):
        mx.mod.Module(sym, data_names=("dat",))
    with pytest.raises(ValueError):
        mx.mod.Module(sym, state_names=["nope"])
    with pytest.raises(ValueError):
        mx.mod.Module(sym, fixed_param_names=["nope"])
    with pytest.warns(UserWarning):
        mx.mod.Module(sym, label_names=("label",))
    mod = mx.mod.Module(sym)
    assert mod._param_names == ["fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]
    assert mod.output_names == ["softmax_output"]
    assert mod.data_names == ["data"] and mod.label_names == ["softmax_label"]
    with pytest.raises(ValueError, match="work_load_list"):
        mx.mod.Module(sym, context=[mx.cpu(0), mx.cpu(1)], work_load_list=[1])


def test_bind_data_names_must_match_as_a_set():
    mod = mx.mod.Module(mlp())
    with pytest.raises(ValueError, match="don't match"):
        mod.bind(data_shapes=[("x", (4, 6))])
    assert not mod.binded
    # label names that differ only warn
    with pytest.warns(UserWarning, match="don't match"):
        data, label = _parse_data_desc(["data"], ["softmax_label"], [("data", (4, 6))],
                                       [("lbl", (4,))])
    assert isinstance(data[0], mx.io.DataDesc) and label[0].name == "lbl"
    # the order of data_shapes may differ from data_names
    data, _ = _parse_data_desc(["a", "b"], [], [("b", (2, 3)), ("a", [2, 3])], None)
    assert [d.name for d in data] == ["b", "a"] and data[1].shape == (2, 3)


# --- lifecycle -----------------------------------------------------------------------------------
def test_lifecycle_errors_name_the_missing_call():
    mod = mx.mod.Module(mlp())
    with pytest.raises(NotBoundError, match=r"bind\(\)"):
        mod.init_params()
    with pytest.raises(AssertionError):     # NotBoundError is an AssertionError too
        mod.forward(mx.io.DataBatch([nd.ones((2, 6))]))
    with pytest.raises(MXNetError):
        mod.init_optimizer()
    mod.bind(data_shapes=[("data", (4, 6))], label_shapes=[("softmax_label", (4,))])
    with pytest.raises(NotBoundError, match=r"init_params\(\)"):
        mod.forward(mx.io.DataBatch([nd.ones((4, 6))]))
    mod.init_params()
    with pytest.raises(NotBoundError, match=r"init_optimizer\(\)"):
        mod.update()
    with pytest.raises(ValueError):
        mx.mod.Module(mlp()).bind([("data", (4, 6))], for_training=False, inputs_need_grad=True)


def test_bind_twice_warns_and_force_rebind_keeps_params(caplog):
    mod = bound_mlp()
    mod.init_params()
    before, _ = params_np(mod)
    with caplog.at_level(logging.WARNING):
        mod.bind(data_shapes=[("data", (8, 6))])
    assert "Already bound" in caplog.text
    mod.bind(data_shapes=[("data", (4, 6))], label_shapes=[("softmax_label", (4,))],
             force_rebind=True)
    assert mod.binded and mod.params_initialized
    after, _ = params_np(mod)
    for k in before:
        np.testing.assert_array_equal(before[k], after[k])
    # the new executors got the cached parameters
    dev = mod._exec_group.execs[0].arg_dict["fc1_weight"].asnumpy()
    np.testing.assert_array_equal(dev, before["fc1_weight"])


def test_force_rebind_after_update_loses_unsynced_progress():
    """MXNet quirk: a forced re-bind copies the stale cache, not the newer device values."""
    x, y = toy_data(8)
    mod = bound_mlp()
    mod.init_params()
    mod.init_optimizer(optimizer_params={"learning_rate": 0.5})
    start, _ = params_np(mod)
    mod.forward_backward(mx.io.DataBatch([nd.array(x)], [nd.array(y)]))
    mod.update()
    assert mod._params_dirty
    mod.bind(data_shapes=[("data", (8, 6))], label_shapes=[("softmax_label", (8,))],
             force_rebind=True)
    now, _ = params_np(mod)
    for k in start:
        np.testing.assert_array_equal(start[k], now[k])


def test_init_params_twice_warns():
    mod = bound_mlp()
    mod.init_params()
    with pytest.warns(UserWarning, match="already initialized"):
        mod.init_params()


def test_init_params_sorted_order_and_missing():
    mod = bound_mlp()
    order = []

    class Recorder(mx.init.Initializer):
        def __call__(self, desc, arr):
            order.append(str(desc))
            arr[:] = len(order)

    mod.init_params(initializer=Recorder())
    assert order == sorted(order)
    with pytest.raises(RuntimeError, match="is not presented"):
        mod.init_params(arg_params={"fc1_weight": nd.ones((8, 6))}, force_init=True)
    mod.init_params(initializer=mx.init.Zero(), arg_params={"fc1_weight": nd.ones((8, 6))},
                    allow_missing=True, force_init=True)
    arg, _ = params_np(mod)
    assert np.all(arg["fc1_weight"] == 1) and np.all(arg["fc2_weight"] == 0)


def test_module_set_params_exceptions():
    data = mx.nd.array([[0.05, .10]])
    label = mx.nd.array([[.01, 0.99]])
    train_data = mx.io.NDArrayIter(data, label, batch_size=1)
    x = mx.sym.Variable("data")
    x = mx.sym.FullyConnected(name="fc_0", data=x, num_hidden=2)
    x = mx.sym.Activation(name="act_0", data=x, act_type="sigmoid")
    x = mx.sym.FullyConnected(name="fc_1", data=x, num_hidden=2)
    x = mx.sym.Activation(name="act_1", data=x, act_type="sigmoid")
    x = mx.sym.LinearRegressionOutput(data=x, name="softmax", grad_scale=2)
    mod = mx.mod.Module(x, context=[mx.cpu()])
    mod.bind(train_data.provide_data, label_shapes=train_data.provide_label, for_training=True)

    correct = {"fc_0_weight": mx.nd.array([[.15, .20], [.25, .30]]),
               "fc_0_bias": mx.nd.array([.35, .35]),
               "fc_1_weight": mx.nd.array([[.40, .45], [.50, .55]]),
               "fc_1_bias": mx.nd.array([.60, .60])}
    missing = {k: v for k, v in correct.items() if k != "fc_1_bias"}
    extra = dict(correct, fc_2_weight=mx.nd.array([.60, .60]))
    missing_extra = {"fc_2_weight": mx.nd.array([.60, .60])}

    mod.set_params(force_init=True, arg_params=correct, aux_params={})
    mod.set_params(force_init=True, arg_params=missing, aux_params={}, allow_missing=True)
    with pytest.raises(RuntimeError):
        mod.set_params(force_init=True, arg_params=missing, aux_params={}, allow_missing=False)
    mod.set_params(force_init=True, arg_params=extra, aux_params={}, allow_missing=True,
                   allow_extra=True)
    with pytest.raises(ValueError):
        mod.set_params(force_init=True, arg_params=extra, aux_params={}, allow_missing=True,
                       allow_extra=False)
    # missing is detected before extra on the default path
    with pytest.raises(RuntimeError):
        mod.set_params(force_init=True, arg_params=missing_extra, aux_params={},
                       allow_missing=False, allow_extra=False)
    with pytest.raises(ValueError):
        mod.set_params(force_init=True, arg_params=missing_extra, aux_params={},
                       allow_missing=True, allow_extra=False)
    # extras are silently ignored when nothing is missing
    mod.set_params(arg_params=extra, aux_params={})


def test_set_params_allow_missing_marks_cache_dirty():
    mod = bound_mlp()
    mod.init_params()
    new = {"fc1_bias": nd.ones((8,)) * 3}
    mod.set_params(new, {}, allow_missing=True)
    assert mod._params_dirty and mod.params_initialized
    arg, _ = mod.get_params()
    np.testing.assert_array_equal(arg["fc1_bias"].asnumpy(), np.full(8, 3.0))
    assert not mod._params_dirty


def test_get_params_returns_the_same_dicts():
    mod = bound_mlp()
    mod.init_params()
    a1, x1 = mod.get_params()
    a2, x2 = mod.get_params()
    assert a1 is a2 and x1 is x2 and a1 is mod._arg_params


def test_bind_allocates_zero_cache_and_zero_grads():
    mod = bound_mlp()
    for arr in mod._arg_params.values():
        assert np.all(arr.asnumpy() == 0)
    for grads in mod._exec_group.grad_arrays:
        for g in grads:
            assert np.all(g.asnumpy() == 0)


# --- optimizer wiring ----------------------------------------------------------------------------
def test_module_reshape_keeps_rescale_grad():
    """rescale_grad is fixed at init_optimizer: after a reshape to twice the batch, one
    update with all-one head gradients moves the bias twice as far."""
    net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=20, name="fc")
    mod = mx.mod.Module(net, ("data",), None, context=[mx.cpu(0), mx.cpu(1)])
    mod.bind(data_shapes=[("data", (7, 20))])
    mod.init_params()
    mod.init_optimizer(optimizer_params={"learning_rate": 1})

    def one_step(rows):
        if (rows, 20) != mod.data_shapes[0].shape:
            mod.reshape(data_shapes=[("data", (rows, 20))])
        mod.forward(mx.io.DataBatch(data=[mx.nd.ones((rows, 20))], label=None))
        mod.backward([mx.nd.ones((rows, 20))])
        mod.update()
        assert mod.get_outputs()[0].shape == (rows, 20)
        return mod.get_params()[0]["fc_bias"].asnumpy()

    # the bias starts at 0; its gradient is the batch size, scaled by 1/7
    assert np.all(one_step(7) == -1)
    assert np.all(one_step(14) == -3)


def test_module_init_optimizer_idx2name():
    sym = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=20, name="fc")
    opt_params = {"learning_rate": 1, "rescale_grad": 1.0 / 8}
    mod1 = mx.mod.Module(sym, ("data",), None, context=mx.cpu(0))
    mod1.bind(data_shapes=[("data", (8, 20))])
    mod1.init_params()
    mod1.init_optimizer(optimizer="sgd", optimizer_params=opt_params)
    expected = dict(enumerate(mod1._exec_group.param_names))
    assert mod1._optimizer.idx2name == expected

    mod2 = mx.mod.Module(sym, ("data",), None, context=mx.cpu(0))
    mod2.bind(data_shapes=[("data", (8, 20))])
    mod2.init_params()
    mod2.init_optimizer(optimizer=mx.optimizer.SGD(**opt_params))
    assert mod2._optimizer.idx2name == expected


def test_idx2name_per_device_without_kvstore_update(monkeypatch):
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", "0")
    sym = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=3, name="fc")
    mod = mx.mod.Module(sym, label_names=None, context=[mx.cpu(0), mx.cpu(1)])
    mod.bind(data_shapes=[("data", (4, 2))])
    mod.init_params()
    mod.init_optimizer()
    assert mod._update_on_kvstore is False and mod._kvstore is not None
    assert mod._optimizer.idx2name == {0: "fc_weight", 1: "fc_weight", 2: "fc_bias",
                                       3: "fc_bias"}


def test_update_on_kvstore_rules():
    sym = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=3, name="fc")
    one = mx.mod.Module(sym, label_names=None)
    one.bind(data_shapes=[("data", (4, 2))])
    one.init_params()
    one.init_optimizer()
    assert one._kvstore is None and one._update_on_kvstore is False
    assert one._updater is not None

    two = mx.mod.Module(sym, label_names=None, context=[mx.cpu(0), mx.cpu(1)])
    two.bind(data_shapes=[("data", (4, 2))])
    two.init_params()
    two.init_optimizer()
    assert two._kvstore.type == "local" and two._update_on_kvstore is True
    assert two._updater is None
    assert two._optimizer.idx2name == {0: "fc_weight", 1: "fc_bias"}

    store = mx.kv.create("device")
    three = mx.mod.Module(sym, label_names=None)
    three.bind(data_shapes=[("data", (4, 2))])
    three.init_params()
    three.init_optimizer(kvstore=store)
    assert three._kvstore is store and three._update_on_kvstore is True

    none = mx.mod.Module(sym, label_names=None, context=[mx.cpu(0), mx.cpu(1)])
    none.bind(data_shapes=[("data", (4, 2))])
    none.init_params()
    none.init_optimizer(kvstore=None)
    assert none._kvstore is None and none._update_on_kvstore is False


def test_rescale_grad_and_weight_decay_rules():
    mod = bound_mlp(batch=8)
    mod.init_params()
    mod.init_optimizer(optimizer_params={"learning_rate": 0.1, "wd": 0.01})
    opt = mod._optimizer
    assert opt.rescale_grad == pytest.approx(1.0 / 8)
    # a string optimizer knows the symbol: no weight decay on biases
    names = opt.idx2name
    inv = {v: k for k, v in names.items()}
    assert opt._get_wd(inv["fc1_bias"]) == 0.0
    assert opt._get_wd(inv["fc1_weight"]) == pytest.approx(0.01)

    mod2 = bound_mlp(batch=8)
    mod2.init_params()
    with pytest.warns(UserWarning, match="rescale_grad"):
        mod2.init_optimizer(optimizer=mx.optimizer.SGD(learning_rate=0.1, wd=0.01))
    # an Optimizer object built without a symbol decays biases too (as in MXNet)
    opt2 = mod2._optimizer
    inv2 = {v: k for k, v in opt2.idx2name.items()}
    assert opt2._get_wd(inv2["fc1_bias"]) == pytest.approx(0.01)


def test_init_optimizer_twice_warns(caplog):
    mod = bound_mlp()
    mod.init_params()
    mod.init_optimizer()
    first = mod._optimizer
    with caplog.at_level(logging.WARNING):
        mod.init_optimizer(optimizer="adam")
    assert mod._optimizer is first and "already initialized" in caplog.text
    mod.init_optimizer(optimizer="adam", force_init=True)
    assert mod._optimizer is not first


def test_fixed_params_get_no_gradient_and_no_update():
    x, y = toy_data(8)
    mod = mx.mod.Module(mlp(), fixed_param_names=["fc1_weight"])
    mod.bind(data_shapes=[("data", (8, 6))], label_shapes=[("softmax_label", (8,))])
    mod.init_params(initializer=mx.init.Uniform(0.5))
    mod.init_optimizer(optimizer_params={"learning_rate": 1.0})
    assert mod._exec_group.grad_req["fc1_weight"] == "null"
    before, _ = params_np(mod)
    mod.forward_backward(mx.io.DataBatch([nd.array(x)], [nd.array(y)]))
    mod.update()
    after, _ = params_np(mod)
    np.testing.assert_array_equal(before["fc1_weight"], after["fc1_weight"])
    # the bias of the same layer still learns (MXNet's oneDNN build gets this wrong)
    assert not np.allclose(before["fc1_bias"], after["fc1_bias"])


def test_module_update_no_params():
    data = mx.sym.Variable("data")
    out = mx.sym.Dropout(data, 0.5)
    mod = mx.mod.Module(out)
    mod.bind(data_shapes=[("data", (10, 10))])
    mod.init_params()
    mod.init_optimizer()
    mod.forward_backward(mx.io.DataBatch([nd.ones((10, 10))]))
    mod.update()
    assert mod.get_outputs()[0].shape == (10, 10)


# --- save / load ---------------------------------------------------------------------------------
def _dict_equal(a, b):
    assert set(a) == set(b)
    for k in a:
        va, vb = a[k], b[k]
        if isinstance(va, (tuple, list)):
            for x, y in zip(va, vb):
                np.testing.assert_array_equal(x.asnumpy(), y.asnumpy())
        elif va is None:
            assert vb is None
        else:
            np.testing.assert_array_equal(va.asnumpy(), vb.asnumpy())


@pytest.mark.parametrize("ctxs", [[mx.cpu(0)], [mx.cpu(0), mx.cpu(1)]])
def test_save_load_with_optimizer_states(tmp_path, ctxs):
    prefix = str(tmp_path / "test")
    sym = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=100, name="fc")
    mod = mx.mod.Module(sym, ("data",), context=ctxs)
    mod.bind(data_shapes=[("data", (10, 10))])
    mod.init_params()
    mod.init_optimizer(optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    mod.update()   # no forward/backward: the gradients are the zeros bind allocated
    mod.save_checkpoint(prefix, 0, save_optimizer_states=True)
    assert sorted(os.listdir(tmp_path)) == ["test-0000.params", "test-0000.states",
                                            "test-symbol.json"]

    mod2 = mx.mod.Module.load(prefix, 0, load_optimizer_states=True, data_names=("data",))
    mod2.bind(data_shapes=[("data", (10, 10))])
    mod2.init_optimizer(optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    assert mod._symbol.tojson() == mod2._symbol.tojson()
    _dict_equal(mod.get_params()[0], mod2.get_params()[0])
    if len(ctxs) == 1:
        _dict_equal(mod._updater.states, mod2._updater.states)
    else:
        # updates ran on the kvstore: its states are keyed by parameter name
        states = mod._kvstore._updater.states
        assert set(states) == {"fc_weight", "fc_bias"}
        _dict_equal(states, mod2._updater.states)


def test_module_load_with_extra_params_fails_at_bind(tmp_path):
    prefix = str(tmp_path / "x")
    mod = bound_mlp()
    mod.init_params()
    arg, aux = mod.get_params()
    mx.model.save_checkpoint(prefix, 1, mod.symbol, dict(arg, extra=nd.ones((2,))), aux)
    loaded = mx.mod.Module.load(prefix, 1)
    with pytest.raises(ValueError):
        loaded.bind(data_shapes=[("data", (8, 6))], label_shapes=[("softmax_label", (8,))])


def test_save_load_params_file(tmp_path):
    fname = str(tmp_path / "p.params")
    mod = bound_mlp()
    mod.init_params(initializer=mx.init.Uniform(1.0))
    mod.save_params(fname)
    keys = sorted(nd.load(fname).keys())
    assert keys == ["arg:fc1_bias", "arg:fc1_weight", "arg:fc2_bias", "arg:fc2_weight"]
    other = bound_mlp()
    other.load_params(fname)
    _dict_equal(mod.get_params()[0], other.get_params()[0])
    nd.save(fname, {"bogus:fc1_bias": nd.ones((8,))})
    with pytest.raises(ValueError, match="Invalid param file"):
        other.load_params(fname)


def test_save_optimizer_states_is_atomic(tmp_path, monkeypatch):
    fname = str(tmp_path / "opt.states")
    mod = bound_mlp()
    mod.init_params()
    mod.init_optimizer(optimizer_params={"momentum": 0.9})
    mod.save_optimizer_states(fname)
    good = open(fname, "rb").read()

    def failing(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(mx.model.os, "replace", failing)
    with pytest.raises(OSError):
        mod.save_optimizer_states(fname)
    monkeypatch.undo()
    assert open(fname, "rb").read() == good
    assert os.listdir(tmp_path) == ["opt.states"]


def test_save_then_load_gives_same_outputs(tmp_path):
    prefix = str(tmp_path / "m")
    x, y = toy_data(16)
    it = mx.io.NDArrayIter(x, y, batch_size=8)
    mod = mx.mod.Module(mlp())
    mod.fit(it, num_epoch=2, optimizer_params={"learning_rate": 0.5},
            initializer=mx.init.Xavier())
    mod.save_checkpoint(prefix, 2)
    ref = mod.predict(it).asnumpy()
    loaded = mx.mod.Module.load(prefix, 2)
    loaded.bind(data_shapes=it.provide_data, label_shapes=it.provide_label, for_training=False)
    np.testing.assert_array_equal(loaded.predict(it).asnumpy(), ref)


# --- forward reshape, batch API variants ---------------------------------------------------------
def _two_branch_conv_net(num_class):
    """Two image inputs of any spatial size, each convolved, pooled and summed per sample,
    then classified."""
    per_sample = []
    for name, kernel, filters, stride, pool_type in (("data1", (2, 2), 2, (2, 2), "avg"),
                                                     ("data2", (3, 3), 3, (1, 1), "max")):
        features = mx.sym.Pooling(
            data=mx.sym.Convolution(data=mx.sym.Variable(name), kernel=kernel,
                                    num_filter=filters, stride=stride),
            kernel=(2, 2), stride=(1, 1), pool_type=pool_type)
        per_sample.append(mx.sym.sum(data=mx.sym.flatten(features), axis=1))
    scores = mx.sym.FullyConnected(data=per_sample[0] + per_sample[1], num_hidden=num_class)
    return mx.sym.SoftmaxOutput(data=scores, name="softmax")


def test_forward_reshape_changes_batch_and_spatial_dims():
    """forward re-shapes the executors whenever a batch's data shapes differ from the bound
    ones: the batch size and the image sizes may change, and training goes on."""
    num_class = 10
    sym = _two_branch_conv_net(num_class)
    mod = mx.mod.Module(symbol=sym, data_names=["data1", "data2"],
                        label_names=["softmax_label"])
    mod.bind(data_shapes=[("data1", (10, 3, 16, 16)), ("data2", (10, 3, 8, 8))],
             label_shapes=[("softmax_label", (10,))])
    mod.init_params()
    mod.init_optimizer(optimizer_params={"learning_rate": 0.01})
    start = {name: value.asnumpy() for name, value in mod.get_params()[0].items()}
    for n, s1, s2 in [(10, (16, 16), (8, 8)), (3, (16, 16), (8, 8)), (20, (16, 16), (8, 8)),
                      (20, (30, 30), (8, 16)), (5, (7, 10), (6, 4))]:
        batch = mx.io.DataBatch(data=[nd.random.uniform(0, 9, (n, 3) + s1),
                                      nd.random.uniform(5, 15, (n, 3) + s2)],
                                label=[nd.ones((n,))])
        mod.forward(batch)
        assert mod.get_outputs()[0].shape == (n, num_class)
        mod.backward()
        mod.update()
    # every update reached the parameters shared by the re-shaped executors
    after = mod.get_params()[0]
    assert all(not np.array_equal(after[name].asnumpy(), value) for name, value in start.items()
               if name.endswith("_weight"))

    eval_it = mx.io.NDArrayIter(data=[nd.random.uniform(0, 9, (30, 3, 10, 10)),
                                      nd.random.uniform(15, 25, (30, 3, 6, 8))],
                                label=[nd.ones((30,))], batch_size=5)
    assert len(mod.score(eval_data=eval_it, eval_metric="acc")) == 1

    pred_it = mx.io.NDArrayIter(data=[nd.random.uniform(0, 9, (10, 3, 10, 10)),
                                      nd.random.uniform(15, 25, (10, 3, 6, 8))])
    mod.bind(data_shapes=[("data1", (1, 3, 10, 10)), ("data2", (1, 3, 6, 8))],
             for_training=False, force_rebind=True)
    assert mod.predict(pred_it).shape == (10, num_class)


def test_forward_with_data_only_batches_and_arrays():
    Batch = namedtuple("Batch", ["data"])
    out = mx.sym.Variable("data") * 2
    mod = mx.mod.Module(symbol=out, label_names=None)
    mod.bind(data_shapes=[("data", (1, 10))])
    mod.init_params()
    mod.forward(Batch([nd.ones((1, 10))]))
    assert mod.get_outputs()[0].shape == (1, 10)
    mod.forward(Batch([nd.ones((3, 5))]))
    assert mod.get_outputs()[0].shape == (3, 5)
    np.testing.assert_array_equal(mod.get_outputs()[0].asnumpy(), np.full((3, 5), 2.0))

    mod = mx.mod.Module(symbol=out, label_names=None)
    mod.bind(data_shapes=[("data", (1, 10))])
    mod.init_params()
    assert mod.predict(nd.ones((1, 10))).shape == (1, 10)
    res = mod.predict(np.ones((2, 10)))
    np.testing.assert_array_equal(res.asnumpy(), np.full((2, 10), 2.0))
    with pytest.raises(ValueError, match="NDArray or DataIter"):
        mod.predict([1, 2, 3])


def test_forward_with_list_of_batches_per_device():
    x, y = toy_data(8)
    mod = bound_mlp(batch=8, context=[mx.cpu(0), mx.cpu(1)])
    mod.init_params(initializer=mx.init.Uniform(0.5))
    whole = mx.io.DataBatch([nd.array(x)], [nd.array(y)])
    mod.forward(whole, is_train=False)
    ref = mod.get_outputs()[0].asnumpy()
    parts = [mx.io.DataBatch([nd.array(x[:4])], [nd.array(y[:4])]),
             mx.io.DataBatch([nd.array(x[4:])], [nd.array(y[4:])])]
    mod.forward(parts, is_train=False)
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), ref, rtol=1e-6)
    metric = mx.metric.create("acc")
    mod.update_metric(metric, [p.label for p in parts], pre_sliced=True)
    assert metric.num_inst == 8


# --- states (test_module_states) -----------------------------------------------------------------
def test_module_states_set_and_feed_back():
    h0 = mx.sym.Variable("lstm_begin_h", shape=(0, 20), __layout__="NC")
    c0 = mx.sym.Variable("lstm_begin_c", shape=(0, 20), __layout__="NC")
    _, h, c = hand_lstm(20, 10, "lstm_", mx.sym.Variable("data"), h0, c0)
    net = mx.sym.Group([h, c])
    mod = mx.mod.Module(net, context=[mx.cpu(0), mx.cpu(1)], label_names=None,
                        state_names=["lstm_begin_h", "lstm_begin_c"])
    mod.bind(data_shapes=[("data", (5, 10))], label_shapes=None, for_training=False)
    mod.init_params()
    batch = mx.io.DataBatch(data=[nd.zeros((5, 10))], label=[])

    mod.set_states(value=1)
    for per_state in mod.get_states(merge_multi_context=False):
        for arr in per_state:
            assert np.all(arr.asnumpy() == 1)
    mod.forward(batch)
    out = mod.get_outputs(merge_multi_context=False)
    out1 = mod.get_outputs(merge_multi_context=True)
    mod.set_states(states=out)
    mod.forward(batch)
    out2 = mod.get_outputs(merge_multi_context=True)
    for x1, x2 in zip(out1, out2):
        assert not np.allclose(x1.asnumpy(), x2.asnumpy(), rtol=1e-3)
    with pytest.raises((MXNetError, AssertionError)):
        mod.get_states()     # merging states is not supported (MXNet asserts)
    with pytest.raises(ValueError):
        mod.set_states(states=out, value=1)
    with pytest.raises(ValueError):
        mod.set_states()


# --- fit / score / predict -----------------------------------------------------------------------
def test_fit_logs_like_mxnet(caplog):
    x, y = toy_data(24)
    train = mx.io.NDArrayIter(x, y, batch_size=8)
    val = mx.io.NDArrayIter(x, y, batch_size=8)
    mod = mx.mod.Module(mlp())
    with caplog.at_level(logging.INFO):
        mod.fit(train, eval_data=val, num_epoch=2, optimizer_params={"learning_rate": 0.1})
    messages = [r.getMessage() for r in caplog.records]
    for epoch in (0, 1):
        assert any(m.startswith("Epoch[%d] Train-accuracy=" % epoch) for m in messages)
        assert any(m.startswith("Epoch[%d] Time cost=" % epoch) for m in messages)
        assert any(m.startswith("Epoch[%d] Validation-accuracy=" % epoch) for m in messages)
    with pytest.raises(ValueError, match="num_epoch"):
        mod.fit(train)


def test_fit_callbacks_and_epoch_sync(tmp_path):
    x, y = toy_data(24)
    train = mx.io.NDArrayIter(x, y, batch_size=8)
    seen = {"batch": [], "epoch": [], "eval": []}
    mod = mx.mod.Module(mlp(), context=[mx.cpu(0), mx.cpu(1)])
    mod.fit(train, eval_data=train, num_epoch=2,
            batch_end_callback=lambda p: seen["batch"].append((p.epoch, p.nbatch)),
            epoch_end_callback=[lambda e, s, a, x_: seen["epoch"].append(
                (e, sorted(a), s.tojson() == mod.symbol.tojson())),
                mx.callback.do_checkpoint(str(tmp_path / "ck"))],
            eval_end_callback=lambda p: seen["eval"].append((p.epoch, p.nbatch)))
    assert seen["batch"] == [(e, b) for e in range(2) for b in range(3)]
    assert [e for e, _, _ in seen["epoch"]] == [0, 1] and all(ok for _, _, ok in seen["epoch"])
    assert seen["eval"] == [(0, 3), (1, 3)]
    assert os.path.exists(str(tmp_path / "ck-0002.params"))
    # after fit the devices agree with the cache
    arg, _ = mod.get_params()
    for name, devs in zip(mod._exec_group.param_names, mod._exec_group.param_arrays):
        for d in devs:
            np.testing.assert_allclose(d.asnumpy(), arg[name].asnumpy(), rtol=1e-6)


def test_fit_stop_training_from_callback():
    x, y = toy_data(24)
    train = mx.io.NDArrayIter(x, y, batch_size=8)
    epochs = []

    def stop_after_first(epoch, *rest):
        epochs.append(epoch)
        raise StopTraining("enough")

    mod = mx.mod.Module(mlp())
    mod.fit(train, num_epoch=5, epoch_end_callback=stop_after_first)
    assert epochs == [0]

    # an eval-end callback (EarlyStopping) stops fit after that epoch's validation
    stopper = EarlyStopping(monitor="accuracy", patience=1, mode="min")
    mod2 = mx.mod.Module(mlp())
    mod2.fit(train, eval_data=train, num_epoch=20, eval_end_callback=stopper,
             optimizer_params={"learning_rate": 0.5})
    assert stopper.stopped_epoch is not None and stopper.stopped_epoch < 19


def test_fit_batch_end_locals_name_the_run():
    """A batch-end callback's ``param.locals`` holds fit's arguments (``self`` included) and
    the current ``epoch``, ``nbatch``, ``data_batch`` and training ``eval_metric``; fit's
    own loop variables are not part of it (MXNet passes its frame's locals())."""
    x, y = toy_data(16)
    train = mx.io.NDArrayIter(x, y, batch_size=8)
    seen = []
    mod = mx.mod.Module(mlp())
    mod.fit(train, num_epoch=2, batch_end_callback=lambda p: seen.append(dict(p.locals)))
    assert [(loc["epoch"], loc["nbatch"]) for loc in seen] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for loc in seen:
        assert loc["self"] is mod and loc["train_data"] is train and loc["num_epoch"] == 2
        assert isinstance(loc["data_batch"], mx.io.DataBatch)
        assert isinstance(loc["eval_metric"], mx.metric.EvalMetric)
        assert loc["eval_data"] is None and loc["begin_epoch"] == 0


def test_fit_stop_from_batch_end_ends_the_epoch_early(caplog):
    """StopTraining from a batch-end callback ends the epoch after that batch; the epoch is
    still logged (its metric over the batches run) and its epoch-end callbacks still run."""
    x, y = toy_data(24)
    train = mx.io.NDArrayIter(x, y, batch_size=8)
    calls = []

    def stop_at_first_batch(param):
        calls.append(("batch", param.epoch, param.nbatch))
        raise StopTraining("enough")

    mod = mx.mod.Module(mlp())
    with caplog.at_level(logging.INFO):
        mod.fit(train, num_epoch=3, batch_end_callback=stop_at_first_batch,
                epoch_end_callback=lambda epoch, *rest: calls.append(("epoch", epoch)))
    assert calls == [("batch", 0, 0), ("epoch", 0)]
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("Epoch[0] Train-accuracy=") for m in messages)
    assert "Epoch[0] a callback asked to stop training" in messages
    assert not any(m.startswith("Epoch[1]") for m in messages)


def test_fit_calls_in_order_with_validation_metric():
    """Per epoch: the batch-end callbacks, then the epoch-end callbacks, then validation with
    ``validation_metric`` (its batch-end callbacks, then its end callback)."""
    x, y = toy_data(16)
    train = mx.io.NDArrayIter(x, y, batch_size=8)
    val = mx.io.NDArrayIter(x, y, batch_size=4)
    calls = []
    mod = mx.mod.Module(mlp())
    mod.fit(train, eval_data=val, num_epoch=2, begin_epoch=1, eval_metric="acc",
            validation_metric="mse",
            batch_end_callback=lambda p: calls.append(("batch", p.epoch, p.nbatch,
                                                       p.eval_metric.name)),
            epoch_end_callback=lambda epoch, *rest: calls.append(("epoch", epoch)),
            eval_batch_end_callback=lambda p: calls.append(("eval batch", p.epoch, p.nbatch,
                                                            p.eval_metric.name)),
            eval_end_callback=lambda p: calls.append(("eval end", p.epoch, p.nbatch)))
    assert calls == [("batch", 1, 0, "accuracy"), ("batch", 1, 1, "accuracy"), ("epoch", 1),
                     ("eval batch", 1, 0, "mse"), ("eval batch", 1, 1, "mse"),
                     ("eval batch", 1, 2, "mse"), ("eval batch", 1, 3, "mse"),
                     ("eval end", 1, 4)]


def test_fit_prepares_each_prefetched_batch():
    """fit prepares a batch (with sparse_row_id_fn) when it fetches it ahead of time: every
    batch but the first of each epoch, as in MXNet."""
    prepared = []

    class Recording(mx.mod.Module):
        def prepare(self, data_batch, sparse_row_id_fn=None):
            prepared.append((data_batch.data[0].asnumpy()[0, 0], sparse_row_id_fn))

    x, y = toy_data(24)
    train = mx.io.NDArrayIter(x, y, batch_size=8)

    def row_ids(batch):
        return {}

    Recording(mlp()).fit(train, num_epoch=2, sparse_row_id_fn=row_ids)
    firsts = [x[8, 0], x[16, 0]]
    assert prepared == [(first, row_ids) for first in firsts] * 2


def test_fit_reads_labels_before_next_batch():
    """The metric is updated from the current batch before the next one is fetched."""
    state = {"current": None}

    class MockBatch:
        def __init__(self, i):
            self.i = i

        @property
        def label(self):
            assert self.i == state["current"]

    class MockTrainData:
        provide_data = None
        provide_label = None

        def __init__(self, n):
            self.n = n
            self.i = 0

        def reset(self):
            self.i = 0

        def __iter__(self):
            self.i = 0
            return self

        def __next__(self):
            if self.i < self.n:
                state["current"] = self.i
                self.i += 1
                return MockBatch(state["current"])
            raise StopIteration

    mod = mx.mod.BaseModule()

    def noop(*args, **kwargs):
        return None

    for name in ("bind", "init_params", "init_optimizer", "forward", "backward", "update"):
        setattr(mod, name, noop)
    mod.update_metric = lambda metric, labels, pre_sliced=False: labels
    mod.get_params = lambda: (None, None)
    mod.fit(MockTrainData(2), num_epoch=1)


def test_score_keeps_padding_and_predict_strips_it():
    x, y = toy_data(10)
    it = mx.io.NDArrayIter(x, y, batch_size=4)    # last batch padded by 2
    mod = bound_mlp(batch=4)
    mod.init_params(initializer=mx.init.Uniform(0.5))
    res = mod.score(it, "acc")
    assert len(res) == 1 and res[0][0] == "accuracy"
    metric = mx.metric.Accuracy()
    mod.score(it, metric)
    assert metric.num_inst == 12
    pred = mod.predict(it)
    assert pred.shape == (10, 3)
    per_batch = mod.predict(it, merge_batches=False)
    assert [p[0].shape[0] for p in per_batch] == [4, 4, 2]
    assert isinstance(mod.predict(it, always_output_list=True), list)
    two = mod.predict(it, num_batch=2)
    assert two.shape == (8, 3)
    seen = []
    for outs, nbatch, _batch in mod.iter_predict(it):
        seen.append((nbatch, outs[0].shape[0]))
    assert seen == [(0, 4), (1, 4), (2, 2)]


def test_predict_empty_iterator_returns_empty_list():
    mod = bound_mlp(batch=4)
    mod.init_params()
    empty = mx.io.NDArrayIter(np.zeros((3, 6), np.float32), batch_size=4,
                              last_batch_handle="discard")
    assert mod.predict(empty) == []


def test_update_metric_once_per_device():
    x, y = toy_data(8)
    calls = []

    class Counting(mx.metric.EvalMetric):
        def __init__(self):
            super().__init__("counting")

        def update(self, labels, preds):
            calls.append((labels[0].shape, preds[0].shape))

    mod = bound_mlp(batch=8, context=[mx.cpu(0), mx.cpu(1)])
    mod.init_params()
    mod.forward(mx.io.DataBatch([nd.array(x)], [nd.array(y)]), is_train=False)
    mod.update_metric(Counting(), [nd.array(y)])
    assert calls == [((4,), (4, 3)), ((4,), (4, 3))]


# --- sparse storage types (row_sparse parameters, csr data; stored densely) -------------------
def test_module_initializer_keeps_row_sparse_stype():
    n, m = 128, 100
    x = mx.sym.var("data", stype="csr")
    v = mx.sym.var("v", shape=(m, 1), init=mx.init.Uniform(scale=.1), stype="row_sparse")
    model = mx.sym.LinearRegressionOutput(data=mx.sym.dot(lhs=x, rhs=v),
                                          label=mx.sym.Variable("label"), name="out")
    data = mx.nd.zeros(shape=(n, m), stype="csr")
    label = mx.nd.zeros((n, 1))
    iterator = mx.io.NDArrayIter(data=data, label={"label": label}, batch_size=n,
                                 last_batch_handle="discard")
    mod = mx.mod.Module(symbol=model, data_names=["data"], label_names=["label"])
    mod.bind(data_shapes=iterator.provide_data, label_shapes=iterator.provide_label)
    mod.init_params()
    v = mod._arg_params["v"]
    assert v.stype == "row_sparse"
    assert np.sum(v.asnumpy()) != 0


@pytest.mark.parametrize("optimizer, epochs, target", [
    ("sgd", 10, 0.02),
    pytest.param("adam", 10, 0.05, marks=pytest.mark.slow),
    pytest.param("adagrad", 20, 0.09, marks=pytest.mark.slow)])
def test_factorization_machine_module(optimizer, epochs, target):
    """A factorization machine on csr data with row_sparse weights learns a constant label."""
    mx.random.seed(11)
    np.random.seed(11)
    factor_size, feature_dim, batch_size, num_batches = 4, 10000, 64, 5
    init = mx.init.Normal(sigma=0.01)
    x = mx.sym.Variable("data", stype="csr")
    factors = mx.sym.Variable("v", shape=(feature_dim, factor_size), init=init,
                              stype="row_sparse")
    weight = mx.sym.var("w1_weight", shape=(feature_dim, 1), init=init, stype="row_sparse")
    linear = mx.sym.broadcast_add(mx.sym.dot(x, weight), mx.sym.var("w1_bias", shape=(1,)))
    # the pairwise term 0.5 * (sum_f (x.v_f)^2 - sum_i x_i^2 |v_i|^2)
    projected_sq = mx.sym.sum(data=mx.sym.square(data=mx.sym.dot(x, factors)), axis=1,
                              keepdims=True)
    self_terms = mx.sym.dot(mx.sym.square(data=x),
                            mx.sym._internal._square_sum(data=factors, axis=1, keepdims=True))
    pairwise = 0.5 * mx.sym.elemwise_sub(projected_sq, self_terms)
    model = mx.sym.LinearRegressionOutput(data=mx.sym.elemwise_add(linear, pairwise),
                                          label=mx.sym.Variable("label"))

    num_samples = batch_size * num_batches
    dense = np.random.uniform(0, 1, (num_samples, feature_dim)).astype(np.float32)
    dense[np.random.uniform(0, 1, dense.shape) > 0.1] = 0
    csr = mx.nd.array(dense).tostype("csr")
    train_iter = mx.io.NDArrayIter(data=csr, label={"label": mx.nd.ones((num_samples, 1))},
                                   batch_size=batch_size, last_batch_handle="discard")
    mod = mx.mod.Module(symbol=model, data_names=["data"], label_names=["label"])
    mod.bind(data_shapes=train_iter.provide_data, label_shapes=train_iter.provide_label)
    mod.init_params(initializer=init)
    kwargs = dict(clip_gradient=5.0, rescale_grad=1.0 / batch_size)
    opt = {"sgd": lambda: mx.optimizer.SGD(momentum=0.1, learning_rate=0.01, **kwargs),
           "adam": lambda: mx.optimizer.Adam(learning_rate=0.001, **kwargs),
           "adagrad": lambda: mx.optimizer.AdaGrad(learning_rate=0.01, **kwargs)}[optimizer]
    mod.init_optimizer(optimizer=opt())
    metric = mx.metric.create("MSE")
    for _ in range(epochs):
        train_iter.reset()
        metric.reset()
        for batch in train_iter:
            mod.forward(batch, is_train=True)
            mod.update_metric(metric, batch.label)
            mod.backward()
            mod.update()
    assert metric.get()[1] < target


def test_forward_reshape_of_label_less_binding_ignores_batch_labels():
    """A module bound without labels re-shapes for a new batch size even when the batch
    carries labels but no provide_label (MXNet fails zipping its missing label descs)."""
    x, y = toy_data(6)
    net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=3, name="fc")
    mod = mx.mod.Module(net, label_names=None)
    mod.bind(data_shapes=[("data", (4, 6))], for_training=False)
    mod.init_params()
    mod.forward(mx.io.DataBatch([nd.array(x)], [nd.array(y)]))
    assert mod.get_outputs()[0].shape == (6, 3)
    assert mod.label_shapes is None
