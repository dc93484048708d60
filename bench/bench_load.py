"""Training steps on a busy machine: lightmod and MXNet 1.9.1 beside CPU-burning processes.

    python bench/bench_load.py [--burners 2] [--models mlp,lenet] [--steps 40] [--repeats 2]
                               [--mxnet-python /work/mxnet-venv/bin/python] [--policies fixed,load]

Users train on laptops and shared machines where other programs take cores. This starts
``--burners`` processes that spin on the CPU, then times forward + backward steps of each model
(the MLP 784-512-256-10 at batch 128, LeNet at 64, the ResNet block at 32: the networks of
bench_inference.py) in fresh subprocesses, lightmod under each thread policy of ``--policies``
(``fixed``: the default, a thread count fixed per process, results the same bits whatever the
load; ``load``: the count follows the load, bits may vary) and MXNet alternately. It prints the
median, 90th percentile and mean step time of each (the mean is what a training run's length
follows) and the ratio of medians against MXNet, and the same without burners first, for
scale. The machine's load average is printed before and after.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
from bench_inference import _loadavg

BURN = "while True:\n    pass\n"


def run_worker(backend, model, steps):
    if backend == "mxnet":
        import mxnet as mx
    else:
        import lightmod as mx
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_inference import build_mlp
    from bench_lenet import bind, build_lenet
    from bench_resnet_block import build_resnet_block
    build, batch = {"mlp": (build_mlp, 128), "lenet": (build_lenet, 64),
                    "resnet": (build_resnet_block, 32)}[model]
    sym, item_shape = build(mx)
    ex = bind(mx, sym, batch, item_shape)

    def step():
        ex.forward(is_train=True)
        ex.backward()
        for g in ex.grad_arrays:
            if g is not None:
                g.wait_to_read()

    for _ in range(5):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    ms = np.array(times) * 1e3
    return {"median": float(np.median(ms)), "p90": float(np.percentile(ms, 90)),
            "mean": float(np.mean(ms))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--burners", type=int, default=2)
    ap.add_argument("--models", default="mlp,lenet")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--policies", default="fixed,load")
    ap.add_argument("--mxnet-python", default=None)
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(run_worker(args.worker[0], args.worker[1], args.steps)))
        return

    def spawn(python, backend, model, policy=None):
        env = dict(os.environ)
        if policy:
            env["LIGHTMOD_THREAD_POLICY"] = policy
        proc = subprocess.run([python, os.path.abspath(__file__), "--worker", backend, model,
                               "--steps", str(args.steps)], capture_output=True, text=True,
                              env=env, timeout=1800)
        if proc.returncode != 0:
            sys.exit("%s worker failed:\n%s" % (backend, proc.stderr[-3000:]))
        return json.loads(proc.stdout.strip().splitlines()[-1])

    models = [m for m in args.models.split(",") if m]
    policies = [p for p in args.policies.split(",") if p]
    sides = [("lightmod " + p, sys.executable, "lightmod", p) for p in policies]
    if args.mxnet_python:
        sides.append(("mxnet", args.mxnet_python, "mxnet", None))

    def measure(label):
        results = {}
        for model in models:
            runs = {side[0]: [] for side in sides}
            for _ in range(args.repeats):
                for name, python, backend, policy in sides:
                    runs[name].append(spawn(python, backend, model, policy))
            results[model] = runs
        print("\n%s (load average %.1f)" % (label, _loadavg()))
        print("%-8s %-16s %12s %12s %12s %14s" % ("model", "side", "median ms", "p90 ms",
                                                  "mean ms", "mxnet/side"))
        for model, runs in results.items():
            ref = statistics.median(r["median"] for r in runs.get("mxnet", [])) \
                if "mxnet" in runs else None
            for name, rs in runs.items():
                median = statistics.median(r["median"] for r in rs)
                p90 = statistics.median(r["p90"] for r in rs)
                mean = statistics.median(r["mean"] for r in rs)
                ratio = "%.2fx" % (ref / median) if ref else "-"
                print("%-8s %-16s %12.2f %12.2f %12.2f %14s" % (model, name, median, p90, mean,
                                                             ratio))

    measure("quiet: no burners")
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(args.burners)]
    try:
        time.sleep(1.0)
        measure("beside %d CPU-burning processes" % args.burners)
    finally:
        for proc in burners:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
