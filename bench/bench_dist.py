"""Data-parallel throughput of the MPI kvstore (dist_sync) on this machine, and an estimate on
paper of how it scales to 8 and 64 workers.

    python bench/bench_dist.py [--batch 64] [--steps 40] [--hidden 512]

Trains an MLP 784-H-H-10 (ReLU, SoftmaxOutput, SGD momentum) with Module on synthetic data,
once as 1 worker (no mpiexec) and once as 2 workers (``mpiexec -n 2``), each worker with
``--batch`` samples per step (weak scaling: the global batch grows with the workers). Reported:
global samples/s, scaling efficiency = samples/s(2) / (2 x samples/s(1)), and per step the
time in the kvstore's collectives vs the rest (compute, data, update).

The estimate on paper: per step every worker allreduces all gradients (4 bytes x P params, K
keys). A ring allreduce moves 2 (N-1)/N x 4P bytes per worker and pays about 2 log2(N) latency
hops per key for small keys, so

    t_comm(N) = K x 2 log2(N) x alpha + 2 (N-1)/N x 4P / beta
    efficiency(N) = t_compute / (t_compute + t_comm(N))      (lightmod does not overlap them)

with t_compute measured here (1 worker) and two networks: 10 GbE (beta 1.1 GB/s, alpha 30 us)
and 100 Gb/s InfiniBand (beta 11 GB/s, alpha 3 us). With 2-bit compression each worker
instead receives the packed codes of all others, (N-1) x P/4 bytes: cheaper than the
allreduce below about 32 workers, dearer above.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time

import numpy as np

NETWORKS = {"10GbE": (1.1e9, 30e-6), "IB-100G": (11e9, 3e-6)}


def worker(args):
    import lightmod as mx
    kv = mx.kv.create("dist_sync")
    coll = kv._coll
    comm_seconds = [0.0]
    allreduce = coll.allreduce_sum

    def timed_allreduce(buf, what):
        start = time.perf_counter()
        allreduce(buf, what)
        comm_seconds[0] += time.perf_counter() - start
    coll.allreduce_sum = timed_allreduce

    rng = np.random.default_rng(kv.rank)
    n = args.batch * (args.steps + args.warmup)
    x = rng.uniform(0, 1, (n, 784)).astype(np.float32)
    y = rng.integers(0, 10, n).astype(np.float32)
    net = mx.sym.Variable("data")
    for i in range(2):
        net = mx.sym.FullyConnected(net, num_hidden=args.hidden, name="fc%d" % (i + 1))
        net = mx.sym.Activation(net, act_type="relu", name="relu%d" % (i + 1))
    net = mx.sym.FullyConnected(net, num_hidden=10, name="fc3")
    net = mx.sym.SoftmaxOutput(net, name="softmax")
    mod = mx.mod.Module(net, context=mx.cpu())
    mod.bind(data_shapes=[("data", (args.batch, 784))],
             label_shapes=[("softmax_label", (args.batch,))])
    mod.init_params(mx.init.Xavier())
    mod.init_optimizer(kvstore=kv, optimizer="sgd",
                       optimizer_params={"learning_rate": 0.05, "momentum": 0.9})
    batches = [mx.io.DataBatch([mx.nd.array(x[i:i + args.batch])],
                               [mx.nd.array(y[i:i + args.batch])])
               for i in range(0, n, args.batch)]
    for batch in batches[:args.warmup]:        # numba compiles here
        mod.forward_backward(batch)
        mod.update()
    kv.barrier()
    comm_seconds[0] = 0.0
    start = time.perf_counter()
    for batch in batches[args.warmup:]:
        mod.forward_backward(batch)
        mod.update()
    mod.get_params()                           # wait for the last update
    seconds = time.perf_counter() - start
    params = sum(int(np.prod(v.shape)) for v in mod.get_params()[0].values())
    import numba
    result = {"workers": kv.num_workers, "rank": kv.rank, "seconds": seconds,
              "step_ms": 1e3 * seconds / args.steps,
              "comm_ms": 1e3 * comm_seconds[0] / args.steps,
              "samples_per_s": args.batch * args.steps * kv.num_workers / seconds,
              "params": params, "keys": len(mod.get_params()[0]),
              "numba_threads": numba.get_num_threads(),
              "thread_cap": int(os.environ.get("LIGHTMOD_NUM_THREADS", "0"))}
    if kv.rank == 0:
        print("RESULT " + json.dumps(result), flush=True)


def launch(workers, args):
    script = os.path.abspath(__file__)
    cmd = [sys.executable, script, "--worker"] + ["--%s=%s" % (k, getattr(args, k))
                                                   for k in ("batch", "steps", "warmup",
                                                             "hidden")]
    if workers > 1:
        mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) \
            or shutil.which("mpiexec")
        if mpiexec is None:
            raise SystemExit("mpiexec not found: pip install 'lightmod[mpi]'")
        cmd = [mpiexec, "-launcher", "fork", "-n", str(workers)] + cmd
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise SystemExit("%d-worker run failed:\n%s\n%s" % (workers, proc.stdout[-2000:],
                                                         proc.stderr[-3000:]))


def estimate(one, args):
    """Efficiency on paper for 8 and 64 workers (each a machine like this one)."""
    compute_s = (one["step_ms"] - one["comm_ms"]) / 1e3
    grad_bytes = 4 * one["params"]
    lines = []
    for n in (8, 64):
        for net, (beta, alpha) in NETWORKS.items():
            ring = 2 * (n - 1) / n * grad_bytes
            t_comm = one["keys"] * 2 * math.log2(n) * alpha + ring / beta
            eff = compute_s / (compute_s + t_comm)
            packed = (n - 1) * grad_bytes / 16       # 2 bits per element from every other worker
            t_2bit = one["keys"] * math.log2(n) * alpha + packed / beta
            lines.append("  N=%-3d %-8s allreduce %6.2f MB/step/worker  t_comm %7.2f ms  "
                         "efficiency %5.1f%%   | 2-bit: %6.2f MB, efficiency %5.1f%%"
                         % (n, net, ring / 1e6, 1e3 * t_comm, 100 * eff, packed / 1e6,
                            100 * compute_s / (compute_s + t_2bit)))
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=64, help="samples per worker per step")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    load = os.getloadavg()[0]
    one = launch(1, args)
    two = launch(2, args)
    efficiency = two["samples_per_s"] / (2 * one["samples_per_s"])
    print("MLP 784-%d-%d-10: %d params in %d keys (%.2f MB of float32 gradients per step), "
          "batch %d per worker, %d timed steps; %d cores, load average %.1f"
          % (args.hidden, args.hidden, one["params"], one["keys"], 4e-6 * one["params"],
             args.batch, args.steps, os.cpu_count() or 1, load))
    for r in (one, two):
        print("  %d worker(s) (threads per worker: cap %d, last used %d): %7.0f samples/s   "
              "step %6.2f ms, of which in collectives (incl. waiting for the others) %5.2f ms"
              % (r["workers"], r["thread_cap"], r["numba_threads"], r["samples_per_s"],
                 r["step_ms"], r["comm_ms"]))
    print("  scaling efficiency 1 -> 2 workers: %.1f%%" % (100 * efficiency))
    print("Estimate on paper (compute %.2f ms/step measured with 1 worker; no overlap of "
          "communication and compute):" % (one["step_ms"] - one["comm_ms"]))
    for line in estimate(one, args):
        print(line)


if __name__ == "__main__":
    main()
