"""Per-index and per-element math of the tensor and reduction families, shared by both halves.

Plain ``@njit`` functions: the CPU launchers call them from (p)range loops, the CUDA kernels from
grid-stride loops, so index resolution (clip / wrap) and the reductions and their gradients are
written once. The per-element reduction functions are inlined into the loops (``inline=
"always"``), so the branch on the loop-invariant ``kind`` is hoisted and the loops vectorise.
(Strided offsets are ``kernels/scalar.py``'s ``strided_offset``.)
"""
import math

from numba import njit
from numba.extending import register_jitable

from . import cache_stamp  # noqa: F401  (stamps the cache entries made below)

# --- reduction kinds (codes passed to k.reduce_axes / k.reduce_axes_backward) -------------------
R_SUM, R_MEAN, R_PROD, R_MAX, R_MIN, R_NANSUM, R_NANPROD, R_SUMSQ, R_NORM1, R_NORM2, \
    R_NONFINITE = range(11)


@njit(cache=True, nogil=True)
def resolve_index(value, n, wrap):
    """MXNet's index rule: truncate toward zero, then wrap modulo n or clip into [0, n-1]."""
    j = int(value)
    if wrap:
        j = j % n
        if j < 0:
            j += n
        return j
    if j < 0:
        return 0
    if j >= n:
        return n - 1
    return j


@njit(cache=True, nogil=True)
def row_put_offsets(index_value, j, t, n, inner):
    """index_copy's flat (destination, source) offsets of element t of row j: the row
    index_value (clipped) of an (n, inner) array, and row j of the (count, inner) rows put."""
    return resolve_index(index_value, n, False) * inner + t, j * inner + t


@njit(cache=True, nogil=True)
def uniform_bin(x, lo, hi, nbins):
    """The bin of x among nbins equal bins over [lo, hi] (the last one closed), -1 outside."""
    if not (lo <= x <= hi):
        return -1
    b = int((x - lo) * nbins / (hi - lo)) if hi > lo else 0
    return nbins - 1 if b >= nbins else b


@register_jitable
def histogram_bin(x, edges, nbins, uniform, lo, hi):
    """The bin of x: one of nbins equal bins over [lo, hi] (uniform), else the b with
    edges[b] <= x < edges[b + 1] (the last bin closed); -1 outside. register_jitable (it takes
    an array): compiled into the callers of both halves, Python under the CUDA simulator."""
    if uniform:
        return uniform_bin(x, lo, hi, nbins)
    if not (edges[0] <= x <= edges[nbins]):
        return -1
    lo_i, hi_i = 0, nbins          # the last edge <= x: binary search
    while hi_i - lo_i > 1:
        mid = (lo_i + hi_i) // 2
        if edges[mid] <= x:
            lo_i = mid
        else:
            hi_i = mid
    return lo_i


@njit(cache=True, nogil=True, error_model="numpy")
def reduce_identity(kind):
    """The start value of a reduction of ``kind``."""
    if kind == R_PROD or kind == R_NANPROD:
        return 1.0
    if kind == R_MAX:
        return -math.inf
    if kind == R_MIN:
        return math.inf
    return 0.0


@njit(cache=True, error_model="numpy", inline="always")
def reduce_map(kind, x):
    """What one element contributes before combining (square for sums of squares, ...)."""
    if kind == R_SUMSQ or kind == R_NORM2:
        return x * x
    if kind == R_NORM1:
        return abs(x)
    if kind == R_NANSUM:
        return 0.0 if x != x else x
    if kind == R_NANPROD:
        return 1.0 if x != x else x
    if kind == R_NONFINITE:      # counts the elements that are inf or nan (x - x is nan then)
        return 0.0 if x - x == 0 else 1.0
    return x


@njit(cache=True, error_model="numpy", inline="always")
def reduce_combine(kind, acc, v):
    """Fold one mapped value into the accumulator (max/min propagate NaN, like MXNet)."""
    if kind == R_PROD or kind == R_NANPROD:
        return acc * v
    if kind == R_MAX:
        if acc != acc or v != v:
            return math.nan
        return v if v > acc else acc
    if kind == R_MIN:
        if acc != acc or v != v:
            return math.nan
        return v if v < acc else acc
    return acc + v


@njit(cache=True, nogil=True, error_model="numpy")
def reduce_finish(kind, acc, count):
    """Turn the accumulator into the output value (mean divides, the 2-norm takes a root)."""
    if kind == R_MEAN:
        return acc / count
    if kind == R_NORM2:
        return math.sqrt(acc)
    return acc


@njit(cache=True, error_model="numpy", inline="always")
def reduce_grad(kind, x, y, count):
    """d out / d x for one element x of a reduction whose result is y (count elements reduced).

    MXNet's rules: max/min send the gradient to every element equal to the result; prod uses
    y / x (so a zero input gives nan, as in MXNet); the 2-norm x / y (nan where y is 0).
    """
    if kind == R_SUM:
        return 1.0
    if kind == R_MEAN:
        return 1.0 / count
    if kind == R_MAX or kind == R_MIN:
        return 1.0 if x == y else 0.0
    if kind == R_PROD:
        return y / x
    if kind == R_NANSUM:
        return 0.0 if x != x else 1.0
    if kind == R_NANPROD:
        return 0.0 if x != x else y / x
    if kind == R_SUMSQ:
        return 2.0 * x
    if kind == R_NORM1:
        if x > 0:
            return 1.0
        if x < 0:
            return -1.0
        return 0.0
    # R_NORM2
    return x / y
