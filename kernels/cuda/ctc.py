"""CUDA launcher of ``ctc_loss``: the same function and arguments as ``kernels/cpu/ctc.py``, the
per-sequence math of ``kernels/ctc_math.py`` as a device function, one thread per sequence."""
from numba import cuda

from .. import ctc_math as M
from .memory import launch_config as launch

__all__ = ["ctc_loss"]

_sequence = cuda.jit(device=True)(M.ctc_sequence)
_label_length = cuda.jit(device=True)(M.label_length)


@cuda.jit
def _ctc_k(data, label, data_lengths, label_lengths, use_data_lengths, use_label_lengths, blank,
           padding, loss, grad, head, logp, alpha, beta, want_grad):
    for b in range(cuda.grid(1), data.shape[1], cuda.gridsize(1)):
        frames = int(data_lengths[b]) if use_data_lengths else data.shape[0]
        length = (int(label_lengths[b]) if use_label_lengths
                  else _label_length(label[b], padding))
        loss[b] = _sequence(data[:, b, :], label[b], length, frames, blank, logp[b], alpha[b],
                            beta[b], grad[:, b, :], head[b], want_grad)


def ctc_loss(data, label, data_lengths, label_lengths, use_data_lengths, use_label_lengths,
             blank, padding, loss, grad, head, logp, alpha, beta, want_grad):
    """See ``kernels/cpu/ctc.py``."""
    if data.shape[1]:
        _ctc_k[launch(data.shape[1])](data, label, data_lengths, label_lengths,
                                      bool(use_data_lengths), bool(use_label_lengths), int(blank),
                                      int(padding), loss, grad, head, logp, alpha, beta,
                                      bool(want_grad))
