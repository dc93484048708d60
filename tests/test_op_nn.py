"""nn operators at the registry level: FullyConnected, Activation, LeakyReLU, Dropout, Embedding,
softmax, log_softmax, SoftmaxActivation.

Forward against numpy references, backward against numeric gradients (float64) on shapes and
attributes drawn by hypothesis, req 'add', bad shapes/attributes, Dropout statistics, and golden
values MXNet 1.9.1 produced (tests/fixtures/make_nn_golden.py).
"""
import json
import os

import numpy as np
import ophelpers as oh
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmod.base import MXNetError

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
GOLDEN = json.load(open(os.path.join(FIXTURES, "nn_golden.json")))
ARRAYS = np.load(os.path.join(FIXTURES, "nn_golden.npz"))

NN_OPS = {"FullyConnected", "Activation", "LeakyReLU", "Dropout", "Embedding", "softmax",
          "log_softmax", "SoftmaxActivation"}
# Outputs/gradients MXNet 1.9.1 does not define well enough to compare:
# - rrelu's mask output in inference is left unwritten by MXNet;
# - SoftmaxActivation(mode='instance') on ndim > 2: MXNet's forward runs over the last axis but
#   its backward over axis 1 (not the gradient of its forward); ours is the true gradient.
GOLDEN_SKIP = {("leaky_rrelu_infer", "out", 1), ("softmaxact_instance", "grad", "data")}


def run_golden_case(case, rtol=1e-5, atol=1e-6):
    """Run one golden case through the registry and compare with MXNet's numbers."""
    spec = GOLDEN["cases"][case]
    names = spec["inputs"]
    inputs = [ARRAYS["%s/in/%s" % (case, n)] for n in names]
    outs, _, op, p = oh.forward(spec["op"], spec["attrs"], inputs, is_train=spec["is_train"])
    for i in range(op.num_visible_outputs(p)):
        if (case, "out", i) in GOLDEN_SKIP:
            continue
        np.testing.assert_allclose(outs[i], ARRAYS["%s/out/%d" % (case, i)], rtol=rtol,
                                   atol=atol, err_msg="%s output %d" % (case, i))
    if not spec["grad"]:
        return
    heads = [ARRAYS["%s/ograd/%d" % (case, i)] for i in range(op.num_visible_outputs(p))]
    req = ["write" if "%s/grad/%s" % (case, n) in ARRAYS else "null" for n in names]
    grads = oh.backward(spec["op"], spec["attrs"], inputs, heads, req=req,
                        is_train=spec["is_train"])
    for n, g, r in zip(names, grads, req):
        if r == "null" or (case, "grad", n) in GOLDEN_SKIP:
            continue
        np.testing.assert_allclose(g, ARRAYS["%s/grad/%s" % (case, n)], rtol=rtol, atol=atol,
                                   err_msg="%s gradient of %s" % (case, n))


def infer_fixpoint(op, p, shapes):
    """Forward and backward shape inference of one op until nothing changes (as a graph does)."""
    outs = [None] * op.num_outputs(p)
    for _ in range(4):
        shapes, new_outs = op.infer_shape(p, shapes)
        outs = [o if n is None else n for o, n in zip(outs, new_outs)]
        shapes = op.infer_shape_backward(p, shapes, outs)
    return shapes, outs


def run_shape_case(case):
    spec = GOLDEN["shapes"][case]
    op, p = oh.prepare(spec["op"], spec["attrs"])
    names = op.list_inputs(p)
    assert names == spec["inputs"]
    shapes = [tuple(spec["given"][n]) if n in spec["given"] else None for n in names]
    if "error" in spec:
        with pytest.raises(MXNetError) as err:
            infer_fixpoint(op, p, shapes)
        given = [n for n in spec["given"] if n != "data"]
        assert any(n in str(err.value) for n in given), str(err.value)
        return
    shapes, outs = infer_fixpoint(op, p, shapes)
    unknown_to_none = [None if len(s) == 0 else tuple(s) for s in spec["args"]]
    assert [None if s is None else tuple(s) for s in shapes] == unknown_to_none
    assert [tuple(o) for o in outs[:len(spec["outs"])]] == [tuple(o) for o in spec["outs"]]


def cases_of(ops):
    return sorted(c for c, s in GOLDEN["cases"].items() if s["op"] in ops)


@pytest.mark.parametrize("case", cases_of(NN_OPS))
def test_golden_mxnet(case):
    run_golden_case(case)


@pytest.mark.parametrize("case", sorted(c for c, s in GOLDEN["shapes"].items()
                                        if s["op"] in NN_OPS))
def test_golden_shapes(case):
    run_shape_case(case)


# ---------------------------------------------------------------------------------------------
# FullyConnected
# ---------------------------------------------------------------------------------------------
def fc_reference(x, w, b, flatten):
    if flatten:
        x2 = x.reshape(x.shape[0], -1) if x.ndim > 1 else x.reshape(-1, 1)
        out = x2 @ w.T
    else:
        out = x @ w.T
    return out if b is None else out + b


@settings(max_examples=12, deadline=None)
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=3),
       hidden=st.integers(1, 4), flatten=st.booleans(), no_bias=st.booleans(),
       seed=st.integers(0, 2 ** 16))
def test_fc_forward_and_gradient(shape, hidden, flatten, no_bias, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    k_in = (int(np.prod(shape[1:])) if len(shape) > 1 else 1) if flatten else shape[-1]
    w = rng.standard_normal((hidden, k_in))
    b = rng.standard_normal(hidden)
    attrs = {"num_hidden": hidden, "flatten": flatten, "no_bias": no_bias}
    inputs = [x, w] if no_bias else [x, w, b]
    outs, _, _, _ = oh.forward("FullyConnected", attrs, inputs)
    np.testing.assert_allclose(outs[0], fc_reference(x, w, None if no_bias else b, flatten),
                               rtol=1e-12, atol=1e-12)
    oh.check_grad("FullyConnected", attrs, inputs)


def test_fc_req_add_and_null():
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((4, 3)), rng.standard_normal((2, 3)), rng.standard_normal(2)
    dy = [rng.standard_normal((4, 2))]
    write = oh.backward("FullyConnected", {"num_hidden": 2}, [x, w, b], dy)
    init = [np.full(x.shape, 0.5), np.full(w.shape, -1.0), np.full(b.shape, 2.0)]
    added = oh.backward("FullyConnected", {"num_hidden": 2}, [x, w, b], dy, req=["add"] * 3,
                        init_grads=init)
    for g_w, g_a, g0 in zip(write, added, init):
        np.testing.assert_allclose(g_a, g0 + g_w, rtol=1e-12)
    # repeated 'add' reuses the cached scratch buffer and keeps accumulating
    nulls = oh.backward("FullyConnected", {"num_hidden": 2}, [x, w, b], dy,
                        req=["null", "write", "null"])
    assert nulls[0] is None and nulls[2] is None
    np.testing.assert_allclose(nulls[1], write[1])


def test_fc_shape_errors_name_the_argument():
    op, p = oh.prepare("FullyConnected", {"num_hidden": 10})
    with pytest.raises(MXNetError, match=r"weight has shape \(10, 5\), expected \(10, 7\) "
                                         r"for data \(4, 7\)"):
        op.infer_shape(p, [(4, 7), (10, 5), None])
    with pytest.raises(MXNetError, match=r"bias has shape \(3,\), expected \(10,\)"):
        op.infer_shape(p, [(4, 7), None, (3,)])
    with pytest.raises(MXNetError, match="num_hidden"):
        oh.prepare("FullyConnected", {})
    with pytest.raises(MXNetError, match="no_bias"):
        oh.prepare("FullyConnected", {"num_hidden": 2, "no_bias": "maybe"})


def test_fc_declaration():
    op, p = oh.prepare("FullyConnected", {"num_hidden": "3", "no_bias": "True"})
    assert op.list_inputs(p) == ["data", "weight"]
    assert op.get_hint() == "fullyconnected"
    assert op.list_outputs(p) == ["output"]
    # unknown batch size comes back from the output (LSTM begin states)
    shapes, outs = infer_fixpoint(op, p, [(0, 5), None])
    assert shapes == [(0, 5), (3, 5)] and outs == [(0, 3)]
    assert op.infer_shape_backward(p, [(0, 5), (3, 5)], [(8, 3)])[0] == (8, 5)


# ---------------------------------------------------------------------------------------------
# Activation
# ---------------------------------------------------------------------------------------------
def activation_reference(x, act):
    return {"relu": lambda v: np.maximum(v, 0), "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
            "tanh": np.tanh, "softrelu": lambda v: np.where(v > 20, v, np.log1p(np.exp(v))),
            "softsign": lambda v: v / (1 + np.abs(v))}[act](x)


def away_from_zero(rng, shape, margin=0.05):
    x = rng.standard_normal(shape) * 2
    return np.where(np.abs(x) < margin, margin * np.sign(x + 1e-12) + x, x)


@settings(max_examples=10, deadline=None)
@given(act=st.sampled_from(["relu", "sigmoid", "tanh", "softrelu", "softsign"]),
       shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), seed=st.integers(0, 999))
def test_activation(act, shape, seed):
    x = away_from_zero(np.random.default_rng(seed), shape)
    outs, _, _, _ = oh.forward("Activation", {"act_type": act}, [x])
    np.testing.assert_allclose(outs[0], activation_reference(x, act), rtol=1e-12, atol=1e-14)
    oh.check_grad("Activation", {"act_type": act}, [x])


def test_activation_req_add_and_errors():
    x = np.linspace(-2, 2, 12).reshape(3, 4)
    dy = [np.ones((3, 4))]
    g = oh.backward("Activation", {"act_type": "tanh"}, [x], dy)[0]
    g2 = oh.backward("Activation", {"act_type": "tanh"}, [x], dy, req=["add"],
                     init_grads=[np.full((3, 4), 3.0)])[0]
    np.testing.assert_allclose(g2, g + 3.0)
    with pytest.raises(MXNetError, match="act_type"):
        oh.prepare("Activation", {})
    with pytest.raises(MXNetError, match="act_type"):
        oh.prepare("Activation", {"act_type": "swish"})
    op, p = oh.prepare("Activation", {"act_type": "relu"})
    assert op.get_hint() == "activation"
    assert op.infer_shape_backward(p, [None], [(2, 3)]) == [(2, 3)]


# ---------------------------------------------------------------------------------------------
# LeakyReLU
# ---------------------------------------------------------------------------------------------
@settings(max_examples=12, deadline=None)
@given(act=st.sampled_from(["leaky", "elu", "gelu", "prelu"]),
       shape=st.lists(st.integers(1, 3), min_size=2, max_size=4),
       slope=st.floats(0.05, 1.0), seed=st.integers(0, 999))
def test_leaky_relu_gradients(act, shape, slope, seed):
    rng = np.random.default_rng(seed)
    x = away_from_zero(rng, shape)
    attrs = {"act_type": act, "slope": slope}
    inputs = [x]
    if act == "prelu":
        inputs.append(rng.uniform(-1, 1, shape[1]))
    outs, _, _, _ = oh.forward("LeakyReLU", attrs, inputs)
    if act == "leaky":
        ref = np.where(x > 0, x, slope * x)
    elif act == "elu":
        ref = np.where(x > 0, x, slope * np.expm1(x))
    elif act == "gelu":
        from math import erf
        ref = 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))
    else:
        g = inputs[1].reshape((1, -1) + (1,) * (len(shape) - 2))
        ref = np.where(x > 0, x, g * x)
    np.testing.assert_allclose(outs[0], ref, rtol=1e-12, atol=1e-14)
    oh.check_grad("LeakyReLU", attrs, inputs)


def test_selu_matches_mxnet_formula():
    # MXNet 1.9.1's selu gradient on the negative side is lambda*(y + alpha) (golden-verified);
    # the positive side and the forward are the usual ones.
    lam, alpha = 1.0507009873554805, 1.6732632423543772
    x = np.linspace(-3, 3, 13).reshape(1, 13)
    y = oh.forward("LeakyReLU", {"act_type": "selu"}, [x])[0][0]
    np.testing.assert_allclose(y, lam * np.where(x > 0, x, alpha * np.expm1(x)), rtol=1e-12)
    dy = np.full_like(x, 2.0)
    g = oh.backward("LeakyReLU", {"act_type": "selu"}, [x], [dy])[0]
    np.testing.assert_allclose(g, 2.0 * np.where(y > 0, lam, lam * (y + alpha)), rtol=1e-12)


def test_prelu_declaration_and_shapes():
    op, p = oh.prepare("LeakyReLU", {"act_type": "prelu"})
    assert op.list_inputs(p) == ["data", "gamma"]
    assert op.input_init == {"gamma": '["Constant", {"value": 0.25}]'}
    assert op.get_hint() == "leakyrelu"
    shapes, outs = op.infer_shape(p, [(2, 5, 3), None])
    assert shapes[1] == (5,) and outs == [(2, 5, 3)]
    with pytest.raises(MXNetError, match=r"gamma has shape \(4,\), expected \(5,\)"):
        op.infer_shape(p, [(2, 5, 3), (4,)])
    with pytest.raises(MXNetError, match="channel axis"):
        op.infer_shape(p, [(7,), None])
    op, p = oh.prepare("LeakyReLU", {})
    assert op.list_inputs(p) == ["data"] and p.act_type == "leaky" and p.slope == 0.25
    assert (p.lower_bound, p.upper_bound) == (0.125, 0.334)


def test_prelu_scalar_gamma_and_req():
    rng = np.random.default_rng(3)
    x = away_from_zero(rng, (3, 4, 2))
    gamma = np.array([0.3])
    oh.check_grad("LeakyReLU", {"act_type": "prelu"}, [x, gamma])
    dy = [rng.standard_normal(x.shape)]
    g = oh.backward("LeakyReLU", {"act_type": "prelu"}, [x, gamma], dy)
    init = [np.ones(x.shape), np.ones(1)]
    g2 = oh.backward("LeakyReLU", {"act_type": "prelu"}, [x, gamma], dy, req=["add", "add"],
                     init_grads=init)
    np.testing.assert_allclose(g2[0], g[0] + 1)
    np.testing.assert_allclose(g2[1], g[1] + 1)
    only_gamma = oh.backward("LeakyReLU", {"act_type": "prelu"}, [x, gamma], dy,
                             req=["null", "write"])
    assert only_gamma[0] is None
    np.testing.assert_allclose(only_gamma[1], g[1])


def test_rrelu_training_and_inference():
    import lightmod.random as lrandom
    attrs = {"act_type": "rrelu", "lower_bound": 0.1, "upper_bound": 0.4}
    op, p = oh.prepare("LeakyReLU", attrs)
    assert op.list_outputs(p) == ["output", "mask"] and op.num_outputs(p) == 2
    x = np.linspace(-3, 3, 600).reshape(20, 30)
    lrandom.seed(7)
    (y, mask), state, _, _ = oh.forward("LeakyReLU", attrs, [x], is_train=True)
    assert mask.min() >= 0.1 and mask.max() < 0.4 and mask.std() > 0.05
    np.testing.assert_allclose(y, np.where(x > 0, x, mask * x))
    lrandom.seed(7)
    (y2, mask2), _, _, _ = oh.forward("LeakyReLU", attrs, [x], is_train=True)
    np.testing.assert_array_equal(mask, mask2)          # same seed, same slopes
    dy = np.random.default_rng(0).standard_normal(x.shape)
    lrandom.seed(7)
    g = oh.backward("LeakyReLU", attrs, [x], [dy, None])[0]
    np.testing.assert_allclose(g, dy * np.where(y > 0, 1.0, mask))
    (yi, maski), _, _, _ = oh.forward("LeakyReLU", attrs, [x], is_train=False)
    np.testing.assert_allclose(yi, np.where(x > 0, x, 0.25 * x))
    np.testing.assert_allclose(maski, 0.25)


# ---------------------------------------------------------------------------------------------
# Dropout
# ---------------------------------------------------------------------------------------------
def test_dropout_statistics_and_seed():
    import lightmod.random as lrandom
    x = np.ones((200, 100), np.float32)
    lrandom.seed(42)
    (y, mask), state, op, p = oh.forward("Dropout", {"p": 0.3}, [x], is_train=True)
    assert op.num_outputs(p) == 2 and op.num_visible_outputs(p) == 1
    assert op.list_outputs(p) == ["output"] and op.get_hint() == "dropout"
    kept = mask != 0
    assert abs(kept.mean() - 0.7) < 0.02
    np.testing.assert_allclose(mask[kept], 1 / 0.7, rtol=1e-6)
    np.testing.assert_allclose(y, x * mask)
    assert abs(y.mean() - 1.0) < 0.03                     # expectation preserved
    lrandom.seed(42)
    (y2, _), _, _, _ = oh.forward("Dropout", {"p": 0.3}, [x], is_train=True)
    np.testing.assert_array_equal(y, y2)
    (y3, _), _, _, _ = oh.forward("Dropout", {"p": 0.3}, [x], is_train=True)
    assert not np.array_equal(y, y3)                      # the stream moves on


def test_dropout_backward_uses_the_mask():
    import lightmod.random as lrandom
    x = np.random.default_rng(0).standard_normal((30, 40))
    dy = np.random.default_rng(1).standard_normal((30, 40))
    lrandom.seed(5)
    (_, mask), _, _, _ = oh.forward("Dropout", {"p": 0.5}, [x], is_train=True)
    lrandom.seed(5)
    g = oh.backward("Dropout", {"p": 0.5}, [x], [dy])[0]
    np.testing.assert_allclose(g, dy * mask)
    lrandom.seed(5)
    g2 = oh.backward("Dropout", {"p": 0.5}, [x], [dy], req=["add"], init_grads=[np.ones_like(x)])
    np.testing.assert_allclose(g2[0], 1 + dy * mask)


@settings(max_examples=8, deadline=None)
@given(axes=st.sampled_from([(1,), (0, 2), (-1,), (2, 1)]), seed=st.integers(0, 99))
def test_dropout_axes_share_the_mask(axes, seed):
    import lightmod.random as lrandom
    lrandom.seed(seed)
    x = np.ones((6, 5, 4))
    (y, mask), _, _, _ = oh.forward("Dropout", {"p": 0.5, "axes": str(axes)}, [x])
    for ax in axes:
        np.testing.assert_array_equal(mask, np.take(mask, [0], axis=ax).repeat(x.shape[ax],
                                                                            axis=ax))
    np.testing.assert_allclose(y, mask)
    assert set(np.unique(mask)) <= {0.0, 2.0}


def test_dropout_inference_always_and_p0():
    x = np.arange(12.0).reshape(3, 4)
    dy = np.full((3, 4), 2.0)
    (y, _), _, _, _ = oh.forward("Dropout", {"p": 0.5}, [x], is_train=False)
    np.testing.assert_array_equal(y, x)
    g = oh.backward("Dropout", {"p": 0.5}, [x], [dy], is_train=False)[0]
    np.testing.assert_array_equal(g, dy)
    (y, mask), _, _, _ = oh.forward("Dropout", {"p": 0.5, "mode": "always"}, [x + 1],
                                    is_train=False)
    assert (y == 0).any() and set(np.unique(mask)) <= {0.0, 2.0}
    (y, _), _, _, _ = oh.forward("Dropout", {"p": 0.0}, [x], is_train=True)
    np.testing.assert_array_equal(y, x)
    # p = 1: MXNet's 1 / (1 - p) scale makes every element 0 * inf = nan
    (y, _), _, _, _ = oh.forward("Dropout", {"p": 1.0}, [x], is_train=True)
    assert np.isnan(y).all()
    with pytest.raises(MXNetError, match="p must be in"):
        oh.prepare("Dropout", {"p": 1.5})
    with pytest.raises(MXNetError, match="axes"):
        oh.forward("Dropout", {"axes": "(3,)"}, [x])
    _, p = oh.prepare("Dropout", {"cudnn_off": "None"})
    assert p.cudnn_off is False and p.mode == "training" and p.p == 0.5 and p.axes == ()


# ---------------------------------------------------------------------------------------------
# Embedding
# ---------------------------------------------------------------------------------------------
@settings(max_examples=10, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), vocab=st.integers(1, 6),
       dim=st.integers(1, 4), seed=st.integers(0, 999))
def test_embedding_clips_and_scatters(shape, vocab, dim, seed):
    rng = np.random.default_rng(seed)
    idx = rng.uniform(-3, vocab + 3, shape)
    weight = rng.standard_normal((vocab, dim))
    attrs = {"input_dim": vocab, "output_dim": dim}
    out = oh.forward("Embedding", attrs, [idx, weight])[0][0]
    rows = np.clip(np.trunc(idx).astype(int), 0, vocab - 1)
    np.testing.assert_array_equal(out, weight[rows])
    dy = rng.standard_normal(out.shape)
    ref = np.zeros_like(weight)
    np.add.at(ref, rows.reshape(-1), dy.reshape(-1, dim))
    g = oh.backward("Embedding", attrs, [idx, weight], [dy], req=["null", "write"])
    assert g[0] is None
    np.testing.assert_allclose(g[1], ref, rtol=1e-12, atol=1e-12)
    g = oh.backward("Embedding", attrs, [idx, weight], [dy], req=["null", "add"],
                    init_grads=[None, np.ones_like(weight)])
    np.testing.assert_allclose(g[1], ref + 1, rtol=1e-12, atol=1e-12)


def test_embedding_declaration_and_errors():
    op, p = oh.prepare("Embedding", {"input_dim": 5, "output_dim": 3})
    assert op.get_hint() == "embedding" and p.dtype == "float32" and p.sparse_grad is False
    assert op.infer_type(p, ["int32", None]) == (["int32", "float32"], ["float32"])
    _, p64 = oh.prepare("Embedding", {"input_dim": 5, "output_dim": 3, "dtype": "float64"})
    assert op.infer_type(p64, ["float32", None])[1] == ["float64"]
    shapes, outs = op.infer_shape(p, [None, None])
    assert shapes == [None, (5, 3)] and outs == [None]
    with pytest.raises(MXNetError, match=r"weight has shape \(4, 3\), expected \(5, 3\)"):
        op.infer_shape(p, [(2,), (4, 3)])
    with pytest.raises(MXNetError, match="output_dim"):
        oh.prepare("Embedding", {"input_dim": 5})
    x, w = np.array([[0, 1]], np.float64), np.ones((5, 3))
    with pytest.raises(MXNetError, match="gradient with respect to data"):
        oh.backward("Embedding", {"input_dim": 5, "output_dim": 3}, [x, w],
                    [np.ones((1, 2, 3))], req=["write", "write"])


# ---------------------------------------------------------------------------------------------
# softmax, log_softmax, SoftmaxActivation
# ---------------------------------------------------------------------------------------------
def softmax_reference(x, axis, t=1.0, log=False):
    z = x / t
    z = z - z.max(axis=axis, keepdims=True)
    if log:
        return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


@settings(max_examples=12, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data(),
       temperature=st.sampled_from([None, 0.5, 2.0]), log=st.booleans(),
       seed=st.integers(0, 999))
def test_softmax_and_log_softmax(shape, data, temperature, log, seed):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = np.random.default_rng(seed).standard_normal(shape) * 3
    name = "log_softmax" if log else "softmax"
    attrs = {"axis": axis}
    if temperature is not None:
        attrs["temperature"] = temperature
    out = oh.forward(name, attrs, [x])[0][0]
    np.testing.assert_allclose(out, softmax_reference(x, axis, temperature or 1.0, log),
                               rtol=1e-10, atol=1e-12)
    oh.check_grad(name, attrs, [x])


@pytest.mark.parametrize("axis,temperature", [(-1, None), (0, 2.0), (1, 0.5)])
def test_softmin_is_softmax_of_the_negated_input(axis, temperature):
    x = np.random.default_rng(3).standard_normal((3, 4)) * 3
    attrs = {"axis": axis}
    if temperature is not None:
        attrs["temperature"] = temperature
    out = oh.forward("softmin", attrs, [x])[0][0]
    np.testing.assert_allclose(out, softmax_reference(-x, axis, temperature or 1.0),
                               rtol=1e-10, atol=1e-12)
    oh.check_grad("softmin", attrs, [x])
    # large inputs stay finite: the row maximum is taken after scaling by -1/temperature
    big = np.array([[1000.0, 1001.0, 999.0]])
    np.testing.assert_allclose(oh.forward("softmin", {}, [big])[0][0],
                               softmax_reference(-big, -1), rtol=1e-12)
    length = np.array([2.0, 3.0, 1.0])
    masked = oh.forward("softmin", {"axis": 1, "use_length": True}, [x, length])[0][0]
    np.testing.assert_allclose(masked[0, :2], softmax_reference(-x[0, :2], 0), rtol=1e-12)
    assert (masked[0, 2:] == 0).all()
    op, p = oh.prepare("softmin", {"axis": 2})
    with pytest.raises(MXNetError, match="softmin.*axis 2 out of range"):
        op.infer_shape(p, [(2, 3)])


def test_softmax_use_length():
    x = np.random.default_rng(0).standard_normal((2, 4, 3))
    length = np.array([[1, 4, 0], [2, 9, -1]], np.float64)
    attrs = {"axis": 1, "use_length": True}
    op, p = oh.prepare("softmax", attrs)
    assert op.list_inputs(p) == ["data", "length"]
    assert op.infer_shape(p, [(2, 4, 3), None])[0][1] == (2, 3)
    out = oh.forward("softmax", attrs, [x, length])[0][0]
    for o in range(2):
        for j in range(3):
            n = int(np.clip(length[o, j], 0, 4))
            ref = np.zeros(4)
            if n:
                ref[:n] = softmax_reference(x[o, :n, j], 0)
            np.testing.assert_allclose(out[o, :, j], ref, rtol=1e-12, atol=1e-15)
    oh.check_grad("softmax", attrs, [x, length], wrt=[0])
    with pytest.raises(MXNetError, match="use_length"):
        oh.prepare("log_softmax", {"use_length": True})


def test_softmax_dtype_and_errors():
    op, p = oh.prepare("softmax", {"dtype": "float64"})
    assert op.infer_type(p, ["float32"])[1] == ["float64"]
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    out = oh.forward("softmax", {"dtype": "float64"}, [x])[0][0]
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, softmax_reference(x.astype(np.float64), -1), rtol=1e-6)
    op, p = oh.prepare("softmax", {"axis": 2})
    with pytest.raises(MXNetError, match="axis 2 out of range"):
        op.infer_shape(p, [(2, 3)])
    # MXNet fills log_softmax's input from its output, not softmax's
    op, p = oh.prepare("log_softmax", {})
    assert op.infer_shape_backward(p, [None], [(2, 3)]) == [(2, 3)]


@settings(max_examples=8, deadline=None)
@given(mode=st.sampled_from(["instance", "channel"]),
       shape=st.lists(st.integers(1, 3), min_size=2, max_size=4), seed=st.integers(0, 999))
def test_softmax_activation(mode, shape, seed):
    x = np.random.default_rng(seed).standard_normal(shape)
    out = oh.forward("SoftmaxActivation", {"mode": mode}, [x])[0][0]
    axis = 1 if mode == "channel" else -1
    np.testing.assert_allclose(out, softmax_reference(x, axis), rtol=1e-12, atol=1e-14)
    oh.check_grad("SoftmaxActivation", {"mode": mode}, [x])


# ---------------------------------------------------------------------------------------------
# kernels: the parallel launchers agree with the serial ones
# ---------------------------------------------------------------------------------------------
def test_parallel_paths_match_serial(monkeypatch):
    from lightmod.kernels.cpu import nn as knn
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 40))
    dy = rng.standard_normal((64, 40))

    def run_all():
        res = {}
        y = np.empty_like(x)
        knn.activation_forward(x, y, "tanh")
        res["act"] = y.copy()
        dx = np.empty_like(x)
        knn.activation_backward(x, y, dy, dx, "tanh")
        res["act_b"] = dx.copy()
        knn.activation_forward(x, y, "relu")
        res["relu"] = y.copy()
        knn.activation_backward(x, y, dy, dx, "relu")
        res["relu_b"] = dx.copy()
        knn.activation_backward(x, y, dy, dx, "relu", accumulate=True)
        res["relu_b_add"] = dx.copy()
        knn.leaky_relu_forward(x, y, "gelu", 0.2)
        res["leaky"] = y.copy()
        knn.leaky_relu_backward(x, y, dy, dx, "elu", 0.2)
        res["leaky_b"] = dx.copy()
        knn.softmax_forward(x.reshape(8, 8, 40), y.reshape(8, 8, 40))
        res["softmax"] = y.copy()
        knn.softmax_backward(y.reshape(8, 8, 40), dy.reshape(8, 8, 40), dx.reshape(8, 8, 40))
        res["softmax_b"] = dx.copy()
        mask = np.empty_like(x)
        knn.dropout_forward(x, rng_u, 0.4, mask, y)
        res["dropout"] = y.copy()
        knn.smooth_l1_forward(x, y, 2.0)
        res["sl1"] = y.copy()
        knn.prelu_forward(x.reshape(64, 8, 5), np.linspace(0, 1, 8), y.reshape(64, 8, 5))
        res["prelu"] = y.copy()
        return res

    rng_u = rng.random((64, 1))
    serial = run_all()
    from lightmod.kernels.cpu import jit
    monkeypatch.setattr(jit, "PARALLEL_MIN", 1)
    # whatever the machine's load, the thread policy says "several threads" here
    monkeypatch.setattr(knn._threads, "refresh", lambda: 2)
    calls = []
    for name in ("_act_fwd_par", "_act_bwd_par", "_softmax_rows_par"):
        kernel = getattr(knn, name)
        monkeypatch.setattr(knn, name, lambda *a, _k=kernel, _n=name: (calls.append(_n),
                                                                      _k(*a))[1])
    parallel = run_all()
    assert set(calls) == {"_act_fwd_par", "_act_bwd_par", "_softmax_rows_par"}
    for key in serial:
        np.testing.assert_allclose(parallel[key], serial[key], rtol=1e-14, err_msg=key)
