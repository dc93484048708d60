"""Optimizer update bandwidth: lightmod's fused kernels vs. the machine's memory bandwidth and
MXNet 1.9.1.

    python bench/bench_optimizer.py [--size 10000000] [--repeat 20]
                                    [--mxnet-python /work/mxvenv/bin/python]

For 10M float32 parameters it times
* SGD with momentum (reads weight, grad, momentum; writes weight, momentum: 20 bytes/element)
* Adam (reads weight, grad, mean, var; writes weight, mean, var: 28 bytes/element)
through ``Optimizer.update`` (the path Module training takes) and prints effective GB/s next to
a STREAM-style triad ``a = b + s*c`` (24 bytes/element, numba, serial and prange) and a numpy
copy measured in the same run. With ``--mxnet-python`` the same updates run in MXNet 1.9.1
(``nd.sgd_mom_update`` / ``nd.adam_update`` with ``out=weight``) in a subprocess, and the
ratios are printed. Times are the median of ``--repeat`` runs after a warm-up.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MXNET_SCRIPT = r"""
import json, sys, time, statistics
import numpy as np
import mxnet as mx
n, repeat = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
w = mx.nd.array(rng.uniform(-1, 1, n).astype(np.float32))
g = mx.nd.array(rng.uniform(-1, 1, n).astype(np.float32))
m = mx.nd.zeros(n); mean = mx.nd.zeros(n); var = mx.nd.zeros(n)
def run(fn):
    fn(); mx.nd.waitall()
    times = []
    for _ in range(repeat):
        t = time.perf_counter(); fn(); mx.nd.waitall(); times.append(time.perf_counter() - t)
    return statistics.median(times)
res = {
  "sgd_mom": run(lambda: mx.nd.sgd_mom_update(w, g, m, out=w, lr=0.01, momentum=0.9, wd=1e-4,
                                              rescale_grad=0.5)),
  "adam": run(lambda: mx.nd.adam_update(w, g, mean, var, out=w, lr=0.001, wd=1e-4,
                                        rescale_grad=0.5)),
}
print(json.dumps(res))
"""


def median_time(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def triad_kernels():
    from numba import njit, prange

    @njit(parallel=True)
    def triad_parallel(a, b, c, s):
        for i in prange(a.size):
            a[i] = b[i] + s * c[i]

    @njit
    def triad_serial(a, b, c, s):
        for i in range(a.size):
            a[i] = b[i] + s * c[i]

    return triad_serial, triad_parallel


def gbs(nbytes, seconds):
    return nbytes / seconds / 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--mxnet-python", default=None)
    args = parser.parse_args()
    n, repeat = args.size, args.repeat

    import lightmod as mx
    from lightmod.kernels import cpu as k

    rng = np.random.default_rng(0)
    f32 = np.float32
    a, b, c = (rng.uniform(-1, 1, n).astype(f32) for _ in range(3))
    triad_serial, triad_parallel = triad_kernels()
    bw = {
        "triad (numba serial)": gbs(24 * n, median_time(lambda: triad_serial(a, b, c, f32(0.5)),
                                                        repeat)),
        "triad (numba prange)": gbs(24 * n, median_time(
            lambda: triad_parallel(a, b, c, f32(0.5)), repeat)),
        "copy (numpy)": gbs(8 * n, median_time(lambda: np.copyto(a, b), repeat)),
    }
    triad = max(bw["triad (numba serial)"], bw["triad (numba prange)"])

    w = mx.nd.array(rng.uniform(-1, 1, n).astype(f32))
    g = mx.nd.array(rng.uniform(-1, 1, n).astype(f32))
    sgd = mx.optimizer.SGD(learning_rate=0.01, momentum=0.9, wd=1e-4, rescale_grad=0.5)
    sgd_state = sgd.create_state(0, w)
    adam = mx.optimizer.Adam(learning_rate=0.001, wd=1e-4, rescale_grad=0.5)
    adam_state = adam.create_state(0, w)
    ours = {
        "sgd_mom": median_time(lambda: sgd.update(0, w, g, sgd_state), repeat),
        "adam": median_time(lambda: adam.update(0, w, g, adam_state), repeat),
    }
    # the same kernels forced serial / parallel, to show which the size threshold picks
    saved = k.optimizer.PARALLEL_MIN
    variants = {}
    for label, threshold in (("serial", n + 1), ("prange", 0)):
        k.optimizer.PARALLEL_MIN = threshold
        variants[label] = {
            "sgd_mom": median_time(lambda: sgd.update(0, w, g, sgd_state), repeat),
            "adam": median_time(lambda: adam.update(0, w, g, adam_state), repeat)}
    k.optimizer.PARALLEL_MIN = saved

    mxnet = None
    if args.mxnet_python:
        out = subprocess.run([args.mxnet_python, "-c", MXNET_SCRIPT, str(n), str(repeat)],
                             capture_output=True, text=True, check=True)
        mxnet = json.loads(out.stdout.strip().splitlines()[-1])

    print("optimizer update bandwidth, %d float32 parameters, median of %d runs" % (n, repeat))
    print("machine bandwidth (same run):")
    for name, value in bw.items():
        print("  %-22s %7.2f GB/s" % (name, value))
    print("%-10s %12s %10s %9s %14s %14s %12s" % ("update", "lightmod ms", "GB/s", "/triad",
                                                   "serial GB/s", "prange GB/s", "vs MXNet"))
    for name, nbytes in (("sgd_mom", 20 * n), ("adam", 28 * n)):
        line = "%-10s %12.2f %10.2f %8.0f%% %14.2f %14.2f" % (
            name, ours[name] * 1e3, gbs(nbytes, ours[name]), 100 * gbs(nbytes, ours[name]) / triad,
            gbs(nbytes, variants["serial"][name]), gbs(nbytes, variants["prange"][name]))
        if mxnet is not None:
            line += " %11.2fx" % (mxnet[name] / ours[name])
        print(line)
    if mxnet is not None:
        print("MXNet 1.9.1: " + ", ".join("%s %.2f ms (%.2f GB/s)" % (
            name, mxnet[name] * 1e3, gbs(nbytes, mxnet[name]))
            for name, nbytes in (("sgd_mom", 20 * n), ("adam", 28 * n))))


if __name__ == "__main__":
    main()
