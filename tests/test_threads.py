"""The CPU kernels' thread policy (lightmod.kernels.threads)."""
import subprocess
import sys

import numpy as np
import pytest

from lightmod.kernels import threads as T


@pytest.fixture
def fresh_policy(monkeypatch):
    """A policy that has not looked yet (module globals restored afterwards)."""
    for name in ("_cap", "_blas_cap", "_last", "_cpus", "_blas_applied"):
        monkeypatch.setattr(T, name, None)
    monkeypatch.setattr(T, "_threads", 1)
    monkeypatch.setattr(T, "_next_look", 0.0)
    yield T
    # leave numba / OpenBLAS as the next refresh decides
    monkeypatch.undo()
    T._next_look = 0.0
    T.refresh()


@pytest.mark.parametrize("cpus, cap, others, expected", [
    (2, 2, 0.0, 2),        # idle machine: every core
    (2, 2, 0.2, 2),        # a little background work
    (2, 2, 0.5, 1),        # half a core taken: a second thread would wait at barriers
    (2, 2, 9.0, 1),        # heavily loaded: one thread
    (8, 8, 3.0, 5),
    (8, 4, 0.0, 4),        # never above the cap
    (2, 2, -0.3, 2),       # measurement noise below zero
    (2, 2, None, 2),       # no load information at all: the cap
])
def test_choice(monkeypatch, cpus, cap, others, expected):
    monkeypatch.setattr(T, "_cpus", frozenset(range(cpus)))
    monkeypatch.setattr(T, "_cap", cap)
    assert T._choose(others) == expected


def test_others_from_busy_time(monkeypatch):
    monkeypatch.setattr(T, "_last", (10.0, 3.0, 100.0))
    # 2 s of wall time, this process used 1.5 CPU-s, the CPUs were busy 3.5 CPU-s in all
    assert T._others(12.0, 4.5, 103.5) == pytest.approx(1.0)
    # without /proc/stat the load average stands in
    monkeypatch.setattr(T, "_load_average", lambda: 2.75)
    assert T._others(12.0, 4.5, None) == pytest.approx(2.0)


def test_refresh_applies_the_choice(fresh_policy):
    import numba
    n = T.refresh()
    assert 1 <= n <= T.cap() <= numba.config.NUMBA_NUM_THREADS
    assert numba.get_num_threads() == n
    if T.blas_threads() is not None:
        assert T.blas_threads() == min(n, T._blas_cap)
    assert T.current() == n


def test_busy_seconds_reads_proc_stat(fresh_policy):
    T.refresh()
    first = T._busy_seconds()
    if first is None:
        pytest.skip("no /proc/stat here")
    np.ones(2_000_000).sum()
    assert T._busy_seconds() >= first >= 0


def test_blas_threads_found_and_settable():
    before = T.blas_threads()
    if before is None:
        pytest.skip("numpy is not linked to OpenBLAS")
    try:
        assert T.set_blas_threads(1)
        assert T.blas_threads() == 1
        a = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
        single = a @ a
        T.set_blas_threads(before)
        np.testing.assert_array_equal(a @ a, single)
    finally:
        T.set_blas_threads(before)


def test_environment_cap_and_bad_value():
    code = ("from lightmod.kernels import threads as T; import numba; n = T.refresh(); "
            "print(n, T.cap(), numba.get_num_threads())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=_env(LIGHTMOD_NUM_THREADS="1"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "1", "1"]
    bad = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=_env(LIGHTMOD_NUM_THREADS="many"))
    assert bad.returncode != 0 and "LIGHTMOD_NUM_THREADS" in bad.stderr


def _env(**extra):
    import os
    env = dict(os.environ)
    env.update(extra)
    return env
