"""backward() without out_grads when every head is a loss or a BlockGrad/stop_gradient output."""
import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError


def _net(block):
    data, label = mx.sym.var("data"), mx.sym.var("label")
    pred = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=2, name="fc"), act_type="tanh")
    loss = mx.sym.MakeLoss(mx.sym.mean(mx.sym.square(pred - label)))
    return loss, block(pred) if block is not None else pred


def _fill(arrays):
    for a in arrays.values():
        a[:] = np.arange(a.size).reshape(a.shape) * 0.1 - 0.3


def _numpy_weight_grad():
    x = np.arange(12).reshape(4, 3) * 0.1 - 0.3
    w = np.arange(6).reshape(2, 3) * 0.1 - 0.3
    b = np.arange(2) * 0.1 - 0.3
    y = np.arange(8).reshape(4, 2) * 0.1 - 0.3
    pred = np.tanh(x @ w.T + b)
    dpred = 2 * (pred - y) / pred.size
    return ((dpred * (1 - pred ** 2)).T @ x), pred


@pytest.mark.parametrize("block", [mx.sym.BlockGrad, mx.sym.stop_gradient])
@pytest.mark.parametrize("loss_first", [True, False])
def test_executor_backward_without_out_grads(block, loss_first):
    loss, pred = _net(block)
    net = mx.sym.Group([loss, pred] if loss_first else [pred, loss])
    ex = net.simple_bind(mx.cpu(), data=(4, 3), label=(4, 2))
    _fill(ex.arg_dict)
    ex.forward(is_train=True)
    ex.backward()
    want_grad, want_pred = _numpy_weight_grad()
    # MXNet 1.9.1 gives [[-0.12988052 -0.15701045 -0.18414038] [-0.07236148 -0.09255604 -0.11275062]]
    np.testing.assert_allclose(ex.grad_dict["fc_weight"].asnumpy(), want_grad, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(ex.grad_dict["fc_weight"].asnumpy(),
                               [[-0.12988052, -0.15701045, -0.18414038],
                                [-0.07236148, -0.09255604, -0.11275062]], rtol=1e-5)
    np.testing.assert_allclose(ex.outputs[1 if loss_first else 0].asnumpy(), want_pred, rtol=1e-6)


def test_non_loss_head_still_needs_a_head_gradient():
    loss, pred = _net(None)
    ex = mx.sym.Group([loss, pred]).simple_bind(mx.cpu(), data=(4, 3), label=(4, 2))
    _fill(ex.arg_dict)
    ex.forward(is_train=True)
    with pytest.raises(MXNetError, match="head gradient is required"):
        ex.backward()


def test_module_backward_with_makeloss_and_blockgrad_outputs():
    loss, pred = _net(mx.sym.BlockGrad)
    mod = mx.mod.Module(mx.sym.Group([loss, pred]), data_names=["data"], label_names=["label"])
    mod.bind(data_shapes=[("data", (4, 3))], label_shapes=[("label", (4, 2))])
    mod.init_params()
    params = {n: mx.nd.array(np.arange(np.prod(s)).reshape(s) * 0.1 - 0.3)
              for n, s in [("fc_weight", (2, 3)), ("fc_bias", (2,))]}
    mod.set_params(params, {})
    batch = mx.io.DataBatch(data=[mx.nd.array(np.arange(12).reshape(4, 3) * 0.1 - 0.3)],
                            label=[mx.nd.array(np.arange(8).reshape(4, 2) * 0.1 - 0.3)])
    mod.forward(batch, is_train=True)
    mod.backward()
    want_grad, want_pred = _numpy_weight_grad()
    grads = dict(zip(mod._exec_group.param_names, mod._exec_group.grad_arrays))
    np.testing.assert_allclose(grads["fc_weight"][0].asnumpy(), want_grad, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(mod.get_outputs()[1].asnumpy(), want_pred, rtol=1e-6)
