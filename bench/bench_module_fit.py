"""Module.fit throughput: MLP 784-512-256-10 (ReLU, SoftmaxOutput), SGD momentum 0.9, batch 128.

    python bench/bench_module_fit.py [--epochs 4] [--samples 8192]
                                     [--mxnet-python /work/mxvenv/bin/python]

Trains on synthetic data with ``Module.fit`` and prints samples/s (the first epoch is a
warm-up: numba compiles there; the median of the other epochs is reported). With
``--mxnet-python`` the same script runs under MXNet 1.9.1 in a subprocess and the ratio
lightmod / MXNet is printed.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np


def run(backend, epochs, samples, batch_size):
    if backend == "mxnet":
        import mxnet as mx
    else:
        import lightmod as mx
    rng = np.random.RandomState(0)
    x = rng.uniform(0, 1, (samples, 784)).astype(np.float32)
    y = rng.randint(0, 10, samples).astype(np.float32)
    train = mx.io.NDArrayIter(x, y, batch_size=batch_size, shuffle=False,
                              last_batch_handle="discard")

    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=512, name="fc1")
    net = mx.sym.Activation(net, act_type="relu", name="relu1")
    net = mx.sym.FullyConnected(net, num_hidden=256, name="fc2")
    net = mx.sym.Activation(net, act_type="relu", name="relu2")
    net = mx.sym.FullyConnected(net, num_hidden=10, name="fc3")
    net = mx.sym.SoftmaxOutput(net, name="softmax")

    stamps = [time.perf_counter()]
    mod = mx.mod.Module(net, context=mx.cpu())
    mod.fit(train, num_epoch=epochs, optimizer="sgd",
            optimizer_params={"learning_rate": 0.05, "momentum": 0.9},
            initializer=mx.init.Xavier(),
            epoch_end_callback=lambda *args: stamps.append(time.perf_counter()))
    per_epoch = [b - a for a, b in zip(stamps, stamps[1:])]
    timed = per_epoch[1:] if len(per_epoch) > 1 else per_epoch
    seconds = statistics.median(timed)
    n = (samples // batch_size) * batch_size
    return {"backend": backend, "samples_per_s": n / seconds, "epoch_seconds": per_epoch}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--samples", type=int, default=8192)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--mxnet-python", default=None,
                        help="python of a venv with MXNet 1.9.1, to compare with")
    parser.add_argument("--backend", default="lightmod", choices=["lightmod", "mxnet"],
                        help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    result = run(args.backend, args.epochs, args.samples, args.batch_size)
    if args.json:
        print(json.dumps(result))
        return
    print("%-9s %10.0f samples/s   (epochs: %s s)" % (
        result["backend"], result["samples_per_s"],
        ", ".join("%.2f" % s for s in result["epoch_seconds"])))
    if args.mxnet_python:
        proc = subprocess.run([args.mxnet_python, os.path.abspath(__file__), "--backend",
                               "mxnet", "--json", "--epochs", str(args.epochs), "--samples",
                               str(args.samples), "--batch-size", str(args.batch_size)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit("MXNet run failed:\n" + proc.stderr[-3000:])
        ref = json.loads(proc.stdout.strip().splitlines()[-1])
        print("%-9s %10.0f samples/s   (epochs: %s s)" % (
            "mxnet", ref["samples_per_s"],
            ", ".join("%.2f" % s for s in ref["epoch_seconds"])))
        print("ratio lightmod / mxnet: %.2fx" % (result["samples_per_s"] / ref["samples_per_s"]))


if __name__ == "__main__":
    main()
