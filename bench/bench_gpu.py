"""GPU benchmark: training throughput and optimizer bandwidth on one NVIDIA GPU, PyTorch beside.

    python bench/bench_gpu.py [--device 0] [--steps 20] [--size 67108864] [--no-torch]
                              [--json results.json]
    NUMBA_ENABLE_CUDASIM=1 python bench/bench_gpu.py --tiny      # code paths only, no GPU

It measures, in one run on gpu(device):

* the device's memory bandwidth: a copy kernel (8 bytes per float32 element moved) and a
  STREAM triad ``a = b + s*c`` (12 bytes), numba.cuda grid-stride kernels over ``--size``
  elements;
* lightmod's fused optimizer updates through ``Optimizer.update`` (the path Module training
  takes) over the same number of parameters: SGD with momentum (20 bytes per element) and Adam
  (28 bytes), in GB/s and as a fraction of the triad's bandwidth (the target is >= 80%);
* training throughput (samples/s, forward + backward + update, after warm-up steps that
  compile the kernels) of an MLP 784-512-512-10, LeNet-5 on 1x28x28 and a one-layer LSTM
  language model (vocabulary 2000, 200 units, 35 steps) with lightmod's Module;
* the same three models in PyTorch (``torch.nn``, SGD with momentum) on the same GPU when
  torch with CUDA is installed, and the ratio lightmod / PyTorch (the MLP target is >= 0.5).

``--conv`` measures the convolution instead (and nothing else): per-layer GFLOP/s of the
LeNet layers (1->20 and 20->50 channels, 5x5, on 28x28 and 12x12 at batch 128) and two
ResNet-like 3x3 layers (64->64 on 56x56 and 32->32 on 32x32, pad 1, batch 32), forward,
backward-data and backward-weight, through the Convolution operator on two paths, the
im2col / im2row + GEMM one and the implicit GEMM (``LIGHTMOD_CUDA_CONV`` picks between them,
see kernels/cuda/conv_implicit.py), beside ``torch.nn.functional.conv2d`` and its autograd
backward (cuDNN, strict float32: TF32 off) when torch with CUDA is importable; and the SGEMM
GFLOP/s of lightmod's GEMM kernel and of ``torch.matmul`` at 4096^3 in the same process.

``--tiny`` shrinks every size so the whole script runs in seconds on numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``): it proves the code paths, its numbers mean nothing.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

try:
    from numba import cuda
except ImportError:            # numba-cuda missing: main() says so
    cuda = None

FULL = dict(size=1 << 26, mlp=(784, 512, 512, 10), mlp_batch=256, lenet_image=28,
            lenet_channels=(20, 50), lenet_hidden=500, lenet_batch=128, lstm_vocab=2000,
            lstm_units=200, lstm_steps=35, lstm_batch=32, warmup=3)
TINY = dict(size=64, mlp=(12, 8, 8, 3), mlp_batch=4, lenet_image=10,
            lenet_channels=(2, 2), lenet_hidden=4, lenet_batch=1, lstm_vocab=6,
            lstm_units=3, lstm_steps=2, lstm_batch=2, warmup=1)


# ---------------------------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------------------------
def _synchronize():
    cuda.synchronize()


def median_seconds(fn, repeat, sync):
    """Median wall time of fn() over repeat runs, each ended by sync() (after one warm-up)."""
    fn()
    sync()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# ---------------------------------------------------------------------------------------------
# device bandwidth
# ---------------------------------------------------------------------------------------------
if cuda is not None:
    # module-level kernels: the simulator swaps the ``cuda`` global of a kernel's module
    @cuda.jit
    def copy_kernel(dst, src):
        for i in range(cuda.grid(1), dst.size, cuda.gridsize(1)):
            dst[i] = src[i]

    @cuda.jit
    def triad_kernel(a, b, c, s):
        for i in range(cuda.grid(1), a.size, cuda.gridsize(1)):
            a[i] = b[i] + s * c[i]


def launch_shape(n, tiny):
    if tiny:                       # the simulator runs every thread as a Python thread
        return 1, 32
    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    return min((n + 255) // 256, sms * 32), 256


def measure_bandwidth(n, repeat, tiny):
    rng = np.random.default_rng(0)
    b = cuda.to_device(rng.uniform(-1, 1, n).astype(np.float32))
    c = cuda.to_device(rng.uniform(-1, 1, n).astype(np.float32))
    a = cuda.device_array(n, dtype=np.float32)
    shape = launch_shape(n, tiny)
    t_copy = median_seconds(lambda: copy_kernel[shape](a, b), repeat, _synchronize)
    t_triad = median_seconds(lambda: triad_kernel[shape](a, b, c, np.float32(0.5)), repeat,
                             _synchronize)
    expected = b.copy_to_host() + np.float32(0.5) * c.copy_to_host()
    np.testing.assert_allclose(a.copy_to_host(), expected, rtol=1e-6)
    return {"copy_GBs": 8 * n / t_copy / 1e9, "triad_GBs": 12 * n / t_triad / 1e9}


def measure_optimizers(mx, ctx, n, repeat):
    rng = np.random.default_rng(1)
    results = {}
    for name, params, nbytes in (("sgd_momentum", {"momentum": 0.9}, 20),
                                 ("adam", {}, 28)):
        opt = mx.optimizer.create(name.split("_")[0], learning_rate=0.01, wd=1e-4,
                                  rescale_grad=0.5, **params)
        w = mx.nd.array(rng.uniform(-1, 1, n).astype(np.float32), ctx=ctx)
        g = mx.nd.array(rng.uniform(-1, 1, n).astype(np.float32), ctx=ctx)
        state = opt.create_state(0, w)
        seconds = median_seconds(lambda: opt.update(0, w, g, state), repeat,  # noqa: B023
                                 mx.nd.waitall)
        results[name + "_GBs"] = nbytes * n / seconds / 1e9
    return results


# ---------------------------------------------------------------------------------------------
# models (lightmod)
# ---------------------------------------------------------------------------------------------
def mlp_symbol(mx, sizes):
    net = mx.sym.Variable("data")
    for i, hidden in enumerate(sizes[1:-1]):
        net = mx.sym.FullyConnected(net, num_hidden=hidden, name="fc%d" % i)
        net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.FullyConnected(net, num_hidden=sizes[-1], name="out")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def lenet_symbol(mx, channels, hidden, classes=10):
    net = mx.sym.Variable("data")
    for i, filters in enumerate(channels):
        net = mx.sym.Convolution(net, kernel=(5, 5) if filters > 4 else (3, 3),
                                 num_filter=filters, name="conv%d" % i)
        net = mx.sym.Activation(net, act_type="tanh")
        net = mx.sym.Pooling(net, pool_type="max", kernel=(2, 2), stride=(2, 2))
    net = mx.sym.Flatten(net)
    net = mx.sym.Activation(mx.sym.FullyConnected(net, num_hidden=hidden, name="fc1"),
                            act_type="tanh")
    net = mx.sym.FullyConnected(net, num_hidden=classes, name="fc2")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def lstm_symbol(mx, vocab, units):
    """Embedding -> fused LSTM (layout TNC) -> per-step softmax over the vocabulary."""
    data = mx.sym.Variable("data")
    label = mx.sym.Variable("softmax_label")
    embed = mx.sym.Embedding(data, input_dim=vocab, output_dim=units, name="embed")
    params = mx.sym.Variable("rnn_parameters", init=mx.init.Uniform(0.05))
    state = mx.sym.Variable("rnn_state", init=mx.init.Zero())
    cell = mx.sym.Variable("rnn_state_cell", init=mx.init.Zero())
    rnn = mx.sym.RNN(embed, params, state, cell, state_size=units, num_layers=1, mode="lstm",
                     name="rnn")
    pred = mx.sym.FullyConnected(mx.sym.Reshape(rnn, shape=(-1, units)), num_hidden=vocab,
                                 name="pred")
    return mx.sym.SoftmaxOutput(pred, mx.sym.Reshape(label, shape=(-1,)), name="softmax")


def model_cases(cfg):
    """(name, symbol builder, data shape, label shape, classes, fixed params, samples/step)."""
    mlp = cfg["mlp"]
    image = cfg["lenet_image"]
    steps, batch = cfg["lstm_steps"], cfg["lstm_batch"]
    return [
        ("MLP", lambda mx: mlp_symbol(mx, mlp), (cfg["mlp_batch"], mlp[0]),
         (cfg["mlp_batch"],), mlp[-1], [], cfg["mlp_batch"]),
        ("LeNet", lambda mx: lenet_symbol(mx, cfg["lenet_channels"], cfg["lenet_hidden"]),
         (cfg["lenet_batch"], 1, image, image), (cfg["lenet_batch"],), 10, [],
         cfg["lenet_batch"]),
        ("LSTM", lambda mx: lstm_symbol(mx, cfg["lstm_vocab"], cfg["lstm_units"]),
         (steps, batch), (steps, batch), cfg["lstm_vocab"], ["rnn_state", "rnn_state_cell"],
         batch),
    ]


def lightmod_throughput(mx, ctx, case, steps, warmup):
    name, build, dshape, lshape, classes, fixed, samples = case
    rng = np.random.default_rng(2)
    if name == "LSTM":
        x = rng.integers(0, classes, dshape).astype(np.float32)
    else:
        x = rng.uniform(0, 1, dshape).astype(np.float32)
    y = rng.integers(0, classes, lshape).astype(np.float32)
    batch = mx.io.DataBatch([mx.nd.array(x, ctx=ctx)], [mx.nd.array(y, ctx=ctx)])
    mod = mx.mod.Module(build(mx), context=ctx, fixed_param_names=fixed)
    mod.bind(data_shapes=[("data", dshape)], label_shapes=[("softmax_label", lshape)])
    mod.init_params(mx.init.Uniform(0.05))
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.01,
                                                          "momentum": 0.9})

    def step():
        mod.forward_backward(batch)
        mod.update()

    for _ in range(warmup):
        step()
    mx.nd.waitall()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    mx.nd.waitall()
    assert np.isfinite(mod.get_outputs()[0].asnumpy()).all(), name
    return samples * steps / (time.perf_counter() - start)


# ---------------------------------------------------------------------------------------------
# the same models in PyTorch
# ---------------------------------------------------------------------------------------------
def torch_device(device_id):
    try:
        import torch
    except ImportError:
        return None, "torch is not installed"
    if not torch.cuda.is_available():
        return None, "torch has no CUDA device"
    return torch.device("cuda", device_id), None


def torch_model(torch, case, cfg):
    nn = torch.nn
    name = case[0]
    if name == "MLP":
        sizes = cfg["mlp"]
        layers = []
        for a, b in zip(sizes[:-2], sizes[1:-1]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        return nn.Sequential(*layers, nn.Linear(sizes[-2], sizes[-1]))
    if name == "LeNet":
        layers, channels, size = [], 1, cfg["lenet_image"]
        for filters in cfg["lenet_channels"]:
            k = 5 if filters > 4 else 3
            layers += [nn.Conv2d(channels, filters, k), nn.Tanh(), nn.MaxPool2d(2, 2)]
            channels, size = filters, (size - k + 1) // 2
        return nn.Sequential(*layers, nn.Flatten(),
                             nn.Linear(channels * size * size, cfg["lenet_hidden"]), nn.Tanh(),
                             nn.Linear(cfg["lenet_hidden"], 10))

    class LanguageModel(nn.Module):
        def __init__(self, vocab, units):
            super().__init__()
            self.embed = nn.Embedding(vocab, units)
            self.lstm = nn.LSTM(units, units)
            self.pred = nn.Linear(units, vocab)

        def forward(self, x):
            out, _ = self.lstm(self.embed(x))
            return self.pred(out.reshape(-1, out.shape[-1]))

    return LanguageModel(cfg["lstm_vocab"], cfg["lstm_units"])


def torch_throughput(device, case, cfg, steps, warmup):
    import torch
    name, _, dshape, lshape, classes, _, samples = case
    gen = torch.Generator().manual_seed(0)
    if name == "LSTM":
        x = torch.randint(0, classes, dshape, generator=gen)
    else:
        x = torch.rand(dshape, generator=gen)
    y = torch.randint(0, classes, lshape, generator=gen).reshape(-1)
    x, y = x.to(device), y.to(device)
    model = torch_model(torch, case, cfg).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    for _ in range(warmup):
        step()
    torch.cuda.synchronize(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize(device)
    return samples * steps / (time.perf_counter() - start)


# ---------------------------------------------------------------------------------------------
# convolution layers and SGEMM (--conv)
# ---------------------------------------------------------------------------------------------
# (name, batch, in channels, image size, filters, kernel, pad)
CONV_LAYERS = [("LeNet conv1", 128, 1, 28, 20, 5, 0), ("LeNet conv2", 128, 20, 12, 50, 5, 0),
               ("ResNet 64ch 56x56", 32, 64, 56, 64, 3, 1),
               ("ResNet 32ch 32x32", 32, 32, 32, 32, 3, 1)]
CONV_LAYERS_TINY = [("LeNet conv1", 1, 1, 6, 2, 5, 0), ("ResNet 3x3", 1, 8, 4, 2, 3, 1)]
CONV_PATHS = ("im2col", "implicit")
CONV_PASSES = ("forward", "backward_data", "backward_weight")


def conv_flops(layer):
    _, n, c, size, f, k, pad = layer
    out = size + 2 * pad - k + 1
    return 2.0 * n * f * out * out * c * k * k


def seconds_per_call(fn, steps, repeat, sync):
    """Best over repeat runs of the mean time of ``steps`` back-to-back calls (one sync at the
    end of each run, so launches overlap as in training)."""
    fn()
    sync()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(steps):
            fn()
        sync()
        best = min(best, (time.perf_counter() - start) / steps)
    return best


def lightmod_conv_layer(mx, ctx, layer, path, steps, repeat):
    """{pass: GFLOP/s} of one layer through the Convolution operator on ``path``, and its
    forward output (host) to compare the paths."""
    from lightmod import kernels
    from lightmod.operator import registry
    name, n, c, size, f, k, pad = layer
    op = registry.get("Convolution")
    p = op.parse({"kernel": str((k, k)), "pad": str((pad, pad)), "num_filter": str(f)})
    rng = np.random.default_rng(3)
    out = size + 2 * pad - k + 1
    shapes = [(n, c, size, size), (f, c, k, k), (f,)]
    ks = kernels.for_context(ctx)
    x, w, b = (cuda.to_device(rng.uniform(-1, 1, s).astype(np.float32)) for s in shapes)
    y = cuda.device_array((n, f, out, out), np.float32)
    dy = cuda.to_device(rng.uniform(-1, 1, (n, f, out, out)).astype(np.float32))
    dx = cuda.device_array(shapes[0], np.float32)
    dw = cuda.device_array(shapes[1], np.float32)
    state = {}
    previous = os.environ.get("LIGHTMOD_CUDA_CONV")
    os.environ["LIGHTMOD_CUDA_CONV"] = path
    try:
        calls = {
            "forward": lambda: op.forward(p, ks, [x, w, b], [y], True, state),
            "backward_data": lambda: op.backward(p, ks, [dy], [x, w, b], [y], [dx, None, None],
                                                 ["write", "null", "null"], state),
            "backward_weight": lambda: op.backward(p, ks, [dy], [x, w, b], [y],
                                                   [None, dw, None], ["null", "write", "null"],
                                                   state),
        }
        flops = conv_flops(layer)
        result = {}
        with cuda.gpus[ctx.device_id]:
            for what in CONV_PASSES:
                calls["forward"]()      # backward may read what the forward left in state
                result[what] = flops / seconds_per_call(calls[what], steps, repeat,
                                                        _synchronize) / 1e9
            calls["forward"]()
            _synchronize()
        return result, y.copy_to_host()
    finally:
        if previous is None:
            del os.environ["LIGHTMOD_CUDA_CONV"]
        else:
            os.environ["LIGHTMOD_CUDA_CONV"] = previous


def torch_conv_layer(device, layer, steps, repeat):
    """{pass: GFLOP/s} of the same layer in torch (cuDNN, float32 without TF32)."""
    import torch
    import torch.nn.functional as F
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    _, n, c, size, f, k, pad = layer
    gen = torch.Generator().manual_seed(0)
    x = torch.rand((n, c, size, size), generator=gen).to(device).requires_grad_(True)
    w = torch.rand((f, c, k, k), generator=gen).to(device).requires_grad_(True)
    b = torch.rand((f,), generator=gen).to(device)
    y = F.conv2d(x, w, b, padding=pad)
    dy = torch.rand(y.shape, generator=gen).to(device)
    calls = {
        "forward": lambda: F.conv2d(x, w, b, padding=pad),
        "backward_data": lambda: torch.autograd.grad(y, x, dy, retain_graph=True),
        "backward_weight": lambda: torch.autograd.grad(y, w, dy, retain_graph=True),
    }
    flops = conv_flops(layer)
    with torch.no_grad():
        forward = flops / seconds_per_call(calls["forward"], steps, repeat,
                                           torch.cuda.synchronize) / 1e9
    result = {"forward": forward}
    for what in CONV_PASSES[1:]:
        result[what] = flops / seconds_per_call(calls[what], steps, repeat,
                                                torch.cuda.synchronize) / 1e9
    return result


def sgemm_gflops(size, steps, repeat, tdev):
    """GFLOP/s of lightmod's GEMM kernel (the one FullyConnected uses) and of torch.matmul
    (TF32 off) on size^3 float32 products."""
    from lightmod.kernels.cuda import nn as cuda_nn
    rng = np.random.default_rng(4)
    a, b = (cuda.to_device(rng.uniform(-1, 1, (size, size)).astype(np.float32))
            for _ in range(2))
    c = cuda.device_array((size, size), np.float32)
    flops = 2.0 * size ** 3
    result = {"size": size, "lightmod": flops / seconds_per_call(
        lambda: cuda_nn._gemm(a, b, c, False, False, False), steps, repeat, _synchronize) / 1e9}
    expected = a.copy_to_host().astype(np.float64) @ b.copy_to_host().astype(np.float64)
    np.testing.assert_allclose(c.copy_to_host(), expected, rtol=1e-3, atol=1e-3 * size ** 0.5)
    if tdev is not None:
        import torch
        torch.backends.cuda.matmul.allow_tf32 = False
        ta, tb = (torch.rand((size, size), device=tdev) for _ in range(2))
        result["torch"] = flops / seconds_per_call(lambda: torch.matmul(ta, tb), steps, repeat,
                                                   torch.cuda.synchronize) / 1e9
    return result


def measure_conv(mx, ctx, tdev, tiny, steps, repeat):
    layers = CONV_LAYERS_TINY if tiny else CONV_LAYERS
    results = {"layers": {}}
    with cuda.gpus[ctx.device_id]:
        results["sgemm"] = sgemm_gflops(16 if tiny else 4096, steps, repeat, tdev)
    for layer in layers:
        _, n, c, size, f, k, pad = layer
        entry = {"shape": "batch %d, %d->%d, %dx%d, %dx%d pad %d" % (n, c, f, size, size, k,
                                                                        k, pad),
                 "GFLOP": conv_flops(layer) / 1e9}
        outputs = []
        for path in CONV_PATHS:
            entry[path], out = lightmod_conv_layer(mx, ctx, layer, path, steps, repeat)
            outputs.append(out)
        scale = max(1.0, float(np.abs(outputs[0]).max()))
        entry["paths_max_difference"] = float(np.abs(outputs[1] - outputs[0]).max()) / scale
        if tdev is not None:
            entry["torch"] = torch_conv_layer(tdev, layer, steps, repeat)
        results["layers"][layer[0]] = entry
    return results


def conv_table(conv, with_torch):
    sgemm = conv["sgemm"]
    header = ["layer / pass"] + ["%s GFLOP/s" % p for p in CONV_PATHS]
    if with_torch:
        header.append("torch GFLOP/s")
    header += ["implicit / SGEMM", "implicit / im2col"] + (["implicit / torch"] if with_torch
                                                            else [])
    rows = [tuple(header)]
    rows.append(("SGEMM %d^3" % sgemm["size"], "%.4g (_gemm)" % sgemm["lightmod"], "")
                + (("%.4g" % sgemm["torch"] if "torch" in sgemm else "n/a",) if with_torch
                   else ()) + ("", "") + (("",) if with_torch else ()))
    for name, entry in conv["layers"].items():
        for what in CONV_PASSES:
            old, new = entry["im2col"][what], entry["implicit"][what]
            row = ("%s %s" % (name, what), "%.4g" % old, "%.4g" % new)
            if with_torch:
                row += ("%.4g" % entry["torch"][what] if "torch" in entry else "n/a",)
            row += ("%.0f%%" % (100 * new / sgemm["lightmod"]), "%.2fx" % (new / old))
            if with_torch:
                row += ("%.2fx" % (new / entry["torch"][what]) if "torch" in entry else "",)
            rows.append(row)
    return format_table(rows)


# ---------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------
def device_name(device_id):
    from lightmod.kernels import cuda_support
    if cuda_support.simulator_enabled():
        return "numba CUDA simulator"
    dev = cuda.gpus[device_id]
    name = dev.name
    return name.decode() if isinstance(name, bytes) else str(name)


def format_table(rows):
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        lines.append("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths))))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--steps", type=int, default=20, help="timed training steps")
    parser.add_argument("--repeat", type=int, default=20, help="timed bandwidth runs")
    parser.add_argument("--size", type=int, help="elements for bandwidth and optimizers")
    parser.add_argument("--tiny", action="store_true",
                        help="tiny sizes (runs on the CUDA simulator; numbers meaningless)")
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch reference")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--conv", action="store_true",
                        help="measure the convolution layers and SGEMM (only those)")
    args = parser.parse_args(argv)
    cfg = dict(TINY if args.tiny else FULL)
    if args.size:
        cfg["size"] = args.size
    steps, repeat = (1, 1) if args.tiny else (args.steps, args.repeat)

    import lightmod as mx
    from lightmod.kernels import cuda_support
    try:
        cuda_support.require(args.device)
    except mx.MXNetError as err:
        sys.exit("bench_gpu: %s" % err)
    ctx = mx.gpu(args.device)
    tdev, why_no_torch = (None, "--no-torch") if args.no_torch else torch_device(args.device)
    results = {"device": device_name(args.device), "size": cfg["size"], "tiny": args.tiny}
    if args.conv:
        return _conv_main(mx, ctx, tdev, why_no_torch, args, results)

    with cuda.gpus[args.device]:
        results.update(measure_bandwidth(cfg["size"], repeat, args.tiny))
    results.update(measure_optimizers(mx, ctx, cfg["size"], repeat))
    results["models"] = {}
    for case in model_cases(cfg):
        entry = {"lightmod": lightmod_throughput(mx, ctx, case, steps, cfg["warmup"])}
        if tdev is not None:
            entry["torch"] = torch_throughput(tdev, case, cfg, steps, cfg["warmup"])
        results["models"][case[0]] = entry

    triad = results["triad_GBs"]
    rows = [("measure", "lightmod", "reference", "ratio")]
    rows.append(("device copy GB/s", "", "%.1f" % results["copy_GBs"], ""))
    rows.append(("device triad GB/s", "", "%.1f" % triad, ""))
    for name in ("sgd_momentum", "adam"):
        value = results[name + "_GBs"]
        rows.append(("%s update GB/s" % name, "%.1f" % value, "%.1f (triad)" % triad,
                     "%.0f%%" % (100 * value / triad)))
    for name, entry in results["models"].items():
        ref = entry.get("torch")
        rows.append(("%s train samples/s" % name, "%.0f" % entry["lightmod"],
                     "%.0f (torch)" % ref if ref else "n/a",
                     "%.2f" % (entry["lightmod"] / ref) if ref else ""))
    return _report(results, format_table(rows), tdev, why_no_torch, args)


def _conv_main(mx, ctx, tdev, why_no_torch, args, results):
    steps, repeat = (1, 1) if args.tiny else (args.steps, 3)
    results["conv"] = measure_conv(mx, ctx, tdev, args.tiny, steps, repeat)
    return _report(results, conv_table(results["conv"], tdev is not None), tdev, why_no_torch,
                   args)


def _report(results, table, tdev, why_no_torch, args):
    """Print the device line and ``table`` (and why PyTorch was skipped), write ``--json``."""
    print("GPU: %s%s" % (results["device"],
                         " (--tiny: sizes shrunk, numbers meaningless)" if args.tiny else ""))
    print(table)
    if tdev is None:
        print("PyTorch reference skipped: %s" % why_no_torch)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main()
