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


# --- Proposal / MultiProposal -------------------------------------------------------------------
def anchors_reference(stride, scales, ratios):
    out = []
    centre = (stride - 1) / 2
    for ratio in ratios:
        w = math.floor(math.sqrt(math.floor(stride * stride / ratio)) + 0.5)
        h = math.floor(w * ratio + 0.5)
        for s in scales:
            out.append([centre - (w * s - 1) / 2, centre - (h * s - 1) / 2,
                        centre + (w * s - 1) / 2, centre + (h * s - 1) / 2])
    return np.array(out)


def iou(a, b):
    iw = min(a[2], b[2]) - max(a[0], b[0]) + 1
    ih = min(a[3], b[3]) - max(a[1], b[1]) + 1
    if iw <= 0 or ih <= 0:
        return 0.0
    inter = iw * ih
    area = lambda r: (r[2] - r[0] + 1) * (r[3] - r[1] + 1)  # noqa: E731
    return inter / (area(a) + area(b) - inter)


def proposals_reference(cls, deltas, info, stride, scales, ratios, pre, post, thresh, min_size):
    anchors = anchors_reference(stride, scales, ratios)
    a_n, (h, w) = len(anchors), cls.shape[2:]
    rois, scores = [], []
    for b in range(cls.shape[0]):
        im_h, im_w, im_scale = info[b]
        boxes, score = [], []
        for i in range(h):
            for j in range(w):
                for a in range(a_n):
                    x1, y1, x2, y2 = anchors[a] + [j * stride, i * stride] * 2
                    bw, bh = x2 - x1 + 1, y2 - y1 + 1
                    dx, dy, dw, dh = deltas[b, 4 * a:4 * a + 4, i, j]
                    cx, cy = x1 + (bw - 1) / 2 + dx * bw, y1 + (bh - 1) / 2 + dy * bh
                    pw, ph = math.exp(dw) * bw, math.exp(dh) * bh
                    box = np.clip([cx - (pw - 1) / 2, cy - (ph - 1) / 2, cx + (pw - 1) / 2,
                                   cy + (ph - 1) / 2], 0, [im_w - 1, im_h - 1] * 2)
                    s = cls[b, a_n + a, i, j]
                    if i >= int(im_h / stride) or j >= int(im_w / stride):
                        s = -1.0
                    small = min_size * im_scale
                    if box[2] - box[0] + 1 < small or box[3] - box[1] + 1 < small:
                        box = box + [-small / 2, -small / 2, small / 2, small / 2]
                        s = -1.0
                    boxes.append(box)
                    score.append(s)
        order = sorted(range(len(score)), key=lambda t: -score[t])[:pre]
        kept = []
        for t in order:
            if len(kept) < post and all(iou(boxes[t], boxes[q]) <= thresh for q in kept):
                kept.append(t)
        for r in range(post):
            t = kept[r % len(kept)]
            rois.append([b] + list(boxes[t]))
            scores.append([score[t]])
    return np.array(rois), np.array(scores)


@pytest.mark.parametrize("op_name,batch", [("_contrib_Proposal", 1),
                                           ("_contrib_MultiProposal", 2)])
def test_proposals_match_reference(op_name, batch):
    rng = np.random.default_rng(7)
    scales, ratios = (1.0, 2.0), (0.5, 1.0, 2.0)
    cls = rng.uniform(0, 1, (batch, 12, 4, 5))
    deltas = rng.uniform(-0.4, 0.4, (batch, 24, 4, 5))
    info = np.array([[16.0, 20.0, 1.0], [11.0, 18.0, 0.5]])[:batch]
    attrs = {"feature_stride": 4, "scales": scales, "ratios": ratios, "rpn_pre_nms_top_n": 50,
             "rpn_post_nms_top_n": 30, "threshold": 0.5, "rpn_min_size": 3,
             "output_score": True}
    outs = oh.forward(op_name, attrs, [cls, deltas, info])[0]
    rois, scores = proposals_reference(cls, deltas, info, 4, scales, ratios, 50, 30, 0.5, 3)
    np.testing.assert_allclose(outs[0], rois, atol=1e-9)
    np.testing.assert_allclose(outs[1], scores, atol=1e-12)
    g = oh.backward(op_name, attrs, [cls, deltas, info], [np.ones(o.shape) for o in outs])
    assert all(not grad.any() for grad in g)


def test_proposal_symbol_outputs_and_bad_inputs():
    sym = mx.sym.contrib.MultiProposal(mx.sym.var("c"), mx.sym.var("b"), mx.sym.var("i"),
                                       rpn_post_nms_top_n=7, output_score=True)
    _, outs, _ = sym.infer_shape(c=(3, 24, 5, 5))
    assert outs == [(21, 5), (21, 1)]
    assert len(mx.sym.contrib.Proposal(mx.sym.var("c"), mx.sym.var("b"),
                                       mx.sym.var("i")).list_outputs()) == 1
    op, p = oh.prepare("_contrib_Proposal", {})
    with pytest.raises(MXNetError, match="Proposal takes one image"):
        op.infer_shape(p, [(2, 24, 5, 5), None, None])
    with pytest.raises(MXNetError, match=r"cls_prob has shape \(1, 6, 5, 5\), expected "
                                         r"\(batch, 2 \* 12 anchors"):
        op.infer_shape(p, [(1, 6, 5, 5), None, None])
    with pytest.raises(MXNetError, match=r"im_info has shape \(1, 2\), expected \(1, 3\)"):
        op.infer_shape(p, [(1, 24, 5, 5), None, (1, 2)])
    cls, deltas = np.zeros((1, 24, 2, 2)), np.zeros((1, 48, 2, 2))
    with pytest.raises(MXNetError, match="3 x 2 cells of feature_stride 16, more than the "
                                         "score map's 2 x 2"):
        oh.forward("_contrib_Proposal", {}, [cls, deltas, np.array([[48.0, 32.0, 1.0]])])
