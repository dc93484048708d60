"""CUDA kernels of the fused RNN operator (and reverse) against the CPU kernels, through the
operator declarations (tiny shapes; run under NUMBA_ENABLE_CUDASIM=1 in its own pytest process:
``NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/cuda``)."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ophelpers as oh  # noqa: E402

from lightmod.kernels import cuda_support  # noqa: E402
from lightmod.operator.rnn_op import param_size  # noqa: E402

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not (cuda_support.simulator_enabled()
                                      or cuda_support.num_gpus() > 0),
                                 reason="needs a GPU or NUMBA_ENABLE_CUDASIM=1")]


def rnn_inputs(mode, layers, bi, seq=3, batch=2, width=3, hidden=2, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    dirs = 2 if bi else 1
    ins = [rng.standard_normal((seq, batch, width)),
           rng.standard_normal(param_size(mode, layers, bi, width, hidden)) * 0.5,
           rng.standard_normal((layers * dirs, batch, hidden)) * 0.5]
    if mode == "lstm":
        ins.append(rng.standard_normal((layers * dirs, batch, hidden)) * 0.5)
    return [a.astype(dtype) for a in ins]


def compare(name, attrs, inputs, req=None, init=None, seed=None, is_train=True, rtol=1e-10,
            atol=1e-12):
    """Forward and backward on both kernel sets; outputs and gradients must agree."""
    import lightmod.random as lrandom
    results = {}
    for device in ("cpu", "cuda"):
        if seed is not None:
            lrandom.seed(seed)
        outs, _, op, p = oh.forward(name, attrs, inputs, is_train=is_train, device=device)
        heads = [np.random.default_rng(7).standard_normal(o.shape).astype(o.dtype)
                 for o in outs[:op.num_visible_outputs(p)]]
        if seed is not None:
            lrandom.seed(seed)
        grads = oh.backward(name, attrs, inputs, heads, req=req, is_train=is_train,
                            device=device, init_grads=init)
        results[device] = (outs, grads)
    (c_outs, c_grads), (g_outs, g_grads) = results["cpu"], results["cuda"]
    for i, (a, b) in enumerate(zip(c_outs, g_outs)):
        np.testing.assert_allclose(b, a, rtol=rtol, atol=atol, err_msg="%s output %d"
                                   % (name, i))
    for i, (a, b) in enumerate(zip(c_grads, g_grads)):
        if a is None:
            assert b is None
        else:
            np.testing.assert_allclose(b, a, rtol=rtol, atol=atol, err_msg="%s grad %d"
                                       % (name, i))


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_tanh", "rnn_relu"])
def test_rnn_two_layers_bidirectional(mode):
    attrs = {"state_size": 2, "num_layers": 2, "mode": mode, "bidirectional": True,
             "state_outputs": True}
    compare("RNN", attrs, rnn_inputs(mode, 2, True))


def test_rnn_one_layer_float32_and_grad_add():
    attrs = {"state_size": 3, "num_layers": 1, "mode": "lstm"}
    ins = rnn_inputs("lstm", 1, False, seq=4, hidden=3, dtype=np.float32)
    compare("RNN", attrs, ins, rtol=1e-5, atol=1e-6)
    compare("RNN", attrs, ins, req=["add", "add", "null", "write"],
            init=[np.ones_like(ins[0]), np.ones_like(ins[1]), None, None], rtol=1e-5,
            atol=1e-6)


def test_rnn_dropout_between_layers():
    attrs = {"state_size": 2, "num_layers": 3, "mode": "gru", "p": 0.5}
    compare("RNN", attrs, rnn_inputs("gru", 3, False), seed=5)


@pytest.mark.parametrize("axis", ["1", "(0, 2)"])
def test_reverse(axis):
    x = np.random.default_rng(3).standard_normal((2, 3, 4))
    compare("reverse", {"axis": axis}, [x])
    compare("reverse", {"axis": axis}, [x], req=["add"], init=[np.ones_like(x)])
