"""What one element of the sequence operators computes, written once for both kernel halves:
``kernels/cpu/sequence.py`` compiles these with ``njit`` and runs them in a ``prange`` loop,
``kernels/cuda/sequence.py`` with ``cuda.jit(device=True)`` in a grid-stride loop. They read
and write the flat arrays, so they are left undecorated here (the CUDA simulator cannot hand
its arrays to CPU-compiled functions); the scalar math they call is
``kernels/scalar_sequence.py``.

Arguments are those of the launchers: flat views of the 3-D data (d0, d1, inner) and of the
lengths (read only with ``use_lengths``); ``accumulate`` adds into the destination.
"""
from .scalar_sequence import flat_index, last_step, reversed_step, step_and_sequence, valid_length


def mask_element(n, x, lengths, out, value, d0, d1, inner, use_lengths, batch_first,
                 accumulate):
    """out[n] = x[n] inside its sequence's length, else ``value``."""
    steps = d1 if batch_first else d0
    t, b = step_and_sequence(n, d1, inner, batch_first)
    v = x[n] if t < valid_length(lengths[b], steps, use_lengths) else value
    if accumulate:
        out[n] += v
    else:
        out[n] = v


def reverse_element(n, x, lengths, out, d0, d1, inner, use_lengths, batch_first, accumulate):
    """out[n] = the element of x its step mirrors to within the sequence's length."""
    steps, batch = (d1, d0) if batch_first else (d0, d1)
    t, b = step_and_sequence(n, d1, inner, batch_first)
    src = flat_index(reversed_step(t, valid_length(lengths[b], steps, use_lengths)), b,
                     n % inner, steps, batch, inner, batch_first)
    if accumulate:
        out[n] += x[src]
    else:
        out[n] = x[src]


def last_element(n, x, lengths, out, d0, d1, inner, use_lengths, batch_first):
    """out[n] (n over batch x inner) = x at its sequence's last valid step."""
    steps, batch = (d1, d0) if batch_first else (d0, d1)
    b = n // inner
    t = last_step(valid_length(lengths[b], steps, use_lengths))
    out[n] = x[flat_index(t, b, n - b * inner, steps, batch, inner, batch_first)]


def last_backward_element(n, dy, lengths, dx, d0, d1, inner, use_lengths, batch_first,
                          accumulate):
    """dx[n] = dy at its sequence's last valid step, 0 at every other step."""
    steps = d1 if batch_first else d0
    t, b = step_and_sequence(n, d1, inner, batch_first)
    g = 0.0
    if t == last_step(valid_length(lengths[b], steps, use_lengths)):
        g = dy[b * inner + n % inner]
    if accumulate:
        dx[n] += g
    else:
        dx[n] = g
