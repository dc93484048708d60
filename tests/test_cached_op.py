"""mx.nd.CachedOp: a symbol called like one operator, against the same computation done with
NDArray operators; its executors reused, aux states written back, out=, autograd through it
(MXNet's test_cached), and the errors."""
import numpy as np
import pytest

import lightmod as mx
from lightmod import autograd
from lightmod.base import MXNetError


def test_mxnets_cached_op_sequence():
    sym = mx.sym.Convolution(kernel=(3, 3), num_filter=10) + 2
    op = mx.nd.CachedOp(sym)
    assert len(sym.list_inputs()) == 3
    data, weight, bias = mx.nd.ones((3, 4, 10, 10)), mx.nd.ones((10, 4, 3, 3)), mx.nd.ones(10)
    o1 = op(data, weight, bias)
    np.testing.assert_allclose(o1.asnumpy(), 4 * 9 + 1 + 2)
    bias[:] = 2
    o2 = op(data, weight, bias)
    np.testing.assert_allclose(o2.asnumpy(), o1.asnumpy() + 1)
    assert len(op._executors) == 1             # the second call reused the executor
    o2[:] = 0
    assert op(data, weight, bias, out=o2) is o2
    np.testing.assert_allclose(o2.asnumpy(), o1.asnumpy() + 1)

    weight.attach_grad()
    bias.attach_grad()
    with autograd.record():
        shifted = bias + 1
        o = op(data, weight, shifted) * 2
        o.backward(retain_graph=True)
        o.backward()
    # d(sum of 2 * conv)/d(bias) = 2 * batch * 8 * 8 per filter; /d(weight) the same on ones
    np.testing.assert_allclose(bias.grad.asnumpy(), 2 * 3 * 64)
    np.testing.assert_allclose(weight.grad.asnumpy(), 2 * 3 * 64)

    small = op(mx.nd.ones((5, 2, 10, 10)), mx.nd.ones((10, 2, 3, 3)), mx.nd.ones(10))
    assert small.shape == (5, 10, 8, 8) and len(op._executors) == 2


def test_gradients_equal_the_same_operators_recorded_directly():
    rng = np.random.RandomState(0)
    x_val, w_val = rng.uniform(-1, 1, (4, 5)), rng.uniform(-1, 1, (3, 5))
    data, weight = mx.sym.var("data"), mx.sym.var("weight")
    op = mx.nd.CachedOp(mx.sym.tanh(mx.sym.FullyConnected(data, weight, num_hidden=3,
                                                          no_bias=True)))
    grads = []
    for through_op in (True, False):
        x, w = mx.nd.array(x_val), mx.nd.array(w_val)
        w.attach_grad()
        with autograd.record():
            h = op(x, w) if through_op else mx.nd.tanh(
                mx.nd.FullyConnected(x, w, num_hidden=3, no_bias=True))
            loss = (h * h).sum()
        loss.backward()
        grads.append((loss.asnumpy(), w.grad.asnumpy()))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_aux_states_are_written_back_and_several_outputs():
    """BatchNorm updates its moving statistics in backward (MXNet 1.9.1 does the same): a
    recorded call's backward writes them into the arrays given."""
    data = mx.sym.var("data")
    bn = mx.sym.BatchNorm(data, fix_gamma=False, momentum=0.5, name="bn")
    op = mx.nd.CachedOp(mx.sym.Group([bn, data * 2]))
    assert op._inputs[-2:] == ["bn_moving_mean", "bn_moving_var"]
    x = mx.nd.array(np.arange(12.0).reshape(4, 3))
    gamma, beta = mx.nd.ones(3), mx.nd.zeros(3)
    mean, var = mx.nd.zeros(3), mx.nd.ones(3)
    x.attach_grad()
    with autograd.record():
        normed, doubled = op(x, gamma, beta, mean, var)
    np.testing.assert_array_equal(mean.asnumpy(), 0)
    np.testing.assert_allclose(doubled.asnumpy(), 2 * x.asnumpy())
    np.testing.assert_allclose(normed.asnumpy().mean(0), 0, atol=1e-5)
    autograd.backward([normed, doubled])
    np.testing.assert_allclose(mean.asnumpy(), 0.5 * x.asnumpy().mean(0), rtol=1e-6)
    # normalised outputs sum to a constant: only the doubled output passes a gradient
    np.testing.assert_allclose(x.grad.asnumpy(), 2, atol=1e-5)
    outs = [mx.nd.zeros((4, 3)), mx.nd.zeros((4, 3))]
    op(x, gamma, beta, mean, var, out=outs)     # predict mode: the moving statistics
    expected = (x.asnumpy() - mean.asnumpy()) / np.sqrt(var.asnumpy() + 1e-3)
    np.testing.assert_allclose(outs[0].asnumpy(), expected, rtol=1e-5, atol=1e-5)


def test_errors():
    op = mx.nd.CachedOp(mx.sym.var("a") + mx.sym.var("b"))
    with pytest.raises(MXNetError, match=r"CachedOp expects 2 inputs \(a, b\), got 1"):
        op(mx.nd.ones(2))
    with pytest.raises(TypeError, match="input 'b' must be an NDArray"):
        op(mx.nd.ones(2), [1, 2])
    with pytest.raises(TypeError, match="unexpected keyword arguments"):
        op(mx.nd.ones(2), mx.nd.ones(2), bogus=1)
    with pytest.raises(MXNetError, match="out= has 2 arrays for 1 outputs"):
        op(mx.nd.ones(2), mx.nd.ones(2), out=[mx.nd.ones(2), mx.nd.ones(2)])
