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

A worker that sees its post must then take the GIL, which the caller holds until it enters
its own first kernel. Blocking on the GIL is another wake-up (CPython sleeps on a condition
variable until the holder drops it): the worker started ~50 us into a LeNet conv1 region,
~30 us after the caller had dropped the GIL. So, where :func:`gil_word_address` finds the GIL's
``locked`` flag, the worker also polls that flag (inside the same GIL-free call) until it reads
0, and only then returns to take the GIL: it now starts ~25 us into the region. The flag is
only a hint: the GIL is still taken the ordinary way, so a wrong or stale reading can only cost
time, and the poll is bounded like the others.

Linux only (``sched_yield``, ``clock_gettime``); :func:`available` says whether it applies.
Imported on the first split bind (it compiles, or loads from numba's cache, the two loops).
Each poll reads the clock into a caller-owned 2-element ``timespec`` scratch, so a region
allocates nothing.
"""
import ctypes
import sys

from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .. import cache_stamp  # noqa: F401  (stamps the cache entries made below)

__all__ = ["available", "gil_word_address", "wait_for_post", "wait_for_finish"]

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
def _load_int32_acquire(typingctx, address):
    """The 32-bit integer at ``address`` (an integer) read with an atomic acquire load."""
    def codegen(context, builder, sig, args):
        ptr = builder.inttoptr(args[0], cgutils.int32_t.as_pointer())
        return builder.load_atomic(ptr, "acquire", 4)
    return types.int32(address), codegen


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
def wait_for_post(posted, finished, i, finished_gen, seen, poll_ns, timespec, gil_word,
                  gil_polls):
    """Set ``finished[i] = finished_gen``, then poll until ``posted[i] != seen`` (True) or
    for ``poll_ns`` nanoseconds (False). Called without the GIL: a caller that sees the
    finished count takes the GIL without waiting for this thread. After a post, with
    ``gil_word`` (gil_word_address(); 0 for none): poll until the GIL is free, for at most
    ``gil_polls[i]`` nanoseconds (which the poster sets before it posts), so that taking the
    GIL on return does not sleep."""
    finished[i] = finished_gen
    deadline = _now_ns(timespec) + poll_ns
    while _load_acquire(posted, i) == seen:
        if _now_ns(timespec) >= deadline:
            return False
        _sched_yield()
    if gil_word != 0:
        deadline = _now_ns(timespec) + gil_polls[i]
        while _load_int32_acquire(gil_word) != 0 and _now_ns(timespec) < deadline:
            _sched_yield()
    return True


@njit(cache=True, nogil=True)
def _read_int32(address):
    """The 32-bit integer at ``address``, read with the GIL released."""
    return _load_int32_acquire(address)


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


# ---------------------------------------------------------------------------------------------
# Where the GIL's "locked" flag is
# ---------------------------------------------------------------------------------------------
_GIL_SCAN_BYTES = 8192
_gil_word = None


def gil_word_address():
    """Address of CPython's GIL ``locked`` flag (an int, 1 while some thread holds the GIL),
    or 0 where it cannot be found and checked. Computed once per process.

    CPython exports no way to look at the GIL, so the flag is found by what it does: in the
    GIL's state (``_PyRuntime.ceval.gil`` in CPython 3.11) it follows ``last_holder``, the
    thread state of the thread that last took it. The scan takes the first word of
    ``_PyRuntime`` that holds this thread's state and is followed by a 1 while this thread holds
    the GIL, and a 0 read from compiled code that released the GIL. Anything else (another
    layout, a build without the GIL, another thread taking the GIL during the check): 0, and the
    workers simply do not poll it."""
    global _gil_word
    if _gil_word is None:
        _gil_word = 0
        for _ in range(3):      # (another thread may take the GIL while it is checked)
            found = _find_gil_word()
            if found:
                _gil_word = found
                break
    return _gil_word


def _find_gil_word():
    if sys.implementation.name != "cpython" or not getattr(sys, "_is_gil_enabled",
                                                           lambda: True)():
        return 0
    try:
        runtime = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
        current = ctypes.pythonapi.PyThreadState_Get
        current.restype = ctypes.c_void_p
        state = current()
    except (AttributeError, ValueError, OSError):
        return 0
    for offset in range(0, _GIL_SCAN_BYTES, 8):
        holder = ctypes.c_uint64.from_address(runtime + offset).value
        word = runtime + offset + 8
        if (holder == state and ctypes.c_int32.from_address(word).value == 1
                and _read_int32(word) == 0 and ctypes.c_int32.from_address(word).value == 1):
            return word
    return 0
