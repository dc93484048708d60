"""A planned training step allocates no arrays (Module.forward_backward + update).

Measured in a fresh interpreter after warm-up steps, over one step per bucket: tracemalloc
traces every numpy buffer (and every Python object); a profile hook reads the traced total at
every call and return (numba's dispatcher reports its calls too) together with the peak since
the previous event, and between two events the peak may not exceed the total at the first by
``EVENT_LIMIT`` bytes or more. So every numpy array of ``EVENT_LIMIT`` bytes or more made during
the step is seen, even a temporary of one expression; the Python bookkeeping of a step never
grows the total that much between two events (a call's frame is about 1.5 KiB). Scratch arrays
made inside numba kernels go through numba's own allocator, which this probe does not see.

A control run adds one ``np.zeros(1024)`` (8 KiB) to the step and must be caught, so the
probe is known to see arrays of that size.
"""
import json
import os
import subprocess
import sys

import pytest

EVENT_LIMIT = 4096

PROBE = r'''
import json, sys, tracemalloc
import numpy as np
import lightmod as mx

CONTROL = sys.argv[1] == "control"
rng = np.random.RandomState(0)


def mlp():
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=256, name="fc1")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.FullyConnected(net, num_hidden=128, name="fc2")
    net = mx.sym.Activation(net, act_type="tanh")
    net = mx.sym.FullyConnected(net, num_hidden=10, name="fc3")
    net = mx.sym.SoftmaxOutput(net, name="softmax")
    mod = mx.mod.Module(net, context=mx.cpu())
    mod.bind(data_shapes=[("data", (64, 100))], label_shapes=[("softmax_label", (64,))])
    batch = mx.io.DataBatch([mx.nd.array(rng.rand(64, 100))],
                            [mx.nd.array(rng.randint(0, 10, 64))])
    return mod, [batch]


def lstm():
    stack = mx.rnn.SequentialRNNCell()
    stack.add(mx.rnn.LSTMCell(64, prefix="l0_"))
    stack.add(mx.rnn.GRUCell(64, prefix="l1_"))

    def sym_gen(length):
        data = mx.sym.Variable("data")
        label = mx.sym.Variable("softmax_label")
        embed = mx.sym.Embedding(data, input_dim=50, output_dim=32, name="embed")
        stack.reset()
        out, _ = stack.unroll(length, inputs=embed, merge_outputs=True)
        pred = mx.sym.FullyConnected(mx.sym.Reshape(out, shape=(-1, 64)), num_hidden=50,
                                     name="pred")
        pred = mx.sym.SoftmaxOutput(pred, mx.sym.Reshape(label, shape=(-1,)), name="softmax")
        return pred, ("data",), ("softmax_label",)

    mod = mx.mod.BucketingModule(sym_gen, default_bucket_key=5, context=mx.cpu())
    mod.bind(data_shapes=[("data", (64, 5))], label_shapes=[("softmax_label", (64, 5))])
    batches = []
    for length in (5, 3):
        batches.append(mx.io.DataBatch(
            [mx.nd.array(rng.randint(0, 50, (64, length)))],
            [mx.nd.array(rng.randint(0, 50, (64, length)))], bucket_key=length,
            provide_data=[mx.io.DataDesc("data", (64, length))],
            provide_label=[mx.io.DataDesc("softmax_label", (64, length))]))
    return mod, batches


report = {}
for name, build in (("mlp", mlp), ("lstm", lstm)):
    mod, batches = build()
    mod.init_params(initializer=mx.init.Xavier())
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.01,
                                                          "momentum": 0.9, "wd": 1e-5})

    def step(batch):
        mod.forward_backward(batch)
        mod.update()
        if CONTROL:
            step.keep = np.zeros(1024)

    for _ in range(3):
        for b in batches:
            step(b)
    tracemalloc.start(1)
    for b in batches:
        step(b)
    worst = [0, None]
    last = [0]

    def hook(frame, event, arg):
        cur, peak = tracemalloc.get_traced_memory()
        if peak - last[0] > worst[0]:
            worst[0] = peak - last[0]
            worst[1] = "%s %s:%d" % (event, frame.f_code.co_filename, frame.f_lineno)
        tracemalloc.reset_peak()
        last[0] = cur

    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    last[0] = base
    sys.setprofile(hook)
    for b in batches:
        step(b)
    sys.setprofile(None)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    report[name] = {"largest_event_growth": worst[0], "where": worst[1], "peak": peak}
print(json.dumps(report))
'''


def _probe(mode):
    env = dict(os.environ, PYTHONSAFEPATH="1")
    proc = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("fusion", ["1", "0"])
def test_training_step_allocates_no_arrays(monkeypatch, fusion):
    monkeypatch.setenv("LIGHTMOD_FUSION", fusion)
    report = _probe("step")
    for model, r in report.items():
        assert r["largest_event_growth"] < EVENT_LIMIT, (model, r)


def test_probe_sees_a_small_array():
    report = _probe("control")
    for model, r in report.items():
        assert r["largest_event_growth"] >= 8192, (model, r)
