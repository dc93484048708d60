"""kernels/cpu/gemm.py: products cut into fixed parts that the calling thread and lightmod's
worker threads share.

The properties that matter: the result is the product (against a float64 numpy reference);
its bits depend only on the shapes and the fixed thread count, never on which thread computed
which part or on how many Python threads call at once; OpenBLAS runs at one thread while parts
run and at the policy's count again after; idle workers sleep; forked children and interpreter
exit work.
"""
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from lightmod.kernels import threads
from lightmod.kernels.cpu import gemm

pytestmark = pytest.mark.skipif(not gemm.available(), reason="needs Linux and numpy's OpenBLAS")


def _operands(rng, m, n, k, trans_a, trans_b, dtype):
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(dtype)
    return a, b


def _reference(a, b, trans_a, trans_b):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return (a64.T if trans_a else a64) @ (b64.T if trans_b else b64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,n,k", [(128, 512, 784), (512, 784, 128), (33, 1000, 70),
                                   (1000, 33, 70), (64, 64, 260), (17, 300, 600)])
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("accumulate", [False, True])
def test_product_matches_reference(dtype, m, n, k, trans_a, trans_b, accumulate):
    if threads.cap() < 2:
        pytest.skip("one thread: every product is left to numpy")
    rng = np.random.RandomState(m + n + k)
    a, b = _operands(rng, m, n, k, trans_a, trans_b, dtype)
    start = rng.standard_normal((m, n)).astype(dtype)
    out = start.copy()
    assert gemm.product(a, b, out, trans_a, trans_b, accumulate)
    expected = _reference(a, b, trans_a, trans_b) + (start if accumulate else 0)
    tol = 2e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(out, expected, rtol=tol, atol=tol * np.sqrt(k) * 4)


def test_layouts_it_cannot_take_are_left_to_the_caller():
    a = np.ones((8, 16), np.float32)
    out = np.zeros((8, 8), np.float32)
    assert not gemm.product(a[:, ::2], a[:, ::2], out, False, True)     # strided
    assert not gemm.product(a.astype(np.float16), a.astype(np.float16),
                            out.astype(np.float16), False, True)       # dtype
    assert not gemm.product(a, a.astype(np.float64), out, False, True)  # mixed dtypes
    assert (out == 0).all()


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match=r"\(8, 16\) @ \(8, 15\)\.T do not give \(8, 8\)"):
        gemm.product(np.ones((8, 16), np.float32), np.ones((8, 15), np.float32),
                     np.zeros((8, 8), np.float32), False, True)


def test_one_part_products_are_left_to_numpy():
    """Small products (and empty ones) are not worth waking a worker: False, nothing done."""
    out = np.full((3, 4), 7.0, np.float32)
    assert not gemm.product(np.ones((3, 0), np.float32), np.ones((0, 4), np.float32), out)
    assert not gemm.product(np.ones((64, 64), np.float32), np.ones((64, 64), np.float32),
                            np.zeros((64, 64), np.float32))
    assert not gemm.product(np.ones((0, 5000), np.float32), np.ones((5000, 400), np.float32),
                            np.zeros((0, 400), np.float32))
    assert (out == 7).all()


@pytest.mark.parametrize("total", [1, 15, 16, 17, 100, 512, 784, 1000])
@pytest.mark.parametrize("count", [2, 3, 4, 7])
def test_plan_cuts_whole_dimension_at_multiples_of_16(total, count):
    parts = min(count, -(-total // 16))
    bounds = [gemm._bound(total, parts, p) for p in range(parts + 1)]
    assert bounds[0] == 0 and bounds[-1] == total
    assert all(x <= y for x, y in zip(bounds, bounds[1:]))
    assert all(x % 16 == 0 for x in bounds[:-1])
    assert all(y > x for x, y in zip(bounds, bounds[1:]))      # no empty part


def test_plan_is_a_function_of_shape_and_count():
    assert gemm.plan(128, 512, 784, 1) == (1, 0)
    assert gemm.plan(4, 4, 4, 8) == (1, 0)                       # too small to share
    assert gemm.plan(128, 512, 784, 2) == (2, 1)                 # more columns: cut columns
    assert gemm.plan(784, 512, 128, 2) == (2, 0)                 # more rows: cut rows
    assert gemm.plan(40, 4096, 4096, 64) == (64, 1)
    assert gemm.plan(4096, 20, 4096, 64) == (64, 0)
    assert gemm.plan(4096, 20, 4096, 64) == gemm.plan(4096, 20, 4096, 64)


def _serial(a, b, out, trans_a, trans_b, beta, parts, axis):
    """Every part in order on this thread (no team): the reference for the bits."""
    ctrl, coef, sems = np.zeros(gemm._SLEEP + 8, np.int64), np.zeros(gemm._COEF_WORDS), \
        np.zeros(gemm._SEM_WORDS, np.int64)
    s, d = gemm._functions()
    gemm._product(ctrl, coef, sems, 0, s, d, a, b, out, trans_a, trans_b, beta, parts, axis)


@pytest.mark.parametrize("axis", [0, 1])
def test_same_bits_whoever_computes_the_parts(axis):
    rng = np.random.RandomState(1)
    a = rng.standard_normal((300, 500)).astype(np.float32)
    b = rng.standard_normal((400, 500)).astype(np.float32)
    count = threads.cap()
    if count < 2:
        pytest.skip("one thread: there is no team")
    parts = min(count, 3)
    expected = np.empty((300, 400), np.float32)
    _serial(a, b, expected, False, True, 0.0, parts, axis)
    team = gemm._get_team()
    for _ in range(20):
        out = np.empty_like(expected)
        with team.busy:
            gemm._product(team.ctrl, team.coef, team.sems, team.workers, *gemm._functions(),
                          a, b, out, False, True, 0.0, parts, axis)
        np.testing.assert_array_equal(out, expected)


def test_bits_do_not_depend_on_python_threads_calling_at_once():
    """A caller that finds the team busy computes the same parts itself."""
    rng = np.random.RandomState(2)
    pairs = [(rng.standard_normal((128, 784)).astype(np.float32),
              rng.standard_normal((512, 784)).astype(np.float32)) for _ in range(4)]
    alone = []
    for x, w in pairs:
        out = np.empty((128, 512), np.float32)
        assert gemm.product(x, w, out, False, True)
        alone.append(out)
    results = [[] for _ in pairs]
    errors = []

    def run(i):
        try:
            for _ in range(15):
                out = np.empty((128, 512), np.float32)
                gemm.product(pairs[i][0], pairs[i][1], out, False, True)
                results[i].append(out)
        except Exception as exc:        # pragma: no cover - reported below
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(i,)) for i in range(len(pairs))]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert not errors
    for i, outs in enumerate(results):
        assert len(outs) == 15
        for out in outs:
            np.testing.assert_array_equal(out, alone[i])


def test_openblas_runs_one_thread_during_parts_and_the_policy_count_after():
    if threads.blas_threads() is None:
        pytest.skip("numpy's BLAS is not OpenBLAS")
    policy = threads.refresh()
    expected_after = threads.blas_threads()
    a = np.ones((256, 256), np.float32)
    assert gemm.product(a, a, np.empty_like(a))
    assert threads.blas_threads() == expected_after
    threads.hold_blas_single()
    threads.hold_blas_single()
    assert threads.blas_threads() == 1
    assert gemm.product(a, a, np.empty_like(a))
    assert threads.blas_threads() == 1              # still held
    threads.release_blas_single()
    assert threads.blas_threads() == 1
    threads.release_blas_single()
    assert threads.blas_threads() == expected_after
    assert threads.refresh() == policy


def test_serial_regions_hold_openblas_once_per_thread():
    """enter_serial holds OpenBLAS at one thread once per thread, leave_serial releases that
    hold only: a thread made serial without a region (serial_thread, then leave_serial), or a
    region entered twice, leaves the count balanced."""
    if threads.blas_threads() is None:
        pytest.skip("numpy's BLAS is not OpenBLAS")
    threads.refresh()
    policy_blas = threads.blas_threads()
    threads.serial_thread()
    threads.leave_serial()                  # no region was entered: nothing to release
    threads.enter_serial()
    threads.enter_serial()
    assert threads.blas_threads() == 1
    threads.leave_serial()
    assert threads.blas_threads() == policy_blas
    threads.hold_blas_single()
    assert threads.blas_threads() == 1
    threads.release_blas_single()
    threads.release_blas_single()           # one too many: ignored, never below zero
    threads.hold_blas_single()
    threads.release_blas_single()
    assert threads.blas_threads() == policy_blas


_CHILD = r"""
import os, sys, time, numpy as np
from lightmod.kernels.cpu import gemm
rng = np.random.RandomState(0)
x = rng.standard_normal((128, 784)).astype(np.float32)
w = rng.standard_normal((512, 784)).astype(np.float32)
out = np.empty((128, 512), np.float32)
gemm.product(x, w, out, False, True)
pid = os.fork()
if pid == 0:
    child = np.empty_like(out)
    gemm.product(x, w, child, False, True)
    os._exit(0 if np.array_equal(child, out) else 3)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
cpu = time.process_time()
time.sleep(0.3)             # the workers poll for POLL_SECONDS, then sleep
idle = time.process_time() - cpu
assert idle < 0.05, idle
print("done")
"""


def test_forked_child_and_exit_and_idle_workers():
    proc = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                          timeout=120, env={**__import__("os").environ,
                                            "LIGHTMOD_NUM_THREADS": "2"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "done"


def test_a_worker_that_never_runs_delays_nothing():
    """A team whose worker thread the OS never schedules (here: never started): the caller
    claims every part itself, with the same bits."""
    rng = np.random.RandomState(3)
    a = rng.standard_normal((256, 300)).astype(np.float32)
    b = rng.standard_normal((300, 320)).astype(np.float32)
    expected = np.empty((256, 320), np.float32)
    _serial(a, b, expected, False, False, 0.0, 4, 1)
    ctrl, coef = np.zeros(gemm._SLEEP + 8 * 3, np.int64), np.zeros(gemm._COEF_WORDS)
    sems = np.zeros(gemm._SEM_WORDS * 3, np.int64)
    out = np.empty_like(expected)
    start = time.perf_counter()
    gemm._product(ctrl, coef, sems, 3, *gemm._functions(), a, b, out, False, False, 0.0, 4, 1)
    assert time.perf_counter() - start < 1.0
    np.testing.assert_array_equal(out, expected)
    assert ctrl[gemm._DONE] == 4


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("accumulate", [False, True])
def test_batched_product_matches_reference_and_single_matrices(dtype, trans_a, trans_b,
                                                               accumulate):
    if threads.product_threads() < 2:
        pytest.skip("one thread: every product is left to numpy")
    rng = np.random.RandomState(4)
    batch, m, n, k = 7, 64, 96, 40
    a = rng.standard_normal((batch, k, m) if trans_a else (batch, m, k)).astype(dtype)
    b = rng.standard_normal((batch, n, k) if trans_b else (batch, k, n)).astype(dtype)
    start = rng.standard_normal((batch, m, n)).astype(dtype)
    out = start.copy()
    assert gemm.product_batched(a, b, out, trans_a, trans_b, accumulate)
    for i in range(batch):
        expected = _reference(a[i], b[i], trans_a, trans_b) + (start[i] if accumulate else 0)
        tol = 2e-4 if dtype == np.float32 else 1e-10
        np.testing.assert_allclose(out[i], expected, rtol=tol, atol=tol * 30)
        # each matrix is one single-threaded call: the same bits as that call made alone
        alone = start[i].copy()
        _serial(a[i], b[i], alone, trans_a, trans_b, 1.0 if accumulate else 0.0, 1, 0)
        np.testing.assert_array_equal(out[i], alone)


def test_batched_products_the_team_does_not_take():
    a = np.ones((1, 64, 64), np.float32)
    assert not gemm.product_batched(a, a, np.empty_like(a))                 # one matrix
    small = np.ones((4, 8, 8), np.float32)
    assert not gemm.product_batched(small, small, np.empty_like(small))     # too small
    big = np.ones((4, 64, 128), np.float32)
    assert not gemm.product_batched(big[:, :, ::2], big[:, :, ::2],
                                    np.empty((4, 64, 64), np.float32), False, True)
    with pytest.raises(ValueError, match="do not give"):
        gemm.product_batched(big, big, np.empty((4, 64, 64), np.float32))


def test_back_to_back_products_of_other_part_counts_keep_their_bits():
    """Products published one after another with other part counts, axes and batch layouts,
    while the workers may still be looking at the previous one: every result has the bits of
    the same parts computed alone."""
    if threads.cap() < 2:
        pytest.skip("one thread: there is no team")
    rng = np.random.RandomState(5)
    a = rng.standard_normal((96, 200)).astype(np.float32)
    b = rng.standard_normal((200, 160)).astype(np.float32)
    batch_a = rng.standard_normal((5, 40, 30)).astype(np.float32)
    batch_b = rng.standard_normal((5, 30, 50)).astype(np.float32)
    plans = [(3, 0), (2, 1), (5, 1), (1, 0)]
    expected = {}
    for parts, axis in plans:
        out = np.empty((96, 160), np.float32)
        _serial(a, b, out, False, False, 0.0, parts, axis)
        expected[parts, axis] = out
    batch_expected = np.empty((5, 40, 50), np.float32)
    for i in range(5):
        _serial(batch_a[i], batch_b[i], batch_expected[i], False, False, 0.0, 1, 0)
    team = gemm._get_team()
    functions = gemm._functions()
    with team.busy:
        for i in range(600):
            if i % 5 == 4:
                out = np.empty((5, 40, 50), np.float32)
                gemm._product_batched(team.ctrl, team.coef, team.sems, team.workers,
                                      *functions, batch_a, batch_b, out, False, False, 0.0)
                np.testing.assert_array_equal(out, batch_expected)
                continue
            parts, axis = plans[i % len(plans)]
            out = np.empty((96, 160), np.float32)
            gemm._product(team.ctrl, team.coef, team.sems, team.workers, *functions, a, b,
                          out, False, False, 0.0, parts, axis)
            np.testing.assert_array_equal(out, expected[parts, axis])


# --- pairs of independent products (gemm.product_pair) ---------------------------------------
def _fc_gradients(rng, batch, hidden, inputs, dtype):
    """A FullyConnected layer's backward operands: (dy, w, x) and zeroed dx, dw."""
    dy = rng.standard_normal((batch, hidden)).astype(dtype)
    w = rng.standard_normal((hidden, inputs)).astype(dtype)
    x = rng.standard_normal((batch, inputs)).astype(dtype)
    return dy, w, x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(128, 512, 784), (32, 800, 200), (64, 10, 3000)])
@pytest.mark.parametrize("accumulate", [(False, False), (True, False), (False, True)])
def test_pair_matches_reference_and_each_product_alone(dtype, shape, accumulate):
    if threads.product_threads() < 2:
        pytest.skip("one thread: pairs are left to the caller")
    rng = np.random.RandomState(sum(shape))
    batch, hidden, inputs = shape
    dy, w, x = _fc_gradients(rng, batch, hidden, inputs, dtype)
    dx0 = rng.standard_normal((batch, inputs)).astype(dtype)
    dw0 = rng.standard_normal((hidden, inputs)).astype(dtype)
    dx, dw = dx0.copy(), dw0.copy()
    acc_x, acc_w = accumulate
    assert gemm.product_pair((dy, w, dx, False, False, acc_x), (dy, x, dw, True, False, acc_w))
    tol = 2e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(dx, _reference(dy, w, False, False) + (dx0 if acc_x else 0),
                               rtol=tol, atol=tol * 60)
    np.testing.assert_allclose(dw, _reference(dy, x, True, False) + (dw0 if acc_w else 0),
                               rtol=tol, atol=tol * 60)
    # the bits: each product's own parts (half the threads each), computed alone
    plans = gemm.pair_plan((batch, inputs, hidden), (hidden, inputs, batch),
                           threads.product_threads())
    alone_x, alone_w = dx0.copy(), dw0.copy()
    _serial(dy, w, alone_x, False, False, 1.0 if acc_x else 0.0, *plans[0])
    _serial(dy, x, alone_w, True, False, 1.0 if acc_w else 0.0, *plans[1])
    np.testing.assert_array_equal(dx, alone_x)
    np.testing.assert_array_equal(dw, alone_w)


def test_pair_plan_halves_the_threads():
    assert gemm.pair_plan((128, 784, 512), (512, 784, 128), 1) is None
    assert gemm.pair_plan((8, 8, 8), (8, 8, 8), 2) is None                  # too small
    assert gemm.pair_plan((128, 784, 512), (512, 784, 128), 2) == ((1, 0), (1, 0))
    assert gemm.pair_plan((128, 784, 512), (512, 784, 128), 3) == ((1, 0), (1, 0))
    assert gemm.pair_plan((128, 784, 512), (512, 784, 128), 4) == ((2, 1), (2, 1))
    assert gemm.pair_plan((784, 128, 512), (128, 784, 512), 8) == ((4, 0), (4, 1))
    # two products below the threshold each, above it together: one part each
    assert gemm.pair_plan((64, 64, 160), (64, 64, 160), 2) == ((1, 0), (1, 0))


def test_pairs_the_team_does_not_take_are_left_to_the_caller():
    rng = np.random.RandomState(8)
    dy, w, x = _fc_gradients(rng, 128, 512, 784, np.float32)
    dx = np.zeros((128, 784), np.float32)
    dw = np.zeros((512, 784), np.float32)
    assert not gemm.product_pair((dy, w, dx, False, False, False),
                                 (dy.astype(np.float64), x.astype(np.float64),
                                  dw.astype(np.float64), True, False, False))   # two dtypes
    assert not gemm.product_pair((dy, w, dx, False, False, False),
                                 (dy, x[:, ::2], dw[:, ::2], True, False, False))  # strided
    # an output that is the other product's input, or that overlaps the other output
    assert not gemm.product_pair((dy, w, dx, False, False, False),
                                 (dy, dx, dw, True, False, False))
    assert not gemm.product_pair((dy, w, dw[:128], False, False, False),
                                 (dy, x, dw, True, False, False))
    small = np.ones((8, 8), np.float32)
    assert not gemm.product_pair((small, small, np.zeros((8, 8), np.float32), False, False,
                                  False), (small, small, np.zeros((8, 8), np.float32), False,
                                           False, False))
    assert not dx.any() and not dw.any()
    with pytest.raises(ValueError, match=r"product_pair: shapes \(128, 512\) @ \(784, 128\)"):
        gemm.product_pair((dy, w, dx, False, False, False), (dy, x.T.copy(), dw, False, False,
                                                              False))


def test_pair_with_one_thread_is_left_to_the_caller():
    code = ("import numpy as np\nfrom lightmod.kernels.cpu import gemm\n"
            "a = np.ones((128, 784), np.float32); b = np.ones((784, 512), np.float32)\n"
            "o1 = np.zeros((128, 512), np.float32); o2 = np.zeros((128, 512), np.float32)\n"
            "print(gemm.product_pair((a, b, o1, False, False, False),"
            " (a, b, o2, False, False, False)), o1.any())\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**__import__("os").environ,
                                            "LIGHTMOD_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False"]


def test_pairs_and_products_back_to_back_keep_their_bits():
    """Pairs published between single products and with a worker that may still be looking
    at the previous job: every result has the bits of its parts computed alone, and a pair
    whose worker never runs is computed by the caller alone."""
    if threads.cap() < 2:
        pytest.skip("one thread: there is no team")
    rng = np.random.RandomState(9)
    dy, w, x = _fc_gradients(rng, 96, 160, 200, np.float32)
    expected_x, expected_w = np.empty((96, 200), np.float32), np.empty((160, 200), np.float32)
    _serial(dy, w, expected_x, False, False, 0.0, 1, 0)
    _serial(dy, x, expected_w, True, False, 0.0, 2, 1)
    single = np.empty((96, 200), np.float32)
    _serial(dy, w, single, False, False, 0.0, 3, 0)
    team = gemm._get_team()
    functions = gemm._functions()
    with team.busy:
        for i in range(400):
            dx, dw = np.empty_like(expected_x), np.empty_like(expected_w)
            if i % 3 == 2:
                gemm._product(team.ctrl, team.coef, team.sems, team.workers, *functions, dy,
                              w, dx, False, False, 0.0, 3, 0)
                np.testing.assert_array_equal(dx, single)
                continue
            gemm._product_pair(team.ctrl, team.coef, team.sems, team.workers, *functions,
                               dy, w, dx, False, False, 0.0, 1, 0,
                               dy, x, dw, True, False, 0.0, 2, 1)
            np.testing.assert_array_equal(dx, expected_x)
            np.testing.assert_array_equal(dw, expected_w)
    # a team whose worker never started: the caller claims all three parts
    ctrl, coef = np.zeros(gemm._SLEEP + 8 * 2, np.int64), np.zeros(gemm._COEF_WORDS)
    sems = np.zeros(gemm._SEM_WORDS * 2, np.int64)
    dx, dw = np.empty_like(expected_x), np.empty_like(expected_w)
    gemm._product_pair(ctrl, coef, sems, 2, *functions, dy, w, dx, False, False, 0.0, 1, 0,
                       dy, x, dw, True, False, 0.0, 2, 1)
    np.testing.assert_array_equal(dx, expected_x)
    np.testing.assert_array_equal(dw, expected_w)
    assert ctrl[gemm._DONE] == 3
