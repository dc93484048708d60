"""The CPU fast path of 2x2 / stride-2 pooling (kernels/cpu/pooling.py, ``_pool22_*``) against
numpy and against the general kernel, forward and backward, with tied maxima, odd sizes (a row
or column no window covers), 3-D pooling with a depth window of 1, accumulation and threads."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmod.kernels.cpu import pooling as P
from lightmod.kernels.scalar_conv import POOL_TYPES


def _ref(x, ptype):
    """(y, the index inside each window of the first maximum) of x (P, D, H, W)."""
    OH, OW = x.shape[2] // 2, x.shape[3] // 2
    win = x[:, :, :2 * OH, :2 * OW].reshape(x.shape[:2] + (OH, 2, OW, 2))
    win = win.transpose(0, 1, 2, 4, 3, 5).reshape(x.shape[:2] + (OH, OW, 4))
    if ptype == "max":
        return win.max(axis=-1), win.argmax(axis=-1)
    s = win.astype(np.float64).sum(axis=-1)
    return (s / 4 if ptype == "avg" else s), None


def _ref_backward(x, dy, ptype):
    OH, OW = dy.shape[2], dy.shape[3]
    _, arg = _ref(x, ptype)
    share = np.zeros(dy.shape + (4,))
    if ptype == "max":
        np.put_along_axis(share, arg[..., None], dy[..., None], axis=-1)
    else:
        share[:] = (dy / 4 if ptype == "avg" else dy)[..., None]
    dx = np.zeros(x.shape)
    blocks = share.reshape(dy.shape + (2, 2)).transpose(0, 1, 2, 4, 3, 5)
    dx[:, :, :2 * OH, :2 * OW] = blocks.reshape(x.shape[:2] + (2 * OH, 2 * OW))
    return dx


def _geometry(D, H, W, kd):
    dims = (D, H, W, D, H // 2, W // 2)
    geo = (kd, 2, 2, 1, 2, 2, 0, 0, 0)
    return dims, geo


@settings(max_examples=60, deadline=None)
@given(planes=st.integers(1, 40), D=st.integers(1, 3), H=st.integers(2, 11),
       W=st.integers(2, 11), ptype=st.sampled_from(["max", "avg", "sum"]),
       ties=st.booleans(), accumulate=st.booleans(), seed=st.integers(0, 1000),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_pool22_matches_numpy(planes, D, H, W, ptype, ties, accumulate, seed, dtype):
    rng = np.random.RandomState(seed)
    x = rng.uniform(-1, 1, (planes, D, H, W))
    if ties:
        x = np.round(x * 2) / 2      # few distinct values: many windows with tied maxima
    x = x.astype(dtype)
    dims, geo = _geometry(D, H, W, 1)
    assert P._pairs_dims(dims, geo, POOL_TYPES[ptype]) is not None
    y = np.empty((planes, D * (H // 2) * (W // 2)), dtype)
    assert not P.pool_forward(x.reshape(planes, -1), y, None, dims, geo, POOL_TYPES[ptype],
                              True, 1)
    x4 = x.reshape(planes * D, 1, H, W)
    want, _ = _ref(x4, ptype)
    tol = dict(rtol=1e-6, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12)
    np.testing.assert_allclose(y.reshape(want.shape), want, **tol)
    dy = rng.uniform(-1, 1, y.shape).astype(dtype)
    start = rng.uniform(-1, 1, x.shape).astype(dtype)
    dx = start.reshape(planes, -1).copy()
    P.pool_backward(x.reshape(planes, -1), y, dy, dx, None, dims, geo, POOL_TYPES[ptype], True,
                    1, accumulate=accumulate)
    expect = _ref_backward(x4, dy.reshape(want.shape), ptype).reshape(x.shape)
    if accumulate:
        expect = expect + start
    np.testing.assert_allclose(dx.reshape(x.shape), expect, **tol)


@pytest.mark.parametrize("ptype", ["max", "avg", "sum"])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_pool22_equals_general_kernel_bit_for_bit(ptype, threads, monkeypatch):
    """The fast path gives the general kernel's bits (its order of operations), with the
    planes split over threads or not."""
    monkeypatch.setenv("LIGHTMOD_NUM_THREADS", str(threads))
    rng = np.random.RandomState(threads)
    planes, H, W = 640, 24, 25
    x = (np.round(rng.uniform(-4, 4, (planes, H * W))) / 3).astype(np.float32)
    dims, geo = _geometry(1, H, W, 1)
    code = POOL_TYPES[ptype]
    y = np.empty((planes, 12 * 12), np.float32)
    P.pool_forward(x, y, None, dims, geo, code, True, 1)
    y_general = np.empty_like(y)
    P._pool_planes(x.reshape(-1), y_general.reshape(-1), P._NO_MASK, dims, geo, code, True, 1,
                   False, np.float32(np.finfo(np.float32).min), True, 0, planes)
    assert np.array_equal(y, y_general)
    dy = rng.uniform(-1, 1, y.shape).astype(np.float32)
    dx = np.full_like(x, np.nan)
    P.pool_backward(x, y, dy, dx, None, dims, geo, code, True, 1)
    dx_general = np.empty_like(x)
    P._unpool_planes(x.reshape(-1), y.reshape(-1), dy.reshape(-1), dx_general.reshape(-1),
                     P._NO_MASK, dims, geo, code, True, 1, False, True, False, 0, planes)
    assert np.array_equal(dx, dx_general)


def test_pool22_depth_window_stays_general():
    """A 2x2x2 window is not the pairs case (the depth window is not 1)."""
    dims, geo = _geometry(4, 6, 6, 2)
    dims = (4, 6, 6, 2, 3, 3)
    geo = (2, 2, 2, 2, 2, 2, 0, 0, 0)
    assert P._pairs_dims(dims, geo, POOL_TYPES["max"]) is None
    assert P._pairs_dims((1, 6, 6, 1, 3, 3), (1, 2, 2, 1, 2, 2, 0, 1, 1),
                         POOL_TYPES["max"]) is None
    assert P._pairs_dims((1, 6, 6, 1, 3, 3), (1, 2, 2, 1, 2, 2, 0, 0, 0),
                         POOL_TYPES["lp"]) is None
