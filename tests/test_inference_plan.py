"""The executor's inference plan (lightmod/inference_plan.py): BatchNorm folded into the layer
before it, bias and activation in the layer's output pass, Dropout as the identity. It must give
the outputs of the plain ``forward(is_train=False)`` walk, never change a parameter, and follow
parameter changes at once."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from inference_plan_cases import build, compare, fill, stacks

import lightmod as mx
from lightmod import inference_plan


@pytest.fixture(autouse=True)
def _one_executor(monkeypatch):
    """These tests inspect the plan of the executor they bind: no sample split, which would
    run the plans of its child executors instead (tests/test_sample_split.py tests those)."""
    monkeypatch.setenv("LIGHTMOD_SAMPLE_SPLIT", "0")


@settings(max_examples=40, deadline=None)
@given(case=stacks(), seed=st.integers(0, 2 ** 16))
def test_plan_matches_plain_inference_forward(case, seed):
    layers, fc, shape = case
    planned, plain, plan = compare(build(layers, fc, shape[1]), shape, mx.cpu(), seed)
    np.testing.assert_allclose(planned, plain, rtol=2e-5, atol=2e-5)
    fusable = any(layer["bn"] or layer["act"] for layer in layers) or fc["bn"] or fc["act"]
    assert plan is not None and (plan.fused_count > 0) == bool(fusable)


def _conv_bn_net():
    net = mx.sym.var("data")
    net = mx.sym.Convolution(net, kernel=(3, 3), pad=(1, 1), num_filter=8, name="conv")
    net = mx.sym.BatchNorm(net, fix_gamma=False, name="bn")
    net = mx.sym.Activation(net, act_type="relu", name="relu")
    net = mx.sym.Dropout(net, p=0.5, name="drop")
    net = mx.sym.FullyConnected(net, num_hidden=4, name="fc")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def _module(for_training=True):
    mod = mx.mod.Module(_conv_bn_net(), context=mx.cpu())
    mod.bind(data_shapes=[("data", (5, 3, 6, 6))], label_shapes=[("softmax_label", (5,))],
             for_training=for_training)
    mx.random.seed(0)
    mod.init_params(mx.init.Uniform(0.5))
    args, aux = mod.get_params()
    rng = np.random.RandomState(1)
    aux = {k: mx.nd.array(rng.uniform(0.3, 2.0, v.shape)) for k, v in aux.items()}
    args["bn_gamma"] = mx.nd.array(rng.uniform(0.5, 2.0, args["bn_gamma"].shape))
    mod.set_params(args, aux)
    return mod


def _data(seed=2):
    rng = np.random.RandomState(seed)
    return mx.io.NDArrayIter(rng.uniform(-1, 1, (10, 3, 6, 6)).astype(np.float32),
                             rng.randint(0, 4, 10).astype(np.float32), batch_size=5)


def _reference_predict(mod, it):
    """predict through the plain walk (a monitor makes the executor skip the plan)."""
    exe = mod._exec_group.execs[0]
    exe.set_monitor_callback(lambda name, arr: None)
    try:
        return mod.predict(it).asnumpy()
    finally:
        exe._monitor_callback = None


@pytest.mark.parametrize("for_training", [True, False])
def test_predict_leaves_params_bit_identical_and_matches_plain(for_training):
    mod = _module(for_training)
    before_args, before_aux = [{k: v.asnumpy().copy() for k, v in d.items()}
                               for d in mod.get_params()]
    out = mod.predict(_data()).asnumpy()
    assert mod._exec_group.execs[0]._inference_plan.fused_count == 1   # conv + bn + relu
    after_args, after_aux = mod.get_params()
    for before, after in ((before_args, after_args), (before_aux, after_aux)):
        assert set(before) == set(after)
        for name in before:
            assert before[name].tobytes() == after[name].asnumpy().tobytes(), name
    np.testing.assert_allclose(out, _reference_predict(mod, _data()), rtol=1e-5, atol=1e-6)


def test_plan_follows_set_params():
    mod = _module()
    first = mod.predict(_data()).asnumpy()
    args, aux = mod.get_params()
    aux["bn_moving_mean"] = aux["bn_moving_mean"] + 0.7
    args["bn_beta"] = args["bn_beta"] - 0.3
    args["conv_weight"] = args["conv_weight"] * 1.5
    mod.set_params(args, aux)
    second = mod.predict(_data()).asnumpy()
    assert not np.allclose(first, second, atol=1e-3)
    np.testing.assert_allclose(second, _reference_predict(mod, _data()), rtol=1e-5, atol=1e-6)


def test_plan_follows_writes_into_the_arrays_and_updates():
    mod = _module()
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.5})
    exe = mod._exec_group.execs[0]
    mod.predict(_data())
    # a direct write into the executor's arrays
    exe.aux_dict["bn_moving_var"][:] = 0.05
    np.testing.assert_allclose(mod.predict(_data()).asnumpy(), _reference_predict(mod, _data()),
                               rtol=1e-5, atol=1e-6)
    # a training step: update writes new weights, backward new moving statistics
    batch = next(iter(_data(5)))
    mod.forward_backward(batch)
    mod.update()
    np.testing.assert_allclose(mod.predict(_data()).asnumpy(), _reference_predict(mod, _data()),
                               rtol=1e-5, atol=1e-6)


def test_backward_after_planned_forward_matches_plain():
    sym = _conv_bn_net()
    grads = []
    for planned in (True, False):
        exe = sym.simple_bind(mx.cpu(), data=(5, 3, 6, 6), softmax_label=(5,))
        fill(exe, 3)
        exe.arg_dict["softmax_label"][:] = np.array([0, 1, 2, 3, 0])
        if planned:
            exe.forward(is_train=False)
            assert exe._forward_done is inference_plan.PLANNED
        else:
            inference_plan.replay_plain_forward(exe)
        exe.backward()
        grads.append({k: v.asnumpy() for k, v in exe.grad_dict.items() if v is not None})
    for name in grads[0]:
        np.testing.assert_array_equal(grads[0][name], grads[1][name])


def test_dropout_always_and_monitored_runs_stay_plain():
    net = mx.sym.Dropout(mx.sym.var("data"), p=0.5, mode="always", name="drop")
    net = mx.sym.FullyConnected(net, num_hidden=3, name="fc")
    net = mx.sym.Activation(net, act_type="tanh", name="act")
    exe = net.simple_bind(mx.cpu(), data=(4, 6), grad_req="null")
    fill(exe, 4)
    out = exe.forward(is_train=False)[0].asnumpy()
    # dropout still drops in inference with mode='always': some inputs were zeroed, so the
    # result differs from the un-dropped product
    x, w, b = (exe.arg_dict[k].asnumpy() for k in ("data", "fc_weight", "fc_bias"))
    assert not np.allclose(out, np.tanh(x @ w.T + b), atol=1e-4)
    assert exe._inference_plan.fused_count == 1
    seen = []
    exe.set_monitor_callback(lambda name, arr: seen.append(name))
    exe.forward(is_train=False)
    assert "fc_output" in seen and "act_output" in seen


def test_fold_equals_batchnorm_of_numpy():
    """The planned conv + BN + relu against numpy's formula (not only the plain walk)."""
    net = mx.sym.Convolution(mx.sym.var("data"), kernel=(1, 1), num_filter=2, name="conv")
    net = mx.sym.BatchNorm(net, fix_gamma=False, eps=1e-3, name="bn")
    net = mx.sym.Activation(net, act_type="relu")
    exe = net.simple_bind(mx.cpu(), data=(2, 3, 2, 2), grad_req="null")
    fill(exe, 6)
    out = exe.forward(is_train=False)[0].asnumpy()
    a = {k: v.asnumpy() for k, v in list(exe.arg_dict.items()) + list(exe.aux_dict.items())}
    y = np.einsum("fc,nchw->nfhw", a["conv_weight"][:, :, 0, 0], a["data"]) \
        + a["conv_bias"][None, :, None, None]
    c = (slice(None), None, None)
    y = (y - a["bn_moving_mean"][c]) / np.sqrt(a["bn_moving_var"][c] + 1e-3) \
        * a["bn_gamma"][c] + a["bn_beta"][c]
    np.testing.assert_allclose(out, np.maximum(y, 0), rtol=1e-5, atol=1e-6)


def test_the_plan_leaves_nodes_of_a_fused_group_to_their_group(monkeypatch):
    """In a training bind, tanh and the sum after it run as one fused element-wise step; the
    inference plan must not also take the tanh into FullyConnected + BatchNorm's output pass
    (it then computed tanh from a BatchNorm output nobody wrote)."""
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=2, name="fc1")
    net = mx.sym.BatchNorm(net, fix_gamma=False, name="bn")
    net = mx.sym.Activation(net, act_type="tanh", name="act1")
    net = net + mx.sym.BlockGrad(mx.sym.FullyConnected(data, num_hidden=2, name="side"))
    net = mx.sym.LinearRegressionOutput(mx.sym.FullyConnected(net, num_hidden=1, name="head"),
                                        name="lro")
    rng = np.random.RandomState(3)
    batch = mx.io.DataBatch([mx.nd.array(rng.uniform(-1, 1, (2, 1)))],
                            [mx.nd.array(rng.uniform(-1, 1, (2, 1)))])

    def predict(fusion_switch):
        monkeypatch.setenv("LIGHTMOD_FUSION", fusion_switch)
        mx.random.seed(0)
        mod = mx.mod.Module(net, data_names=["data"], label_names=["lro_label"])
        mod.bind([("data", (2, 1))], [("lro_label", (2, 1))], for_training=True)
        mod.init_params(mx.init.Uniform(0.5))
        mod.forward(batch, is_train=False)
        return mod.get_outputs()[0].asnumpy()

    np.testing.assert_allclose(predict("1"), predict("0"), rtol=1e-5, atol=1e-6)


def _residual_net(pool_type, channels, stem_act, side_reader, fusion_grouped):
    """A ResNet-style block: stem conv + BN (+ act), two convs with BN, the residual add and
    relu, then a global pooling (or a side reader of the sum that needs channel-first data)."""
    data = mx.sym.var("data")

    def conv(x, name, act, bias=False):
        x = mx.sym.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=channels,
                               no_bias=not bias, name=name)
        x = mx.sym.BatchNorm(x, fix_gamma=False, eps=1e-3, name=name + "_bn")
        return mx.sym.Activation(x, act_type=act, name=name + "_act") if act else x

    stem = conv(data, "stem", stem_act)
    body = conv(conv(stem, "a", "relu", bias=True), "b", None)
    net = mx.sym.Activation(body + stem, act_type="relu", name="sum_relu")
    if fusion_grouped:
        net = net * 0.5
    pooled = mx.sym.Pooling(net, global_pool=True, pool_type=pool_type, kernel=(1, 1),
                            name="gap")
    out = mx.sym.FullyConnected(mx.sym.Flatten(pooled), num_hidden=3, name="fc")
    if side_reader:
        side = mx.sym.Pooling(net, kernel=(2, 2), stride=(2, 2), pool_type="max", name="side")
        out = mx.sym.Group([out, side])
    return out


@pytest.mark.parametrize("pool_type", ["avg", "max", "sum"])
@pytest.mark.parametrize("channels,stem_act,side_reader,fusion_grouped", [
    (8, "relu", False, False), (3, "tanh", False, True), (9, None, True, False),
    (16, "relu", False, False)])
def test_channel_last_chain_matches_plain(pool_type, channels, stem_act, side_reader,
                                          fusion_grouped):
    """Convolutions chained channel-last through the residual add into a global pooling give
    the plain walk's outputs; a reader that needs channel-first data keeps the chain off."""
    net = _residual_net(pool_type, channels, stem_act, side_reader, fusion_grouped)
    exe = net.simple_bind(mx.cpu(), data=(3, 2, 5, 6), grad_req="null")
    fill(exe, 11)
    planned = [o.asnumpy() for o in exe.forward(is_train=False)]
    plan = exe._inference_plan
    inference_plan.replay_plain_forward(exe)
    for got, want in zip(planned, exe.outputs):
        np.testing.assert_allclose(got, want.asnumpy(), rtol=2e-5, atol=2e-5)
    kinds = [type(step).__name__ for step in plan.steps]
    if side_reader:
        # only the output of conv a (read by conv b alone) stays channel-last
        assert plan.channel_last_count == 1 and "_GlobalPoolLast" not in kinds
    else:
        # the stem, block and sum outputs (and the sum's relu) stay channel-last
        assert plan.channel_last_count >= 4 and "_GlobalPoolLast" in kinds


def test_channel_last_head_stays_channel_first():
    """A convolution output that is also a graph output is written channel-first."""
    data = mx.sym.var("data")
    a = mx.sym.Activation(mx.sym.Convolution(data, kernel=(3, 3), num_filter=8, name="c1"),
                          act_type="relu")
    b = mx.sym.Activation(mx.sym.Convolution(a, kernel=(1, 1), num_filter=8, name="c2"),
                          act_type="relu")
    net = mx.sym.Group([a, b])
    exe = net.simple_bind(mx.cpu(), data=(2, 8, 5, 5), grad_req="null")
    fill(exe, 12)
    planned = [o.asnumpy() for o in exe.forward(is_train=False)]
    assert exe._inference_plan.channel_last_count == 0
    inference_plan.replay_plain_forward(exe)
    for got, want in zip(planned, exe.outputs):
        np.testing.assert_allclose(got, want.asnumpy(), rtol=2e-5, atol=2e-5)


def test_channel_last_chain_then_backward_matches_plain():
    """backward after a planned channel-last forward (for_training bind) replays the plain
    walk first, so the gradients are those of a plain forward."""
    net = mx.sym.MakeLoss(mx.sym.sum(_residual_net("avg", 8, "relu", False, False)))
    grads = []
    for plan_first in (True, False):
        exe = net.simple_bind(mx.cpu(), data=(2, 2, 4, 4))
        fill(exe, 13)
        if plan_first:
            exe.forward(is_train=False)
            assert exe._inference_plan.channel_last_count > 0
        exe.forward(is_train=True)
        exe.backward()
        grads.append({k: v.asnumpy().copy() for k, v in exe.grad_dict.items()})
    for name in grads[0]:
        np.testing.assert_allclose(grads[0][name], grads[1][name], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("second", ["conv", "fc"])
def test_layer_whose_output_buffer_is_its_input_computes_apart(second):
    """conv0 -> (conv1 | fc1) + relu -> fc: the plain walk hands relu's output the memory of
    conv0's, dead once the second layer has read it, so the fused second layer would write over
    its own input. It computes into its own output buffer and copies, and matches the plain
    walk."""
    net = mx.sym.Convolution(mx.sym.var("data"), kernel=(3, 3), pad=(1, 1), num_filter=6,
                             name="conv0")
    if second == "conv":
        net = mx.sym.Convolution(net, kernel=(3, 3), pad=(1, 1), num_filter=4, name="mid")
    else:
        net = mx.sym.FullyConnected(mx.sym.flatten(net), num_hidden=40, name="mid")
    net = mx.sym.Activation(net, act_type="relu", name="relu")
    net = mx.sym.FullyConnected(net, num_hidden=3, name="fc")
    planned, plain, plan = compare(net, (2, 3, 6, 6), mx.cpu(), 5)
    np.testing.assert_allclose(planned, plain, rtol=2e-5, atol=2e-5)
    layers = [s for s in plan.steps if isinstance(s, inference_plan._FusedLayer)]
    # after a fully connected "mid" the last fc reads mid's output feature-major, as a layer
    # of its own (bias only)
    assert len(layers) == (1 if second == "conv" else 2)
    layer = layers[0]
    assert layer.w.shape[0] == (4 if second == "conv" else 40)
    assert np.may_share_memory(layer.out, layer.x)          # the case this test is about
    assert layer.result is not layer.out
    assert not np.may_share_memory(layer.result, layer.x)
