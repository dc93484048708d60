"""mx.contrib.svrg_optimization against MXNet 1.9.1 (tests/fixtures/svrg_golden.npz, written by
tests/fixtures/make_svrg_golden.py): the averaged full gradient, and SVRGModule.fit epoch by
epoch for plain SGD, SGD with momentum and weight decay, Adam, and two devices."""
import os

import numpy as np
import pytest

import lightmod as mx
from lightmod.contrib.svrg_optimization import AssignmentOptimizer, SVRGModule, SVRGOptimizer

GOLDEN = np.load(os.path.join(os.path.dirname(__file__), "fixtures", "svrg_golden.npz"))
BATCH = 8
# the fixture script's cases: (update_freq, optimizer, optimizer_params, num_epoch, contexts)
CASES = [
    (2, "sgd", {"learning_rate": 0.025}, 4, 1),
    (1, "sgd", {"learning_rate": 0.02, "momentum": 0.9, "wd": 0.01}, 3, 1),
    (3, "adam", {"learning_rate": 0.05}, 4, 1),
    (2, "sgd", {"learning_rate": 0.025}, 3, 2),
]


def _network():
    fc = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=1, name="fc")
    return mx.sym.LinearRegressionOutput(fc, label=mx.sym.Variable("lin_reg_label"),
                                         name="lro")


def _iterator():
    return mx.io.NDArrayIter(GOLDEN["x"], GOLDEN["y"], batch_size=BATCH,
                             label_name="lin_reg_label")


def _start():
    return {name: mx.nd.array(GOLDEN["start_" + name]) for name in ("fc_weight", "fc_bias")}


def _module(update_freq=2, contexts=1):
    return SVRGModule(_network(), data_names=["data"], label_names=["lin_reg_label"],
                      update_freq=update_freq, context=[mx.cpu(i) for i in range(contexts)])


def test_full_gradient_matches_mxnet():
    mod = _module()
    it = _iterator()
    mod.bind(it.provide_data, it.provide_label)
    mod.init_params(arg_params=_start())
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.025})
    mod.update_full_grads(it)
    for name in ("fc_weight", "fc_bias"):
        np.testing.assert_allclose(mod._param_dict[0][name].asnumpy(), GOLDEN["full_" + name],
                                   rtol=1e-5, atol=1e-6)


def test_full_gradient_is_the_mean_batch_gradient():
    # on fresh zeros: the average over the 3.75 batches (30 samples, batches of 8, pad 2)
    mod = _module()
    it = _iterator()
    mod.bind(it.provide_data, it.provide_label)
    mod.init_params(arg_params=_start())
    mod.init_optimizer()
    mod.update_full_grads(it)
    x, y = GOLDEN["x"].astype(np.float64), GOLDEN["y"].astype(np.float64)
    w, b = GOLDEN["start_fc_weight"].astype(np.float64), GOLDEN["start_fc_bias"][0]
    padded_x = np.concatenate([x, x[:2]])           # NDArrayIter pads from the start
    padded_y = np.concatenate([y, y[:2]])
    residual = padded_x @ w[0] + b - padded_y
    expected_w = (residual @ padded_x) / 3.75
    np.testing.assert_allclose(mod._param_dict[0]["fc_weight"].asnumpy()[0], expected_w,
                               rtol=1e-4)
    np.testing.assert_allclose(mod._param_dict[0]["fc_bias"].asnumpy()[0],
                               residual.sum() / 3.75, rtol=1e-4)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_fit_matches_mxnet_epoch_by_epoch(case):
    freq, optimizer, params, epochs, contexts = CASES[case]
    seen = {}

    def record(epoch, sym, arg, aux):
        for name, value in arg.items():
            seen["%s_epoch%d" % (name, epoch)] = value.asnumpy()

    mod = _module(freq, contexts)
    mod.fit(_iterator(), eval_metric="mse", optimizer=optimizer, optimizer_params=params,
            num_epoch=epochs, arg_params=_start(), epoch_end_callback=record, kvstore="local")
    for epoch in range(epochs):
        for name in ("fc_weight", "fc_bias"):
            key = "%s_epoch%d" % (name, epoch)
            np.testing.assert_allclose(seen[key], GOLDEN["fit%d_%s" % (case, key)],
                                       rtol=1e-4, atol=1e-5, err_msg=key)


def test_svrg_optimizer_dispatches_full_keys_to_assignment():
    names = {0: "fc_weight", 1: "fc_bias", 2: "fc_weight_full"}
    svrg = SVRGOptimizer(default_optimizer="sgd", learning_rate=0.5, param_idx2name=names)
    assert isinstance(svrg, SVRGOptimizer) and isinstance(svrg.aux_opt, AssignmentOptimizer)
    assert isinstance(svrg.default_opt, mx.optimizer.SGD)
    assert svrg.default_opt.lr == 0.5
    weight = mx.nd.array([1.0, 2.0])
    svrg.update(0, weight, mx.nd.array([1.0, 1.0]), svrg.create_state(0, weight))
    np.testing.assert_allclose(weight.asnumpy(), [0.5, 1.5])
    full = mx.nd.zeros(2)
    svrg.update("fc_weight_full", full, mx.nd.array([3.0, 4.0]), None)
    svrg.update(2, full, mx.nd.array([5.0, 6.0]), None)
    np.testing.assert_allclose(full.asnumpy(), [5.0, 6.0])


def test_update_freq_is_checked():
    with pytest.raises(TypeError, match="update_freq"):
        SVRGModule(_network(), label_names=["lin_reg_label"], update_freq=None)
    with pytest.raises(ValueError, match="positive"):
        SVRGModule(_network(), label_names=["lin_reg_label"], update_freq=0)


def test_contrib_namespace():
    assert mx.contrib.svrg_optimization.SVRGModule is SVRGModule
    assert mx.contrib.sym is mx.sym.contrib and mx.contrib.nd is mx.nd.contrib
