"""Element-wise fusion on a GPU context (under NUMBA_ENABLE_CUDASIM=1): the generated CUDA
kernels give what the unfused CUDA kernels give, on drawn chains and on the RNN cells; and the
generated CUDA and CPU kernels of one spec agree."""
import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import test_fusion as tf  # noqa: E402

import lightmod as mx  # noqa: E402
from lightmod import fusion  # noqa: E402
from lightmod.kernels import cuda_support  # noqa: E402

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not (cuda_support.simulator_enabled()
                                      or cuda_support.num_gpus() > 0),
                                 reason="needs a GPU or NUMBA_ENABLE_CUDASIM=1")]


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(tf.chains(), st.integers(0, 2 ** 31 - 1))
def test_drawn_chains_fused_equal_unfused_on_gpu(monkeypatch, case, seed):
    sym, shapes, grad_req = case
    tf.check_fused_matches(sym, shapes, monkeypatch, seed, grad_req, expect_fused=False,
                           ctx=mx.gpu(0))


def test_chain_runs_fused_both_ways_on_gpu(monkeypatch):
    x, o = mx.sym.Variable("x"), mx.sym.Variable("o")
    y = mx.sym.sigmoid(mx.sym.tanh(x) * 0.9 + o) * o - x
    ex = tf.check_fused_matches(mx.sym.MakeLoss(y), {"x": (4, 6), "o": (4, 6)}, monkeypatch,
                                ctx=mx.gpu(0))
    # on a GPU forward is always fused (no SIMD library to keep per operator)
    assert [type(s.op).__name__ for s in ex._fwd] == ["FusedGroup", "MakeLoss"]


@pytest.mark.parametrize("cell_type", ["lstm", "gru"])
def test_rnn_cells_fused_equal_unfused_on_gpu(monkeypatch, cell_type):
    ex = tf.check_fused_matches(tf.rnn_stack_symbol(cell_type, 2, 3), {"data": (2, 2, 3)},
                                monkeypatch, low=-0.5, high=0.5, ctx=mx.gpu(0))
    assert any(isinstance(s.op, fusion.FusedGroup) for s in ex._bwd)


def test_cuda_and_cpu_kernels_of_one_spec_agree():
    from lightmod.kernels import cpu, cuda
    from lightmod.kernels.scalar import BINARY_CODES, UNARY_CODES
    from lightmod.kernels.scalar_nn import ACTIVATIONS
    # values 0, 1: leaves; 2 = tanh(v0); 3 = v2 * v1; 4 = sigmoid(v3); 5 = 0.5 - v4
    nodes = (("unary", UNARY_CODES["tanh"], (0,), False),
             ("binary", BINARY_CODES["mul"], (2, 1), False),
             ("act", ACTIVATIONS["sigmoid"], (3,), False),
             ("scalar", (BINARY_CODES["sub"], 0.5, True), (4,), False))
    spec_f = ("float32", 2, nodes, (), (0, 0))
    spec_b = ("float32", 2, nodes, (5, 3), (1, 2))
    rng = np.random.RandomState(3)
    rows, cols = 3, 7
    leaves = [rng.uniform(-1, 1, (rows, cols)).astype(np.float32) for _ in range(2)]
    results = {}
    for name, kset in (("cpu", cpu), ("cuda", cuda)):
        dev = (lambda a: a) if name == "cpu" else cuda.from_host
        host = (lambda a: a) if name == "cpu" else (lambda a: a.copy_to_host())
        vals = [dev(a.copy()) for a in leaves] + [dev(np.zeros((rows, cols), np.float32))
                                                  for _ in nodes]
        fwd, _ = kset.fused_elemwise(spec_f)
        fwd(rows, cols, *vals)
        go = [dev(np.full((rows, cols), 0.5, np.float32)), dev(np.ones((rows, cols), np.float32))]
        d = [dev(np.zeros((rows, cols), np.float32)), dev(np.ones((rows, cols), np.float32))]
        _, bwd = kset.fused_elemwise(spec_b)
        bwd(rows, cols, *vals, *go, *d)
        results[name] = [host(a) for a in vals + d]
    for a, b in zip(results["cpu"], results["cuda"]):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)
    x, w = leaves
    t = np.tanh(x)
    s = 1 / (1 + np.exp(-(t * w)))
    np.testing.assert_allclose(results["cpu"][5], 0.5 - s, rtol=1e-5, atol=1e-6)
    # gradients arrive on v5 (0.5) and v3 (1); leaf 0 is written, leaf 1 (holding 1) added to
    g3 = -0.5 * s * (1 - s) + 1.0
    np.testing.assert_allclose(results["cpu"][6], g3 * w * (1 - t * t), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(results["cpu"][7], 1.0 + g3 * t, rtol=1e-5, atol=1e-6)
