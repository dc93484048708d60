"""Per-element math of the sequence operators (SequenceMask, SequenceReverse, SequenceLast),
plain ``@njit`` functions both kernel halves call.

Data is viewed as 3-D: (steps, batch, inner) when the time axis is 0, (batch, steps, inner)
when it is 1. Element ``n`` of that flat view is at step ``t`` of sequence ``b``.
"""
from numba import njit

from . import cache_stamp  # noqa: F401  (stamps the cache entries made below)


@njit(cache=True, nogil=True)
def step_and_sequence(n, dim1, inner, batch_first):
    """(t, b) of flat element n of the 3-D view (dim1 is the view's second dim)."""
    row = n // inner
    a0 = row // dim1
    a1 = row - a0 * dim1
    if batch_first:
        return a1, a0
    return a0, a1


@njit(cache=True, nogil=True)
def flat_index(t, b, i, steps, batch, inner, batch_first):
    """The flat element of step t, sequence b, inner position i."""
    if batch_first:
        return (b * steps + t) * inner + i
    return (t * batch + b) * inner + i


@njit(cache=True, nogil=True)
def valid_length(given, steps, use_lengths):
    """A sequence's length: ``given`` (its entry of the lengths) clamped to [0, steps], or
    every step without lengths. (Scalars only: the CUDA simulator cannot hand its arrays to
    CPU-compiled functions.)"""
    if not use_lengths:
        return steps
    n = int(given)
    if n < 0:
        return 0
    if n > steps:
        return steps
    return n


@njit(cache=True, nogil=True)
def reversed_step(t, length):
    """The step a reversed sequence reads at step t: the first ``length`` steps are reversed,
    the padding after them stays where it is."""
    if t < length:
        return length - 1 - t
    return t


@njit(cache=True, nogil=True)
def last_step(length):
    """The step SequenceLast reads (a length of 0 reads step 0)."""
    return length - 1 if length > 0 else 0
