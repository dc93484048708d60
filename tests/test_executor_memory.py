"""The executor's memory plan: an executor without a backward pass recycles intermediate
buffers, and nothing is computed or kept for gradients that BlockGrad makes zero."""
import re

import numpy as np
import pytest

import lightmod as mx
from lightmod import fusion


def _megabytes(exe):
    return int(re.search(r"Total (\d+) MB allocated", exe.debug_str()).group(1))


def _chain(depth):
    x = mx.sym.var("x")
    for _ in range(depth):
        x = x * x
    return x


def test_inference_recycles_buffers_and_blockgrad_costs_nothing_more():
    shape = (4, 1024, 256)                       # 4 MiB of float32 per array
    chain = _chain(8)
    training = _megabytes(chain.simple_bind(mx.cpu(), x=shape))
    with fusion.disabled():
        unfused = _megabytes(chain.simple_bind(mx.cpu(), x=shape))
    inference = _megabytes(chain.simple_bind(mx.cpu(), x=shape, grad_req="null"))
    blocked = _megabytes(mx.sym.stop_gradient(chain).simple_bind(mx.cpu(), x=shape))
    # training keeps 8 outputs and their gradients; a chain without backward needs two
    # buffers in turn plus the output's own
    assert inference == blocked == 12
    assert unfused > 8 * 4 * 2
    # fused (one group), the intermediate gradients stay inside the group's kernel: the 8
    # outputs and the head's gradient
    assert training == 8 * 4 + 4


def _net():
    data = mx.sym.var("data")
    h = mx.sym.FullyConnected(data, num_hidden=16, name="fc1")
    h = mx.sym.Activation(h, act_type="tanh", name="act1")
    parts = mx.sym.split(h, num_outputs=2, axis=1, name="split")
    h = mx.sym.concat(parts[1] * 2, mx.sym.relu(parts[0]), dim=1, name="cat")
    h = mx.sym.FullyConnected(h + mx.sym.sigmoid(h), num_hidden=5, name="fc2")
    return mx.sym.Group([h, mx.sym.sum(h, axis=1, name="total")])


def test_recycled_inference_gives_the_same_outputs():
    net = _net()
    rng = np.random.RandomState(0)
    train = net.simple_bind(mx.cpu(), data=(6, 7))
    infer = net.simple_bind(mx.cpu(), data=(6, 7), grad_req="null")
    assert _megabytes(infer) <= _megabytes(train)
    for name, arr in train.arg_dict.items():
        arr[:] = rng.uniform(-1, 1, arr.shape)
        infer.arg_dict[name][:] = arr
    for _ in range(2):            # the second run reads buffers the first one recycled
        expected = [o.asnumpy() for o in train.forward(is_train=False)]
        got = [o.asnumpy() for o in infer.forward(is_train=False)]
        for e, g in zip(expected, got):
            np.testing.assert_allclose(g, e, rtol=1e-6)
    # reshaping a recycling executor keeps working on the shared memory
    small = infer.reshape(data=(3, 7))
    small.arg_dict["data"][:] = infer.arg_dict["data"].asnumpy()[:3]
    np.testing.assert_allclose(small.forward()[0].asnumpy(), expected[0][:3], rtol=1e-6)


@pytest.mark.parametrize("grad_req", ["write", "add"])
def test_gradients_behind_blockgrad(grad_req):
    x, w = mx.sym.var("x"), mx.sym.var("w")
    blocked = mx.sym.BlockGrad(x * w)
    out = mx.sym.Group([blocked + w, mx.sym.exp(x)])
    exe = out.simple_bind(mx.cpu(), x=(3,), w=(3,), grad_req=grad_req)
    xv, wv = np.array([0.5, 1.0, 2.0]), np.array([3.0, -1.0, 0.25])
    for g in exe.grad_arrays:
        g[:] = 10.0
    exe.forward(is_train=True, x=mx.nd.array(xv), w=mx.nd.array(wv))
    exe.backward([mx.nd.ones((3,)), mx.nd.ones((3,)) * 2])
    base = 10.0 if grad_req == "add" else 0.0
    # w: only the direct path; x: only through exp (the product is blocked)
    np.testing.assert_allclose(exe.grad_dict["w"].asnumpy(), base + 1.0, rtol=1e-6)
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(),
                               base + 2 * np.exp(xv).astype(np.float32), rtol=1e-6)


@pytest.mark.parametrize("grad_req", ["write", "add"])
def test_an_argument_no_gradient_reaches_gets_zeros_on_write(grad_req):
    x = mx.sym.var("x")
    out = mx.sym.stop_gradient(mx.sym.square(x) + 1)
    exe = out.simple_bind(mx.cpu(), x=(4,), grad_req=grad_req)
    exe.grad_dict["x"][:] = 5.0
    exe.forward(is_train=True, x=mx.nd.array([1.0, 2.0, 3.0, 4.0]))
    exe.backward()
    expected = 5.0 if grad_req == "add" else 0.0
    np.testing.assert_array_equal(exe.grad_dict["x"].asnumpy(), np.full(4, expected))
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), [2.0, 5.0, 10.0, 17.0])


def test_a_loss_behind_blockgrad_still_trains_its_inputs():
    data, label = mx.sym.var("data"), mx.sym.var("label")
    fc = mx.sym.FullyConnected(data, num_hidden=3, name="fc")
    out = mx.sym.BlockGrad(mx.sym.SoftmaxOutput(fc, label, name="sm"))
    exe = out.simple_bind(mx.cpu(), data=(2, 4), label=(2,))
    exe.arg_dict["data"][:] = np.arange(8).reshape(2, 4) / 8.0
    exe.arg_dict["fc_weight"][:] = 0.1
    exe.arg_dict["label"][:] = [0, 2]
    exe.forward(is_train=True)
    exe.backward()
    prob = exe.outputs[0].asnumpy()
    onehot = np.eye(3)[[0, 2]]
    np.testing.assert_allclose(exe.grad_dict["fc_bias"].asnumpy(), (prob - onehot).sum(0),
                               rtol=1e-5)


def test_numpy_numbers_in_attributes_are_written_as_python_numbers():
    a = mx.sym.var("a")
    t = mx.sym.transpose(a, axes=tuple(np.array([2, 0, 1])))
    assert t.attr("axes") == "(2, 0, 1)"
    assert (a * np.float32(0.5)).attr("scalar") == "0.5"
    np.testing.assert_array_equal(t.eval(a=mx.nd.ones((2, 3, 4)))[0].shape, (4, 2, 3))
