"""contrib.ROIAlign against a plain numpy reference written from the operator's description
(bilinear samples on a regular grid per cell, averaged; MXNet's edge rules), over drawn maps,
ROIs and attributes (sample_ratio, position_sensitive, aligned); numeric gradients; the ROIs'
zero gradient; negative batch indices; errors."""
import math

import numpy as np
import ophelpers as oh
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lightmod as mx
from lightmod.base import MXNetError


def _sample(plane, y, x):
    """(value, [(row, col, weight)]) of a bilinear read of plane at (y, x), MXNet's rules."""
    h, w = plane.shape
    if y < -1 or y > h or x < -1 or x > w:
        return 0.0, []
    y, x = max(y, 0.0), max(x, 0.0)
    r0, c0 = int(math.floor(y)), int(math.floor(x))
    if r0 >= h - 1:
        r0 = r1 = h - 1
        fy = 0.0
    else:
        r1, fy = r0 + 1, y - r0
    if c0 >= w - 1:
        c0 = c1 = w - 1
        fx = 0.0
    else:
        c1, fx = c0 + 1, x - c0
    taps = [(r0, c0, (1 - fy) * (1 - fx)), (r0, c1, (1 - fy) * fx), (r1, c0, fy * (1 - fx)),
            (r1, c1, fy * fx)]
    return sum(wt * plane[r, c] for r, c, wt in taps), taps


def reference(data, rois, pooled, scale, ratio, sensitive, aligned, dy):
    n, channels, h, w = data.shape
    ph_n, pw_n = pooled
    out_c = channels // (ph_n * pw_n) if sensitive else channels
    out = np.zeros((len(rois), out_c, ph_n, pw_n))
    dx = np.zeros_like(data)
    for r, (b, x1, y1, x2, y2) in enumerate(rois):
        b = int(b)
        if b < 0:
            continue
        b = min(b, n - 1)
        shift = 0.5 if aligned else 0.0
        rw, rh = (x2 - x1) * scale, (y2 - y1) * scale
        if not aligned:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bw, bh = rw / pw_n, rh / ph_n
        gh = ratio if ratio > 0 else int(math.ceil(bh))
        gw = ratio if ratio > 0 else int(math.ceil(bw))
        count = max(gh * gw, 1)
        for c in range(out_c):
            for i in range(ph_n):
                for j in range(pw_n):
                    src = (c * ph_n + i) * pw_n + j if sensitive else c
                    total = 0.0
                    for a in range(gh):
                        y = y1 * scale - shift + i * bh + (a + 0.5) * bh / gh
                        for e in range(gw):
                            x = x1 * scale - shift + j * bw + (e + 0.5) * bw / gw
                            v, taps = _sample(data[b, src], y, x)
                            total += v
                            for rr, cc, wt in taps:
                                dx[b, src, rr, cc] += wt * dy[r, c, i, j] / count
                    out[r, c, i, j] = total / count
    return out, dx


@st.composite
def cases(draw):
    pooled = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    sensitive = draw(st.booleans())
    groups = draw(st.integers(1, 2))
    channels = groups * pooled[0] * pooled[1] if sensitive else draw(st.integers(1, 3))
    shape = (draw(st.integers(1, 3)), channels, draw(st.integers(2, 9)), draw(st.integers(2, 9)))
    scale = draw(st.sampled_from([1.0, 0.5, 0.25]))
    count = draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 9999)))
    image = np.array([shape[3], shape[2]]) / scale
    corners = np.sort(rng.uniform(-0.2, 1.2, (count, 2, 2)), axis=1) * image
    batch = rng.integers(-1, shape[0] + 1, (count, 1))     # some out of range on purpose
    rois = np.hstack([batch, corners[:, 0], corners[:, 1]])
    return dict(shape=shape, pooled=pooled, scale=scale, ratio=draw(st.sampled_from([-1, 0, 1, 2])),
                sensitive=sensitive, aligned=draw(st.booleans()), rois=rois,
                data=rng.standard_normal(shape), dy=rng.standard_normal(
                    (count, channels // (pooled[0] * pooled[1]) if sensitive else channels)
                    + pooled))


def _attrs(case):
    return dict(pooled_size=case["pooled"], spatial_scale=case["scale"],
                sample_ratio=case["ratio"], position_sensitive=case["sensitive"],
                aligned=case["aligned"])


@settings(max_examples=60, deadline=None)
@given(case=cases())
def test_forward_and_data_gradient_match_the_reference(case):
    want, want_dx = reference(case["data"], case["rois"], case["pooled"], case["scale"],
                              case["ratio"], case["sensitive"], case["aligned"], case["dy"])
    inputs = [case["data"], case["rois"]]
    got = oh.forward("_contrib_ROIAlign", _attrs(case), inputs)[0][0]
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    grads = oh.backward("_contrib_ROIAlign", _attrs(case), inputs, [case["dy"]])
    np.testing.assert_allclose(grads[0], want_dx, rtol=1e-10, atol=1e-12)
    assert not np.any(grads[1])


def test_numeric_gradient_and_float32():
    rng = np.random.default_rng(5)
    data = rng.standard_normal((2, 3, 7, 6))
    rois = np.array([[0, 1.1, 0.7, 4.2, 5.3], [1, 0.2, 2.5, 5.8, 6.1], [1, 2.0, 2.0, 2.3, 2.4]])
    attrs = dict(pooled_size=(2, 3), spatial_scale=1.0, sample_ratio=2)
    oh.check_grad("_contrib_ROIAlign", attrs, [data, rois], wrt=[0], rtol=1e-5, atol=1e-8)
    out32 = mx.nd.contrib.ROIAlign(mx.nd.array(data, dtype=np.float32),
                                   mx.nd.array(rois, dtype=np.float32), **attrs)
    assert out32.dtype == np.float32
    want, _ = reference(data, rois, (2, 3), 1.0, 2, False, False,
                        np.zeros(out32.shape))
    np.testing.assert_allclose(out32.asnumpy(), want, rtol=1e-5, atol=1e-5)


def test_shapes_and_bad_attributes():
    data, rois = mx.sym.var("data"), mx.sym.var("rois")
    sym = mx.sym.contrib.ROIAlign(data, rois, pooled_size=(2, 2), spatial_scale=0.5,
                                  position_sensitive=True, name="ra")
    _, outs, _ = sym.infer_shape(data=(2, 8, 5, 5), rois=(3, 5))
    assert outs == [(3, 2, 2, 2)]
    with pytest.raises(MXNetError, match="not a multiple"):
        sym.infer_shape(data=(2, 6, 5, 5), rois=(3, 5))
    plain = mx.sym.contrib.ROIAlign(data, rois, pooled_size=(3,), spatial_scale=1.0)
    assert plain.infer_shape(data=(1, 4, 5, 5), rois=(2, 5))[1] == [(2, 4, 3, 3)]
    with pytest.raises(MXNetError, match="rois"):
        plain.infer_shape(data=(1, 4, 5, 5), rois=(2, 4))
    with pytest.raises(MXNetError, match="spatial_scale"):
        mx.sym.contrib.ROIAlign(data, rois, pooled_size=(2, 2), spatial_scale=0.0)
