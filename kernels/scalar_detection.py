"""Per-element math of the region (detection) operators -- ROIPooling, PSROIPooling,
RROIAlign, DeformableConvolution, Proposal -- as plain ``@njit`` functions on scalars that
both kernel halves call (array reads stay in the launchers: the CUDA simulator cannot hand its
arrays to CPU-compiled functions).
"""
import math

from numba import njit

from . import cache_stamp  # noqa: F401  (stamps the cache entries made below)
from .scalar import clip as clip_int


@njit(cache=True, nogil=True)
def round_half_away(x):
    """C's round(): halves go away from zero (numpy rounds them to even)."""
    if x >= 0.0:
        return math.floor(x + 0.5)
    return -math.floor(-x + 0.5)


@njit(cache=True, nogil=True)
def roi_pool_bin(p, roi_start, bin_size, limit):
    """[start, end) of pooled cell ``p`` along one axis of an ROI that starts at cell
    ``roi_start`` with cells of ``bin_size``, clipped to [0, limit]."""
    start = int(math.floor(p * bin_size)) + roi_start
    end = int(math.ceil((p + 1) * bin_size)) + roi_start
    return clip_int(start, 0, limit), clip_int(end, 0, limit)


@njit(cache=True, nogil=True)
def psroi_bin(p, roi_start, bin_size, limit):
    """[start, end) of PSROIPooling's cell ``p`` (the ROI start is fractional), clipped to
    [0, limit]."""
    start = int(math.floor(p * bin_size + roi_start))
    end = int(math.ceil((p + 1) * bin_size + roi_start))
    return clip_int(start, 0, limit), clip_int(end, 0, limit)


@njit(cache=True, nogil=True)
def roi_pool_frame(x1, y1, x2, y2, scale, ph_n, pw_n):
    """ROIPooling's ROI on the feature map: its first cell (x0, y0), rounded, and the cell
    sizes (bin_h, bin_w) of a ph_n x pw_n pooling; the ROI is at least one cell."""
    x0 = int(round_half_away(x1 * scale))
    y0 = int(round_half_away(y1 * scale))
    bin_h = max(int(round_half_away(y2 * scale)) - y0 + 1, 1) / ph_n
    bin_w = max(int(round_half_away(x2 * scale)) - x0 + 1, 1) / pw_n
    return x0, y0, bin_h, bin_w


@njit(cache=True, nogil=True)
def psroi_frame(x1, y1, x2, y2, scale, pooled):
    """PSROIPooling's ROI on the feature map: its fractional start (x0, y0) and the cell sizes
    (bin_h, bin_w) of a pooled x pooled grid; the ROI is at least 0.1 wide and high."""
    x0 = round_half_away(x1) * scale
    y0 = round_half_away(y1) * scale
    bin_h = max((round_half_away(y2) + 1.0) * scale - y0, 0.1) / pooled
    bin_w = max((round_half_away(x2) + 1.0) * scale - x0, 0.1) / pooled
    return x0, y0, bin_h, bin_w


@njit(cache=True, nogil=True)
def psroi_cell(d, ph, pw, frame, pooled, group, height, width):
    """Cell (ph, pw) of output channel d: its window [hs, he) x [ws, we) and the input channel
    c it averages, ``(hs, he, ws, we, c)``."""
    x0, y0, bin_h, bin_w = frame
    hs, he = psroi_bin(ph, y0, bin_h, height)
    ws, we = psroi_bin(pw, x0, bin_w, width)
    c = (d * group + group_cell(ph, pooled, group)) * group + group_cell(pw, pooled, group)
    return hs, he, ws, we, c


@njit(cache=True, nogil=True)
def group_cell(p, pooled, group_size):
    """The position-sensitive group (0 .. group_size - 1) pooled cell ``p`` reads."""
    return clip_int(int(math.floor(p * group_size / pooled)), 0, group_size - 1)


@njit(cache=True, nogil=True)
def corner_pair(v, size):
    """The two rows (or columns) a bilinear sample at v >= 0 mixes and the fraction of the way
    to the second, ``(v0, v1, fraction)``; on or past the last one the sample stays on it."""
    v0 = int(math.floor(v))
    if v0 >= size - 1:
        return size - 1, size - 1, 0.0
    return v0, v0 + 1, v - v0


@njit(cache=True, nogil=True)
def align_corners_weights(y, x, height, width):
    """Bilinear sampling as ROIAlign does it: ``(valid, y0, y1, x0, x1, w00, w01, w10, w11)``.

    A point more than one pixel outside the map reads 0 (valid False); otherwise it is clamped
    to the map, and a point on or past the last row/column reads that row/column."""
    if y < -1.0 or y > height or x < -1.0 or x > width:
        return False, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0
    y0, y1, ly = corner_pair(max(y, 0.0), height)
    x0, x1, lx = corner_pair(max(x, 0.0), width)
    hy = 1.0 - ly
    hx = 1.0 - lx
    return True, y0, y1, x0, x1, hy * hx, hy * lx, ly * hx, ly * lx


@njit(cache=True, nogil=True)
def roi_align_frame(x1, y1, x2, y2, scale, aligned, ph_n, pw_n, ratio):
    """An axis-aligned ROI of ROIAlign on the feature map with the sample grid of its cells:
    ``(x0, y0, bin_w, bin_h, grid_h, grid_w)``. ``aligned`` puts pixel centres at
    half-integers (corners shifted by -0.5, no minimum size); otherwise the ROI is at least
    one cell wide and high. A grid of ``ratio`` samples per axis, or ceil(cell size) when
    ratio <= 0 (which is 0 for an empty ROI: its cells read 0)."""
    shift = 0.5 if aligned else 0.0
    roi_w = (x2 - x1) * scale
    roi_h = (y2 - y1) * scale
    if not aligned:
        roi_w = max(roi_w, 1.0)
        roi_h = max(roi_h, 1.0)
    bin_w = roi_w / pw_n
    bin_h = roi_h / ph_n
    grid_h = ratio if ratio > 0 else int(math.ceil(bin_h))
    grid_w = ratio if ratio > 0 else int(math.ceil(bin_w))
    return x1 * scale - shift, y1 * scale - shift, bin_w, bin_h, grid_h, grid_w


@njit(cache=True, nogil=True)
def roi_align_point(start, p, i, bin_size, grid):
    """Sample ``i`` of ``grid`` along one axis of cell ``p`` of an ROIAlign frame."""
    return start + p * bin_size + (i + 0.5) * bin_size / grid


@njit(cache=True, nogil=True)
def roi_align_channel(c, ph, pw, ph_n, pw_n, position_sensitive):
    """The input channel cell (ph, pw) of output channel c reads: c itself, or with
    ``position_sensitive`` the (ph, pw)-th of the ph_n * pw_n channels of group c."""
    if position_sensitive:
        return (c * ph_n + ph) * pw_n + pw
    return c


@njit(cache=True, nogil=True)
def rotated_point(xx, yy, cos_t, sin_t, cx, cy):
    """(x, y) of the point (xx, yy) of an ROI frame rotated by theta about (cx, cy)."""
    return xx * cos_t + yy * sin_t + cx, yy * cos_t - xx * sin_t + cy


@njit(cache=True, nogil=True)
def rotated_frame(cx, cy, w, h, theta_degrees, scale):
    """A rotated ROI (centre, size, angle in degrees) on the feature map: (cx, cy, w, h, cos,
    sin), the size at least one cell."""
    theta = theta_degrees * math.pi / 180.0
    return (cx * scale, cy * scale, max(w * scale, 1.0), max(h * scale, 1.0), math.cos(theta),
            math.sin(theta))


@njit(cache=True, nogil=True)
def samples_per_cell(size, pooled, ratio):
    """Sample points per cell along one axis: ``ratio``, or ceil(cell size) when ratio <= 0."""
    if ratio > 0:
        return ratio
    return max(int(math.ceil(size / pooled)), 1)


@njit(cache=True, nogil=True)
def cell_sample(p, i, size, pooled, grid):
    """Sample ``i`` of ``grid`` in cell ``p`` along one axis of a centred ROI frame of ``size``."""
    cell = size / pooled
    return -size / 2.0 + p * cell + (i + 0.5) * cell / grid


@njit(cache=True, nogil=True)
def rroi_frame(cx, cy, w, h, theta_degrees, scale, ph_n, pw_n, ratio):
    """A rotated ROI of RROIAlign on the feature map, with the sample grid of its cells:
    ``(cx, cy, w, h, cos, sin, grid_h, grid_w)``."""
    cx, cy, rw, rh, cos_t, sin_t = rotated_frame(cx, cy, w, h, theta_degrees, scale)
    return (cx, cy, rw, rh, cos_t, sin_t, samples_per_cell(rh, ph_n, ratio),
            samples_per_cell(rw, pw_n, ratio))


@njit(cache=True, nogil=True)
def rroi_sample(frame, ph, pw, iy, ix, ph_n, pw_n, height, width):
    """Sample (iy, ix) of cell (ph, pw) of a rotated ROI ``frame`` (:func:`rroi_frame`): the
    corners and weights of :func:`align_corners_weights` at that point."""
    cx, cy, rw, rh, cos_t, sin_t, grid_h, grid_w = frame
    px, py = rotated_point(cell_sample(pw, ix, rw, pw_n, grid_w),
                           cell_sample(ph, iy, rh, ph_n, grid_h), cos_t, sin_t, cx, cy)
    return align_corners_weights(py, px, height, width)


@njit(cache=True, nogil=True)
def deform_corners(h, w, height, width):
    """Where a deformable convolution samples the point (h, w) of a (height, width) map:
    ``(valid, h0, h1, w0, w1, fh, fw)``, the value being the bilinear mix of the four corners
    with fractions fh, fw. Points outside [0, height) x [0, width) read 0 (valid False); past
    the last row or column the sample stays on it (fraction 0)."""
    if not (0.0 <= h < height and 0.0 <= w < width):
        return False, 0, 0, 0, 0, 0.0, 0.0
    h0, h1, fh = corner_pair(h, height)
    w0, w1, fw = corner_pair(w, width)
    return True, h0, h1, w0, w1, fh, fw


@njit(cache=True, nogil=True)
def deform_position(o, k, stride, pad, dilate, offset):
    """The sampled coordinate along one axis for output position o and kernel tap k."""
    return o * stride - pad + k * dilate + offset


@njit(cache=True, nogil=True)
def deform_row(row, kh, kw, per_group):
    """Row ``row`` of the sampled columns: its channel c, kernel tap (i, j) and the first row
    of its offsets, ``(c, i, j, offset row)``."""
    c = row // (kh * kw)
    i = (row // kw) % kh
    j = row % kw
    return c, i, j, (c // per_group) * 2 * kh * kw + 2 * (i * kw + j)


@njit(cache=True, nogil=True)
def deform_tap(offset_h, offset_w, g, i, j, a, b, height, width):
    """Where kernel tap (i, j) of output position (a, b), moved by its two offsets, samples a
    (height, width) map: :func:`deform_corners` of that point. ``g`` is the geometry (kh, kw,
    sh, sw, ph, pw, dh, dw, groups)."""
    return deform_corners(deform_position(a, i, g[2], g[4], g[6], offset_h),
                          deform_position(b, j, g[3], g[5], g[7], offset_w), height, width)


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
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
