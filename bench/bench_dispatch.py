"""Per-operator dispatch cost: a deep, narrow graph of small element-wise operators.

    python bench/bench_dispatch.py [--ops 60] [--width 16] [--iters 300] [--repeats 3]
                                   [--mxnet-python /work/mxnet-venv/bin/python] [--profile]

The graph: one (4, width) input and a chain of ``--ops`` element-wise operators (tanh, a
scalar multiply, an add of a second input, sigmoid, a scalar add, relu... repeated), closed by
MakeLoss so that ``backward()`` needs no head gradient. The arrays are so small that the time
of a training step (forward + backward through ``simple_bind``'s executor) is almost all
per-operator overhead; the figure is microseconds per operator, forward plus backward.
lightmod and MXNet 1.9.1 run the same script in fresh subprocesses, alternately (medians over
repeats, the load average printed). ``--profile`` prints lightmod's cProfile by own time.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np


def build_chain(mx, ops):
    """A chain of ``ops`` element-wise operators over inputs 'data' and 'other'."""
    x = mx.sym.Variable("data")
    other = mx.sym.Variable("other")
    makers = (lambda v: mx.sym.tanh(v),
              lambda v: v * 0.9,
              lambda v: v + other,
              lambda v: mx.sym.sigmoid(v),
              lambda v: v + 0.1,
              lambda v: mx.sym.relu(v),
              lambda v: v * other)
    for i in range(ops):
        x = makers[i % len(makers)](x)
    return mx.sym.MakeLoss(x)


def run_worker(backend, ops, width, iters, profile):
    if backend == "mxnet":
        import mxnet as mx
    else:
        import lightmod as mx
    sym = build_chain(mx, ops)
    ex = sym.simple_bind(mx.cpu(), data=(4, width), other=(4, width))
    rng = np.random.RandomState(0)
    ex.arg_dict["data"][:] = rng.uniform(-1, 1, (4, width))
    ex.arg_dict["other"][:] = rng.uniform(0.5, 1, (4, width))

    def step():
        ex.forward(is_train=True)
        ex.backward()

    for _ in range(20):
        step()
    for g in ex.grad_arrays:
        g.wait_to_read()
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    for g in ex.grad_arrays:
        g.wait_to_read()
    wall = time.perf_counter() - t0
    n_ops = ops + 1  # the chain and MakeLoss
    result = {"backend": backend, "us_per_op": 1e6 * wall / iters / n_ops,
              "us_per_step": 1e6 * wall / iters}
    if profile:
        import cProfile
        import io
        import pstats
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(iters):
            step()
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(20)
        result["profile"] = text.getvalue()
    return result


def _loadavg():
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=60)
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--mxnet-python", default=None)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--worker", choices=["lightmod", "mxnet"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(run_worker(args.worker, args.ops, args.width, args.iters,
                                    args.profile)))
        return

    def spawn(python, backend, profile=False):
        cmd = [python, os.path.abspath(__file__), "--worker", backend, "--ops", str(args.ops),
               "--width", str(args.width), "--iters", str(args.iters)]
        proc = subprocess.run(cmd + (["--profile"] if profile else []), capture_output=True,
                              text=True)
        if proc.returncode != 0:
            sys.exit("%s worker failed:\n%s" % (backend, proc.stderr[-3000:]))
        return json.loads(proc.stdout.strip().splitlines()[-1])

    load_before = _loadavg()
    runs = {"lightmod": [], "mxnet": []}
    for _ in range(args.repeats):
        runs["lightmod"].append(spawn(sys.executable, "lightmod"))
        if args.mxnet_python:
            runs["mxnet"].append(spawn(args.mxnet_python, "mxnet"))
    profile = spawn(sys.executable, "lightmod", True)["profile"] if args.profile else None
    load_after = _loadavg()
    print("deep narrow graph: %d element-wise ops + MakeLoss on (4, %d), %d steps x %d repeats "
          "(load average %.1f -> %.1f)" % (args.ops, args.width, args.iters, args.repeats,
                                           load_before, load_after))
    print("%-10s %14s %14s" % ("backend", "us/op fwd+bwd", "us/step"))
    for backend, rs in runs.items():
        if rs:
            print("%-10s %14.2f %14.1f" % (backend, statistics.median(r["us_per_op"] for r in rs),
                                           statistics.median(r["us_per_step"] for r in rs)))
    if runs["mxnet"]:
        ratio = statistics.median(b["us_per_op"] / a["us_per_op"]
                                  for a, b in zip(runs["lightmod"], runs["mxnet"]))
        print("lightmod speed = %.2fx mxnet" % ratio)
    if profile:
        print(profile)


if __name__ == "__main__":
    main()
