"""Python custom operators on gpu(0) with numba.cuda kernels (NUMBA_ENABLE_CUDASIM=1 or a GPU).

The arrays a custom operator receives on a GPU wrap the executor's device buffers:
``cuda_view()`` is the executor's numba device array itself, which a kernel writes into. On a
real GPU the NDArray also has that array's ``__cuda_array_interface__`` (numba's simulator
arrays have none, so there the test checks that the two agree).
"""
import os

import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError

if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") in ("", "0") and mx.num_gpus() == 0:
    pytest.skip("needs a GPU or NUMBA_ENABLE_CUDASIM=1", allow_module_level=True)

from numba import cuda  # noqa: E402

RNG = np.random.default_rng(7)
SEEN = {}


@cuda.jit
def _smooth_l1_kernel(x, out, sigma2):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        a = abs(v)
        out[i] = 0.5 * sigma2 * v * v if a < 1.0 / sigma2 else a - 0.5 / sigma2


@cuda.jit
def _smooth_l1_grad_kernel(x, head, grad, sigma2, add):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        if abs(v) < 1.0 / sigma2:
            g = sigma2 * v
        else:
            g = 1.0 if v > 0 else -1.0
        if add:
            grad[i] += g * head[i]
        else:
            grad[i] = g * head[i]


def _blocks(n):
    return (n + 127) // 128, 128


class _SmoothL1(mx.operator.CustomOp):
    def __init__(self, sigma):
        super().__init__()
        self.sigma2 = sigma * sigma

    def forward(self, is_train, req, in_data, out_data, aux):
        SEEN["in"] = in_data[0].cuda_view()
        SEEN["interface"] = (getattr(in_data[0], "__cuda_array_interface__", None),
                             getattr(in_data[0].cuda_view(), "__cuda_array_interface__", None))
        SEEN["ctx"] = in_data[0].context
        x, out = in_data[0].cuda_view(), out_data[0].cuda_view()
        _smooth_l1_kernel[_blocks(x.size)](x.reshape(x.size), out.reshape(out.size),
                                           self.sigma2)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        if req[0] == "null":
            return
        SEEN["grad"] = in_grad[0].cuda_view()
        x, head, grad = in_data[0].cuda_view(), out_grad[0].cuda_view(), in_grad[0].cuda_view()
        n = x.size
        _smooth_l1_grad_kernel[_blocks(n)](x.reshape(n), head.reshape(n), grad.reshape(n),
                                           self.sigma2, req[0] == "add")


@mx.operator.register("cuda_test_smooth_l1")
class _SmoothL1Prop(mx.operator.CustomOpProp):
    def __init__(self, sigma="1.0"):
        super().__init__()
        self.sigma = float(sigma)

    def create_operator(self, ctx, in_shapes, in_dtypes):
        SEEN["created_on"] = ctx
        return _SmoothL1(self.sigma)


def _reference(x, sigma):
    s2 = sigma * sigma
    small = np.abs(x) < 1.0 / s2
    value = np.where(small, 0.5 * s2 * x * x, np.abs(x) - 0.5 / s2)
    grad = np.where(small, s2 * x, np.sign(x))
    return value, grad


@pytest.mark.parametrize("grad_req", ["write", "add"])
def test_numba_cuda_kernels_compute_on_the_executor_buffers(grad_req):
    x = RNG.uniform(-3, 3, (4, 5)).astype(np.float32)
    head = RNG.standard_normal((4, 5)).astype(np.float32)
    net = mx.sym.Custom(mx.sym.var("x"), op_type="cuda_test_smooth_l1", sigma=2.0)
    exe = net.simple_bind(mx.gpu(0), grad_req=grad_req, x=(4, 5))
    if grad_req == "add":
        exe.grad_dict["x"][:] = 1.0
    out = exe.forward(is_train=True, x=x)[0]
    exe.backward(mx.nd.array(head, ctx=mx.gpu(0)))
    value, grad = _reference(x, 2.0)
    np.testing.assert_allclose(out.asnumpy(), value, rtol=1e-5, atol=1e-6)
    expected = grad * head + (1.0 if grad_req == "add" else 0.0)
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), expected, rtol=1e-5, atol=1e-6)
    # the kernels saw the executor's own device memory, on the executor's device
    assert SEEN["in"] is exe.arg_dict["x"].handle
    assert SEEN["grad"] is exe.grad_dict["x"].handle
    assert SEEN["interface"][0] == SEEN["interface"][1]
    assert SEEN["ctx"] == mx.gpu(0) and SEEN["created_on"] == mx.gpu(0)


def test_gpu_and_cpu_give_the_same_training_step():
    x = RNG.uniform(-3, 3, (6, 4)).astype(np.float32)
    results = []
    for ctx in (mx.cpu(), mx.gpu(0)):
        data = mx.sym.var("data")
        net = mx.sym.FullyConnected(data, num_hidden=4, name="fc")
        net = mx.sym.MakeLoss(mx.sym.Custom(net, op_type="cuda_test_smooth_l1"))
        if ctx == mx.cpu():
            # the CPU runs the same operator through its NDArrays (no kernel launch)
            net = mx.sym.MakeLoss(mx.sym.Custom(mx.sym.FullyConnected(data, num_hidden=4,
                                                                      name="fc"),
                                                op_type="cpu_test_smooth_l1"))
        exe = net.simple_bind(ctx, data=(6, 4))
        exe.arg_dict["fc_weight"][:] = np.eye(4, dtype=np.float32)
        exe.arg_dict["fc_bias"][:] = 0.5
        exe.forward(is_train=True, data=x)
        exe.backward()
        results.append((exe.outputs[0].asnumpy(), exe.grad_dict["fc_weight"].asnumpy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-5, atol=1e-5)


class _SmoothL1Host(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        value, _ = _reference(in_data[0].numpy_view(), 1.0)
        self.assign(out_data[0], req[0], value)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        _, grad = _reference(in_data[0].numpy_view(), 1.0)
        self.assign(in_grad[0], req[0], grad * out_grad[0].numpy_view())


@mx.operator.register("cpu_test_smooth_l1")
class _SmoothL1HostProp(mx.operator.CustomOpProp):
    def create_operator(self, ctx, in_shapes, in_dtypes):
        return _SmoothL1Host()


def test_views_refuse_the_wrong_device():
    class Probe(mx.operator.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            in_data[0].numpy_view()

    @mx.operator.register("cuda_test_probe")
    class ProbeProp(mx.operator.CustomOpProp):
        def create_operator(self, ctx, in_shapes, in_dtypes):
            return Probe()

    with pytest.raises(MXNetError, match=r"numpy_view\(\): the array lives on gpu\(0\)"):
        mx.nd.Custom(mx.nd.ones(3, ctx=mx.gpu(0)), op_type="cuda_test_probe")
