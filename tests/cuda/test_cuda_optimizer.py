"""CUDA optimizer kernels against the CPU ones, and MXNet 1.9.1's golden trajectories replayed
on gpu(0) (run under NUMBA_ENABLE_CUDASIM=1 without a GPU)."""
import importlib.util
import json
import os

import numpy as np
import pytest

import lightmod as mx

if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") in ("", "0") and mx.num_gpus() == 0:
    pytest.skip("needs a GPU or NUMBA_ENABLE_CUDASIM=1", allow_module_level=True)

from numba import cuda  # noqa: E402

from lightmod.kernels import cpu as kcpu  # noqa: E402
from lightmod.kernels import cuda as kcuda  # noqa: E402

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
RNG = np.random.default_rng(0)
SHAPE = (3, 5)


def _arrays(count, dtype=np.float32, positive=()):
    out = []
    for i in range(count):
        a = RNG.uniform(-1, 1, SHAPE)
        out.append((np.abs(a) + 0.1 if i in positive else a).astype(dtype))
    return out


def _run_both(name, arrays, *scalars, rows=None, **kw):
    """Run launcher `name` on copies of `arrays` (host and device); compare every array."""
    host = [a.copy() for a in arrays]
    dev = [cuda.to_device(a.copy()) for a in arrays]
    args_h, args_d = list(host), list(dev)
    if rows is not None:
        kw = dict(kw, rows=rows)
    getattr(kcpu, name)(*args_h, *scalars, **kw)
    getattr(kcuda, name)(*args_d, *scalars, **kw)
    for i, (h, d) in enumerate(zip(host, dev)):
        tol = dict(rtol=1e-3, atol=1e-3) if h.dtype == np.float16 else dict(rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(d.copy_to_host(), h, err_msg="%s: array %d" % (name, i), **tol)


ROWS = np.array([0, 2], dtype=np.int64)


@pytest.mark.parametrize("rows", [None, ROWS])
def test_sgd_family(rows):
    w, g, m, out = _arrays(4)
    _run_both("sgd_update", [w, g, out], 0.1, 0.01, 0.7, 0.3, rows=rows)
    _run_both("sgd_mom_update", [w, g, m, out], 0.1, 0.01, 0.9, 0.7, -1.0, rows=rows)
    _run_both("adam_update", [w, g, m, np.abs(out), out], 0.01, 0.01, 0.9, 0.999, 1e-8, 1.0,
              0.3, rows=rows)
    _run_both("ftrl_update", [w, g, m, np.abs(out), out], 0.1, 0.01, 0.01, 1.0, 1.0, -1.0,
              rows=rows)
    _run_both("sparse_adagrad_update", [w, g, np.abs(m), out], 0.1, 1e-7, 1.0, 0.3,
              rows=ROWS if rows is None else rows)


def test_multi_precision_with_float16():
    w16, g16 = _arrays(2, np.float16)
    w32 = w16.astype(np.float32)
    m = np.zeros(SHAPE, np.float32)
    _run_both("mp_sgd_update", [w16, g16, w32.copy(), w16.copy()], 0.1, 0.01, 1.0, -1.0)
    _run_both("mp_sgd_mom_update", [w16, g16, m, w32.copy(), w16.copy()], 0.1, 0.01, 0.9, 1.0,
              0.3)
    _run_both("mp_nag_mom_update", [w16, g16, m, w32.copy(), w16.copy()], 0.1, 0.01, 0.9, 1.0,
              0.3)
    _run_both("sgd_mom_update", [w16, g16, np.zeros(SHAPE, np.float16), w16.copy()], 0.1, 0.0,
              0.9, 1.0, -1.0)


def test_other_rules():
    w, g, a, b, c, out = _arrays(6, positive=(2, 3, 4))
    _run_both("nag_mom_update", [w, g, a, out], 0.1, 0.01, 0.9, 1.0, 0.3)
    _run_both("rmsprop_update", [w, g, a, out], 0.01, 0.01, 0.9, 1e-8, 1.0, -1.0, 0.5)
    _run_both("rmspropalex_update", [w, g, a * 2, a * 0.1, b, out], 0.01, 0.0, 0.9, 0.9, 1e-8,
              1.0, 0.3, -1.0)
    _run_both("ftml_update", [w, g, a, b, c, out], 0.05, 0.01, 0.6, 0.999, 1e-8, 2, 1.0, 0.3)
    _run_both("signsgd_update", [w, g, out], 0.05, 0.02)
    _run_both("signum_update", [w, g, a, out], 0.05, 0.01, 0.9, 0.01, 1.0, 0.3)
    _run_both("lamb_update_phase1", [w, g, a, b, out], 0.9, 0.999, 1e-6, 3, True, 0.01, 1.0,
              0.3)
    for mp in (False, True):   # r1 and r2 come between the arrays: call directly
        name = "mp_lamb_update_phase2" if mp else "lamb_update_phase2"
        host = [w.copy(), g.copy(), w.astype(np.float16), out.copy()]
        dev = [cuda.to_device(x) for x in host]
        for kset, arrs in ((kcpu, host), (kcuda, dev)):
            if mp:
                getattr(kset, name)(arrs[2], arrs[1], 1.2, 0.7, arrs[0], arrs[2], 0.01, 0.5, 1.0)
            else:
                getattr(kset, name)(arrs[0], arrs[1], 1.2, 0.7, arrs[3], 0.01, 0.5, 1.0)
        for h, d in zip(host, dev):
            np.testing.assert_allclose(d.copy_to_host(), h, rtol=1e-3, atol=1e-6)
    _run_both("adagrad_update", [w, g, a, out], 0.1, 0.01, 1e-7, 1.0, 0.3)
    _run_both("adadelta_update", [w, g, a, b, out], 0.01, 0.9, 1e-5, 0.7, 0.3)
    _run_both("adamax_update", [w, g, a, b, out], 0.02, 0.01, 0.9, 0.999, 1.0, -1.0)
    _run_both("nadam_update", [w, g, a, b, out], 0.01, 0.01, 0.9, 0.999, 1e-8, 0.5, 0.4, 0.002,
              0.45, 0.46, 1.0, 0.3)
    _run_both("dcasgd_update", [w, g, a, b, out], 0.1, 0.01, 0.9, 0.04, 1.0, -1.0)
    _run_both("sgld_update", [w, g, a, out], 0.01, 0.01, 1.0, -1.0)
    _run_both("quantize_2bit", [g, a * 0.1, out], 0.5)


def test_reductions_and_rows():
    x = RNG.uniform(-1, 1, (40, 7)).astype(np.float32)
    x[[3, 17]] = 0
    d = cuda.to_device(x)
    assert float(kcuda.opt_sum_sq(d)) == pytest.approx(float(np.sum(x.astype(np.float64) ** 2)),
                                                       rel=1e-6)
    assert float(kcuda.opt_l2_norm(d)) == pytest.approx(float(kcpu.opt_l2_norm(x)), rel=1e-6)
    np.testing.assert_array_equal(kcuda.opt_nonzero_rows(d), kcpu.opt_nonzero_rows(x))


# ---------------------------------------------------------------------------------------------
# MXNet's golden trajectories, replayed with the weights on gpu(0)
# ---------------------------------------------------------------------------------------------
GOLDEN = json.load(open(os.path.join(FIX, "optimizer_golden.json")))
ARRAYS = np.load(os.path.join(FIX, "optimizer_golden.npz"))
_spec = importlib.util.spec_from_file_location("make_optimizer_golden",
                                               os.path.join(FIX, "make_optimizer_golden.py"))
MAKER = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(MAKER)
TOL = {"float16": dict(rtol=2e-3, atol=2e-3), "float32": dict(rtol=2e-5, atol=2e-6),
       "float64": dict(rtol=1e-6, atol=1e-7)}
CASES = [c for c in GOLDEN["cases"] if c["name"] in (
    "sgd_mom_clip_wd", "sgd_fp16_mp", "sgd_rsp_lazy", "nag_mom", "adam", "adam_rsp_lazy",
    "rmsprop_centered", "lamb", "lars_list", "ftml", "adadelta", "nadam", "ftrl_rsp_weight")]


@pytest.mark.parametrize("c", CASES, ids=[c["name"] for c in CASES])
def test_golden_trajectory_on_gpu(c):
    n = len(GOLDEN["shapes"])
    weights = [ARRAYS["%s/w%d/init" % (c["name"], i)] for i in range(n)]
    grads = [[ARRAYS["%s/g%d/step%d" % (c["name"], i, t)] for i in range(n)]
             for t in range(c["steps"])]
    with mx.gpu(0):
        traj, _, _ = MAKER.run_case(mx, c, weights, grads)
    for t, step in enumerate(traj):
        for i, w in enumerate(step):
            np.testing.assert_allclose(w, ARRAYS["%s/w%d/step%d" % (c["name"], i, t)],
                                       err_msg="%s: weight %d step %d" % (c["name"], i, t),
                                       **TOL[c["dtype"]])
