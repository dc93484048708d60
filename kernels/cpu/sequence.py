"""CPU kernels of the sequence operators; the per-element math is ``kernels/scalar_sequence.py``.

Every launcher takes the data as a 3-D view (see that module) and ``lengths`` (read only when
``use_lengths``); ``accumulate`` adds into the destination instead of overwriting it. The loops
run over flat views, with the view's dims passed alongside.
"""
from numba import prange

from ..scalar_sequence import flat_index, last_step, reversed_step, step_and_sequence, valid_length
from .jit import parallel_loop

__all__ = ["sequence_mask", "sequence_reverse", "sequence_last", "sequence_last_backward"]


def _flat(a):
    return a.reshape(a.size)


@parallel_loop(cost=1.0)
def _mask(x, lengths, out, value, d0, d1, inner, use_lengths, batch_first, accumulate):
    steps = d1 if batch_first else d0
    for n in prange(x.size):
        t, b = step_and_sequence(n, d1, inner, batch_first)
        v = x[n] if t < valid_length(lengths[b], steps, use_lengths) else value
        if accumulate:
            out[n] += v
        else:
            out[n] = v


@parallel_loop(cost=2.0)
def _reverse(x, lengths, out, d0, d1, inner, use_lengths, batch_first, accumulate):
    steps, batch = (d1, d0) if batch_first else (d0, d1)
    for n in prange(x.size):
        t, b = step_and_sequence(n, d1, inner, batch_first)
        src = flat_index(reversed_step(t, valid_length(lengths[b], steps, use_lengths)), b,
                         n % inner, steps, batch, inner, batch_first)
        if accumulate:
            out[n] += x[src]
        else:
            out[n] = x[src]


@parallel_loop(cost=2.0)
def _last(x, lengths, out, d0, d1, inner, use_lengths, batch_first):
    steps, batch = (d1, d0) if batch_first else (d0, d1)
    for n in prange(out.size):
        b = n // inner
        t = last_step(valid_length(lengths[b], steps, use_lengths))
        out[n] = x[flat_index(t, b, n - b * inner, steps, batch, inner, batch_first)]


@parallel_loop(cost=1.0)
def _last_backward(dy, lengths, dx, d0, d1, inner, use_lengths, batch_first, accumulate):
    steps = d1 if batch_first else d0
    for n in prange(dx.size):
        t, b = step_and_sequence(n, d1, inner, batch_first)
        g = 0.0
        if t == last_step(valid_length(lengths[b], steps, use_lengths)):
            g = dy[b * inner + n % inner]
        if accumulate:
            dx[n] += g
        else:
            dx[n] = g


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
