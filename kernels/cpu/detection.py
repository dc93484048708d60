"""CPU kernels of the region operators and of DeformableConvolution's sampling; the
per-element math is ``kernels/scalar_detection.py``.

``rois`` rows are (batch index, coordinates...). Forward loops run over ROIs in parallel;
gradients that scatter into the feature map loop over channels in parallel (ROIs may overlap,
channels never do) and add, after a 'write' request zeroed the destination.
"""
import math

import numpy as np
from numba import njit, prange

from ..scalar_detection import (
    align_corners_weights,
    box_overlap,
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
from .jit import parallel_loop

__all__ = ["roi_pool", "roi_pool_backward", "psroi_pool", "psroi_pool_backward",
           "rroi_align", "rroi_align_backward", "deform_im2col", "deform_col2im",
           "deform_offset_grad", "proposals"]


# --- ROIPooling ---------------------------------------------------------------------------------
@parallel_loop(cost=4.0)
def _roi_pool(x, rois, scale, out, argmax):
    n, channels, h, w = x.shape
    ph_n, pw_n = out.shape[2], out.shape[3]
    for r in prange(rois.shape[0]):
        b = clip_int(int(rois[r, 0]), 0, n - 1)
        x0 = int(round_half_away(rois[r, 1] * scale))
        y0 = int(round_half_away(rois[r, 2] * scale))
        x1 = int(round_half_away(rois[r, 3] * scale))
        y1 = int(round_half_away(rois[r, 4] * scale))
        bin_h = max(y1 - y0 + 1, 1) / ph_n
        bin_w = max(x1 - x0 + 1, 1) / pw_n
        for c in range(channels):
            for ph in range(ph_n):
                hs, he = roi_pool_bin(ph, y0, bin_h, h)
                for pw in range(pw_n):
                    ws, we = roi_pool_bin(pw, x0, bin_w, w)
                    best = -math.inf
                    where = -1
                    for i in range(hs, he):
                        for j in range(ws, we):
                            if x[b, c, i, j] > best:
                                best = x[b, c, i, j]
                                where = i * w + j
                    out[r, c, ph, pw] = best if where >= 0 else 0.0
                    argmax[r, c, ph, pw] = where


@parallel_loop(cost=1.0)
def _roi_pool_backward(dy, rois, argmax, dx):
    n, channels, h, w = dx.shape
    for c in prange(channels):
        for r in range(dy.shape[0]):
            b = clip_int(int(rois[r, 0]), 0, n - 1)
            for ph in range(dy.shape[2]):
                for pw in range(dy.shape[3]):
                    where = int(argmax[r, c, ph, pw])
                    if where >= 0:
                        dx[b, c, where // w, where % w] += dy[r, c, ph, pw]


def roi_pool(x, rois, spatial_scale, out, argmax):
    """out (R, C, ph, pw) = the max of x over every cell of every ROI (0 for an empty cell);
    argmax (same shape) keeps the flat h * W + w position of each maximum (-1: empty)."""
    _roi_pool(out.size * 4, x, rois, float(spatial_scale), out, argmax)


def roi_pool_backward(dy, rois, argmax, dx, accumulate=False):
    if not accumulate:
        dx[...] = 0
    _roi_pool_backward(dy.size, dy, rois, argmax, dx)


# --- PSROIPooling -------------------------------------------------------------------------------
@parallel_loop(cost=4.0)
def _psroi_pool(x, rois, scale, group, out):
    n, channels, h, w = x.shape
    dims, pooled = out.shape[1], out.shape[2]
    for r in prange(rois.shape[0]):
        b = clip_int(int(rois[r, 0]), 0, n - 1)
        x0 = round_half_away(rois[r, 1]) * scale
        y0 = round_half_away(rois[r, 2]) * scale
        x1 = (round_half_away(rois[r, 3]) + 1.0) * scale
        y1 = (round_half_away(rois[r, 4]) + 1.0) * scale
        bin_h = max(y1 - y0, 0.1) / pooled
        bin_w = max(x1 - x0, 0.1) / pooled
        for d in range(dims):
            for ph in range(pooled):
                hs, he = psroi_bin(ph, y0, bin_h, h)
                gh = group_cell(ph, pooled, group)
                for pw in range(pooled):
                    ws, we = psroi_bin(pw, x0, bin_w, w)
                    c = (d * group + gh) * group + group_cell(pw, pooled, group)
                    total = 0.0
                    for i in range(hs, he):
                        for j in range(ws, we):
                            total += x[b, c, i, j]
                    area = (he - hs) * (we - ws)
                    out[r, d, ph, pw] = total / area if area > 0 else 0.0


@parallel_loop(cost=1.0)
def _psroi_pool_backward(dy, rois, scale, group, dx):
    n, channels, h, w = dx.shape
    dims, pooled = dy.shape[1], dy.shape[2]
    for d in prange(dims):
        for r in range(dy.shape[0]):
            b = clip_int(int(rois[r, 0]), 0, n - 1)
            x0 = round_half_away(rois[r, 1]) * scale
            y0 = round_half_away(rois[r, 2]) * scale
            x1 = (round_half_away(rois[r, 3]) + 1.0) * scale
            y1 = (round_half_away(rois[r, 4]) + 1.0) * scale
            bin_h = max(y1 - y0, 0.1) / pooled
            bin_w = max(x1 - x0, 0.1) / pooled
            for ph in range(pooled):
                hs, he = psroi_bin(ph, y0, bin_h, h)
                gh = group_cell(ph, pooled, group)
                for pw in range(pooled):
                    ws, we = psroi_bin(pw, x0, bin_w, w)
                    area = (he - hs) * (we - ws)
                    if area <= 0:
                        continue
                    c = (d * group + gh) * group + group_cell(pw, pooled, group)
                    g = dy[r, d, ph, pw] / area
                    for i in range(hs, he):
                        for j in range(ws, we):
                            dx[b, c, i, j] += g


def psroi_pool(x, rois, spatial_scale, group_size, out):
    """out (R, D, p, p): cell (ph, pw) of output channel d averages input channel
    (d * G + gh) * G + gw over the cell, (gh, gw) being the cell's group position."""
    _psroi_pool(out.size * 4, x, rois, float(spatial_scale), int(group_size), out)


def psroi_pool_backward(dy, rois, spatial_scale, group_size, dx, accumulate=False):
    if not accumulate:
        dx[...] = 0
    _psroi_pool_backward(dy.size, dy, rois, float(spatial_scale), int(group_size), dx)


# --- RROIAlign ----------------------------------------------------------------------------------
@parallel_loop(cost=8.0)
def _rroi_align(x, rois, scale, ratio, out):
    n, channels, h, w = x.shape
    ph_n, pw_n = out.shape[2], out.shape[3]
    for r in prange(rois.shape[0]):
        b = clip_int(int(rois[r, 0]), 0, n - 1)
        cx, cy, rw, rh, cos_t, sin_t = rotated_frame(rois[r, 1], rois[r, 2], rois[r, 3],
                                                     rois[r, 4], rois[r, 5], scale)
        grid_h = samples_per_cell(rh, ph_n, ratio)
        grid_w = samples_per_cell(rw, pw_n, ratio)
        for c in range(channels):
            for ph in range(ph_n):
                for pw in range(pw_n):
                    total = 0.0
                    for iy in range(grid_h):
                        yy = cell_sample(ph, iy, rh, ph_n, grid_h)
                        for ix in range(grid_w):
                            xx = cell_sample(pw, ix, rw, pw_n, grid_w)
                            px, py = rotated_point(xx, yy, cos_t, sin_t, cx, cy)
                            ok, y0, y1, x0, x1, w00, w01, w10, w11 = align_corners_weights(
                                py, px, h, w)
                            if ok:
                                total += (w00 * x[b, c, y0, x0] + w01 * x[b, c, y0, x1]
                                          + w10 * x[b, c, y1, x0] + w11 * x[b, c, y1, x1])
                    out[r, c, ph, pw] = total / (grid_h * grid_w)


@parallel_loop(cost=8.0)
def _rroi_align_backward(dy, rois, scale, ratio, dx):
    n, channels, h, w = dx.shape
    ph_n, pw_n = dy.shape[2], dy.shape[3]
    for c in prange(channels):
        for r in range(rois.shape[0]):
            b = clip_int(int(rois[r, 0]), 0, n - 1)
            cx, cy, rw, rh, cos_t, sin_t = rotated_frame(rois[r, 1], rois[r, 2], rois[r, 3],
                                                         rois[r, 4], rois[r, 5], scale)
            grid_h = samples_per_cell(rh, ph_n, ratio)
            grid_w = samples_per_cell(rw, pw_n, ratio)
            for ph in range(ph_n):
                for pw in range(pw_n):
                    g = dy[r, c, ph, pw] / (grid_h * grid_w)
                    for iy in range(grid_h):
                        yy = cell_sample(ph, iy, rh, ph_n, grid_h)
                        for ix in range(grid_w):
                            xx = cell_sample(pw, ix, rw, pw_n, grid_w)
                            px, py = rotated_point(xx, yy, cos_t, sin_t, cx, cy)
                            ok, y0, y1, x0, x1, w00, w01, w10, w11 = align_corners_weights(
                                py, px, h, w)
                            if ok:
                                dx[b, c, y0, x0] += w00 * g
                                dx[b, c, y0, x1] += w01 * g
                                dx[b, c, y1, x0] += w10 * g
                                dx[b, c, y1, x1] += w11 * g


def rroi_align(x, rois, spatial_scale, sampling_ratio, out):
    """out (R, C, ph, pw): every cell of every rotated ROI (batch, cx, cy, w, h, degrees)
    averages bilinear samples on a grid of ``sampling_ratio``^2 points per cell (adaptive:
    ceil(cell size) per axis)."""
    _rroi_align(out.size * 8, x, rois, float(spatial_scale), int(sampling_ratio), out)


def rroi_align_backward(dy, rois, spatial_scale, sampling_ratio, dx, accumulate=False):
    if not accumulate:
        dx[...] = 0
    _rroi_align_backward(dy.size * 8, dy, rois, float(spatial_scale), int(sampling_ratio), dx)


# --- DeformableConvolution ----------------------------------------------------------------------
# geometry g = (kh, kw, sh, sw, ph, pw, dh, dw, deformable groups); x (C, H, W) is one sample,
# offset (groups * 2 * kh * kw, OH, OW) its offsets (h then w for every tap), col
# (C * kh * kw, OH * OW) the sampled columns.
@parallel_loop(cost=8.0)
def _deform_im2col(x, offset, col, g):
    kh, kw, sh, sw, ph, pw, dh, dw, groups = g
    channels, h, w = x.shape
    oh, ow = offset.shape[1], offset.shape[2]
    per_group = channels // groups
    for row in prange(channels * kh * kw):
        c = row // (kh * kw)
        i = (row // kw) % kh
        j = row % kw
        base = (c // per_group) * 2 * kh * kw + 2 * (i * kw + j)
        for a in range(oh):
            for b in range(ow):
                y = deform_position(a, i, sh, ph, dh, offset[base, a, b])
                z = deform_position(b, j, sw, pw, dw, offset[base + 1, a, b])
                ok, h0, h1, w0, w1, fh, fw = deform_corners(y, z, h, w)
                v = 0.0
                if ok:
                    v = ((1.0 - fh) * ((1.0 - fw) * x[c, h0, w0] + fw * x[c, h0, w1])
                         + fh * ((1.0 - fw) * x[c, h1, w0] + fw * x[c, h1, w1]))
                col[row, a * ow + b] = v


@parallel_loop(cost=8.0)
def _deform_col2im(dcol, offset, dx, g):
    kh, kw, sh, sw, ph, pw, dh, dw, groups = g
    channels, h, w = dx.shape
    oh, ow = offset.shape[1], offset.shape[2]
    per_group = channels // groups
    for c in prange(channels):
        for i in range(kh):
            for j in range(kw):
                row = (c * kh + i) * kw + j
                base = (c // per_group) * 2 * kh * kw + 2 * (i * kw + j)
                for a in range(oh):
                    for b in range(ow):
                        y = deform_position(a, i, sh, ph, dh, offset[base, a, b])
                        z = deform_position(b, j, sw, pw, dw, offset[base + 1, a, b])
                        ok, h0, h1, w0, w1, fh, fw = deform_corners(y, z, h, w)
                        if ok:
                            gv = dcol[row, a * ow + b]
                            dx[c, h0, w0] += (1.0 - fh) * (1.0 - fw) * gv
                            dx[c, h0, w1] += (1.0 - fh) * fw * gv
                            dx[c, h1, w0] += fh * (1.0 - fw) * gv
                            dx[c, h1, w1] += fh * fw * gv


@parallel_loop(cost=8.0)
def _deform_offset_grad(dcol, x, offset, doffset, g, accumulate):
    kh, kw, sh, sw, ph, pw, dh, dw, groups = g
    channels, h, w = x.shape
    oh, ow = offset.shape[1], offset.shape[2]
    per_group = channels // groups
    for t in prange(groups * kh * kw):
        grp = t // (kh * kw)
        i = (t // kw) % kh
        j = t % kw
        base = grp * 2 * kh * kw + 2 * (i * kw + j)
        for a in range(oh):
            for b in range(ow):
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
    """col (C * kh * kw, OH * OW) = x (C, H, W) sampled bilinearly at every tap moved by its
    offset (one sample of a deformable convolution)."""
    _deform_im2col(col.size * 4, x, offset, col, geometry)


def deform_col2im(dcol, offset, dx, geometry):
    """dx (C, H, W) += the columns' gradient spread back onto the sampled pixels."""
    _deform_col2im(dcol.size * 4, dcol, offset, dx, geometry)


def deform_offset_grad(dcol, x, offset, doffset, geometry, accumulate=False):
    """doffset (like offset) (+)= the gradient of the sampled columns by the offsets."""
    _deform_offset_grad(dcol.size * 4, dcol, x, offset, doffset, geometry, bool(accumulate))


# --- Proposal / MultiProposal -------------------------------------------------------------------
@njit(cache=True)
def _decode_image(cls, deltas, info, anchors, stride, min_size, iou_loss, boxes, scores):
    """Every anchor at every position of one image as a clipped box (boxes (count, 4)) with
    its foreground score (scores); boxes smaller than min_size get score -1."""
    count_a = anchors.shape[0]
    height, width = cls.shape[1], cls.shape[2]
    real_h = int(info[0] / stride)
    real_w = int(info[1] / stride)
    for i in range(height):
        for j in range(width):
            for a in range(count_a):
                t = (i * width + j) * count_a + a
                x1, y1, x2, y2 = decode_box(
                    anchors[a, 0] + j * stride, anchors[a, 1] + i * stride,
                    anchors[a, 2] + j * stride, anchors[a, 3] + i * stride,
                    deltas[4 * a, i, j], deltas[4 * a + 1, i, j], deltas[4 * a + 2, i, j],
                    deltas[4 * a + 3, i, j], info[0], info[1], iou_loss)
                score = cls[count_a + a, i, j]
                if i >= real_h or j >= real_w:      # a cell past the image's own size
                    score = -1.0
                if x2 - x1 + 1.0 < min_size or y2 - y1 + 1.0 < min_size:
                    x1 -= min_size / 2.0
                    y1 -= min_size / 2.0
                    x2 += min_size / 2.0
                    y2 += min_size / 2.0
                    score = -1.0
                boxes[t, 0] = x1
                boxes[t, 1] = y1
                boxes[t, 2] = x2
                boxes[t, 3] = y2
                scores[t] = score


@njit(cache=True)
def select_proposals(boxes, scores, order, pre_n, post_n, threshold, image, rois, out_scores,
                     suppressed, keep):
    """Greedy non-maximum suppression over the ``pre_n`` best boxes (``order`` sorts them by
    score, best first); the first ``post_n`` survivors fill rois (image, x1, y1, x2, y2) and
    out_scores, repeated cyclically when fewer survive."""
    n = min(pre_n, order.size) if pre_n > 0 else order.size
    suppressed[:n] = False
    kept = 0
    for i in range(n):
        if kept >= post_n:
            break
        if suppressed[i]:
            continue
        keep[kept] = i
        kept += 1
        a = order[i]
        for j in range(i + 1, n):
            if suppressed[j]:
                continue
            b = order[j]
            if box_overlap(boxes[a, 0], boxes[a, 1], boxes[a, 2], boxes[a, 3], boxes[b, 0],
                           boxes[b, 1], boxes[b, 2], boxes[b, 3]) > threshold:
                suppressed[j] = True
    for r in range(post_n):
        src = order[keep[r % kept]] if kept > 0 else order[0]
        rois[r, 0] = image
        for q in range(4):
            rois[r, q + 1] = boxes[src, q]
        out_scores[r, 0] = scores[src]


@njit(cache=True)
def _proposals(cls, deltas, info, anchors, stride, pre_n, post_n, threshold, min_size, iou_loss,
               rois, out_scores, boxes, scores):
    suppressed = np.empty(scores.shape[1], np.bool_)
    keep = np.empty(scores.shape[1], np.int64)
    for b in range(cls.shape[0]):
        _decode_image(cls[b], deltas[b], info[b], anchors, stride, min_size * info[b, 2],
                      iou_loss, boxes[b], scores[b])
        order = np.argsort(-scores[b], kind="mergesort")     # best first; ties keep their order
        select_proposals(boxes[b], scores[b], order, pre_n, post_n, threshold, b,
                         rois[b * post_n:(b + 1) * post_n],
                         out_scores[b * post_n:(b + 1) * post_n], suppressed, keep)


def proposals(cls_prob, bbox_pred, im_info, anchors, feature_stride, pre_nms_top_n,
              post_nms_top_n, threshold, min_size, iou_loss, rois, scores, work):
    """Region proposals of every image (see the Proposal operator): rois (N * post, 5) and
    scores (N * post, 1). ``work`` is (boxes (N, count, 4), scores (N, count)), count being
    the anchors of one image."""
    boxes, box_scores = work
    _proposals(cls_prob, bbox_pred, im_info, anchors, float(feature_stride), int(pre_nms_top_n),
               int(post_nms_top_n), float(threshold), float(min_size), bool(iou_loss), rois,
               scores, boxes, box_scores)
