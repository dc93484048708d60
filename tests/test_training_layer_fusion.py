"""The training forward's fused layers (lightmod/inference_plan.py, ``training_steps``): a
FullyConnected layer whose only consumer is an Activation runs as one step with it in
``forward(is_train=True)``. Outputs and every gradient must equal the unfused walk's
(``LIGHTMOD_FUSION=0``), and layers whose pre-activation someone reads stay unfused."""
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from training_fusion_cases import ACTS, conv_net, float32_atol, mlp, run

import lightmod as mx
from lightmod import inference_plan
from lightmod.base import MXNetError


@pytest.fixture(autouse=True)
def _one_executor(monkeypatch):
    """Inspect the plan of the bound executor itself, not of sample-split children."""
    monkeypatch.setenv("LIGHTMOD_SAMPLE_SPLIT", "0")


@settings(max_examples=40, deadline=None)
@given(layers=st.lists(st.tuples(st.integers(1, 9), st.booleans(), st.sampled_from(ACTS)),
                       min_size=1, max_size=3),
       batch=st.integers(1, 70), flatten=st.booleans(), add=st.booleans(),
       seed=st.integers(0, 2 ** 16))
def test_fused_training_forward_equals_unfused(layers, batch, flatten, add, seed):
    monkeypatch = pytest.MonkeyPatch()
    try:
        shape = (batch, 3, 4)
        req = "add" if add else "write"
        sym = mlp(layers, flatten)
        outs, grads, fused = run(sym, shape, seed, monkeypatch, True, req)
        ref_outs, ref_grads, ref_fused = run(sym, shape, seed, monkeypatch, False, req)
    finally:
        monkeypatch.undo()
    assert ref_fused == 0
    assert fused == sum(act not in (None, "softsign") for _, _, act in layers)
    for got, want in zip(outs, ref_outs):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=float32_atol(want))
    assert grads.keys() == ref_grads.keys()
    for name in grads:
        np.testing.assert_allclose(grads[name], ref_grads[name], rtol=2e-5,
                                   atol=float32_atol(ref_grads[name]),
                                   err_msg=name)


def _numeric_check(sym, shape, seed, monkeypatch):
    """The fused walk's gradients against central differences of its own forward."""
    monkeypatch.setenv("LIGHTMOD_FUSION", "1")
    exe = sym.simple_bind(mx.cpu(), data=shape, type_dict={"data": np.float64})
    rng = np.random.RandomState(seed)
    for arr in exe.arg_dict.values():
        arr[:] = rng.uniform(-1, 1, arr.shape)
    exe.forward(is_train=True)
    exe.backward()
    assert any(isinstance(s.op, inference_plan.TrainingLayer)
               for s in inference_plan.training_steps(exe))
    for name in ("fc0_weight", "fc0_bias", "fc1_weight", "data"):
        arr = exe.arg_dict[name]
        base = arr.asnumpy().copy()
        numeric = np.zeros_like(base)
        for i in range(base.size):
            for sign in (1, -1):
                moved = base.copy()
                moved.flat[i] += sign * 1e-6
                arr[:] = moved
                numeric.flat[i] += sign * exe.forward(is_train=True)[0].asnumpy().sum() / 2e-6
        arr[:] = base
        np.testing.assert_allclose(exe.grad_dict[name].asnumpy(), numeric, rtol=1e-5,
                                   atol=1e-6, err_msg=name)


@pytest.mark.parametrize("act", ["relu", "sigmoid", "tanh", "softrelu"])
def test_fused_layer_gradients_match_numeric(act, monkeypatch):
    _numeric_check(mlp([(4, False, act), (2, True, None)], True), (3, 5), 7, monkeypatch)


def test_a_read_pre_activation_is_not_fused(monkeypatch):
    """An FC output that is also a graph output, or read by a second operator, must hold the
    pre-activation values: such layers keep their own steps."""
    data = mx.sym.var("data")
    fc = mx.sym.FullyConnected(data, num_hidden=3, name="fc")
    relu = mx.sym.Activation(fc, act_type="relu", name="relu")
    for sym in (mx.sym.Group([mx.sym.MakeLoss(mx.sym.sum(relu)), mx.sym.BlockGrad(fc)]),
                mx.sym.MakeLoss(mx.sym.sum(relu) + mx.sym.sum(fc * 2))):
        outs, grads, fused = run(sym, (4, 5), 3, monkeypatch, True)
        ref_outs, ref_grads, _ = run(sym, (4, 5), 3, monkeypatch, False)
        assert fused == 0
        for got, want in zip(outs, ref_outs):
            np.testing.assert_allclose(got, want, rtol=1e-6)
        for name in grads:
            np.testing.assert_allclose(grads[name], ref_grads[name], rtol=1e-6)


def test_monitor_sees_the_pre_activation(monkeypatch):
    """A monitor reports every operator's output: with one installed the plain walk runs and
    the FullyConnected output is its own, bias included."""
    monkeypatch.setenv("LIGHTMOD_FUSION", "1")
    sym = mlp([(3, False, "relu")], True)
    exe = sym.simple_bind(mx.cpu(), data=(2, 4))
    for arr in exe.arg_dict.values():
        arr[:] = 0.5
    seen = {}
    exe.set_monitor_callback(lambda name, arr: seen.__setitem__(name, arr.asnumpy().copy()))
    exe.forward(is_train=True)
    np.testing.assert_allclose(seen["fc0_output"], np.full((2, 3), 0.5 * 0.5 * 4 + 0.5))
    np.testing.assert_allclose(seen["act0_output"], np.full((2, 3), 1.5))


def test_training_then_inference_keeps_both_plans(monkeypatch):
    monkeypatch.setenv("LIGHTMOD_FUSION", "1")
    sym = mlp([(6, False, "relu"), (3, False, "tanh")], True)
    exe = sym.simple_bind(mx.cpu(), data=(5, 4))
    rng = np.random.RandomState(0)
    for arr in exe.arg_dict.values():
        arr[:] = rng.uniform(-1, 1, arr.shape)
    trained = exe.forward(is_train=True)[0].asnumpy().copy()
    inferred = exe.forward(is_train=False)[0].asnumpy().copy()
    np.testing.assert_allclose(inferred, trained, rtol=1e-6)
    assert exe._inference_plan.fused_count == 2
    # backward after an inference forward replays the plain walk: gradients as after training
    exe.backward()
    after_inference = exe.grad_dict["fc0_weight"].asnumpy().copy()
    exe.forward(is_train=True)
    exe.backward()
    np.testing.assert_allclose(exe.grad_dict["fc0_weight"].asnumpy(), after_inference,
                               rtol=1e-6)


def test_a_failure_before_a_fused_layer_is_reported_at_the_read(monkeypatch):
    monkeypatch.setenv("LIGHTMOD_FUSION", "1")
    data = mx.sym.var("data")
    noise = mx.sym.random.normal(loc=0, scale=-1, shape=(4, 3))
    net = mx.sym.Activation(mx.sym.FullyConnected(data + noise, num_hidden=2, name="fc"),
                            act_type="relu")
    loss = mx.sym.MakeLoss(mx.sym.sum(mx.sym.Activation(
        mx.sym.FullyConnected(net, num_hidden=2, name="fc2"), act_type="tanh")))
    exe = loss.simple_bind(mx.cpu(), data=(4, 3))
    for arr in exe.arg_dict.values():
        arr[:] = 0.5
    out = exe.forward(is_train=True)[0]         # returns: the failure waits for a read
    assert any(isinstance(s.op, inference_plan.TrainingLayer)
               for s in inference_plan.training_steps(exe))
    exe.backward()
    with pytest.raises(MXNetError, match="scale"):
        exe.grad_dict["fc2_weight"].asnumpy()
    assert out._error is not None and exe.grad_dict["data"]._error is not None


@settings(max_examples=25, deadline=None)
@given(layers=st.lists(st.tuples(st.sampled_from([2, 4, 6]), st.sampled_from([1, 3]),
                                 st.integers(1, 2), st.sampled_from([1, 2]), st.booleans(),
                                 st.sampled_from(ACTS)), min_size=1, max_size=2),
       batch=st.integers(1, 4), size=st.integers(3, 9), seed=st.integers(0, 2 ** 16))
# gradients in the hundreds: float32 rounding differs in the 5th digit
@example(layers=[(6, 1, 1, 1, False, "sigmoid"), (4, 3, 1, 1, True, None)], batch=2, size=6,
         seed=22)
def test_fused_convolution_training_equals_unfused(layers, batch, size, seed):
    monkeypatch = pytest.MonkeyPatch()
    try:
        shape = (batch, 4, size, size)
        sym = conv_net(layers)
        outs, grads, fused = run(sym, shape, seed, monkeypatch, True)
        ref_outs, ref_grads, _ = run(sym, shape, seed, monkeypatch, False)
    finally:
        monkeypatch.undo()
    assert fused == sum(act not in (None, "softsign") for *_, act in layers)
    for got, want in zip(outs, ref_outs):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=float32_atol(want))
    for name in grads:
        np.testing.assert_allclose(grads[name], ref_grads[name], rtol=2e-5,
                                   atol=float32_atol(ref_grads[name]),
                                   err_msg=name)
