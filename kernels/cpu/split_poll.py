"""GIL-free, time-bounded polls for the sample split's hand-off (lightmod/sample_split.py).

Waking a thread blocked on a semaphore costs ~40-100 us on a virtual machine whose idle virtual
CPUs halt at once (a futex wake-up of a halted CPU, then Python's Condition); a region of a
small layer lasts a few hundred. So a split worker polls its post counter for a short time
after each task before it blocks, and the caller polls the workers' finish counters before it
blocks on their semaphore.

* Each poll is an atomic (acquire) load, which the compiler cannot hoist out of the loop.
* Between polls ``sched_yield``: on a busy core the other runnable threads go first, so a
  polling thread never keeps a core from them (with the CPU's ``pause`` hint instead, a polling
  worker took the core from the caller on a loaded machine: +100 us a region).
* A poll ends at a deadline on the monotonic clock, so nothing spins between regions whatever
  the machine's load.

Linux only (``sched_yield``, ``clock_gettime``); :func:`available` says whether it applies.
Imported on the first split bind (it compiles, or loads from numba's cache, the two loops).
Each poll reads the clock into a caller-owned 2-element ``timespec`` scratch, so a region
allocates nothing.
"""
import sys

from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .. import cache_stamp  # noqa: F401  (stamps the cache entries made below)

__all__ = ["available", "wait_for_post", "wait_for_finish"]

_CLOCK_MONOTONIC = 1        # Linux's clock id
_sched_yield = types.ExternalFunction("sched_yield", types.int32())
_clock_gettime = types.ExternalFunction(
    "clock_gettime", types.int32(types.int32, types.CPointer(types.int64)))


def available():
    return sys.platform.startswith("linux")


@intrinsic
def _load_acquire(typingctx, arr, i):
    """``arr[i]`` read with an atomic acquire load."""
    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, sig.args[0], ary, [args[1]])
        align = context.get_abi_sizeof(context.get_data_type(sig.args[0].dtype))
        return builder.load_atomic(ptr, "acquire", align)
    return arr.dtype(arr, i), codegen


@intrinsic
def _pointer(typingctx, arr):
    """Address of the first element of a contiguous array."""
    def codegen(context, builder, sig, args):
        return context.make_array(sig.args[0])(context, builder, args[0]).data
    return types.CPointer(arr.dtype)(arr), codegen


@njit(cache=True, nogil=True)
def _now_ns(timespec):
    _clock_gettime(_CLOCK_MONOTONIC, _pointer(timespec))
    return timespec[0] * 1000000000 + timespec[1]


@njit(cache=True, nogil=True)
def wait_for_post(posted, finished, i, finished_gen, seen, poll_ns, timespec):
    """Set ``finished[i] = finished_gen``, then poll until ``posted[i] != seen`` (True) or
    for ``poll_ns`` nanoseconds (False). Called without the GIL: a caller that sees the
    finished count takes the GIL without waiting for this thread."""
    finished[i] = finished_gen
    deadline = _now_ns(timespec) + poll_ns
    while _load_acquire(posted, i) == seen:
        if _now_ns(timespec) >= deadline:
            return False
        _sched_yield()
    return True


@njit(cache=True, nogil=True)
def wait_for_finish(finished, expected, poll_ns, timespec):
    """Poll until ``finished[i] == expected[i]`` wherever ``expected[i] >= 0`` (True) or for
    ``poll_ns`` nanoseconds (False)."""
    deadline = _now_ns(timespec) + poll_ns
    while True:
        done = True
        for i in range(expected.size):
            if expected[i] >= 0 and _load_acquire(finished, i) != expected[i]:
                done = False
        if done:
            return True
        if _now_ns(timespec) >= deadline:
            return False
        _sched_yield()
