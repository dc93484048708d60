"""The element-wise launchers that are the same in both kernel halves, written once (no numba).

clip and hard_sigmoid are the two-parameter unary functions of ``scalar.py`` (``P_CLIP``,
``P_HARD_SIGMOID``); each half runs them with one pair of launchers of its own,
``forward(code, x, p, q, out)`` and ``backward(code, x, p, q, g, dx, req)``, which also stage
float16 arrays through float32. This module names them as the kernel-set API.
"""
from .scalar import P_CLIP, P_HARD_SIGMOID

__all__ = ["param_unary_launchers"]


def param_unary_launchers(forward, backward):
    """(elemwise_clip, elemwise_clip_backward, elemwise_hard_sigmoid,
    elemwise_hard_sigmoid_backward) of the half whose launchers are ``forward``/``backward``."""

    def elemwise_clip(x, a_min, a_max, out):
        """out = x clipped to [a_min, a_max]."""
        forward(P_CLIP, x, a_min, a_max, out)

    def elemwise_clip_backward(x, a_min, a_max, g, dx, req):
        """dx (req) g where a_min <= x <= a_max, else 0."""
        backward(P_CLIP, x, a_min, a_max, g, dx, req)

    def elemwise_hard_sigmoid(x, alpha, beta, out):
        """out = max(0, min(1, alpha * x + beta))."""
        forward(P_HARD_SIGMOID, x, alpha, beta, out)

    def elemwise_hard_sigmoid_backward(x, alpha, beta, g, dx, req):
        """dx (req) g * alpha where 0 < alpha * x + beta < 1, else 0."""
        backward(P_HARD_SIGMOID, x, alpha, beta, g, dx, req)

    return (elemwise_clip, elemwise_clip_backward, elemwise_hard_sigmoid,
            elemwise_hard_sigmoid_backward)
