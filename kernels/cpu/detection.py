"""CPU kernels of the region operators and of DeformableConvolution's sampling; the
per-element math is ``kernels/scalar_detection.py``.

``rois`` rows are (batch index, coordinates...). Forward loops run over ROIs in parallel;
gradients that scatter into the feature map loop over channels in parallel (ROIs may overlap,
channels never do) and add, after a 'write' request zeroed the destination.
"""
import numpy as np
from numba import njit, prange

from .. import cache_stamp  # noqa: F401  (stamps the cache entries made below)
from .. import detection_math as M
from .. import scalar_detection as S
from ..math_build import compiled
from .jit import parallel_loop

__all__ = ["roi_pool", "roi_pool_backward", "psroi_pool", "psroi_pool_backward",
           "rroi_align", "rroi_align_backward", "roi_align", "roi_align_backward",
           "deform_im2col", "deform_col2im", "deform_offset_grad", "proposals"]

# the per-element functions of kernels/detection_math.py, inlined into the loops below
K = compiled(M, njit(cache=True, inline="always"))


# --- ROIPooling ---------------------------------------------------------------------------------
@parallel_loop(cost=4.0)
def _roi_pool(x, rois, scale, out, argmax):
    n, channels, h, w = x.shape
    ph_n, pw_n = out.shape[2], out.shape[3]
    for r in prange(rois.shape[0]):
        b = S.clip_int(int(rois[r, 0]), 0, n - 1)
        x0, y0, bin_h, bin_w = S.roi_pool_frame(rois[r, 1], rois[r, 2], rois[r, 3], rois[r, 4],
                                              scale, ph_n, pw_n)
        for c in range(channels):
            for ph in range(ph_n):
                hs, he = S.roi_pool_bin(ph, y0, bin_h, h)
                for pw in range(pw_n):
                    ws, we = S.roi_pool_bin(pw, x0, bin_w, w)
                    out[r, c, ph, pw], argmax[r, c, ph, pw] = K.roi_cell_max(x, b, c, hs, he, ws,
                                                                            we, w)


@parallel_loop(cost=1.0)
def _roi_pool_backward(dy, rois, argmax, dx):
    n, channels, h, w = dx.shape
    for c in prange(channels):
        for r in range(dy.shape[0]):
            b = S.clip_int(int(rois[r, 0]), 0, n - 1)
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
    n, h, w = x.shape[0], x.shape[2], x.shape[3]
    dims, pooled = out.shape[1], out.shape[2]
    for r in prange(rois.shape[0]):
        b = S.clip_int(int(rois[r, 0]), 0, n - 1)
        frame = S.psroi_frame(rois[r, 1], rois[r, 2], rois[r, 3], rois[r, 4], scale, pooled)
        for d in range(dims):
            for ph in range(pooled):
                for pw in range(pooled):
                    hs, he, ws, we, c = S.psroi_cell(d, ph, pw, frame, pooled, group, h, w)
                    out[r, d, ph, pw] = K.roi_cell_mean(x, b, c, hs, he, ws, we)


@parallel_loop(cost=1.0)
def _psroi_pool_backward(dy, rois, scale, group, dx):
    # over the output channels in parallel: each reads its own input channels
    n, h, w = dx.shape[0], dx.shape[2], dx.shape[3]
    pooled = dy.shape[2]
    for d in prange(dy.shape[1]):
        for r in range(dy.shape[0]):
            b = S.clip_int(int(rois[r, 0]), 0, n - 1)
            frame = S.psroi_frame(rois[r, 1], rois[r, 2], rois[r, 3], rois[r, 4], scale, pooled)
            for ph in range(pooled):
                for pw in range(pooled):
                    hs, he, ws, we, c = S.psroi_cell(d, ph, pw, frame, pooled, group, h, w)
                    area = (he - hs) * (we - ws)
                    if area <= 0:
                        continue
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
        b = S.clip_int(int(rois[r, 0]), 0, n - 1)
        frame = S.rroi_frame(rois[r, 1], rois[r, 2], rois[r, 3], rois[r, 4], rois[r, 5], scale,
                           ph_n, pw_n, ratio)
        for c in range(channels):
            for ph in range(ph_n):
                for pw in range(pw_n):
                    out[r, c, ph, pw] = K.rroi_cell_mean(x, b, c, ph, pw, frame, ph_n, pw_n, h,
                                                         w)


@parallel_loop(cost=8.0)
def _rroi_align_backward(dy, rois, scale, ratio, dx):
    # over the channels in parallel: rotated ROIs overlap, channels never do
    n, channels, h, w = dx.shape
    ph_n, pw_n = dy.shape[2], dy.shape[3]
    for c in prange(channels):
        for r in range(rois.shape[0]):
            b = S.clip_int(int(rois[r, 0]), 0, n - 1)
            frame = S.rroi_frame(rois[r, 1], rois[r, 2], rois[r, 3], rois[r, 4], rois[r, 5],
                               scale, ph_n, pw_n, ratio)
            grid_h, grid_w = frame[6], frame[7]
            for ph in range(ph_n):
                for pw in range(pw_n):
                    g = dy[r, c, ph, pw] / (grid_h * grid_w)
                    for iy in range(grid_h):
                        for ix in range(grid_w):
                            ok, y0, y1, x0, x1, w00, w01, w10, w11 = S.rroi_sample(
                                frame, ph, pw, iy, ix, ph_n, pw_n, h, w)
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


# --- ROIAlign -----------------------------------------------------------------------------------
@parallel_loop(cost=8.0)
def _roi_align(x, rois, scale, ratio, aligned, sensitive, out):
    n, h, w = x.shape[0], x.shape[2], x.shape[3]
    channels, ph_n, pw_n = out.shape[1], out.shape[2], out.shape[3]
    for r in prange(rois.shape[0]):
        b = int(rois[r, 0])
        frame = S.roi_align_frame(rois[r, 1], rois[r, 2], rois[r, 3], rois[r, 4], scale,
                                  aligned, ph_n, pw_n, ratio)
        for c in range(channels):
            for ph in range(ph_n):
                for pw in range(pw_n):
                    if b < 0:           # MXNet's "no image" ROIs read nothing
                        out[r, c, ph, pw] = 0.0
                        continue
                    c_in = S.roi_align_channel(c, ph, pw, ph_n, pw_n, sensitive)
                    out[r, c, ph, pw] = K.roi_align_cell(x, min(b, n - 1), c_in, ph, pw, frame,
                                                         h, w)


@parallel_loop(cost=8.0)
def _roi_align_backward(dy, rois, scale, ratio, aligned, sensitive, dx):
    # over the output channels in parallel: each reads its own input channels, ROIs overlap
    n, h, w = dx.shape[0], dx.shape[2], dx.shape[3]
    channels, ph_n, pw_n = dy.shape[1], dy.shape[2], dy.shape[3]
    for c in prange(channels):
        for r in range(rois.shape[0]):
            b = int(rois[r, 0])
            if b < 0:
                continue
            b = min(b, n - 1)
            x0, y0, bin_w, bin_h, grid_h, grid_w = S.roi_align_frame(
                rois[r, 1], rois[r, 2], rois[r, 3], rois[r, 4], scale, aligned, ph_n, pw_n,
                ratio)
            for ph in range(ph_n):
                for pw in range(pw_n):
                    c_in = S.roi_align_channel(c, ph, pw, ph_n, pw_n, sensitive)
                    g = dy[r, c, ph, pw] / max(grid_h * grid_w, 1)
                    for iy in range(grid_h):
                        py = S.roi_align_point(y0, ph, iy, bin_h, grid_h)
                        for ix in range(grid_w):
                            px = S.roi_align_point(x0, pw, ix, bin_w, grid_w)
                            ok, ya, yb, xa, xb, w00, w01, w10, w11 = S.align_corners_weights(
                                py, px, h, w)
                            if ok:
                                dx[b, c_in, ya, xa] += w00 * g
                                dx[b, c_in, ya, xb] += w01 * g
                                dx[b, c_in, yb, xa] += w10 * g
                                dx[b, c_in, yb, xb] += w11 * g


def roi_align(x, rois, spatial_scale, sample_ratio, aligned, position_sensitive, out):
    """out (R, C_out, ph, pw): every cell of every ROI (batch, x1, y1, x2, y2) averages
    bilinear samples on a grid of ``sample_ratio``^2 points (adaptive: ceil(cell size) per
    axis); ``position_sensitive`` reads channel group c's (ph, pw)-th channel."""
    _roi_align(out.size * 8, x, rois, float(spatial_scale), int(sample_ratio), bool(aligned),
               bool(position_sensitive), out)


def roi_align_backward(dy, rois, spatial_scale, sample_ratio, aligned, position_sensitive, dx,
                       accumulate=False):
    if not accumulate:
        dx[...] = 0
    _roi_align_backward(dy.size * 8, dy, rois, float(spatial_scale), int(sample_ratio),
                        bool(aligned), bool(position_sensitive), dx)


# --- DeformableConvolution ----------------------------------------------------------------------
# geometry g = (kh, kw, sh, sw, ph, pw, dh, dw, deformable groups); x (C, H, W) is one sample,
# offset (groups * 2 * kh * kw, OH, OW) its offsets (h then w for every tap), col
# (C * kh * kw, OH * OW) the sampled columns.
@parallel_loop(cost=8.0)
def _deform_im2col(x, offset, col, g):
    kh, kw = g[0], g[1]
    channels, h, w = x.shape
    oh, ow = offset.shape[1], offset.shape[2]
    for row in prange(col.shape[0]):
        c, i, j, base = S.deform_row(row, kh, kw, channels // g[8])
        for a in range(oh):
            for b in range(ow):
                corners = S.deform_tap(offset[base, a, b], offset[base + 1, a, b], g, i, j, a, b, h,
                                     w)
                col[row, a * ow + b] = K.deform_value(x, c, corners)


@parallel_loop(cost=8.0)
def _deform_col2im(dcol, offset, dx, g):
    # over the channels in parallel: the taps of one channel add into that channel only
    kh, kw = g[0], g[1]
    channels, h, w = dx.shape
    oh, ow = offset.shape[1], offset.shape[2]
    for c in prange(channels):
        for t in range(kh * kw):
            row = c * kh * kw + t
            _, i, j, base = S.deform_row(row, kh, kw, channels // g[8])
            for a in range(oh):
                for b in range(ow):
                    ok, h0, h1, w0, w1, fh, fw = S.deform_tap(
                        offset[base, a, b], offset[base + 1, a, b], g, i, j, a, b, h, w)
                    if ok:
                        gv = dcol[row, a * ow + b]
                        dx[c, h0, w0] += (1.0 - fh) * (1.0 - fw) * gv
                        dx[c, h0, w1] += (1.0 - fh) * fw * gv
                        dx[c, h1, w0] += fh * (1.0 - fw) * gv
                        dx[c, h1, w1] += fh * fw * gv


@parallel_loop(cost=8.0)
def _deform_offset_grad(dcol, x, offset, doffset, g, accumulate):
    # over the taps of every deformable group in parallel: each owns its two offset rows
    kh, kw = g[0], g[1]
    channels, h, w = x.shape
    oh, ow = offset.shape[1], offset.shape[2]
    per_group = channels // g[8]
    for tap in prange(g[8] * kh * kw):
        grp = tap // (kh * kw)
        _, i, j, base = S.deform_row(grp * per_group * kh * kw + tap % (kh * kw), kh, kw, per_group)
        for a in range(oh):
            for b in range(ow):
                corners = S.deform_tap(offset[base, a, b], offset[base + 1, a, b], g, i, j, a, b, h,
                                     w)
                K.deform_offset_point(dcol, x, doffset, corners, accumulate, grp, per_group, i, j,
                                     kh, kw, base, a, b, ow)


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
@njit(cache=True, nogil=True)
def _decode_image(cls, deltas, info, anchors, stride, min_size, iou_loss, boxes, scores):
    """Every anchor at every position of one image as a clipped box (boxes (count, 4)) with
    its foreground score (scores); see ``detection_math.decode_anchor``."""
    count_a = anchors.shape[0]
    height, width = cls.shape[1], cls.shape[2]
    for i in range(height):
        for j in range(width):
            for a in range(count_a):
                K.decode_anchor(cls, deltas, info, anchors, stride, min_size, iou_loss, boxes,
                               scores, i, j, a, count_a, width)


@njit(cache=True, nogil=True)
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
            if S.box_overlap(boxes[a, 0], boxes[a, 1], boxes[a, 2], boxes[a, 3], boxes[b, 0],
                           boxes[b, 1], boxes[b, 2], boxes[b, 3]) > threshold:
                suppressed[j] = True
    for r in range(post_n):
        src = order[keep[r % kept]] if kept > 0 else order[0]
        rois[r, 0] = image
        for q in range(4):
            rois[r, q + 1] = boxes[src, q]
        out_scores[r, 0] = scores[src]


@njit(cache=True, nogil=True)
def _proposals(cls, deltas, info, anchors, stride, pre_n, post_n, threshold, min_size, iou_loss,
               rois, out_scores, boxes, scores):
    suppressed = np.empty(scores.shape[1], np.bool_)
    keep = np.empty(scores.shape[1], np.int64)
    for b in range(cls.shape[0]):
        _decode_image(cls[b], deltas[b], info[b], anchors, stride, min_size, iou_loss, boxes[b],
                      scores[b])
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
