"""numba kernels, installed as ``lightmod.kernels``.

* ``scalar``: per-element / per-index math as plain ``@njit`` functions, used by both halves.
* ``cpu``: launchers (``prange`` skeletons) and CPU-only algorithms; never imports numba.cuda.
* ``cuda``: grid-stride launchers and CUDA-only algorithms; the only place importing numba.cuda.

Nothing here compiles at import: every kernel compiles lazily, per dtype, on first use, and is
cached on disk by numba (``cache=True``) where numba can cache.
"""

import logging
import os

__all__ = ["for_context", "cuda_in_use"]

# numba logs its compiler passes at DEBUG; scripts that call logging.basicConfig(level=DEBUG)
# (MXNet's image-classification examples do) would print megabytes of them. Keep numba's
# logger at WARNING unless the user set a level for it.
if logging.getLogger("numba").level == logging.NOTSET:
    logging.getLogger("numba").setLevel(logging.WARNING)

# numba's OpenMP workers busy-wait after every parallel region; on a 2-core machine they then
# starve the BLAS threads of the matrix product that follows (a LeNet training step measured
# ~10x slower). Let idle workers sleep unless the user chose a policy. This must happen before
# numba loads its OpenMP runtime, i.e. before the first parallel kernel runs.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


_kernel_sets = {}   # (device type id, device id) -> its kernel set, once it proved usable


def for_context(ctx):
    """The kernel set ``k`` that computes on ``ctx``: ``lightmod.kernels.cpu`` for cpu (and
    cpu_pinned) contexts, a :class:`~lightmod.kernels.cuda_support.KernelSet` bound to the GPU
    for gpu contexts (raising the MXNetError that says why a GPU is unusable). The one place
    that maps a context to kernels; later calls are a dict look-up."""
    key = (ctx.device_typeid, ctx.device_id)
    k = _kernel_sets.get(key)
    if k is None:
        if ctx.device_typeid == 2:
            from . import cuda_support
            cuda_support.require(ctx.device_id)
            from . import cuda   # only once CUDA proved usable: it imports numba.cuda
            k = cuda_support.KernelSet(cuda, ctx.device_id)
        else:
            from . import cpu as k
        _kernel_sets[key] = k
    return k


def cuda_in_use():
    """True once a GPU kernel set was handed out (CUDA work may then be pending)."""
    return any(device_type == 2 for device_type, _ in _kernel_sets)
