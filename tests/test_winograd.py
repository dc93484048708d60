"""Winograd F(2x2, 3x3) convolution of channel-last data (kernels/cpu/winograd.py) against a
float64 numpy convolution: drawn sizes (odd outputs: the last tiles are cut), paddings 0-2,
channel counts including 1-3, thread parts and chunks, epilogues; and the Convolution
operator's use of it (forward alone, channel-last in and out, then backward)."""
import numpy as np
import ophelpers as oh
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmod.kernels import cpu as k
from lightmod.kernels.scalar_nn import ACTIVATIONS
from lightmod.operator import conv as conv_op


def _conv_ref(x, w, pad):
    """(n, C, H, W) x (F, C, 3, 3), stride 1, zero padding pad = (ph, pw), in float64."""
    n, _, h, wd = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad[0],) * 2, (pad[1],) * 2))
    oh_, ow = h + 2 * pad[0] - 2, wd + 2 * pad[1] - 2
    out = np.zeros((n, w.shape[0], oh_, ow))
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,fc->nfhw", xp[:, :, i:i + oh_, j:j + ow],
                             w[:, :, i, j].astype(np.float64))
    return out


def _run(x, w, pad, parts, chunk, scale=None, shift=None, act=-1):
    n, c, h, wd = x.shape
    f = w.shape[0]
    dims = (n, c, h, wd)
    u = np.empty((16, c, f), x.dtype)
    k.winograd_weights(w, u)
    v_shape, m_shape = k.winograd_scratch_shapes(dims, f, pad, parts, chunk)
    v = np.full(v_shape, np.nan, x.dtype)
    mm = np.full(m_shape, np.nan, x.dtype)
    oh_, ow = h + 2 * pad[0] - 2, wd + 2 * pad[1] - 2
    y = np.full((n * oh_ * ow, f), np.nan, x.dtype)
    k.winograd_conv_last(np.ascontiguousarray(x.transpose(0, 2, 3, 1)), u, y, v, mm, dims, pad,
                         chunk, scale, shift, act)
    return y.reshape(n, oh_, ow, f).transpose(0, 3, 1, 2)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 5), c=st.integers(1, 20), f=st.integers(1, 20), h=st.integers(1, 9),
       wd=st.integers(1, 9), ph=st.integers(0, 2), pw=st.integers(0, 2), parts=st.integers(1, 3),
       chunk=st.integers(1, 3), epilogue=st.sampled_from([None, "relu", "tanh", "shift"]),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 1000))
def test_winograd_matches_numpy(n, c, f, h, wd, ph, pw, parts, chunk, epilogue, dtype, seed):
    if h + 2 * ph < 3 or wd + 2 * pw < 3:
        h, wd = h + 2, wd + 2           # the kernel must fit the padded input
    parts = min(parts, n)
    rng = np.random.RandomState(seed)
    x = rng.uniform(-1, 1, (n, c, h, wd)).astype(dtype)
    w = rng.uniform(-1, 1, (f, c, 3, 3)).astype(dtype)
    want = _conv_ref(x, w, (ph, pw))
    scale = shift = None
    act = -1
    if epilogue is not None:
        scale = rng.uniform(-2, 2, f).astype(dtype) if epilogue != "shift" else None
        shift = rng.uniform(-1, 1, f).astype(dtype)
        want = want * (1 if scale is None else scale[:, None, None]) + shift[:, None, None]
        if epilogue in ("relu", "tanh"):
            act = ACTIVATIONS[epilogue]
            want = np.maximum(want, 0) if epilogue == "relu" else np.tanh(want)
    got = _run(x, w, (ph, pw), parts, -(-n // parts) if chunk == 3 else chunk, scale, shift, act)
    tol = 2e-5 * np.sqrt(9 * c) if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def _op_inputs(rng, n, c, f, size):
    x = rng.standard_normal((n, c, size, size)).astype(np.float32)
    w = (rng.standard_normal((f, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    b = rng.standard_normal(f).astype(np.float32)
    return x, w, b


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("c,f,size,pad", [(16, 16, 8, 1), (32, 24, 7, 0), (20, 32, 5, 2)])
def test_convolution_operator_uses_winograd_and_matches_numpy(threads, c, f, size, pad,
                                                              monkeypatch):
    monkeypatch.setenv("LIGHTMOD_NUM_THREADS", str(threads))
    rng = np.random.default_rng(c + f + size)
    x, w, b = _op_inputs(rng, 3, c, f, size)
    attrs = dict(kernel=(3, 3), pad=(pad, pad), num_filter=f)
    outs, state, _, _ = oh.forward("Convolution", attrs, [x, w, b])
    assert state["plan"].winograd and "winograd_u" in state
    want = _conv_ref(x, w, (pad, pad)) + b[:, None, None]
    np.testing.assert_allclose(outs[0], want, rtol=1e-4, atol=1e-4)
    # backward after a Winograd forward: the patch-row gradients, against numpy's
    head = rng.standard_normal(outs[0].shape).astype(np.float32)
    dx, dw, db = oh.backward("Convolution", attrs, [x, w, b], [head])
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    dxp = np.zeros_like(xp)
    want_dw = np.zeros(w.shape)
    o = outs[0].shape[2]
    for i in range(3):
        for j in range(3):
            want_dw[:, :, i, j] = np.einsum("nfhw,nchw->fc", head, xp[:, :, i:i + o, j:j + o])
            dxp[:, :, i:i + o, j:j + o] += np.einsum("nfhw,fc->nchw", head, w[:, :, i, j])
    np.testing.assert_allclose(dw, want_dw, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(dx, dxp[:, :, pad:pad + size, pad:pad + size], rtol=1e-4,
                               atol=1e-4)
    np.testing.assert_allclose(db, head.sum(axis=(0, 2, 3)), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("y_last", [False, True])
@pytest.mark.parametrize("x_last", [False, True])
def test_forward_epilogue_channel_last_with_winograd(x_last, y_last):
    rng = np.random.default_rng(5)
    x, w, b = _op_inputs(rng, 4, 16, 16, 6)
    op, p = oh.prepare("Convolution", dict(kernel=(3, 3), pad=(1, 1), num_filter=16))
    scale = rng.uniform(0.5, 1.5, 16).astype(np.float32)
    want = np.maximum(_conv_ref(x, w, (1, 1)) * scale[:, None, None] + b[:, None, None], 0)
    xin = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).reshape(x.shape) if x_last else x
    y = np.full(want.shape, np.nan, np.float32)
    state = {}
    op.forward_epilogue(p, k, xin, w, scale, b, ACTIVATIONS["relu"], y, state, x_last, y_last)
    assert state["plan"].winograd
    got = y.reshape(4, 6, 6, 16).transpose(0, 3, 1, 2) if y_last else y
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_winograd_only_for_3x3_stride_1_and_enough_channels():
    def plan(c=16, **attrs):
        op, p = oh.prepare("Convolution", dict(dict(kernel=(3, 3), num_filter=16), **attrs))
        return op._plan(p, (2, c, 8, 8), {})

    assert plan().winograd
    assert not plan(stride=(2, 2)).winograd
    assert not plan(dilate=(2, 2)).winograd
    assert not plan(kernel=(5, 5)).winograd
    assert not plan(num_filter=8).winograd
    assert not plan(c=8).winograd
    assert not plan(num_group=2).winograd
    assert conv_op.WINOGRAD_MIN_CHANNELS == 16


def _data_grad_ref(dy, w, pad, size):
    """The data gradient of a 3x3 stride-1 convolution at padding pad, in float64."""
    n, _, o_h, o_w = dy.shape
    dxp = np.zeros((n, w.shape[1], size[0] + 2 * pad[0], size[1] + 2 * pad[1]))
    for i in range(3):
        for j in range(3):
            dxp[:, :, i:i + o_h, j:j + o_w] += np.einsum("nfhw,fc->nchw", dy, w[:, :, i, j])
    return dxp[:, :, pad[0]:pad[0] + size[0], pad[1]:pad[1] + size[1]]


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 4), c=st.integers(1, 20), f=st.integers(1, 20), h=st.integers(3, 9),
       wd=st.integers(3, 9), ph=st.integers(0, 2), pw=st.integers(0, 2), parts=st.integers(1, 2),
       seed=st.integers(0, 1000))
def test_flipped_weights_give_the_data_gradient(n, c, f, h, wd, ph, pw, parts, seed):
    rng = np.random.RandomState(seed)
    oh_, ow = h + 2 * ph - 2, wd + 2 * pw - 2
    dy = rng.uniform(-1, 1, (n, f, oh_, ow))
    w = rng.uniform(-1, 1, (f, c, 3, 3))
    u = np.empty((16, f, c))
    k.winograd_weights(w, u, flip=True)
    dims = (n, f, oh_, ow)
    pad = (2 - ph, 2 - pw)
    parts = min(parts, n)
    chunk = k.winograd_chunk(dims, pad, parts)
    v_shape, m_shape = k.winograd_scratch_shapes(dims, c, pad, parts, chunk)
    dxt = np.full((n * h * wd, c), np.nan)
    k.winograd_conv_last(np.ascontiguousarray(dy.transpose(0, 2, 3, 1)), u, dxt,
                         np.empty(v_shape), np.empty(m_shape), dims, pad, chunk)
    np.testing.assert_allclose(dxt.reshape(n, h, wd, c).transpose(0, 3, 1, 2),
                               _data_grad_ref(dy, w, (ph, pw), (h, wd)), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("size,pad", [(6, 1), (1, 1), (4, 0)])
def test_winograd_data_gradient_add_and_in_place(size, pad):
    """req 'add' adds the Winograd data gradient; a 1x1 image (channel-last is the same
    memory) takes the patch-row path for 'add' and Winograd for 'write'."""
    rng = np.random.default_rng(size)
    x, w, b = _op_inputs(rng, 2, 16, 16, size)
    attrs = dict(kernel=(3, 3), pad=(pad, pad), num_filter=16)
    o = size + 2 * pad - 2
    head = rng.standard_normal((2, 16, o, o)).astype(np.float32)
    init = [rng.standard_normal(a.shape).astype(np.float32) for a in (x, w, b)]
    want = _data_grad_ref(head.astype(np.float64), w.astype(np.float64), (pad, pad),
                          (size, size))
    dx, _, _ = oh.backward("Convolution", attrs, [x, w, b], [head])
    np.testing.assert_allclose(dx, want, rtol=1e-4, atol=1e-4)
    dx_add, _, _ = oh.backward("Convolution", attrs, [x, w, b], [head], req=["add"] * 3,
                               init_grads=init)
    np.testing.assert_allclose(dx_add, want + init[0], rtol=1e-4, atol=1e-4)
