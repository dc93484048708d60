"""Module semantics stated as properties (hypothesis).

* one context equals several, for any work_load_list;
* grad_req='add' over k batches equals one batch k times larger;
* reshape keeps the parameters (same arrays, same values);
* predict does not depend on the batch size;
* save -> load gives identical outputs;
* k training steps through fit equal k manual forward_backward/update steps.
"""
import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import lightmod as mx
from lightmod import nd
from lightmod.module.executor_group import _split_input_slice

SETTINGS = dict(max_examples=8, deadline=None)


def mlp(hidden, classes):
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=hidden, name="fc1")
    net = mx.sym.Activation(net, act_type="tanh", name="act1")
    net = mx.sym.FullyConnected(net, num_hidden=classes, name="fc2")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def regression(outputs):
    net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=outputs, name="fc")
    return mx.sym.LinearRegressionOutput(net, name="lro")


def fixed_params(dim, hidden, classes, seed):
    rng = np.random.RandomState(seed)
    return {"fc1_weight": nd.array(rng.uniform(-0.5, 0.5, (hidden, dim))),
            "fc1_bias": nd.array(rng.uniform(-0.1, 0.1, (hidden,))),
            "fc2_weight": nd.array(rng.uniform(-0.5, 0.5, (classes, hidden))),
            "fc2_bias": nd.array(rng.uniform(-0.1, 0.1, (classes,)))}


def data(n, dim, classes, seed):
    rng = np.random.RandomState(seed + 100)
    return (rng.uniform(-1, 1, (n, dim)).astype(np.float32),
            rng.randint(0, classes, n).astype(np.float32))


def trained(context, work_load_list, batch, dim, hidden, classes, seed, steps=2):
    mod = mx.mod.Module(mlp(hidden, classes), context=context, work_load_list=work_load_list)
    mod.bind(data_shapes=[("data", (batch, dim))], label_shapes=[("softmax_label", (batch,))])
    mod.init_params(arg_params=fixed_params(dim, hidden, classes, seed))
    mod.init_optimizer(optimizer_params={"learning_rate": 0.3, "momentum": 0.9, "wd": 1e-3})
    x, y = data(batch * steps, dim, classes, seed)
    for s in range(steps):
        sl = slice(s * batch, (s + 1) * batch)
        mod.forward_backward(mx.io.DataBatch([nd.array(x[sl])], [nd.array(y[sl])]))
        mod.update()
    mod.forward(mx.io.DataBatch([nd.array(x[:batch])], [nd.array(y[:batch])]), is_train=False)
    outputs = mod.get_outputs()[0].asnumpy()
    arg, _ = mod.get_params()
    return {k: v.asnumpy() for k, v in arg.items()}, outputs


@settings(**SETTINGS)
@given(batch=st.integers(3, 10), loads=st.lists(st.integers(1, 3), min_size=2, max_size=3),
       dim=st.integers(1, 5), hidden=st.integers(1, 6), classes=st.integers(2, 4),
       seed=st.integers(0, 1000))
def test_one_context_equals_several(batch, loads, dim, hidden, classes, seed):
    try:
        _split_input_slice(batch, loads)
    except ValueError:
        assume(False)
    ref_params, ref_out = trained(mx.cpu(0), None, batch, dim, hidden, classes, seed)
    ctxs = [mx.cpu(i) for i in range(len(loads))]
    params, out = trained(ctxs, loads, batch, dim, hidden, classes, seed)
    np.testing.assert_allclose(out, ref_out, rtol=1e-4, atol=1e-6)
    for k in ref_params:
        np.testing.assert_allclose(params[k], ref_params[k], rtol=1e-4, atol=1e-5)


@settings(**SETTINGS)
@given(k=st.integers(1, 4), batch=st.integers(1, 5), dim=st.integers(1, 4),
       outputs=st.integers(1, 3), seed=st.integers(0, 1000))
def test_grad_add_over_k_batches_equals_one_big_batch(k, batch, dim, outputs, seed):
    rng = np.random.RandomState(seed)
    x = rng.uniform(-1, 1, (k * batch, dim)).astype(np.float32)
    y = rng.uniform(-1, 1, (k * batch, outputs)).astype(np.float32)
    w = {"fc_weight": nd.array(rng.uniform(-1, 1, (outputs, dim))),
         "fc_bias": nd.array(rng.uniform(-1, 1, (outputs,)))}

    small = mx.mod.Module(regression(outputs), label_names=["lro_label"])
    small.bind([("data", (batch, dim))], [("lro_label", (batch, outputs))], grad_req="add")
    small.init_params(arg_params=w)
    for i in range(k):
        sl = slice(i * batch, (i + 1) * batch)
        small.forward_backward(mx.io.DataBatch([nd.array(x[sl])], [nd.array(y[sl])]))

    big = mx.mod.Module(regression(outputs), label_names=["lro_label"])
    big.bind([("data", (k * batch, dim))], [("lro_label", (k * batch, outputs))])
    big.init_params(arg_params=w)
    big.forward_backward(mx.io.DataBatch([nd.array(x)], [nd.array(y)]))

    gs = small._exec_group.execs[0].grad_dict
    gb = big._exec_group.execs[0].grad_dict
    for name in ("fc_weight", "fc_bias"):
        np.testing.assert_allclose(gs[name].asnumpy(), gb[name].asnumpy(), rtol=1e-4,
                                   atol=1e-5)


@settings(**SETTINGS)
@given(b1=st.integers(1, 9), b2=st.integers(1, 9), ndev=st.integers(1, 2),
       seed=st.integers(0, 1000))
def test_reshape_keeps_parameters(b1, b2, ndev, seed):
    assume(b1 >= ndev and b2 >= ndev)
    ctxs = [mx.cpu(i) for i in range(ndev)]
    mod = mx.mod.Module(mlp(4, 3), context=ctxs)
    mod.bind([("data", (b1, 5))], [("softmax_label", (b1,))])
    mod.init_params(arg_params=fixed_params(5, 4, 3, seed))
    before_arrays = [list(devs) for devs in mod._exec_group.param_arrays]
    before = {k: v.asnumpy() for k, v in mod.get_params()[0].items()}
    mod.reshape([("data", (b2, 5))], [("softmax_label", (b2,))])
    assert mod.data_shapes[0].shape == (b2, 5)
    for old, new in zip(before_arrays, mod._exec_group.param_arrays):
        for a, b in zip(old, new):     # the same memory: a write through one shows in the other
            saved = a.asnumpy()
            a[:] = saved + 1
            assert np.array_equal(b.asnumpy(), saved + 1)
            a[:] = saved
    x, y = data(b2, 5, 3, seed)
    mod.forward(mx.io.DataBatch([nd.array(x)], [nd.array(y)]), is_train=False)
    out = mod.get_outputs()[0].asnumpy()
    assert out.shape == (b2, 3)
    fresh = mx.mod.Module(mlp(4, 3))
    fresh.bind([("data", (b2, 5))], [("softmax_label", (b2,))], for_training=False)
    fresh.init_params(arg_params=fixed_params(5, 4, 3, seed))
    fresh.forward(mx.io.DataBatch([nd.array(x)], [nd.array(y)]), is_train=False)
    np.testing.assert_allclose(out, fresh.get_outputs()[0].asnumpy(), rtol=1e-5, atol=1e-7)
    after = {k: v.asnumpy() for k, v in mod.get_params()[0].items()}
    for k in before:
        np.testing.assert_array_equal(before[k], after[k])


@settings(**SETTINGS)
@given(n=st.integers(1, 13), b1=st.integers(1, 6), b2=st.integers(1, 6),
       seed=st.integers(0, 1000))
def test_predict_independent_of_batch_size(n, b1, b2, seed):
    x, _ = data(n, 5, 3, seed)
    results = []
    for bs in (b1, b2):
        it = mx.io.NDArrayIter(x, batch_size=bs)
        mod = mx.mod.Module(mlp(4, 3))
        mod.bind(it.provide_data, for_training=False)     # no label shapes: not needed
        mod.init_params(arg_params=fixed_params(5, 4, 3, seed))
        results.append(mod.predict(it).asnumpy())
    assert results[0].shape == (n, 3)
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5, atol=1e-7)


@settings(max_examples=4, deadline=None)
@given(hidden=st.integers(1, 6), batch=st.integers(1, 6), seed=st.integers(0, 1000))
def test_save_load_identical_outputs(tmp_path_factory, hidden, batch, seed):
    prefix = str(tmp_path_factory.mktemp("ckpt") / "m")
    x, y = data(batch * 2, 5, 3, seed)
    it = mx.io.NDArrayIter(x, y, batch_size=batch)
    mod = mx.mod.Module(mlp(hidden, 3))
    mod.fit(it, num_epoch=1, arg_params=fixed_params(5, hidden, 3, seed),
            optimizer_params={"learning_rate": 0.2, "momentum": 0.5})
    mod.save_checkpoint(prefix, 1, save_optimizer_states=True)
    loaded = mx.mod.Module.load(prefix, 1, load_optimizer_states=True)
    loaded.bind(it.provide_data, it.provide_label)
    loaded.init_optimizer(optimizer_params={"learning_rate": 0.2, "momentum": 0.5})
    np.testing.assert_array_equal(loaded.predict(it).asnumpy(), mod.predict(it).asnumpy())
    # and training continues identically (momentum restored)
    it.reset()
    batch0 = next(iter(it))
    for m in (mod, loaded):
        m.forward_backward(batch0)
        m.update()
    a, b = mod.get_params()[0], loaded.get_params()[0]
    for k in a:
        np.testing.assert_array_equal(a[k].asnumpy(), b[k].asnumpy())


@settings(max_examples=5, deadline=None)
@given(k=st.integers(1, 4), batch=st.integers(1, 5), seed=st.integers(0, 1000))
def test_fit_equals_manual_steps(k, batch, seed):
    x, y = data(k * batch, 5, 3, seed)
    it = mx.io.NDArrayIter(x, y, batch_size=batch)
    opt_params = {"learning_rate": 0.1, "momentum": 0.9}
    fitted = mx.mod.Module(mlp(4, 3))
    fitted.fit(it, num_epoch=1, arg_params=fixed_params(5, 4, 3, seed),
               optimizer_params=opt_params)
    manual = mx.mod.Module(mlp(4, 3))
    manual.bind(it.provide_data, it.provide_label)
    manual.init_params(arg_params=fixed_params(5, 4, 3, seed))
    manual.init_optimizer(optimizer_params=opt_params)
    it.reset()
    for b in it:
        manual.forward_backward(b)
        manual.update()
    a, m = fitted.get_params()[0], manual.get_params()[0]
    for name in a:
        np.testing.assert_array_equal(a[name].asnumpy(), m[name].asnumpy())
