"""What one row of the nn family's row-wise losses reads and writes, written once for both kernel
halves: ``kernels/cpu/nn.py`` and ``kernels/cuda/nn.py`` build these with
``kernels/math_build.py`` (``njit`` / ``cuda.jit(device=True)``). They take arrays, so they are
left undecorated here (the CUDA simulator cannot hand its arrays to CPU-compiled functions);
the per-element math is ``kernels/scalar_nn.py``.
"""
import math

from .scalar_nn import clip_index


def row_logsumexp(x, r, ncls):
    """(m, s) with log sum_c exp(x[r, c]) = m + log(s), m the row's max (no overflow)."""
    m = -math.inf
    for c in range(ncls):
        if x[r, c] > m:
            m = x[r, c]
    s = 0.0
    for c in range(ncls):
        s += math.exp(x[r, c] - m)
    return m, s


def softmax_ce_row_loss(x, label, r, ncls):
    """-log softmax(x[r])[label[r]] (the label clipped to the classes)."""
    m, s = row_logsumexp(x, r, ncls)
    return m + math.log(s) - x[r, clip_index(label[r], ncls)]


def softmax_ce_row_grad(x, label, dx, r, ncls, head, accumulate):
    """dx[r] (+)= (softmax(x[r]) - onehot(label[r])) * head."""
    m, s = row_logsumexp(x, r, ncls)
    k = clip_index(label[r], ncls)
    for c in range(ncls):
        g = math.exp(x[r, c] - m) / s
        if c == k:
            g -= 1.0
        g *= head
        if accumulate:
            dx[r, c] += g
        else:
            dx[r, c] = g
