"""Image pipeline kernels: crop + mirror + per-channel normalisation + HWC->CHW in one pass.

They run inside the image iterators' decode threads, so they are compiled ``nogil``.
"""
import numpy as np
from numba import njit

__all__ = ["crop_normalize_chw", "crop_copy_chw"]


@njit(nogil=True, cache=True)
def _crop_normalize(src, y0, x0, mirror, reverse_channels, mean, mult, out):
    n_ch, height, width = out.shape
    last = src.shape[2] - 1
    for c in range(n_ch):
        sc = last - c if reverse_channels else c
        m = mean[c]
        k = mult[c]
        for i in range(height):
            row = y0 + i
            for j in range(width):
                col = x0 + width - 1 - j if mirror else x0 + j
                out[c, i, j] = (np.float32(src[row, col, sc]) - m) * k


@njit(nogil=True, cache=True)
def _crop_copy(src, y0, x0, mirror, reverse_channels, out):
    n_ch, height, width = out.shape
    last = src.shape[2] - 1
    for c in range(n_ch):
        sc = last - c if reverse_channels else c
        for i in range(height):
            row = y0 + i
            for j in range(width):
                col = x0 + width - 1 - j if mirror else x0 + j
                out[c, i, j] = src[row, col, sc]


def crop_normalize_chw(src, y0, x0, mirror, reverse_channels, mean, mult, out):
    """``out[c, i, j] = (src[y0 + i, x0 + j', c'] - mean[c]) * mult[c]`` for a float32 CHW
    ``out``: ``j'`` runs right to left when ``mirror``, ``c'`` counts from the last source
    channel when ``reverse_channels`` (BGR -> RGB)."""
    _crop_normalize(src, y0, x0, mirror, reverse_channels, mean, mult, out)


def crop_copy_chw(src, y0, x0, mirror, reverse_channels, out):
    """The same window copied without arithmetic (integer outputs)."""
    _crop_copy(src, y0, x0, mirror, reverse_channels, out)
