"""Sample-parallel execution of a bound executor on the CPU.

On a CPU with T >= 2 kernel threads (kernels/threads.py), running every operator with its own
parallel loop or BLAS pool leaves the cores waiting at one barrier per operator, and the pools'
spinning threads take each other's cores. When the graph computes each sample from that sample
alone, the executor instead runs the whole network on T contiguous slices of the batch at once,
one slice per thread, every kernel serial inside a slice.

How
---
At bind (``attach``, called at the end of ``Executor._setup``) the graph is checked against a
whitelist of per-sample operators (``_separable``). If it passes, T *child executors* are bound
over the slice shapes, ``rows [lo, hi)`` of the batch, a fixed split (the bits depend on T,
never on the machine's load):

* their batch arguments, batch input gradients and outputs are row slices (views) of the
  parent's arrays; parameters and auxiliary states are the parent's own NDArrays;
* the first child writes parameter gradients into the parent's gradient arrays with the
  parent's ``grad_req``; each other child into a gradient buffer of its own, which is then
  added into the parent's array, child after child (a fixed order);
* their internal buffers are row slices of the parent's buffers of the same role (the parent
  never runs its plan at the same time as its children), so splitting costs no memory beyond
  the per-child parameter gradients; a buffer of the parent that shares memory with another
  one (a recycled forward-only plan) is not sliced, the child plans its own.

A forward or backward then runs child ``i`` on thread ``i`` (the caller runs child 0, and
then any child whose worker has not begun yet: a worker that the OS keeps waiting on a busy
machine delays nothing) with numba's thread count 1 in every participating thread, OpenBLAS at
one thread for the duration, and ``refresh()`` / ``task_count`` answering 1 there, so no
operator starts threads of its own. Which thread runs a child never changes the bits.

What splits
-----------
Convolution, FullyConnected, Activation, LeakyReLU (not ``rrelu`` in training), Pooling,
Flatten, softmax-type activations over a non-batch axis, element-wise unary and scalar
operators, element-wise binary operators of two batch entries, broadcast operators whose
operands are batch entries or parameters broadcast over the batch (leading dimension 1),
Concat over a non-batch axis, BlockGrad, BatchNorm (inference, or ``use_global_stats``),
Dropout (inference only, not ``mode='always'``), and the loss heads whose gradient does not
depend on the batch size: SoftmaxOutput with ``normalization='null'`` (or probabilities as
label), the regression outputs (their scale is per sample), MakeLoss with 'null'. Every
batch entry's leading dimension must be the batch.

Only graphs with a convolution or a pooling split: fully connected layers are GEMMs that
OpenBLAS's own threads already split well. Inference can split where training cannot
(BatchNorm with batch statistics): the children are then forward-only executors, and a
training pass runs the parent's own plan. Anything not on the list, sparse storage, several
devices, a monitor or the profiler (checked per call) keep the parent's plan.
``LIGHTMOD_SAMPLE_SPLIT=0`` turns splitting off.
"""
import os
import threading

import numpy as np

from . import engine
from .grad_req import GradReq
from .ndarray.ndarray import NDArray

__all__ = ["enabled", "attach", "SampleSplit"]


def enabled():
    """False under ``LIGHTMOD_SAMPLE_SPLIT=0``."""
    return os.environ.get("LIGHTMOD_SAMPLE_SPLIT", "1").strip() != "0"


def _threads():
    from .kernels import threads  # imports numba: only when binding on the CPU
    return threads


# ---------------------------------------------------------------------------------------------
# which graphs split
# ---------------------------------------------------------------------------------------------
_PER_SAMPLE = {"Convolution", "FullyConnected", "Activation", "Pooling", "Flatten",
               "BlockGrad", "SoftmaxActivation", "identity", "_copy"}
_PARAM_SLOTS = {"Convolution": (1, 2), "FullyConnected": (1, 2), "BatchNorm": (1, 2, 3, 4),
                "LeakyReLU": (1,)}
_LOSSES = {"SoftmaxOutput", "LinearRegressionOutput", "LogisticRegressionOutput",
           "MAERegressionOutput", "MakeLoss"}


def _op_kind(op):
    """'unary', 'binary' or 'broadcast' for the element-wise families, else None."""
    from .operator import elemwise
    if isinstance(op, elemwise._Broadcast):
        return "broadcast"
    if isinstance(op, elemwise._Binary):
        return "binary"
    if isinstance(op, (elemwise._Unary, elemwise._Scalar)):
        return "unary"
    return None


def _node_splits(g, nid, shapes, is_train, batch):
    """(ok, batch slots, parameter slots, private outputs) of operator ``nid``: whether its
    output sample i reads input sample i alone (with ``is_train``), which input slots hold
    batch data and which parameters, and which outputs are not per sample."""
    node, p = g.nodes[nid], g.params[nid]
    op, name = node.op, node.op.name
    ins = g.node_inputs[nid]
    nin = len(ins)
    private = ()
    if name in _PER_SAMPLE or name in _PARAM_SLOTS:
        if name == "BatchNorm":
            if is_train and not p.use_global_stats:
                return False, (), (), ()
            private = (1, 2)     # the statistics outputs (channels, not samples)
        elif name == "LeakyReLU" and p.act_type == "rrelu" and is_train:
            return False, (), (), ()
        params = tuple(s for s in _PARAM_SLOTS.get(name, ()) if s < nin)
        if name == "LeakyReLU" and p.act_type != "prelu":
            params = ()
        return True, tuple(s for s in range(nin) if s not in params), params, private
    if name in ("softmax", "log_softmax", "softmin"):
        axis = p.axis
        ndim = len(shapes[ins[0]])
        if (axis + ndim if axis < 0 else axis) == 0 or getattr(p, "use_length", False):
            return False, (), (), ()
        return True, tuple(range(nin)), (), ()
    if name == "Concat":
        ndim = len(shapes[ins[0]])
        if (p.dim + ndim if p.dim < 0 else p.dim) == 0:
            return False, (), (), ()
        return True, tuple(range(nin)), (), ()
    if name == "Dropout":
        return (not is_train and p.mode != "always"), (0,), (), ()
    if name in _LOSSES:
        if name == "SoftmaxOutput":
            same = tuple(shapes[ins[1]]) == tuple(shapes[ins[0]])
            if p.normalization != "null" and not same:
                return False, (), (), ()
        if name == "MakeLoss" and p.normalization != "null":
            return False, (), (), ()
        return True, tuple(range(nin)), (), ()
    kind = _op_kind(op)
    if kind in ("unary", "binary"):
        return True, tuple(range(nin)), (), ()
    if kind == "broadcast":
        # a broadcast operand with leading dimension 1 is the same for every sample: it must
        # be a parameter (a variable), so its gradient is a sum over samples
        ndim = len(shapes[g.entry_start[nid]])
        params = tuple(s for s in range(nin) if shapes[ins[s]][:1] != (batch,))
        if any(len(shapes[e]) != ndim for e in ins) or any(
                g.nodes[g.entry_node[ins[s]]].op is not None or shapes[ins[s]][:1] != (1,)
                for s in params):
            return False, (), (), ()
        return True, tuple(s for s in range(nin) if s not in params), params, ()
    return False, (), (), ()


def _separable(g, shapes, stypes, is_train):
    """(batch, batch entries, private entries) when every operator computes each sample from
    that sample alone, else None. Batch entries are row-sliced among the children; private
    ones (statistics outputs) each child keeps its own of; the rest are parameters."""
    if not g.op_nids or any(s != "default" for s in stypes):
        return None
    head = shapes[g.heads[0]] if g.heads else ()
    batch = head[0] if head else None
    if not batch or batch < 2:
        return None
    batch_entries, param_entries, private = set(), set(), set()
    for nid in g.op_nids:
        ok, data_slots, param_slots, private_outs = _node_splits(g, nid, shapes, is_train, batch)
        if not ok or not data_slots:
            return None     # (an operator without batch input makes its output from nothing)
        ins = g.node_inputs[nid]
        for s in data_slots:
            batch_entries.add(ins[s])
        for s in param_slots:
            if g.nodes[g.entry_node[ins[s]]].op is not None:
                return None         # a computed parameter: not per sample
            param_entries.add(ins[s])
        start = g.entry_start[nid]
        for j in range(g.num_outputs[nid]):
            (private if j in private_outs else batch_entries).add(start + j)
    if batch_entries & param_entries:
        return None
    for eid in batch_entries:
        if not shapes[eid] or shapes[eid][0] != batch:
            return None
    for eid in g.heads:
        if eid not in batch_entries:
            return None
    return batch, batch_entries, private


# ---------------------------------------------------------------------------------------------
# the worker threads
# ---------------------------------------------------------------------------------------------
_PARALLEL_FOLD = 1 << 16     # parameter-gradient elements from which the folding is threaded
POST_POLL_SECONDS = 200e-6   # how long a worker polls for its next task before it blocks
FINISH_POLL_SECONDS = 200e-6  # how long the caller polls for the workers' finish
GIL_POLL_SECONDS = 200e-6    # how long a worker that saw a forward's post polls for the GIL


def _poll_loops():
    """(wait_for_post, wait_for_finish, GIL flag address): kernels/cpu/split_poll.py's GIL-free
    polls, or where they do not apply, a single look each (and no GIL flag)."""
    from .kernels.cpu import split_poll
    if split_poll.available():
        return split_poll.wait_for_post, split_poll.wait_for_finish, split_poll.gil_word_address()

    def wait_for_post(posted, finished, i, finished_gen, seen, poll_ns, timespec, gil_word,
                      gil_polls):
        finished[i] = finished_gen
        return posted[i] != seen

    def wait_for_finish(finished, expected, poll_ns, timespec):
        return bool(np.all((expected < 0) | (finished == expected)))
    return wait_for_post, wait_for_finish, 0


class _Workers:
    """Persistent worker threads that each run one task of a region, the caller running the
    first; one region at a time (a second caller runs its tasks itself, serially).

    A posted task is run by whoever takes it from ``_tasks`` first (under ``_claim``): its
    worker when it wakes, or the caller once its own task is done. So a worker that the OS
    has not scheduled yet (a busy machine) or that is still waking up costs the region
    nothing: the caller runs that slice itself. Which thread runs a slice never changes the
    bits (each slice is computed the same way, the gradients folded in child order). A worker
    that wakes to an empty slot (its task taken back, or a spare wake-up) goes back to waiting;
    the slot only holds a task while its region runs, so a late worker can never run a task
    of a region that has ended.

    Hand-off: posting a task bumps the worker's counter in ``_posted`` (which a worker polls
    for a while after each task, see kernels/cpu/split_poll.py) and releases its semaphore (where it
    blocks after that); a worker that ran the task of post ``g`` releases ``_done`` and then
    sets ``_finished[i] = g`` (which the caller polls before it blocks on ``_done``). The
    semaphores decide, the counters only save the wake-ups.

    In a region run with ``gil_poll`` (the forwards), a worker that saw its post also polls
    (within the same GIL-free call) until the GIL is free, which the caller holds until its own
    task enters its first kernel: taking a held GIL sleeps, one more wake-up (LeNet's conv1,
    batch 64: the worker began its slice ~50 us into the region, ~25 us with the poll). Not in
    backward: there the caller first copies its head-gradient slice, numpy releases the GIL
    for the copy, and a worker that takes it then keeps the caller waiting on its return
    (conv1's data gradient +15 us)."""

    def __init__(self, count):
        self.pid = os.getpid()      # a forked process has the object but not the threads
        self._busy = threading.Lock()
        self._claim = threading.Lock()
        self._start = [threading.Semaphore(0) for _ in range(count)]
        self._done = threading.Semaphore(0)
        self._tasks = [None] * count    # (post number, task) while posted and not taken
        self._errors = [None] * count
        self._posted = np.zeros(count, np.int64)
        self._finished = np.zeros(count, np.int64)
        self._expected = np.full(count, -1, np.int64)
        self._gil_polls = np.zeros(count, np.int64)    # per post: how long to poll the GIL
        self._clock = np.zeros((count + 1, 2), np.int64)   # polls' clock scratch: a row per
        #                                                    worker, the last the caller's
        self._wait_for_post, self._wait_for_finish, self.gil_word = _poll_loops()
        self.post_poll_ns = int(POST_POLL_SECONDS * 1e9)
        self.finish_poll_ns = int(FINISH_POLL_SECONDS * 1e9)
        self.gil_poll_ns = int(GIL_POLL_SECONDS * 1e9)     # (for regions run with gil_poll)
        self.threads = [threading.Thread(target=self._loop, args=(i,), daemon=True,
                                         name="lightmod-split-%d" % (i + 1))
                        for i in range(count)]
        for thread in self.threads:
            thread.start()

    def _take(self, i):
        """(post number, task) of worker ``i`` if nobody took it yet, else None."""
        with self._claim:
            posted, self._tasks[i] = self._tasks[i], None
        return posted

    def _post(self, i, task, gil_poll_ns):
        gen = int(self._posted[i]) + 1
        with self._claim:
            self._tasks[i] = (gen, task)
        self._gil_polls[i] = gil_poll_ns
        self._start[i].release()
        self._posted[i] = gen       # after the release: a worker that sees it finds the token

    def _loop(self, i):
        _threads().serial_thread()
        seen = finished = 0
        while True:
            if self._wait_for_post(self._posted, self._finished, i, finished, seen,
                                   self.post_poll_ns, self._clock[i], self.gil_word,
                                   self._gil_polls):
                self._start[i].acquire(blocking=False)     # the token of the post it saw
            else:
                self._start[i].acquire()
            seen = int(self._posted[i])
            posted = self._take(i)
            if posted is None:
                continue        # the caller took it back (or a spare token)
            gen, task = posted
            try:
                task()
            except BaseException as err:   # handed to the caller
                self._errors[i] = err
            finished = gen
            self._done.release()

    def run(self, tasks, gil_poll=False):
        """Run ``tasks`` (callables) at once, each with serial kernels; the first on the
        calling thread, which then runs every task a worker has not begun. Returns after all
        finished; re-raises the first error (in task order). ``gil_poll``: the workers poll
        for the GIL before they take it (see the class doc)."""
        threads = _threads()
        if not self._busy.acquire(blocking=False):
            entered = not threads.in_serial()    # (nested in a region: already serial)
            if entered:
                threads.enter_serial()
            try:
                for task in tasks:
                    task()
            finally:
                if entered:
                    threads.leave_serial()
            return
        try:
            threads.enter_serial()
            others = len(tasks) - 1
            gil_poll_ns = self.gil_poll_ns if gil_poll else 0
            for i in range(others):
                self._errors[i] = None
                self._post(i, tasks[i + 1], gil_poll_ns)
            error = None
            try:
                tasks[0]()
            except BaseException as err:
                error = err
            expected = self._expected
            expected[:] = -1
            running = 0         # tasks the workers took
            for i in range(others):
                posted = self._take(i)
                if posted is None:
                    expected[i] = self._posted[i]
                    running += 1
                    continue
                self._start[i].acquire(blocking=False)      # its wake-up is not needed now
                try:
                    posted[1]()
                except BaseException as err:
                    self._errors[i] = err
            if running:
                self._wait_for_finish(self._finished, expected, self.finish_poll_ns,
                                      self._clock[-1])
                for _ in range(running):
                    self._done.acquire()
            threads.leave_serial()
            error = error or next((e for e in self._errors[:others] if e is not None), None)
            if error is not None:
                raise error
        finally:
            self._busy.release()


_workers = None
_workers_lock = threading.Lock()


def _pool(count):
    global _workers
    with _workers_lock:
        if _workers is None or len(_workers._start) < count or _workers.pid != os.getpid():
            _workers = _Workers(count)
        return _workers


# ---------------------------------------------------------------------------------------------
# binding the children
# ---------------------------------------------------------------------------------------------
def _rows(arr, lo, hi):
    """NDArray of rows [lo, hi) of NDArray ``arr`` (a view)."""
    return NDArray(arr._data[lo:hi], arr.context, arr.stype)


def _exclusive_keys(pool):
    """Keys of ``pool`` whose host buffer is C-contiguous and shares memory with no other."""
    spans = []
    for key, arr in pool.items():
        data = arr._data
        if isinstance(data, np.ndarray) and data.size:
            start = data.__array_interface__["data"][0]
            spans.append((start, start + data.nbytes, key, data.flags.c_contiguous))
    spans.sort(key=lambda s: (s[0], s[1]))
    keys, reach = set(), -1
    for i, (start, end, key, contiguous) in enumerate(spans):
        overlaps_before = start < reach
        overlaps_after = i + 1 < len(spans) and spans[i + 1][0] < end
        if contiguous and not overlaps_before and not overlaps_after:
            keys.add(key)
        reach = max(reach, end)
    return keys


def _entry_of(g, key):
    """The graph entry a planned buffer key holds (or the gradient of), else None."""
    if key[0] in ("out", "grad"):
        return key[1]
    if key[0] == "scratch":
        return g.node_inputs[key[1]][key[2]]
    return None


def _worth_splitting(g):
    """Whether slices beat per-operator threads: graphs with convolutions or pooling. A
    graph of fully connected layers is a chain of large GEMMs, which OpenBLAS's own threads
    split well (an MLP 784-512-256-10 at batch 128 ran 0.9 ms a forward and 2.5 ms a
    training step on 2 threads, its halves 1.0 and 2.7 ms each on one thread)."""
    return any(g.nodes[nid].op.name in ("Convolution", "Pooling") for nid in g.op_nids)


def attach(exe):
    """A SampleSplit for ``exe`` (just planned) when its graph splits, else None."""
    if not enabled() or exe._group2ctx or any(c.device_typeid == 2 for c in exe._node_ctx):
        return None
    threads = _threads()
    count = threads.cap()
    if count < 2:
        return None
    g = exe._g
    if not _worth_splitting(g):
        return None
    found = _separable(g, exe._shapes, exe._stypes, False)
    if found is None:
        return None
    batch, batch_entries, private = found
    trains = exe._bwd is not None and _separable(g, exe._shapes, exe._stypes, True) is not None
    count = min(count, batch)
    try:
        return SampleSplit(exe, batch, batch_entries, count, trains)
    except _NotSplit:
        return None


class _NotSplit(Exception):
    """The children cannot write into the parent's outputs: the parent runs unsplit."""


class SampleSplit:
    """The child executors of one parent and how to run them (see the module doc)."""

    def __init__(self, exe, batch, batch_entries, count, trains):
        g = exe._g
        self.trains = trains
        self.bounds = [(i * batch // count, (i + 1) * batch // count) for i in range(count)]
        exclusive = _exclusive_keys(exe._pool)
        arg_set = set(g.arg_nids)
        self.children, self.folds = [], []
        for i, (lo, hi) in enumerate(self.bounds):
            shapes = [(hi - lo,) + tuple(s[1:]) if e in batch_entries else s
                      for e, s in enumerate(exe._shapes)]
            args, grads, reqs = [], [], []
            for nid, arr, grad, req in zip(g.arg_nids, exe.arg_arrays, exe.grad_arrays,
                                           exe._reqs):
                eid = g.entry_start[nid]
                if not trains:
                    grad, req = None, GradReq.NULL
                if eid in batch_entries:
                    args.append(_rows(arr, lo, hi))
                    grads.append(None if grad is None else _rows(grad, lo, hi))
                    reqs.append(req)
                elif i == 0 or grad is None or req is GradReq.NULL:
                    args.append(arr)
                    grads.append(grad)
                    reqs.append(req)
                else:
                    own = NDArray(np.zeros(grad.shape, grad.dtype), grad.context)
                    self.folds.append((grad._data, own._data))
                    args.append(arr)
                    grads.append(own)
                    reqs.append(GradReq.WRITE)
            pool = {}
            for key, arr in exe._pool.items():
                eid = _entry_of(g, key)
                if (key in exclusive and eid in batch_entries and eid not in arg_set
                        and arr.shape[:1] == (batch,)):
                    pool[key] = _rows(arr, lo, hi)
            child = type(exe)(exe._symbol, exe._ctx, exe._grad_req if trains else "null",
                              None)
            child._split_child = True
            child._setup(g, exe._node_ctx, shapes, exe._types, args, grads, reqs,
                         list(exe.aux_arrays), base_pool=pool)
            if not all(np.shares_memory(out._data, head._data)
                       for out, head in zip(child.outputs, exe.outputs)):
                raise _NotSplit     # (a head whose buffer the parent shares: keep it whole)
            self.children.append(child)
        _pool(len(self.children) - 1)       # start the threads at bind
        self._forward = [None] * len(self.children)
        self._is_train = False
        self._tasks_fwd = [self._forward_task(c) for c in self.children]
        self._heads = None
        self._tasks_bwd = [self._backward_task(i, c) for i, c in enumerate(self.children)]
        self._tasks_fold = self._fold_tasks(len(self.children))

    def _fold_tasks(self, count):
        """The additions of the other children's parameter gradients into the parent's, as
        ``count`` tasks over contiguous parts of every array (each element still adds the
        children in order, so the bits do not depend on the parts); one task when small."""
        total = sum(target.size for target, _ in self.folds)
        parts = count if total >= _PARALLEL_FOLD else 1
        work = [[] for _ in range(parts)]
        for target, own in self.folds:
            flat_target, flat_own = target.reshape(-1), own.reshape(-1)
            n = flat_target.size
            for p in range(parts):
                lo, hi = p * n // parts, (p + 1) * n // parts
                if hi > lo:
                    work[p].append((flat_target[lo:hi], flat_own[lo:hi]))

        def task(pairs):
            def run():
                for target, own in pairs:
                    np.add(target, own, out=target)
            return run
        return [task(pairs) for pairs in work]

    def _forward_task(self, child):
        def task():
            child.forward(is_train=self._is_train)
        return task

    def _backward_task(self, i, child):
        def task():
            child.backward(None if self._heads is None else self._heads[i])
        return task

    def forward(self, exe, is_train):
        """Run the children's forward; False (nothing run) when training does not split."""
        if is_train and not self.trains:
            return False
        self._is_train = bool(is_train)
        _pool(len(self.children) - 1).run(self._tasks_fwd, gil_poll=True)
        failed = [c for c in self.children if c._failure is not None]
        if failed:
            for child in failed:
                for out, mine in zip(child.outputs, exe.outputs):
                    if out._error is not None:
                        mine._error = out._error
            exe._failure = failed[0]._failure
        return True

    def backward(self, exe, heads):
        """Run the children's backward with row slices of ``heads`` (the head gradients as
        given to backward), then add the other children's parameter gradients into the
        parent's arrays in child order."""
        failure = exe._failure if exe._failure is not None else engine.pending_of(heads)
        if failure is not None and failure.error is not None:
            exe._fail_gradients(failure)
            return
        if heads:
            self._heads = [[None if h is None else NDArray(h._data[lo:hi], h.context)
                            for h in heads] for lo, hi in self.bounds]
        else:
            self._heads = None
        try:
            _pool(len(self.children) - 1).run(self._tasks_bwd)
        finally:
            self._heads = None
        for child in self.children:
            if child._failure is not None:
                exe._fail_gradients(child._failure)
                return
        if len(self._tasks_fold) > 1:
            _pool(len(self._tasks_fold) - 1).run(self._tasks_fold)
        elif self._tasks_fold:
            self._tasks_fold[0]()
