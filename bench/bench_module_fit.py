"""Module.fit throughput: MLP 784-512-256-10 (ReLU, SoftmaxOutput), SGD momentum 0.9, batch 128.

    python bench/bench_module_fit.py [--epochs 4] [--samples 8192] [--repeats 3]
                                     [--mxnet-python /work/mxvenv/bin/python]

Trains on synthetic data with ``Module.fit`` and prints samples/s (the first epoch is a
warm-up: numba compiles there; the median of the other epochs is reported) and the process
CPU seconds per timed epoch (all threads; on a loaded machine wall time depends on the share
of the cores a process gets, CPU time on how much work it does).

With ``--mxnet-python`` the same script also runs under MXNet 1.9.1, and the two backends run
alternately in fresh subprocesses ``--repeats`` times (lightmod, mxnet, lightmod, ...), so
both see the same machine load; the median of the per-repeat ratios lightmod / MXNet is
printed together with the load average before and after.
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

    stamps = [(time.perf_counter(), time.process_time())]
    mod = mx.mod.Module(net, context=mx.cpu())
    mod.fit(train, num_epoch=epochs, optimizer="sgd",
            optimizer_params={"learning_rate": 0.05, "momentum": 0.9},
            initializer=mx.init.Xavier(),
            epoch_end_callback=lambda *args: stamps.append(
                (time.perf_counter(), time.process_time())))
    per_epoch = [b[0] - a[0] for a, b in zip(stamps, stamps[1:])]
    cpu_per_epoch = [b[1] - a[1] for a, b in zip(stamps, stamps[1:])]
    timed = slice(1, None) if len(per_epoch) > 1 else slice(None)
    seconds = statistics.median(per_epoch[timed])
    n = (samples // batch_size) * batch_size
    return {"backend": backend, "samples_per_s": n / seconds, "epoch_seconds": per_epoch,
            "cpu_seconds": statistics.median(cpu_per_epoch[timed])}


def _report(result):
    print("%-9s %8.0f samples/s  cpu %.2f s/epoch  (epochs: %s s)" % (
        result["backend"], result["samples_per_s"], result["cpu_seconds"],
        ", ".join("%.2f" % s for s in result["epoch_seconds"])), flush=True)


def _subprocess(python, backend, args):
    proc = subprocess.run([python, os.path.abspath(__file__), "--backend", backend, "--json",
                           "--epochs", str(args.epochs), "--samples", str(args.samples),
                           "--batch-size", str(args.batch_size)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit("%s run failed:\n%s" % (backend, proc.stderr[-3000:]))
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _load():
    return "%.2f %.2f %.2f" % os.getloadavg() if hasattr(os, "getloadavg") else "n/a"


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--samples", type=int, default=8192)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3,
                        help="alternating lightmod / MXNet runs (with --mxnet-python)")
    parser.add_argument("--mxnet-python", default=None,
                        help="python of a venv with MXNet 1.9.1, to compare with")
    parser.add_argument("--backend", default="lightmod", choices=["lightmod", "mxnet"],
                        help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.json:
        print(json.dumps(run(args.backend, args.epochs, args.samples, args.batch_size)))
        return
    if not args.mxnet_python:
        _report(run(args.backend, args.epochs, args.samples, args.batch_size))
        return
    print("load average before: %s" % _load(), flush=True)
    ratios, cpu_ratios = [], []
    for _ in range(args.repeats):
        ours = _subprocess(sys.executable, "lightmod", args)
        _report(ours)
        ref = _subprocess(args.mxnet_python, "mxnet", args)
        _report(ref)
        ratios.append(ours["samples_per_s"] / ref["samples_per_s"])
        cpu_ratios.append(ref["cpu_seconds"] / ours["cpu_seconds"])
    print("load average after:  %s" % _load())
    print("ratio lightmod / mxnet (samples/s): median %.2fx  (runs: %s)" % (
        statistics.median(ratios), ", ".join("%.2f" % r for r in ratios)))
    print("CPU work mxnet / lightmod (cpu s per epoch): median %.2fx" % statistics.median(
        cpu_ratios))


if __name__ == "__main__":
    main()
