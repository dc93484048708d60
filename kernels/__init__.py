"""numba kernels, installed as ``lightmod.kernels``.

* ``scalar``: per-element / per-index math as plain ``@njit`` functions, used by both halves.
* ``cpu``: launchers (``prange`` skeletons) and CPU-only algorithms; never imports numba.cuda.
* ``cuda``: grid-stride launchers and CUDA-only algorithms; the only place importing numba.cuda.

Nothing here compiles at import: every kernel compiles lazily, per dtype, on first use, and is
cached on disk by numba (``cache=True``) where numba can cache.
"""

import logging
import os

__all__ = ["for_context"]

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


def for_context(ctx):
    """The kernel set (module) that computes on ``ctx``."""
    if ctx.device_typeid == 2:
        from . import cuda_support
        cuda_support.require(ctx.device_id)
        return cuda_support.kernel_set(ctx.device_id)
    from . import cpu
    return cpu
