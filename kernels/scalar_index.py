"""Coordinates of a flat index into a C-ordered array, as plain ``@njit`` functions.

The CUDA grid-stride kernels walk flat indices and call these as device functions to find the
coordinates of the element they handle; CPU loops that walk flat indices can call them too.
The leading extent is never needed (the index itself bounds it).
"""
from numba import njit

from . import cache_stamp  # noqa: F401  (stamps the cache entries made below)


@njit(cache=True, nogil=True)
def unravel3(i, B, C):
    """(a, b, c) with i = (a * B + b) * C + c: element i of an (A, B, C) array."""
    t = i // C
    return t // B, t % B, i % C


@njit(cache=True, nogil=True)
def unravel4(i, B, C, D):
    """(a, b, c, d): element i of an (A, B, C, D) array."""
    a, b, c = unravel3(i // D, B, C)
    return a, b, c, i % D


@njit(cache=True, nogil=True)
def unravel5(i, B, C, D, E):
    """(a, b, c, d, e): element i of an (A, B, C, D, E) array."""
    a, b, c, d = unravel4(i // E, B, C, D)
    return a, b, c, d, i % E
