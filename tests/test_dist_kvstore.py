"""The MPI kvstore (dist_sync): worker scripts in tests/dist/ are launched with
``mpiexec -n 2`` (skipped only when mpi4py / mpiexec are not installed: the 'mpi' extra).

* kvstore operations across 2 workers (init from rank 0, sums, optimizer, states, 2-bit
  compression with per-worker residuals, fit hooks) checked against numpy in the workers,
  also with values on gpu(0) (CUDA simulator);
* 2 workers x batch b give the parameters of 1 worker x batch 2b (float32 tolerance), and
  the same bits on both ranks; fit's callbacks run on rank 0 only;
* a rank that dies or hangs makes the job end with an error within the timeout, and the last
  complete checkpoint loads;
* without mpiexec a script is one worker; dist_async and a missing mpi4py are MXNetErrors.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIST = os.path.join(ROOT, "tests", "dist")
MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
try:
    import mpi4py  # noqa: F401  (the package only: MPI itself is not started here)
    HAVE_MPI4PY = True
except ImportError:
    HAVE_MPI4PY = False

needs_mpi = pytest.mark.skipif(not HAVE_MPI4PY or MPIEXEC is None,
                               reason="the 'mpi' extra (mpi4py, mpich) is not installed")


def run(cmd, timeout=120, **env_changes):
    """Run ``cmd`` in its own process group (killed whole on timeout); returns
    (returncode, output, seconds)."""
    env = dict(os.environ)
    env.pop("LIGHTMOD_DIST_TIMEOUT", None)
    env.update(env_changes)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail("%s did not finish within %d s:\n%s" % (cmd, timeout, out[-3000:]))
    return proc.returncode, out, time.monotonic() - start


def mpiexec(n, script, *args, **kw):
    # '-launcher fork': start the local ranks directly (no ssh needed inside containers)
    cmd = [MPIEXEC, "-launcher", "fork", "-n", str(n), sys.executable] + [script] + list(args)
    return run(cmd, **kw)


def python(script, *args, **kw):
    return run([sys.executable, script] + list(args), **kw)


# ---------------------------------------------------------------------------------------------
# kvstore operations
# ---------------------------------------------------------------------------------------------
@needs_mpi
def test_kvstore_operations_across_two_workers(tmp_path):
    rc, out, _ = mpiexec(2, os.path.join(DIST, "kv_ops.py"), str(tmp_path))
    assert rc == 0, out[-4000:]
    assert (tmp_path / "rank0.ok").exists() and (tmp_path / "rank1.ok").exists(), out[-4000:]
    r0, r1 = np.load(tmp_path / "rank0.npz"), np.load(tmp_path / "rank1.npz")
    assert sorted(r0.files) == sorted(r1.files)
    for name in r0.files:
        np.testing.assert_array_equal(r0[name], r1[name], err_msg=name)


@needs_mpi
def test_kvstore_operations_single_worker_without_mpiexec(tmp_path):
    rc, out, _ = python(os.path.join(DIST, "kv_ops.py"), str(tmp_path))
    assert rc == 0, out[-4000:]
    assert (tmp_path / "rank0.ok").read_text() == "0 of 1\n"


@needs_mpi
def test_device_store_keeps_values_on_the_gpu(tmp_path):
    # gpu(0) through numba's CUDA simulator: device-side sums and updates, host-side allreduce
    rc, out, _ = mpiexec(2, os.path.join(DIST, "kv_gpu.py"), str(tmp_path),
                         NUMBA_ENABLE_CUDASIM="1")
    assert rc == 0, out[-4000:]
    assert (tmp_path / "rank0.ok").exists() and (tmp_path / "rank1.ok").exists(), out[-4000:]


# ---------------------------------------------------------------------------------------------
# Module training: 2 workers x b == 1 worker x 2b
# ---------------------------------------------------------------------------------------------
@needs_mpi
def test_two_workers_match_one_worker_with_twice_the_batch(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    script = os.path.join(DIST, "train_mlp.py")
    rc, out, _ = python(script, str(one), "--batch", "16")
    assert rc == 0, out[-4000:]
    # each worker also splits its batch over two CPU contexts: local sum, then allreduce
    rc, out, _ = mpiexec(2, script, str(two), "--batch", "8", "--devices", "2")
    assert rc == 0, out[-4000:]

    ref = np.load(one / "rank0.npz")
    r0, r1 = np.load(two / "rank0.npz"), np.load(two / "rank1.npz")
    assert sorted(ref.files) == sorted(r0.files) == sorted(r1.files)
    assert any(name.startswith("steps_") for name in ref.files)
    for name in ref.files:
        # the same bits on every worker (no re-broadcast happened before the manual steps)
        np.testing.assert_array_equal(r0[name], r1[name], err_msg=name)
        np.testing.assert_allclose(r0[name], ref[name], rtol=1e-5, atol=1e-6, err_msg=name)

    info = [json.loads((two / ("rank%d.json" % r)).read_text()) for r in range(2)]
    assert [(i["rank"], i["workers"]) for i in info] == [(0, 2), (1, 2)]
    # fit ran 2 epochs of 8 batches; callbacks only on rank 0
    assert (info[0]["epoch_end"], info[0]["batch_end"]) == (2, 16)
    assert (info[1]["epoch_end"], info[1]["batch_end"]) == (0, 0)
    single = json.loads((one / "rank0.json").read_text())
    assert (single["rank"], single["workers"], single["epoch_end"]) == (0, 1, 2)


# ---------------------------------------------------------------------------------------------
# faults
# ---------------------------------------------------------------------------------------------
def check_last_checkpoint_loads(out_dir):
    prefix = os.path.join(str(out_dir), "mlp")
    epochs = sorted(int(f[len("mlp-"):-len(".params")]) for f in os.listdir(out_dir)
                    if f.startswith("mlp-") and f.endswith(".params"))
    assert epochs, os.listdir(out_dir)
    last = epochs[-1]
    assert 1 <= last <= 3, epochs   # rank 1 fails in epoch 3: the job never reaches epoch 4
    sym, arg, aux = mx.model.load_checkpoint(prefix, last)
    assert sorted(arg) == ["fc_bias", "fc_weight"] and arg["fc_weight"].shape == (2, 6)
    assert np.all(np.isfinite(arg["fc_weight"].asnumpy()))
    mod = mx.mod.Module.load(prefix, last, load_optimizer_states=True)
    mod.bind(data_shapes=[("data", (8, 6))], label_shapes=[("softmax_label", (8,))])
    mod.init_optimizer(optimizer="sgd")
    assert sym.list_arguments() == ["data", "fc_weight", "fc_bias", "softmax_label"]


@needs_mpi
def test_a_dying_rank_ends_the_job_with_an_error(tmp_path):
    rc, out, seconds = mpiexec(2, os.path.join(DIST, "fault.py"), str(tmp_path),
                               "--mode", "die", LIGHTMOD_DIST_TIMEOUT="20")
    assert rc != 0, out[-4000:]
    assert not list(tmp_path.glob("finished.*")), out[-4000:]
    assert seconds < 90, seconds
    check_last_checkpoint_loads(tmp_path)


@needs_mpi
def test_a_hanging_rank_makes_the_others_time_out(tmp_path):
    rc, out, seconds = mpiexec(2, os.path.join(DIST, "fault.py"), str(tmp_path),
                               "--mode", "hang", LIGHTMOD_DIST_TIMEOUT="3")
    assert rc != 0, out[-4000:]
    assert "MXNetError" in out and "waited 3 s" in out and "LIGHTMOD_DIST_TIMEOUT" in out, \
        out[-4000:]
    assert not list(tmp_path.glob("finished.*")), out[-4000:]
    assert seconds < 90, seconds
    check_last_checkpoint_loads(tmp_path)


# ---------------------------------------------------------------------------------------------
# the example
# ---------------------------------------------------------------------------------------------
@needs_mpi
def test_dist_train_example_learns_on_two_workers(tmp_path):
    prefix = str(tmp_path / "digits")
    rc, out, _ = mpiexec(2, os.path.join(ROOT, "examples", "dist_train.py"),
                         "--kv-store", "dist_sync", "--epochs", "8", "--min-accuracy", "0.93",
                         "--model-prefix", prefix, timeout=180)
    assert rc == 0, out[-4000:]
    assert "validation accuracy" in out and "(2 workers)" in out, out[-2000:]
    # progress and checkpoints come from rank 0 only
    assert "[worker 1/2]" not in out, out[-2000:]
    assert os.path.exists(prefix + "-0008.params")


# ---------------------------------------------------------------------------------------------
# errors (in this process: they are raised before MPI starts)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["dist_async", "dist_device_async", "DIST_ASYNC"])
def test_dist_async_is_refused_with_a_reason(name):
    with pytest.raises(MXNetError, match="dist_sync") as err:
        mx.kv.create(name)
    assert "parameter server" in str(err.value) and "mpiexec" in str(err.value)


def test_missing_mpi4py_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.delitem(sys.modules, "mpi4py.MPI", raising=False)
    with pytest.raises(MXNetError, match=r"pip install 'lightmod\[mpi\]'"):
        mx.kv.create("dist_sync")


@pytest.mark.parametrize("value", ["0", "-5", "soon"])
def test_bad_timeout_setting(monkeypatch, value):
    monkeypatch.setenv("LIGHTMOD_DIST_TIMEOUT", value)
    with pytest.raises(MXNetError, match="LIGHTMOD_DIST_TIMEOUT"):
        mx.kv.create("dist_sync")


def test_dist_types_are_registered_plugins():
    registry = mx.kv.KVStoreBase.kv_registry
    for name in ("dist_sync", "dist_device_sync", "dist_sync_device", "dist_async"):
        assert registry[name].__name__ == "KVStoreDist"


def test_two_bit_packing_round_trip():
    from lightmod.kvstore.dist import _pack_2bit, _unpack_2bit_counts
    rng = np.random.default_rng(3)
    for size in (1, 3, 4, 5, 17):
        rows = [rng.choice([-0.5, 0.0, 0.5], size=size).astype(np.float32) for _ in range(3)]
        packed = np.stack([_pack_2bit(r) for r in rows])
        assert packed.shape == (3, (size + 3) // 4)
        counts = _unpack_2bit_counts(packed, size)
        np.testing.assert_array_equal(counts, sum(np.sign(r) for r in rows).astype(np.int32))
