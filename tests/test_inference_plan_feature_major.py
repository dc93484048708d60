"""The inference plan keeps the 2-D output of a fully connected layer feature-major,
``(hidden, rows)``, when only other fully connected layers read it (lightmod/inference_plan.py).
The planned forward must give the plain walk's outputs, choose exactly the entries the rule
allows, and leave a following backward as it would be after a plain forward."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from inference_plan_cases import fill

import lightmod as mx
from lightmod import inference_plan
from lightmod.kernels import cpu as kcpu
from lightmod.kernels.scalar_nn import ACTIVATIONS

ACTS = [None, "relu", "tanh", "sigmoid", "softrelu"]


@pytest.fixture(autouse=True)
def _one_executor(monkeypatch):
    """One executor per bind (no sample split), so that its plan is the one inspected."""
    monkeypatch.setenv("LIGHTMOD_SAMPLE_SPLIT", "0")


@st.composite
def chains(draw):
    """A chain of fully connected blocks: each a dict of its choices, plus the data shape."""
    blocks = []
    for _ in range(draw(st.integers(1, 4))):
        blocks.append({
            "hidden": draw(st.integers(1, 9)),
            "no_bias": draw(st.booleans()),
            "bn": draw(st.sampled_from([None, None, "fix_gamma", "gamma"])),
            "act": draw(st.sampled_from(ACTS)),
            # what else happens to the block's output: a Dropout before the next block, a
            # second (element-wise) reader, or the output is also a graph output
            "after": draw(st.sampled_from(["next", "next", "next", "dropout", "side", "head"])),
        })
    rows = draw(st.integers(1, 5))
    data = draw(st.sampled_from([(rows, 7), (rows, 2, 3, 2)]))
    return blocks, data


def build_chain(blocks):
    """The symbol of a drawn chain, and which block outputs may be kept feature-major."""
    net = mx.sym.var("data")
    extra = []
    allowed = 0
    for i, block in enumerate(blocks):
        net = mx.sym.FullyConnected(net, num_hidden=block["hidden"], no_bias=block["no_bias"],
                                    name="fc%d" % i)
        if block["bn"]:
            net = mx.sym.BatchNorm(net, fix_gamma=block["bn"] == "fix_gamma", eps=1e-3,
                                   name="bn%d" % i)
        if block["act"]:
            net = mx.sym.Activation(net, act_type=block["act"], name="act%d" % i)
        last = i == len(blocks) - 1
        if last:
            break
        if block["after"] == "dropout":
            net = mx.sym.Dropout(net, p=0.5, name="drop%d" % i)
        elif block["after"] == "side":
            extra.append(mx.sym.sum(net * 2.0, axis=1, name="side%d" % i))
        elif block["after"] == "head":
            extra.append(net)
        else:
            allowed += 1
    return mx.sym.Group([net] + extra) if extra else net, allowed


def planned_and_plain(sym, data_shape, seed, dtype="float32"):
    exe = sym.simple_bind(mx.cpu(), data=data_shape, grad_req="null",
                          type_dict={"data": dtype})
    fill(exe, seed)
    planned = [o.asnumpy() for o in exe.forward(is_train=False)]
    plan = getattr(exe, "_inference_plan", None)
    inference_plan.replay_plain_forward(exe)
    plain = [o.asnumpy() for o in exe.outputs]
    return planned, plain, plan


@settings(max_examples=60, deadline=None)
@given(case=chains(), seed=st.integers(0, 2 ** 16))
def test_chain_matches_plain_and_keeps_the_allowed_entries_feature_major(case, seed):
    blocks, data_shape = case
    sym, allowed = build_chain(blocks)
    planned, plain, plan = planned_and_plain(sym, data_shape, seed)
    for a, b in zip(planned, plain):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)
    count = plan.feature_major_count if plan is not None else 0
    assert count == allowed


@pytest.mark.parametrize("rows", [1, 3, 128])
def test_float64_mlp_matches_numpy(rows):
    net = mx.sym.var("data")
    net = mx.sym.FullyConnected(net, num_hidden=16, name="fc1")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.FullyConnected(net, num_hidden=8, name="fc2")
    net = mx.sym.Activation(net, act_type="tanh")
    net = mx.sym.FullyConnected(net, num_hidden=3, name="fc3")
    exe = net.simple_bind(mx.cpu(), data=(rows, 5), grad_req="null",
                          type_dict={"data": "float64"})
    fill(exe, 7)
    out = exe.forward(is_train=False)[0].asnumpy()
    assert exe._inference_plan.feature_major_count == 2
    a = {k: v.asnumpy() for k, v in exe.arg_dict.items()}
    h = np.maximum(a["data"] @ a["fc1_weight"].T + a["fc1_bias"], 0)
    h = np.tanh(h @ a["fc2_weight"].T + a["fc2_bias"])
    want = h @ a["fc3_weight"].T + a["fc3_bias"]
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)


def _mlp():
    net = mx.sym.var("data")
    net = mx.sym.FullyConnected(net, num_hidden=12, name="fc1")
    net = mx.sym.Activation(net, act_type="relu", name="relu1")
    net = mx.sym.FullyConnected(net, num_hidden=6, name="fc2")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def test_backward_after_planned_forward_matches_training_forward():
    shapes = {"data": (4, 10), "softmax_label": (4,)}
    grads = []
    for planned_first in (True, False):
        exe = _mlp().simple_bind(mx.cpu(), **shapes)
        fill(exe, 3)
        exe.arg_dict["softmax_label"][:] = np.array([0, 5, 2, 1])
        if planned_first:
            exe.forward(is_train=False)
            assert exe._inference_plan.feature_major_count == 1
        exe.forward(is_train=True)
        exe.backward()
        grads.append({k: v.asnumpy() for k, v in exe.grad_dict.items() if v is not None})
    for name in grads[0]:
        np.testing.assert_array_equal(grads[0][name], grads[1][name])


def test_plan_follows_new_weights():
    exe = _mlp().simple_bind(mx.cpu(), data=(4, 10), softmax_label=(4,), grad_req="null")
    fill(exe, 4)
    first = exe.forward(is_train=False)[0].asnumpy()
    exe.arg_dict["fc1_weight"][:] *= -1.5
    second = exe.forward(is_train=False)[0].asnumpy()
    inference_plan.replay_plain_forward(exe)
    np.testing.assert_allclose(second, exe.outputs[0].asnumpy(), rtol=2e-5, atol=1e-6)
    assert not np.allclose(first, second)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("with_scale,with_shift", [(True, True), (False, True), (False, False)])
@pytest.mark.parametrize("act", [None, "relu", "tanh", "softsign"])
@pytest.mark.parametrize("shape", [(5, 7), (3, 70000)])
def test_in_place_channel_epilogue_matches_numpy(dtype, with_scale, with_shift, act, shape):
    """rows_to_batch with one image and rows = out: the plan's epilogue of a feature-major
    output, per channel (row) in place."""
    rng = np.random.RandomState(0)
    out = rng.uniform(-2, 2, shape).astype(dtype)
    scale = rng.uniform(0.5, 2, shape[0]).astype(dtype) if with_scale else None
    shift = rng.uniform(-1, 1, shape[0]).astype(dtype) if with_shift else None
    want = out.copy()
    if scale is not None:
        want = want * scale[:, None]
    if shift is not None:
        want = want + shift[:, None]
    want = {None: lambda v: v, "relu": lambda v: np.maximum(v, 0), "tanh": np.tanh,
            "softsign": lambda v: v / (1 + np.abs(v))}[act](want)
    kcpu.rows_to_batch(out, out.reshape((1,) + shape), shift, scale=scale,
                       act=-1 if act is None else ACTIVATIONS[act])
    tol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(out, want, rtol=tol, atol=tol)
