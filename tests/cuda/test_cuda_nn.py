"""CUDA kernels of the nn and loss operators against the CPU kernels, through the operator
declarations (tiny shapes; run under NUMBA_ENABLE_CUDASIM=1 in its own pytest process:
``NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/cuda``).
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ophelpers as oh  # noqa: E402

from lightmod.kernels import cuda_support  # noqa: E402

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not (cuda_support.simulator_enabled()
                                      or cuda_support.num_gpus() > 0),
                                 reason="needs a GPU or NUMBA_ENABLE_CUDASIM=1")]

RNG = np.random.default_rng(2024)


def randn(*shape):
    return RNG.standard_normal(shape)


def compare(name, attrs, inputs, req=None, is_train=True, seed=None, init=None, rtol=1e-10):
    """Forward and backward on both kernel sets; outputs and gradients must agree."""
    import lightmod.random as lrandom
    results = {}
    for device in ("cpu", "cuda"):
        if seed is not None:
            lrandom.seed(seed)
        outs, _, op, p = oh.forward(name, attrs, inputs, is_train=is_train, device=device)
        heads = [np.random.default_rng(7).standard_normal(o.shape)
                 for o in outs[:op.num_visible_outputs(p)]]
        if seed is not None:
            lrandom.seed(seed)
        grads = oh.backward(name, attrs, inputs, heads, req=req, is_train=is_train,
                            device=device, init_grads=init)
        results[device] = (outs, grads)
    (c_outs, c_grads), (g_outs, g_grads) = results["cpu"], results["cuda"]
    for i, (a, b) in enumerate(zip(c_outs, g_outs)):
        np.testing.assert_allclose(b, a, rtol=rtol, atol=1e-12, err_msg="%s output %d"
                                   % (name, i))
    for i, (a, b) in enumerate(zip(c_grads, g_grads)):
        if a is None:
            assert b is None
        else:
            np.testing.assert_allclose(b, a, rtol=rtol, atol=1e-12, err_msg="%s grad %d"
                                       % (name, i))


@pytest.mark.parametrize("attrs,shape", [
    ({"num_hidden": 3}, (4, 5)),
    ({"num_hidden": 17}, (3, 2, 10)),                    # more than one GEMM tile
    ({"num_hidden": 2, "flatten": False}, (2, 3, 4)),
    ({"num_hidden": 2, "no_bias": True}, (5,)),
])
def test_fully_connected(attrs, shape):
    x = randn(*shape)
    k_in = (int(np.prod(shape[1:])) if len(shape) > 1 else 1) if attrs.get("flatten", True) \
        else shape[-1]
    inputs = [x, randn(attrs["num_hidden"], k_in)]
    if not attrs.get("no_bias"):
        inputs.append(randn(attrs["num_hidden"]))
    compare("FullyConnected", attrs, inputs)
    n = len(inputs)
    compare("FullyConnected", attrs, inputs, req=["add"] * n,
            init=[np.ones_like(v) for v in inputs])


def test_fully_connected_float32():
    x, w, b = (randn(3, 20).astype(np.float32), randn(18, 20).astype(np.float32),
               randn(18).astype(np.float32))
    compare("FullyConnected", {"num_hidden": 18}, [x, w, b], rtol=1e-5)


@pytest.mark.parametrize("act", ["relu", "sigmoid", "tanh", "softrelu", "softsign"])
def test_activation(act):
    x = randn(3, 7) * 3
    compare("Activation", {"act_type": act}, [x])
    compare("Activation", {"act_type": act}, [x], req=["add"], init=[np.ones_like(x)])


@pytest.mark.parametrize("act", ["leaky", "elu", "selu", "gelu"])
def test_leaky_relu(act):
    compare("LeakyReLU", {"act_type": act, "slope": 0.3}, [randn(2, 3, 4)])


def test_prelu_and_rrelu():
    x = randn(3, 4, 5)
    compare("LeakyReLU", {"act_type": "prelu"}, [x, randn(4)])
    compare("LeakyReLU", {"act_type": "prelu"}, [x, randn(1)], req=["add", "add"],
            init=[np.ones_like(x), np.ones(1)])
    compare("LeakyReLU", {"act_type": "prelu"}, [x, randn(4)], req=["null", "write"])
    # the simulator computes slope = lower + u*width in float32 (u is float32, NEP 50)
    compare("LeakyReLU", {"act_type": "rrelu"}, [x], seed=3, rtol=1e-6)
    compare("LeakyReLU", {"act_type": "rrelu"}, [x], is_train=False)


@pytest.mark.parametrize("attrs", [{"p": 0.4}, {"p": 0.5, "axes": "(1,)"},
                                   {"p": 0.3, "mode": "always"}])
def test_dropout(attrs):
    compare("Dropout", attrs, [randn(4, 5, 3)], seed=11)
    compare("Dropout", attrs, [randn(4, 5, 3)], seed=11, is_train=False)


def test_embedding():
    idx = np.array([[0, 3.7, -2], [9, 1, 1]])
    weight = randn(4, 3)
    compare("Embedding", {"input_dim": 4, "output_dim": 3}, [idx, weight], req=["null", "write"])
    compare("Embedding", {"input_dim": 4, "output_dim": 3}, [idx, weight], req=["null", "add"],
            init=[None, np.ones_like(weight)])


@pytest.mark.parametrize("name,attrs,shape", [
    ("softmax", {}, (3, 5)),
    ("softmax", {"axis": 1, "temperature": 2.0}, (2, 40, 3)),     # rows longer than a block
    ("log_softmax", {"axis": 0}, (4, 3)),
    ("SoftmaxActivation", {"mode": "channel"}, (2, 3, 4)),
    ("SoftmaxActivation", {}, (3, 4)),
])
def test_softmax_family(name, attrs, shape):
    compare(name, attrs, [randn(*shape)])


def test_softmax_use_length():
    length = np.array([[1, 4, 0], [2, 9, -1]], np.float64)
    compare("softmax", {"axis": 1, "use_length": True}, [randn(2, 4, 3), length])


@pytest.mark.parametrize("attrs,shape,label", [
    ({}, (4, 5), np.array([0, 4, -1, 7.0])),
    ({"normalization": "valid", "use_ignore": True, "smooth_alpha": 0.1}, (4, 5),
     np.array([0, 2, -1, 3.0])),
    ({"multi_output": True, "normalization": "batch"}, (2, 3, 4),
     np.array([[0, 1, 2, -1], [2, 2, 5, 0.0]])),
    ({"preserve_shape": True, "out_grad": True}, (2, 3, 4), np.array([[0, 1, 3], [1, 2, 0.0]])),
    ({"grad_scale": 0.5}, (2, 3), np.abs(randn(2, 3))),            # probabilities as label
])
def test_softmax_output(attrs, shape, label):
    compare("SoftmaxOutput", attrs, [randn(*shape), label])


@pytest.mark.parametrize("name", ["LinearRegressionOutput", "LogisticRegressionOutput",
                                  "MAERegressionOutput"])
def test_regression(name):
    compare(name, {"grad_scale": 2.0}, [randn(4, 3), randn(4, 3)])


@pytest.mark.parametrize("name,attrs", [
    ("MakeLoss", {"normalization": "valid", "valid_thresh": 0.1}),
    ("MakeLoss", {"normalization": "batch"}),
    ("make_loss", {}), ("BlockGrad", {}), ("smooth_l1", {"scalar": 2.0}),
])
def test_loss_helpers(name, attrs):
    x = randn(4, 3)
    compare(name, attrs, [x])
    compare(name, attrs, [x], req=["add"], init=[np.ones_like(x)])


def test_softmax_cross_entropy():
    compare("softmax_cross_entropy", {}, [randn(5, 4), np.array([0, 3, 1, 2, 9.0])],
            req=["write", "null"])
