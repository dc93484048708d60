"""Builds the per-element functions of ``kernels/*_math.py`` for one kernel half.

Those modules leave their functions undecorated, because the CUDA simulator cannot hand its
arrays to CPU-compiled code: each half compiles them itself. ``compiled(math_module, jit)``
returns a module object holding every function ``math_module`` defines, compiled with ``jit``
(``njit(cache=True, inline="always")`` in the CPU half, where a call per element would cost
more than the element; ``cuda.jit(device=True)`` in the CUDA half). Kernels call them as its
attributes, which numba resolves at compile time as it does for any module; the math module's
constants stay on the math module itself.

numba caches a kernel on disk keyed by the file of the kernel, not of the math it inlines:
after editing a ``*_math.py`` file delete ``kernels/**/__pycache__/*.nb[ic]``.
"""
import types

__all__ = ["compiled"]


def compiled(math_module, jit):
    built = types.ModuleType(math_module.__name__ + "_compiled")
    for name, value in vars(math_module).items():
        if isinstance(value, types.FunctionType) and value.__module__ == math_module.__name__:
            setattr(built, name, jit(value))
    return built
