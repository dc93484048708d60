"""Normalisation operators: numpy references over hypothesis-drawn shapes and attributes,
numeric gradients, MXNet's BatchNorm conventions (moving statistics updated in backward,
fix_gamma, hidden mean / inverse-std outputs), declarations and errors."""
import numpy as np
import ophelpers as oh
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmod.base import MXNetError
from lightmod.kernels import cpu
from lightmod.operator import registry


def bn_ref(x, gamma, beta, mean, var, eps, axis, fix_gamma):
    shape = [1] * x.ndim
    shape[axis] = -1
    g = np.ones_like(gamma) if fix_gamma else gamma
    return (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * g.reshape(shape) \
        + beta.reshape(shape)


@st.composite
def bn_cases(draw):
    ndim = draw(st.integers(2, 4))
    shape = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    shape = (max(shape[0], 2),) + shape[1:]
    axis = draw(st.integers(-ndim, ndim - 1))
    return dict(shape=shape, axis=axis, fix_gamma=draw(st.booleans()),
                use_global_stats=draw(st.booleans()), eps=draw(st.sampled_from([1e-3, 1e-5])),
                momentum=draw(st.sampled_from([0.9, 0.5])), seed=draw(st.integers(0, 999)))


def _bn_inputs(case):
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal(case["shape"]) * 2 + 0.5
    c = case["shape"][case["axis"]]
    return [x, rng.standard_normal(c) + 1, rng.standard_normal(c), rng.standard_normal(c),
            rng.random(c) + 0.5]


@settings(max_examples=40, deadline=None)
@given(case=bn_cases(), train=st.booleans())
def test_batchnorm_forward_matches_numpy(case, train):
    x, gamma, beta, mm, mv = _bn_inputs(case)
    attrs = dict(axis=case["axis"], fix_gamma=case["fix_gamma"], eps=case["eps"],
                 use_global_stats=case["use_global_stats"], output_mean_var=True)
    outs = oh.forward("BatchNorm", attrs, [x, gamma, beta, mm, mv], is_train=train)[0]
    axis = case["axis"] % x.ndim
    red = tuple(i for i in range(x.ndim) if i != axis)
    if train and not case["use_global_stats"]:
        mean, var = x.mean(axis=red), x.var(axis=red)
    else:
        mean, var = mm, mv
    ref = bn_ref(x, gamma, beta, mean, var, case["eps"], axis, case["fix_gamma"])
    np.testing.assert_allclose(outs[0], ref, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(outs[1], mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(outs[2], 1 / np.sqrt(var + case["eps"]), rtol=1e-9)


@settings(max_examples=10, deadline=None)
@given(case=bn_cases())
def test_batchnorm_gradients_match_numeric(case):
    inputs = _bn_inputs(case)
    # eps 0.1: with as few as 2 values per channel a tiny eps makes the numeric derivative
    # ill-conditioned (the forward tests use the real defaults)
    attrs = dict(axis=case["axis"], fix_gamma=case["fix_gamma"], eps=0.1,
                 use_global_stats=case["use_global_stats"])
    oh.check_grad("BatchNorm", attrs, inputs, wrt=[0, 1, 2], rtol=1e-5, atol=1e-7)
    grads = oh.backward("BatchNorm", attrs, inputs, [np.ones(case["shape"])])
    if case["fix_gamma"]:
        assert not grads[1].any()


def _run_bn(attrs, inputs, is_train, heads=None):
    """Forward (and backward) on the caller's arrays so the aux updates are visible."""
    op, p = oh.prepare("BatchNorm", attrs)
    x = inputs[0]
    c = inputs[1].shape[0]
    outs = [np.zeros_like(x), np.zeros(c), np.zeros(c)]
    state = {}
    op.forward(p, cpu, inputs, outs, is_train, state)
    if heads is not None:
        grads = [np.zeros_like(x), np.zeros(c), np.zeros(c), None, None]
        op.backward(p, cpu, [heads, None, None], inputs, outs, grads,
                    ["write", "write", "write", "null", "null"], state)
    return outs


def test_moving_statistics_are_updated_in_backward_only():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3, 2, 2)) * 3 + 1
    gamma, beta = np.full(3, 2.0), np.zeros(3)
    mm, mv = np.full(3, 0.1), np.full(3, 2.0)
    attrs = dict(momentum=0.8, fix_gamma=False)
    _run_bn(attrs, [x, gamma, beta, mm, mv], is_train=True)
    assert np.all(mm == 0.1) and np.all(mv == 2.0)
    _run_bn(attrs, [x, gamma, beta, mm, mv], is_train=True, heads=np.ones_like(x))
    red = (0, 2, 3)
    np.testing.assert_allclose(mm, 0.1 * 0.8 + x.mean(axis=red) * 0.2, rtol=1e-12)
    # the *biased* batch variance feeds the moving variance
    np.testing.assert_allclose(mv, 2.0 * 0.8 + x.var(axis=red) * 0.2, rtol=1e-12)
    # inference and use_global_stats leave them alone even with a backward
    before = mm.copy(), mv.copy()
    _run_bn(attrs, [x, gamma, beta, mm, mv], is_train=False, heads=np.ones_like(x))
    _run_bn(dict(attrs, use_global_stats=True), [x, gamma, beta, mm, mv], is_train=True,
            heads=np.ones_like(x))
    np.testing.assert_array_equal(mm, before[0])
    np.testing.assert_array_equal(mv, before[1])


def test_fix_gamma_writes_one_into_gamma():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 2, 4))
    gamma = np.array([3.0, 4.0])
    _run_bn({}, [x, gamma, np.zeros(2), np.zeros(2), np.ones(2)], is_train=True)
    np.testing.assert_array_equal(gamma, [1.0, 1.0])


def test_batchnorm_declaration():
    op = registry.get("BatchNorm")
    p = op.parse({})
    assert (p.eps, p.momentum, p.fix_gamma, p.use_global_stats, p.axis) == \
        (1e-3, 0.9, True, False, 1)
    assert op.list_inputs(p) == ["data", "gamma", "beta", "moving_mean", "moving_var"]
    assert op.list_aux(p) == ["moving_mean", "moving_var"]
    assert op.input_init == {"moving_mean": '["zero", {}]', "moving_var": '["one", {}]'}
    assert op.num_outputs(p) == 3 and op.num_visible_outputs(p) == 1
    assert op.list_outputs(p) == ["output"]
    p3 = op.parse({"output_mean_var": "True", "cudnn_off": "1", "min_calib_range": "None"})
    assert op.list_outputs(p3) == ["output", "mean", "var"]
    ins, outs = op.infer_shape(p, [(2, 5, 3), None, None, None, None])
    assert ins[1:] == [(5,)] * 4 and outs == [(2, 5, 3), (5,), (5,)]
    ins, outs = op.infer_shape(op.parse({"axis": "-1"}), [(2, 5, 3)] + [None] * 4)
    assert outs[1] == (3,)
    assert op.infer_type(p, ["float16"] + [None] * 4) == (
        ["float16"] + ["float32"] * 4, ["float16", "float32", "float32"])
    with pytest.raises(MXNetError, match=r"axis 3 .*\(2, 3, 4\)"):
        op.infer_shape(op.parse({"axis": "3"}), [(2, 3, 4)] + [None] * 4)
    with pytest.raises(MXNetError, match="gamma"):
        op.infer_shape(p, [(2, 3, 4), (4,), None, None, None])


def test_batchnorm_float16_data_with_float32_parameters():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3, 5))
    gamma, beta = rng.standard_normal(3) + 1, rng.standard_normal(3)
    ref = bn_ref(x, gamma, beta, x.mean(axis=(0, 2)), x.var(axis=(0, 2)), 1e-3, 1, False)
    mm, mv = np.zeros(3, np.float32), np.ones(3, np.float32)
    inputs = [x.astype(np.float16), gamma.astype(np.float32), beta.astype(np.float32), mm, mv]
    op, p = oh.prepare("BatchNorm", dict(fix_gamma=False))
    outs = [np.zeros(x.shape, np.float16), np.zeros(3, np.float32), np.zeros(3, np.float32)]
    state = {}
    op.forward(p, cpu, inputs, outs, True, state)
    np.testing.assert_allclose(outs[0].astype(np.float64), ref, rtol=1e-2, atol=1e-2)
    grads = [np.zeros(x.shape, np.float16), np.zeros(3, np.float32), np.zeros(3, np.float32),
             None, None]
    op.backward(p, cpu, [np.ones(x.shape, np.float16), None, None], inputs, outs, grads,
                ["write", "write", "write", "null", "null"], state)
    assert grads[0].dtype == np.float16
    np.testing.assert_allclose(grads[2], [20.0] * 3)
    np.testing.assert_allclose(mm, 0.1 * x.mean(axis=(0, 2)), rtol=1e-2, atol=1e-3)


# ---------------------------------------------------------------------------------------------
# InstanceNorm, LayerNorm, L2Normalization, LRN
# ---------------------------------------------------------------------------------------------
shapes3 = st.lists(st.integers(1, 4), min_size=3, max_size=4).map(
    lambda s: (s[0], s[1] + 1) + tuple(x + 1 for x in s[2:]))


@settings(max_examples=15, deadline=None)
@given(shape=shapes3, seed=st.integers(0, 999))
def test_instance_norm(shape, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    g, b = rng.standard_normal(shape[1]), rng.standard_normal(shape[1])
    out = oh.forward("InstanceNorm", dict(eps=1e-3), [x, g, b])[0][0]
    red = tuple(range(2, x.ndim))
    bshape = (1, -1) + (1,) * (x.ndim - 2)
    ref = (x - x.mean(axis=red, keepdims=True)) / np.sqrt(x.var(axis=red, keepdims=True) + 1e-3) \
        * g.reshape(bshape) + b.reshape(bshape)
    np.testing.assert_allclose(out, ref, rtol=1e-9, atol=1e-9)
    if x.size <= 40:
        oh.check_grad("InstanceNorm", dict(eps=0.1), [x, g, b], rtol=1e-5, atol=1e-7)


@settings(max_examples=15, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple),
       seed=st.integers(0, 999), data=st.data())
def test_layer_norm(shape, seed, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    a = shape[axis]
    g, b = rng.standard_normal(a), rng.standard_normal(a)
    attrs = dict(axis=axis, output_mean_var=True, eps=1e-5)
    outs = oh.forward("LayerNorm", attrs, [x, g, b])[0]
    mean = x.mean(axis=axis, keepdims=True)
    std = np.sqrt(x.var(axis=axis, keepdims=True) + 1e-5)
    bshape = [1] * x.ndim
    bshape[axis] = -1
    ref = (x - mean) / std * g.reshape(bshape) + b.reshape(bshape)
    np.testing.assert_allclose(outs[0], ref, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(outs[1], mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(outs[2], std, rtol=1e-9)
    if x.size <= 40:
        # a larger eps keeps rows of 2 nearly-equal values from making the numeric
        # derivative ill-conditioned
        oh.check_grad("LayerNorm", dict(axis=axis, eps=0.1), [x, g, b], rtol=1e-5, atol=1e-7)


@settings(max_examples=15, deadline=None)
@given(shape=shapes3, mode=st.sampled_from(["instance", "channel", "spatial"]),
       seed=st.integers(0, 999))
def test_l2_normalization(shape, mode, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    out = oh.forward("L2Normalization", dict(mode=mode), [x])[0][0]
    red = {"instance": tuple(range(1, x.ndim)), "channel": (1,),
           "spatial": tuple(range(2, x.ndim))}[mode]
    ref = x / np.sqrt((x * x).sum(axis=red, keepdims=True) + 1e-10)
    np.testing.assert_allclose(out, ref, rtol=1e-9, atol=1e-12)
    if x.size <= 40:
        # atol 1e-6: gradients of order 1e-7 are at the numeric derivative's noise floor;
        # eps 1e-6: a norm over two small values curves sharply, and the central difference's
        # error (eps^2 / norm^3) reached 4e-5 relative at eps 1e-4 (shape (3, 2, 2, 2),
        # channel mode, seed 1)
        oh.check_grad("L2Normalization", dict(mode=mode), [x], rtol=1e-5, atol=1e-6,
                      eps=1e-6)


@settings(max_examples=10, deadline=None)
@given(nsize=st.integers(1, 5), channels=st.integers(1, 6), seed=st.integers(0, 999))
def test_lrn(nsize, channels, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, channels, 2, 2))
    attrs = dict(nsize=nsize, alpha=0.2, beta=0.75, knorm=1.5)
    out = oh.forward("LRN", attrs, [x])[0][0]
    half = (nsize - 1) // 2
    s = np.zeros_like(x)
    for c in range(channels):
        s[:, c] = (x[:, max(0, c - half):c + half + 1] ** 2).sum(axis=1)
    ref = x * (1.5 + 0.2 / nsize * s) ** -0.75
    np.testing.assert_allclose(out, ref, rtol=1e-9, atol=1e-12)
    oh.check_grad("LRN", attrs, [x], rtol=1e-5, atol=1e-7)


def test_norm_declarations_and_errors():
    op, p = oh.prepare("LayerNorm", {})
    assert (p.axis, p.eps, op.num_outputs(p), op.num_visible_outputs(p)) == (-1, 1e-5, 3, 1)
    op, p = oh.prepare("LayerNorm", dict(output_mean_var=True))
    assert op.list_outputs(p) == ["output", "mean", "std"]
    assert op.infer_shape(p, [(2, 3, 5), None, None])[1] == [(2, 3, 5), (2, 3, 1), (2, 3, 1)]
    op, p = oh.prepare("InstanceNorm", {})
    assert p.eps == 1e-3 and op.num_visible_outputs(p) == 1
    with pytest.raises(MXNetError, match="float16"):
        op.infer_type(p, ["float16", None, None])
    with pytest.raises(MXNetError, match=r"\(2, 3\)"):
        op.infer_shape(p, [(2, 3), None, None])
    op, p = oh.prepare("L2Normalization", {})
    assert p.mode == "instance" and p.eps == 1e-10 and op.num_outputs(p) == 2
    with pytest.raises(MXNetError, match="spatial"):
        op.infer_shape(oh.prepare("L2Normalization", dict(mode="spatial"))[1], [(2, 3)])
    op, p = oh.prepare("LRN", dict(nsize=3))
    assert (p.alpha, p.beta, p.knorm) == (1e-4, 0.75, 2.0)
    with pytest.raises(MXNetError, match="nsize"):
        oh.prepare("LRN", {})
    with pytest.raises(MXNetError, match="4-D"):
        op.infer_shape(p, [(2, 3, 4)])


def test_norm_float16():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4))
    g, b = np.ones(4), np.zeros(4)
    ref = oh.forward("LayerNorm", {}, [x, g, b])[0][0]
    out = oh.forward("LayerNorm", {}, [a.astype(np.float16) for a in (x, g, b)])[0][0]
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, ref, rtol=1e-2, atol=1e-2)
    out = oh.forward("L2Normalization", {}, [x.astype(np.float16)])[0][0]
    np.testing.assert_allclose(out, oh.forward("L2Normalization", {}, [x])[0][0], atol=1e-3)
    x4 = x.reshape(2, 3, 2, 2)
    out = oh.forward("LRN", dict(nsize=3), [x4.astype(np.float16)])[0][0]
    np.testing.assert_allclose(out, oh.forward("LRN", dict(nsize=3), [x4])[0][0], atol=2e-3)
