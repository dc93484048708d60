"""The CPU half's one policy for running a loop on the calling thread or over numba's threads.

Waking the worker threads costs ~10-50 us on an idle machine, about what one vectorised pass
over 2^17 floats takes, so a call runs on the calling thread below that much work. Families
whose elements cost more (or less) than an element-wise add say so with ``cost``: the call goes
parallel once ``elements * cost`` reaches :data:`PARALLEL_MIN`.

* :func:`parallel_loop` compiles one loop written with ``prange`` twice (serial and parallel)
  and picks per call;
* :func:`task_count` tells the launchers that split a call into tasks themselves how many.
"""
import types

from numba import njit

from .. import cache_stamp  # noqa: F401  (stamps the cache entries made below)
from .. import threads as _threads

__all__ = ["PARALLEL_MIN", "ParallelLoop", "parallel_loop", "task_count"]

PARALLEL_MIN = 1 << 17


class ParallelLoop:
    """One loop written with ``prange``, compiled serial and parallel (both ``cache=True``).

    ``loop(work, *args)`` runs the parallel build when ``work`` (the elements the call
    touches; pass 0 to force the serial build) times ``cost`` reaches :data:`PARALLEL_MIN`,
    else the serial one.

    Each build compiles its own copy of the function, named ``<loop>_serial`` and
    ``<loop>_parallel``: numba's on-disk cache names its entries after the function and keys
    them by signature but not by ``parallel=``, so two dispatchers of the very same function
    would load each other's compiled code.
    """
    __slots__ = ("serial", "parallel", "cost", "__name__")

    def __init__(self, loop, cost=1.0, **options):
        self.serial = _compile(loop, "_serial", False, options)
        self.parallel = _compile(loop, "_parallel", True, options)
        self.cost = cost
        self.__name__ = loop.__name__

    def __call__(self, work, *args):
        if work * self.cost >= PARALLEL_MIN and not _threads.in_serial():
            return self.parallel(*args)
        return self.serial(*args)

    def runs_parallel(self, work):
        return work * self.cost >= PARALLEL_MIN and not _threads.in_serial()

    def pick(self, work):
        """The build a call of ``work`` elements runs (serial in a thread that runs one slice
        of a sample-split batch: lightmod/sample_split.py)."""
        return self.parallel if self.runs_parallel(work) else self.serial


def _compile(loop, suffix, parallel, options):
    fn = types.FunctionType(loop.__code__, loop.__globals__, loop.__name__ + suffix,
                            loop.__defaults__, loop.__closure__)
    fn.__qualname__ = loop.__qualname__ + suffix
    fn.__module__ = loop.__module__
    fn.__doc__ = loop.__doc__
    return njit(cache=True, nogil=True, parallel=parallel, **options)(fn)


def parallel_loop(cost=1.0, **options):
    """Decorator form of :class:`ParallelLoop`; ``options`` go to both ``njit`` calls."""
    def wrap(loop):
        return ParallelLoop(loop, cost, **options)
    return wrap


def task_count(work, items, cost=1.0, per_thread=1):
    """Tasks to split a call of ``work`` elements over ``items`` independent pieces into:
    1 (run on the calling thread) for small work, a single piece or a single thread, else
    ``per_thread`` tasks per thread (more tasks even out uneven pieces), at most ``items``."""
    if work * cost < PARALLEL_MIN or items < 2:
        return 1
    threads = _threads.refresh()
    if threads < 2:
        return 1
    return min(items, threads * per_thread)
