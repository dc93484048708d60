"""CPU kernels of the sequence operators: the per-element functions of
``kernels/sequence_math.py`` compiled with ``njit`` (inlined: a call per element would cost more
than the element), run over the elements with ``prange``.

Every launcher takes the data as a 3-D view (see that module) and ``lengths`` (read only when
``use_lengths``); ``accumulate`` adds into the destination instead of overwriting it. The loops
run over flat views, with the view's dims passed alongside.
"""
from numba import njit, prange

from .. import cache_stamp  # noqa: F401  (stamps the cache entries made below)
from .. import sequence_math as M
from ..math_build import compiled
from .jit import parallel_loop

__all__ = ["sequence_mask", "sequence_reverse", "sequence_last", "sequence_last_backward"]

K = compiled(M, njit(cache=True, inline="always"))


def _flat(a):
    return a.reshape(a.size)


@parallel_loop(cost=1.0)
def _mask(x, lengths, out, value, d0, d1, inner, use_lengths, batch_first, accumulate):
    for n in prange(x.size):
        K.mask_element(n, x, lengths, out, value, d0, d1, inner, use_lengths, batch_first,
                      accumulate)


@parallel_loop(cost=2.0)
def _reverse(x, lengths, out, d0, d1, inner, use_lengths, batch_first, accumulate):
    for n in prange(x.size):
        K.reverse_element(n, x, lengths, out, d0, d1, inner, use_lengths, batch_first, accumulate)


@parallel_loop(cost=2.0)
def _last(x, lengths, out, d0, d1, inner, use_lengths, batch_first):
    for n in prange(out.size):
        K.last_element(n, x, lengths, out, d0, d1, inner, use_lengths, batch_first)


@parallel_loop(cost=1.0)
def _last_backward(dy, lengths, dx, d0, d1, inner, use_lengths, batch_first, accumulate):
    for n in prange(dx.size):
        K.last_backward_element(n, dy, lengths, dx, d0, d1, inner, use_lengths, batch_first,
                               accumulate)


def sequence_mask(x, lengths, out, value, use_lengths, batch_first, accumulate=False):
    """out = x where the step is inside its sequence's length, else ``value`` (x, out 3-D)."""
    _mask(x.size, _flat(x), _flat(lengths), _flat(out), out.dtype.type(value), *x.shape,
          bool(use_lengths), bool(batch_first), bool(accumulate))


def sequence_reverse(x, lengths, out, use_lengths, batch_first, accumulate=False):
    """out = x with the first ``length`` steps of every sequence reversed (its own inverse,
    so the backward pass is the same call on the head gradient)."""
    _reverse(x.size, _flat(x), _flat(lengths), _flat(out), *x.shape, bool(use_lengths),
             bool(batch_first), bool(accumulate))


def sequence_last(x, lengths, out, use_lengths, batch_first):
    """out (batch, inner) = the last valid step of every sequence of x (3-D)."""
    _last(out.size, _flat(x), _flat(lengths), _flat(out), *x.shape, bool(use_lengths),
          bool(batch_first))


def sequence_last_backward(dy, lengths, dx, use_lengths, batch_first, accumulate=False):
    """dx (3-D) = dy at every sequence's last valid step, 0 elsewhere."""
    _last_backward(dx.size, _flat(dy), _flat(lengths), _flat(dx), *dx.shape, bool(use_lengths),
                   bool(batch_first), bool(accumulate))
