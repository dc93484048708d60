"""CPU kernel of SVMOutput's backward (the math is ``kernels/scalar_svm.py``)."""
from numba import njit, prange

from .. import cache_stamp  # noqa: F401  (stamps the cache entries made below)
from .. import threads as _threads
from ..scalar_svm import svm_grad

__all__ = ["svm_output_backward"]

PARALLEL_MIN = 1 << 17


@njit(cache=True, nogil=True)
def _svm_rows(scores, label, grad, margin, reg, linear, accumulate, lo, hi):
    classes = scores.shape[1]
    for r in range(lo, hi):
        k = int(label[r])
        for c in range(classes):
            g = svm_grad(scores[r, c], c == k, margin, reg, linear)
            if accumulate:
                grad[r, c] += g
            else:
                grad[r, c] = g


@njit(cache=True, nogil=True, parallel=True)
def _svm_rows_par(scores, label, grad, margin, reg, linear, accumulate, rows, nchunks):
    step = (rows + nchunks - 1) // nchunks
    for c in prange(nchunks):
        _svm_rows(scores, label, grad, margin, reg, linear, accumulate, c * step,
                  min(rows, (c + 1) * step))


def svm_output_backward(scores, label, grad, margin, reg, linear, accumulate=False):
    """SVMOutput's data gradient on (rows, classes) views; row r's label is int(label[r])."""
    rows = scores.shape[0]
    args = (scores, label, grad, float(margin), float(reg), bool(linear), bool(accumulate))
    if scores.size >= PARALLEL_MIN and rows > 1:
        threads = _threads.refresh()
        if threads > 1:
            _svm_rows_par(*args, rows, min(rows, threads * 4))
            return
    _svm_rows(*args, 0, rows)
