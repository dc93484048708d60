"""numba compilation helpers of the CPU half."""
import types

from numba import njit

__all__ = ["serial_and_parallel"]


def serial_and_parallel(loop, **options):
    """``(serial, parallel)`` dispatchers of one loop written with ``prange`` (a plain
    ``range`` in the serial one), both ``cache=True``; ``options`` go to both ``njit`` calls.

    Each dispatcher compiles its own copy of the function, named ``<loop>_serial`` and
    ``<loop>_parallel``: numba's on-disk cache names its entries after the function and keys
    them by signature but not by ``parallel=``, so two dispatchers of the very same function
    would load each other's compiled code (the serial path then runs the threaded loop, or the
    parallel path the serial one, whichever was compiled first).
    """
    def compiled(suffix, parallel):
        fn = types.FunctionType(loop.__code__, loop.__globals__, loop.__name__ + suffix,
                                loop.__defaults__, loop.__closure__)
        fn.__qualname__ = loop.__qualname__ + suffix
        fn.__module__ = loop.__module__
        fn.__doc__ = loop.__doc__
        return njit(cache=True, parallel=parallel, **options)(fn)

    return compiled("_serial", False), compiled("_parallel", True)
