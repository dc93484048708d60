"""CUDA kernels of the region operators: the same functions and signatures as
``kernels/cpu/detection.py``, one thread per output element calling
``kernels/scalar_detection.py``; gradients scatter with atomics."""
import math

import numpy as np
from numba import cuda

from ..cpu.detection import select_proposals
from ..scalar_detection import (
    align_corners_weights,
    cell_sample,
    clip_int,
    decode_box,
    deform_corners,
    deform_position,
    group_cell,
    psroi_bin,
    roi_pool_bin,
    rotated_frame,
    rotated_point,
    round_half_away,
    samples_per_cell,
)
from .memory import fill, launch_config

__all__ = ["roi_pool", "roi_pool_backward", "psroi_pool", "psroi_pool_backward",
           "rroi_align", "rroi_align_backward", "deform_im2col", "deform_col2im",
           "deform_offset_grad", "proposals"]


# --- ROIPooling ---------------------------------------------------------------------------------
@cuda.jit
def _roi_pool_k(x, rois, scale, out, argmax):
    n, h, w = x.shape[0], x.shape[2], x.shape[3]
    channels, ph_n, pw_n = out.shape[1], out.shape[2], out.shape[3]
    for t in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        r = t // (channels * ph_n * pw_n)
        c = (t // (ph_n * pw_n)) % channels
        ph = (t // pw_n) % ph_n
        pw = t % pw_n
        b = clip_int(int(rois[r, 0]), 0, n - 1)
        x0 = int(round_half_away(rois[r, 1] * scale))
        y0 = int(round_half_away(rois[r, 2] * scale))
        x1 = int(round_half_away(rois[r, 3] * scale))
        y1 = int(round_half_away(rois[r, 4] * scale))
        hs, he = roi_pool_bin(ph, y0, max(y1 - y0 + 1, 1) / ph_n, h)
        ws, we = roi_pool_bin(pw, x0, max(x1 - x0 + 1, 1) / pw_n, w)
        best = -math.inf
        where = -1
        for i in range(hs, he):
            for j in range(ws, we):
                if x[b, c, i, j] > best:
                    best = x[b, c, i, j]
                    where = i * w + j
        out[r, c, ph, pw] = best if where >= 0 else 0.0
        argmax[r, c, ph, pw] = where


@cuda.jit
def _roi_pool_backward_k(dy, rois, argmax, dx):
    n, w = dx.shape[0], dx.shape[3]
    channels, ph_n, pw_n = dy.shape[1], dy.shape[2], dy.shape[3]
    for t in range(cuda.grid(1), dy.size, cuda.gridsize(1)):
        r = t // (channels * ph_n * pw_n)
        c = (t // (ph_n * pw_n)) % channels
        ph = (t // pw_n) % ph_n
        pw = t % pw_n
        where = int(argmax[r, c, ph, pw])
        if where >= 0:
            b = clip_int(int(rois[r, 0]), 0, n - 1)
            cuda.atomic.add(dx, (b, c, where // w, where % w), dy[r, c, ph, pw])


def roi_pool(x, rois, spatial_scale, out, argmax):
    if out.size:
        _roi_pool_k[launch_config(out.size)](x, rois, float(spatial_scale), out, argmax)


def roi_pool_backward(dy, rois, argmax, dx, accumulate=False):
    if not accumulate:
        fill(dx, 0)
    if dy.size:
        _roi_pool_backward_k[launch_config(dy.size)](dy, rois, argmax, dx)


# --- PSROIPooling -------------------------------------------------------------------------------
@cuda.jit
def _psroi_k(x, rois, scale, group, out, dy, dx, backward):
    # forward: out = the cell means; backward: dy / area added over every cell into dx
    n, h, w = x.shape[0], x.shape[2], x.shape[3]
    dims, pooled = out.shape[1], out.shape[2]
    for t in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        r = t // (dims * pooled * pooled)
        d = (t // (pooled * pooled)) % dims
        ph = (t // pooled) % pooled
        pw = t % pooled
        b = clip_int(int(rois[r, 0]), 0, n - 1)
        x0 = round_half_away(rois[r, 1]) * scale
        y0 = round_half_away(rois[r, 2]) * scale
        x1 = (round_half_away(rois[r, 3]) + 1.0) * scale
        y1 = (round_half_away(rois[r, 4]) + 1.0) * scale
        hs, he = psroi_bin(ph, y0, max(y1 - y0, 0.1) / pooled, h)
        ws, we = psroi_bin(pw, x0, max(x1 - x0, 0.1) / pooled, w)
        c = (d * group + group_cell(ph, pooled, group)) * group + group_cell(pw, pooled, group)
        area = (he - hs) * (we - ws)
        if backward:
            if area > 0:
                g = dy[r, d, ph, pw] / area
                for i in range(hs, he):
                    for j in range(ws, we):
                        cuda.atomic.add(dx, (b, c, i, j), g)
        else:
            total = 0.0
            for i in range(hs, he):
                for j in range(ws, we):
                    total += x[b, c, i, j]
            out[r, d, ph, pw] = total / area if area > 0 else 0.0


def psroi_pool(x, rois, spatial_scale, group_size, out):
    if out.size:
        _psroi_k[launch_config(out.size)](x, rois, float(spatial_scale), int(group_size), out,
                                          out, x, False)


def psroi_pool_backward(dy, rois, spatial_scale, group_size, dx, accumulate=False):
    if not accumulate:
        fill(dx, 0)
    if dy.size:
        _psroi_k[launch_config(dy.size)](dx, rois, float(spatial_scale), int(group_size), dy,
                                         dy, dx, True)


# --- RROIAlign ----------------------------------------------------------------------------------
@cuda.jit
def _rroi_k(x, rois, scale, ratio, out, dy, dx, backward):
    # forward: out = the mean of the cell's samples; backward: dy spread over them into dx
    n, h, w = x.shape[0], x.shape[2], x.shape[3]
    channels, ph_n, pw_n = out.shape[1], out.shape[2], out.shape[3]
    for t in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        r = t // (channels * ph_n * pw_n)
        c = (t // (ph_n * pw_n)) % channels
        ph = (t // pw_n) % ph_n
        pw = t % pw_n
        b = clip_int(int(rois[r, 0]), 0, n - 1)
        cx, cy, rw, rh, cos_t, sin_t = rotated_frame(rois[r, 1], rois[r, 2], rois[r, 3],
                                                     rois[r, 4], rois[r, 5], scale)
        grid_h = samples_per_cell(rh, ph_n, ratio)
        grid_w = samples_per_cell(rw, pw_n, ratio)
        g = dy[r, c, ph, pw] / (grid_h * grid_w) if backward else 0.0
        total = 0.0
        for iy in range(grid_h):
            yy = cell_sample(ph, iy, rh, ph_n, grid_h)
            for ix in range(grid_w):
                xx = cell_sample(pw, ix, rw, pw_n, grid_w)
                px, py = rotated_point(xx, yy, cos_t, sin_t, cx, cy)
                ok, y0, y1, x0, x1, w00, w01, w10, w11 = align_corners_weights(py, px, h, w)
                if not ok:
                    continue
                if backward:
                    cuda.atomic.add(dx, (b, c, y0, x0), w00 * g)
                    cuda.atomic.add(dx, (b, c, y0, x1), w01 * g)
                    cuda.atomic.add(dx, (b, c, y1, x0), w10 * g)
                    cuda.atomic.add(dx, (b, c, y1, x1), w11 * g)
                else:
                    total += (w00 * x[b, c, y0, x0] + w01 * x[b, c, y0, x1]
                              + w10 * x[b, c, y1, x0] + w11 * x[b, c, y1, x1])
        if not backward:
            out[r, c, ph, pw] = total / (grid_h * grid_w)


def rroi_align(x, rois, spatial_scale, sampling_ratio, out):
    if out.size:
        _rroi_k[launch_config(out.size)](x, rois, float(spatial_scale), int(sampling_ratio),
                                         out, out, x, False)


def rroi_align_backward(dy, rois, spatial_scale, sampling_ratio, dx, accumulate=False):
    if not accumulate:
        fill(dx, 0)
    if dy.size:
        _rroi_k[launch_config(dy.size)](dx, rois, float(spatial_scale), int(sampling_ratio), dy,
                                        dy, dx, True)


# --- DeformableConvolution ----------------------------------------------------------------------
@cuda.jit
def _deform_k(x, offset, col, g, mode):
    # mode 0: col = the sampled columns; mode 1: col holds their gradient, spread into x
    kh, kw, sh, sw, ph, pw, dh, dw, groups = g
    channels, h, w = x.shape
    oh, ow = offset.shape[1], offset.shape[2]
    per_group = channels // groups
    for t in range(cuda.grid(1), col.size, cuda.gridsize(1)):
        row = t // (oh * ow)
        a = (t // ow) % oh
        b = t % ow
        c = row // (kh * kw)
        i = (row // kw) % kh
        j = row % kw
        base = (c // per_group) * 2 * kh * kw + 2 * (i * kw + j)
        y = deform_position(a, i, sh, ph, dh, offset[base, a, b])
        z = deform_position(b, j, sw, pw, dw, offset[base + 1, a, b])
        ok, h0, h1, w0, w1, fh, fw = deform_corners(y, z, h, w)
        if mode == 0:
            v = 0.0
            if ok:
                v = ((1.0 - fh) * ((1.0 - fw) * x[c, h0, w0] + fw * x[c, h0, w1])
                     + fh * ((1.0 - fw) * x[c, h1, w0] + fw * x[c, h1, w1]))
            col[row, a * ow + b] = v
        elif ok:
            gv = col[row, a * ow + b]
            cuda.atomic.add(x, (c, h0, w0), (1.0 - fh) * (1.0 - fw) * gv)
            cuda.atomic.add(x, (c, h0, w1), (1.0 - fh) * fw * gv)
            cuda.atomic.add(x, (c, h1, w0), fh * (1.0 - fw) * gv)
            cuda.atomic.add(x, (c, h1, w1), fh * fw * gv)


@cuda.jit
def _deform_offset_grad_k(dcol, x, offset, doffset, g, accumulate):
    kh, kw, sh, sw, ph, pw, dh, dw, groups = g
    channels, h, w = x.shape
    oh, ow = offset.shape[1], offset.shape[2]
    per_group = channels // groups
    for t in range(cuda.grid(1), groups * kh * kw * oh * ow, cuda.gridsize(1)):
        tap = t // (oh * ow)
        a = (t // ow) % oh
        b = t % ow
        grp = tap // (kh * kw)
        i = (tap // kw) % kh
        j = tap % kw
        base = grp * 2 * kh * kw + 2 * (i * kw + j)
        y = deform_position(a, i, sh, ph, dh, offset[base, a, b])
        z = deform_position(b, j, sw, pw, dw, offset[base + 1, a, b])
        ok, h0, h1, w0, w1, fh, fw = deform_corners(y, z, h, w)
        gy = 0.0
        gz = 0.0
        if ok:
            for c in range(grp * per_group, (grp + 1) * per_group):
                gv = dcol[(c * kh + i) * kw + j, a * ow + b]
                if h1 != h0:
                    gy += gv * ((1.0 - fw) * (x[c, h1, w0] - x[c, h0, w0])
                                + fw * (x[c, h1, w1] - x[c, h0, w1]))
                if w1 != w0:
                    gz += gv * ((1.0 - fh) * (x[c, h0, w1] - x[c, h0, w0])
                                + fh * (x[c, h1, w1] - x[c, h1, w0]))
        if accumulate:
            doffset[base, a, b] += gy
            doffset[base + 1, a, b] += gz
        else:
            doffset[base, a, b] = gy
            doffset[base + 1, a, b] = gz


def deform_im2col(x, offset, col, geometry):
    if col.size:
        _deform_k[launch_config(col.size)](x, offset, col, geometry, 0)


def deform_col2im(dcol, offset, dx, geometry):
    if dcol.size:
        _deform_k[launch_config(dcol.size)](dx, offset, dcol, geometry, 1)


def deform_offset_grad(dcol, x, offset, doffset, geometry, accumulate=False):
    n = doffset.size // 2
    if n:
        _deform_offset_grad_k[launch_config(n)](dcol, x, offset, doffset, geometry,
                                                bool(accumulate))


# --- Proposal / MultiProposal -------------------------------------------------------------------
@cuda.jit
def _decode_k(cls, deltas, info, anchors, stride, min_size, iou_loss, boxes, scores):
    count_a = anchors.shape[0]
    height, width = cls.shape[2], cls.shape[3]
    per_image = height * width * count_a
    for t in range(cuda.grid(1), cls.shape[0] * per_image, cuda.gridsize(1)):
        b = t // per_image
        q = t % per_image
        i = q // (width * count_a)
        j = (q // count_a) % width
        a = q % count_a
        x1, y1, x2, y2 = decode_box(
            anchors[a, 0] + j * stride, anchors[a, 1] + i * stride,
            anchors[a, 2] + j * stride, anchors[a, 3] + i * stride,
            deltas[b, 4 * a, i, j], deltas[b, 4 * a + 1, i, j], deltas[b, 4 * a + 2, i, j],
            deltas[b, 4 * a + 3, i, j], info[b, 0], info[b, 1], iou_loss)
        score = cls[b, count_a + a, i, j]
        if i >= int(info[b, 0] / stride) or j >= int(info[b, 1] / stride):
            score = -1.0        # a cell past the image's own size
        small = min_size * info[b, 2]
        if x2 - x1 + 1.0 < small or y2 - y1 + 1.0 < small:
            x1 -= small / 2.0
            y1 -= small / 2.0
            x2 += small / 2.0
            y2 += small / 2.0
            score = -1.0
        boxes[b, q, 0] = x1
        boxes[b, q, 1] = y1
        boxes[b, q, 2] = x2
        boxes[b, q, 3] = y2
        scores[b, q] = score


def proposals(cls_prob, bbox_pred, im_info, anchors, feature_stride, pre_nms_top_n,
              post_nms_top_n, threshold, min_size, iou_loss, rois, scores, work):
    """Region proposals (see the CPU kernel set): the boxes are decoded on the GPU; sorting
    and the greedy suppression, sequential by nature, run on the host."""
    boxes, box_scores = work
    n = box_scores.size
    if n:
        _decode_k[launch_config(n)](cls_prob, bbox_pred, im_info, cuda.to_device(anchors),
                                    float(feature_stride), float(min_size), bool(iou_loss),
                                    boxes, box_scores)
    host_boxes, host_scores = boxes.copy_to_host(), box_scores.copy_to_host()
    out_rois = np.empty(tuple(rois.shape), np.float64)
    out_scores = np.empty(tuple(scores.shape), np.float64)
    suppressed = np.empty(host_scores.shape[1], np.bool_)
    keep = np.empty(host_scores.shape[1], np.int64)
    post = int(post_nms_top_n)
    for b in range(host_scores.shape[0]):
        order = np.argsort(-host_scores[b], kind="stable")
        select_proposals(host_boxes[b], host_scores[b], order, int(pre_nms_top_n), post,
                         float(threshold), b, out_rois[b * post:(b + 1) * post],
                         out_scores[b * post:(b + 1) * post], suppressed, keep)
    rois.copy_to_device(out_rois.astype(rois.dtype))
    scores.copy_to_device(out_scores.astype(scores.dtype))
