"""Operator throughput: lightmod against numpy doing the same math, measured side by side.

    python bench/bench_ops.py [--repeats 7] [--min-time 0.05] [--only relu,fc_bwd_128]

Each case runs a lightmod call and the equivalent numpy code alternately (lightmod, numpy,
lightmod, ...) ``--repeats`` times; one measurement is the mean time of as many back-to-back
calls as fill ``--min-time`` seconds. The medians are printed with their ratio lightmod / numpy
(below 1: lightmod is faster), for wall time and for the process's CPU time (steadier on a
loaded machine, but blind to threads waiting for a core), and the load average: on a shared
machine both sides see the same load only when measured together. Both sides use the same BLAS
threads (lightmod's
thread policy, ``lightmod/kernels/threads.py``, sets OpenBLAS process-wide).

Cases
-----
* element-wise on 1M float32: ``nd.relu``, ``nd.sigmoid``, ``nd.broadcast_add`` of a
  (1000, 1000) and a (1, 1000) array; each both allocating its result and writing into
  ``out=`` (numpy: ``np.maximum(x, 0)``, ``1 / (1 + np.exp(-x))``, ``a + b``; with out=).
* FullyConnected 128x784->512 and 256x512->512: forward through ``nd.FullyConnected``
  (numpy: ``x @ w.T + b``), and forward + backward through an executor bound once with
  ``simple_bind`` (numpy: the forward, ``dx = dy @ w``, ``dw = dy.T @ x``, ``db = dy.sum(0)``,
  into preallocated arrays like the executor's).
"""
import argparse
import os
import statistics
import time

import numpy as np

import lightmod as mx


def _timed(fn, min_time):
    """Mean (wall, process CPU) seconds per call of ``fn`` over as many calls as fill
    ``min_time`` of wall time."""
    fn()
    calls, start, cpu = 0, time.perf_counter(), time.process_time()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return elapsed / calls, (time.process_time() - cpu) / calls


def _elementwise_cases(rng):
    x_np = rng.standard_normal((1000, 1000)).astype(np.float32)
    b_np = rng.standard_normal((1, 1000)).astype(np.float32)
    x, b = mx.nd.array(x_np), mx.nd.array(b_np)
    out, out_np = mx.nd.empty((1000, 1000)), np.empty((1000, 1000), np.float32)

    def np_sigmoid_out():
        np.negative(x_np, out=out_np)
        np.exp(out_np, out=out_np)
        np.add(out_np, 1, out=out_np)
        np.reciprocal(out_np, out=out_np)

    yield "relu 1M", lambda: mx.nd.relu(x), lambda: np.maximum(x_np, 0)
    yield "relu 1M out=", lambda: mx.nd.relu(x, out=out), \
        lambda: np.maximum(x_np, 0, out=out_np)
    yield "sigmoid 1M", lambda: mx.nd.sigmoid(x), lambda: 1 / (1 + np.exp(-x_np))
    yield "sigmoid 1M out=", lambda: mx.nd.sigmoid(x, out=out), np_sigmoid_out
    yield "broadcast_add 1Mx1K", lambda: mx.nd.broadcast_add(x, b), lambda: x_np + b_np
    yield "broadcast_add out=", lambda: mx.nd.broadcast_add(x, b, out=out), \
        lambda: np.add(x_np, b_np, out=out_np)
    yield "a + b (NDArray op)", lambda: x + b, lambda: x_np + b_np


def _fc_cases(rng, batch, k, h):
    x_np = rng.standard_normal((batch, k)).astype(np.float32)
    w_np = (rng.standard_normal((h, k)) * 0.05).astype(np.float32)
    b_np = rng.standard_normal(h).astype(np.float32)
    dy_np = rng.standard_normal((batch, h)).astype(np.float32)
    x, w, b = mx.nd.array(x_np), mx.nd.array(w_np), mx.nd.array(b_np)
    tag = "%dx%d->%d" % (batch, k, h)

    yield "FC fwd nd %s" % tag, lambda: mx.nd.FullyConnected(x, w, b, num_hidden=h), \
        lambda: x_np @ w_np.T + b_np

    sym = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=h, name="fc")
    exe = sym.simple_bind(mx.cpu(), data=(batch, k), grad_req="write")
    exe.copy_params_from({"data": x, "fc_weight": w, "fc_bias": b})
    head = [mx.nd.array(dy_np)]
    y, dx, dw, db = (np.empty((batch, h), np.float32), np.empty((batch, k), np.float32),
                     np.empty((h, k), np.float32), np.empty(h, np.float32))

    def lightmod_step():
        exe.forward(is_train=True)
        exe.backward(head)

    def numpy_step():
        np.matmul(x_np, w_np.T, out=y)
        np.add(y, b_np, out=y)
        np.matmul(dy_np, w_np, out=dx)
        np.matmul(dy_np.T, x_np, out=dw)
        np.sum(dy_np, axis=0, out=db)

    lightmod_step()
    numpy_step()
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), y, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(exe.grad_dict["fc_weight"].asnumpy(), dw, rtol=1e-4, atol=1e-3)
    yield "FC fwd+bwd exec %s" % tag, lightmod_step, numpy_step


def _medians(pairs):
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


def _load():
    return "%.2f %.2f %.2f" % os.getloadavg() if hasattr(os, "getloadavg") else "n/a"


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--min-time", type=float, default=0.05)
    parser.add_argument("--only", default="",
                        help="comma-separated substrings of the case names to run")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    cases = list(_elementwise_cases(rng))
    cases += list(_fc_cases(rng, 128, 784, 512)) + list(_fc_cases(rng, 256, 512, 512))
    if args.only:
        wanted = [s.strip() for s in args.only.split(",") if s.strip()]
        cases = [c for c in cases if any(w in c[0] for w in wanted)]

    print("load average before: %s" % _load(), flush=True)
    print("%-28s %11s %11s %7s   %11s %11s %7s" % (
        "case", "lightmod us", "numpy us", "ratio", "lightmod cpu", "numpy cpu", "ratio"))
    for name, ours, ref in cases:
        ours_t, ref_t = [], []
        for _ in range(args.repeats):
            ours_t.append(_timed(ours, args.min_time))
            ref_t.append(_timed(ref, args.min_time))
        (a, a_cpu), (b, b_cpu) = _medians(ours_t), _medians(ref_t)
        print("%-28s %11.1f %11.1f %6.2fx   %11.1f %11.1f %6.2fx" % (
            name, a * 1e6, b * 1e6, a / b, a_cpu * 1e6, b_cpu * 1e6, a_cpu / b_cpu),
            flush=True)
    print("load average after:  %s" % _load())


if __name__ == "__main__":
    main()
