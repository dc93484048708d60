"""CUDA kernels of the convolution / pooling / normalisation / resampling operators against the
CPU kernels, through the operator declarations (tiny shapes; run under NUMBA_ENABLE_CUDASIM=1
in its own pytest process: ``NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/cuda``)."""
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

RNG = np.random.default_rng(7)


def randn(*shape):
    return RNG.standard_normal(shape)


def run(name, attrs, inputs, device, req=None, is_train=True, init=None):
    """Forward then backward on one kernel set: (outputs, input gradients, aux after)."""
    outs, _, op, p = oh.forward(name, attrs, inputs, is_train=is_train, device=device)
    heads = [np.random.default_rng(11).standard_normal(o.shape)
             for o in outs[:op.num_visible_outputs(p)]]
    grads = oh.backward(name, attrs, inputs, heads, req=req, is_train=is_train, device=device,
                        init_grads=init)
    return outs[:op.num_visible_outputs(p)], grads


def compare(name, attrs, inputs, req=None, is_train=True, init=None, rtol=1e-9, atol=1e-11):
    cpu = run(name, attrs, inputs, "cpu", req, is_train, init)
    gpu = run(name, attrs, inputs, "cuda", req, is_train, init)
    for what, a_list, b_list in (("output", cpu[0], gpu[0]), ("gradient", cpu[1], gpu[1])):
        for i, (a, b) in enumerate(zip(a_list, b_list)):
            if a is None:
                assert b is None
                continue
            np.testing.assert_allclose(b, a, rtol=rtol, atol=atol,
                                       err_msg="%s %s %d" % (name, what, i))


@pytest.mark.parametrize("attrs, xshape", [
    (dict(kernel=(3, 3), num_filter=3, pad=(1, 1)), (2, 2, 3, 4)),
    (dict(kernel=(3, 2), num_filter=4, num_group=2, stride=(2, 1), dilate=(1, 2), pad=(1, 0)),
     (1, 4, 6, 5)),
    (dict(kernel=(3,), num_filter=2, stride=(2,), pad=(1,), no_bias=True), (2, 3, 7)),
    (dict(kernel=(2, 2, 2), num_filter=2, stride=(1, 2, 1)), (1, 2, 3, 4, 3)),
])
def test_convolution(attrs, xshape):
    nd = len(attrs["kernel"])
    c = xshape[1]
    w = randn(attrs["num_filter"], c // attrs.get("num_group", 1), *attrs["kernel"])
    inputs = [randn(*xshape), w] + ([] if attrs.get("no_bias") else [randn(attrs["num_filter"])])
    compare("Convolution", attrs, inputs)
    compare("Convolution", attrs, inputs, req=["add"] * len(inputs),
            init=[np.ones_like(a) for a in inputs])
    assert nd == len(xshape) - 2


def test_convolution_float32_and_float16():
    x, w, b = randn(1, 2, 4, 4), randn(3, 2, 3, 3), randn(3)
    attrs = dict(kernel=(3, 3), num_filter=3)
    compare("Convolution", attrs, [a.astype(np.float32) for a in (x, w, b)], rtol=1e-5,
            atol=1e-5)
    compare("Convolution", attrs, [a.astype(np.float16) for a in (x, w, b)], rtol=1e-2,
            atol=1e-2)


@pytest.mark.parametrize("attrs, xshape", [
    (dict(kernel=(3, 3), num_filter=2, stride=(2, 2), pad=(1, 1), adj=(1, 0), no_bias=False),
     (1, 4, 3, 3)),
    (dict(kernel=(4, 4), num_filter=4, num_group=2, stride=(2, 2), target_shape=(7, 8)),
     (1, 2, 3, 4)),
])
def test_deconvolution(attrs, xshape):
    c = xshape[1]
    w = randn(c, attrs["num_filter"] // attrs.get("num_group", 1), *attrs["kernel"])
    inputs = [randn(*xshape), w] + ([] if attrs.get("no_bias", True) else
                                    [randn(attrs["num_filter"])])
    compare("Deconvolution", attrs, inputs)


@pytest.mark.parametrize("attrs, xshape", [
    (dict(kernel=(2, 2), stride=(2, 2)), (2, 2, 4, 6)),
    (dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg"), (1, 2, 5, 5)),
    (dict(kernel=(3, 2), stride=(2, 2), pad=(1, 0), pool_type="avg",
          pooling_convention="full", count_include_pad=False), (1, 2, 6, 5)),
    (dict(kernel=(2, 2), stride=(1, 1), pool_type="sum"), (1, 2, 3, 3)),
    (dict(kernel=(2, 2), pool_type="lp", p_value=3), (1, 2, 3, 3)),
    (dict(kernel=(3,), stride=(2,), pad=(1,)), (2, 2, 7)),
    (dict(kernel=(2, 2, 2), stride=(2, 1, 2), pool_type="avg"), (1, 1, 4, 3, 4)),
    (dict(global_pool=True, pool_type="max"), (2, 3, 3, 4)),
])
def test_pooling(attrs, xshape):
    x = randn(*xshape)
    if attrs.get("pool_type") == "lp":
        x = np.abs(x) + 0.5
    compare("Pooling", attrs, [x])
    compare("Pooling", attrs, [x], req=["add"], init=[np.ones_like(x)])
    compare("Pooling", attrs, [x], is_train=False)


@pytest.mark.parametrize("attrs", [
    dict(fix_gamma=False, momentum=0.8),
    dict(),
    dict(fix_gamma=False, axis=-1),
    dict(fix_gamma=False, use_global_stats=True),
])
def test_batchnorm(attrs):
    x = randn(3, 4, 2, 3)
    c = x.shape[attrs.get("axis", 1)]
    inputs = [x, randn(c) + 1, randn(c), randn(c), np.abs(randn(c)) + 0.5]
    compare("BatchNorm", attrs, inputs)
    compare("BatchNorm", attrs, inputs, is_train=False)
    # moving statistics updated by the backward pass, the same on both kernel sets
    from numba import cuda

    from lightmod.kernels import cpu
    from lightmod.kernels import cuda as kcuda
    op, p = oh.prepare("BatchNorm", attrs)
    results = []
    for k, dev in ((cpu, "cpu"), (kcuda, "cuda")):
        arrays = [np.array(a) for a in inputs]
        put = (lambda a: cuda.to_device(a)) if dev == "cuda" else (lambda a: a)
        ins = [put(a) for a in arrays]
        outs = [put(np.zeros_like(x)), put(np.zeros(c)), put(np.zeros(c))]
        state = {}
        op.forward(p, k, ins, outs, True, state)
        grads = [put(np.zeros_like(x)), put(np.zeros(c)), put(np.zeros(c)), None, None]
        op.backward(p, k, [put(np.ones_like(x)), None, None], ins, outs, grads,
                    ["write", "write", "write", "null", "null"], state)
        get = (lambda a: a.copy_to_host()) if dev == "cuda" else (lambda a: a)
        results.append([get(ins[3]), get(ins[4])])
    for a, b in zip(*results):
        np.testing.assert_allclose(b, a, rtol=1e-10)


def test_instance_layer_l2_lrn():
    x = randn(2, 2, 2, 3)
    compare("InstanceNorm", {}, [x, randn(2), randn(2)])
    compare("LayerNorm", dict(axis=1, output_mean_var=True), [x, randn(2), randn(2)])
    compare("LayerNorm", {}, [x[:1, :1], randn(3), randn(3)])
    for mode in ("instance", "channel", "spatial"):
        compare("L2Normalization", dict(mode=mode), [x])
    compare("LRN", dict(nsize=4, alpha=0.1), [randn(1, 5, 2, 2)])


def test_resampling():
    x = randn(2, 2, 3, 3)
    for mode in ("constant", "edge", "reflect"):
        compare("Pad", dict(mode=mode, pad_width=(0, 0, 0, 0, 2, 1, 1, 2), constant_value=0.5),
                [x])
    compare("Crop", dict(num_args=1, h_w=(2, 2), offset=(1, 0)), [x])
    compare("Crop", dict(num_args=2, center_crop=True), [randn(1, 2, 5, 4), randn(1, 1, 3, 2)])
    compare("UpSampling", dict(scale=2, sample_type="nearest", num_args=2),
            [x, randn(2, 1, 6, 6)])
    compare("UpSampling", dict(scale=2, sample_type="nearest", num_args=2,
                               multi_input_mode="sum"), [x, randn(2, 2, 2, 2)[:, :, :1, :1]
                                                         .repeat(6, 2).repeat(6, 3)])
    compare("UpSampling", dict(scale=2, sample_type="bilinear", num_filter=2, num_args=1),
            [x, randn(2, 1, 4, 4)])
