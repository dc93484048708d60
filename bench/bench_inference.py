"""Inference and training throughput of three networks, and convolution GFLOP/s per layer:
lightmod vs MXNet 1.9.1, side by side in one invocation.

    python bench/bench_inference.py [--repeats 3] [--iters 30] [--nets mlp,lenet,resnet]
                                    [--mxnet-python /work/mxnet-venv/bin/python] [--no-conv]
                                    [--threads N]

Networks (each through its symbol executor, ``simple_bind`` then ``forward(is_train=False)``
for inference and ``forward(is_train=True)`` + ``backward()`` for a training step):

* MLP 784-512-256-10 with relu, batch 128;
* LeNet (bench/bench_lenet.py), batch 64;
* the ResNet block of bench/bench_resnet_block.py (conv 3x3 32ch + BN + relu stem, residual
  block, global average pooling, FC 10), batch 32.

Each repeat runs one lightmod subprocess and then one MXNet subprocess, so both see about the
same machine load; a worker reports the best time of a few timed rounds, and the ratio of a
repeat is lightmod's throughput over MXNet's. The median ratio over repeats is printed with the
load average before and after.

Convolution layers (the four of LeNet and the ResNet block) are timed alone, forward,
backward-data (only the data gradient requested) and backward-weight (only weight and bias),
and reported in GFLOP/s (2 * N * F * C * K * O per direction) next to the SGEMM GFLOP/s the
same process measures with ``np.matmul`` on a 512^3 float32 product (MXNet's worker runs
numpy's OpenBLAS too, so its fractions are against the same yardstick).

OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are removed from the workers' environment so OpenBLAS
picks its kernels for this machine itself.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_lenet import bind, build_lenet  # noqa: E402
from bench_resnet_block import build_resnet_block  # noqa: E402


def build_mlp(mx):
    net = mx.sym.Variable("data")
    for i, hidden in enumerate((512, 256)):
        net = mx.sym.FullyConnected(net, num_hidden=hidden, name="fc%d" % (i + 1))
        net = mx.sym.Activation(net, act_type="relu", name="relu%d" % (i + 1))
    net = mx.sym.FullyConnected(net, num_hidden=10, name="fc3")
    return mx.sym.SoftmaxOutput(net, name="softmax"), (784,)


NETS = {"mlp": (build_mlp, 128), "lenet": (build_lenet, 64), "resnet": (build_resnet_block, 32)}

# (name, batch, channels, size, filters, kernel, pad)
CONV_LAYERS = [("lenet.conv1", 64, 1, 28, 20, 5, 0), ("lenet.conv2", 64, 20, 12, 50, 5, 0),
               ("resnet.stem", 32, 3, 32, 32, 3, 1), ("resnet.block", 32, 32, 32, 32, 3, 1)]


def _sync(ex):
    for arr in list(ex.outputs) + [g for g in ex.grad_arrays if g is not None]:
        arr.wait_to_read()


def best_time(step, iters, rounds=3, warmup=3, with_cpu=False):
    """Best seconds per call over ``rounds`` rounds of ``iters`` calls (with ``with_cpu``:
    (wall, process CPU seconds) of that round, all threads counted)."""
    for _ in range(warmup):
        step()
    best = (float("inf"), float("inf"))
    for _ in range(rounds):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(iters):
            step()
        best = min(best, ((time.perf_counter() - t0) / iters, (time.process_time() - c0) / iters))
    return best if with_cpu else best[0]


def time_network(mx, build, batch, iters):
    sym, item_shape = build(mx)
    ex = bind(mx, sym, batch, item_shape)

    def train():
        ex.forward(is_train=True)
        ex.backward()
        _sync(ex)

    def infer():
        ex.forward(is_train=False)
        _sync(ex)

    # inference first: a training step changes the moving statistics, not the work
    out = {}
    for mode, step in (("inference", infer), ("train", train)):
        wall, cpu = best_time(step, iters, with_cpu=True)
        out[mode] = batch / wall
        out[mode + "_cpu_ms"] = cpu * 1e3
    return out


def sgemm_gflops(size=512, iters=20):
    a = np.random.RandomState(0).uniform(-1, 1, (size, size)).astype(np.float32)
    b = a.copy()
    c = np.empty_like(a)
    seconds = best_time(lambda: np.matmul(a, b, out=c), iters)
    return 2.0 * size ** 3 / seconds / 1e9


def time_conv_layer(mx, layer, iters):
    """GFLOP/s of one convolution layer: forward, backward-data, backward-weight."""
    name, batch, chans, size, filters, kern, pad = layer
    data = mx.sym.Variable("data")
    sym = mx.sym.Convolution(data, kernel=(kern, kern), pad=(pad, pad), num_filter=filters,
                             name="conv")
    out_size = size + 2 * pad - kern + 1
    flops = 2.0 * batch * filters * chans * kern * kern * out_size * out_size
    rng = np.random.RandomState(0)
    result = {}
    for direction, req in (("forward", "null"), ("backward_data", {"data": "write"}),
                           ("backward_weight", {"conv_weight": "write", "conv_bias": "write"})):
        ex = sym.simple_bind(mx.cpu(), data=(batch, chans, size, size), grad_req=req)
        for arr in ex.arg_dict.values():
            arr[:] = rng.uniform(-1, 1, arr.shape)
        if direction == "forward":
            def step(ex=ex):
                ex.forward(is_train=False)
                _sync(ex)
        else:
            head = mx.nd.array(rng.uniform(-1, 1, ex.outputs[0].shape))
            ex.forward(is_train=True)

            def step(ex=ex, head=head):
                ex.backward(head)
                _sync(ex)
        result[direction] = flops / best_time(step, iters) / 1e9
    return name, result


def run_worker(backend, nets, iters, conv):
    if backend == "mxnet":
        import mxnet as mx
    else:
        import lightmod as mx
    out = {"nets": {}, "conv": {}}
    for net in nets:
        build, batch = NETS[net]
        out["nets"][net] = time_network(mx, build, batch, iters)
    if conv:
        out["sgemm_gflops"] = sgemm_gflops()
        # OpenBLAS's threads spin for ~0.1 s after a threaded product (measured: 110 ms of a
        # core) before they sleep; the first layer timed in that window (LeNet's conv1
        # forward) shared a core with them (60 GFLOP/s, 105 after this pause)
        time.sleep(0.5)
        for layer in CONV_LAYERS:
            name, res = time_conv_layer(mx, layer, iters)
            out["conv"][name] = res
    return out


def _loadavg():
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--nets", default="mlp,lenet,resnet")
    ap.add_argument("--mxnet-python", default=None)
    ap.add_argument("--no-conv", action="store_true")
    ap.add_argument("--threads", type=int, default=None,
                    help="threads of both workers (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, "
                         "LIGHTMOD_NUM_THREADS); default: each library's own choice")
    ap.add_argument("--worker", choices=["lightmod", "mxnet"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    nets = [n for n in args.nets.split(",") if n]
    for n in nets:
        if n not in NETS:
            sys.exit("unknown network %r (choose from %s)" % (n, ", ".join(NETS)))
    if args.worker:
        print(json.dumps(run_worker(args.worker, nets, args.iters, not args.no_conv)))
        return

    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    if args.threads:
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "LIGHTMOD_NUM_THREADS",
                     "MXNET_CPU_WORKER_NTHREADS"):
            env[name] = str(args.threads)

    def spawn(python, backend):
        cmd = [python, os.path.abspath(__file__), "--worker", backend, "--iters",
               str(args.iters), "--nets", ",".join(nets)] + (["--no-conv"] if args.no_conv else [])
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            sys.exit("%s worker failed:\n%s" % (backend, proc.stderr[-3000:]))
        return json.loads(proc.stdout.strip().splitlines()[-1])

    load_before = _loadavg()
    runs = {"lightmod": [], "mxnet": []}
    for _ in range(args.repeats):
        runs["lightmod"].append(spawn(sys.executable, "lightmod"))
        if args.mxnet_python:
            runs["mxnet"].append(spawn(args.mxnet_python, "mxnet"))
    load_after = _loadavg()
    both = bool(runs["mxnet"])
    print("%d repeats x %d timed batches (best of 3 rounds), threads: %s; load average %.2f "
          "-> %.2f" % (args.repeats, args.iters, args.threads or "default", load_before,
                       load_after))
    print("%-8s %-10s %6s %12s %12s %10s %16s" % ("net", "mode", "batch", "lightmod/s",
                                                  "mxnet/s", "ratio", "cpu ms lm/mx"))
    for net in nets:
        for mode in ("inference", "train"):
            lm = [r["nets"][net][mode] for r in runs["lightmod"]]
            line = "%-8s %-10s %6d %12.0f" % (net, mode, NETS[net][1], max(lm))
            if both:
                mx_ = [r["nets"][net][mode] for r in runs["mxnet"]]
                # the median of each repeat's ratio, and the ratio of the best of each side
                ratio = statistics.median(a / b for a, b in zip(lm, mx_))
                cpu = [min(r["nets"][net][mode + "_cpu_ms"] for r in runs[b])
                       for b in ("lightmod", "mxnet")]
                line += " %12.0f %4.2fx/%4.2fx %7.2f/%-7.2f" % (max(mx_), ratio,
                                                              max(lm) / max(mx_), *cpu)
            print(line)
    if both:
        print("ratio: lightmod/MXNet throughput, median of the repeats' ratios / ratio of the "
              "best of each side; cpu ms: least process CPU time per batch (all threads)")
    if args.no_conv:
        return
    print("\nconvolution layers, GFLOP/s (best over repeats) and fraction of the same "
          "process's SGEMM")
    for backend in ("lightmod", "mxnet"):
        if not runs[backend]:
            continue
        best = max(runs[backend], key=lambda r: r["sgemm_gflops"])
        print("%s: SGEMM 512^3 %.1f GFLOP/s" % (backend, best["sgemm_gflops"]))
        for name in best["conv"]:
            cells = []
            for direction in ("forward", "backward_data", "backward_weight"):
                # each repeat's layer figure against the SGEMM of the same process
                fracs = [r["conv"][name][direction] / r["sgemm_gflops"] for r in runs[backend]]
                gf = max(r["conv"][name][direction] for r in runs[backend])
                cells.append("%s %6.1f (%3.0f%%)" % (direction, gf, 100 * max(fracs)))
            print("  %-13s %s" % (name, "  ".join(cells)))


if __name__ == "__main__":
    main()
