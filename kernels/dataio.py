"""Kernels of the data pipelines (``mx.io`` / ``mx.image``), apart from the operator kernel
sets so that a data iterator loads only these.

* images: crop + mirror + per-channel normalisation + HWC->CHW in one pass, compiled
  ``nogil`` because they run inside the image iterators' decode threads;
* LibSVM text: ``label index:value ...`` lines parsed straight from the file's bytes into CSR
  arrays (two passes: count, then fill).
"""
import numpy as np
from numba import njit

from . import cache_stamp  # noqa: F401  (stamps the cache entries made below)

__all__ = ["crop_normalize_chw", "crop_copy_chw", "libsvm_count", "libsvm_parse",
           "parse_libsvm_bytes", "LIBSVM_ERRORS"]


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


# status codes of libsvm_parse -> message
LIBSVM_ERRORS = {
    1: "the label is not a number",
    2: "a feature index is not a non-negative integer",
    3: "a feature has no ':' between index and value",
    4: "a feature value is not a number",
    5: "a feature index is too large (more than 18 digits)",
}
# digits of a feature index: 18 fit an int64 whatever they are (19 may wrap around negative,
# and a wrapped index would write into another row of the batch)
LIBSVM_MAX_INDEX_DIGITS = 18


@njit(cache=True, nogil=True)
def _is_space(c):
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@njit(cache=True, nogil=True)
def _sign(buf, pos, end):
    """(+1.0 or -1.0, position after the optional '+' or '-' at ``pos``)."""
    if pos < end and (buf[pos] == 45 or buf[pos] == 43):
        return (-1.0 if buf[pos] == 45 else 1.0), pos + 1
    return 1.0, pos


@njit(cache=True, nogil=True)
def _digits(buf, pos, end, value):
    """(``value`` with the decimal digits at ``pos`` appended, position after them, how many
    digits); ``value``'s type (float mantissa or integer exponent) is kept."""
    count = 0
    while pos < end and 48 <= buf[pos] <= 57:
        value = value * 10 + (buf[pos] - 48)
        pos += 1
        count += 1
    return value, pos, count


@njit(cache=True, nogil=True)
def _number(buf, pos, end):
    """(value, position after it, ok) of the decimal number starting at ``pos``."""
    sign, pos = _sign(buf, pos, end)
    mantissa, pos, digits = _digits(buf, pos, end, 0.0)
    exp10 = 0
    if pos < end and buf[pos] == 46:
        mantissa, pos, decimals = _digits(buf, pos + 1, end, mantissa)
        exp10 -= decimals
        digits += decimals
    if digits == 0:
        return 0.0, pos, False
    if pos < end and (buf[pos] == 101 or buf[pos] == 69):
        esign, pos = _sign(buf, pos + 1, end)
        e, pos, edigits = _digits(buf, pos, end, 0)
        if edigits == 0:
            return 0.0, pos, False
        exp10 += e if esign > 0 else -e
    if exp10 >= 0:
        value = mantissa * 10.0 ** exp10
    else:
        value = mantissa / 10.0 ** (-exp10)
    return sign * value, pos, True


@njit(cache=True, nogil=True)
def libsvm_count(buf):
    """(rows, features): non-blank lines and ':' separators of the text."""
    rows = 0
    feats = 0
    blank = True
    for i in range(buf.size):
        c = buf[i]
        if c == 10:
            if not blank:
                rows += 1
            blank = True
        elif not _is_space(c):
            blank = False
            if c == 58:
                feats += 1
    if not blank:
        rows += 1
    return rows, feats


@njit(cache=True, nogil=True)
def libsvm_parse(buf, labels, indptr, indices, values):
    """Fill the label and CSR arrays; returns (status, 1-based line number of the error)."""
    end = buf.size
    pos = 0
    line = 0
    row = 0
    nnz = 0
    indptr[0] = 0
    while pos < end:
        line += 1
        stop = pos
        while stop < end and buf[stop] != 10:
            stop += 1
        while pos < stop and _is_space(buf[pos]):
            pos += 1
        if pos < stop:
            value, pos, ok = _number(buf, pos, stop)
            if not ok or (pos < stop and not _is_space(buf[pos])):
                return 1, line
            labels[row] = value
            while True:
                while pos < stop and _is_space(buf[pos]):
                    pos += 1
                if pos >= stop:
                    break
                index = 0
                ndig = 0
                seen = False
                while pos < stop and 48 <= buf[pos] <= 57:
                    if index != 0 or buf[pos] != 48:    # leading zeros do not count
                        if ndig == LIBSVM_MAX_INDEX_DIGITS:
                            return 5, line
                        ndig += 1
                    index = index * 10 + (buf[pos] - 48)
                    pos += 1
                    seen = True
                if not seen:
                    return 2, line
                if pos >= stop or buf[pos] != 58:
                    return 3, line
                pos += 1
                value, pos, ok = _number(buf, pos, stop)
                if not ok or (pos < stop and not _is_space(buf[pos])):
                    return 4, line
                indices[nnz] = index
                values[nnz] = value
                nnz += 1
            row += 1
            indptr[row] = nnz
        pos = stop + 1
    return 0, line


def parse_libsvm_bytes(raw):
    """``(status, line, labels, indptr, indices, values)`` of LibSVM text bytes."""
    buf = np.frombuffer(raw, dtype=np.uint8)
    rows, feats = libsvm_count(buf)
    labels = np.zeros(rows, np.float32)
    indptr = np.zeros(rows + 1, np.int64)
    indices = np.zeros(feats, np.int64)
    values = np.zeros(feats, np.float32)
    status, line = libsvm_parse(buf, labels, indptr, indices, values)
    return status, line, labels, indptr, indices[:indptr[-1]], values[:indptr[-1]]
