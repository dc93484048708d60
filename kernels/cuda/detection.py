"""CUDA kernels of the region operators: the same functions and signatures as
``kernels/cpu/detection.py``, one thread per output element calling
``kernels/scalar_detection.py``; gradients scatter with atomics."""
import numpy as np
from numba import cuda

from .. import detection_math as M
from .. import scalar_detection as S
from ..cpu.detection import select_proposals
from ..math_build import compiled
from .grid import launch
from .memory import fill

__all__ = ["roi_pool", "roi_pool_backward", "psroi_pool", "psroi_pool_backward",
           "rroi_align", "rroi_align_backward", "roi_align", "roi_align_backward",
           "deform_im2col", "deform_col2im", "deform_offset_grad", "proposals"]

K = compiled(M, cuda.jit(device=True))


@cuda.jit(device=True)
def _roi_element(t, rois, out, n):
    """Output element t of an (R, C, ph, pw) array: (roi, c, ph, pw, the ROI's batch index)."""
    channels, ph_n, pw_n = out.shape[1], out.shape[2], out.shape[3]
    r = t // (channels * ph_n * pw_n)
    return (r, (t // (ph_n * pw_n)) % channels, (t // pw_n) % ph_n, t % pw_n,
            S.clip_int(int(rois[r, 0]), 0, n - 1))


# --- ROIPooling ---------------------------------------------------------------------------------
@cuda.jit
def _roi_pool_k(x, rois, scale, out, argmax):
    n, h, w = x.shape[0], x.shape[2], x.shape[3]
    ph_n, pw_n = out.shape[2], out.shape[3]
    for t in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        r, c, ph, pw, b = _roi_element(t, rois, out, n)
        x0, y0, bin_h, bin_w = S.roi_pool_frame(rois[r, 1], rois[r, 2], rois[r, 3], rois[r, 4],
                                              scale, ph_n, pw_n)
        hs, he = S.roi_pool_bin(ph, y0, bin_h, h)
        ws, we = S.roi_pool_bin(pw, x0, bin_w, w)
        out[r, c, ph, pw], argmax[r, c, ph, pw] = K.roi_cell_max(x, b, c, hs, he, ws, we, w)


@cuda.jit
def _roi_pool_backward_k(dy, rois, argmax, dx):
    n, w = dx.shape[0], dx.shape[3]
    for t in range(cuda.grid(1), dy.size, cuda.gridsize(1)):
        r, c, ph, pw, b = _roi_element(t, rois, dy, n)
        where = int(argmax[r, c, ph, pw])
        if where >= 0:
            cuda.atomic.add(dx, (b, c, where // w, where % w), dy[r, c, ph, pw])


def roi_pool(x, rois, spatial_scale, out, argmax):
    launch(_roi_pool_k, out.size, x, rois, float(spatial_scale), out, argmax)


def roi_pool_backward(dy, rois, argmax, dx, accumulate=False):
    if not accumulate:
        fill(dx, 0)
    launch(_roi_pool_backward_k, dy.size, dy, rois, argmax, dx)


# --- PSROIPooling -------------------------------------------------------------------------------
@cuda.jit
def _psroi_k(x, rois, scale, group, out, dy, dx, backward):
    # forward: out = the cell means; backward: dy / area added over every cell into dx
    n, h, w = x.shape[0], x.shape[2], x.shape[3]
    pooled = out.shape[2]
    for t in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        r, d, ph, pw, b = _roi_element(t, rois, out, n)
        frame = S.psroi_frame(rois[r, 1], rois[r, 2], rois[r, 3], rois[r, 4], scale, pooled)
        hs, he, ws, we, c = S.psroi_cell(d, ph, pw, frame, pooled, group, h, w)
        if not backward:
            out[r, d, ph, pw] = K.roi_cell_mean(x, b, c, hs, he, ws, we)
        elif he > hs and we > ws:
            g = dy[r, d, ph, pw] / ((he - hs) * (we - ws))
            for i in range(hs, he):
                for j in range(ws, we):
                    cuda.atomic.add(dx, (b, c, i, j), g)


def psroi_pool(x, rois, spatial_scale, group_size, out):
    launch(_psroi_k, out.size, x, rois, float(spatial_scale), int(group_size), out, out, x,
           False)


def psroi_pool_backward(dy, rois, spatial_scale, group_size, dx, accumulate=False):
    if not accumulate:
        fill(dx, 0)
    launch(_psroi_k, dy.size, dx, rois, float(spatial_scale), int(group_size), dy, dy, dx, True)


# --- RROIAlign ----------------------------------------------------------------------------------
@cuda.jit
def _rroi_k(x, rois, scale, ratio, out, dy, dx, backward):
    # forward: out = the mean of the cell's samples; backward: dy spread over them into dx
    n, h, w = x.shape[0], x.shape[2], x.shape[3]
    ph_n, pw_n = out.shape[2], out.shape[3]
    for t in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        r, c, ph, pw, b = _roi_element(t, rois, out, n)
        frame = S.rroi_frame(rois[r, 1], rois[r, 2], rois[r, 3], rois[r, 4], rois[r, 5], scale,
                           ph_n, pw_n, ratio)
        if not backward:
            out[r, c, ph, pw] = K.rroi_cell_mean(x, b, c, ph, pw, frame, ph_n, pw_n, h, w)
            continue
        g = dy[r, c, ph, pw] / (frame[6] * frame[7])
        for iy in range(frame[6]):
            for ix in range(frame[7]):
                ok, y0, y1, x0, x1, w00, w01, w10, w11 = S.rroi_sample(frame, ph, pw, iy, ix, ph_n,
                                                                     pw_n, h, w)
                if ok:
                    cuda.atomic.add(dx, (b, c, y0, x0), w00 * g)
                    cuda.atomic.add(dx, (b, c, y0, x1), w01 * g)
                    cuda.atomic.add(dx, (b, c, y1, x0), w10 * g)
                    cuda.atomic.add(dx, (b, c, y1, x1), w11 * g)


def rroi_align(x, rois, spatial_scale, sampling_ratio, out):
    launch(_rroi_k, out.size, x, rois, float(spatial_scale), int(sampling_ratio), out, out, x,
           False)


def rroi_align_backward(dy, rois, spatial_scale, sampling_ratio, dx, accumulate=False):
    if not accumulate:
        fill(dx, 0)
    launch(_rroi_k, dy.size, dx, rois, float(spatial_scale), int(sampling_ratio), dy, dy, dx,
           True)


# --- ROIAlign -----------------------------------------------------------------------------------
@cuda.jit
def _roi_align_k(x, rois, scale, ratio, aligned, sensitive, out, dy, dx, backward):
    # forward: out = the mean of the cell's samples; backward: dy spread over them into dx
    n, h, w = x.shape[0], x.shape[2], x.shape[3]
    ph_n, pw_n = out.shape[2], out.shape[3]
    for t in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        r, c, ph, pw, b = _roi_element(t, rois, out, n)
        frame = S.roi_align_frame(rois[r, 1], rois[r, 2], rois[r, 3], rois[r, 4], scale,
                                  aligned, ph_n, pw_n, ratio)
        c_in = S.roi_align_channel(c, ph, pw, ph_n, pw_n, sensitive)
        if not backward:
            out[r, c, ph, pw] = 0.0 if int(rois[r, 0]) < 0 else K.roi_align_cell(
                x, b, c_in, ph, pw, frame, h, w)
            continue
        if int(rois[r, 0]) < 0:
            continue
        x0, y0, bin_w, bin_h, grid_h, grid_w = frame
        g = dy[r, c, ph, pw] / max(grid_h * grid_w, 1)
        for iy in range(grid_h):
            py = S.roi_align_point(y0, ph, iy, bin_h, grid_h)
            for ix in range(grid_w):
                px = S.roi_align_point(x0, pw, ix, bin_w, grid_w)
                ok, ya, yb, xa, xb, w00, w01, w10, w11 = S.align_corners_weights(py, px, h, w)
                if ok:
                    cuda.atomic.add(dx, (b, c_in, ya, xa), w00 * g)
                    cuda.atomic.add(dx, (b, c_in, ya, xb), w01 * g)
                    cuda.atomic.add(dx, (b, c_in, yb, xa), w10 * g)
                    cuda.atomic.add(dx, (b, c_in, yb, xb), w11 * g)


def roi_align(x, rois, spatial_scale, sample_ratio, aligned, position_sensitive, out):
    launch(_roi_align_k, out.size, x, rois, float(spatial_scale), int(sample_ratio),
           bool(aligned), bool(position_sensitive), out, out, x, False)


def roi_align_backward(dy, rois, spatial_scale, sample_ratio, aligned, position_sensitive, dx,
                       accumulate=False):
    if not accumulate:
        fill(dx, 0)
    launch(_roi_align_k, dy.size, dx, rois, float(spatial_scale), int(sample_ratio),
           bool(aligned), bool(position_sensitive), dy, dy, dx, True)


# --- DeformableConvolution ----------------------------------------------------------------------
@cuda.jit
def _deform_k(x, offset, col, g, mode):
    # mode 0: col = the sampled columns; mode 1: col holds their gradient, spread into x
    channels, h, w = x.shape
    oh, ow = offset.shape[1], offset.shape[2]
    for t in range(cuda.grid(1), col.size, cuda.gridsize(1)):
        row = t // (oh * ow)
        a = (t // ow) % oh
        b = t % ow
        c, i, j, base = S.deform_row(row, g[0], g[1], channels // g[8])
        corners = S.deform_tap(offset[base, a, b], offset[base + 1, a, b], g, i, j, a, b, h, w)
        if mode == 0:
            col[row, a * ow + b] = K.deform_value(x, c, corners)
            continue
        ok, h0, h1, w0, w1, fh, fw = corners
        if ok:
            gv = col[row, a * ow + b]
            cuda.atomic.add(x, (c, h0, w0), (1.0 - fh) * (1.0 - fw) * gv)
            cuda.atomic.add(x, (c, h0, w1), (1.0 - fh) * fw * gv)
            cuda.atomic.add(x, (c, h1, w0), fh * (1.0 - fw) * gv)
            cuda.atomic.add(x, (c, h1, w1), fh * fw * gv)


@cuda.jit
def _deform_offset_grad_k(dcol, x, offset, doffset, g, accumulate):
    kh, kw = g[0], g[1]
    channels, h, w = x.shape
    oh, ow = offset.shape[1], offset.shape[2]
    per_group = channels // g[8]
    for t in range(cuda.grid(1), g[8] * kh * kw * oh * ow, cuda.gridsize(1)):
        tap = t // (oh * ow)
        a = (t // ow) % oh
        b = t % ow
        grp = tap // (kh * kw)
        _, i, j, base = S.deform_row(grp * per_group * kh * kw + tap % (kh * kw), kh, kw, per_group)
        corners = S.deform_tap(offset[base, a, b], offset[base + 1, a, b], g, i, j, a, b, h, w)
        K.deform_offset_point(dcol, x, doffset, corners, accumulate, grp, per_group, i, j, kh,
                             kw, base, a, b, ow)


def deform_im2col(x, offset, col, geometry):
    launch(_deform_k, col.size, x, offset, col, geometry, 0)


def deform_col2im(dcol, offset, dx, geometry):
    launch(_deform_k, dcol.size, dx, offset, dcol, geometry, 1)


def deform_offset_grad(dcol, x, offset, doffset, geometry, accumulate=False):
    launch(_deform_offset_grad_k, doffset.size // 2, dcol, x, offset, doffset, geometry,
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
        K.decode_anchor(cls[b], deltas[b], info[b], anchors, stride, min_size, iou_loss, boxes[b],
                       scores[b], q // (width * count_a), (q // count_a) % width, q % count_a,
                       count_a, width)


def proposals(cls_prob, bbox_pred, im_info, anchors, feature_stride, pre_nms_top_n,
              post_nms_top_n, threshold, min_size, iou_loss, rois, scores, work):
    """Region proposals (see the CPU kernel set): the boxes are decoded on the GPU; sorting
    and the greedy suppression, sequential by nature, run on the host."""
    boxes, box_scores = work
    launch(_decode_k, box_scores.size, cls_prob, bbox_pred, im_info, cuda.to_device(anchors),
           float(feature_stride), float(min_size), bool(iou_loss), boxes, box_scores)
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
