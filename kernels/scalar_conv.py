"""Per-index math of the image operators (convolution patches, pooling windows, Lp powers),
shared by both halves.

Plain ``@njit`` functions: the CPU launchers call them from their loops and the CUDA kernels
from their grid-stride loops, so a pooling window is defined once.
"""
import math

from numba import njit

from . import cache_stamp  # noqa: F401  (stamps the cache entries made below)

# Pooling types, as the kernels receive them.
POOL_MAX, POOL_AVG, POOL_SUM, POOL_LP = 0, 1, 2, 3
POOL_TYPES = {"max": POOL_MAX, "avg": POOL_AVG, "sum": POOL_SUM, "lp": POOL_LP}


# ---------------------------------------------------------------------------------------------
# Convolution: data (n, C, D, H, W), or channel-last (n, D, H, W, C); patches of K = KD*KH*KW
# taps per channel and output pixel q = n*O + (od*OH + oh)*OW + ow of the n*O output pixels
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def image_index(n, c, d, h, w, C, D, H, W, channel_last):
    """Flat index of element (n, c, d, h, w) of channel-first or channel-last data."""
    if channel_last:
        return (((n * D + d) * H + h) * W + w) * C + c
    return (((n * C + c) * D + d) * H + h) * W + w


@njit(cache=True, nogil=True)
def patch_extents(dims, g):
    """(K, n*O): taps per channel and output pixels of data dims (n, C, D, H, W) and geometry
    g = (KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW, OD, OH, OW)."""
    return g[0] * g[1] * g[2], dims[0] * g[12] * g[13] * g[14]


@njit(cache=True, nogil=True)
def patch_index(c, p, q, C, K, NO, channel_last):
    """Flat index of channel c, tap p, output pixel q in the column matrix (C*K, n*O) or, for
    channel-last data, the row matrix (n*O, K*C)."""
    if channel_last:
        return (q * K + p) * C + c
    return (c * K + p) * NO + q


@njit(cache=True, nogil=True)
def conv_output_at(i, k, stride, pad, dilate, size):
    """Output position along one axis whose tap k reads input position i, or -1 for none."""
    t = i + pad - k * dilate
    if t < 0 or t % stride != 0:
        return -1
    o = t // stride
    return o if o < size else -1


# ---------------------------------------------------------------------------------------------
# Pooling: dims = (D, H, W, OD, OH, OW), geo = (KD, KH, KW, SD, SH, SW, PD, PH, PW)
# ---------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def pool_window(o, stride, pad, kernel, size):
    """Window of output position o along one axis: (lo, hi, padded_len).

    The inputs read are [lo, hi) (clipped to the data); padded_len is the window's length
    clipped only to the padded extent ``size + pad``, which is what average pooling divides by
    when padding counts (MXNet's rule, which also trims 'full'-convention windows that hang
    past the padded end).
    """
    start = o * stride - pad
    end = start + kernel
    if end > size + pad:
        end = size + pad
    padded_len = end - start
    lo = start if start > 0 else 0
    hi = end if end < size else size
    return lo, hi, padded_len


@njit(cache=True, nogil=True)
def pool_count(d0, d1, dl, h0, h1, hl, w0, w1, wl, include_pad):
    """What average pooling divides by: the padded window size or the real element count."""
    if include_pad:
        return dl * hl * wl
    return (d1 - d0) * (h1 - h0) * (w1 - w0)


@njit(cache=True, nogil=True)
def pool_output_window(od, oh, ow, dims, geo, include_pad):
    """Window of output (od, oh, ow): ((d0, d1, h0, h1, w0, w1), count), reading inputs
    [d0, d1) x [h0, h1) x [w0, w1); count is what average pooling divides by."""
    D, H, W, OD, OH, OW = dims
    KD, KH, KW, SD, SH, SW, PD, PH, PW = geo
    d0, d1, dl = pool_window(od, SD, PD, KD, D)
    h0, h1, hl = pool_window(oh, SH, PH, KH, H)
    w0, w1, wl = pool_window(ow, SW, PW, KW, W)
    return (d0, d1, h0, h1, w0, w1), pool_count(d0, d1, dl, h0, h1, hl, w0, w1, wl, include_pad)


@njit(cache=True, nogil=True)
def lp_power(v, p):
    """v ** p for Lp pooling (exact products for the usual p = 1, 2, 3)."""
    if p == 1:
        return v
    if p == 2:
        return v * v
    if p == 3:
        return v * v * v
    return v ** p


@njit(cache=True, nogil=True)
def lp_root(v, p):
    """The p-th root closing an Lp pool (a real cube root for negative sums, like C's cbrt)."""
    if p == 1:
        return v
    if p == 2:
        return math.sqrt(v)
    if p == 3:
        return math.copysign(abs(v) ** (1.0 / 3.0), v)
    return v ** (1.0 / p)


@njit(cache=True, nogil=True)
def lp_grad_factor(x, y, p):
    """d y / d x for one element x of an Lp window with result y: (x / y) ** (p - 1)."""
    if p == 1:
        return 1.0
    return lp_power(x, p - 1) / lp_power(y, p - 1)


# Pad modes, as the kernels receive them.
PAD_CONSTANT, PAD_EDGE, PAD_REFLECT = 0, 1, 2
PAD_MODES = {"constant": PAD_CONSTANT, "edge": PAD_EDGE, "reflect": PAD_REFLECT}


@njit(cache=True, nogil=True)
def pad_source(o, before, size, mode):
    """Index into the unpadded axis that padded position o reads, or -1 for the constant.

    Reflection mirrors about the edge element without repeating it (numpy's 'reflect'); MXNet
    only allows reflect pads smaller than the axis, so one mirror suffices.
    """
    i = o - before
    if i >= 0 and i < size:
        return i
    if mode == PAD_CONSTANT:
        return -1
    if mode == PAD_EDGE:
        return 0 if i < 0 else size - 1
    if i < 0:
        return -i
    return 2 * (size - 1) - i
