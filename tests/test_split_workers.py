"""The sample split's worker hand-off (lightmod/sample_split.py, ``_Workers``): the caller runs
every task a worker has not begun, so a late worker costs nothing and changes no bits; a worker
that wakes late finds its task taken and never runs a task outside its region; errors of any
task reach the caller; the split's results do not depend on which thread ran which slice."""
import ctypes
import os
import sys
import threading
import time

import numpy as np
import pytest
from test_sample_split import _assert_same, _bind, _fill, _lenet_like, _state

import lightmod as mx
from lightmod import sample_split
from lightmod.kernels import threads
from lightmod.kernels.cpu import split_poll

WORKER_PREFIX = "lightmod-split-"


def _in_worker():
    return threading.current_thread().name.startswith(WORKER_PREFIX)


@pytest.fixture
def late_workers(monkeypatch):
    """Workers that pick up a posted task only ``delay[0]`` seconds after waking up."""
    delay = [0.05]
    take = sample_split._Workers._take

    def slow_take(self, i):
        if _in_worker() and delay[0]:
            time.sleep(delay[0])
        return take(self, i)

    monkeypatch.setattr(sample_split._Workers, "_take", slow_take)
    return delay


@pytest.fixture(params=["poll", "block"])
def make_workers(request):
    """``_Workers`` whose threads poll for posts and finishes for a long time (~20 ms) or
    block at once, so both hand-offs are exercised."""
    def make(count):
        workers = sample_split._Workers(count)
        poll_ns = 20_000_000 if request.param == "poll" else 0
        workers.post_poll_ns = workers.finish_poll_ns = poll_ns
        return workers
    return make


def _recording_tasks(count, log, region):
    """Tasks that record (task, region seen while running, thread name) into ``log``."""
    def task(k):
        def run():
            log.append((k, region[0], threading.current_thread().name))
        return run
    return [task(k) for k in range(count)]


def _run_regions(workers, count, regions, region, log):
    """Run ``regions`` regions of ``count`` recording tasks, every other one with the GIL
    polls (the forwards' regions)."""
    for r in range(regions):
        region[0] = r
        workers.run(_recording_tasks(count, log, region), gil_poll=r % 2 == 1)
        region[0] = None        # no region runs: a task running now would record None
        done = [entry for entry in log if entry[1] == r]
        assert sorted(k for k, _, _ in done) == list(range(count))
        assert workers._done._value == 0      # every wait matched one finished task


@pytest.mark.parametrize("count", [2, 3])
def test_caller_runs_what_late_workers_did_not_begin(late_workers, make_workers, count):
    workers = make_workers(count - 1)
    log, region = [], [None]
    _run_regions(workers, count, 5, region, log)
    # every task ran once, in its own region, on the calling thread
    assert len(log) == 5 * count
    assert {name for _, _, name in log} == {threading.current_thread().name}
    time.sleep(3 * late_workers[0])     # the late workers wake to empty slots
    late_workers[0] = 0
    assert len(log) == 5 * count and all(r is not None for _, r, _ in log)


def test_prompt_worker_runs_its_task(make_workers):
    workers = make_workers(1)
    ran = []
    for r in range(20):
        event = threading.Event()

        def caller_task(event=event):
            event.wait(5)       # the caller's own task ends only once the worker started

        def worker_task(event=event):
            ran.append(threading.current_thread().name)
            event.set()
        workers.run([caller_task, worker_task], gil_poll=r % 2 == 1)
    assert set(ran) == {WORKER_PREFIX + "1"}


def test_late_worker_never_runs_a_task_outside_its_region(late_workers, make_workers):
    """Workers slow by random amounts around the regions' length: the caller takes some tasks,
    the workers others (one woken in an earlier region may take the current region's task);
    each task runs exactly once and while its own region runs."""
    workers = make_workers(2)
    rng = np.random.RandomState(0)
    log, region = [], [None]

    def task(k, r):
        def run():
            time.sleep(rng.uniform(0, 0.002))
            log.append((k, region[0], r, threading.current_thread().name))
        return run

    for r in range(60):
        late_workers[0] = rng.choice([0.0, 0.0005, 0.002, 0.004])
        region[0] = r
        workers.run([task(k, r) for k in range(3)], gil_poll=r % 2 == 1)
        region[0] = None
        assert sorted(k for k, _, r2, _ in log if r2 == r) == [0, 1, 2]
    late_workers[0] = 0
    time.sleep(0.02)
    assert len(log) == 180
    assert all(seen == own for _, seen, own, _ in log)
    assert workers._done._value == 0
    names = {name for *_, name in log}
    assert threading.current_thread().name in names and len(names) > 1


@pytest.mark.parametrize("late", [False, True])
@pytest.mark.parametrize("failing", [0, 1, 2])
def test_errors_propagate(late_workers, make_workers, late, failing):
    late_workers[0] = 0.02 if late else 0
    workers = make_workers(2)
    ran = []

    def task(k):
        def run():
            ran.append(k)
            if k >= failing:
                raise ValueError("task %d" % k)
        return run

    with pytest.raises(ValueError, match="task %d" % failing):   # the first, in task order
        workers.run([task(k) for k in range(3)])
    assert sorted(ran) == [0, 1, 2]
    ran.clear()
    workers.run([lambda: ran.append("again")] * 3)      # still usable
    assert ran == ["again"] * 3


def test_nested_region_runs_serially_and_stays_serial():
    """A task that runs a region of its own (the pool is busy) runs those tasks itself; the
    caller stays serial for the rest of its region."""
    workers = sample_split._Workers(1)
    seen = []

    def outer():
        workers.run([lambda: seen.append(threading.current_thread().name)] * 2)
        seen.append(threads.in_serial())

    workers.run([outer, lambda: None])
    assert seen == [threading.current_thread().name] * 2 + [True]
    assert not threads.in_serial()


def _cpu_seconds(thread):
    with open("/proc/self/task/%d/stat" % thread.native_id) as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")   # utime + stime


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs Linux's /proc")
def test_idle_workers_do_not_hold_a_core():
    """Polling is bounded: between regions the workers block and burn no CPU."""
    workers = sample_split._Workers(2)
    workers.run([lambda: None] * 3)
    time.sleep(max(0.05, 20 * sample_split.POST_POLL_SECONDS))
    before = [_cpu_seconds(t) for t in workers.threads]
    time.sleep(0.5)
    after = [_cpu_seconds(t) for t in workers.threads]
    assert all(b - a <= 0.02 for a, b in zip(before, after)), (before, after)


CLOCK = np.zeros(2, np.int64)     # the polls' clock scratch
NO_GIL_POLLS = np.zeros(2, np.int64)


@pytest.mark.parametrize("poll_ns", [0, 200_000, 20_000_000])
def test_polls_end_at_their_deadline(poll_ns):
    workers = sample_split._Workers(1)
    posted, finished = np.zeros(2, np.int64), np.zeros(2, np.int64)
    workers._wait_for_post(posted, finished, 1, 7, 0, 0, CLOCK, 0, NO_GIL_POLLS)  # compiled (or loaded)
    workers._wait_for_finish(finished, np.array([-1, 8]), 0, CLOCK)  # before the timing
    started = time.perf_counter()
    assert not workers._wait_for_post(posted, finished, 1, 7, 0, poll_ns, CLOCK, 0, NO_GIL_POLLS)
    assert not workers._wait_for_finish(finished, np.array([-1, 8]), poll_ns, CLOCK)
    elapsed = time.perf_counter() - started
    assert finished[1] == 7
    assert 2 * poll_ns * 1e-9 <= elapsed < 2 * poll_ns * 1e-9 + 0.1
    posted[1] = 1
    assert workers._wait_for_post(posted, finished, 1, 7, 0, 10 ** 12, CLOCK, 0, NO_GIL_POLLS)  # no wait
    assert workers._wait_for_finish(finished, np.array([-1, 7]), 10 ** 12, CLOCK)


def test_polls_see_another_threads_store():
    workers = sample_split._Workers(1)
    posted, finished = np.zeros(1, np.int64), np.zeros(1, np.int64)
    timer = threading.Timer(0.05, lambda: posted.__setitem__(0, 3))
    timer.start()
    started = time.perf_counter()
    assert workers._wait_for_post(posted, finished, 0, 0, 0, 5 * 10 ** 9, CLOCK, 0, NO_GIL_POLLS)
    assert time.perf_counter() - started < 2
    timer.join()


needs_split_poll = pytest.mark.skipif(not split_poll.available(), reason="Linux's polls only")


@needs_split_poll
@pytest.mark.parametrize("gil_poll_ns", [0, 200_000, 20_000_000])
def test_the_gil_poll_after_a_post_ends_when_the_flag_clears_or_at_its_deadline(gil_poll_ns):
    posted, finished = np.ones(1, np.int64), np.zeros(1, np.int64)
    flag = np.ones(1, np.int32)         # stands in for the GIL's flag: held
    address = flag.ctypes.data
    wait = split_poll.wait_for_post
    polls = np.array([gil_poll_ns])
    wait(posted, finished, 0, 0, 0, 0, CLOCK, address, NO_GIL_POLLS)  # compiled (or loaded)
    started = time.perf_counter()
    assert wait(posted, finished, 0, 0, 0, 10 ** 12, CLOCK, address, polls)
    elapsed = time.perf_counter() - started
    assert gil_poll_ns * 1e-9 <= elapsed < gil_poll_ns * 1e-9 + 0.1
    # a flag another thread clears ends the poll early
    timer = threading.Timer(0.05, lambda: flag.__setitem__(0, 0))
    timer.start()
    started = time.perf_counter()
    assert wait(posted, finished, 0, 0, 0, 10 ** 12, CLOCK, address, np.array([5 * 10 ** 9]))
    assert time.perf_counter() - started < 2
    timer.join()
    # no post: the GIL flag is not looked at
    flag[0] = 1
    assert not wait(posted, finished, 0, 0, 1, 0, CLOCK, address, np.array([10 ** 12]))


@needs_split_poll
@pytest.mark.skipif(sys.implementation.name != "cpython" or sys.version_info[:2] != (3, 11),
                    reason="the GIL's layout checked here is CPython 3.11's")
def test_the_gil_flag_reads_held_and_free():
    word = split_poll.gil_word_address()
    assert word != 0
    assert ctypes.c_int32.from_address(word).value == 1       # this thread holds the GIL
    assert split_poll._read_int32(word) == 0                  # released by the compiled call
    assert sample_split._Workers(1).gil_word == word


def test_a_missing_gil_flag_turns_the_gil_poll_off(monkeypatch):
    monkeypatch.setattr(split_poll, "_gil_word", None)
    monkeypatch.setattr(split_poll, "_find_gil_word", lambda: 0)
    assert split_poll.gil_word_address() == 0
    workers = sample_split._Workers(1)
    assert workers.gil_word == 0
    log, region = [], [None]
    _run_regions(workers, 2, 20, region, log)


def test_forward_regions_poll_the_gil_and_backward_ones_do_not(monkeypatch):
    polls = []
    post = sample_split._Workers._post
    monkeypatch.setattr(sample_split._Workers, "_post",
                        lambda self, i, task, ns: polls.append(ns) or post(self, i, task, ns))
    exe = _bind(_lenet_like(), {"data": (6, 2, 12, 12)}, "write", True, 2)
    _fill(exe, 1, 2)
    exe.forward(is_train=True)
    forward = list(polls)
    exe.backward(mx.nd.ones(exe.outputs[0].shape))
    assert forward == [sample_split._workers.gil_poll_ns] and polls[1:] == [0]


def _train_step(exe, seed):
    exe.forward(is_train=True)
    rng = np.random.RandomState(seed)
    exe.backward(mx.nd.array(rng.uniform(-1, 1, exe.outputs[0].shape)))
    return _state(exe)


def _train(exe, steps):
    states = []
    for step in range(steps):
        states.append(_train_step(exe, step))
        for name, arr in exe.arg_dict.items():
            if name != "data" and not name.endswith("label"):   # each step differs
                arr[:] = arr.asnumpy() - 0.1 * exe.grad_dict[name].asnumpy()
    return states


@pytest.mark.parametrize("count", [2, 3])
def test_late_workers_give_the_same_bits(late_workers, count):
    """A training run whose workers are too late for every region (the caller runs all
    slices) gives the bits of a run where the workers ran theirs, and the unsplit results."""
    sym = _lenet_like()
    shapes = {"data": (11, 2, 12, 12)}
    runs, threads_seen = [], []
    for delay in (0, 0.05):
        late_workers[0] = delay
        exe = _bind(sym, shapes, "write", True, count)
        assert len(exe._split.children) == count
        seen = set()
        for child in exe._split.children[1:]:
            forward = child.forward

            def recorded(*args, _forward=forward, _seen=seen, **kwargs):
                _seen.add(threading.current_thread().name)
                return _forward(*args, **kwargs)
            child.forward = recorded
        _fill(exe, 7, 4)
        runs.append(_train(exe, 3))
        threads_seen.append(seen)
    late_workers[0] = 0
    assert threads_seen[1] == {threading.current_thread().name}
    for prompt, late in zip(*runs):
        _assert_same(late, prompt, exact=True)
    unsplit = _bind(sym, shapes, "write", False)
    _fill(unsplit, 7, 4)
    for reference, late in zip(_train(unsplit, 3), runs[1]):
        _assert_same(late, reference)
