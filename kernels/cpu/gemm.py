"""Matrix products (``out = a @ b`` or ``out += a @ b``) cut into parts fixed by the shape, which
the calling thread and lightmod's own worker threads share.

Why not OpenBLAS's own threads
------------------------------
* **A busy machine.** OpenBLAS gives every thread a fixed share of each product and waits for
  all of them. When the cores are oversubscribed, a share whose thread the OS has not
  scheduled holds the product for a time slice: beside two CPU-bound processes on two cores,
  a 128-row MLP training step went from 2.5 ms to 110-520 ms (one thread: 21-25 ms).
* **Bits.** OpenBLAS's result depends on how many threads it used, so a thread count that
  follows the load would change a seeded run's parameters.

The plan
--------
``C (M x N) = op(A) @ op(B) (+ C)`` is cut into ``parts`` blocks of whole rows of C, or of whole
columns, whichever dimension is longer (:func:`plan`), at multiples of 16. ``parts`` is the
fixed thread count (``kernels/threads.product_threads``), or 1 below :data:`TEAM_MIN_MACS`
multiply-adds, where the product is left to numpy (whose OpenBLAS runs it on one thread).
Each part is one call of numpy's OpenBLAS ``cblas_?gemm``, made while OpenBLAS is held at one
thread. A part's bits depend on the part alone, never on which thread computes it, so a
product gives the same bits whoever ran its parts, on a quiet or a crowded machine.

The team
--------
``product_threads() - 1`` worker threads run numba loops that never take the GIL. The caller publishes a
product in a shared control array and every thread (the caller too) claims the next unclaimed
part with an atomic compare-exchange, until none is left; the caller then waits only for parts
already claimed. A worker the OS has not scheduled yet claims nothing and delays nothing.

After each product a worker polls for the next one for :data:`POLL_SECONDS` (an atomic load,
then ``sched_yield``, so a busy core goes to other threads first), then sleeps on a POSIX
semaphore. Waking a sleeping thread costs 40-100 us on a virtual machine, about what a
product of a small layer takes, so a worker kept polling between the products of one training
step saves that; a sleeping worker is only posted, never waited for.

One product uses the team at a time: a second Python thread that finds it busy computes the
same parts itself, in order, with the same bits. The team is Linux-only (``sched_yield``,
unnamed semaphores); elsewhere, or for a dtype or layout CBLAS cannot take in place,
:func:`product` returns False and the caller uses numpy.
"""
import atexit
import ctypes
import os
import sys
import threading

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .. import cache_stamp  # noqa: F401  (stamps the cache entries made below)
from .. import threads as _threads
from . import atomics as _atomic
from .blas import gemm_address

__all__ = ["product", "product_pair", "product_batched", "plan", "pair_plan", "available",
           "TEAM_MIN_MACS", "POLL_SECONDS"]

TEAM_MIN_MACS = 1 << 20     # below: one part, left to numpy (OpenBLAS runs it on one thread)
POLL_SECONDS = 200e-6       # how long an idle worker polls before it sleeps
_UNIT = 16                  # parts start at multiples of this many rows or columns

# The control array (int64). Words written by several threads sit 64 bytes apart.
_NEXT = 0       # the claim word: product number, its part count, its next unclaimed part
_DONE = 8       # parts of the current job finished
_STOP = 16      # 1: workers return
# A job is one product or a pair of independent products (:func:`product_pair`): each
# described in a block of fields at _FIRST_JOB or _SECOND_JOB (offsets below); parts
# [0, _FIRST_PARTS) belong to the first, the rest to the second.
_FIRST_JOB = 24
_SECOND_JOB = 48
(_TA, _TB, _M, _N, _K, _A, _LDA, _B, _LDB, _C, _LDC, _PARTS, _AXIS,
 _STRIDE_A, _STRIDE_B, _STRIDE_C) = range(16)     # a block's fields; strides: between matrices
_TOTAL_PARTS = _FIRST_JOB + 16      # parts of the job
_FIRST_PARTS = _FIRST_JOB + 17      # of which the first product's
_DTYPE = _FIRST_JOB + 18            # 0 float32, 1 float64 (both products)
_SLEEP = 72     # + 8 * worker: 1 while that worker sleeps on its semaphore
_COEF_WORDS = 3     # coef: alpha, then each product's beta
_ROWS, _COLUMNS, _MATRICES = 0, 1, 2    # what the parts are
# The claim word packs (product number mod 2^24) << 40 | parts << 20 | next part: a thread
# that read it knows the part count of that very product, so a stale word can never be
# claimed against the fields of the next product while the caller writes them.
_PART_BITS = 20
_PART_MASK = (1 << _PART_BITS) - 1
_PRODUCT_SHIFT = 2 * _PART_BITS
_PRODUCT_MASK = (1 << 24) - 1
MAX_PARTS = _PART_MASK          # parts of one product (a batch's matrices) at most
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_SEM_WORDS = 4              # a sem_t is 32 bytes on Linux

_sched_yield = types.ExternalFunction("sched_yield", types.int32())
_clock_gettime = types.ExternalFunction(
    "clock_gettime", types.int32(types.int32, types.CPointer(types.int64)))
_sem_wait = types.ExternalFunction("sem_wait", types.int32(types.CPointer(types.int64)))
_sem_post = types.ExternalFunction("sem_post", types.int32(types.CPointer(types.int64)))
_CLOCK_MONOTONIC = 1


@intrinsic
def _gemm_at(typingctx, address, order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    """Call the CBLAS ``?gemm`` at ``address`` (64-bit dimensions, pointers passed as
    integers); ``alpha``'s type (float32 or float64) says which. A pointer passed as an
    integer costs nothing to pass from Python, where a ctypes function costs ~2.5 us a call."""
    def codegen(context, builder, sig, args):
        i32, i64 = ir.IntType(32), ir.IntType(64)
        real = context.get_value_type(sig.args[7])
        void_ptr = ir.IntType(8).as_pointer()
        kinds = (i32, i32, i32, i64, i64, i64, real, void_ptr, i64, void_ptr, i64, real,
                 void_ptr, i64)
        values = []
        for value, numba_type, kind in zip(args[1:], sig.args[1:], kinds):
            if kind is void_ptr:
                value = builder.inttoptr(context.cast(builder, value, numba_type, types.int64),
                                         void_ptr)
            elif kind is real:
                value = context.cast(builder, value, numba_type, sig.args[7])
            else:
                value = context.cast(builder, value, numba_type,
                                     types.int32 if kind is i32 else types.int64)
            values.append(value)
        function_type = ir.FunctionType(ir.VoidType(), kinds)
        builder.call(builder.inttoptr(args[0], function_type.as_pointer()), values)
        return context.get_dummy_value()
    if alpha not in (types.float32, types.float64) or beta != alpha:
        return None
    return types.void(address, order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc), \
        codegen


def plan(m, n, k, count):
    """(parts, axis) of an (m x k) @ (k x n) product at ``count`` threads: axis 0 cuts C's
    rows, 1 its columns. A pure function of its arguments: the bits of a product follow it."""
    if count < 2 or m * n * k < TEAM_MIN_MACS:
        return 1, 0
    axis = 0 if m >= n else 1
    units = -(-(m if axis == 0 else n) // _UNIT)
    return min(count, units), axis


@njit(cache=True, nogil=True)
def _bound(total, parts, p):
    units = (total + 15) // 16
    return min(total, (units * p // parts) * 16)


@njit(cache=True, nogil=True)
def _run_part(ctrl, coef, p, sgemm, dgemm):
    """Compute part ``p`` of the job described in ``ctrl``."""
    job, beta = _FIRST_JOB, coef[1]
    if p >= ctrl[_FIRST_PARTS]:
        job, beta, p = _SECOND_JOB, coef[2], p - ctrl[_FIRST_PARTS]
    ta, tb = ctrl[job + _TA], ctrl[job + _TB]
    m, n, k = ctrl[job + _M], ctrl[job + _N], ctrl[job + _K]
    a, lda = ctrl[job + _A], ctrl[job + _LDA]
    b, ldb = ctrl[job + _B], ctrl[job + _LDB]
    c, ldc = ctrl[job + _C], ctrl[job + _LDC]
    parts, axis = ctrl[job + _PARTS], ctrl[job + _AXIS]
    item = 4 if ctrl[_DTYPE] == 0 else 8
    if axis == _MATRICES:           # matrix p of a batch
        a += p * ctrl[job + _STRIDE_A] * item
        b += p * ctrl[job + _STRIDE_B] * item
        c += p * ctrl[job + _STRIDE_C] * item
    elif axis == _ROWS:             # rows [r0, r1) of C: rows of op(A)
        r0, r1 = _bound(m, parts, p), _bound(m, parts, p + 1)
        a += r0 * (lda if ta == _NO_TRANS else 1) * item
        c += r0 * ldc * item
        m = r1 - r0
    else:                           # columns [c0, c1) of C: columns of op(B)
        c0, c1 = _bound(n, parts, p), _bound(n, parts, p + 1)
        b += c0 * (1 if tb == _NO_TRANS else ldb) * item
        c += c0 * item
        n = c1 - c0
    if m == 0 or n == 0:
        return
    if ctrl[_DTYPE] == 0:
        _gemm_at(sgemm, _ROW_MAJOR, ta, tb, m, n, k, np.float32(coef[0]), a, lda, b, ldb,
                 np.float32(beta), c, ldc)
    else:
        _gemm_at(dgemm, _ROW_MAJOR, ta, tb, m, n, k, coef[0], a, lda, b, ldb, beta, c, ldc)


@njit(cache=True, nogil=True)
def _claim_parts(ctrl, coef, sgemm, dgemm):
    """Compute unclaimed parts of the current product until none is left; return the
    product's number. A part is claimed by moving the claim word from (product, parts, p) to
    (product, parts, p + 1), so a thread never computes a part of a product that has already
    finished: while a part is unclaimed, its product's fields stay as they are."""
    while True:
        word = _atomic.load_acquire(ctrl, _NEXT)
        p = word & _PART_MASK
        if p >= (word >> _PART_BITS) & _PART_MASK:
            return word >> _PRODUCT_SHIFT
        if _atomic.compare_exchange(ctrl, _NEXT, word, word + 1):
            _run_part(ctrl, coef, p, sgemm, dgemm)
            _atomic.fetch_add(ctrl, _DONE, 1)


@njit(cache=True, nogil=True)
def _now_ns(timespec):
    _clock_gettime(_CLOCK_MONOTONIC, _atomic.address_of(timespec, 0))
    return timespec[0] * 1000000000 + timespec[1]


@njit(cache=True, nogil=True)
def _worker(ctrl, coef, sems, me, sgemm, dgemm, timespec, poll_ns):
    """A worker's life: claim parts, poll for the next product, sleep, until _STOP."""
    sleep_flag = _SLEEP + 8 * me
    semaphore = _atomic.address_of(sems, me * _SEM_WORDS)
    while _atomic.load_acquire(ctrl, _STOP) == 0:
        product = _claim_parts(ctrl, coef, sgemm, dgemm)
        deadline = _now_ns(timespec) + poll_ns
        while (_atomic.load_acquire(ctrl, _NEXT) >> _PRODUCT_SHIFT) == product:
            if _now_ns(timespec) < deadline:
                _sched_yield()
                continue
            # Sleep. The caller clears the flag and posts after it publishes a product; if
            # one came in between, whichever side clears the flag first decides who posts.
            _atomic.exchange(ctrl, sleep_flag, 1)
            if (_atomic.load_acquire(ctrl, _NEXT) >> _PRODUCT_SHIFT) != product and \
                    _atomic.exchange(ctrl, sleep_flag, 0) == 1:
                break
            _sem_wait(semaphore)
            break


@njit(cache=True, nogil=True)
def _run(ctrl, coef, sems, workers, sgemm, dgemm):
    """Compute the job described in ``ctrl``: with the team's ``workers`` when there are
    any, else every part in order on this thread."""
    parts = ctrl[_TOTAL_PARTS]
    if workers == 0 or parts == 1:
        for p in range(parts):
            _run_part(ctrl, coef, p, sgemm, dgemm)
        return
    ctrl[_DONE] = 0
    product = ((_atomic.load_acquire(ctrl, _NEXT) >> _PRODUCT_SHIFT) + 1) & _PRODUCT_MASK
    _atomic.store_release(ctrl, _NEXT, (product << _PRODUCT_SHIFT) | (parts << _PART_BITS))
    for w in range(workers):
        if _atomic.exchange(ctrl, _SLEEP + 8 * w, 0) == 1:
            _sem_post(_atomic.address_of(sems, w * _SEM_WORDS))
    _claim_parts(ctrl, coef, sgemm, dgemm)
    while _atomic.load_acquire(ctrl, _DONE) < parts:
        _sched_yield()          # parts other threads claimed are still running


@njit(cache=True, nogil=True)
def _describe(ctrl, job, a, b, out, ta, tb, parts, axis):
    """Write the product ``out = op(a) @ op(b)`` (the last two dimensions of each; a batch's
    matrices ``axis`` = _MATRICES apart) into the block at ``job``."""
    m, n = out.shape[-2], out.shape[-1]
    ctrl[job + _TA] = _TRANS if ta else _NO_TRANS
    ctrl[job + _TB] = _TRANS if tb else _NO_TRANS
    ctrl[job + _M], ctrl[job + _N] = m, n
    ctrl[job + _K] = a.shape[-2] if ta else a.shape[-1]
    ctrl[job + _A], ctrl[job + _LDA] = a.ctypes.data, a.shape[-1]
    ctrl[job + _B], ctrl[job + _LDB] = b.ctypes.data, b.shape[-1]
    ctrl[job + _C], ctrl[job + _LDC] = out.ctypes.data, n
    ctrl[job + _PARTS], ctrl[job + _AXIS] = parts, axis
    ctrl[job + _STRIDE_A] = a.shape[-2] * a.shape[-1]
    ctrl[job + _STRIDE_B] = b.shape[-2] * b.shape[-1]
    ctrl[job + _STRIDE_C] = m * n
    ctrl[_DTYPE] = 0 if out.itemsize == 4 else 1


@njit(cache=True, nogil=True)
def _product(ctrl, coef, sems, workers, sgemm, dgemm, a, b, out, ta, tb, beta, parts, axis):
    """``out = op(a) @ op(b) + beta * out`` for 2-d arrays, in ``parts`` along ``axis``."""
    _describe(ctrl, _FIRST_JOB, a, b, out, ta, tb, parts, axis)
    ctrl[_TOTAL_PARTS] = ctrl[_FIRST_PARTS] = parts
    coef[0], coef[1] = 1.0, beta
    _run(ctrl, coef, sems, workers, sgemm, dgemm)


@njit(cache=True, nogil=True)
def _product_batched(ctrl, coef, sems, workers, sgemm, dgemm, a, b, out, ta, tb, beta):
    """``out[i] = op(a[i]) @ op(b[i]) + beta * out[i]`` for 3-d arrays, a matrix a part."""
    _describe(ctrl, _FIRST_JOB, a, b, out, ta, tb, out.shape[0], _MATRICES)
    ctrl[_TOTAL_PARTS] = ctrl[_FIRST_PARTS] = out.shape[0]
    coef[0], coef[1] = 1.0, beta
    _run(ctrl, coef, sems, workers, sgemm, dgemm)


@njit(cache=True, nogil=True)
def _product_pair(ctrl, coef, sems, workers, sgemm, dgemm, a1, b1, out1, ta1, tb1, beta1,
                  parts1, axis1, a2, b2, out2, ta2, tb2, beta2, parts2, axis2):
    """Two independent 2-d products (:func:`product_pair`) as one job."""
    _describe(ctrl, _FIRST_JOB, a1, b1, out1, ta1, tb1, parts1, axis1)
    _describe(ctrl, _SECOND_JOB, a2, b2, out2, ta2, tb2, parts2, axis2)
    ctrl[_FIRST_PARTS] = parts1
    ctrl[_TOTAL_PARTS] = parts1 + parts2
    coef[0], coef[1], coef[2] = 1.0, beta1, beta2
    _run(ctrl, coef, sems, workers, sgemm, dgemm)


class _Team:
    """The worker threads and the arrays they share with callers (one per process)."""

    def __init__(self, workers, sgemm, dgemm):
        self.pid = os.getpid()
        self.workers = workers
        self.ctrl = np.zeros(_SLEEP + 8 * max(1, workers), np.int64)
        self.coef = np.zeros(_COEF_WORDS, np.float64)
        self.sems = np.zeros(_SEM_WORDS * max(1, workers), np.int64)
        self.busy = threading.Lock()
        self.threads = []
        libc = ctypes.CDLL(None, use_errno=True)
        for w in range(workers):
            if libc.sem_init(ctypes.c_void_p(self.sems.ctypes.data + 8 * _SEM_WORDS * w),
                             0, 0) != 0:
                raise OSError(ctypes.get_errno(), "sem_init failed")
        poll_ns = int(POLL_SECONDS * 1e9)
        for w in range(workers):
            thread = threading.Thread(
                target=_worker, name="lightmod-gemm-%d" % w, daemon=True,
                args=(self.ctrl, self.coef, self.sems, w, sgemm, dgemm,
                      np.zeros(2, np.int64), poll_ns))
            thread.start()
            self.threads.append(thread)

    def stop(self):
        """Make the workers return (they finish any part they hold first)."""
        if not self.threads or self.pid != os.getpid():
            return
        with self.busy:
            self.ctrl[_STOP] = 1
            empty = np.zeros((0, 0), np.float32)
            _product(self.ctrl, self.coef, self.sems, self.workers, _gemms[0], _gemms[1],
                     empty, empty, empty, False, False, 0.0, 0, 0)
            for thread in self.threads:
                thread.join(1.0)
        self.threads = []


_team = None
_team_lock = threading.Lock()
_gemms = None           # addresses of (sgemm, dgemm), or () where there are none
_local = threading.local()      # each thread's own control arrays for products off the team
_available = None


def _functions():
    global _gemms
    if _gemms is None:
        pair = (gemm_address(np.float32), gemm_address(np.float64))
        _gemms = pair if None not in pair else ()
    return _gemms


def _get_team():
    """The process's team: ``product_threads() - 1`` workers (a forked child starts its
    own)."""
    global _team
    team = _team
    if team is not None and team.pid == os.getpid():
        return team
    with _team_lock:
        if _team is None or _team.pid != os.getpid():
            sgemm, dgemm = _functions()
            _team = _Team(max(0, _threads.product_threads() - 1), sgemm, dgemm)
        return _team


def _own_arrays():
    arrays = getattr(_local, "arrays", None)
    if arrays is None:
        arrays = _local.arrays = (np.zeros(_SLEEP + 8, np.int64),
                                  np.zeros(_COEF_WORDS, np.float64),
                                  np.zeros(_SEM_WORDS, np.int64))
    return arrays


def available():
    """Whether products go through this module here (Linux, numpy's OpenBLAS found)."""
    global _available
    if _available is None:
        _available = sys.platform.startswith("linux") and bool(_functions())
    return _available


def _takes(a, b, out, ndim):
    """Whether the team can take these arrays: C-contiguous, ``ndim``-d, one float dtype,
    on a platform with a team."""
    dtype = out.dtype
    return (a.dtype == dtype and b.dtype == dtype and (dtype == np.float32 or dtype == np.float64)
            and a.ndim == ndim and b.ndim == ndim and out.ndim == ndim and a.flags.c_contiguous
            and b.flags.c_contiguous and out.flags.c_contiguous
            and (_available if _available is not None else available()))


def _dims(a, b, out, trans_a, trans_b, name):
    """(m, n, k) of ``out = op(a) @ op(b)`` for 2-d arrays, or a ValueError naming the shapes."""
    m, n = out.shape
    k = a.shape[0] if trans_a else a.shape[1]
    if (a.shape[1] if trans_a else a.shape[0]) != m or (b.shape[0] if trans_b else b.shape[1]) \
            != n or (b.shape[1] if trans_b else b.shape[0]) != k:
        raise ValueError("gemm.%s: shapes %s%s @ %s%s do not give %s" % (
            name, a.shape, ".T" if trans_a else "", b.shape, ".T" if trans_b else "", out.shape))
    return m, n, k


def product(a, b, out, trans_a=False, trans_b=False, accumulate=False):
    """``out = op(a) @ op(b)`` (``+=`` with ``accumulate``), ``op`` transposing where asked,
    for C-contiguous 2-d float32/float64 arrays of one dtype (a transposed operand is passed
    as the array it is a view of), in parts on the team.

    False (nothing done) when the product is not for the team: one part (a small product,
    or one thread), another dtype or layout, or no team on this platform. The caller then
    makes it through numpy, whose OpenBLAS runs it on one thread below about 2^20
    multiply-adds (and, in any case, at the fixed count of ``kernels/threads.py``)."""
    if not _takes(a, b, out, 2):
        return False
    m, n, k = _dims(a, b, out, trans_a, trans_b, "product")
    parts, axis = plan(m, n, k, _threads.product_threads())
    if parts == 1:
        return False
    _execute(_product, a, b, out, trans_a, trans_b, 1.0 if accumulate else 0.0, parts, axis)
    return True


def pair_plan(first, second, count):
    """((parts, axis), (parts, axis)) of two independent products, each given as (m, n, k),
    made as one job at ``count`` threads: each product is planned for half the threads
    (:func:`plan`), so at two threads each is one part, computed whole on one thread while
    the other thread computes the other. None when the pair is not for the team (one
    thread, or fewer than :data:`TEAM_MIN_MACS` multiply-adds in all). A pure function of
    its arguments, as the bits follow it."""
    if count < 2 or first[0] * first[1] * first[2] + second[0] * second[1] * second[2] \
            < TEAM_MIN_MACS:
        return None
    return plan(*first, count // 2), plan(*second, count // 2)


def product_pair(first, second):
    """Two independent products, each ``(a, b, out, trans_a, trans_b, accumulate)`` as for
    :func:`product`, made as one job on the team (:func:`pair_plan`). Two threads then
    compute one product each, at once, instead of both threads cutting each product in
    halves one after the other: each thread packs only its own operands and neither waits
    for the other's half (a FullyConnected layer's two gradients, 128 x 512 x 784 each:
    1.14 ms as two halved products, ~1.02 ms as a pair).

    Both must be of one dtype, and neither output may overlap the other product's arrays.
    False (nothing done) when the team does not take the pair (one thread, small products,
    another dtype or layout, outputs that overlap); the caller then makes them one after the
    other."""
    a1, b1, out1, ta1, tb1, acc1 = first
    a2, b2, out2, ta2, tb2, acc2 = second
    if out1.dtype != out2.dtype or not (_takes(a1, b1, out1, 2) and _takes(a2, b2, out2, 2)):
        return False
    dims1 = _dims(a1, b1, out1, ta1, tb1, "product_pair")
    dims2 = _dims(a2, b2, out2, ta2, tb2, "product_pair")
    plans = pair_plan(dims1, dims2, _threads.product_threads())
    if plans is None:
        return False
    may_share = np.may_share_memory
    if may_share(out1, out2) or may_share(out1, a2) or may_share(out1, b2) or \
            may_share(out2, a1) or may_share(out2, b1):
        return False
    (parts1, axis1), (parts2, axis2) = plans
    _execute(_product_pair, a1, b1, out1, ta1, tb1, 1.0 if acc1 else 0.0, parts1, axis1,
             a2, b2, out2, ta2, tb2, 1.0 if acc2 else 0.0, parts2, axis2)
    return True


def product_batched(a, b, out, trans_a=False, trans_b=False, accumulate=False):
    """``out[i] = op(a[i]) @ op(b[i])`` (``+=`` with ``accumulate``) for C-contiguous 3-d
    arrays of one float dtype, batch first, on the team: each matrix is a part (computed
    whole, on one thread, so its bits do not even depend on the thread count). False when
    the team does not take it (the batch holds fewer matrices than there are threads, the
    whole is below :data:`TEAM_MIN_MACS`, another dtype or layout); the caller then uses
    numpy."""
    if not _takes(a, b, out, 3):
        return False
    batch, m, n = out.shape
    k = a.shape[1] if trans_a else a.shape[2]
    if a.shape[0] != batch or b.shape[0] != batch or \
            (a.shape[2] if trans_a else a.shape[1]) != m or \
            (b.shape[1] if trans_b else b.shape[2]) != n or \
            (b.shape[2] if trans_b else b.shape[1]) != k:
        raise ValueError("gemm.product_batched: shapes %s%s @ %s%s do not give %s" % (
            a.shape, " (transposed)" if trans_a else "", b.shape,
            " (transposed)" if trans_b else "", out.shape))
    count = _threads.product_threads()
    if count < 2 or batch < count or batch > MAX_PARTS or batch * m * n * k < TEAM_MIN_MACS:
        return False
    _execute(_product_batched, a, b, out, trans_a, trans_b, 1.0 if accumulate else 0.0)
    return True


def _execute(compiled, *args):
    """Run ``compiled(ctrl, coef, sems, workers, sgemm, dgemm, *args)`` on the team, or on
    this thread alone when another thread has the team, with OpenBLAS held at one thread."""
    team = _get_team()
    sgemm, dgemm = _gemms
    _threads.hold_blas_single()
    try:
        if team.workers and team.busy.acquire(blocking=False):
            try:
                compiled(team.ctrl, team.coef, team.sems, team.workers, sgemm, dgemm, *args)
            finally:
                team.busy.release()
        else:
            ctrl, coef, sems = _own_arrays()
            compiled(ctrl, coef, sems, 0, sgemm, dgemm, *args)
    finally:
        _threads.release_blas_single()


@atexit.register
def _stop_team():
    team = _team
    if team is not None:
        team.stop()
