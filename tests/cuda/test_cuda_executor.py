"""The executor on gpu(0) against cpu(0), and across devices through group2ctx (run under
NUMBA_ENABLE_CUDASIM=1 or on a GPU)."""
import os

import numpy as np
import pytest

import lightmod as mx

if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") in ("", "0") and mx.num_gpus() == 0:
    pytest.skip("needs a GPU or NUMBA_ENABLE_CUDASIM=1", allow_module_level=True)

RNG = np.random.default_rng(5)


def _net():
    data = mx.sym.var("data")
    h = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=5, name="fc1"),
                          act_type="tanh")
    h = mx.sym.FullyConnected(h, num_hidden=3, name="fc2")
    return mx.sym.SoftmaxOutput(h * 2 + h, name="softmax")


def _run(net, ctx, values, group2ctx=None, grad_req="write"):
    exe = net.simple_bind(ctx, group2ctx=group2ctx, grad_req=grad_req, data=(4, 6))
    for name, value in values.items():
        exe.arg_dict[name][:] = value
    out = exe.forward(is_train=True)[0].asnumpy()
    exe.backward()
    grads = {k: g.asnumpy() for k, g in exe.grad_dict.items() if g is not None}
    return exe, out, grads


def _values():
    return {"data": RNG.standard_normal((4, 6)).astype(np.float32),
            "fc1_weight": RNG.standard_normal((5, 6)).astype(np.float32),
            "fc1_bias": RNG.standard_normal(5).astype(np.float32),
            "fc2_weight": RNG.standard_normal((3, 5)).astype(np.float32),
            "fc2_bias": RNG.standard_normal(3).astype(np.float32),
            "softmax_label": np.array([0, 1, 2, 1], np.float32)}


def test_gpu_executor_matches_cpu():
    net, values = _net(), _values()
    _, out_cpu, grads_cpu = _run(net, mx.cpu(), values)
    exe, out_gpu, grads_gpu = _run(net, mx.gpu(0), values)
    assert exe.arg_dict["fc1_weight"].context == mx.gpu(0)
    assert exe.outputs[0].context == mx.gpu(0)
    np.testing.assert_allclose(out_gpu, out_cpu, rtol=1e-5, atol=1e-6)
    for name in grads_cpu:
        np.testing.assert_allclose(grads_gpu[name], grads_cpu[name], rtol=1e-4, atol=1e-6)
    # grad_req='add' accumulates on the device too
    exe = net.simple_bind(mx.gpu(0), grad_req="add", data=(4, 6))
    for name, value in values.items():
        exe.arg_dict[name][:] = value
    for _ in range(2):
        exe.forward(is_train=True)
        exe.backward()
    np.testing.assert_allclose(exe.grad_dict["fc1_weight"].asnumpy(),
                               2 * grads_cpu["fc1_weight"], rtol=1e-4, atol=1e-6)


def test_group2ctx_across_cpu_and_gpu():
    data = mx.sym.var("data")
    with mx.AttrScope(ctx_group="dev"):
        fc = mx.sym.FullyConnected(data, num_hidden=5, name="fcg")
    h = mx.sym.FullyConnected(fc, num_hidden=3, name="fc2")
    net = mx.sym.SoftmaxOutput(mx.sym.broadcast_add(h * h, mx.sym.sum(fc)), name="softmax")
    values = _values()
    values = {"data": values["data"], "fcg_weight": values["fc1_weight"],
              "fcg_bias": values["fc1_bias"], "fc2_weight": values["fc2_weight"],
              "fc2_bias": values["fc2_bias"], "softmax_label": values["softmax_label"]}
    _, out_ref, grads_ref = _run(net, mx.cpu(), values)
    exe, out, grads = _run(net, mx.cpu(), values, group2ctx={"dev": mx.gpu(0)})
    assert exe.arg_dict["fcg_weight"].context == mx.gpu(0)
    assert exe.grad_dict["fcg_weight"].context == mx.gpu(0)
    assert exe.arg_dict["fc2_weight"].context == mx.cpu(0)
    np.testing.assert_allclose(out, out_ref, rtol=1e-5, atol=1e-6)
    for name in grads_ref:
        np.testing.assert_allclose(grads[name], grads_ref[name], rtol=1e-4, atol=1e-5)


def test_gpu_reshape_views_base_memory():
    x = mx.sym.var("x")
    y = mx.sym.FullyConnected(x, num_hidden=4, name="fc")
    exe = y.simple_bind(mx.gpu(0), x=(5, 4), grad_req="null")
    exe.arg_dict["x"][:] = 1
    exe.arg_dict["fc_weight"][:] = np.eye(4, dtype=np.float32)
    child = exe.reshape(x=(3, 4))
    child.forward()
    np.testing.assert_allclose(child.outputs[0].asnumpy(), np.ones((3, 4)))
    np.testing.assert_allclose(exe.outputs[0].asnumpy()[:3], np.ones((3, 4)))
    assert child.arg_dict["fc_weight"] is exe.arg_dict["fc_weight"]
    up = exe.reshape(allow_up_sizing=True, x=(7, 4))
    up.arg_dict["x"][:] = 2
    np.testing.assert_allclose(up.forward()[0].asnumpy(), np.full((7, 4), 2.0))
