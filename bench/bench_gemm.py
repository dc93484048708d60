"""Matrix products of the benchmark networks: lightmod's product team against numpy's OpenBLAS
threads, against the machine's SGEMM peak measured in the same process.

    python bench/bench_gemm.py [--repeats 7] [--burners 0]

For each product shape of the MLP (784-512-256-10, batch 128), LeNet's fully connected layers
(batch 64) and the LSTM's gates (batch 32, hidden 200): forward ``x @ w.T``, weight gradient
``dy.T @ x`` and data gradient ``dy @ w``, the best time of ``--repeats`` rounds through
``kernels/cpu/gemm.product`` (parts on lightmod's threads) and through ``np.matmul`` at
OpenBLAS's own thread count, in GFLOP/s and as a share of a 512^3 SGEMM's GFLOP/s.
``--burners N`` runs N CPU-spinning processes beside it (a busy machine).
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

from lightmod.kernels import threads  # noqa: E402
from lightmod.kernels.cpu import gemm  # noqa: E402

# (name, batch, inputs, outputs)
LAYERS = [("mlp fc1", 128, 784, 512), ("mlp fc2", 128, 512, 256),
          ("lenet fc1", 64, 800, 500), ("lstm gates", 32, 200, 800)]


def best_us(fn, calls, repeats):
    for _ in range(3):
        fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--burners", type=int, default=0)
    args = ap.parse_args()
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
               for _ in range(args.burners)]
    try:
        run(args)
    finally:
        for proc in burners:
            proc.kill()


def run(args):
    count = threads.product_threads()
    rng = np.random.RandomState(0)
    square = rng.standard_normal((512, 512)).astype(np.float32)
    out = np.empty_like(square)
    peak = 2 * 512 ** 3 / best_us(lambda: np.matmul(square, square, out=out), 10,
                                  args.repeats) / 1e3
    print("%d threads; SGEMM 512^3 (numpy, OpenBLAS's threads): %.1f GFLOP/s; load average %s"
          % (count, peak, os.getloadavg()[0] if hasattr(os, "getloadavg") else "?"))
    print("%-11s %-5s %-16s %9s %9s %8s %8s %6s" % ("layer", "pass", "m x n x k", "numpy us",
                                                   "team us", "numpy %", "team %", "ratio"))
    for name, batch, inputs, outputs in LAYERS:
        x = rng.standard_normal((batch, inputs)).astype(np.float32)
        w = rng.standard_normal((outputs, inputs)).astype(np.float32)
        dy = rng.standard_normal((batch, outputs)).astype(np.float32)
        cases = [("fwd", x, w, np.empty((batch, outputs), np.float32), False, True),
                 ("wgrad", dy, x, np.empty((outputs, inputs), np.float32), True, False),
                 ("dgrad", dy, w, np.empty((batch, inputs), np.float32), False, False)]
        for kind, a, b, c, ta, tb in cases:
            m, n = c.shape
            k = a.shape[0] if ta else a.shape[1]
            flops = 2.0 * m * n * k
            calls = max(5, int(2e8 / flops))
            t_numpy = best_us(lambda a=a, b=b, c=c, ta=ta, tb=tb: np.matmul(
                a.T if ta else a, b.T if tb else b, out=c), calls, args.repeats)
            if gemm.product(a, b, c, ta, tb):
                t_team = best_us(lambda a=a, b=b, c=c, ta=ta, tb=tb: gemm.product(a, b, c, ta, tb),
                                 calls, args.repeats)
            else:
                t_team = float("nan")       # one part: left to numpy
            print("%-11s %-5s %-16s %9.1f %9.1f %7.0f%% %7.0f%% %5.2fx" % (
                name, kind, "%dx%dx%d" % (m, n, k), t_numpy, t_team,
                100 * flops / t_numpy / 1e3 / peak, 100 * flops / t_team / 1e3 / peak,
                t_numpy / t_team))


if __name__ == "__main__":
    main()
