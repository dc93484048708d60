"""CPU launcher of ``ctc_loss``: the per-sequence math of ``kernels/ctc_math.py`` compiled with
``njit``, the sequences of the batch in parallel (``prange``)."""
from numba import njit, prange

from .. import cache_stamp  # noqa: F401  (stamps the cache entries made below)
from .. import ctc_math as M
from ..math_build import compiled
from .jit import parallel_loop

__all__ = ["ctc_loss"]

K = compiled(M, njit(cache=True, nogil=True))


@parallel_loop(cost=8.0)
def _ctc_loop(data, label, data_lengths, label_lengths, use_data_lengths, use_label_lengths,
              blank, padding, loss, grad, head, logp, alpha, beta, want_grad):
    for b in prange(data.shape[1]):
        K.ctc_batch_sequence(b, data, label, data_lengths, label_lengths, use_data_lengths,
                             use_label_lengths, blank, padding, loss, grad, head, logp, alpha,
                             beta, want_grad)


def ctc_loss(data, label, data_lengths, label_lengths, use_data_lengths, use_label_lengths,
             blank, padding, loss, grad, head, logp, alpha, beta, want_grad):
    """loss[b] = -log p(label[b] | data[:, b, :]) for data (frames, batch, alphabet); with
    want_grad, grad (frames, batch, alphabet) = head[b] * its gradient. The lengths arrays
    are read when the matching flag is set (else every frame counts, and a label ends at its
    first ``padding`` value). logp (batch, frames, alphabet), alpha and beta (batch, frames,
    2 * label length + 1) are float64 scratch."""
    _ctc_loop(data.size, data, label, data_lengths, label_lengths, bool(use_data_lengths),
              bool(use_label_lengths), int(blank), int(padding), loss, grad, head, logp, alpha,
              beta, bool(want_grad))
