"""Distributed synchronous kvstores over MPI: ``dist_sync``, ``dist_device_sync``,
``dist_sync_device``.

MXNet 1.x ran ``--kv-store dist_sync`` on a parameter server (ps-lite). lightmod runs the same
semantics on MPI through mpi4py: start the script with ``mpiexec -n 4 python train.py`` (a host
file spreads the ranks over machines); every MPI rank is one worker.

* ``rank`` / ``num_workers`` are the MPI rank and world size. A script started without
  ``mpiexec`` is a single worker (rank 0 of 1).
* ``init`` stores rank 0's value on every worker, so all workers start identical.
* ``push`` first sums the arrays of a key on this worker (the local multi-device reduction of
  the 'local' / 'device' stores), then sums that over all workers with an MPI allreduce. With an
  optimizer (``set_optimizer``) every worker applies the same update to its copy of the value,
  as MXNet's servers did; without one the sum replaces the stored value. ``pull`` copies the
  stored value out. Since every worker sees the same sum and runs the same update, the values
  stay identical on all workers.
* 2-bit gradient compression quantizes this worker's summed gradient against this worker's own
  residual and sends 2 bits per element (an allgather of the packed codes); every worker adds
  the decoded contributions in rank order.
* Every collective is bounded by a timeout (``LIGHTMOD_DIST_TIMEOUT`` seconds, default 300):
  when a worker dies or stops calling the store, the others raise MXNetError instead of hanging,
  and the job is aborted at exit. With more than one worker an uncaught exception on any rank
  aborts the whole job right away (as ``python -m mpi4py`` does).
* numba's CPU threads per rank default to the machine's cores divided by the ranks on that
  machine, unless ``NUMBA_NUM_THREADS`` or ``LIGHTMOD_NUM_THREADS`` is set.

``dist_async`` is refused: asynchronous updates need a parameter server, which lightmod does not
have. The Module layer calls ``_sync_params_from_rank0`` and ``_agree_to_stop`` from ``fit``.
"""
import atexit
import hashlib
import os
import sys
import time

import numpy as np

from ..base import MXNetError, atomic_write
from ..context import Context
from ..ndarray import NDArray
from .base import KVStoreBase
from .kvstore import KVStore, _pairs

__all__ = ["KVStoreDist"]

TIMEOUT_ENV = "LIGHTMOD_DIST_TIMEOUT"
DEFAULT_TIMEOUT = 300.0
INSTALL_HINT = "pip install 'lightmod[mpi]'   (or: pip install mpi4py mpich)"

_ASYNC_REFUSED = (
    "kvstore type '%s' is not supported: lightmod has no parameter server, and asynchronous "
    "updates (each worker's push applied on its own, with stale weights on the others) need "
    "one. Use 'dist_sync' (or 'dist_device_sync'): every worker's gradients are summed with an "
    "MPI allreduce and all workers apply the same update. Launch with "
    "`mpiexec -n <workers> python your_script.py --kv-store dist_sync`.")

# process-wide MPI bookkeeping (one MPI world per process, however many stores use it)
_PROCESS = {"handlers": False, "failed": False}


def _import_mpi(kv_type):
    """mpi4py's MPI module (initialising MPI), or MXNetError with the install command."""
    try:
        from mpi4py import MPI
    except ImportError as err:
        raise MXNetError("kvstore '%s' needs mpi4py and an MPI library, which are not "
                         "installed (%s). Install them with:  %s"
                         % (kv_type, err, INSTALL_HINT)) from None
    return MPI


def _timeout_from_env():
    text = os.environ.get(TIMEOUT_ENV)
    if text is None or not text.strip():
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise MXNetError("%s must be a number of seconds greater than 0, got %r"
                         % (TIMEOUT_ENV, text))
    return value


def _install_failure_handlers(MPI):
    """Make a failing rank take the job down instead of leaving the others waiting: an
    uncaught exception aborts the MPI job after its traceback is printed, and a process whose
    collective timed out aborts at exit (MPI_Finalize would wait for the dead peer forever)."""
    if _PROCESS["handlers"]:
        return
    _PROCESS["handlers"] = True
    previous = sys.excepthook

    def abort_on_uncaught_exception(exc_type, exc, tb):
        previous(exc_type, exc, tb)
        _abort(MPI, 1)

    def abort_if_a_collective_failed():
        if _PROCESS["failed"]:
            _abort(MPI, 1)

    sys.excepthook = abort_on_uncaught_exception
    atexit.register(abort_if_a_collective_failed)


# Seconds a failing rank waits between flushing its output and aborting the job: the
# launcher forwards each rank's output through its own processes, and the abort kills them;
# on a busy machine a traceback was cut off after a few lines without this pause.
ABORT_GRACE_SECONDS = 1.0


def _abort(MPI, code):
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    time.sleep(ABORT_GRACE_SECONDS)
    MPI.COMM_WORLD.Abort(code)


class _Collectives:
    """The MPI operations the store needs, each bounded by a timeout.

    Every collective is started non-blocking and polled until it completes or the deadline
    passes; a miss marks the process failed (it aborts at exit) and raises MXNetError. Data
    (push) and control (init checks, parameter syncs, stop votes) use two private duplicates of
    COMM_WORLD, so a worker that went astray in one cannot be matched against the other.
    """

    def __init__(self, MPI, kv_type, timeout):
        self.MPI = MPI
        self.kv_type = kv_type
        self.timeout = timeout
        world = MPI.COMM_WORLD
        self.rank = world.Get_rank()
        self.size = world.Get_size()
        self.data = self._dup(world)
        self.control = self._dup(world)

    def _dup(self, comm):
        if self.size == 1:
            return comm.Dup()
        new_comm, request = comm.Idup()
        self.wait(request, "creating the store's communicator")
        return new_comm

    def wait(self, request, what):
        """Poll ``request`` until it completes; past the deadline raise MXNetError."""
        start = time.monotonic()
        deadline = start + self.timeout
        while not request.Test():
            now = time.monotonic()
            if now > deadline:
                _PROCESS["failed"] = True
                raise MXNetError(
                    "kvstore %s: rank %d of %d waited %.0f s for %s; another worker has died, "
                    "hangs, or calls the kvstore differently (e.g. data shards with different "
                    "numbers of batches). The job is aborted. Raise %s (seconds) if a worker "
                    "is just slow." % (self.kv_type, self.rank, self.size, now - start, what,
                                       TIMEOUT_ENV))
            waited = now - start
            # spin while a transfer is likely in flight, then let the CPU go to others
            if waited < 0.02:
                os.sched_yield()
            else:
                time.sleep(1e-4 if waited < 1.0 else 1e-3)

    def allreduce_sum(self, buf, what):
        """Sum a contiguous numpy array over all workers, in place."""
        if self.size > 1:
            self.wait(self.data.Iallreduce(self.MPI.IN_PLACE, buf, op=self.MPI.SUM), what)

    def allgather(self, send, recv, what, comm=None):
        """recv[r] = rank r's ``send`` (uint8 arrays; ``recv`` has shape (size,) + send.shape)."""
        if self.size == 1:
            recv[0] = send
            return
        comm = self.control if comm is None else comm
        self.wait(comm.Iallgather(send, recv), what)

    def bcast(self, buf, what):
        """Overwrite a contiguous numpy array with rank 0's contents."""
        if self.size > 1:
            raw = buf.reshape(-1).view(np.uint8)
            self.wait(self.control.Ibcast(raw, root=0), what)

    def barrier(self, what="a barrier"):
        if self.size > 1:
            self.wait(self.control.Ibarrier(), what)


def _local_ranks(coll):
    """How many ranks run on this machine (same processor name)."""
    if coll.size == 1:
        return 1
    digest = hashlib.blake2b(coll.MPI.Get_processor_name().encode("utf-8"),
                             digest_size=16).digest()
    mine = np.frombuffer(digest, dtype=np.uint8).copy()
    everyone = np.empty((coll.size, mine.size), dtype=np.uint8)
    coll.allgather(mine, everyone, "the workers' host names")
    return int(np.all(everyone == mine, axis=1).sum())


def _default_numba_threads(local_ranks):
    """The machine's cores shared out among its ranks (at least 1, at most this process's
    allowed cores)."""
    cores = os.cpu_count() or 1
    try:
        allowed = len(os.sched_getaffinity(0))
    except AttributeError:
        allowed = cores
    return max(1, min(allowed, cores // max(1, local_ranks)))


def _set_numba_threads(local_ranks):
    """numba's CPU thread count for this rank, unless the user chose one (NUMBA_NUM_THREADS or
    LIGHTMOD_NUM_THREADS). Returns the count in effect.

    The count also becomes LIGHTMOD_NUM_THREADS, the cap of lightmod's CPU thread policy
    (kernels/threads.py), which otherwise would let every rank grow to all the machine's cores
    (it reads the cap when the first kernel runs, normally after the store is created)."""
    import numba
    if os.environ.get("NUMBA_NUM_THREADS") or os.environ.get("LIGHTMOD_NUM_THREADS"):
        return numba.get_num_threads()
    threads = min(_default_numba_threads(local_ranks), numba.config.NUMBA_NUM_THREADS)
    os.environ["LIGHTMOD_NUM_THREADS"] = str(threads)
    numba.set_num_threads(threads)
    return threads


# 2-bit codes: 0 = nothing sent, 1 = +threshold, 2 = -threshold; four codes per byte
_SHIFTS = np.array([0, 2, 4, 6], dtype=np.uint8)


def _pack_2bit(sent):
    """The signs of the quantized gradient ``sent`` (+t, -t or 0) packed four to a byte."""
    flat = sent.reshape(-1)
    codes = np.zeros((flat.size + 3) // 4 * 4, dtype=np.uint8)
    codes[:flat.size][flat > 0] = 1
    codes[:flat.size][flat < 0] = 2
    quads = codes.reshape(-1, 4) << _SHIFTS
    return np.bitwise_or.reduce(quads, axis=1).astype(np.uint8)


def _unpack_2bit_counts(packed, size):
    """Per element, (#workers that sent +t) - (#workers that sent -t), from the packed codes
    of every worker (rows of ``packed``), added in rank order."""
    counts = np.zeros(packed.shape[1] * 4, dtype=np.int32)
    for row in packed:
        codes = ((row[:, None] >> _SHIFTS) & 3).reshape(-1)
        counts += codes == 1
        counts -= codes == 2
    return counts[:size]


@KVStoreBase.register
class KVStoreDist(KVStore):
    """A synchronous distributed kvstore on MPI; create it with
    ``mx.kv.create('dist_sync' | 'dist_device_sync' | 'dist_sync_device')`` in a script
    launched by ``mpiexec`` (or alone, as a single worker)."""

    kvstore_types = ("dist_sync", "dist_device_sync", "dist_sync_device",
                     "dist_async", "dist_device_async", "dist_async_device")

    def __init__(self, kv_type="dist_sync"):
        kv_type = kv_type.lower()
        if "async" in kv_type:
            raise MXNetError(_ASYNC_REFUSED % kv_type)
        super().__init__(kv_type)
        timeout = _timeout_from_env()
        MPI = _import_mpi(kv_type)
        self._coll = _Collectives(MPI, kv_type, timeout)
        if self._coll.size > 1:
            _install_failure_handlers(MPI)
        self._num_local_workers = _local_ranks(self._coll)
        self._numba_threads = _set_numba_threads(self._num_local_workers)
        self._sum_host = {}         # key -> host buffer the cross-worker sum is made in
        self._sum_device = {}       # key -> device copy of the sum (device types)
        self._dist_compression = None
        self._dist_residuals = {}   # key -> (residual, sent) of this worker's 2-bit compression

    # --- properties ----------------------------------------------------------------------------
    @property
    def rank(self):
        return self._coll.rank

    @property
    def num_workers(self):
        return self._coll.size

    def _barrier(self):
        """Wait until every worker gets here (bounded by the timeout)."""
        self._coll.barrier()

    barrier = _barrier

    # --- init / the cross-worker sum of a push -------------------------------------------------
    def init(self, key, value):
        """Initialise key(s) with rank 0's value(s) on every worker. All workers must init the
        same keys with the same shapes, in the same order (checked)."""
        pairs, use_str = _pairs(key, value, "init")
        self._check_key_type(use_str, "init")
        self._check_same_on_all_workers(
            "init", [(k, a.shape, str(np.dtype(a.dtype))) for k, arrays in pairs for a in arrays])
        super().init(key, value)
        for k, _ in pairs:
            self._bcast_ndarray(self._store[k], "init of key %r" % (k,))

    def _sum_over_workers(self, key, merged, home):
        """``merged`` summed over all workers, as an NDArray on ``home`` (a store-owned buffer;
        the pushed arrays are left as they are)."""
        dtype = np.dtype(merged.dtype)
        # float16 is summed in float32 (MPI has no portable half-precision sum)
        wire = np.dtype(np.float32) if dtype == np.float16 else dtype
        buf = self._sum_host.get(key)
        if buf is None or buf.shape != merged.shape or buf.dtype != wire:
            buf = self._sum_host[key] = np.empty(merged.shape, dtype=wire)
        np.copyto(buf, merged._host_view(), casting="unsafe")
        what = "the gradient sum of key %r" % (key,)
        if self._dist_compression is not None:
            if merged.stype != "default":
                raise MXNetError("gradient compression does not support %s values (key %r)"
                                 % (merged.stype, key))
            self._compressed_sum(key, buf, what)
        else:
            self._coll.allreduce_sum(buf, what)
        host = buf if wire == dtype else buf.astype(dtype)
        total = NDArray(host, Context("cpu", 0), merged.stype)
        if home.device_typeid != 2:
            return total
        dev = self._sum_device.get(key)
        if dev is None or dev.shape != total.shape or dev.dtype != total.dtype \
                or dev.context != home:
            dev = self._sum_device[key] = total.copyto(home)
        else:
            total.copyto(dev)
        dev._stype = merged.stype
        return dev

    # --- gradient compression ------------------------------------------------------------------
    def set_gradient_compression(self, compression_params):
        """2-bit compression across workers: this worker's summed gradient is added to its own
        residual; +threshold / -threshold is sent where the residual reaches it (and taken off
        the residual), nothing elsewhere. ``{'type': '2bit', 'threshold': 0.5}``."""
        super().set_gradient_compression(compression_params)
        # the local stores compress each device's array; here the worker's sum is compressed
        self._dist_compression, self._compression = self._compression, None
        self._dist_residuals = {}

    def _compressed_sum(self, key, buf, what):
        from .. import kernels
        residual, sent = self._dist_residuals.get(key, (None, None))
        if residual is None or residual.shape != buf.shape or residual.dtype != buf.dtype:
            residual, sent = np.zeros_like(buf), np.zeros_like(buf)
            self._dist_residuals[key] = (residual, sent)
        threshold = self._dist_compression["threshold"]
        kernels.for_context(Context("cpu", 0)).quantize_2bit(buf, residual, sent, threshold)
        mine = _pack_2bit(sent)
        everyone = np.empty((self._coll.size, mine.size), dtype=np.uint8)
        self._coll.allgather(mine, everyone, what, comm=self._coll.data)
        counts = _unpack_2bit_counts(everyone, buf.size).reshape(buf.shape)
        np.multiply(counts, buf.dtype.type(threshold), out=buf, casting="unsafe")

    # --- optimizer states ----------------------------------------------------------------------
    def save_optimizer_states(self, fname, dump_optimizer=False):
        """Write this worker's updater states (MXNet's .states pickle) to ``fname``, atomically.
        The states are the same on every worker; give each rank its own file name if the
        workers share a file system and should not all write the same file."""
        if self._updater is None or not hasattr(self._updater, "get_states"):
            raise MXNetError("save_optimizer_states: this kvstore has no optimizer "
                             "(call set_optimizer first)")
        atomic_write(fname, self._updater.get_states(dump_optimizer))

    # --- hooks for Module.fit --------------------------------------------------------------------
    def _sync_params_from_rank0(self, arg_params=None, aux_params=None):
        """Overwrite the stored values and the given parameter dicts (name -> NDArray) with
        rank 0's, so every worker continues from exactly rank 0's state (Module.fit calls this
        at the end of every epoch; the values are normally identical already)."""
        for k in sorted(self._store, key=str):
            self._bcast_ndarray(self._store[k], "the epoch-end sync of key %r" % (k,))
        for kind, params in (("arg", arg_params), ("aux", aux_params)):
            for name in sorted(params or {}):
                self._bcast_ndarray(params[name], "the epoch-end sync of %s %r" % (kind, name))

    def _agree_to_stop(self, stop, last_batch=None):
        """Rank 0's ``stop`` decision, on every worker. With ``last_batch`` also check that
        all workers reach the end of the epoch at the same batch (MXNetError otherwise)."""
        mine = np.array([bool(stop), bool(last_batch)], dtype=np.uint8)
        everyone = np.empty((self._coll.size, 2), dtype=np.uint8)
        self._coll.allgather(mine, everyone, "the workers' stop decision")
        if last_batch is not None and len(set(everyone[:, 1].tolist())) > 1:
            ended = [r for r in range(self._coll.size) if everyone[r, 1]]
            raise MXNetError(
                "kvstore %s: the workers' epochs have different lengths (ranks %s reached the "
                "end of the epoch, the others did not). Give every worker the same number of "
                "batches, e.g. shards of equal size: x[rank::num_workers] after cutting the "
                "data to a multiple of num_workers." % (self.type, ended))
        return bool(everyone[0, 0])

    # --- helpers ---------------------------------------------------------------------------------
    def _bcast_ndarray(self, array, what):
        """Overwrite ``array`` (an NDArray anywhere) with rank 0's contents."""
        if self._coll.size == 1:
            return
        data = array._data
        if isinstance(data, np.ndarray) and data.flags.c_contiguous:
            self._coll.bcast(data, what)
            return
        host = np.ascontiguousarray(array._host_view())
        self._coll.bcast(host, what)
        NDArray(host, Context("cpu", 0)).copyto(array)

    def _check_same_on_all_workers(self, what, signature):
        """MXNetError on every worker unless all workers passed the same ``signature``."""
        if self._coll.size == 1:
            return
        digest = hashlib.blake2b(repr(signature).encode("utf-8"), digest_size=16).digest()
        mine = np.frombuffer(digest, dtype=np.uint8).copy()
        everyone = np.empty((self._coll.size, mine.size), dtype=np.uint8)
        self._coll.allgather(mine, everyone, "the workers' %s keys" % what)
        differ = [r for r in range(self._coll.size) if not np.array_equal(everyone[r], everyone[0])]
        if differ:
            raise MXNetError("kvstore %s: %s called with different keys, shapes or dtypes on "
                             "ranks %s than on rank 0 (this rank passed %s); every worker must "
                             "make the same calls in the same order"
                             % (self.type, what, differ, signature))
