"""The channel-last CPU convolution kernels of the inference plan (kernels/cpu/conv.py):
``conv_rows_last`` (patches, product and epilogue of whole images split between threads) and
``channel_last_pool`` (global pooling of channel-last data), against numpy."""
import numpy as np
import pytest

from lightmod.kernels import cpu as k
from lightmod.kernels.scalar_nn import ACTIVATIONS
from lightmod.operator.conv import geometry3


def _conv_nchw(x, w, pad, stride):
    """Plain numpy convolution (n, C, H, W) x (F, C, KH, KW) -> (n, F, OH, OW)."""
    n, c, h, wd = x.shape
    f, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, f, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            out += np.einsum("nchw,fc->nfhw", patch, w[:, :, i, j])
    return out


@pytest.mark.parametrize("parts,chunk", [(1, 5), (2, 1), (2, 2), (3, 2)])
@pytest.mark.parametrize("channels,pad,stride", [(3, 1, 1), (8, 0, 2), (1, 1, 1)])
def test_conv_rows_last_matches_numpy(parts, chunk, channels, pad, stride):
    rng = np.random.RandomState(parts * 10 + chunk)
    n, h, wd, f = 5, 6, 7, 4
    x = rng.uniform(-1, 1, (n, channels, h, wd)).astype(np.float32)
    w = rng.uniform(-1, 1, (f, channels, 3, 3)).astype(np.float32)
    scale = rng.uniform(0.5, 2, f).astype(np.float32)
    shift = rng.uniform(-1, 1, f).astype(np.float32)
    want = _conv_nchw(x, w, pad, stride)
    oh, ow = want.shape[2:]
    want = np.maximum(want * scale[:, None, None] + shift[:, None, None], 0)
    xt = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    wt = np.ascontiguousarray(w.transpose(0, 2, 3, 1)).reshape(f, -1)
    y = np.full((n * oh * ow, f), np.nan, np.float32)
    rows = np.empty((parts, chunk * oh * ow, 9 * channels), np.float32)
    g = geometry3((3, 3), (stride, stride), (pad, pad), (1, 1), (oh, ow))
    k.conv_rows_last(xt, wt, y, rows, (n, channels, 1, h, wd), g, chunk, scale, shift,
                     ACTIVATIONS["relu"])
    got = y.reshape(n, oh, ow, f).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_conv_rows_last_without_epilogue():
    rng = np.random.RandomState(3)
    x = rng.uniform(-1, 1, (4, 2, 5, 5)).astype(np.float32)
    w = rng.uniform(-1, 1, (3, 2, 3, 3)).astype(np.float32)
    want = _conv_nchw(x, w, 0, 1)
    y = np.empty((4 * 9, 3), np.float32)
    rows = np.empty((2, 2 * 9, 18), np.float32)
    k.conv_rows_last(np.ascontiguousarray(x.transpose(0, 2, 3, 1)),
                     np.ascontiguousarray(w.transpose(0, 2, 3, 1)).reshape(3, -1), y, rows,
                     (4, 2, 1, 5, 5), geometry3((3, 3), (1, 1), (0, 0), (1, 1), (3, 3)), 2)
    np.testing.assert_allclose(y.reshape(4, 3, 3, 3).transpose(0, 3, 1, 2), want, rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("pool_type", ["max", "avg", "sum"])
@pytest.mark.parametrize("shape", [(3, 7, 5), (64, 300, 16), (2, 1, 3)])
def test_channel_last_pool_matches_numpy(pool_type, shape):
    src = np.random.RandomState(4).uniform(-3, 3, shape).astype(np.float32)
    out = np.full((shape[0], shape[2]), np.nan, np.float32)
    k.channel_last_pool(src, out, pool_type)
    want = {"max": src.max(axis=1), "avg": src.mean(axis=1), "sum": src.sum(axis=1)}[pool_type]
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
