"""Per-element math of the spatial operators (BilinearResize2D, AdaptiveAvgPooling2D,
GridGenerator, BilinearSampler / SpatialTransformer, Correlation), plain ``@njit`` functions
on scalars that both kernel halves call. (Scalars only: the CUDA simulator cannot hand its
arrays to CPU-compiled functions, so array reads stay in the launchers.)
"""
import math

from numba import njit

from . import cache_stamp  # noqa: F401  (stamps the cache entries made below)


@njit(cache=True, nogil=True)
def linear_source(dst, in_size, out_size, align_corners):
    """Where output position ``dst`` of a 1-D linear resize reads: ``(i0, i1, w1)``, the value
    being ``(1 - w1) * x[i0] + w1 * x[i1]``.

    With ``align_corners`` the end points of input and output coincide
    (``src = dst * (in - 1) / (out - 1)``); without, pixel centres are mapped
    (``src = (dst + 0.5) * in / out - 0.5``, clamped at 0)."""
    if align_corners:
        scale = (in_size - 1.0) / (out_size - 1.0) if out_size > 1 else 0.0
        src = dst * scale
    else:
        src = (dst + 0.5) * (in_size / out_size) - 0.5
        if src < 0.0:
            src = 0.0
    i0 = int(src)
    if i0 > in_size - 1:
        i0 = in_size - 1
    i1 = i0 + 1 if i0 < in_size - 1 else i0
    return i0, i1, src - i0


@njit(cache=True, nogil=True)
def adaptive_window(o, in_size, out_size):
    """[start, end) of the input cells output cell ``o`` of an adaptive pooling averages:
    from floor(o * in / out) to ceil((o + 1) * in / out)."""
    start = (o * in_size) // out_size
    end = ((o + 1) * in_size + out_size - 1) // out_size
    return start, end


@njit(cache=True, nogil=True)
def grid_coordinate(i, size):
    """Position ``i`` of ``size`` target cells in normalised coordinates: -1 at the first, +1
    at the last (a single cell sits at 0)."""
    if size <= 1:
        return 0.0
    return -1.0 + 2.0 * i / (size - 1.0)


@njit(cache=True, nogil=True)
def pixel_scale(size):
    """d(normalised coordinate) / d(pixel position) over ``size`` pixels (0 for one pixel,
    which sits at 0 whatever it moves by)."""
    if size <= 1:
        return 0.0
    return 2.0 / (size - 1.0)


@njit(cache=True, nogil=True)
def normalised(pixel, size):
    """A pixel position (0 .. size - 1) as a normalised coordinate (-1 .. 1)."""
    if size <= 1:
        return 0.0
    return pixel * pixel_scale(size) - 1.0


@njit(cache=True, nogil=True)
def source_pixel(g, size):
    """A normalised coordinate (-1 .. 1) as a pixel position (0 .. size - 1)."""
    return (g + 1.0) * (size - 1.0) / 2.0


@njit(cache=True, nogil=True)
def bilinear_corner(x, y):
    """The top-left corner (x0, y0) of the pixels around (x, y), and the fractions (fx, fy)
    of the way towards the next ones: the corners weigh (1-fx)(1-fy), fx(1-fy), (1-fx)fy and
    fx fy."""
    x0 = int(math.floor(x))
    y0 = int(math.floor(y))
    return x0, y0, x - x0, y - y0


@njit(cache=True, nogil=True)
def inside(i, size):
    return 0 <= i < size


@njit(cache=True, nogil=True)
def correlation_value(a, b, is_multiply):
    """One term of a correlation: a * b, or |a - b|."""
    if is_multiply:
        return a * b
    return abs(a - b)


@njit(cache=True, nogil=True)
def correlation_grads(a, b, is_multiply):
    """(d term / d a, d term / d b) of :func:`correlation_value` (|a - b| counts a >= b as
    the positive side)."""
    if is_multiply:
        return b, a
    if a >= b:
        return 1.0, -1.0
    return -1.0, 1.0


@njit(cache=True, nogil=True)
def bilinear_corner_point(x0, y0, fx, fy, q):
    """Corner q (0 .. 3: x0 then x0 + 1, on row y0 then y0 + 1) of a bilinear sample at
    (x0 + fx, y0 + fy): ``(x, y, weight, d weight / d x, d weight / d y)``."""
    dx_ = q % 2
    dy_ = q // 2
    wx = fx if dx_ else 1.0 - fx
    wy = fy if dy_ else 1.0 - fy
    return (x0 + dx_, y0 + dy_, wx * wy, wy * (1.0 if dx_ else -1.0),
            wx * (1.0 if dy_ else -1.0))


@njit(cache=True, nogil=True)
def correlation_displacement(tc, max_disp, stride2):
    """The displacement (oy, ox) of the second patch for output channel tc of a Correlation."""
    radius = max_disp // stride2
    width = 2 * radius + 1
    return (tc // width - radius) * stride2, (tc % width - radius) * stride2


@njit(cache=True, nogil=True)
def correlation_tap(y1, x1, oy, ox, kh, kw, height, width):
    """Tap (kh, kw) of a Correlation patch: the pixels it compares, (ya, xa) in the first map
    and (yb, xb) in the second, and whether each is inside its map."""
    ya = y1 + kh
    xa = x1 + kw
    yb = ya + oy
    xb = xa + ox
    return (ya, xa, yb, xb, inside(ya, height) and inside(xa, width),
            inside(yb, height) and inside(xb, width))
