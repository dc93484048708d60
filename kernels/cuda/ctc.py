"""CUDA launcher of ``ctc_loss``: the same function and arguments as ``kernels/cpu/ctc.py``, the
per-sequence math of ``kernels/ctc_math.py`` as a device function, one thread per sequence."""
from numba import cuda

from .. import ctc_math as M
from ..math_build import compiled
from .memory import launch_config as launch

__all__ = ["ctc_loss"]

K = compiled(M, cuda.jit(device=True))


@cuda.jit
def _ctc_k(data, label, data_lengths, label_lengths, use_data_lengths, use_label_lengths, blank,
           padding, loss, grad, head, logp, alpha, beta, want_grad):
    for b in range(cuda.grid(1), data.shape[1], cuda.gridsize(1)):
        K.ctc_batch_sequence(b, data, label, data_lengths, label_lengths, use_data_lengths,
                             use_label_lengths, blank, padding, loss, grad, head, logp, alpha,
                             beta, want_grad)


def ctc_loss(data, label, data_lengths, label_lengths, use_data_lengths, use_label_lengths,
             blank, padding, loss, grad, head, logp, alpha, beta, want_grad):
    """See ``kernels/cpu/ctc.py``."""
    if data.shape[1]:
        _ctc_k[launch(data.shape[1])](data, label, data_lengths, label_lengths,
                                      bool(use_data_lengths), bool(use_label_lengths), int(blank),
                                      int(padding), loss, grad, head, logp, alpha, beta,
                                      bool(want_grad))
