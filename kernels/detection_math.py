"""What one output element of the region operators reads and writes, written once for both
kernel halves: ``kernels/cpu/detection.py`` compiles these with ``njit(inline="always")`` and
loops over them with ``prange``, ``kernels/cuda/detection.py`` with ``cuda.jit(device=True)``,
one thread per element. They take arrays, so they are left undecorated here (the CUDA
simulator cannot hand its arrays to CPU-compiled functions); the scalar math they call is
``kernels/scalar_detection.py``. Gradients that scatter (several outputs add into one input)
stay in the launchers: the CPU adds in place, the GPU with atomics.
"""
import math

from .scalar_detection import align_corners_weights, cell_sample, decode_box, roi_align_point, rotated_point


def roi_cell_max(x, b, c, hs, he, ws, we, w):
    """The max of x[b, c] over the window [hs, he) x [ws, we) and its flat position
    i * w + j (w: the map's width): ``(max, position)``, ``(0, -1)`` for an empty window."""
    best = -math.inf
    where = -1
    for i in range(hs, he):
        for j in range(ws, we):
            if x[b, c, i, j] > best:
                best = x[b, c, i, j]
                where = i * w + j
    if where < 0:
        return 0.0, -1
    return best, where


def roi_cell_mean(x, b, c, hs, he, ws, we):
    """The mean of x[b, c] over the window [hs, he) x [ws, we) (0 for an empty window)."""
    total = 0.0
    for i in range(hs, he):
        for j in range(ws, we):
            total += x[b, c, i, j]
    area = (he - hs) * (we - ws)
    return total / area if area > 0 else 0.0


def rroi_cell_mean(x, b, c, ph, pw, frame, ph_n, pw_n, h, w):
    """The mean of the bilinear samples of cell (ph, pw) of a rotated ROI ``frame``
    (``scalar_detection.rroi_frame``) on x[b, c] (h x w)."""
    cx, cy, rw, rh, cos_t, sin_t, grid_h, grid_w = frame
    total = 0.0
    for iy in range(grid_h):
        yy = cell_sample(ph, iy, rh, ph_n, grid_h)
        for ix in range(grid_w):
            px, py = rotated_point(cell_sample(pw, ix, rw, pw_n, grid_w), yy, cos_t, sin_t, cx,
                                   cy)
            ok, y0, y1, x0, x1, w00, w01, w10, w11 = align_corners_weights(py, px, h, w)
            if ok:
                total += (w00 * x[b, c, y0, x0] + w01 * x[b, c, y0, x1]
                          + w10 * x[b, c, y1, x0] + w11 * x[b, c, y1, x1])
    return total / (grid_h * grid_w)


def roi_align_cell(x, b, c, ph, pw, frame, h, w):
    """The mean of the bilinear samples of cell (ph, pw) of an ROIAlign ``frame``
    (``scalar_detection.roi_align_frame``) on x[b, c] (h x w); 0 for a cell with no samples."""
    x0, y0, bin_w, bin_h, grid_h, grid_w = frame
    total = 0.0
    for iy in range(grid_h):
        py = roi_align_point(y0, ph, iy, bin_h, grid_h)
        for ix in range(grid_w):
            px = roi_align_point(x0, pw, ix, bin_w, grid_w)
            ok, y0_, y1_, x0_, x1_, w00, w01, w10, w11 = align_corners_weights(py, px, h, w)
            if ok:
                total += (w00 * x[b, c, y0_, x0_] + w01 * x[b, c, y0_, x1_]
                          + w10 * x[b, c, y1_, x0_] + w11 * x[b, c, y1_, x1_])
    return total / max(grid_h * grid_w, 1)


def deform_value(x, c, corners):
    """Channel c of x (C, H, W) sampled bilinearly at ``corners``
    (``scalar_detection.deform_tap``); 0 outside the map."""
    ok, h0, h1, w0, w1, fh, fw = corners
    if not ok:
        return 0.0
    return ((1.0 - fh) * ((1.0 - fw) * x[c, h0, w0] + fw * x[c, h0, w1])
            + fh * ((1.0 - fw) * x[c, h1, w0] + fw * x[c, h1, w1]))


def deform_offset_point(dcol, x, doffset, corners, accumulate, grp, per_group, i, j, kh, kw,
                        base, a, b, ow):
    """doffset[base:base + 2, a, b] (+)= the gradient of the sampled columns by the two offsets
    of tap (i, j) of deformable group ``grp`` at output position (a, b), which samples at
    ``corners`` (``scalar_detection.deform_tap``)."""
    ok, h0, h1, w0, w1, fh, fw = corners
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


def decode_anchor(cls, deltas, info, anchors, stride, min_size, iou_loss, boxes, scores, i, j,
                  a, count_a, width):
    """Anchor a at position (i, j) of one image (cls (2A, H, W), deltas (4A, H, W), info
    (height, width, scale)) as a clipped box, boxes[t] with its foreground score scores[t]
    (t = (i * W + j) * A + a; count_a = A, width = W); a cell past the image's own size, or a
    box smaller than min_size (scaled by the image's scale), scores -1."""
    t = (i * width + j) * count_a + a
    x1, y1, x2, y2 = decode_box(
        anchors[a, 0] + j * stride, anchors[a, 1] + i * stride,
        anchors[a, 2] + j * stride, anchors[a, 3] + i * stride,
        deltas[4 * a, i, j], deltas[4 * a + 1, i, j], deltas[4 * a + 2, i, j],
        deltas[4 * a + 3, i, j], info[0], info[1], iou_loss)
    score = cls[count_a + a, i, j]
    if i >= int(info[0] / stride) or j >= int(info[1] / stride):
        score = -1.0
    small = min_size * info[2]
    if x2 - x1 + 1.0 < small or y2 - y1 + 1.0 < small:
        x1 -= small / 2.0
        y1 -= small / 2.0
        x2 += small / 2.0
        y2 += small / 2.0
        score = -1.0
    boxes[t, 0] = x1
    boxes[t, 1] = y1
    boxes[t, 2] = x2
    boxes[t, 3] = y2
    scores[t] = score
