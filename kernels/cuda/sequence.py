"""CUDA kernels of the sequence operators: the same functions and signatures as
``kernels/cpu/sequence.py``, grid-stride loops calling the per-element functions of
``kernels/sequence_math.py`` as device functions."""
from numba import cuda

from .. import sequence_math as M
from ..math_build import compiled
from .memory import flat, launch_config

__all__ = ["sequence_mask", "sequence_reverse", "sequence_last", "sequence_last_backward"]

K = compiled(M, cuda.jit(device=True))


@cuda.jit
def _mask_k(x, lengths, out, value, d0, d1, inner, use_lengths, batch_first, accumulate):
    for n in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        K.mask_element(n, x, lengths, out, value, d0, d1, inner, use_lengths, batch_first,
                      accumulate)


@cuda.jit
def _reverse_k(x, lengths, out, d0, d1, inner, use_lengths, batch_first, accumulate):
    for n in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        K.reverse_element(n, x, lengths, out, d0, d1, inner, use_lengths, batch_first, accumulate)


@cuda.jit
def _last_k(x, lengths, out, d0, d1, inner, use_lengths, batch_first):
    for n in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        K.last_element(n, x, lengths, out, d0, d1, inner, use_lengths, batch_first)


@cuda.jit
def _last_backward_k(dy, lengths, dx, d0, d1, inner, use_lengths, batch_first, accumulate):
    for n in range(cuda.grid(1), dx.size, cuda.gridsize(1)):
        K.last_backward_element(n, dy, lengths, dx, d0, d1, inner, use_lengths, batch_first,
                               accumulate)


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
