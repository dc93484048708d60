"""Builds the per-element functions of ``kernels/*_math.py`` for one kernel half.

Those modules leave their functions undecorated, because the CUDA simulator cannot hand its
arrays to CPU-compiled code: each half compiles them itself. ``compiled(math_module, jit)``
returns a module object holding every function ``math_module`` defines, compiled with ``jit``
(``njit(cache=True, inline="always")`` in the CPU half, where a call per element would cost
more than the element; ``cuda.jit(device=True)`` in the CUDA half). Kernels call them as its
attributes, which numba resolves at compile time as it does for any module; the math module's
constants stay on the math module itself. A function of the math module may call another one:
the built copies look each other up among the compiled functions.

numba alone would key a cached kernel by the file of the kernel, not of the math it inlines;
``cache_stamp.py`` adds a digest of the whole package, so an edit of a ``*_math.py`` file makes
the kernels recompile.
"""
import types

from . import cache_stamp  # noqa: F401  (stamps the cache entries made below)

__all__ = ["compiled"]


def compiled(math_module, jit):
    built = types.ModuleType(math_module.__name__ + "_compiled")
    namespace = dict(vars(math_module))     # the copies' globals: the compiled functions
    for name, value in vars(math_module).items():
        if isinstance(value, types.FunctionType) and value.__module__ == math_module.__name__:
            copy = types.FunctionType(value.__code__, namespace, name, value.__defaults__,
                                      value.__closure__)
            copy.__qualname__ = value.__qualname__
            copy.__module__ = value.__module__
            copy.__doc__ = value.__doc__
            namespace[name] = jit(copy)
            setattr(built, name, namespace[name])
    return built
