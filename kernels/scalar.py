"""Per-element and per-index math as plain ``@njit`` functions, used by BOTH kernel halves.

The CPU launchers call them from ``prange`` loops, the CUDA kernels from grid-stride loops, so
the math of an activation or of one optimizer step is written exactly once.
"""
from numba import njit  # noqa: F401
