"""Convolution / Deconvolution: numpy references, numeric gradients, MXNet 1.9.1 goldens
(every operator of the image family, a LeNet and a ResNet-style block), shape rules, errors."""
import json
import os

import numpy as np
import ophelpers as oh
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lightmod.base import MXNetError
from lightmod.kernels import cpu as kcpu
from lightmod.operator import conv as conv_mod
from lightmod.operator import registry

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


# ---------------------------------------------------------------------------------------------
# numpy references
# ---------------------------------------------------------------------------------------------
def conv_ref(x, w, b, stride, pad, dilate, groups):
    """Direct N-D grouped convolution (cross-correlation) in numpy."""
    nd = x.ndim - 2
    n, c = x.shape[:2]
    f = w.shape[0]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    ksz = w.shape[2:]
    out_sp = [(x.shape[2 + i] + 2 * pad[i] - dilate[i] * (ksz[i] - 1) - 1) // stride[i] + 1
              for i in range(nd)]
    y = np.zeros((n, f) + tuple(out_sp))
    cg, fg = c // groups, f // groups
    for offs in np.ndindex(*ksz):
        sl = tuple(slice(offs[i] * dilate[i], offs[i] * dilate[i] + stride[i] * (out_sp[i] - 1)
                         + 1, stride[i]) for i in range(nd))
        for g in range(groups):
            patch = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + sl]
            wk = w[(slice(g * fg, (g + 1) * fg), slice(None)) + offs]
            y[:, g * fg:(g + 1) * fg] += np.einsum("nc...,fc->nf...", patch, wk)
    if b is not None:
        y += b.reshape((1, f) + (1,) * nd)
    return y


class OpNode:
    """One operator at the registry level, run on numpy arrays passed by reference (so the
    auxiliary states it updates are visible to the caller)."""

    def __init__(self, name, attrs):
        self.op, self.p = oh.prepare(name, attrs)
        self.state = {}

    def forward(self, inputs, is_train=True):
        self.inputs = inputs
        _, out_shapes, out_types = oh.infer(self.op, self.p, inputs)
        self.outs = [np.zeros(s, dtype=t) for s, t in zip(out_shapes, out_types)]
        self.op.forward(self.p, kcpu, inputs, self.outs, is_train, self.state)
        return self.outs

    def backward(self, out_grads, req=None):
        if req is None:
            aux = set(self.op.list_aux(self.p))
            req = ["null" if n in aux else "write" for n in self.op.list_inputs(self.p)]
        grads = [None if r == "null" else np.zeros_like(x) for x, r in zip(self.inputs, req)]
        out_grads = list(out_grads) + [None] * (len(self.outs) - len(out_grads))
        self.op.backward(self.p, kcpu, out_grads, self.inputs, self.outs, grads, req, self.state)
        return grads


def _tuples(draw, nd, lo, hi):
    return tuple(draw(st.integers(lo, hi)) for _ in range(nd))


@st.composite
def conv_configs(draw, max_nd=3):
    nd = draw(st.integers(1, max_nd))
    groups = draw(st.integers(1, 3))
    cg = draw(st.integers(1, 2))
    fg = draw(st.integers(1, 2))
    kernel = _tuples(draw, nd, 1, 3)
    stride = _tuples(draw, nd, 1, 3)
    dilate = _tuples(draw, nd, 1, 2)
    pad = _tuples(draw, nd, 0, 2)
    spatial = tuple(max(draw(st.integers(1, 6 if nd < 3 else 4)),
                        dilate[i] * (kernel[i] - 1) + 1 - 2 * pad[i]) for i in range(nd))
    n = draw(st.integers(1, 2))
    no_bias = draw(st.booleans())
    return dict(nd=nd, groups=groups, c=cg * groups, f=fg * groups, kernel=kernel,
                stride=stride, dilate=dilate, pad=pad, spatial=spatial, n=n, no_bias=no_bias)


def _conv_inputs(cfg, rng, dtype=np.float64):
    x = rng.standard_normal((cfg["n"], cfg["c"]) + cfg["spatial"]).astype(dtype)
    w = rng.standard_normal((cfg["f"], cfg["c"] // cfg["groups"]) + cfg["kernel"]).astype(dtype)
    b = None if cfg["no_bias"] else rng.standard_normal(cfg["f"]).astype(dtype)
    attrs = dict(kernel=cfg["kernel"], stride=cfg["stride"], dilate=cfg["dilate"],
                 pad=cfg["pad"], num_filter=cfg["f"], num_group=cfg["groups"],
                 no_bias=cfg["no_bias"])
    return x, w, b, attrs


# ---------------------------------------------------------------------------------------------
# Convolution
# ---------------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(cfg=conv_configs(), seed=st.integers(0, 1000))
def test_convolution_forward_matches_numpy(cfg, seed):
    rng = np.random.default_rng(seed)
    x, w, b, attrs = _conv_inputs(cfg, rng)
    inputs = [x, w] if b is None else [x, w, b]
    outs, _, _, _ = oh.forward("Convolution", attrs, inputs)
    ref = conv_ref(x, w, b, cfg["stride"], cfg["pad"], cfg["dilate"], cfg["groups"])
    np.testing.assert_allclose(outs[0], ref, rtol=1e-10, atol=1e-10)


@settings(max_examples=8, deadline=None)
@given(cfg=conv_configs(max_nd=2), seed=st.integers(0, 1000))
def test_convolution_gradients_match_numeric(cfg, seed):
    rng = np.random.default_rng(seed)
    x, w, b, attrs = _conv_inputs(cfg, rng)
    inputs = [x, w] if b is None else [x, w, b]
    oh.check_grad("Convolution", attrs, inputs, rtol=1e-5, atol=1e-7, seed=seed)


def test_convolution_grad_req_add_and_null():
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((2, 4, 5, 5)), rng.standard_normal((6, 2, 3, 3)), \
        rng.standard_normal(6)
    attrs = dict(kernel=(3, 3), num_filter=6, num_group=2, pad=(1, 1))
    head = [rng.standard_normal((2, 6, 5, 5))]
    write = oh.backward("Convolution", attrs, [x, w, b], head)
    init = [rng.standard_normal(a.shape) for a in (x, w, b)]
    added = oh.backward("Convolution", attrs, [x, w, b], head, req=["add"] * 3, init_grads=init)
    for a, i, s in zip(added, init, write):
        np.testing.assert_allclose(a, i + s, rtol=1e-12)
    only_w = oh.backward("Convolution", attrs, [x, w, b], head, req=["null", "write", "null"])
    assert only_w[0] is None and only_w[2] is None
    np.testing.assert_allclose(only_w[1], write[1], rtol=1e-12)


def test_convolution_chunked_batch_matches_single_chunk(monkeypatch):
    rng = np.random.default_rng(2)
    x, w, b = rng.standard_normal((5, 3, 6, 6)), rng.standard_normal((4, 3, 3, 3)), \
        rng.standard_normal(4)
    attrs = dict(kernel=(3, 3), num_filter=4, stride=(1, 2), pad=(1, 1))
    head = [rng.standard_normal((5, 4, 6, 3))]
    full_out = oh.forward("Convolution", attrs, [x, w, b])[0][0]
    full = oh.backward("Convolution", attrs, [x, w, b], head)
    monkeypatch.setattr(conv_mod, "COL_BUDGET", 3 * 9 * 18 * 2)  # two samples per chunk
    chunk_out = oh.forward("Convolution", attrs, [x, w, b])[0][0]
    chunked = oh.backward("Convolution", attrs, [x, w, b], head)
    np.testing.assert_allclose(chunk_out, full_out, rtol=1e-12)
    for a, c in zip(full, chunked):
        np.testing.assert_allclose(c, a, rtol=1e-11, atol=1e-12)
    dcfg = dict(kernel=(3, 3), num_filter=2, stride=(2, 2))
    xd, wd = rng.standard_normal((5, 3, 3, 3)), rng.standard_normal((3, 2, 3, 3))
    hd = [rng.standard_normal((5, 2, 7, 7))]
    chunked_d = oh.backward("Deconvolution", dcfg, [xd, wd], hd)
    monkeypatch.setattr(conv_mod, "COL_BUDGET", 8 << 20)
    full_d = oh.backward("Deconvolution", dcfg, [xd, wd], hd)
    for a, c in zip(full_d, chunked_d):
        np.testing.assert_allclose(c, a, rtol=1e-11, atol=1e-12)


def test_convolution_weight_gradient_reuses_forward_columns_only_when_valid():
    # two backwards after one forward: the second must rebuild the columns it overwrote
    node = OpNode("Convolution", dict(kernel=(2, 2), num_filter=3))
    rng = np.random.default_rng(3)
    x, w, b = rng.standard_normal((2, 2, 4, 4)), rng.standard_normal((3, 2, 2, 2)), \
        rng.standard_normal(3)
    node.forward([x, w, b])
    head = rng.standard_normal((2, 3, 3, 3))
    first = node.backward([head])
    second = node.backward([head])
    for a, c in zip(first, second):
        np.testing.assert_allclose(a, c, rtol=1e-12)


def test_convolution_float16_and_float32():
    rng = np.random.default_rng(4)
    x, w, b = rng.standard_normal((2, 3, 5, 5)), rng.standard_normal((4, 3, 3, 3)), \
        rng.standard_normal(4)
    attrs = dict(kernel=(3, 3), num_filter=4)
    ref = conv_ref(x, w, b, (1, 1), (0, 0), (1, 1), 1)
    for dtype, tol in ((np.float32, 1e-5), (np.float16, 2e-2)):
        inputs = [a.astype(dtype) for a in (x, w, b)]
        out = oh.forward("Convolution", attrs, inputs)[0][0]
        assert out.dtype == dtype
        np.testing.assert_allclose(out.astype(np.float64), ref, rtol=tol, atol=tol * 10)
        grads = oh.backward("Convolution", attrs, inputs, [np.ones(out.shape, dtype)])
        assert all(g.dtype == dtype for g in grads)
        assert np.allclose(grads[2].astype(np.float64), 9.0 * 2)


# ---------------------------------------------------------------------------------------------
# Deconvolution
# ---------------------------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(cfg=conv_configs(), seed=st.integers(0, 1000))
def test_deconvolution_is_the_adjoint_of_convolution(cfg, seed):
    """<deconv(x), y> == <x, conv(y)> for the same weight (the definition of deconvolution)."""
    rng = np.random.default_rng(seed)
    nd = cfg["nd"]
    xsize = tuple(min(s, 4) for s in cfg["spatial"])
    ysize = tuple(t * (s - 1) + d * (k - 1) + 1 - 2 * p for s, t, d, k, p in zip(
        xsize, cfg["stride"], cfg["dilate"], cfg["kernel"], cfg["pad"]))
    assume(all(y > 0 for y in ysize))
    xin = rng.standard_normal((cfg["n"], cfg["c"]) + xsize)
    w = rng.standard_normal((cfg["c"], cfg["f"] // cfg["groups"]) + cfg["kernel"])
    attrs = dict(kernel=cfg["kernel"], stride=cfg["stride"], dilate=cfg["dilate"],
                 pad=cfg["pad"], num_filter=cfg["f"], num_group=cfg["groups"])
    out = oh.forward("Deconvolution", attrs, [xin, w])[0][0]
    y = rng.standard_normal(out.shape)
    # Convolution's weight (F', C'/g) = (C, F/g): Deconvolution's weight read the other way
    conv_attrs = dict(attrs, num_filter=cfg["c"], no_bias=True)
    back = oh.forward("Convolution", conv_attrs, [y, w])[0][0]
    assert back.shape == xin.shape
    assert np.isclose(np.sum(out * y), np.sum(xin * back), rtol=1e-10, atol=1e-10)
    assert out.shape[2:] == ysize
    assert nd == len(out.shape) - 2


@settings(max_examples=6, deadline=None)
@given(cfg=conv_configs(max_nd=2), seed=st.integers(0, 1000), adj=st.booleans())
def test_deconvolution_gradients_match_numeric(cfg, seed, adj):
    rng = np.random.default_rng(seed)
    nd = cfg["nd"]
    x = rng.standard_normal((cfg["n"], cfg["c"]) + tuple(min(s, 3) for s in cfg["spatial"]))
    w = rng.standard_normal((cfg["c"], cfg["f"] // cfg["groups"]) + cfg["kernel"])
    b = rng.standard_normal(cfg["f"])
    adjv = tuple(min(1, s - 1) if adj else 0 for s in cfg["stride"])
    attrs = dict(kernel=cfg["kernel"], stride=cfg["stride"], dilate=cfg["dilate"],
                 pad=tuple(0 for _ in range(nd)), adj=adjv, num_filter=cfg["f"],
                 num_group=cfg["groups"], no_bias=False)
    oh.check_grad("Deconvolution", attrs, [x, w, b], rtol=1e-5, atol=1e-7, seed=seed)


def test_deconvolution_target_shape_sets_pad_and_adj():
    op, p = oh.prepare("Deconvolution", dict(kernel=(4, 4), num_filter=2, stride=(2, 2),
                                             target_shape=(7, 8)))
    _, outs = op.infer_shape(p, [(1, 3, 3, 4), None])
    assert outs == [(1, 2, 7, 8)]
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((1, 3, 3, 4)), rng.standard_normal((3, 2, 4, 4))
    y = oh.forward("Deconvolution", dict(kernel=(4, 4), num_filter=2, stride=(2, 2),
                                         target_shape=(7, 8)), [x, w])[0][0]
    # target 7 from a full size of 8: pad 1 and adj 1 (MXNet's rule)
    same = oh.forward("Deconvolution", dict(kernel=(4, 4), num_filter=2, stride=(2, 2),
                                            pad=(1, 1), adj=(1, 0)), [x, w])[0][0]
    np.testing.assert_allclose(y, same)


# ---------------------------------------------------------------------------------------------
# Shapes, declarations and errors
# ---------------------------------------------------------------------------------------------
def _golden_meta():
    with open(os.path.join(FIXTURES, "conv_golden.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("case", _golden_meta()["shapes"],
                         ids=lambda c: "%s-%s" % (c["op"], c["data"]))
def test_shape_inference_matches_mxnet(case):
    op, p = oh.prepare(case["op"], case["attrs"])
    n = len(op.list_inputs(p))
    ins, outs = op.infer_shape(p, [tuple(case["data"])] + [None] * (n - 1))
    assert [tuple(s) for s in ins] == [tuple(s) for s in case["args"]]
    assert tuple(outs[0]) == tuple(case["outs"][0])


def test_convolution_declaration():
    op = registry.get("Convolution")
    assert op.list_inputs(op.parse({"kernel": "(3,3)", "num_filter": "2"})) == \
        ["data", "weight", "bias"]
    assert op.list_inputs(op.parse({"kernel": "(3,3)", "num_filter": "2", "no_bias": "True"})) \
        == ["data", "weight"]
    p = op.parse({"kernel": "(3,3)", "num_filter": "2", "cudnn_tune": "fastest",
                  "cudnn_off": "1", "workspace": "2048", "layout": "NCHW"})
    assert p.workspace == 2048 and p.num_group == 1
    d = registry.get("Deconvolution")
    pd = d.parse({"kernel": "(3,3)", "num_filter": "2"})
    assert pd.no_bias is True and pd.workspace == 512
    assert d.list_inputs(pd) == ["data", "weight"]
    assert list(d.params)[:6] == ["kernel", "stride", "dilate", "pad", "adj", "target_shape"]


@pytest.mark.parametrize("attrs, data, words", [
    (dict(kernel=(5, 5), num_filter=4), (1, 2, 3, 3), ["kernel", "(1, 2, 3, 3)"]),
    (dict(kernel=(3, 3), num_filter=4, dilate=(3, 3), pad=(1, 1)), (1, 2, 3, 3),
     ["kernel", "pad"]),
    (dict(kernel=(1, 1), num_filter=5, num_group=2), (1, 4, 3, 3),
     ["num_filter", "num_group"]),
    (dict(kernel=(1, 1), num_filter=4, num_group=2), (1, 3, 3, 3),
     ["channels", "num_group"]),
    (dict(kernel=(1, 1), num_filter=4, layout="NCW"), (1, 3, 3, 3), ["layout", "NCW"]),
    (dict(kernel=(1, 1), num_filter=4, layout="NHWC"), (1, 3, 3, 3), ["layout", "NHWC"]),
    (dict(kernel=(3, 3), num_filter=4), (1, 3, 7, 8, 9), ["data", "(1, 3, 7, 8, 9)"]),
])
def test_convolution_shape_errors_name_operator_attribute_and_shapes(attrs, data, words):
    op, p = oh.prepare("Convolution", attrs)
    with pytest.raises(MXNetError) as err:
        op.infer_shape(p, [data, None, None])
    msg = str(err.value)
    assert "Convolution" in msg
    for word in words:
        assert word in msg, msg


@pytest.mark.parametrize("attrs, words", [
    (dict(kernel=(3, 3), stride=(1,), num_filter=2), ["stride", "kernel"]),
    (dict(kernel=(3, 3, 3, 3), num_filter=2), ["kernel"]),
    (dict(kernel=(3, 3), stride=(0, 1), num_filter=2), ["stride"]),
    (dict(kernel=(3, 3), num_filter=0), ["num_filter"]),
    (dict(kernel=(3, 3), num_filter=2, layout="NCHWX"), ["layout"]),
])
def test_convolution_bad_attributes(attrs, words):
    with pytest.raises(MXNetError) as err:
        oh.prepare("Convolution", attrs)
    for word in words:
        assert word in str(err.value)


def test_deconvolution_errors():
    with pytest.raises(MXNetError, match="adj"):
        oh.prepare("Deconvolution", dict(kernel=(3, 3), num_filter=2, stride=(2, 2),
                                         adj=(2, 2)))
    op, p = oh.prepare("Deconvolution", dict(kernel=(3, 3), num_filter=2, stride=(2, 2),
                                             target_shape=(20, 20)))
    with pytest.raises(MXNetError, match="target_shape"):
        op.infer_shape(p, [(1, 2, 3, 3), None])
    op, p = oh.prepare("Deconvolution", dict(kernel=(3, 3), num_filter=2, num_group=2))
    with pytest.raises(MXNetError, match="num_group"):
        op.infer_shape(p, [(1, 3, 3, 3), None])


def test_partial_shapes():
    op, p = oh.prepare("Convolution", dict(kernel=(3, 3), num_filter=4, pad=(1, 1)))
    ins, outs = op.infer_shape(p, [(0, 3, 8, 8), None, None])
    assert ins[1] == (4, 3, 3, 3) and outs[0] == (0, 4, 8, 8)
    ins, outs = op.infer_shape(p, [None, (4, 3, 3, 3), None])
    assert outs == [None]
    with pytest.raises(MXNetError, match="weight"):
        op.infer_shape(p, [(1, 3, 8, 8), (4, 2, 3, 3), None])


# ---------------------------------------------------------------------------------------------
# MXNet 1.9.1 goldens
# ---------------------------------------------------------------------------------------------
GOLDEN = np.load(os.path.join(FIXTURES, "conv_golden.npz"))
OP_CASES = [c for c in _golden_meta()["cases"] if "op" in c]


def _tol(case):
    return dict(rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("case", OP_CASES, ids=lambda c: c["name"])
def test_operator_matches_mxnet_golden(case):
    name = case["name"]
    node = OpNode(case["op"], case["attrs"])
    ours = node.op.list_inputs(node.p)
    mx_of = dict(zip(case["inputs"], case["mx_inputs"]))
    assert sorted(ours) == sorted(case["inputs"])
    inputs = [GOLDEN["%s/in/%s" % (name, mx_of[n])].copy() for n in ours]
    outs = node.forward(inputs, is_train=case["train"])
    nvis = node.op.num_visible_outputs(node.p)
    assert nvis == case["num_outputs"]
    for i in range(nvis):
        np.testing.assert_allclose(outs[i], GOLDEN["%s/out/%d" % (name, i)], **_tol(case),
                                   err_msg="%s output %d" % (name, i))
    if not case["train"]:
        return
    heads = [GOLDEN["%s/head/%d" % (name, i)] for i in range(nvis)]
    grads = node.backward(heads)
    for n, g in zip(ours, grads):
        key = "%s/grad/%s" % (name, mx_of[n])
        if g is not None:
            np.testing.assert_allclose(g, GOLDEN[key], **_tol(case),
                                       err_msg="%s gradient of %s" % (name, n))
    aux = node.op.list_aux(node.p)
    for n, x in zip(ours, inputs):
        if n in aux:
            np.testing.assert_allclose(x, GOLDEN["%s/aux/%s" % (name, mx_of[n])], rtol=1e-5,
                                       atol=1e-6, err_msg="%s aux %s after the step" % (name, n))


def det(shape, seed, scale=1.0, positive=False):
    """Same numbers as tests/fixtures/make_conv_golden.py's det."""
    n = int(np.prod(shape))
    v = np.sin(np.arange(n, dtype=np.float64) * 0.7071067811865476 + seed * 1.2345) * scale
    v = v + 0.3 * np.sin(np.arange(n, dtype=np.float64) * 0.1234 + seed)
    if positive:
        v = np.abs(v) + 0.25
    return v.reshape(shape).astype(np.float32)


def test_lenet_forward_backward_matches_mxnet():
    """conv-tanh-pool-conv-tanh-pool-fc-tanh-fc; the fully-connected and tanh steps in numpy."""
    meta = next(c for c in _golden_meta()["cases"] if c["name"] == "lenet")
    arrays = {}
    for i, arg in enumerate(meta["args"]):
        shape = tuple(meta["shapes"][arg])
        if arg.startswith("fc"):
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
            arrays[arg] = det(shape, seed=30 + i, scale=1.0 / np.sqrt(fan_in))
        else:
            arrays[arg] = GOLDEN["lenet/in/%s" % arg]
    c1 = OpNode("Convolution", dict(kernel=(5, 5), num_filter=20))
    p1 = OpNode("Pooling", dict(kernel=(2, 2), stride=(2, 2), pool_type="max"))
    c2 = OpNode("Convolution", dict(kernel=(5, 5), num_filter=50))
    p2 = OpNode("Pooling", dict(kernel=(2, 2), stride=(2, 2), pool_type="max"))
    a1 = np.tanh(c1.forward([arrays["data"], arrays["conv1_weight"], arrays["conv1_bias"]])[0])
    h1 = p1.forward([a1])[0]
    a2 = np.tanh(c2.forward([h1, arrays["conv2_weight"], arrays["conv2_bias"]])[0])
    h2 = p2.forward([a2])[0]
    flat = h2.reshape(h2.shape[0], -1)
    a3 = np.tanh(flat @ arrays["fc1_weight"].T + arrays["fc1_bias"])
    out = a3 @ arrays["fc2_weight"].T + arrays["fc2_bias"]
    tol = dict(rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out, GOLDEN["lenet/out/0"], **tol)
    head = GOLDEN["lenet/head/0"]
    da3 = head @ arrays["fc2_weight"]
    dz1 = da3 * (1 - a3 ** 2)
    dfc1 = dz1.T @ flat
    # sums of 800 float32 products of both signs: compare on the scale of the terms
    np.testing.assert_allclose(dfc1.sum(axis=1), GOLDEN["lenet/grad/fc1_weight_rowsum"],
                               rtol=1e-4, atol=2e-3)
    np.testing.assert_allclose(dfc1[:3], GOLDEN["lenet/grad/fc1_weight_rows"], **tol)
    dh2 = (dz1 @ arrays["fc1_weight"]).reshape(h2.shape)
    da2 = p2.backward([dh2])[0] * (1 - a2 ** 2)
    dh1, dw2, db2 = c2.backward([da2])
    da1 = p1.backward([dh1])[0] * (1 - a1 ** 2)
    dx, dw1, db1 = c1.backward([da1])
    for key, value in (("conv2_weight", dw2), ("conv2_bias", db2), ("conv1_weight", dw1),
                       ("conv1_bias", db1), ("data", dx)):
        # float32 gradients summed over the batch in a different order (BLAS blocking, batch
        # chunks) than oneDNN: compare relative to the largest entry
        golden = GOLDEN["lenet/grad/%s" % key]
        np.testing.assert_allclose(value, golden, rtol=1e-3,
                                   atol=1e-5 * float(np.abs(golden).max()), err_msg=key)


@pytest.mark.parametrize("train", [True, False])
def test_resnet_block_matches_mxnet(train):
    """conv-BN-relu-conv-BN + shortcut, relu, global avg pool: outputs, gradients and the moving
    statistics after one training step (relu and the addition in numpy)."""
    arrays = {k.split("/")[-1]: GOLDEN[k].copy() for k in GOLDEN.files
              if k.startswith("resnet/in/")}
    c1 = OpNode("Convolution", dict(kernel=(3, 3), pad=(1, 1), num_filter=8, no_bias=True))
    b1 = OpNode("BatchNorm", dict(fix_gamma=False, momentum=0.9, eps=2e-5))
    c2 = OpNode("Convolution", dict(kernel=(3, 3), pad=(1, 1), num_filter=8, no_bias=True))
    b2 = OpNode("BatchNorm", {})
    pool = OpNode("Pooling", dict(global_pool=True, pool_type="avg", kernel=(1, 1)))
    x = arrays["data"]
    z1 = c1.forward([x, arrays["conv1_weight"]], train)[0]
    n1 = b1.forward([z1, arrays["bn1_gamma"], arrays["bn1_beta"], arrays["bn1_moving_mean"],
                     arrays["bn1_moving_var"]], train)[0]
    r1 = np.maximum(n1, 0)
    z2 = c2.forward([r1, arrays["conv2_weight"]], train)[0]
    n2 = b2.forward([z2, arrays["bn2_gamma"], arrays["bn2_beta"], arrays["bn2_moving_mean"],
                     arrays["bn2_moving_var"]], train)[0]
    s = n2 + x
    r2 = np.maximum(s, 0)
    out = pool.forward([r2], train)[0]
    key = "resnet/out/0" if train else "resnet/out_inference/0"
    np.testing.assert_allclose(out, GOLDEN[key], rtol=1e-4, atol=1e-5)
    if not train:
        return
    ds = pool.backward([GOLDEN["resnet/head/0"]])[0] * (s > 0)
    dz2, dg2, dbeta2 = b2.backward([ds])[:3]
    dr1, dw2 = c2.backward([dz2])
    dz1, dg1, dbeta1 = b1.backward([dr1 * (n1 > 0)])[:3]
    dx, dw1 = c1.backward([dz1])
    dx = dx + ds
    tol = dict(rtol=5e-4, atol=5e-5)
    for name, value in (("data", dx), ("conv1_weight", dw1), ("conv2_weight", dw2),
                        ("bn1_gamma", dg1), ("bn1_beta", dbeta1), ("bn2_gamma", dg2),
                        ("bn2_beta", dbeta2)):
        np.testing.assert_allclose(value, GOLDEN["resnet/grad/%s" % name], **tol, err_msg=name)
    for name in ("bn1_moving_mean", "bn1_moving_var", "bn2_moving_mean", "bn2_moving_var"):
        np.testing.assert_allclose(arrays[name], GOLDEN["resnet/aux/%s" % name], rtol=1e-5,
                                   atol=1e-6, err_msg=name)
    # fix_gamma (bn2's default) wrote 1 into gamma as MXNet's CPU kernel does
    assert np.all(arrays["bn2_gamma"] == 1)


def test_parallel_launchers_match_serial(monkeypatch):
    """The prange launchers (used on large calls) give the serial kernels' numbers exactly."""
    from lightmod.kernels.cpu import jit
    rng = np.random.default_rng(9)
    x, w, b = rng.standard_normal((3, 4, 7, 6)), rng.standard_normal((6, 2, 3, 3)), \
        rng.standard_normal(6)
    cases = [("Convolution", dict(kernel=(3, 3), num_filter=6, num_group=2, pad=(1, 1)),
              [x, w, b]),
             ("Deconvolution", dict(kernel=(3, 3), num_filter=4, stride=(2, 2), no_bias=False),
              [x, rng.standard_normal((4, 4, 3, 3)), rng.standard_normal(4)]),
             ("Pooling", dict(kernel=(2, 2), stride=(2, 2)), [x[:, :, :6]]),
             ("Pooling", dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg"), [x]),
             ("BatchNorm", dict(fix_gamma=False), [x, rng.standard_normal(4),
                                                   rng.standard_normal(4), np.zeros(4),
                                                   np.ones(4)])]
    results = []
    for threshold in (0, 1 << 60):
        monkeypatch.setattr(jit, "PARALLEL_MIN", threshold)
        run = []
        for name, attrs, inputs in cases:
            outs = oh.forward(name, attrs, inputs)[0]
            head = [np.linspace(-1, 1, outs[0].size).reshape(outs[0].shape)]
            run.append([outs[0]] + [g for g in oh.backward(name, attrs, inputs, head)
                                    if g is not None])
        results.append(run)
    for par, ser in zip(*results):
        for a, c in zip(par, ser):
            np.testing.assert_allclose(a, c, rtol=1e-13, atol=1e-13)
