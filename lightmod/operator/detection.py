"""Region operators of detection networks: ROIPooling, contrib.PSROIPooling, contrib.ROIAlign,
contrib.RROIAlign, contrib.DeformableConvolution, and contrib.Proposal / MultiProposal.

``rois`` is (R, 5) -- batch index, x1, y1, x2, y2 in image coordinates -- or (R, 6) for
RROIAlign: batch index, centre x, centre y, width, height, angle in degrees (counter-clockwise).
``spatial_scale`` maps image coordinates onto the feature map. Only the feature map gets a
gradient; the ROIs get zero (as in MXNet).

* ROIPooling: the ROI's corners are rounded to feature cells; each of the pooled_size cells
  takes the max of its (floor .. ceil) window (0 when the window is empty).
* PSROIPooling: position-sensitive average pooling: output channel d's cell (i, j) averages
  input channel (d * G + gi) * G + gj, with (gi, gj) the cell's place in a G x G group grid
  (G = group_size, or pooled_size when 0).
* ROIAlign: each cell of the ROI averages bilinear samples on a regular grid (sample_ratio per
  axis, or ceil(cell size) when it is not positive); a sample more than a pixel outside the
  map reads 0, one on or past the last row / column reads it. ``aligned`` shifts the corners
  by half a pixel (and drops the one-cell minimum size); ``position_sensitive`` makes output
  channel c's cell (ph, pw) read input channel (c * ph_n + ph) * pw_n + pw. An ROI with a
  negative batch index gives zeros, as in MXNet.
* RROIAlign: each cell of the rotated ROI averages bilinear samples on a regular grid
  (sampling_ratio per axis, or ceil(cell size) when it is not positive).
* DeformableConvolution: a 2-D convolution whose tap (i, j) at output position (a, b) reads
  the input at (a * stride - pad + i * dilate + dh, ...) with (dh, dw) taken from the offset
  input (N, num_deformable_group * 2 * kh * kw, OH, OW), sampled bilinearly (0 outside the
  map); computed per sample as sampled columns times the weight matrix.
"""
import numpy as np

from .common import zero_grads
from .conv import _conv_params, _ConvBase, _merge_input, float16_via_float32, scratch
from .registry import REQUIRED, Bool, Float, FloatTuple, Int, Operator, Shape, merge_shape, register

__all__ = ["ROIPooling", "PSROIPooling", "ROIAlign", "RROIAlign", "DeformableConvolution",
           "MultiProposal", "Proposal"]


def _pooled_pair(op, value):
    value = tuple(value)
    if len(value) == 1:
        value = value * 2
    if len(value) != 2 or min(value) <= 0:
        raise op.error("pooled_size %s must be one or two positive ints", tuple(value))
    return value


_POOLED_SIZE = Shape(REQUIRED, "(height, width) of the pooled output")
_SPATIAL_SCALE = Float(REQUIRED, "image-to-feature-map scale of the ROI coordinates")


class _RegionOp(Operator):
    """Pooling of regions of interest: data and rois in, the pooled regions out (shapes from
    ``out_shapes``); backward gives data the ``data_gradient`` and the ROIs zero."""
    inputs = ("data", "rois")
    roi_width = 5

    def _check(self, data, rois):
        if len(data) != 4:
            raise self.error("data has shape %s: expected 4-D (batch, channel, height, width)",
                             tuple(data))
        if len(rois) != 2 or rois[1] != self.roi_width:
            raise self.error("rois has shape %s: expected (num_rois, %d)", tuple(rois),
                             self.roi_width)

    def infer_type(self, p, in_types):
        dtype = next((t for t in in_types if t is not None), None)
        return [dtype, dtype], [dtype] * self.num_outputs(p)

    def check_params(self, p):
        if self.params.get("pooled_size") is _POOLED_SIZE:       # a (height, width) pair
            p._pooled = _pooled_pair(self, p.pooled_size)
        if p.spatial_scale <= 0:
            raise self.error("spatial_scale must be positive, got %s", p.spatial_scale)

    def infer_shape(self, p, in_shapes):
        data, rois = in_shapes
        if data is None or rois is None:
            return list(in_shapes), [None] * self.num_outputs(p)
        self._check(data, rois)
        return [tuple(data), tuple(rois)], self.out_shapes(p, data, rois)

    def out_shapes(self, p, data, rois):
        """The output shapes for (checked) data and rois shapes."""
        raise NotImplementedError

    @float16_via_float32
    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[0] != "null":
            self.data_gradient(p, k, out_grads[0], inputs[1], outputs, in_grads[0],
                               req[0] == "add")
        zero_grads(k, in_grads[1:], req[1:])       # the ROIs get none

    def data_gradient(self, p, k, dy, rois, outputs, dx, accumulate):
        raise NotImplementedError


@register
class ROIPooling(_RegionOp):
    """Max pooling of every region of interest to a fixed pooled_size grid."""
    name = "ROIPooling"
    params = {"pooled_size": _POOLED_SIZE, "spatial_scale": _SPATIAL_SCALE}

    def num_outputs(self, p):
        return 2            # the output and the (hidden) position of every maximum

    def num_visible_outputs(self, p):
        return 1

    def out_shapes(self, p, data, rois):
        out = (rois[0], data[1]) + p._pooled
        return [out, out]

    def infer_type(self, p, in_types):
        ins, outs = super().infer_type(p, in_types)
        return ins, [outs[0], "int32"]

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        k.roi_pool(inputs[0], inputs[1], p.spatial_scale, outputs[0], outputs[1])

    def data_gradient(self, p, k, dy, rois, outputs, dx, accumulate):
        k.roi_pool_backward(dy, rois, outputs[1], dx, accumulate=accumulate)


@register
class PSROIPooling(_RegionOp):
    """Position-sensitive average pooling of regions of interest (R-FCN)."""
    name = "_contrib_PSROIPooling"
    hint = "psroipooling"
    params = {
        "spatial_scale": _SPATIAL_SCALE,
        "output_dim": Int(REQUIRED, "output channels"),
        "pooled_size": Int(REQUIRED, "side of the pooled output"),
        "group_size": Int(0, "side of the group grid (0: pooled_size)"),
    }

    def check_params(self, p):
        p._group = p.group_size or p.pooled_size
        if p.output_dim <= 0 or p.pooled_size <= 0 or p._group <= 0:
            raise self.error("output_dim (%d), pooled_size (%d) and group_size (%d) must be "
                             "positive", p.output_dim, p.pooled_size, p.group_size)
        super().check_params(p)

    def out_shapes(self, p, data, rois):
        need = p.output_dim * p._group * p._group
        if data[1] != need:
            raise self.error("data has %d channels, expected output_dim * group_size^2 = %d "
                             "(data %s)", data[1], need, tuple(data))
        return [(rois[0], p.output_dim, p.pooled_size, p.pooled_size)]

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        k.psroi_pool(inputs[0], inputs[1], p.spatial_scale, p._group, outputs[0])

    def data_gradient(self, p, k, dy, rois, outputs, dx, accumulate):
        k.psroi_pool_backward(dy, rois, p.spatial_scale, p._group, dx, accumulate=accumulate)


@register
class ROIAlign(_RegionOp):
    """Bilinear ROI pooling of axis-aligned regions of interest (Mask R-CNN's ROIAlign)."""
    name = "_contrib_ROIAlign"
    hint = "roialign"
    params = {
        "pooled_size": _POOLED_SIZE,
        "spatial_scale": _SPATIAL_SCALE,
        "sample_ratio": Int(-1, "samples per cell and axis (<= 0: ceil(cell size))"),
        "position_sensitive": Bool(False, "output channel c's cells read channel group c"),
        "aligned": Bool(False, "shift the ROI corners by half a pixel"),
    }

    def out_shapes(self, p, data, rois):
        channels = data[1]
        if p.position_sensitive:
            cells = p._pooled[0] * p._pooled[1]
            if channels % cells:
                raise self.error("position_sensitive: data has %d channels, not a multiple of "
                                 "pooled_size %s's %d cells", channels, p._pooled, cells)
            channels //= cells
        return [(rois[0], channels) + p._pooled]

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        k.roi_align(inputs[0], inputs[1], p.spatial_scale, p.sample_ratio, p.aligned,
                    p.position_sensitive, outputs[0])

    def data_gradient(self, p, k, dy, rois, outputs, dx, accumulate):
        k.roi_align_backward(dy, rois, p.spatial_scale, p.sample_ratio, p.aligned,
                             p.position_sensitive, dx, accumulate=accumulate)


@register
class RROIAlign(_RegionOp):
    """ROIAlign over rotated regions of interest."""
    name = "_contrib_RROIAlign"
    hint = "rroialign"
    roi_width = 6
    params = {
        "pooled_size": _POOLED_SIZE,
        "spatial_scale": _SPATIAL_SCALE,
        "sampling_ratio": Int(-1, "samples per cell and axis (<= 0: ceil(cell size))"),
    }

    def out_shapes(self, p, data, rois):
        return [(rois[0], data[1]) + p._pooled]

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        k.rroi_align(inputs[0], inputs[1], p.spatial_scale, p.sampling_ratio, outputs[0])

    def data_gradient(self, p, k, dy, rois, outputs, dx, accumulate):
        k.rroi_align_backward(dy, rois, p.spatial_scale, p.sampling_ratio, dx,
                              accumulate=accumulate)


@register
class DeformableConvolution(_ConvBase):
    """2-D convolution whose taps sample the input at learned offsets (bilinearly)."""
    name = "_contrib_DeformableConvolution"
    hint = "deformableconvolution"
    inputs = ("data", "offset", "weight", "bias")
    params = {key: decl for key, decl in _conv_params(1024, False).items()
              if key not in ("cudnn_tune", "cudnn_off")}
    params["num_deformable_group"] = Int(1, "groups of channels sharing one set of offsets")

    def list_inputs(self, p):
        return ["data", "offset", "weight"] + ([] if p.no_bias else ["bias"])

    def check_params(self, p):
        super().check_params(p)
        if len(p.kernel) != 2:
            raise self.error("kernel %s: only 2-D deformable convolution is supported",
                             tuple(p.kernel))
        if p.num_deformable_group <= 0:
            raise self.error("num_deformable_group must be positive, got %d",
                             p.num_deformable_group)

    def infer_shape(self, p, in_shapes):
        in_shapes = list(in_shapes)
        data = self._known_data(p, in_shapes[0])
        if data is None:
            return in_shapes, [None]
        n, c = data[0], data[1]
        self._check_groups(data, "num_group", p.num_group)
        self._check_groups(data, "num_deformable_group", p.num_deformable_group)
        spatial = (self._out_size(p, data, 0), self._out_size(p, data, 1))
        taps = p.kernel[0] * p.kernel[1]
        in_shapes[1] = _merge_input(self, "offset", in_shapes[1],
                                    (n, p.num_deformable_group * 2 * taps) + spatial)
        self._merge_params(p, in_shapes, (p.num_filter, c // p.num_group) + tuple(p.kernel))
        in_shapes[0] = data
        return in_shapes, [(n, p.num_filter) + spatial]

    def _plan(self, p, x, y):
        n, c = x.shape[0], x.shape[1]
        osize = y.shape[2] * y.shape[3]
        ck = (c // p.num_group) * p.kernel[0] * p.kernel[1]
        geometry = (p.kernel[0], p.kernel[1], p._stride[0], p._stride[1], p._pad[0], p._pad[1],
                    p._dilate[0], p._dilate[1], p.num_deformable_group)
        return n, osize, ck, p.num_filter // p.num_group, geometry

    def _buffers(self, p, k, state, x, osize):
        rows = x.shape[1] * p.kernel[0] * p.kernel[1]
        return (scratch(k, state, "col", (rows, osize), x.dtype),
                scratch(k, state, "rows", (p.num_filter, osize), x.dtype))

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        x, offset, w = inputs[:3]
        b = None if p.no_bias else inputs[3]
        y = outputs[0]
        n, osize, ck, fg, geometry = self._plan(p, x, y)
        col, res = self._buffers(p, k, state, x, osize)
        w2 = w.reshape(p.num_filter, ck)
        y3 = y.reshape(n, p.num_filter, osize)
        for s in range(n):
            k.deform_im2col(x[s], offset[s], col, geometry)
            for gi in range(p.num_group):
                k.conv_gemm(w2[gi * fg:(gi + 1) * fg], col[gi * ck:(gi + 1) * ck],
                            res[gi * fg:(gi + 1) * fg])
            k.rows_to_batch(res, y3[s:s + 1], b)

    @float16_via_float32
    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        x, offset, w = inputs[:3]
        req_x, req_off, req_w = req[0], req[1], req[2]
        req_b = "null" if p.no_bias else req[3]
        n, osize, ck, fg, geometry = self._plan(p, x, out_grads[0])
        col, dyt = self._buffers(p, k, state, x, osize)
        w2 = w.reshape(p.num_filter, ck)
        dy3 = out_grads[0].reshape(n, p.num_filter, osize)
        dw2 = in_grads[2].reshape(p.num_filter, ck) if req_w != "null" else None
        db = in_grads[3] if req_b != "null" else None
        dw_sum = scratch(k, state, "dw_sum", (p.num_filter, ck), w.dtype) if dw2 is not None \
            else None
        if req_x == "write":
            k.fill(in_grads[0], 0.0)
        for s in range(n):
            k.batch_to_rows(dy3[s:s + 1], dyt, db, db_accumulate=(s > 0 or req_b == "add"))
            if dw2 is not None:
                k.deform_im2col(x[s], offset[s], col, geometry)
                direct = s == 0 and req_w == "write"
                target = dw2 if direct else dw_sum
                for gi in range(p.num_group):
                    k.conv_gemm(dyt[gi * fg:(gi + 1) * fg], col[gi * ck:(gi + 1) * ck],
                                target[gi * fg:(gi + 1) * fg], trans_b=True)
                if not direct:
                    k.assign(dw2, dw_sum, "add")
            if req_x == "null" and req_off == "null":
                continue
            dcol = col      # the columns are free once the weight gradient is done
            for gi in range(p.num_group):
                k.conv_gemm(w2[gi * fg:(gi + 1) * fg], dyt[gi * fg:(gi + 1) * fg],
                            dcol[gi * ck:(gi + 1) * ck], trans_a=True)
            if req_x != "null":
                k.deform_col2im(dcol, offset[s], in_grads[0][s], geometry)
            if req_off != "null":
                k.deform_offset_grad(dcol, x[s], offset[s], in_grads[1][s], geometry,
                                     accumulate=(req_off == "add"))


def _anchors(feature_stride, scales, ratios):
    """The (A, 4) anchor boxes of one feature cell, ratio-major: the cell's box
    (0, 0, s - 1, s - 1) reshaped to each aspect ratio at constant area, then scaled."""
    side = float(feature_stride)
    centre = 0.5 * (side - 1.0)
    boxes = []
    for ratio in ratios:
        base_w = np.floor(np.sqrt(np.floor(side * side / ratio)) + 0.5)
        base_h = np.floor(base_w * ratio + 0.5)
        for scale in scales:
            w, h = base_w * scale, base_h * scale
            boxes.append([centre - 0.5 * (w - 1.0), centre - 0.5 * (h - 1.0),
                          centre + 0.5 * (w - 1.0), centre + 0.5 * (h - 1.0)])
    return np.array(boxes, dtype=np.float64)


@register
class MultiProposal(Operator):
    """Region proposals of a region proposal network, for every image of the batch.

    Every anchor (feature_stride apart; one per scale and ratio) at every cell of the score map
    is moved by its predicted deltas and clipped to the image (im_info rows: height, width,
    scale); boxes smaller than rpn_min_size * scale, and those of cells past the image's
    height / feature_stride rows or width / feature_stride columns, get score -1. The rpn_pre_nms_top_n best
    boxes go through greedy non-maximum suppression (IoU above ``threshold``); the first
    rpn_post_nms_top_n survivors are the output rows (image index, x1, y1, x2, y2), repeated
    cyclically when fewer survive, with their scores as a second output if ``output_score``.
    """
    name = "_contrib_MultiProposal"
    hint = "multiproposal"
    inputs = ("cls_prob", "bbox_pred", "im_info")
    params = {
        "rpn_pre_nms_top_n": Int(6000, "boxes kept before suppression (<= 0: all)"),
        "rpn_post_nms_top_n": Int(300, "boxes output per image"),
        "threshold": Float(0.7, "IoU above which a box is suppressed"),
        "rpn_min_size": Int(16, "smallest box side (times the image scale)"),
        "scales": FloatTuple((4.0, 8.0, 16.0, 32.0), "anchor scales"),
        "ratios": FloatTuple((0.5, 1.0, 2.0), "anchor aspect ratios (height / width)"),
        "feature_stride": Int(16, "image pixels per score-map cell"),
        "output_score": Bool(False, "also output the score of every box"),
        "iou_loss": Bool(False, "deltas are corner offsets instead of centre/size deltas"),
    }
    single_image = False
    head_grad_unused = True     # the inputs' gradients are zero whatever the outputs' are

    def check_params(self, p):
        if p.rpn_post_nms_top_n <= 0 or p.feature_stride <= 0:
            raise self.error("rpn_post_nms_top_n (%d) and feature_stride (%d) must be positive",
                             p.rpn_post_nms_top_n, p.feature_stride)
        if not p.scales or not p.ratios or min(p.scales + p.ratios) <= 0:
            raise self.error("scales %s and ratios %s must be non-empty and positive",
                             tuple(p.scales or ()), tuple(p.ratios or ()))
        p._anchors = _anchors(p.feature_stride, p.scales, p.ratios)

    def num_outputs(self, p):
        return 2

    def num_visible_outputs(self, p):
        return 2 if p.output_score else 1

    def list_outputs(self, p):
        return ["output", "score"][:self.num_visible_outputs(p)]

    def infer_shape(self, p, in_shapes):
        cls, bbox, info = in_shapes
        if cls is None:
            return list(in_shapes), [None, None]
        cls = tuple(cls)
        anchors = len(p._anchors)
        if len(cls) != 4 or cls[1] != 2 * anchors:
            raise self.error("cls_prob has shape %s, expected (batch, 2 * %d anchors, height, "
                             "width)", cls, anchors)
        if self.single_image and cls[0] != 1:
            raise self.error("cls_prob has shape %s: Proposal takes one image (batch size 1); "
                             "MultiProposal takes a batch", cls)
        n = cls[0]
        try:
            bbox = merge_shape(bbox, (n, 4 * anchors) + cls[2:])
        except ValueError:
            raise self.error("bbox_pred has shape %s, expected %s", tuple(bbox),
                             (n, 4 * anchors) + cls[2:]) from None
        try:
            info = merge_shape(info, (n, 3))
        except ValueError:
            raise self.error("im_info has shape %s, expected (%d, 3)", tuple(info), n) from None
        rows = n * p.rpn_post_nms_top_n
        return [cls, bbox, info], [(rows, 5), (rows, 1)]

    def _check_image_sizes(self, p, k, cls, im_info):
        cells = k.to_host(im_info)[:, :2] // p.feature_stride
        for b, (rows, cols) in enumerate(cells):
            if rows > cls.shape[2] or cols > cls.shape[3]:
                raise self.error("im_info row %d says the image is %s pixels: %d x %d cells of "
                                 "feature_stride %d, more than the score map's %d x %d", b,
                                 tuple(k.to_host(im_info)[b, :2]), rows, cols, p.feature_stride,
                                 cls.shape[2], cls.shape[3])

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        cls = inputs[0]
        self._check_image_sizes(p, k, cls, inputs[2])
        count = cls.shape[2] * cls.shape[3] * len(p._anchors)
        work = (scratch(k, state, "boxes", (cls.shape[0], count, 4), cls.dtype),
                scratch(k, state, "scores", (cls.shape[0], count), cls.dtype))
        k.proposals(cls, inputs[1], inputs[2], p._anchors, p.feature_stride,
                    p.rpn_pre_nms_top_n, p.rpn_post_nms_top_n, p.threshold, p.rpn_min_size,
                    p.iou_loss, outputs[0], outputs[1], work)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        zero_grads(k, in_grads, req)     # proposals are not differentiable


@register
class Proposal(MultiProposal):
    """MultiProposal for a single image (batch size 1)."""
    name = "_contrib_Proposal"
    hint = "proposal"
    single_image = True
