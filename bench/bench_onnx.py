"""Inference: lightmod vs MXNet 1.9.1 vs ONNX Runtime running lightmod's ONNX export.

    python bench/bench_onnx.py [--batch 64] [--iters 30] [--repeats 3]
                               [--mxnet-python /work/mxnet-venv/bin/python]

For the MLP, LeNet and the ResNet block of bench/bench_lenet.py and bench/bench_resnet_block.py:
lightmod's and MXNet's symbol executors (``simple_bind``, ``forward(is_train=False)``) and an
ONNX Runtime CPU session on the file ``mx.onnx.export_model`` writes from lightmod's executor
(same weights). Each backend runs in a fresh subprocess, alternately, and the median over the
repeats is reported. The ONNX Runtime worker also reports the largest relative difference between
its outputs and lightmod's. MXNet runs with OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_lenet import bind, build_lenet, time_steps  # noqa: E402
from bench_resnet_block import build_resnet_block  # noqa: E402


def build_mlp(mx):
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=256, name="fc1")
    net = mx.sym.Activation(net, act_type="relu", name="relu1")
    net = mx.sym.FullyConnected(net, num_hidden=128, name="fc2")
    net = mx.sym.Activation(net, act_type="relu", name="relu2")
    net = mx.sym.FullyConnected(net, num_hidden=10, name="fc3")
    return mx.sym.SoftmaxOutput(net, name="softmax"), (784,)


NETS = {"mlp": build_mlp, "lenet": build_lenet, "resnet_block": build_resnet_block}


def run_worker(backend, net, batch, iters):
    if backend == "mxnet":
        import mxnet as mx
    else:
        import lightmod as mx
    sym, item_shape = NETS[net](mx)
    ex = bind(mx, sym, batch, item_shape)

    def infer():
        ex.forward(is_train=False)
        ex.outputs[0].wait_to_read()

    if backend != "ort":
        wall, cpu = time_steps(infer, iters)
        return {"ms_per_batch": wall * 1e3, "cpu_ms_per_batch": cpu * 1e3}
    import onnxruntime as ort
    params = {k: v for k, v in ex.arg_dict.items() if k not in ("data", "softmax_label")}
    params.update(ex.aux_dict)
    with tempfile.TemporaryDirectory() as tmp:
        path = mx.onnx.export_model(sym, params, [(batch,) + item_shape],
                                    onnx_file_path=os.path.join(tmp, net + ".onnx"))
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = {"data": ex.arg_dict["data"].asnumpy()}
    infer()
    want = ex.outputs[0].asnumpy()
    got = sess.run(None, feeds)[0]
    wall, cpu = time_steps(lambda: sess.run(None, feeds), iters)
    return {"ms_per_batch": wall * 1e3, "cpu_ms_per_batch": cpu * 1e3,
            "max_rel_diff": float(np.max(np.abs(got - want)) / np.max(np.abs(want)))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--nets", default="mlp,lenet,resnet_block")
    ap.add_argument("--mxnet-python", default=None,
                    help="python of an environment with MXNet 1.9.1")
    ap.add_argument("--worker", choices=["lightmod", "mxnet", "ort"], help=argparse.SUPPRESS)
    ap.add_argument("--net", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(run_worker(args.worker, args.net, args.batch, args.iters)))
        return

    def spawn(python, backend, net):
        cmd = [python, os.path.abspath(__file__), "--worker", backend, "--net", net,
               "--batch", str(args.batch), "--iters", str(args.iters)]
        env = dict(os.environ)
        if backend == "mxnet":
            for key in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
                env.pop(key, None)
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            sys.exit("%s worker (%s) failed:\n%s" % (backend, net, proc.stderr[-3000:]))
        return json.loads(proc.stdout.strip().splitlines()[-1])

    backends = ["lightmod", "ort"] + (["mxnet"] if args.mxnet_python else [])
    print("Inference, batch %d, %d timed batches x %d repeats (load average %.1f)"
          % (args.batch, args.iters, args.repeats, os.getloadavg()[0]))
    print("%-13s %-9s %10s %14s %12s" % ("network", "backend", "ms/batch", "cpu ms/batch",
                                         "x lightmod"))
    for net in args.nets.split(","):
        runs = {b: [] for b in backends}
        for _ in range(args.repeats):
            for backend in backends:
                python = args.mxnet_python if backend == "mxnet" else sys.executable
                runs[backend].append(spawn(python, backend, net))
        base = statistics.median(r["ms_per_batch"] for r in runs["lightmod"])
        for backend in backends:
            ms = statistics.median(r["ms_per_batch"] for r in runs[backend])
            cpu = statistics.median(r["cpu_ms_per_batch"] for r in runs[backend])
            print("%-13s %-9s %10.2f %14.2f %11.2fx" % (net, backend, ms, cpu, base / ms))
        diff = max(r["max_rel_diff"] for r in runs["ort"])
        print("%-13s ONNX Runtime vs lightmod outputs: largest relative difference %.2g"
              % (net, diff))


if __name__ == "__main__":
    main()
