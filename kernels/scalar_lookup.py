"""Per-element index math of pick, shared by both halves.

A plain ``@njit`` function like ``kernels/scalar_tensor.py``'s: the CPU launchers call it from
(p)range loops and the CUDA kernels from grid-stride loops, so the position pick reads is written
once. It takes scalars only: numba's CUDA simulator cannot hand its device arrays to a
CPU-compiled function, so array-taking helpers (histogram's search of the bin edges) stay per half.
"""
from numba import njit

from . import cache_stamp  # noqa: F401  (stamps the cache entries made below)
from .scalar_tensor import resolve_index


@njit(cache=True, nogil=True)
def picked_offset(r, value, n, inner, wrap):
    """Flat offset, in data viewed as (outer, n, inner), of the element pick reads for its
    output ``r`` (output viewed as (outer, inner)) when that output's index is ``value``."""
    o = r // inner
    t = r - o * inner
    return (o * n + resolve_index(value, n, wrap)) * inner + t

