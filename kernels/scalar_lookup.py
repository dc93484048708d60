"""Per-element lookups of the tensor family (pick and histogram), shared by both halves.

Plain ``@njit`` functions like ``kernels/scalar_tensor.py``'s: the CPU launchers call them from
(p)range loops and the CUDA kernels from grid-stride loops, so the position pick reads and the
bin a histogram counts are each written once.
"""
from numba import njit

from .scalar_tensor import resolve_index, uniform_bin


@njit(cache=True)
def picked_offset(r, value, n, inner, wrap):
    """Flat offset, in data viewed as (outer, n, inner), of the element pick reads for its
    output ``r`` (output viewed as (outer, inner)) when that output's index is ``value``."""
    o = r // inner
    t = r - o * inner
    return (o * n + resolve_index(value, n, wrap)) * inner + t


@njit(cache=True)
def histogram_bin(x, edges, uniform, lo, hi, nbins):
    """The bin of x: among nbins equal bins over [lo, hi] when ``uniform``, otherwise the last
    of ``edges`` (nbins + 1 ascending values) at or below x, the last bin closed; -1 outside."""
    if uniform:
        return uniform_bin(x, lo, hi, nbins)
    if not (edges[0] <= x <= edges[nbins]):
        return -1
    lo_i, hi_i = 0, nbins
    while hi_i - lo_i > 1:           # binary search keeping edges[lo_i] <= x
        mid = (lo_i + hi_i) // 2
        if edges[mid] <= x:
            lo_i = mid
        else:
            hi_i = mid
    return lo_i
