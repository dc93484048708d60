"""Per-element math of the region (detection) operators -- ROIPooling, PSROIPooling,
RROIAlign, DeformableConvolution, Proposal -- as plain ``@njit`` functions on scalars that
both kernel halves call (array reads stay in the launchers: the CUDA simulator cannot hand its
arrays to CPU-compiled functions).
"""
import math

from numba import njit


@njit(cache=True)
def round_half_away(x):
    """C's round(): halves go away from zero (numpy rounds them to even)."""
    if x >= 0.0:
        return math.floor(x + 0.5)
    return -math.floor(-x + 0.5)


@njit(cache=True)
def clip_int(v, lo, hi):
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


@njit(cache=True)
def roi_pool_bin(p, roi_start, bin_size, limit):
    """[start, end) of pooled cell ``p`` along one axis of an ROI that starts at cell
    ``roi_start`` with cells of ``bin_size``, clipped to [0, limit]."""
    start = int(math.floor(p * bin_size)) + roi_start
    end = int(math.ceil((p + 1) * bin_size)) + roi_start
    return clip_int(start, 0, limit), clip_int(end, 0, limit)


@njit(cache=True)
def psroi_bin(p, roi_start, bin_size, limit):
    """[start, end) of PSROIPooling's cell ``p`` (the ROI start is fractional), clipped to
    [0, limit]."""
    start = int(math.floor(p * bin_size + roi_start))
    end = int(math.ceil((p + 1) * bin_size + roi_start))
    return clip_int(start, 0, limit), clip_int(end, 0, limit)


@njit(cache=True)
def group_cell(p, pooled, group_size):
    """The position-sensitive group (0 .. group_size - 1) pooled cell ``p`` reads."""
    return clip_int(int(math.floor(p * group_size / pooled)), 0, group_size - 1)


@njit(cache=True)
def align_corners_weights(y, x, height, width):
    """Bilinear sampling as ROIAlign does it: ``(valid, y0, y1, x0, x1, w00, w01, w10, w11)``.

    A point more than one pixel outside the map reads 0 (valid False); otherwise it is clamped
    to the map, and a point on or past the last row/column reads that row/column."""
    if y < -1.0 or y > height or x < -1.0 or x > width:
        return False, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0
    if y < 0.0:
        y = 0.0
    if x < 0.0:
        x = 0.0
    y0 = int(y)
    x0 = int(x)
    if y0 >= height - 1:
        y0 = height - 1
        y1 = y0
        y = float(y0)
    else:
        y1 = y0 + 1
    if x0 >= width - 1:
        x0 = width - 1
        x1 = x0
        x = float(x0)
    else:
        x1 = x0 + 1
    ly = y - y0
    lx = x - x0
    hy = 1.0 - ly
    hx = 1.0 - lx
    return True, y0, y1, x0, x1, hy * hx, hy * lx, ly * hx, ly * lx


@njit(cache=True)
def rotated_point(xx, yy, cos_t, sin_t, cx, cy):
    """(x, y) of the point (xx, yy) of an ROI frame rotated by theta about (cx, cy)."""
    return xx * cos_t + yy * sin_t + cx, yy * cos_t - xx * sin_t + cy


@njit(cache=True)
def rotated_frame(cx, cy, w, h, theta_degrees, scale):
    """A rotated ROI (centre, size, angle in degrees) on the feature map: (cx, cy, w, h, cos,
    sin), the size at least one cell."""
    theta = theta_degrees * math.pi / 180.0
    return (cx * scale, cy * scale, max(w * scale, 1.0), max(h * scale, 1.0), math.cos(theta),
            math.sin(theta))


@njit(cache=True)
def samples_per_cell(size, pooled, ratio):
    """Sample points per cell along one axis: ``ratio``, or ceil(cell size) when ratio <= 0."""
    if ratio > 0:
        return ratio
    return max(int(math.ceil(size / pooled)), 1)


@njit(cache=True)
def cell_sample(p, i, size, pooled, grid):
    """Sample ``i`` of ``grid`` in cell ``p`` along one axis of a centred ROI frame of ``size``."""
    cell = size / pooled
    return -size / 2.0 + p * cell + (i + 0.5) * cell / grid


@njit(cache=True)
def deform_corners(h, w, height, width):
    """Where a deformable convolution samples the point (h, w) of a (height, width) map:
    ``(valid, h0, h1, w0, w1, fh, fw)``, the value being the bilinear mix of the four corners
    with fractions fh, fw. Points outside [0, height) x [0, width) read 0 (valid False); past
    the last row or column the sample stays on it (fraction 0)."""
    if not (0.0 <= h < height and 0.0 <= w < width):
        return False, 0, 0, 0, 0, 0.0, 0.0
    h0 = int(math.floor(h))
    w0 = int(math.floor(w))
    fh = h - h0
    fw = w - w0
    if h0 >= height - 1:
        h0 = height - 1
        h1 = h0
        fh = 0.0
    else:
        h1 = h0 + 1
    if w0 >= width - 1:
        w0 = width - 1
        w1 = w0
        fw = 0.0
    else:
        w1 = w0 + 1
    return True, h0, h1, w0, w1, fh, fw


@njit(cache=True)
def deform_position(o, k, stride, pad, dilate, offset):
    """The sampled coordinate along one axis for output position o and kernel tap k."""
    return o * stride - pad + k * dilate + offset


@njit(cache=True)
def decode_box(x1, y1, x2, y2, d0, d1, d2, d3, im_h, im_w, iou_loss):
    """An anchor moved by its predicted deltas, clipped to the image: (x1, y1, x2, y2).

    Deltas are (dx, dy, dw, dh) of the centre, relative to the anchor's size, and log scales
    of the size; with ``iou_loss`` they are plain offsets of the four corners."""
    if iou_loss:
        px1, py1, px2, py2 = x1 + d0, y1 + d1, x2 + d2, y2 + d3
    else:
        w = x2 - x1 + 1.0
        h = y2 - y1 + 1.0
        cx = d0 * w + x1 + 0.5 * (w - 1.0)
        cy = d1 * h + y1 + 0.5 * (h - 1.0)
        pw = math.exp(d2) * w
        ph = math.exp(d3) * h
        px1, py1 = cx - 0.5 * (pw - 1.0), cy - 0.5 * (ph - 1.0)
        px2, py2 = cx + 0.5 * (pw - 1.0), cy + 0.5 * (ph - 1.0)
    return (max(min(px1, im_w - 1.0), 0.0), max(min(py1, im_h - 1.0), 0.0),
            max(min(px2, im_w - 1.0), 0.0), max(min(py2, im_h - 1.0), 0.0))


@njit(cache=True)
def box_overlap(ax1, ay1, ax2, ay2, bx1, by1, bx2, by2):
    """Intersection over union of two boxes with inclusive pixel corners."""
    w = min(ax2, bx2) - max(ax1, bx1) + 1.0
    h = min(ay2, by2) - max(ay1, by1) + 1.0
    if w <= 0.0 or h <= 0.0:
        return 0.0
    inter = w * h
    area_a = (ax2 - ax1 + 1.0) * (ay2 - ay1 + 1.0)
    area_b = (bx2 - bx1 + 1.0) * (by2 - by1 + 1.0)
    return inter / (area_a + area_b - inter)
