"""CUDA kernel of SVMOutput's backward: the same function and signature as ``kernels/cpu/svm.py``,
one grid-stride loop over the elements calling the shared math of ``kernels/scalar_svm.py``."""
from numba import cuda

from ..cuda_support import simulator_enabled
from ..scalar_svm import svm_grad

__all__ = ["svm_output_backward"]

THREADS = 32 if simulator_enabled() else 256
MAX_BLOCKS = 4096


@cuda.jit
def _svm_k(scores, label, grad, margin, reg, linear, accumulate):
    classes = scores.shape[1]
    for i in range(cuda.grid(1), scores.size, cuda.gridsize(1)):
        r = i // classes
        c = i - r * classes
        g = svm_grad(scores[r, c], c == int(label[r]), margin, reg, linear)
        if accumulate:
            grad[r, c] += g
        else:
            grad[r, c] = g


def svm_output_backward(scores, label, grad, margin, reg, linear, accumulate=False):
    """SVMOutput's data gradient on (rows, classes) views; row r's label is int(label[r])."""
    blocks = max(1, min(MAX_BLOCKS, (scores.size + THREADS - 1) // THREADS))
    _svm_k[blocks, THREADS](scores, label.reshape(label.size), grad, float(margin), float(reg),
                            bool(linear), bool(accumulate))
