"""Random conv / BatchNorm / activation / dropout / FC stacks for the inference-plan tests (CPU
and CUDA simulator), and the comparison of the planned and the plain inference forward."""
import numpy as np
from hypothesis import strategies as st

import lightmod as mx
from lightmod import inference_plan

ACTS = ["relu", "sigmoid", "tanh", "softrelu", "softsign"]


@st.composite
def stacks(draw, max_layers=3):
    """(layers, fc, input shape): each conv layer a dict of its choices."""
    layers = []
    channels = draw(st.integers(1, 4))
    size = first = draw(st.integers(3, 7))
    for _ in range(draw(st.integers(1, max_layers))):
        kernel = draw(st.integers(1, min(3, size)))
        pad = draw(st.integers(0, kernel // 2))
        stride = draw(st.integers(1, 2))
        layers.append({
            "filters": draw(st.sampled_from([1, 3, 8, 9])),
            "kernel": kernel, "pad": pad, "stride": stride,
            "no_bias": draw(st.booleans()),
            "groups": draw(st.sampled_from([1, 1, 1, "all"])),
            "bn": draw(st.sampled_from([None, "fix_gamma", "gamma"])),
            "act": draw(st.sampled_from([None] + ACTS)),
            "dropout": draw(st.booleans()),
        })
        size = (size + 2 * pad - kernel) // stride + 1
    fc = {"hidden": draw(st.integers(1, 6)), "no_bias": draw(st.booleans()),
          "bn": draw(st.sampled_from([None, "fix_gamma", "gamma"])),
          "act": draw(st.sampled_from([None] + ACTS))}
    return layers, fc, (draw(st.integers(1, 3)), channels, first, first)


def build(layers, fc, channels):
    """The symbol of a drawn stack (groups='all' makes a depthwise-style grouped conv when the
    channel counts allow it)."""
    net = mx.sym.var("data")
    for i, layer in enumerate(layers):
        groups = 1
        if layer["groups"] == "all" and layer["filters"] % channels == 0:
            groups = channels
        net = mx.sym.Convolution(net, kernel=(layer["kernel"],) * 2, pad=(layer["pad"],) * 2,
                                 stride=(layer["stride"],) * 2, num_filter=layer["filters"],
                                 num_group=groups, no_bias=layer["no_bias"], name="conv%d" % i)
        channels = layer["filters"]
        if layer["bn"]:
            net = mx.sym.BatchNorm(net, fix_gamma=layer["bn"] == "fix_gamma", eps=1e-3,
                                   name="bn%d" % i)
        if layer["act"]:
            net = mx.sym.Activation(net, act_type=layer["act"], name="act%d" % i)
        if layer["dropout"]:
            net = mx.sym.Dropout(net, p=0.5, name="drop%d" % i)
    net = mx.sym.FullyConnected(net, num_hidden=fc["hidden"], no_bias=fc["no_bias"], name="fc")
    if fc["bn"]:
        net = mx.sym.BatchNorm(net, fix_gamma=fc["bn"] == "fix_gamma", name="fc_bn")
    if fc["act"]:
        net = mx.sym.Activation(net, act_type=fc["act"], name="fc_act")
    return net


def fill(exe, seed):
    """Random arguments, and moving statistics / gammas far from their defaults, so that a
    wrong fold shows."""
    rng = np.random.RandomState(seed)
    for name, arr in exe.arg_dict.items():
        if name.endswith("gamma"):
            arr[:] = rng.uniform(0.5, 2.0, arr.shape)
        else:
            arr[:] = rng.uniform(-1, 1, arr.shape)
    for name, arr in exe.aux_dict.items():
        if name.endswith("moving_var"):
            arr[:] = rng.uniform(0.2, 3.0, arr.shape)
        else:
            arr[:] = rng.uniform(-0.5, 0.5, arr.shape)


def compare(sym, data_shape, ctx, seed):
    """Outputs of the planned and the plain inference forward (and whether the plan fused
    anything), on a fresh executor bound without gradients."""
    exe = sym.simple_bind(ctx, data=data_shape, grad_req="null")
    fill(exe, seed)
    planned = exe.forward(is_train=False)[0].asnumpy()
    plan = getattr(exe, "_inference_plan", None)
    inference_plan.replay_plain_forward(exe)
    plain = exe.outputs[0].asnumpy()
    return planned, plain, plan
