"""The fused RNN operator at the registry level: numpy reference, numeric gradients, MXNet 1.9.1
golden values (tests/fixtures/make_rnn_golden.py), shape rules and errors."""
import json
import os

import numpy as np
import ophelpers as oh
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmod.base import MXNetError
from lightmod.operator import registry
from lightmod.operator.rnn_op import GATES, param_layout, param_size

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = json.load(open(os.path.join(HERE, "fixtures", "rnn_golden.json")))
ARRAYS = np.load(os.path.join(HERE, "fixtures", "rnn_golden.npz"))
MODES = ("lstm", "gru", "rnn_tanh", "rnn_relu")


# ---------------------------------------------------------------------------------------------
# a plain numpy reference (float64), written from MXNet's documented formulas
# ---------------------------------------------------------------------------------------------
def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def reference(mode, num_layers, bidirectional, x, params, hx, cx=None):
    """Returns (out, hy, cy) of MXNet's RNN operator with dropout off."""
    seq, _, width = x.shape
    hidden = hx.shape[2]
    dirs = 2 if bidirectional else 1
    gh = GATES[mode] * hidden
    entries, total = param_layout(mode, num_layers, bidirectional, width, hidden)
    assert params.size == total
    hy = np.zeros_like(hx)
    cy = None if cx is None else np.zeros_like(cx)
    layer_in = x
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            e = entries[layer * dirs + d]
            wx = params[e["wx"]:e["wx"] + gh * e["c"]].reshape(gh, e["c"])
            wh = params[e["wh"]:e["wh"] + gh * hidden].reshape(gh, hidden)
            bx, bh = params[e["bx"]:e["bx"] + gh], params[e["bh"]:e["bh"] + gh]
            h = hx[layer * dirs + d]
            c = None if cx is None else cx[layer * dirs + d]
            ys = [None] * seq
            for t in (range(seq) if d == 0 else range(seq - 1, -1, -1)):
                a = layer_in[t] @ wx.T + bx
                b = h @ wh.T + bh
                if mode == "lstm":
                    i, f, g, o = np.split(a + b, 4, axis=1)
                    c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
                    h = _sigmoid(o) * np.tanh(c)
                elif mode == "gru":
                    ar, az, an = np.split(a, 3, axis=1)
                    br, bz, bn = np.split(b, 3, axis=1)
                    r, z = _sigmoid(ar + br), _sigmoid(az + bz)
                    n = np.tanh(an + r * bn)
                    h = (1 - z) * n + z * h
                elif mode == "rnn_tanh":
                    h = np.tanh(a + b)
                else:
                    h = np.maximum(a + b, 0)
                ys[t] = h
            hy[layer * dirs + d] = h
            if cy is not None:
                cy[layer * dirs + d] = c
            outs.append(np.stack(ys))
        layer_in = np.concatenate(outs, axis=2)
    return layer_in, hy, cy


def make_inputs(rng, mode, num_layers, bidirectional, seq, batch, width, hidden, scale=0.5):
    dirs = 2 if bidirectional else 1
    ins = [rng.standard_normal((seq, batch, width)),
           rng.standard_normal(param_size(mode, num_layers, bidirectional, width, hidden)) * scale,
           rng.standard_normal((num_layers * dirs, batch, hidden)) * scale]
    if mode == "lstm":
        ins.append(rng.standard_normal((num_layers * dirs, batch, hidden)) * scale)
    return ins


def attrs_of(mode, num_layers, bidirectional, hidden, state_outputs=True, **extra):
    attrs = dict(state_size=hidden, num_layers=num_layers, mode=mode,
                 bidirectional=bidirectional, state_outputs=state_outputs)
    attrs.update(extra)
    return attrs


# ---------------------------------------------------------------------------------------------
# declaration
# ---------------------------------------------------------------------------------------------
def test_declaration_matches_mxnet():
    op = registry.get("RNN")
    for case, entry in GOLDEN["op"].items():
        p = op.parse(entry["attrs"])
        assert op.list_inputs(p) == entry["inputs"], case
        assert ["rnn_" + n for n in op.list_outputs(p)] == entry["outputs"], case
        in_shapes, out_shapes = op.infer_shape(p, [tuple(entry["shapes"][0])] +
                                               [None] * (len(entry["inputs"]) - 1))
        assert [list(s) for s in in_shapes] == entry["shapes"], case
    # parameter order of the generated function (positional use), defaults
    assert list(op.params) == ["state_size", "num_layers", "bidirectional", "mode", "p",
                               "state_outputs", "projection_size", "lstm_state_clip_min",
                               "lstm_state_clip_max", "lstm_state_clip_nan",
                               "use_sequence_length"]
    p = op.parse({"state_size": "4", "num_layers": "1", "mode": "gru"})
    assert (p.bidirectional, p.p, p.state_outputs) == (False, 0.0, False)
    assert op.num_outputs(p) == 1 and op.list_outputs(p) == ["output"]


def test_param_layout_sizes():
    # MXNet's formula (FusedRNNCell.pack_weights): (C+H+2)*H*G*D + (L-1)*G*H*(H+D*H+2)*D
    for mode in MODES:
        g = GATES[mode]
        for layers in (1, 2, 3):
            for bi in (False, True):
                d = 2 if bi else 1
                expected = (7 + 5 + 2) * 5 * g * d + (layers - 1) * g * 5 * (5 + d * 5 + 2) * d
                assert param_size(mode, layers, bi, 7, 5) == expected
    entries, total = param_layout("gru", 2, True, 3, 2)
    assert [e["c"] for e in entries] == [3, 3, 4, 4]
    assert entries[0]["wx"] == 0 and entries[0]["wh"] == 6 * 3
    assert entries[1]["wx"] == 6 * 5
    assert entries[0]["bx"] == 6 * 5 * 2 + 6 * 6 * 2 and entries[0]["bh"] == entries[0]["bx"] + 6
    assert entries[3]["bh"] + 6 == total


def test_shape_inference_partial_and_errors():
    op = registry.get("RNN")
    p = op.parse(attrs_of("lstm", 1, False, 4, state_outputs=False))
    shapes, outs = op.infer_shape(p, [(5, 0, 6), None, None, None])
    assert shapes == [(5, 0, 6), (192,), (1, 0, 4), (1, 0, 4)] and outs == [(5, 0, 4)]
    # the batch size can come from the state
    shapes, outs = op.infer_shape(p, [(5, 0, 6), None, (1, 3, 4), None])
    assert shapes[0] == (5, 3, 6) and shapes[3] == (1, 3, 4) and outs == [(5, 3, 4)]
    shapes, outs = op.infer_shape(p, [None, None, (1, 3, 4), None])
    assert outs == [None]
    with pytest.raises(MXNetError, match="rank-3"):
        op.infer_shape(p, [(5, 6), None, None, None])
    with pytest.raises(MXNetError, match="parameters"):
        op.infer_shape(p, [(5, 3, 6), (5,), None, None])
    with pytest.raises(MXNetError, match="state_cell"):
        op.infer_shape(p, [(5, 3, 6), None, None, (2, 3, 4)])
    p = op.parse(attrs_of("gru", 2, True, 4))
    shapes, outs = op.infer_shape(p, [(5, 3, 6), None, None])
    assert shapes == [(5, 3, 6), (624,), (4, 3, 4)] and outs == [(5, 3, 8), (4, 3, 4)]


@pytest.mark.parametrize("attrs, match", [
    ({"projection_size": "2"}, "projection_size"),
    ({"lstm_state_clip_min": "-1", "lstm_state_clip_max": "1"}, "lstm_state_clip"),
    ({"use_sequence_length": "True"}, "use_sequence_length"),
    ({"p": "1.0"}, "p "),
    ({"state_size": "0"}, "state_size"),
    ({"mode": "rnn_sigmoid"}, "mode"),
])
def test_bad_params(attrs, match):
    base = {"state_size": "4", "num_layers": "1", "mode": "lstm"}
    base.update(attrs)
    with pytest.raises(MXNetError, match=match):
        registry.get("RNN").parse(base)


def test_unsupported_dtype():
    rng = np.random.default_rng(0)
    ins = [a.astype(np.float16) for a in make_inputs(rng, "gru", 1, False, 2, 2, 3, 2)]
    with pytest.raises(MXNetError, match="float16"):
        oh.forward("RNN", attrs_of("gru", 1, False, 2), ins)


# ---------------------------------------------------------------------------------------------
# values
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layers, bi", [(1, False), (2, True), (3, False)])
def test_forward_matches_reference(mode, layers, bi):
    rng = np.random.default_rng(1)
    ins = make_inputs(rng, mode, layers, bi, seq=4, batch=3, width=5, hidden=4)
    outs, _, _, _ = oh.forward("RNN", attrs_of(mode, layers, bi, 4), ins)
    out, hy, cy = reference(mode, layers, bi, *ins)
    np.testing.assert_allclose(outs[0], out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(outs[1], hy, rtol=1e-10, atol=1e-12)
    if mode == "lstm":
        np.testing.assert_allclose(outs[2], cy, rtol=1e-10, atol=1e-12)
    # inference gives the same values, and without state outputs only `out` comes back
    outs2, _, _, _ = oh.forward("RNN", attrs_of(mode, layers, bi, 4, state_outputs=False), ins,
                                is_train=False)
    assert len(outs2) == 1
    np.testing.assert_array_equal(outs2[0], outs[0])


@settings(max_examples=8, deadline=None)
@given(mode=st.sampled_from(MODES), seq=st.integers(1, 5), batch=st.integers(1, 4),
       width=st.integers(1, 5), hidden=st.integers(1, 5), layers=st.integers(1, 2),
       bi=st.booleans(), seed=st.integers(0, 1000))
def test_forward_float32_random_shapes(mode, seq, batch, width, hidden, layers, bi, seed):
    rng = np.random.default_rng(seed)
    ins = make_inputs(rng, mode, layers, bi, seq, batch, width, hidden)
    outs, _, _, _ = oh.forward("RNN", attrs_of(mode, layers, bi, hidden),
                               [a.astype(np.float32) for a in ins])
    out, hy, _ = reference(mode, layers, bi, *ins)
    assert outs[0].dtype == np.float32
    np.testing.assert_allclose(outs[0], out, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outs[1], hy, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_gradient_two_layers_bidirectional(mode):
    rng = np.random.default_rng(2)
    ins = make_inputs(rng, mode, 2, True, seq=3, batch=2, width=3, hidden=2)
    oh.check_grad("RNN", attrs_of(mode, 2, True, 2), ins, rtol=1e-5, atol=1e-7, eps=1e-6)


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_gradient_one_layer_without_state_outputs(mode):
    rng = np.random.default_rng(3)
    ins = make_inputs(rng, mode, 1, False, seq=4, batch=2, width=3, hidden=3)
    oh.check_grad("RNN", attrs_of(mode, 1, False, 3, state_outputs=False), ins, rtol=1e-5,
                  atol=1e-7, eps=1e-6)


def test_gradient_relu_at_zero_from_output():
    # rnn_relu: the derivative is taken from the output (0 where the unit is off)
    rng = np.random.default_rng(4)
    ins = make_inputs(rng, "rnn_relu", 1, False, 3, 2, 2, 3, scale=1.0)
    ins[1][:] = 0.0                     # every unit exactly 0: no gradient reaches the inputs
    grads = oh.backward("RNN", attrs_of("rnn_relu", 1, False, 3),
                        ins, [np.ones((3, 2, 3)), np.ones((1, 2, 3))])
    assert not np.any(grads[0]) and not np.any(grads[2])


def test_grad_req_add_and_null_and_missing_head_grads():
    rng = np.random.default_rng(5)
    mode, attrs = "lstm", attrs_of("lstm", 2, False, 3)
    ins = make_inputs(rng, mode, 2, False, 3, 2, 4, 3)
    heads = [rng.standard_normal((3, 2, 3)), None, None]      # no gradient for hy / cy
    write = oh.backward("RNN", attrs, ins, heads)
    zero_heads = [heads[0], np.zeros((2, 2, 3)), np.zeros((2, 2, 3))]
    explicit = oh.backward("RNN", attrs, ins, zero_heads)
    for a, b in zip(write, explicit):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    init = [np.full(x.shape, 2.0) for x in ins]
    added = oh.backward("RNN", attrs, ins, heads, req=["add"] * 4, init_grads=init)
    for a, b in zip(added, write):
        np.testing.assert_allclose(a, b + 2.0, rtol=1e-12)
    partial = oh.backward("RNN", attrs, ins, heads, req=["null", "write", "null", "write"])
    assert partial[0] is None and partial[2] is None
    np.testing.assert_allclose(partial[1], write[1], rtol=1e-12)
    np.testing.assert_allclose(partial[3], write[3], rtol=1e-12)


def test_no_head_gradient_at_all_gives_zero():
    rng = np.random.default_rng(6)
    ins = make_inputs(rng, "gru", 1, True, 3, 2, 4, 3)
    grads = oh.backward("RNN", attrs_of("gru", 1, True, 3, state_outputs=False), ins, [None])
    for g in grads:
        assert not np.any(g)


# ---------------------------------------------------------------------------------------------
# MXNet 1.9.1 golden values (native CPU kernels)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", sorted(GOLDEN["op"]))
def test_golden_mxnet(case):
    entry = GOLDEN["op"][case]
    key = "op/%s" % case
    ins = [ARRAYS["%s/in/%s" % (key, n)] for n in entry["inputs"]]
    nout = len(entry["outputs"])
    outs, _, _, _ = oh.forward("RNN", entry["attrs"], ins)
    for i in range(nout):
        np.testing.assert_allclose(outs[i], ARRAYS["%s/out/%d" % (key, i)], rtol=1e-5,
                                   atol=1e-6, err_msg="%s output %d" % (case, i))
    heads = [ARRAYS["%s/ograd/%d" % (key, i)] for i in range(nout)]
    grads = oh.backward("RNN", entry["attrs"], ins, heads)
    for name, g in zip(entry["inputs"], grads):
        np.testing.assert_allclose(g, ARRAYS["%s/grad/%s" % (key, name)], rtol=1e-4, atol=1e-5,
                                   err_msg="%s gradient of %s" % (case, name))


# ---------------------------------------------------------------------------------------------
# dropout between layers
# ---------------------------------------------------------------------------------------------
def test_dropout_between_layers():
    import lightmod
    rng = np.random.default_rng(7)
    mode = "rnn_tanh"
    ins = make_inputs(rng, mode, 3, True, 6, 8, 4, 16)
    attrs = attrs_of(mode, 3, True, 16, p=0.4)
    plain, _, _, _ = oh.forward("RNN", attrs_of(mode, 3, True, 16), ins)
    inference, _, _, _ = oh.forward("RNN", attrs, ins, is_train=False)
    np.testing.assert_array_equal(inference[0], plain[0])
    lightmod.random.seed(3)
    train, state, _, _ = oh.forward("RNN", attrs, ins, is_train=True)
    assert not np.allclose(train[0], plain[0])
    masks = state["rnn_buffers"]["masks"]
    assert len(masks) == 2
    for mask in masks:
        kept = mask != 0
        np.testing.assert_allclose(mask[kept], 1 / 0.6)
        assert 0.3 < 1 - kept.mean() < 0.5
    # the same seed gives the same masks (every draw comes from lightmod.random)
    lightmod.random.seed(3)
    again, _, _, _ = oh.forward("RNN", attrs, ins, is_train=True)
    np.testing.assert_array_equal(again[0], train[0])


def test_dropout_gradient_uses_the_forward_mask():
    import lightmod
    rng = np.random.default_rng(8)
    mode = "gru"
    ins = make_inputs(rng, mode, 2, False, 3, 2, 3, 4)
    attrs = attrs_of(mode, 2, False, 4, p=0.5, state_outputs=False)
    head = rng.standard_normal((3, 2, 4))

    def loss(arrays):
        lightmod.random.seed(11)
        outs, _, _, _ = oh.forward("RNN", attrs, arrays)
        return float(np.sum(outs[0] * head))

    lightmod.random.seed(11)
    grads = oh.backward("RNN", attrs, ins, [head])
    eps = 1e-6
    for which, positions in ((0, [0, 5, 17]), (1, [0, 40, 97, 150])):
        for pos in positions:
            plus = [a.copy() for a in ins]
            minus = [a.copy() for a in ins]
            plus[which].reshape(-1)[pos] += eps
            minus[which].reshape(-1)[pos] -= eps
            numeric = (loss(plus) - loss(minus)) / (2 * eps)
            np.testing.assert_allclose(grads[which].reshape(-1)[pos], numeric, rtol=1e-5,
                                       atol=1e-8)


# ---------------------------------------------------------------------------------------------
# reverse / flip (BidirectionalCell merges its backward direction with it)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", ["1", "(0, 2)", "-1", "()"])
def test_reverse_forward_backward(axis):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((3, 4, 2))
    axes = tuple(a % 3 for a in np.atleast_1d(eval(axis)).astype(int))
    for name in ("reverse", "flip"):
        outs, _, _, _ = oh.forward(name, {"axis": axis}, [x])
        np.testing.assert_array_equal(outs[0], np.flip(x, axes) if axes else x)
    head = rng.standard_normal(x.shape)
    grad = oh.backward("reverse", {"axis": axis}, [x], [head])[0]
    np.testing.assert_array_equal(grad, np.flip(head, axes) if axes else head)
    added = oh.backward("reverse", {"axis": axis}, [x], [head], req=["add"],
                        init_grads=[np.ones_like(x)])[0]
    np.testing.assert_array_equal(added, grad + 1)


def test_reverse_errors():
    op = registry.get("reverse")
    with pytest.raises(MXNetError, match="required"):
        op.parse({})
    with pytest.raises(MXNetError, match="out of range"):
        op.infer_shape(op.parse({"axis": "3"}), [(2, 3)])
