"""The training forward's fused layers on gpu(0) (run under NUMBA_ENABLE_CUDASIM=1 or on a
GPU): a Convolution / FullyConnected layer and its Activation as one step give the outputs and
gradients of the unfused walk, and the same values as the CPU."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from training_fusion_cases import ACTS, conv_net, float32_atol, mlp, run

import lightmod as mx
from lightmod.kernels import cuda_support

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not (cuda_support.simulator_enabled()
                                      or cuda_support.num_gpus() > 0),
                                 reason="needs a GPU or NUMBA_ENABLE_CUDASIM=1")]


def _compare(sym, shape, seed):
    monkeypatch = pytest.MonkeyPatch()
    try:
        outs, grads, fused = run(sym, shape, seed, monkeypatch, True, ctx=mx.gpu(0))
        ref_outs, ref_grads, _ = run(sym, shape, seed, monkeypatch, False, ctx=mx.gpu(0))
        cpu_outs, cpu_grads, _ = run(sym, shape, seed, monkeypatch, True)
    finally:
        monkeypatch.undo()
    for got, want, cpu in zip(outs, ref_outs, cpu_outs):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=float32_atol(want))
        np.testing.assert_allclose(got, cpu, rtol=1e-4, atol=1e-4)
    for name in grads:
        np.testing.assert_allclose(grads[name], ref_grads[name], rtol=2e-5,
                                   atol=float32_atol(ref_grads[name]),
                                   err_msg=name)
        np.testing.assert_allclose(grads[name], cpu_grads[name], rtol=1e-4, atol=1e-4,
                                   err_msg=name)
    return fused


@settings(max_examples=6, deadline=None)
@given(layers=st.lists(st.tuples(st.integers(1, 6), st.booleans(), st.sampled_from(ACTS)),
                       min_size=1, max_size=2),
       batch=st.integers(1, 5), seed=st.integers(0, 2 ** 16))
def test_fused_fully_connected_training_on_gpu(layers, batch, seed):
    fused = _compare(mlp(layers, True), (batch, 3, 2), seed)
    assert fused == sum(act not in (None, "softsign") for _, _, act in layers)


@pytest.mark.parametrize("act", ["relu", "tanh"])
def test_fused_convolution_training_on_gpu(act):
    layers = [(4, 3, 1, 1, False, act), (2, 1, 2, 2, True, "sigmoid")]
    assert _compare(conv_net(layers), (2, 4, 5, 5), 3) == 2
