"""How many threads lightmod's CPU kernels use: numba's ``prange`` loops, the matrix products
that kernels/cpu/gemm.py cuts into parts for lightmod's own threads, and the OpenBLAS behind
``np.matmul``.

The default: one count, fixed once per process
-----------------------------------------------
The first kernel call fixes the count from, in this order:

1. ``LIGHTMOD_NUM_THREADS`` (a positive integer; anything else is a ValueError);
2. ``OMP_NUM_THREADS`` (its first number, as OpenMP reads it);
3. ``MXNET_CPU_WORKER_NTHREADS``;
4. the number of CPUs this process may run on (its affinity set);

never more than numba's pool (``NUMBA_NUM_THREADS``). numba uses that count in every thread
that runs kernels (numba keeps the count per calling thread, so it is applied in each);
matrix products are cut into at most ``min(count, OpenBLAS's own count at the first look)``
parts (:func:`product_threads`), and numpy's bundled OpenBLAS gets that count too, so
``OPENBLAS_NUM_THREADS=1`` stays respected. While the parts of a product run, OpenBLAS is held
at one thread (:func:`hold_blas_single`). ``lightmod info`` shows the count and where it came
from; :func:`describe` returns the same.

Why fixed: results must not depend on what else the machine does. OpenBLAS splits a product
between its threads by blocks of the result, and with some core types (``OPENBLAS_CORETYPE=
Haswell`` among them) the edge blocks go through other micro-kernels, which add in another
order: the same product gives other bits at another thread count. A count that follows the
machine's load therefore makes a seeded training run give different parameters from run to
run. With one fixed count, the same seeded run gives the same bits alone, beside busy
processes, and in several Python threads at once.

Opt-in: following the machine's load
------------------------------------
``LIGHTMOD_THREAD_POLICY=load`` brings back the load-following policy: **the bits of a run
may then vary from run to run** (as explained above), in exchange for speed on a crowded
machine. A parallel region ends at a barrier, so it runs at the speed of its slowest thread:
when every core is busy the OS deschedules some of our threads and every region waits for them
for a time slice (measured on a 2-core machine with a load average of ~10: a 128x784x512
float32 product took 1.5 ms on one thread and 20-90 ms on two). Under that policy, at most
once per ``REFRESH_SECONDS``, lightmod looks at how much CPU the *other* processes used since
its last look (Linux: busy time of the CPUs of the affinity set in ``/proc/stat``, steal
counted as busy, minus this process's CPU time; elsewhere the 1-minute load average minus this
process's CPU rate) and uses ``max(1, min(count, int(free + 0.25)))`` threads, ``free =
cpus - others``: a thread only for a core that is (nearly) free. The first decision, before an
interval was measured, uses the load average alone.

Either way kernels run serially below their work threshold (``PARALLEL_MIN`` in
``kernels/cpu/jit.py``, weighted by each family's cost), where waking threads costs more than it
saves.

Who calls it: the executor once per forward pass on CPU contexts, the FullyConnected kernels
and the nn launchers before a parallel loop; ``refresh()`` costs a thread-local lookup (and,
under the load policy, a clock read between looks).
"""
import ctypes
import glob
import os
import threading
import time

__all__ = ["refresh", "current", "cap", "describe", "blas_threads", "set_blas_threads",
           "serial_thread", "enter_serial", "leave_serial", "in_serial", "hold_blas_single",
           "release_blas_single", "product_threads", "REFRESH_SECONDS"]

REFRESH_SECONDS = 1.0

_cap = None             # the fixed count, the most under the load policy (None: not yet fixed)
_source = None          # where _cap came from (for lightmod info)
_follow_load = False    # LIGHTMOD_THREAD_POLICY=load
_blas_cap = None        # BLAS thread count at the first look
_threads = 1            # the current choice
_next_look = 0.0        # monotonic time of the next measurement
_last = None            # (wall, own cpu, busy seconds or None) at the last look
_cpus = None            # CPUs this process may run on
_blas = None            # (set, get) ctypes functions of numpy's OpenBLAS, or False
_blas_applied = None    # the BLAS count we set last
_blas_holds = 0         # callers that need OpenBLAS at one thread now (hold_blas_single)
_local = threading.local()      # the numba count applied in this thread
_lock = threading.Lock()

_BLAS_SET = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
             "openblas_set_num_threads64_", "openblas_set_num_threads")
_BLAS_GET = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
             "openblas_get_num_threads64_", "openblas_get_num_threads")


# ---------------------------------------------------------------------------------------------
# BLAS
# ---------------------------------------------------------------------------------------------
def _blas_candidates():
    """Paths of the OpenBLAS library numpy loaded: the ones bundled in numpy's wheel folders
    first (scipy, which numba imports, maps its own OpenBLAS with its own thread pool), then
    the others Linux shows mapped."""
    import numpy
    root = os.path.dirname(os.path.dirname(numpy.__file__))
    paths = []
    for folder in (os.path.join(root, "numpy.libs"), os.path.join(root, "numpy", ".dylibs")):
        paths += sorted(glob.glob(os.path.join(folder, "*openblas*")))
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(" ")[-1]
                if "openblas" in os.path.basename(path).lower() and path not in paths:
                    paths.append(path)
    except OSError:
        pass
    return paths


def _find_blas():
    for path in _blas_candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        setter = next((getattr(lib, s) for s in _BLAS_SET if hasattr(lib, s)), None)
        getter = next((getattr(lib, s) for s in _BLAS_GET if hasattr(lib, s)), None)
        if setter is not None and getter is not None:
            setter.argtypes, setter.restype = [ctypes.c_int], None
            getter.argtypes, getter.restype = [], ctypes.c_int
            return setter, getter
    return False


def _blas_functions():
    global _blas
    if _blas is None:
        _blas = _find_blas()
    return _blas


def blas_threads():
    """OpenBLAS's current thread count, or None when numpy's BLAS is not OpenBLAS."""
    functions = _blas_functions()
    return functions[1]() if functions else None


def set_blas_threads(n):
    """Set OpenBLAS's thread count (process-wide); False when there is no OpenBLAS to set."""
    functions = _blas_functions()
    if not functions:
        return False
    functions[0](int(n))
    return True


# ---------------------------------------------------------------------------------------------
# load
# ---------------------------------------------------------------------------------------------
def _affinity():
    try:
        return frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return frozenset(range(os.cpu_count() or 1))


def _busy_seconds():
    """Busy seconds (everything but idle and iowait) of the CPUs in ``_cpus`` since boot, or
    None where /proc/stat is not there."""
    try:
        with open("/proc/stat", "rb") as stat:
            text = stat.read()
    except OSError:
        return None
    busy = 0
    for line in text.split(b"\n"):
        if not line.startswith(b"cpu") or not line[3:4].isdigit():
            continue
        fields = line.split()
        if int(fields[0][3:]) not in _cpus:
            continue
        ticks = [int(v) for v in fields[1:9]]    # user nice system idle iowait irq softirq steal
        busy += sum(ticks) - ticks[3] - ticks[4]
    return busy / _clock_ticks()


def _clock_ticks():
    try:
        return os.sysconf("SC_CLK_TCK")
    except (AttributeError, ValueError, OSError):
        return 100


def _load_average():
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def _others(now, own, busy):
    """CPUs the other processes kept busy since the last look (None: cannot tell)."""
    if _last is None:
        return _load_average()
    wall = now - _last[0]
    own_rate = (own - _last[1]) / wall
    if busy is not None and _last[2] is not None:
        return (busy - _last[2]) / wall - own_rate
    load = _load_average()
    return None if load is None else load - own_rate


def _choose(others):
    if others is None:
        return _cap
    free = len(_cpus) - max(0.0, others)
    return max(1, min(_cap, int(free + 0.25)))


# ---------------------------------------------------------------------------------------------
# the policy
# ---------------------------------------------------------------------------------------------
def _positive_int(text):
    """The first number of ``text`` ("4" or OpenMP's "4,2") if it is a positive integer."""
    try:
        value = int(text.split(",")[0].strip())
    except ValueError:
        return None
    return value if value > 0 else None


def _fixed_count():
    """(thread count, where it came from), before numba's pool limit."""
    env = os.environ.get("LIGHTMOD_NUM_THREADS", "").strip()
    if env:
        value = _positive_int(env) if "," not in env else None
        if value is None:
            raise ValueError("LIGHTMOD_NUM_THREADS must be a positive integer, got %r" % env)
        return value, "LIGHTMOD_NUM_THREADS"
    for name in ("OMP_NUM_THREADS", "MXNET_CPU_WORKER_NTHREADS"):
        value = _positive_int(os.environ.get(name, ""))
        if value is not None:
            return value, name
    return len(_cpus), "CPUs in the affinity set"


def _init():
    global _cap, _blas_cap, _cpus, _source, _follow_load, _threads
    import numba
    _cpus = _affinity()
    policy = os.environ.get("LIGHTMOD_THREAD_POLICY", "fixed").strip().lower() or "fixed"
    if policy not in ("fixed", "load"):
        raise ValueError("LIGHTMOD_THREAD_POLICY must be 'fixed' or 'load', got %r" % policy)
    count, source = _fixed_count()
    if count > numba.config.NUMBA_NUM_THREADS:
        count, source = numba.config.NUMBA_NUM_THREADS, "NUMBA_NUM_THREADS (numba's pool)"
    _blas_cap = blas_threads()
    _follow_load = policy == "load"
    _source = source
    _threads = count
    _cap = count        # last: other threads take a set _cap as "all of it is set"


def _blas_target(n):
    """OpenBLAS's count for a policy count ``n``: one while anybody holds it there."""
    return 1 if _blas_holds else min(n, _blas_cap)


def _apply(n):
    """Make numba (in this thread) and OpenBLAS use ``n`` threads."""
    global _blas_applied
    if getattr(_local, "numba", None) != n:
        import numba
        numba.set_num_threads(n)
        _local.numba = n
    if _blas_cap is not None and _blas_applied != _blas_target(n):
        _blas_applied = _blas_target(n)
        set_blas_threads(_blas_applied)


def refresh():
    """The number of threads kernels use now; makes numba (in the calling thread) and OpenBLAS
    use it. Fixed at the first call, unless ``LIGHTMOD_THREAD_POLICY=load``. 1 in a thread
    that runs serially (see :func:`enter_serial`)."""
    global _threads, _next_look, _last
    if getattr(_local, "serial", False):
        return 1
    if _cap is None or (_follow_load and time.monotonic() >= _next_look):
        with _lock:
            if _cap is None:
                _init()
            now = time.monotonic()
            if _follow_load and now >= _next_look:
                if _cap > 1:
                    own = time.process_time()
                    busy = _busy_seconds()
                    _threads = _choose(_others(now, own, busy))
                    _last = (now, own, busy)
                else:
                    _threads = 1
                _next_look = now + REFRESH_SECONDS
    if getattr(_local, "numba", None) != _threads or (
            _blas_cap is not None and _blas_applied != _blas_target(_threads)):
        _apply(_threads)
    return _threads


def product_threads():
    """How many threads a matrix product may use now: :func:`refresh`'s count, at most
    OpenBLAS's own count at the first look (``OPENBLAS_NUM_THREADS=1`` keeps products on
    one thread)."""
    n = refresh()
    return n if _blas_cap is None else min(n, _blas_cap)


def current():
    """The last choice (no measurement); 1 before the first ``refresh``."""
    return _threads


def cap():
    """The fixed count (under the load policy: the most threads it may choose)."""
    if _cap is None:
        refresh()
    return _cap


def describe():
    """What ``lightmod info`` shows: the policy, the count and its source, OpenBLAS's count."""
    if _cap is None:
        refresh()
    return {"policy": "load" if _follow_load else "fixed", "threads": _cap, "source": _source,
            "blas_threads": blas_threads()}


# ---------------------------------------------------------------------------------------------
# serial regions (lightmod/sample_split.py: one slice of the batch per thread)
# ---------------------------------------------------------------------------------------------
def serial_thread():
    """Make the calling thread run every kernel serially from now on: numba's count 1 here,
    ``refresh()`` and ``task_count`` answer 1 (a worker thread of the sample split)."""
    if _cap is None:
        refresh()
    _local.serial = True
    if getattr(_local, "numba", None) != 1:
        import numba
        numba.set_num_threads(1)
        _local.numba = 1


def enter_serial():
    """Start a region where the calling thread and the worker threads each run serial
    kernels at once: the calling thread becomes serial and OpenBLAS (a process-wide count)
    uses one thread until :func:`leave_serial` (one hold per thread, however often called)."""
    serial_thread()
    if not getattr(_local, "serial_hold", False):
        hold_blas_single()
        _local.serial_hold = True


def leave_serial():
    """End the region: the calling thread and OpenBLAS use the policy's count again."""
    _local.serial = False
    if getattr(_local, "serial_hold", False):
        _local.serial_hold = False
        release_blas_single()
    _apply(_threads)


def hold_blas_single():
    """Keep OpenBLAS (a process-wide count) at one thread until the matching
    :func:`release_blas_single`. Holds nest and may come from several threads at once: the
    count goes back to the policy's only when the last one is released. Products cut into
    parts run each part on one OpenBLAS thread this way (kernels/cpu/gemm.py), and
    OpenBLAS's bits depend on its count."""
    global _blas_holds, _blas_applied
    if _cap is None:
        refresh()
    with _lock:
        _blas_holds += 1
        if _blas_cap is not None and _blas_applied != 1:
            _blas_applied = 1
            set_blas_threads(1)


def release_blas_single():
    """Release one :func:`hold_blas_single`."""
    global _blas_holds, _blas_applied
    with _lock:
        _blas_holds = max(0, _blas_holds - 1)
        if _blas_holds == 0 and _blas_cap is not None and \
                _blas_applied != min(_threads, _blas_cap):
            _blas_applied = min(_threads, _blas_cap)
            set_blas_threads(_blas_applied)


def in_serial():
    """Whether the calling thread runs kernels serially (a region or a worker thread)."""
    return getattr(_local, "serial", False)
