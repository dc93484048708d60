"""CUDA kernels of the sequence operators: the same functions and signatures as
``kernels/cpu/sequence.py``, grid-stride loops calling ``kernels/scalar_sequence.py``."""
from numba import cuda

from ..scalar_sequence import flat_index, last_step, reversed_step, step_and_sequence, valid_length
from .memory import flat, launch_config

__all__ = ["sequence_mask", "sequence_reverse", "sequence_last", "sequence_last_backward"]


@cuda.jit
def _mask_k(x, lengths, out, value, d0, d1, inner, use_lengths, batch_first, accumulate):
    steps = d1 if batch_first else d0
    for n in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        t, b = step_and_sequence(n, d1, inner, batch_first)
        v = x[n] if t < valid_length(lengths[b], steps, use_lengths) else value
        if accumulate:
            out[n] += v
        else:
            out[n] = v


@cuda.jit
def _reverse_k(x, lengths, out, d0, d1, inner, use_lengths, batch_first, accumulate):
    steps = d1 if batch_first else d0
    batch = d0 if batch_first else d1
    for n in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        t, b = step_and_sequence(n, d1, inner, batch_first)
        src = flat_index(reversed_step(t, valid_length(lengths[b], steps, use_lengths)), b,
                         n % inner, steps, batch, inner, batch_first)
        if accumulate:
            out[n] += x[src]
        else:
            out[n] = x[src]


@cuda.jit
def _last_k(x, lengths, out, d0, d1, inner, use_lengths, batch_first):
    steps = d1 if batch_first else d0
    batch = d0 if batch_first else d1
    for n in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        b = n // inner
        t = last_step(valid_length(lengths[b], steps, use_lengths))
        out[n] = x[flat_index(t, b, n - b * inner, steps, batch, inner, batch_first)]


@cuda.jit
def _last_backward_k(dy, lengths, dx, d0, d1, inner, use_lengths, batch_first, accumulate):
    steps = d1 if batch_first else d0
    for n in range(cuda.grid(1), dx.size, cuda.gridsize(1)):
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
    if x.size:
        _mask_k[launch_config(x.size)](flat(x), flat(lengths), flat(out), out.dtype.type(value),
                                       x.shape[0], x.shape[1], x.shape[2], bool(use_lengths),
                                       bool(batch_first), bool(accumulate))


def sequence_reverse(x, lengths, out, use_lengths, batch_first, accumulate=False):
    """out = x with the first ``length`` steps of every sequence reversed."""
    if x.size:
        _reverse_k[launch_config(x.size)](flat(x), flat(lengths), flat(out), x.shape[0],
                                          x.shape[1], x.shape[2], bool(use_lengths),
                                          bool(batch_first), bool(accumulate))


def sequence_last(x, lengths, out, use_lengths, batch_first):
    """out (batch, inner) = the last valid step of every sequence of x (3-D)."""
    if out.size:
        _last_k[launch_config(out.size)](flat(x), flat(lengths), flat(out), x.shape[0],
                                         x.shape[1], x.shape[2], bool(use_lengths),
                                         bool(batch_first))


def sequence_last_backward(dy, lengths, dx, use_lengths, batch_first, accumulate=False):
    """dx (3-D) = dy at every sequence's last valid step, 0 elsewhere."""
    if dx.size:
        _last_backward_k[launch_config(dx.size)](flat(dy), flat(lengths), flat(dx), dx.shape[0],
                                                 dx.shape[1], dx.shape[2], bool(use_lengths),
                                                 bool(batch_first), bool(accumulate))
