"""A Convolution + BatchNorm + Pooling network trained through Module on gpu(0) agrees with
cpu(0) (run under NUMBA_ENABLE_CUDASIM=1 or on a GPU). Its (N, 1, H, W) input once failed to
reach the GPU: numba's copy treated the size-1 channel axis as a broadcast axis ("could not
broadcast (2, 6, 6) into (2, 1, 6, 6)")."""
import numpy as np
import pytest

import lightmod as mx
from lightmod.kernels import cuda_support

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not (cuda_support.simulator_enabled()
                                      or cuda_support.num_gpus() > 0),
                                 reason="needs a GPU or NUMBA_ENABLE_CUDASIM=1")]


def _net(pool_type):
    data = mx.sym.var("data")
    conv = mx.sym.Convolution(data, kernel=(3, 3), num_filter=2, pad=(1, 1), name="conv")
    bn = mx.sym.BatchNorm(conv, fix_gamma=False, name="bn")
    act = mx.sym.Activation(bn, act_type="relu")
    pool = mx.sym.Pooling(act, kernel=(2, 2), stride=(2, 2), pool_type=pool_type)
    fc = mx.sym.FullyConnected(mx.sym.flatten(pool), num_hidden=3, name="fc")
    return mx.sym.SoftmaxOutput(fc, name="softmax")


def _train(ctx, pool_type, steps=2):
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (2, 1, 6, 6)).astype(np.float32)
    y = np.array([0, 2], np.float32)
    it = mx.io.NDArrayIter(x, y, batch_size=2)
    mod = mx.mod.Module(_net(pool_type), context=ctx)
    mod.bind(data_shapes=it.provide_data, label_shapes=it.provide_label)
    mx.random.seed(5)
    mod.init_params(mx.init.Xavier(magnitude=2))
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    outputs = []
    for _ in range(steps):
        it.reset()
        batch = next(it)
        mod.forward_backward(batch)
        outputs.append(mod.get_outputs()[0].asnumpy())
        mod.update()
    arg, aux = mod.get_params()
    return outputs, {k: v.asnumpy() for k, v in arg.items()}, {k: v.asnumpy() for k, v in aux.items()}


@pytest.mark.parametrize("pool_type", ["max", "avg"])
def test_conv_bn_pool_module_gpu_matches_cpu(pool_type):
    cpu_out, cpu_arg, cpu_aux = _train(mx.cpu(0), pool_type)
    gpu_out, gpu_arg, gpu_aux = _train(mx.gpu(0), pool_type)
    for a, b in zip(cpu_out, gpu_out):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    for name in cpu_arg:
        np.testing.assert_allclose(gpu_arg[name], cpu_arg[name], rtol=1e-5, atol=1e-6, err_msg=name)
    for name in cpu_aux:
        np.testing.assert_allclose(gpu_aux[name], cpu_aux[name], rtol=1e-5, atol=1e-6, err_msg=name)
    assert set(cpu_aux) == {"bn_moving_mean", "bn_moving_var"}


def test_single_channel_batch_copies_to_gpu():
    x = np.arange(72, dtype=np.float32).reshape(2, 1, 6, 6)
    src = mx.nd.array(x)[0:2]
    dst = mx.nd.zeros((2, 1, 6, 6), ctx=mx.gpu(0))
    src.copyto(dst)
    np.testing.assert_array_equal(dst.asnumpy(), x)
