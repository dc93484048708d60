"""LeNet training and inference throughput: lightmod vs MXNet 1.9.1 vs plain numpy.

    python bench/bench_lenet.py [--batch 64] [--iters 30] [--repeats 3]
                                [--mxnet-python /work/mxvenv/bin/python] [--no-profile]

LeNet: conv 5x5x20, tanh, maxpool 2, conv 5x5x50, tanh, maxpool 2, FC 500, tanh, FC 10,
SoftmaxOutput; 1x28x28 inputs. Both frameworks run the same script through their symbol
executor (``simple_bind``, then forward/backward per batch) on synthetic data, in fresh
subprocesses, alternately (lightmod, MXNet, lightmod, ...) so both see the same machine load;
the median over repeats is reported, with the load average, and the process CPU time per
batch (all threads: on a loaded machine wall time depends on the share of the cores a process
gets, CPU time on the work it does). The numpy reference (im2col + matmul, reshape max-pool)
runs in lightmod's process. A per-operator profile of lightmod's training step (from
``mx.profiler``) shows where the time goes.

bench/bench_resnet_block.py reuses this harness for a ResNet-style block.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np


# ---------------------------------------------------------------------------------------------
# the network, written once for both frameworks
# ---------------------------------------------------------------------------------------------
def build_lenet(mx):
    data = mx.sym.Variable("data")
    net = mx.sym.Convolution(data, kernel=(5, 5), num_filter=20, name="conv1")
    net = mx.sym.Activation(net, act_type="tanh", name="tanh1")
    net = mx.sym.Pooling(net, pool_type="max", kernel=(2, 2), stride=(2, 2), name="pool1")
    net = mx.sym.Convolution(net, kernel=(5, 5), num_filter=50, name="conv2")
    net = mx.sym.Activation(net, act_type="tanh", name="tanh2")
    net = mx.sym.Pooling(net, pool_type="max", kernel=(2, 2), stride=(2, 2), name="pool2")
    net = mx.sym.Flatten(net, name="flatten")
    net = mx.sym.FullyConnected(net, num_hidden=500, name="fc1")
    net = mx.sym.Activation(net, act_type="tanh", name="tanh3")
    net = mx.sym.FullyConnected(net, num_hidden=10, name="fc2")
    return mx.sym.SoftmaxOutput(net, name="softmax"), (1, 28, 28)


def bind(mx, sym, batch, item_shape):
    ex = sym.simple_bind(mx.cpu(), data=(batch,) + item_shape, softmax_label=(batch,))
    rng = np.random.RandomState(0)
    for name, arr in ex.arg_dict.items():
        if name == "softmax_label":
            arr[:] = rng.randint(0, 10, batch)
        elif name == "data":
            arr[:] = rng.uniform(0, 1, arr.shape)
        elif name.endswith("gamma"):
            arr[:] = 1.0
        else:
            arr[:] = rng.uniform(-0.1, 0.1, arr.shape)
    for name, arr in ex.aux_dict.items():
        arr[:] = 1.0 if name.endswith("var") else 0.0
    return ex


def _sync(ex):
    for arr in list(ex.outputs) + [g for g in ex.grad_arrays if g is not None]:
        arr.wait_to_read()


def time_steps(step, iters, warmup=3):
    for _ in range(warmup):
        step()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(iters):
        step()
    return (time.perf_counter() - t0) / iters, (time.process_time() - c0) / iters


def time_executor(mx, sym, item_shape, batch, iters):
    ex = bind(mx, sym, batch, item_shape)

    def train():
        ex.forward(is_train=True)
        ex.backward()
        _sync(ex)

    def infer():
        ex.forward(is_train=False)
        _sync(ex)

    out = {}
    for name, step in (("train", train), ("inference", infer)):
        wall, cpu = time_steps(step, iters)
        out[name] = {"samples_per_s": batch / wall, "ms_per_batch": wall * 1e3,
                     "cpu_ms_per_batch": cpu * 1e3}
    return out, ex


def profile_ops(mx, sym, ex, iters):
    """Milliseconds per training batch by operator type and direction (lightmod profiler)."""
    ops = {n["name"]: n["op"] for n in json.loads(sym.tojson())["nodes"] if n["op"] != "null"}
    mx.profiler.set_config(aggregate_stats=True)
    mx.profiler.dumps(reset=True)
    mx.profiler.set_state("run")
    for _ in range(iters):
        ex.forward(is_train=True)
        ex.backward()
    mx.profiler.set_state("stop")
    stats = json.loads(mx.profiler.dumps(reset=True, format="json"))
    table = {}
    for key, s in stats.items():
        cat, name = key.split("/", 1)
        if cat not in ("forward", "backward"):
            continue
        node = name[:-len("_backward")] if name.endswith("_backward") else name
        op = ops.get(node, node)
        table[(op, cat)] = table.get((op, cat), 0.0) + s["total"] / iters
    return sorted(([op, cat, ms] for (op, cat), ms in table.items()), key=lambda r: -r[2])


# ---------------------------------------------------------------------------------------------
# numpy reference (same network, float32, in the process that runs lightmod)
# ---------------------------------------------------------------------------------------------
def np_conv_forward(x, w, b, pad=0):
    """Stride-1 convolution by im2col (sliding windows) and one matrix product."""
    if pad:
        x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    f, c, kh, kw = w.shape
    win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))
    n, _, oh, ow = win.shape[:4]
    cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, c * kh * kw)
    y = cols @ w.reshape(f, -1).T
    if b is not None:
        y += b
    return y.reshape(n, oh, ow, f).transpose(0, 3, 1, 2), cols


def np_conv_backward(dy, cols, w, xshape, pad=0, need_dx=True):
    f, c, kh, kw = w.shape
    n, _, oh, ow = dy.shape
    dy2 = dy.transpose(0, 2, 3, 1).reshape(-1, f)
    dw = (dy2.T @ cols).reshape(w.shape)
    db = dy2.sum(axis=0)
    if not need_dx:
        return None, dw, db
    dcols = (dy2 @ w.reshape(f, -1)).reshape(n, oh, ow, c, kh, kw)
    hp, wp = xshape[2] + 2 * pad, xshape[3] + 2 * pad
    dx = np.zeros((n, c, hp, wp), dtype=dy.dtype)
    for i in range(kh):
        for j in range(kw):
            dx[:, :, i:i + oh, j:j + ow] += dcols[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    if pad:
        dx = dx[:, :, pad:-pad, pad:-pad]
    return dx, dw, db


def np_maxpool2(x):
    n, c, h, w = x.shape
    blocks = x.reshape(n, c, h // 2, 2, w // 2, 2)
    y = blocks.max(axis=(3, 5))
    mask = blocks == y[:, :, :, None, :, None]
    return y, mask


def np_unpool2(dy, mask):
    n, c, h, w = dy.shape
    return (mask * dy[:, :, :, None, :, None]).reshape(n, c, 2 * h, 2 * w)


def np_softmax_grad(logits, label):
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    p[np.arange(len(label)), label.astype(int)] -= 1
    return p


class NumpyLeNet:
    def __init__(self, batch):
        rng = np.random.RandomState(0)
        f32 = np.float32
        self.x = rng.uniform(0, 1, (batch, 1, 28, 28)).astype(f32)
        self.label = rng.randint(0, 10, batch)
        self.p = {"w1": rng.uniform(-.1, .1, (20, 1, 5, 5)).astype(f32), "b1": np.zeros(20, f32),
                  "w2": rng.uniform(-.1, .1, (50, 20, 5, 5)).astype(f32), "b2": np.zeros(50, f32),
                  "w3": rng.uniform(-.1, .1, (500, 800)).astype(f32), "b3": np.zeros(500, f32),
                  "w4": rng.uniform(-.1, .1, (10, 500)).astype(f32), "b4": np.zeros(10, f32)}

    def forward(self):
        p = self.p
        z1, self.c1 = np_conv_forward(self.x, p["w1"], p["b1"])
        self.a1 = np.tanh(z1)
        h1, self.m1 = np_maxpool2(self.a1)
        self.h1 = h1
        z2, self.c2 = np_conv_forward(h1, p["w2"], p["b2"])
        self.a2 = np.tanh(z2)
        h2, self.m2 = np_maxpool2(self.a2)
        self.h2 = h2
        self.flat = h2.reshape(len(h2), -1)
        self.a3 = np.tanh(self.flat @ p["w3"].T + p["b3"])
        self.out = self.a3 @ p["w4"].T + p["b4"]
        return self.out

    def backward(self):
        p = self.p
        d = np_softmax_grad(self.out, self.label)
        grads = {"w4": d.T @ self.a3, "b4": d.sum(0)}
        d = (d @ p["w4"]) * (1 - self.a3 ** 2)
        grads["w3"], grads["b3"] = d.T @ self.flat, d.sum(0)
        d = (d @ p["w3"]).reshape(self.h2.shape)
        d = np_unpool2(d, self.m2) * (1 - self.a2 ** 2)
        d, grads["w2"], grads["b2"] = np_conv_backward(d, self.c2, p["w2"], self.h1.shape)
        d = np_unpool2(d, self.m1) * (1 - self.a1 ** 2)
        _, grads["w1"], grads["b1"] = np_conv_backward(d, self.c1, p["w1"], self.x.shape,
                                                       need_dx=False)
        return grads


def time_numpy(model, batch, iters):
    out = {}
    for name, step in (("train", lambda: (model.forward(), model.backward())),
                       ("inference", model.forward)):
        wall, cpu = time_steps(step, iters)
        out[name] = {"samples_per_s": batch / wall, "ms_per_batch": wall * 1e3,
                     "cpu_ms_per_batch": cpu * 1e3}
    return out


# ---------------------------------------------------------------------------------------------
# driver: one backend per subprocess, alternating
# ---------------------------------------------------------------------------------------------
def run_backend(backend, net, batch, iters, profile, numpy_model):
    if backend == "mxnet":
        import mxnet as mx
    else:
        import lightmod as mx
    sym, item_shape = net(mx)
    result, ex = time_executor(mx, sym, item_shape, batch, iters)
    result = {"backend": backend, "results": result}
    if backend == "lightmod":
        result["numpy"] = time_numpy(numpy_model(batch), batch, iters)
        if profile:
            result["profile"] = profile_ops(mx, sym, ex, max(3, iters // 3))
    return result


def _loadavg():
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def main(script, default_batch, description):
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--batch", type=int, default=default_batch)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--mxnet-python", default=None,
                    help="python of an environment with MXNet 1.9.1 (e.g. /work/mxvenv/bin/python)")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--worker", choices=["lightmod", "mxnet"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        module = __import__(os.path.splitext(os.path.basename(script))[0])
        print(json.dumps(module.run_worker(args.worker, args.batch, args.iters,
                                           not args.no_profile)))
        return

    def spawn(python, backend):
        cmd = [python, script, "--worker", backend, "--batch", str(args.batch),
               "--iters", str(args.iters)] + (["--no-profile"] if args.no_profile else [])
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.abspath(script)) +
                   os.pathsep + os.environ.get("PYTHONPATH", ""))
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            sys.exit("%s worker failed:\n%s" % (backend, proc.stderr[-3000:]))
        return json.loads(proc.stdout.strip().splitlines()[-1])

    load_before = _loadavg()
    runs = {"lightmod": [], "mxnet": [], "numpy": []}
    profile = None
    for _ in range(args.repeats):
        lm = spawn(sys.executable, "lightmod")
        runs["lightmod"].append(lm["results"])
        runs["numpy"].append(lm["numpy"])
        profile = lm.get("profile") or profile
        if args.mxnet_python:
            runs["mxnet"].append(spawn(args.mxnet_python, "mxnet")["results"])
    load_after = _loadavg()

    def med(backend, mode, key):
        return statistics.median(r[mode][key] for r in runs[backend])

    print("%s, batch %d, %d timed batches x %d repeats (load average %.1f -> %.1f)"
          % (description, args.batch, args.iters, args.repeats, load_before, load_after))
    print("%-10s %-10s %12s %12s %14s" % ("mode", "backend", "samples/s", "ms/batch",
                                          "cpu ms/batch"))
    for mode in ("train", "inference"):
        for backend in ("lightmod", "mxnet", "numpy"):
            if runs[backend]:
                print("%-10s %-10s %12.0f %12.2f %14.2f" % (
                    mode, backend, med(backend, mode, "samples_per_s"),
                    med(backend, mode, "ms_per_batch"), med(backend, mode, "cpu_ms_per_batch")))
        ratios = []
        for other in ("mxnet", "numpy"):
            if runs[other]:
                per_repeat = [a[mode]["samples_per_s"] / b[mode]["samples_per_s"]
                              for a, b in zip(runs["lightmod"], runs[other])]
                ratios.append("%.2fx %s" % (statistics.median(per_repeat), other))
        print("%-10s lightmod throughput = %s" % (mode, ", ".join(ratios)))
    if profile:
        total = sum(r[2] for r in profile)
        print("lightmod training step by operator (ms per batch, profiler; total %.1f):" % total)
        for op, cat, ms in profile:
            print("  %-16s %-9s %8.2f  %5.1f%%" % (op, cat, ms, 100 * ms / total))


def run_worker(backend, batch, iters, profile):
    return run_backend(backend, build_lenet, batch, iters, profile, NumpyLeNet)


if __name__ == "__main__":
    main(os.path.abspath(__file__), 64, "LeNet (MNIST-sized)")
