"""How many threads lightmod's CPU kernels use: one policy for numba's ``prange`` loops and for
the OpenBLAS behind ``np.matmul``.

Why a policy: a parallel region ends at a barrier, so it runs at the speed of its slowest
thread. When every core is already busy (other processes, or the other library's thread pool:
OpenBLAS workers keep spinning for a while after each product and compete with numba's threads
on the same cores), the OS deschedules some of our threads and every region then waits for them
for a scheduler time slice. Measured on a 2-core machine with a load average of ~10: a
128x784x512 float32 product took 1.5 ms on one thread and 20-90 ms (median) on two, and
Module.fit of a small MLP ran 10x slower with the default thread counts than single-threaded.
On an idle machine, two threads halve the same product. So the number of threads has to follow
what the machine can actually give.

The policy
----------
* ``cap``: at most ``LIGHTMOD_NUM_THREADS`` threads when that variable is set, else numba's
  thread count (``NUMBA_NUM_THREADS``, by default the number of cores); BLAS never gets more
  than the thread count it had when lightmod first looked (so ``OPENBLAS_NUM_THREADS=1`` stays
  respected).
* At most once per ``REFRESH_SECONDS``, lightmod looks at how much CPU the *other* processes
  used since its last look: on Linux, the busy time of the CPUs this process may run on
  (``/proc/stat``, per CPU of the affinity set, steal time counted as busy) minus this process's
  own CPU time; elsewhere, the 1-minute load average minus this process's CPU rate. With
  ``free = cpus - others``, the kernels use ``max(1, min(cap, int(free + 0.25)))`` threads: a
  thread only for a core that is (nearly) free, i.e. on a 2-core machine two threads while the
  others keep at most a quarter of a core busy, one thread beyond. The first decision,
  before any interval was measured, uses the load average alone.
* The choice is applied only when it changes: ``numba.set_num_threads`` (numba keeps the count
  per calling thread, so it is applied in each thread that runs kernels) and
  ``openblas_set_num_threads`` on numpy's bundled OpenBLAS (process-wide; found through ctypes,
  whatever its symbol suffix; with another BLAS, e.g. MKL or Accelerate, BLAS is left alone).
* Independently, kernels run serially below their own work thresholds (``PARALLEL_MIN`` in
  each ``kernels/cpu`` file), where waking threads costs more than it saves.

Who calls it: the executor once per forward pass on CPU contexts, the FullyConnected kernels
and the nn launchers before a parallel loop (so imperative ``nd`` calls follow the policy too);
``refresh()`` costs a clock read between looks. Kernels of other families follow it through
numba's thread count; their launchers can ask ``refresh() > 1`` before choosing a ``prange``
loop.

Limits: a CPU quota of a container (cgroup ``cpu.max``) is not seen, only the affinity set
(as numba and OpenBLAS themselves see the machine); with several threads chosen, OpenBLAS's
workers still spin for a while after each product, which numba's threads may meet on the same
cores (the nn kernels keep element-wise work below 2^17 elements serial, so an MLP step
overlaps nothing).

Numerics do not depend on the choice: OpenBLAS splits a product over rows / columns of the
result, never along the summed dimension, and the element-wise loops compute each element the
same way serially or in parallel.
"""
import ctypes
import glob
import os
import threading
import time

__all__ = ["refresh", "current", "cap", "blas_threads", "set_blas_threads", "REFRESH_SECONDS"]

REFRESH_SECONDS = 1.0

_cap = None             # max threads (None until the first refresh)
_blas_cap = None        # BLAS thread count at the first look
_threads = 1            # the current choice
_next_look = 0.0        # monotonic time of the next measurement
_last = None            # (wall, own cpu, busy seconds or None) at the last look
_cpus = None            # CPUs this process may run on
_blas = None            # (set, get) ctypes functions of numpy's OpenBLAS, or False
_blas_applied = None    # the BLAS count we set last
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
    """Paths of the OpenBLAS library numpy loaded (Linux maps first, then the wheel folders)."""
    paths = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(" ")[-1]
                if "openblas" in os.path.basename(path).lower() and path not in paths:
                    paths.append(path)
    except OSError:
        pass
    import numpy
    root = os.path.dirname(os.path.dirname(numpy.__file__))
    for folder in (os.path.join(root, "numpy.libs"), os.path.join(root, "numpy", ".dylibs")):
        paths += sorted(glob.glob(os.path.join(folder, "*openblas*")))
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
def _init():
    global _cap, _blas_cap, _cpus
    import numba
    _cpus = _affinity()
    cap = numba.config.NUMBA_NUM_THREADS
    env = os.environ.get("LIGHTMOD_NUM_THREADS", "").strip()
    if env:
        try:
            cap = min(cap, max(1, int(env)))
        except ValueError:
            raise ValueError("LIGHTMOD_NUM_THREADS must be a positive integer, got %r"
                             % env) from None
    _blas_cap = blas_threads()
    _cap = cap


def _apply(n):
    """Make numba (in this thread) and OpenBLAS use ``n`` threads."""
    global _blas_applied
    if getattr(_local, "numba", None) != n:
        import numba
        numba.set_num_threads(n)
        _local.numba = n
    if _blas_cap is not None and _blas_applied != min(n, _blas_cap):
        _blas_applied = min(n, _blas_cap)
        set_blas_threads(_blas_applied)


def refresh():
    """The number of threads kernels should use now (measuring the load when it is time) and
    make numba / OpenBLAS use it in the calling thread."""
    global _threads, _next_look, _last
    now = time.monotonic()
    if now >= _next_look:
        with _lock:
            if now >= _next_look:
                if _cap is None:
                    _init()
                if _cap > 1:
                    own = time.process_time()
                    busy = _busy_seconds()
                    _threads = _choose(_others(now, own, busy))
                    _last = (now, own, busy)
                else:
                    _threads = 1
                _next_look = now + REFRESH_SECONDS
    if getattr(_local, "numba", None) != _threads or (
            _blas_cap is not None and _blas_applied != min(_threads, _blas_cap)):
        _apply(_threads)
    return _threads


def current():
    """The last choice (no measurement); 1 before the first ``refresh``."""
    return _threads


def cap():
    """The most threads the policy may choose."""
    if _cap is None:
        refresh()
    return _cap
