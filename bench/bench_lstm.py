"""Bucketing LSTM language-model training: lightmod vs MXNet 1.9.1, side by side.

    python bench/bench_lstm.py [--batch 32] [--cycles 5] [--repeats 3]
                               [--mxnet-python /work/mxnet-venv/bin/python] [--profile]

The model of MXNet's example/rnn/bucketing: vocabulary 1000, embedding 200, two LSTM layers of
200 units built from ``mx.rnn.LSTMCell`` and unrolled per bucket, FullyConnected to the
vocabulary, SoftmaxOutput; buckets of 10, 20, 30 and 40 steps, batch 32, SGD with momentum 0.9,
through ``mx.mod.BucketingModule`` (default bucket 40). Synthetic token ids.

Two figures per backend, each from a fresh subprocess, the backends alternating so they see
the same machine load (medians over repeats, the load average printed):

* ``first pass``: wall seconds from constructing the module through binding, parameter and
  optimizer set-up and one training step (forward, backward, update) in each of the four
  buckets, the compile caches warm (a first untimed subprocess warms lightmod's disk cache);
* ``train``: milliseconds per training step averaged over ``--cycles`` passes through the
  four buckets, after the first pass (tokens per second are batch x bucket / time);
* ``memory MB``: the worker's peak resident memory minus its resident memory right after the
  import (executors, parameters, optimizer states and the loaded kernels), Linux only. For
  lightmod that includes numba's import and the CPU kernel modules (imported at the first
  operator call); the warm-up run measures them apart and the figure is printed below the
  table.

Warm caches include Python's bytecode cache: an installed package has its ``.pyc`` files (the
MXNet wheel's are there), but a source checkout run with ``PYTHONDONTWRITEBYTECODE=1`` compiles
every lightmod module from source at each start (about 0.25 s of import and 0.05 s of the
first pass). So lightmod's workers read and the warm-up writes their bytecode under a private
``PYTHONPYCACHEPREFIX`` (``~/.cache/lightmod/bench-pycache``); ``--no-bytecode-cache`` runs
them with the environment as it is.

``--profile`` prints lightmod's cProfile of the steady state (functions by own time).

The time of ``import`` is printed apart (``import s``): it is not part of the first pass;
``import+first s`` is their sum per run (median over repeats).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

VOCAB, EMBED, HIDDEN, LAYERS = 1000, 200, 200, 2
BUCKETS = (10, 20, 30, 40)


def make_module(mx, batch):
    stack = mx.rnn.SequentialRNNCell()
    for i in range(LAYERS):
        stack.add(mx.rnn.LSTMCell(num_hidden=HIDDEN, prefix="lstm_l%d_" % i))

    def sym_gen(seq_len):
        data = mx.sym.Variable("data")
        label = mx.sym.Variable("softmax_label")
        embed = mx.sym.Embedding(data=data, input_dim=VOCAB, output_dim=EMBED, name="embed")
        stack.reset()
        outputs = stack.unroll(seq_len, inputs=embed, merge_outputs=True)[0]
        pred = mx.sym.Reshape(outputs, shape=(-1, HIDDEN))
        pred = mx.sym.FullyConnected(data=pred, num_hidden=VOCAB, name="pred")
        label = mx.sym.Reshape(label, shape=(-1,))
        pred = mx.sym.SoftmaxOutput(data=pred, label=label, name="softmax")
        return pred, ("data",), ("softmax_label",)

    return mx.mod.BucketingModule(sym_gen, default_bucket_key=max(BUCKETS), context=mx.cpu())


def make_batches(mx, batch):
    rng = np.random.RandomState(0)
    batches = {}
    for length in BUCKETS:
        data = mx.nd.array(rng.randint(0, VOCAB, (batch, length)))
        label = mx.nd.array(rng.randint(0, VOCAB, (batch, length)))
        batches[length] = mx.io.DataBatch(
            [data], [label], bucket_key=length,
            provide_data=[mx.io.DataDesc("data", (batch, length))],
            provide_label=[mx.io.DataDesc("softmax_label", (batch, length))])
    return batches


def train_step(mod, batch):
    mod.forward_backward(batch)
    mod.update()


def sync(mod):
    for out in mod.get_outputs():
        out.wait_to_read()


def _rss_mb():
    """The process's resident memory now, in MiB (Linux; NaN elsewhere)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def _peak_rss_mb():
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run_worker(backend, batch, cycles, profile, runtime_memory=False):
    t0 = time.perf_counter()
    if backend == "mxnet":
        import mxnet as mx
    else:
        import lightmod as mx
    import_s = time.perf_counter() - t0
    rss_after_import = _rss_mb()
    runtime_mb = None
    if runtime_memory and backend == "lightmod":
        # lightmod imports numba and its CPU kernel modules at the first operator, inside the
        # first pass and the memory figure; measured apart here (the warm-up run only)
        import lightmod.kernels.cpu  # noqa: F401
        runtime_mb = _rss_mb() - rss_after_import
    batches = make_batches(mx, batch)
    t0, c0 = time.perf_counter(), time.process_time()
    mod = make_module(mx, batch)
    default = batches[max(BUCKETS)]
    mod.bind(data_shapes=default.provide_data, label_shapes=default.provide_label)
    mod.init_params(initializer=mx.init.Xavier(factor_type="in", magnitude=2.34))
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.01,
                                                          "momentum": 0.9, "wd": 1e-5})
    for length in (40, 10, 20, 30):
        train_step(mod, batches[length])
        sync(mod)
    first_pass, first_pass_cpu = time.perf_counter() - t0, time.process_time() - c0

    order = [batches[length] for length in BUCKETS] * cycles
    train_step(mod, order[0])
    sync(mod)
    t0, c0 = time.perf_counter(), time.process_time()
    for b in order:
        train_step(mod, b)
    sync(mod)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    tokens = batch * sum(BUCKETS) * cycles
    result = {"backend": backend, "import_s": import_s, "first_pass_s": first_pass,
              "first_pass_cpu_s": first_pass_cpu,
              "ms_per_step": 1e3 * wall / len(order), "cpu_ms_per_step": 1e3 * cpu / len(order),
              "tokens_per_s": tokens / wall,
              "memory_mb": _peak_rss_mb() - rss_after_import, "runtime_mb": runtime_mb}
    if profile and backend == "lightmod":
        result["profile"] = profile_steps(mx, mod, order)
    return result


def profile_steps(mx, mod, order):
    """The top functions by own time over the steps (cProfile), as text rows."""
    import cProfile
    import io
    import pstats
    prof = cProfile.Profile()
    prof.enable()
    for b in order:
        train_step(mod, b)
    sync(mod)
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
    return text.getvalue()


def _loadavg():
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--cycles", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--mxnet-python", default=None)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--no-bytecode-cache", action="store_true",
                    help="run lightmod's workers without the warm bytecode cache")
    ap.add_argument("--worker", choices=["lightmod", "mxnet"], help=argparse.SUPPRESS)
    ap.add_argument("--runtime-memory", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(run_worker(args.worker, args.batch, args.cycles, args.profile,
                                    args.runtime_memory)))
        return

    def lightmod_env(warming):
        """The environment of lightmod's workers: bytecode read from (and, when ``warming``,
        written to) the bench's private cache, unless --no-bytecode-cache."""
        env = dict(os.environ)
        if not args.no_bytecode_cache:
            env["PYTHONPYCACHEPREFIX"] = os.path.join(os.path.expanduser("~"), ".cache",
                                                      "lightmod", "bench-pycache")
            if warming:
                env.pop("PYTHONDONTWRITEBYTECODE", None)
        return env

    def spawn(python, backend, profile=False, warming=False):
        cmd = [python, os.path.abspath(__file__), "--worker", backend, "--batch",
               str(args.batch), "--cycles", str(args.cycles)] + (["--profile"] if profile else [])
        cmd += ["--runtime-memory"] if warming else []
        env = lightmod_env(warming) if backend == "lightmod" else None
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            sys.exit("%s worker failed:\n%s" % (backend, proc.stderr[-3000:]))
        return json.loads(proc.stdout.strip().splitlines()[-1])

    # warms numba's disk cache, lightmod's fused kernels and the bytecode; not timed
    runtime_mb = spawn(sys.executable, "lightmod", warming=True)["runtime_mb"]
    load_before = _loadavg()
    runs = {"lightmod": [], "mxnet": []}
    profile = None
    for _ in range(args.repeats):
        runs["lightmod"].append(spawn(sys.executable, "lightmod"))
        if args.mxnet_python:
            runs["mxnet"].append(spawn(args.mxnet_python, "mxnet"))
    if args.profile:
        profile = spawn(sys.executable, "lightmod", profile=True)["profile"]
    load_after = _loadavg()

    print("bucketing LSTM LM (V%d E%d %dx LSTM %d, buckets %s), batch %d, %d cycles x %d "
          "repeats (load average %.1f -> %.1f)" % (VOCAB, EMBED, LAYERS, HIDDEN,
                                                   "/".join(map(str, BUCKETS)), args.batch,
                                                   args.cycles, args.repeats, load_before,
                                                   load_after))
    print("lightmod's bytecode cache: %s" % ("as the environment has it" if args.no_bytecode_cache
                                             else "warm (private PYTHONPYCACHEPREFIX)"))
    print("%-10s %9s %13s %13s %15s %12s %14s %14s %10s" % (
        "backend", "import s", "first pass s", "(cpu s)", "import+first s", "ms/step",
        "cpu ms/step", "tokens/s", "memory MB"))
    for backend, rs in runs.items():
        if rs:
            print("%-10s %9.3f %13.3f %13.3f %15.3f %12.2f %14.2f %14.0f %10.0f" % (
                backend, statistics.median(r["import_s"] for r in rs),
                statistics.median(r["first_pass_s"] for r in rs),
                statistics.median(r["first_pass_cpu_s"] for r in rs),
                statistics.median(r["import_s"] + r["first_pass_s"] for r in rs),
                statistics.median(r["ms_per_step"] for r in rs),
                statistics.median(r["cpu_ms_per_step"] for r in rs),
                statistics.median(r["tokens_per_s"] for r in rs),
                statistics.median(r["memory_mb"] for r in rs)))
    print("lightmod's memory includes about %.0f MB that numba's import and lightmod's CPU "
          "kernel modules take (measured apart, in the warm-up run)" % runtime_mb)
    if runs["mxnet"]:
        ratio = statistics.median(a["tokens_per_s"] / b["tokens_per_s"]
                                  for a, b in zip(runs["lightmod"], runs["mxnet"]))
        first = statistics.median(b["first_pass_s"] / a["first_pass_s"]
                                  for a, b in zip(runs["lightmod"], runs["mxnet"]))
        cpu = statistics.median(b["cpu_ms_per_step"] / a["cpu_ms_per_step"]
                                for a, b in zip(runs["lightmod"], runs["mxnet"]))
        print("train: lightmod throughput = %.2fx mxnet (CPU time per step: %.2fx); first pass: "
              "lightmod speed = %.2fx mxnet" % (ratio, cpu, first))
    if profile:
        print("lightmod steady state, cProfile by own time (%d steps):" % (4 * args.cycles))
        print(profile)


if __name__ == "__main__":
    main()
