"""Region operators (ROIPooling, PSROIPooling, RROIAlign, DeformableConvolution) against numpy
references written from their definitions, numeric gradients and bad inputs (MXNet's own
values: test_op_spatial_golden.py)."""
import math

import numpy as np
import ophelpers as oh
import pytest

import lightmod as mx
from lightmod.base import MXNetError


def c_round(v):
    return math.floor(v + 0.5) if v >= 0 else -math.floor(-v + 0.5)


def roi_pool_reference(x, rois, pooled, scale):
    _, c, h, w = x.shape
    out = np.zeros((len(rois), c) + pooled)
    for r, (b, *corners) in enumerate(rois):
        x0, y0, x1, y1 = [int(c_round(v * scale)) for v in corners]
        cell_h = max(y1 - y0 + 1, 1) / pooled[0]
        cell_w = max(x1 - x0 + 1, 1) / pooled[1]
        for i in range(pooled[0]):
            top = min(max(y0 + math.floor(i * cell_h), 0), h)
            bottom = min(max(y0 + math.ceil((i + 1) * cell_h), 0), h)
            for j in range(pooled[1]):
                left = min(max(x0 + math.floor(j * cell_w), 0), w)
                right = min(max(x0 + math.ceil((j + 1) * cell_w), 0), w)
                if bottom > top and right > left:
                    out[r, :, i, j] = x[int(b), :, top:bottom, left:right].max(axis=(1, 2))
    return out


def psroi_reference(x, rois, scale, dims, pooled, group):
    _, _, h, w = x.shape
    out = np.zeros((len(rois), dims, pooled, pooled))
    for r, (b, *corners) in enumerate(rois):
        x0, y0 = c_round(corners[0]) * scale, c_round(corners[1]) * scale
        x1, y1 = (c_round(corners[2]) + 1) * scale, (c_round(corners[3]) + 1) * scale
        cell_h, cell_w = max(y1 - y0, 0.1) / pooled, max(x1 - x0, 0.1) / pooled
        for i in range(pooled):
            top = min(max(math.floor(i * cell_h + y0), 0), h)
            bottom = min(max(math.ceil((i + 1) * cell_h + y0), 0), h)
            gi = min(i * group // pooled, group - 1)
            for j in range(pooled):
                left = min(max(math.floor(j * cell_w + x0), 0), w)
                right = min(max(math.ceil((j + 1) * cell_w + x0), 0), w)
                gj = min(j * group // pooled, group - 1)
                if bottom <= top or right <= left:
                    continue
                for d in range(dims):
                    channel = (d * group + gi) * group + gj
                    out[r, d, i, j] = x[int(b), channel, top:bottom, left:right].mean()
    return out


def bilinear_clamped(img, y, x):
    h, w = img.shape
    if y < -1 or y > h or x < -1 or x > w:
        return 0.0
    y, x = min(max(y, 0.0), h - 1), min(max(x, 0.0), w - 1)
    y0, x0 = min(int(y), h - 1), min(int(x), w - 1)
    y1, x1 = min(y0 + 1, h - 1), min(x0 + 1, w - 1)
    fy, fx = y - y0, x - x0
    return ((1 - fy) * ((1 - fx) * img[y0, x0] + fx * img[y0, x1])
            + fy * ((1 - fx) * img[y1, x0] + fx * img[y1, x1]))


def rroi_reference(x, rois, pooled, scale, ratio):
    out = np.zeros((len(rois), x.shape[1]) + pooled)
    for r, (b, cx, cy, rw, rh, angle) in enumerate(rois):
        cx, cy = cx * scale, cy * scale
        rw, rh = max(rw * scale, 1.0), max(rh * scale, 1.0)
        t = math.radians(angle)
        gh = ratio if ratio > 0 else math.ceil(rh / pooled[0])
        gw = ratio if ratio > 0 else math.ceil(rw / pooled[1])
        for i in range(pooled[0]):
            for j in range(pooled[1]):
                for c in range(x.shape[1]):
                    acc = 0.0
                    for a in range(gh):
                        yy = -rh / 2 + (i + (a + 0.5) / gh) * rh / pooled[0]
                        for q in range(gw):
                            xx = -rw / 2 + (j + (q + 0.5) / gw) * rw / pooled[1]
                            px = xx * math.cos(t) + yy * math.sin(t) + cx
                            py = yy * math.cos(t) - xx * math.sin(t) + cy
                            acc += bilinear_clamped(x[int(b), c], py, px)
                    out[r, c, i, j] = acc / (gh * gw)
    return out


ROIS = np.array([[0, 1.1, 1.1, 6.2, 6.2], [1, 6.1, 2.1, 8.2, 11.2], [0, 3, 3, 3, 3],
                 [1, -4.0, -2.0, 30.0, 3.0]])


def test_roi_pooling_matches_reference_and_gradient():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 12, 8))
    attrs = {"pooled_size": (3, 2), "spatial_scale": 1.0}
    outs = oh.forward("ROIPooling", attrs, [x, ROIS])[0]
    np.testing.assert_allclose(outs[0], roi_pool_reference(x, ROIS, (3, 2), 1.0))
    oh.check_grad("ROIPooling", attrs, [x, ROIS], wrt=[0])
    g = oh.backward("ROIPooling", attrs, [x, ROIS], [np.ones(outs[0].shape)])
    np.testing.assert_array_equal(g[1], np.zeros_like(ROIS))


def test_roi_pooling_scale_and_symbol():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 2, 6, 6)).astype(np.float32)
    rois = ROIS.astype(np.float32)
    y = mx.nd.ROIPooling(mx.nd.array(x), mx.nd.array(rois), pooled_size=(2, 2),
                         spatial_scale=0.5)
    np.testing.assert_allclose(y.asnumpy(), roi_pool_reference(x, rois, (2, 2), 0.5))
    sym = mx.sym.ROIPooling(mx.sym.var("d"), mx.sym.var("r"), pooled_size=(2, 2),
                            spatial_scale=0.5)
    assert sym.list_outputs() == ["roipooling0_output"] or len(sym.list_outputs()) == 1
    _, outs, _ = sym.infer_shape(d=(2, 2, 6, 6), r=(5, 5))
    assert outs == [(5, 2, 2, 2)]


@pytest.mark.parametrize("pooled,group", [(3, 3), (4, 2)])
def test_psroi_pooling_matches_reference_and_gradient(pooled, group):
    rng = np.random.default_rng(2)
    dims = 2
    x = rng.standard_normal((2, dims * group * group, 7, 7))
    rois = np.array([[0, 2.0, 3.0, 20.0, 25.0], [1, 0.0, 0.0, 27.0, 27.0], [1, 9.0, 9.0, 9.4, 9.6]])
    attrs = {"spatial_scale": 0.25, "output_dim": dims, "pooled_size": pooled,
             "group_size": group}
    out = oh.forward("_contrib_PSROIPooling", attrs, [x, rois])[0][0]
    np.testing.assert_allclose(out, psroi_reference(x, rois, 0.25, dims, pooled, group),
                               atol=1e-12)
    oh.check_grad("_contrib_PSROIPooling", attrs, [x, rois], wrt=[0])


@pytest.mark.parametrize("ratio", [-1, 2])
def test_rroi_align_matches_reference_and_gradient(ratio):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 2, 6, 7))
    rois = np.array([[0, 6.0, 5.0, 8.0, 6.0, 30.0], [1, 3.0, 9.0, 12.0, 4.0, 135.0],
                     [1, 0.5, 0.5, 1.0, 1.0, 0.0]])
    attrs = {"pooled_size": (2, 3), "spatial_scale": 0.5, "sampling_ratio": ratio}
    out = oh.forward("_contrib_RROIAlign", attrs, [x, rois])[0][0]
    np.testing.assert_allclose(out, rroi_reference(x, rois, (2, 3), 0.5, ratio), atol=1e-12)
    oh.check_grad("_contrib_RROIAlign", attrs, [x, rois], wrt=[0])


def test_region_ops_bad_inputs():
    op, p = oh.prepare("ROIPooling", {"pooled_size": (2, 2), "spatial_scale": 1.0})
    with pytest.raises(MXNetError, match=r"ROIPooling: rois has shape \(3, 4\): expected "
                                         r"\(num_rois, 5\)"):
        op.infer_shape(p, [(1, 2, 5, 5), (3, 4)])
    with pytest.raises(MXNetError, match=r"data has shape \(2, 5, 5\): expected 4-D"):
        op.infer_shape(p, [(2, 5, 5), (3, 5)])
    with pytest.raises(MXNetError, match="spatial_scale must be positive"):
        oh.prepare("ROIPooling", {"pooled_size": (2, 2), "spatial_scale": 0.0})
    op, p = oh.prepare("_contrib_PSROIPooling", {"spatial_scale": 1.0, "output_dim": 2,
                                                 "pooled_size": 2})
    with pytest.raises(MXNetError, match="data has 7 channels, expected output_dim \\* "
                                         "group_size\\^2 = 8"):
        op.infer_shape(p, [(1, 7, 5, 5), (3, 5)])
    op, p = oh.prepare("_contrib_RROIAlign", {"pooled_size": (2, 2), "spatial_scale": 1.0})
    with pytest.raises(MXNetError, match=r"rois has shape \(3, 5\): expected \(num_rois, 6\)"):
        op.infer_shape(p, [(1, 2, 5, 5), (3, 5)])


def test_roi_batch_index_out_of_range_is_clamped():
    # a batch index past the batch reads the last image instead of memory beyond it
    x = np.arange(2 * 16, dtype=np.float64).reshape(2, 1, 4, 4)
    rois = np.array([[5, 0, 0, 3, 3]], dtype=np.float64)
    out = oh.forward("ROIPooling", {"pooled_size": (1, 1), "spatial_scale": 1.0}, [x, rois])
    assert out[0][0].item() == 31.0


# --- DeformableConvolution ----------------------------------------------------------------------
DEFORM = {"kernel": (3, 3), "num_filter": 3, "pad": (1, 1)}


def test_deformable_convolution_without_offsets_is_a_convolution():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 4, 5, 6))
    w = rng.standard_normal((3, 4, 3, 3))
    b = rng.standard_normal(3)
    offset = np.zeros((2, 18, 5, 6))
    got = oh.forward("_contrib_DeformableConvolution", DEFORM, [x, offset, w, b])[0][0]
    want = oh.forward("Convolution", DEFORM, [x, w, b])[0][0]
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_deformable_convolution_integer_offsets_shift_the_taps():
    # moving every tap by (+1 row, -1 column) equals convolving the shifted image
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 6, 6))
    w = rng.standard_normal((3, 2, 3, 3))
    offset = np.zeros((1, 18, 6, 6))
    offset[:, 0::2] = 1.0
    offset[:, 1::2] = -1.0
    attrs = dict(DEFORM, no_bias=True)
    got = oh.forward("_contrib_DeformableConvolution", attrs, [x, offset, w])[0][0]
    shifted = np.zeros_like(x)
    shifted[:, :, :-1, 1:] = x[:, :, 1:, :-1]
    want = oh.forward("Convolution", attrs, [shifted, w])[0][0]
    # on the first row and the last column the moved taps reach pixels the shifted image
    # has cut off (and padded with zeros)
    np.testing.assert_allclose(got[:, :, 1:, :-1], want[:, :, 1:, :-1], atol=1e-12)
    assert not np.allclose(got[:, :, 0], want[:, :, 0])


@pytest.mark.parametrize("attrs", [
    dict(DEFORM), dict(DEFORM, num_deformable_group=2, stride=(2, 1)),
    dict(DEFORM, num_group=2, num_filter=4, dilate=(1, 2), pad=(1, 2), no_bias=True)])
def test_deformable_convolution_gradient(attrs):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 4, 5, 4))
    op, p = oh.prepare("_contrib_DeformableConvolution", attrs)
    shapes, outs = op.infer_shape(p, [x.shape] + [None] * (len(op.list_inputs(p)) - 1))
    # fractional offsets, away from the pixel lattice where sampling has kinks
    offset = rng.uniform(0.1, 0.4, shapes[1]) * rng.choice([-1, 1], shapes[1])
    others = [rng.standard_normal(s) for s in shapes[2:]]
    oh.check_grad("_contrib_DeformableConvolution", attrs, [x, offset] + others, rtol=1e-4,
                  atol=1e-6)


def test_deformable_convolution_bad_inputs():
    with pytest.raises(MXNetError, match="only 2-D deformable convolution"):
        oh.prepare("_contrib_DeformableConvolution", {"kernel": (3,), "num_filter": 2})
    op, p = oh.prepare("_contrib_DeformableConvolution",
                       dict(DEFORM, num_deformable_group=3))
    with pytest.raises(MXNetError, match="not divisible by num_deformable_group 3"):
        op.infer_shape(p, [(1, 4, 5, 5), None, None, None])
    op, p = oh.prepare("_contrib_DeformableConvolution", DEFORM)
    with pytest.raises(MXNetError, match=r"input 'offset' has shape \(1, 9, 5, 5\)"):
        op.infer_shape(p, [(1, 4, 5, 5), (1, 9, 5, 5), None, None])
