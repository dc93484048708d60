"""Per-element math of SVMOutput's gradient, a plain ``@njit`` function both kernel halves call."""
from numba import njit

from . import cache_stamp  # noqa: F401  (stamps the cache entries made below)


@njit(cache=True, nogil=True)
def svm_grad(score, is_label, margin, reg, linear):
    """d(hinge loss)/d(score) for one class score of one sample.

    The label's score is pushed up while it is below ``margin``, every other score pushed down
    while it is above ``-margin``. ``linear`` (L1-SVM) gives a constant step of
    ``reg``; otherwise (L2-SVM) the step is twice the margin violation, times ``reg``.
    """
    if is_label:
        if margin > score:
            return -reg if linear else -2.0 * reg * (margin - score)
        return 0.0
    if margin > -score:
        return reg if linear else 2.0 * reg * (margin + score)
    return 0.0
