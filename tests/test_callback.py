"""mx.callback: Speedometer, ProgressBar, log_train_metric, do_checkpoint, module_checkpoint,
LogValidationMetricsCallback (MXNet 1.9.1 messages)."""
import logging
import sys
import types
from collections import namedtuple

import numpy as np

import lightmod as mx
from lightmod import callback as C

# the fields of lightmod.model.BatchEndParam, which the callbacks read
Param = namedtuple("BatchEndParam", ["epoch", "nbatch", "eval_metric", "locals"])


def _acc_metric(correct, total):
    m = mx.metric.Accuracy()
    label = np.zeros(total)
    pred = np.zeros(total)
    pred[correct:] = 1
    m.update([mx.nd.array(label)], [mx.nd.array(pred)])
    return m


def _messages(caplog):
    return [r.getMessage() for r in caplog.records]


def test_speedometer_auto_reset(caplog, monkeypatch):
    clock = iter(np.arange(0.0, 100.0, 0.5))
    monkeypatch.setattr(C.time, "time", lambda: float(next(clock)))
    metric = _acc_metric(3, 4)
    speed = C.Speedometer(batch_size=10, frequent=2)
    with caplog.at_level(logging.INFO):
        for nbatch in range(5):
            speed(Param(1, nbatch, metric, None))
    msgs = _messages(caplog)
    assert msgs == ["Epoch[1] Batch [0-2]\tSpeed: 40.00 samples/sec\taccuracy=0.750000",
                    "Epoch[1] Batch [2-4]\tSpeed: 40.00 samples/sec\taccuracy=nan"]
    assert metric.num_inst == 0 and metric.global_num_inst == 4


def test_speedometer_cumulative_no_metric_and_new_epoch(caplog, monkeypatch):
    clock = iter(np.arange(0.0, 100.0, 1.0))
    monkeypatch.setattr(C.time, "time", lambda: float(next(clock)))
    metric = mx.metric.create(["acc", "mae"])
    metric.update([mx.nd.array([0, 1])], [mx.nd.array([0, 1])])
    speed = C.Speedometer(batch_size=4, frequent=1, auto_reset=False)
    with caplog.at_level(logging.INFO):
        speed(Param(0, 0, metric, None))   # starts the clock only
        speed(Param(0, 1, metric, None))
        speed(Param(1, 0, metric, None))   # a new epoch restarts the clock
        speed(Param(1, 1, None, None))
    assert _messages(caplog) == [
        "Epoch[0] Batch [0-1]\tSpeed: 4.00 samples/sec\taccuracy=1.000000\tmae=0.000000",
        "Iter[1] Batch [1]\tSpeed: 4.00 samples/sec"]
    assert metric.get()[1] == [1.0, 0.0]  # not reset


def test_log_train_metric_and_validation(caplog):
    metric = _acc_metric(1, 2)
    cb = C.log_train_metric(period=2, auto_reset=True)
    with caplog.at_level(logging.INFO):
        cb(Param(3, 1, metric, None))
        cb(Param(3, 2, metric, None))
        cb(Param(3, 4, None, None))
    assert _messages(caplog) == ["Iter[3] Batch[2] Train-accuracy=0.500000"]
    assert metric.num_inst == 0
    caplog.clear()
    metric = _acc_metric(2, 2)
    with caplog.at_level(logging.INFO):
        C.LogValidationMetricsCallback()(Param(5, 0, metric, None))
        C.LogValidationMetricsCallback()(Param(5, 0, None, None))
    assert _messages(caplog) == ["Epoch[5] Validation-accuracy=1.000000"]


def test_progress_bar(caplog):
    bar = C.ProgressBar(total=8, length=10)
    with caplog.at_level(logging.INFO):
        bar(Param(0, 3, None, None))
        bar(Param(0, 8, None, None))
    assert _messages(caplog) == ["[====------] 38%\r", "[==========] 100%\r"]


def test_do_checkpoint_calls_model_save_checkpoint(monkeypatch):
    calls = []
    fake = types.ModuleType("lightmod.model")
    fake.save_checkpoint = lambda *args: calls.append(args)
    monkeypatch.setitem(sys.modules, "lightmod.model", fake)
    cb = C.do_checkpoint("run/prefix", period=2)
    for epoch in range(5):
        cb(epoch, "sym", {"a": 1}, {"b": 2})
    assert calls == [("run/prefix", 2, "sym", {"a": 1}, {"b": 2}),
                     ("run/prefix", 4, "sym", {"a": 1}, {"b": 2})]
    calls.clear()
    cb = C.do_checkpoint("p", period=0)  # period < 1 means every epoch
    cb(0, None, None, None)
    assert [c[1] for c in calls] == [1]


def test_module_checkpoint():
    class FakeModule:
        def __init__(self):
            self.calls = []

        def save_checkpoint(self, prefix, epoch, save_optimizer_states):
            self.calls.append((prefix, epoch, save_optimizer_states))

    mod = FakeModule()
    cb = C.module_checkpoint(mod, "ck", period=3, save_optimizer_states=True)
    for epoch in range(7):
        cb(epoch)
    assert mod.calls == [("ck", 3, True), ("ck", 6, True)]


def test_names():
    assert mx.callback is C
    for name in ("Speedometer", "ProgressBar", "do_checkpoint", "module_checkpoint",
                 "log_train_metric", "LogValidationMetricsCallback"):
        assert callable(getattr(mx.callback, name))
