"""Spatial operators against numpy references written from their definitions, numeric
gradients, write/add requests and bad inputs (MXNet's own values: test_op_spatial_golden.py)."""
import numpy as np
import ophelpers as oh
import pytest

import lightmod as mx
from lightmod.base import MXNetError


# --- references -----------------------------------------------------------------------------
def resize_matrix(n_in, n_out, align_corners):
    """(n_out, n_in) matrix of 1-D linear interpolation weights."""
    m = np.zeros((n_out, n_in))
    for o in range(n_out):
        if align_corners:
            pos = o * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        else:
            pos = max((o + 0.5) * n_in / n_out - 0.5, 0.0)
        lo = min(int(np.floor(pos)), n_in - 1)
        hi = min(lo + 1, n_in - 1)
        m[o, lo] += 1 - (pos - lo)
        m[o, hi] += pos - lo
    return m


def resize(x, oh_, ow, align_corners):
    rows = resize_matrix(x.shape[2], oh_, align_corners)
    cols = resize_matrix(x.shape[3], ow, align_corners)
    return np.einsum("ri,ncij,sj->ncrs", rows, x, cols)


def adaptive_pool(x, oh_, ow):
    n, c, h, w = x.shape
    out = np.empty((n, c, oh_, ow))
    for i in range(oh_):
        r0, r1 = (i * h) // oh_, -(-((i + 1) * h) // oh_)
        for j in range(ow):
            c0, c1 = (j * w) // ow, -(-((j + 1) * w) // ow)
            out[:, :, i, j] = x[:, :, r0:r1, c0:c1].mean(axis=(2, 3))
    return out


def affine_grid(theta, h, w):
    ys, xs = np.meshgrid(np.linspace(-1, 1, h), np.linspace(-1, 1, w), indexing="ij")
    coords = np.stack([xs.ravel(), ys.ravel(), np.ones(h * w)])     # (3, h*w)
    return (theta.reshape(-1, 2, 3) @ coords).reshape(-1, 2, h, w)


def sample(x, grid):
    """Bilinear sampling with zero padding, pixel by pixel."""
    n, c, h, w = x.shape
    out = np.zeros((n, c) + grid.shape[2:])
    for s in range(n):
        for r in range(grid.shape[2]):
            for q in range(grid.shape[3]):
                px = (grid[s, 0, r, q] + 1) * (w - 1) / 2
                py = (grid[s, 1, r, q] + 1) * (h - 1) / 2
                x0, y0 = int(np.floor(px)), int(np.floor(py))
                for yy in (y0, y0 + 1):
                    for xx in (x0, x0 + 1):
                        if 0 <= yy < h and 0 <= xx < w:
                            weight = (1 - abs(px - xx)) * (1 - abs(py - yy))
                            out[s, :, r, q] += weight * x[s, :, yy, xx]
    return out


def correlate(a, b, k, md, s1, s2, pad, multiply):
    n, c, h, w = a.shape
    pa = np.pad(a, ((0, 0), (0, 0), (pad, pad + k + md), (pad, pad + k + md)))
    pb = np.pad(b, ((0, 0), (0, 0), (pad + md, pad + k + 2 * md), (pad + md, pad + k + 2 * md)))
    border = md + (k - 1) // 2
    th = -(-(h + 2 * pad - 2 * border) // s1)
    tw = -(-(w + 2 * pad - 2 * border) // s1)
    r = md // s2
    shifts = [(dy * s2, dx * s2) for dy in range(-r, r + 1) for dx in range(-r, r + 1)]
    out = np.zeros((n, len(shifts), th, tw))
    for t, (dy, dx) in enumerate(shifts):
        for i in range(th):
            for j in range(tw):
                y, x = i * s1 + md, j * s1 + md
                wa = pa[:, :, y:y + k, x:x + k]
                wb = pb[:, :, y + md + dy:y + md + dy + k, x + md + dx:x + md + dx + k]
                term = wa * wb if multiply else np.abs(wa - wb)
                out[:, t, i, j] = term.sum(axis=(1, 2, 3)) / (k * k * c)
    return out


# --- BilinearResize2D ---------------------------------------------------------------------------
@pytest.mark.parametrize("align_corners", [True, False])
@pytest.mark.parametrize("size", [(7, 3), (2, 9), (1, 1), (4, 5)])
def test_bilinear_resize(align_corners, size):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2, 4, 5))
    attrs = {"height": size[0], "width": size[1], "align_corners": align_corners}
    out = oh.forward("_contrib_BilinearResize2D", attrs, [x])[0][0]
    np.testing.assert_allclose(out, resize(x, size[0], size[1], align_corners), atol=1e-12)
    oh.check_grad("_contrib_BilinearResize2D", attrs, [x])


@pytest.mark.parametrize("mode,expected", [("to_even_down", (4, 4)), ("to_even_up", (4, 6)),
                                           ("to_odd_down", (3, 5)), ("to_odd_up", (5, 5))])
def test_bilinear_resize_parity_modes(mode, expected):
    y = mx.nd.contrib.BilinearResize2D(mx.nd.ones((1, 1, 4, 5)), mode=mode)
    assert y.shape == (1, 1) + expected
    np.testing.assert_allclose(y.asnumpy(), 1.0, rtol=1e-6)


def test_bilinear_resize_like_input_gets_zero_gradient():
    rng = np.random.default_rng(1)
    x, like = rng.standard_normal((1, 2, 3, 4)), rng.standard_normal((1, 1, 5, 2))
    sym = mx.sym.contrib.BilinearResize2D(mx.sym.var("x"), mx.sym.var("like"), mode="like")
    assert sym.list_arguments() == ["x", "like"]
    g = oh.backward("_contrib_BilinearResize2D", {"mode": "like"}, [x, like],
                    [np.ones((1, 2, 5, 2))])
    np.testing.assert_array_equal(g[1], np.zeros_like(like))
    np.testing.assert_allclose(g[0].sum(), 20.0)      # every output spreads weight 1


def test_bilinear_resize_bad_inputs():
    with pytest.raises(MXNetError, match="BilinearResize2D: mode 'odd_scale' needs scale_height"):
        mx.nd.contrib.BilinearResize2D(mx.nd.ones((1, 1, 4, 4)), mode="odd_scale")
    with pytest.raises(MXNetError, match=r"input 'data' has shape \(4, 4\): expected 4-D"):
        mx.nd.contrib.BilinearResize2D(mx.nd.ones((4, 4)), height=2, width=2)
    with pytest.raises(MXNetError, match=r"output size \(0, 2\)"):
        mx.nd.contrib.BilinearResize2D(mx.nd.ones((1, 1, 4, 4)), scale_height=0.1,
                                       scale_width=0.5)


# --- AdaptiveAvgPooling2D -----------------------------------------------------------------------
@pytest.mark.parametrize("size,expected", [((3, 2), (3, 2)), (4, (4, 4)), ((), (1, 1)),
                                           ((7, 5), (7, 5))])
def test_adaptive_avg_pool(size, expected):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 7, 5))
    attrs = {"output_size": size}
    out = oh.forward("_contrib_AdaptiveAvgPooling2D", attrs, [x])[0][0]
    np.testing.assert_allclose(out, adaptive_pool(x, *expected), atol=1e-12)
    oh.check_grad("_contrib_AdaptiveAvgPooling2D", attrs, [x])


def test_adaptive_avg_pool_bad_size():
    with pytest.raises(MXNetError, match=r"output_size \(1, 2, 3\) must be"):
        mx.nd.contrib.AdaptiveAvgPooling2D(mx.nd.ones((1, 1, 4, 4)), output_size=(1, 2, 3))


# --- GridGenerator, BilinearSampler, SpatialTransformer -----------------------------------------
def test_grid_generator_affine_and_warp():
    rng = np.random.default_rng(3)
    theta = rng.standard_normal((2, 6))
    attrs = {"transform_type": "affine", "target_shape": (3, 4)}
    out = oh.forward("GridGenerator", attrs, [theta])[0][0]
    np.testing.assert_allclose(out, affine_grid(theta, 3, 4), atol=1e-12)
    oh.check_grad("GridGenerator", attrs, [theta])
    flow = rng.standard_normal((1, 2, 3, 5))
    out = oh.forward("GridGenerator", {"transform_type": "warp"}, [flow])[0][0]
    xs, ys = np.meshgrid(np.arange(5), np.arange(3))
    np.testing.assert_allclose(out[0, 0], (flow[0, 0] + xs) / 2.0 - 1, atol=1e-12)
    np.testing.assert_allclose(out[0, 1], (flow[0, 1] + ys) / 1.0 - 1, atol=1e-12)
    oh.check_grad("GridGenerator", {"transform_type": "warp"}, [flow])


def test_grid_generator_bad_inputs():
    with pytest.raises(MXNetError, match="'affine' needs target_shape"):
        mx.sym.GridGenerator(mx.sym.var("t"), transform_type="affine")
    op, p = oh.prepare("GridGenerator", {"transform_type": "affine", "target_shape": (2, 2)})
    with pytest.raises(MXNetError, match=r"data has shape \(2, 5\): an affine transform"):
        op.infer_shape(p, [(2, 5)])


def test_bilinear_sampler_matches_reference_and_gradient():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 4, 5))
    # positions off the pixel lattice (bilinear sampling is not differentiable on it), some
    # outside the image
    grid = rng.uniform(-1.3, 1.3, (2, 2, 3, 3))
    px = (grid[:, 0] + 1) * 2
    py = (grid[:, 1] + 1) * 1.5
    assert np.abs(px - np.round(px)).min() > 1e-3 and np.abs(py - np.round(py)).min() > 1e-3
    out = oh.forward("BilinearSampler", {}, [x, grid])[0][0]
    np.testing.assert_allclose(out, sample(x, grid), atol=1e-12)
    oh.check_grad("BilinearSampler", {}, [x, grid], rtol=1e-4, atol=1e-6)


def test_spatial_transformer_is_grid_then_sampler():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 2, 5, 4))
    loc = np.array([[0.9, 0.1, 0.05, -0.1, 0.8, 0.02], [0.5, 0.0, 0.3, 0.0, 0.5, -0.2]])
    attrs = {"transform_type": "affine", "sampler_type": "bilinear", "target_shape": (3, 3)}
    out = oh.forward("SpatialTransformer", attrs, [x, loc])[0][0]
    np.testing.assert_allclose(out, sample(x, affine_grid(loc, 3, 3)), atol=1e-12)
    oh.check_grad("SpatialTransformer", attrs, [x, loc], rtol=1e-4, atol=1e-6)
    g1 = oh.backward("SpatialTransformer", attrs, [x, loc], [np.ones(out.shape)])
    g2 = oh.backward("SpatialTransformer", attrs, [x, loc], [np.ones(out.shape)],
                     req=["add", "add"], init_grads=[np.ones(x.shape), np.ones(loc.shape)])
    np.testing.assert_allclose(g2[0], g1[0] + 1)
    np.testing.assert_allclose(g2[1], g1[1] + 1)


def test_sampler_and_transformer_bad_inputs():
    op, p = oh.prepare("BilinearSampler", {})
    with pytest.raises(MXNetError, match=r"grid has shape \(2, 3, 4, 4\), expected \(2, 2, "):
        op.infer_shape(p, [(2, 1, 5, 5), (2, 3, 4, 4)])
    op, p = oh.prepare("SpatialTransformer", {"transform_type": "affine",
                                              "sampler_type": "bilinear", "target_shape": (2, 2)})
    with pytest.raises(MXNetError, match=r"input 'loc' has shape \(2, 4\), expected \(2, 6\)"):
        op.infer_shape(p, [(2, 1, 5, 5), (2, 4)])
    with pytest.raises(MXNetError, match="target_shape must be"):
        oh.prepare("SpatialTransformer", {"transform_type": "affine", "sampler_type": "bilinear"})


# --- Correlation --------------------------------------------------------------------------------
@pytest.mark.parametrize("k,md,s1,s2,pad,multiply", [
    (1, 1, 1, 1, 0, True), (3, 1, 2, 1, 2, False), (1, 4, 1, 2, 4, True), (3, 2, 2, 1, 1, True)])
def test_correlation_matches_reference(k, md, s1, s2, pad, multiply):
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((2, 2, 6, 5)), rng.standard_normal((2, 2, 6, 5))
    attrs = {"kernel_size": k, "max_displacement": md, "stride1": s1, "stride2": s2,
             "pad_size": pad, "is_multiply": multiply}
    out = oh.forward("Correlation", attrs, [a, b])[0][0]
    np.testing.assert_allclose(out, correlate(a, b, k, md, s1, s2, pad, multiply), atol=1e-12)
    oh.check_grad("Correlation", attrs, [a, b], rtol=1e-4, atol=1e-7)


def test_correlation_bad_inputs():
    x = mx.nd.ones((1, 1, 6, 6))
    with pytest.raises(MXNetError, match="Correlation: data .* is too small for kernel_size 7"):
        mx.nd.Correlation(x, x, kernel_size=7)
    with pytest.raises(MXNetError, match="kernel_size must be a positive odd number, got 4"):
        mx.nd.Correlation(x, x, kernel_size=4)
    with pytest.raises(MXNetError, match=r"data1 has shape \(1, 1, 6, 6\) and data2 "):
        mx.nd.Correlation(x, mx.nd.ones((1, 1, 6, 5)))
    c = mx.sym.Correlation(mx.sym.var("a"), mx.sym.var("b"))
    _, out_types, _ = c.infer_type(b="float16")
    assert out_types == [np.float16]
