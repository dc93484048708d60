"""mx.mon.Monitor: forward and backward node outputs, arguments at toc, interval, pattern."""
import logging
from functools import reduce

import numpy as np
import pytest

import lightmod as mx


def two_layer_regression():
    x = mx.sym.Variable("data")
    x = mx.sym.FullyConnected(name="fc_0", data=x, num_hidden=2)
    x = mx.sym.Activation(name="act_0", data=x, act_type="sigmoid")
    x = mx.sym.FullyConnected(name="fc_1", data=x, num_hidden=2)
    x = mx.sym.Activation(name="act_1", data=x, act_type="sigmoid")
    return mx.sym.LinearRegressionOutput(data=x, name="softmax", grad_scale=2)


ARG_PARAMS = {"fc_0_weight": [[.15, .20], [.25, .30]], "fc_0_bias": [.35, .35],
              "fc_1_weight": [[.40, .45], [.50, .55]], "fc_1_bias": [.60, .60]}


def bound_module(monitor, context=None):
    train_data = mx.io.NDArrayIter(mx.nd.array([[0.05, .10]]), mx.nd.array([[.01, 0.99]]),
                                   batch_size=1)
    mod = mx.mod.Module(two_layer_regression(), context=context or [mx.cpu()])
    mod.bind(train_data.provide_data, label_shapes=train_data.provide_label, for_training=True)
    mod.install_monitor(monitor)
    mod.init_params(arg_params={k: mx.nd.array(v) for k, v in ARG_PARAMS.items()})
    return mod, next(iter(train_data))


def mean_abs(x):
    sum_abs = mx.nd.sum(mx.nd.abs(x))
    return mx.nd.divide(sum_abs, reduce(lambda a, b: a * b, x.shape))


def test_monitor_sees_forward_backward_and_arguments():
    mon = mx.mon.Monitor(1, stat_func=mean_abs, pattern=".*", sort=True)
    mod, batch = bound_module(mon)
    mon.tic()
    mod.forward_backward(batch)
    res = mon.toc()
    keys = ["act_0", "act_1", "data", "fc_0", "fc_1", "softmax"]
    counts = [0] * len(keys)
    assert len(res) == 21
    for step, name, text in res:
        assert step == 1 and text.endswith("\t")
        for i, key in enumerate(keys):
            if name.startswith(key):
                counts[i] += 1
                break
    assert counts == [2, 2, 1, 6, 6, 4]
    names = [name for _, name, _ in res]
    assert names == sorted(names)
    assert "fc_1_backward_output0" in names and "softmax_backward_output1" in names
    # the statistic of an argument is computed on its current value
    by_name = {name: text for _, name, text in res}
    assert float(by_name["fc_0_bias"]) == pytest.approx(0.35, rel=1e-6)


def test_monitor_interval_pattern_and_default_stat(caplog):
    mon = mx.mon.Monitor(2, pattern="fc_0_weight")
    mod, batch = bound_module(mon)
    results = []
    for _ in range(4):
        mon.tic()
        mod.forward_backward(batch)
        results.append(mon.toc())
    assert [len(r) for r in results] == [1, 0, 1, 0]
    step, name, text = results[0][0]
    w = np.array(ARG_PARAMS["fc_0_weight"], np.float32)
    assert name == "fc_0_weight"
    np.testing.assert_allclose(float(text), np.linalg.norm(w) / np.sqrt(w.size), rtol=1e-5)
    assert [r[0][0] for r in results if r] == [1, 3]
    mon.tic()
    with caplog.at_level(logging.INFO):
        mon.toc_print()
    assert "fc_0_weight" in caplog.text and "Batch:" in caplog.text


def test_monitor_on_every_device_and_array_stats():
    mon = mx.mon.Monitor(1, stat_func=lambda x: [x.abs() * 0 + 1], pattern="data")
    mod, batch = bound_module(mon)
    assert len(mon.exes) == 1
    mon.tic()
    mod.forward(batch)
    res = mon.toc()
    assert [name for _, name, _ in res] == ["data"]
    assert res[0][2].startswith("1.0") or res[0][2].startswith("[[1.")

    mon2 = mx.mon.Monitor(1, pattern="fc_0_bias")
    data = mx.io.NDArrayIter(np.ones((4, 2), np.float32), np.ones((4, 2), np.float32),
                             batch_size=4)
    mod2 = mx.mod.Module(two_layer_regression(), context=[mx.cpu(0), mx.cpu(1)])
    mod2.bind(data.provide_data, data.provide_label)
    mod2.install_monitor(mon2)
    mod2.init_params()
    assert len(mon2.exes) == 2
    mon2.tic()
    mod2.forward_backward(next(iter(data)))
    assert len(mon2.toc()) == 2       # once per device


def test_fit_with_monitor_prints(caplog):
    mon = mx.mon.Monitor(1, pattern="fc_1_weight")
    data = mx.io.NDArrayIter(np.ones((4, 2), np.float32), np.ones((4, 2), np.float32),
                             batch_size=2)
    mod = mx.mod.Module(two_layer_regression())
    with caplog.at_level(logging.INFO):
        mod.fit(data, num_epoch=1, monitor=mon, eval_metric="mse")
    assert caplog.text.count("fc_1_weight") == 2
