"""Pooling (and the resampling ops UpSampling / Pad / Crop): numpy references drawn by
hypothesis over kernels, strides, pads and conventions, numeric gradients, errors."""
import itertools
import math

import numpy as np
import ophelpers as oh
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lightmod.base import MXNetError


def _window(o, s, p, k, x):
    start = o * s - p
    end = min(start + k, x + p)
    return max(start, 0), min(end, x), end - start


def pool_ref(x, kernel, stride, pad, pool_type, convention="valid", include_pad=True, p=2):
    """MXNet's pooling written out per output element."""
    nd = x.ndim - 2
    out_sp = []
    for i in range(nd):
        span = x.shape[2 + i] + 2 * pad[i] - kernel[i]
        out_sp.append(span // stride[i] + 1 if convention == "valid"
                      else int(math.ceil(span / stride[i])) + 1)
    y = np.zeros(x.shape[:2] + tuple(out_sp))
    for o in itertools.product(*[range(n) for n in out_sp]):
        wins = [_window(o[i], stride[i], pad[i], kernel[i], x.shape[2 + i]) for i in range(nd)]
        sl = (slice(None), slice(None)) + tuple(slice(a, b) for a, b, _ in wins)
        block = x[sl].reshape(x.shape[0], x.shape[1], -1)
        if block.shape[2] == 0:
            # a 'full'-convention window past the data: MXNet gives the lowest float / 0
            v = np.finfo(x.dtype).min if pool_type == "max" else 0.0
        elif pool_type == "max":
            v = block.max(axis=2)
        elif pool_type == "sum":
            v = block.sum(axis=2)
        elif pool_type == "avg":
            count = np.prod([n for _, _, n in wins]) if include_pad else \
                np.prod([b - a for a, b, _ in wins])
            v = block.sum(axis=2) / count
        else:
            v = np.sign(s := (block ** p).sum(axis=2)) * np.abs(s) ** (1.0 / p)
        y[(slice(None), slice(None)) + o] = v
    return y


@st.composite
def pool_configs(draw):
    nd = draw(st.integers(1, 3))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    stride = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    pad = tuple(draw(st.integers(0, k - 1)) for k in kernel)
    spatial = tuple(max(draw(st.integers(1, 6 if nd < 3 else 4)), k - 2 * p)
                    for k, p in zip(kernel, pad))
    return dict(kernel=kernel, stride=stride, pad=pad, spatial=spatial,
                pool_type=draw(st.sampled_from(["max", "avg", "sum", "lp"])),
                convention=draw(st.sampled_from(["valid", "full"])),
                include_pad=draw(st.booleans()), p=draw(st.sampled_from([1, 2, 3])),
                n=draw(st.integers(1, 2)), c=draw(st.integers(1, 3)))


def _attrs(cfg):
    attrs = dict(kernel=cfg["kernel"], stride=cfg["stride"], pad=cfg["pad"],
                 pool_type=cfg["pool_type"], pooling_convention=cfg["convention"],
                 count_include_pad=cfg["include_pad"])
    if cfg["pool_type"] == "lp":
        attrs["p_value"] = cfg["p"]
    return attrs


@settings(max_examples=60, deadline=None)
@given(cfg=pool_configs(), seed=st.integers(0, 1000))
def test_pooling_forward_matches_numpy(cfg, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((cfg["n"], cfg["c"]) + cfg["spatial"])
    out = oh.forward("Pooling", _attrs(cfg), [x])[0][0]
    ref = pool_ref(x, cfg["kernel"], cfg["stride"], cfg["pad"], cfg["pool_type"],
                   cfg["convention"], cfg["include_pad"], cfg["p"])
    np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-10)


def _windows_all_touch_data(cfg):
    for x, k, s, p in zip(cfg["spatial"], cfg["kernel"], cfg["stride"], cfg["pad"]):
        span = x + 2 * p - k
        last = span // s if cfg["convention"] == "valid" else int(math.ceil(span / s))
        if last * s - p >= x:
            return False
    return True


@settings(max_examples=15, deadline=None)
@given(cfg=pool_configs(), seed=st.integers(0, 1000))
def test_pooling_gradients_match_numeric(cfg, seed):
    # windows lying wholly in the padding give constants (lowest float for max): no gradient
    assume(_windows_all_touch_data(cfg))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((cfg["n"], cfg["c"]) + cfg["spatial"])
    if cfg["pool_type"] == "lp":
        x = np.abs(x) + 0.5  # keep (sum x^p)^(1/p) away from its kink at 0
    oh.check_grad("Pooling", _attrs(cfg), [x], rtol=1e-5, atol=1e-7, seed=seed)


def test_max_pooling_backward_without_training_forward_matches_mask_path():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 6, 6))
    attrs = dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1))
    head = [rng.standard_normal((2, 3, 3, 3))]
    trained = oh.backward("Pooling", attrs, [x], head, is_train=True)[0]
    op, p = oh.prepare("Pooling", attrs)
    y = np.zeros((2, 3, 3, 3))
    state = {}
    from lightmod.kernels import cpu
    op.forward(p, cpu, [x], [y], False, state)
    dx = np.zeros_like(x)
    op.backward(p, cpu, head, [x], [y], [dx], ["write"], state)
    np.testing.assert_allclose(dx, trained)


def test_global_pooling_ignores_kernel_stride_and_pad():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4, 5))
    for pool_type, ref in (("avg", x.mean(axis=(2, 3))), ("max", x.max(axis=(2, 3))),
                           ("sum", x.sum(axis=(2, 3)))):
        out = oh.forward("Pooling", dict(global_pool=True, pool_type=pool_type, kernel=(2, 2),
                                         stride=(2, 2), pad=(1, 1)), [x])[0][0]
        assert out.shape == (2, 3, 1, 1)
        np.testing.assert_allclose(out[:, :, 0, 0], ref, rtol=1e-12)
    x3 = rng.standard_normal((1, 2, 3, 4, 5))
    out = oh.forward("Pooling", dict(global_pool=True, pool_type="avg"), [x3])[0][0]
    np.testing.assert_allclose(out.reshape(1, 2), x3.mean(axis=(2, 3, 4)), rtol=1e-12)


def test_same_convention_1d():
    x = np.arange(1.0, 8.0).reshape(1, 1, 7)
    out = oh.forward("Pooling", dict(kernel=(3,), stride=(2,), pooling_convention="same"),
                     [x])[0][0]
    # ceil(7 / 2) = 4 windows; total padding (4 - 1) * 2 + 3 - 7 = 2, one in front
    assert out.shape == (1, 1, 4)
    np.testing.assert_allclose(out.ravel(), [2, 4, 6, 7])
    oh.check_grad("Pooling", dict(kernel=(3,), stride=(2,), pooling_convention="same",
                                  pool_type="avg"), [x + np.linspace(0, 1, 7)])


def test_pooling_float16_and_float32():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 6, 6))
    for pool_type in ("max", "avg"):
        ref = pool_ref(x, (2, 2), (2, 2), (0, 0), pool_type)
        for dtype, tol in ((np.float32, 1e-6), (np.float16, 2e-3)):
            out = oh.forward("Pooling", dict(kernel=(2, 2), stride=(2, 2), pool_type=pool_type),
                             [x.astype(dtype)])[0][0]
            assert out.dtype == dtype
            np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)
            g = oh.backward("Pooling", dict(kernel=(2, 2), stride=(2, 2), pool_type=pool_type),
                            [x.astype(dtype)], [np.ones(out.shape, dtype)])[0]
            assert g.dtype == dtype
            np.testing.assert_allclose(g.astype(np.float64).sum(), out.size, rtol=1e-3)


def test_pooling_grad_req_add():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 5, 5))
    attrs = dict(kernel=(3, 3), stride=(2, 2), pool_type="avg")
    head = [rng.standard_normal((1, 2, 2, 2))]
    base = oh.backward("Pooling", attrs, [x], head)[0]
    init = rng.standard_normal(x.shape)
    added = oh.backward("Pooling", attrs, [x], head, req=["add"], init_grads=[init])[0]
    np.testing.assert_allclose(added, base + init, rtol=1e-12)


@pytest.mark.parametrize("attrs, data, words", [
    (dict(kernel=(10, 10), pool_type="avg"), (1, 3, 8, 9), ["kernel", "(1, 3, 8, 9)"]),
    (dict(kernel=(2,)), (1, 3, 8, 9), ["kernel", "(1, 3, 8, 9)"]),
    (dict(kernel=(2, 2)), (3, 8), ["data", "(3, 8)"]),
    (dict(kernel=(2, 2), layout="NHWC"), (1, 3, 8, 9), ["layout", "NHWC"]),
    (dict(kernel=(2, 2), layout="NCW"), (1, 3, 8, 9), ["layout", "NCW"]),
    (dict(kernel=(2, 2), pooling_convention="same"), (1, 3, 8, 9), ["same", "(1, 3, 8, 9)"]),
])
def test_pooling_shape_errors(attrs, data, words):
    op, p = oh.prepare("Pooling", attrs)
    with pytest.raises(MXNetError) as err:
        op.infer_shape(p, [data])
    assert "Pooling" in str(err.value)
    for word in words:
        assert word in str(err.value), str(err.value)


@pytest.mark.parametrize("attrs, word", [
    (dict(pool_type="avg"), "kernel"),
    (dict(kernel=(2, 2), pool_type="lp"), "p_value"),
    (dict(kernel=(2, 2), stride=(2,)), "stride"),
    (dict(kernel=(3,), pad=(1,), pooling_convention="same"), "pad"),
    (dict(kernel=(2, 2), pool_type="median"), "pool_type"),
])
def test_pooling_bad_attributes(attrs, word):
    with pytest.raises(MXNetError, match=word):
        oh.prepare("Pooling", attrs)


def test_pooling_declaration_defaults():
    op, p = oh.prepare("Pooling", dict(kernel=(2, 2)))
    assert p.pool_type == "max" and p.pooling_convention == "valid" and p.global_pool is False
    assert p.count_include_pad is None and p.p_value is None
    assert list(op.params) == ["kernel", "pool_type", "global_pool", "cudnn_off",
                               "pooling_convention", "stride", "pad", "p_value",
                               "count_include_pad", "layout"]
    # global pooling needs no kernel; partial shapes stay partial
    op, p = oh.prepare("Pooling", dict(global_pool=True))
    assert op.infer_shape(p, [(0, 3, 5, 5)])[1] == [(0, 3, 1, 1)]


# ---------------------------------------------------------------------------------------------
# UpSampling, Pad, Crop
# ---------------------------------------------------------------------------------------------
@settings(max_examples=10, deadline=None)
@given(scale=st.integers(1, 3), mode=st.sampled_from(["concat", "sum"]), seed=st.integers(0, 99))
def test_upsampling_nearest(scale, mode, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((2, 2, 2, 3))
    b = rng.standard_normal((2, 2 if mode == "sum" else 1, 2 * scale, 3 * scale))
    attrs = dict(scale=scale, sample_type="nearest", num_args=2, multi_input_mode=mode)
    out = oh.forward("UpSampling", attrs, [a, b])[0][0]
    up = a.repeat(scale, 2).repeat(scale, 3)
    ref = up + b if mode == "sum" else np.concatenate([up, b], axis=1)
    np.testing.assert_allclose(out, ref)
    oh.check_grad("UpSampling", attrs, [a, b])


def test_upsampling_bilinear_declares_a_weight_and_runs_as_deconvolution():
    op, p = oh.prepare("UpSampling", dict(scale=2, sample_type="bilinear", num_filter=3,
                                          num_args=1))
    assert op.list_inputs(p) == ["data", "weight"]
    ins, outs = op.infer_shape(p, [(1, 3, 4, 4), None])
    assert ins[1] == (3, 1, 4, 4) and outs == [(1, 3, 8, 8)]
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((1, 3, 4, 4)), rng.standard_normal((3, 1, 4, 4))
    out = oh.forward("UpSampling", dict(scale=2, sample_type="bilinear", num_filter=3,
                                        num_args=1), [x, w])[0][0]
    ref = oh.forward("Deconvolution", dict(kernel=(4, 4), stride=(2, 2), pad=(1, 1),
                                           num_filter=3, num_group=3), [x, w])[0][0]
    np.testing.assert_allclose(out, ref)


def test_upsampling_errors():
    op, p = oh.prepare("UpSampling", dict(scale=2, sample_type="nearest", num_args=2,
                                          multi_input_mode="sum"))
    with pytest.raises(MXNetError, match="channels"):
        op.infer_shape(p, [(1, 3, 4, 4), (1, 2, 4, 4)])
    with pytest.raises(MXNetError, match="divide"):
        op.infer_shape(p, [(1, 3, 4, 4), (1, 3, 3, 3)])
    with pytest.raises(MXNetError, match="num_filter"):
        oh.prepare("UpSampling", dict(scale=2, sample_type="bilinear", num_args=1))


@settings(max_examples=15, deadline=None)
@given(mode=st.sampled_from(["constant", "edge", "reflect"]), ndim=st.sampled_from([4, 5]),
       seed=st.integers(0, 999), data=st.data())
def test_pad_matches_numpy(mode, ndim, seed, data):
    rng = np.random.default_rng(seed)
    shape = (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))) + tuple(
        data.draw(st.integers(2, 4)) for _ in range(ndim - 2))
    pads = [(0, 0), (0, 0)] + [(data.draw(st.integers(0, s - 1)), data.draw(st.integers(0, s - 1)))
                               for s in shape[2:]]
    x = rng.standard_normal(shape)
    attrs = dict(mode=mode, pad_width=tuple(v for pr in pads for v in pr), constant_value=0.25)
    out = oh.forward("Pad", attrs, [x])[0][0]
    kw = {"constant_values": 0.25} if mode == "constant" else {}
    np.testing.assert_allclose(out, np.pad(x, pads, mode=mode, **kw))
    oh.check_grad("Pad", attrs, [x])


@pytest.mark.parametrize("attrs, shape, word", [
    (dict(mode="constant", pad_width=(0, 0, 0, 0, 1, 1)), (1, 3, 2), "4-D or 5-D"),
    (dict(mode="constant", pad_width=(1, 0, 0, 0, 1, 1, 1, 1)), (1, 3, 2, 2), "first two"),
    (dict(mode="reflect", pad_width=(0, 0, 0, 0, 2, 2, 1, 1)), (1, 3, 2, 2), "smaller"),
    (dict(mode="edge", pad_width=(0, 0, 1, 1)), (1, 3, 2, 2), "pad_width"),
])
def test_pad_errors(attrs, shape, word):
    op, p = oh.prepare("Pad", attrs)
    with pytest.raises(MXNetError, match=word):
        op.infer_shape(p, [shape])


def test_crop():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 5, 6))
    out = oh.forward("Crop", dict(num_args=1, h_w=(2, 3), offset=(1, 2)), [x])[0][0]
    np.testing.assert_allclose(out, x[:, :, 1:3, 2:5])
    like = np.zeros((1, 1, 3, 2))
    out = oh.forward("Crop", dict(num_args=2, center_crop=True), [x, like])[0][0]
    np.testing.assert_allclose(out, x[:, :, 1:4, 2:4])
    grads = oh.backward("Crop", dict(num_args=2, offset=(2, 1)), [x, like],
                        [np.ones((2, 3, 3, 2))])
    expect = np.zeros_like(x)
    expect[:, :, 2:5, 1:3] = 1
    np.testing.assert_allclose(grads[0], expect)
    assert not grads[1].any()
    op, p = oh.prepare("Crop", dict(num_args=1, h_w=(6, 3)))
    with pytest.raises(MXNetError, match="exceeds"):
        op.infer_shape(p, [(1, 3, 5, 5)])
    op, p = oh.prepare("Crop", dict(num_args=1, h_w=(2, 3), offset=(4, 0)))
    with pytest.raises(MXNetError, match="offset"):
        op.infer_shape(p, [(1, 3, 5, 5)])
    assert oh.prepare("Crop", dict(num_args=2))[0].list_inputs(oh.prepare(
        "Crop", dict(num_args=2))[1]) == ["data", "crop_like"]
