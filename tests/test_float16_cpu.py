"""float16 on the CPU: kernels run on float32 copies and round back (numba has no CPU half)."""
import numpy as np
import pytest

import lightmod as mx


@pytest.mark.parametrize("act", ["relu", "sigmoid", "tanh", "softrelu", "softsign"])
def test_activation_float16_matches_float32_rounded(act):
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)
    d = mx.sym.Variable("data")
    net = mx.sym.Activation(d, act_type=act)
    outs = {}
    grads = {}
    for dt in (np.float32, np.float16):
        exe = net.simple_bind(mx.cpu(), data=(4, 6), type_dict={"data": dt})
        exe.arg_dict["data"][:] = x
        outs[dt] = exe.forward(is_train=True)[0]
        exe.backward([mx.nd.ones((4, 6), dtype=dt)])
        grads[dt] = exe.grad_dict["data"]
    assert outs[np.float16].dtype == np.float16 and grads[np.float16].dtype == np.float16
    np.testing.assert_allclose(outs[np.float16].asnumpy(), outs[np.float32].asnumpy(),
                               rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(grads[np.float16].asnumpy(), grads[np.float32].asnumpy(),
                               rtol=5e-3, atol=5e-3)


def test_aliased_float16_arguments_stay_aliased():
    """An update whose output is its input (out=weight) must write the weight itself."""
    w = mx.nd.array(np.ones(5), dtype="float16")
    g = mx.nd.array(np.full(5, 0.5), dtype="float16")
    mx.nd.sgd_update(w, g, lr=0.1, wd=0.0, out=w)
    np.testing.assert_allclose(w.asnumpy(), np.full(5, 0.95, np.float16))


def test_fully_connected_float16_module_trains():
    rng = np.random.RandomState(0)
    x = rng.randn(64, 4).astype(np.float16)
    y = (x[:, 0] > 0).astype(np.float16)
    d = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(d, num_hidden=2, name="fc")
    net = mx.sym.SoftmaxOutput(net, name="softmax")
    mod = mx.mod.Module(net)
    it = mx.io.NDArrayIter(x, y, batch_size=16)
    mod.bind(data_shapes=[mx.io.DataDesc("data", (16, 4), np.float16)],
             label_shapes=[mx.io.DataDesc("softmax_label", (16,), np.float16)])
    mod.init_params(mx.init.Xavier())
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.5,
                                                          "multi_precision": True})
    for _ in range(10):
        it.reset()
        for batch in it:
            mod.forward_backward(batch)
            mod.update()
    assert mod.get_outputs()[0].dtype == np.float16
    acc = dict(mod.score(mx.io.NDArrayIter(x, y, batch_size=16), "acc"))["accuracy"]
    assert acc > 0.9
