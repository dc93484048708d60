"""Networks and the fused / unfused comparison for the training-forward layer fusion tests
(tests/test_training_layer_fusion.py, and on gpu(0) tests/cuda/test_cuda_training_fusion.py)."""
import numpy as np

import lightmod as mx
from lightmod import inference_plan

ACTS = [None, "relu", "sigmoid", "tanh", "softrelu", "softsign"]


def mlp(layers, flatten):
    net = mx.sym.var("data")
    for i, (hidden, no_bias, act) in enumerate(layers):
        net = mx.sym.FullyConnected(net, num_hidden=hidden, no_bias=no_bias, flatten=flatten,
                                    name="fc%d" % i)
        if act is not None:
            net = mx.sym.Activation(net, act_type=act, name="act%d" % i)
    # a product reads the last layer (an element-wise operator there would join the
    # Activation into an element-wise fused group, which keeps it)
    head = mx.sym.FullyConnected(net, num_hidden=2, flatten=flatten, name="head")
    return mx.sym.MakeLoss(mx.sym.sum(mx.sym.square(head)), name="loss")


def run(sym, data_shape, seed, monkeypatch, fusion, grad_req="write", steps=2, ctx=None):
    """(outputs, gradients by name, fused layer count) after ``steps`` training steps of
    ``sym`` bound with fusion on or off (LIGHTMOD_FUSION), the arrays drawn from ``seed``."""
    monkeypatch.setenv("LIGHTMOD_FUSION", "1" if fusion else "0")
    exe = sym.simple_bind(mx.cpu() if ctx is None else ctx, data=data_shape, grad_req=grad_req)
    rng = np.random.RandomState(seed)
    for arr in exe.arg_dict.values():
        arr[:] = rng.uniform(-1, 1, arr.shape)
    for grad in exe.grad_arrays:
        if grad is not None:
            grad[:] = rng.uniform(-1, 1, grad.shape)
    for _ in range(steps):          # twice: 'add' requests accumulate over the steps
        outs = [o.asnumpy().copy() for o in exe.forward(is_train=True)]
        exe.backward()
    grads = {n: g.asnumpy().copy() for n, g in exe.grad_dict.items() if g is not None}
    walk = inference_plan.training_steps(exe)
    fused = sum(isinstance(step.op, inference_plan.TrainingLayer) for step in walk)
    return outs, grads, fused


def conv_net(layers):
    net = mx.sym.var("data")
    for i, (filters, kernel, stride, groups, no_bias, act) in enumerate(layers):
        net = mx.sym.Convolution(net, kernel=(kernel, kernel), stride=(stride, stride),
                                 pad=(kernel // 2, kernel // 2), num_filter=filters,
                                 num_group=groups, no_bias=no_bias, name="conv%d" % i)
        if act is not None:
            net = mx.sym.Activation(net, act_type=act, name="act%d" % i)
    head = mx.sym.FullyConnected(net, num_hidden=3, name="head")
    return mx.sym.MakeLoss(mx.sym.sum(mx.sym.square(head)), name="loss")


def float32_atol(ref):
    """The absolute tolerance of a float32 comparison of two summation orders: 2e-5 of the
    array's largest magnitude (gradients of a squared loss reach the hundreds, where the last
    float32 bits are 1e-5 apart)."""
    return 2e-5 * max(1.0, float(np.abs(ref).max()) if np.size(ref) else 1.0)
