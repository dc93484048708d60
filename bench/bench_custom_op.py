"""A Python custom operator in a training step: lightmod + numba vs MXNet 1.9.1's CustomOp.

    python bench/bench_custom_op.py [--op smooth_l1|focal] [--rows 32768] [--iters 30]
                                    [--repeats 3] [--mxnet-python /work/mxnet-venv/bin/python]

The network is a detection-style head over ``rows`` anchors, its loss written as a custom
operator (``mx.operator.CustomOp`` registered with ``mx.operator.register``, applied with
``mx.sym.Custom``; a loss head, ``need_top_grad=False``):

* ``smooth_l1`` (default): box regression, anchor features (rows x 16) through a fully
  connected layer to 36 box offsets (9 anchors x 4), weighted smooth-L1 loss (sigma 3, as
  Faster R-CNN's) against a target;
* ``focal``: classification, features (rows x 64) to 21 class scores, softmax focal loss
  (gamma 2, alpha 0.25, as RetinaNet's).

A training step is ``forward`` + ``backward`` of the bound executor, then an SGD update of the
layer's weight and bias.

Three runs, each in a fresh subprocess, alternating so all see the same machine load:

* ``lightmod-numba``: the operator's forward and backward are ``@numba.njit(parallel=True)``
  loops that read and write the executor's buffers through ``numpy_view()`` (no copies);
* ``mxnet``: MXNet 1.9.1 with the operator written the way MXNet's examples write one (numpy
  on ``asnumpy()`` copies, results stored with ``self.assign(..., mx.nd.array(...))``);
* ``lightmod-numpy``: that same numpy operator, unchanged, on lightmod (how much comes from
  the executor and how much from numba).

Reported per run: the median and the fastest wall time of a step, and the mean process CPU time
of a step (all threads; on a loaded machine wall time depends on the share of the cores a
process gets, CPU time on the work it does); then medians over the repeats, and the ratios
MXNet / lightmod of each.
Both implementations compute the same loss (printed, summed over rows, after the last step).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

GAMMA, ALPHA = 2.0, 0.25          # focal loss
FEATURES, CLASSES = 64, 21
SIGMA = 3.0                        # smooth L1
BOX_FEATURES, BOX_OUTPUTS = 16, 36


# ---------------------------------------------------------------------------------------------
# the operator, two ways
# ---------------------------------------------------------------------------------------------
def numpy_focal_loss(mx):
    """The operator as MXNet's examples write one: numpy on copies."""

    def probabilities(scores):
        e = np.exp(scores - scores.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    class FocalLoss(mx.operator.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            p = probabilities(in_data[0].asnumpy())
            label = in_data[1].asnumpy().astype(np.int64)
            pt = p[np.arange(len(label)), label]
            loss = -ALPHA * (1.0 - pt) ** GAMMA * np.log(pt)
            self.assign(out_data[0], req[0], mx.nd.array(loss))

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            p = probabilities(in_data[0].asnumpy())
            label = in_data[1].asnumpy().astype(np.int64)
            rows = np.arange(len(label))
            pt = p[rows, label]
            # dL/dz_j = c * (onehot_j - p_j), c from the chain rule through p_t
            c = ALPHA * (GAMMA * (1.0 - pt) ** (GAMMA - 1.0) * pt * np.log(pt)
                         - (1.0 - pt) ** GAMMA)
            grad = -p
            grad[rows, label] += 1.0
            self.assign(in_grad[0], req[0], mx.nd.array(grad * c[:, None]))
            self.assign(in_grad[1], req[1], 0)

    return FocalLoss


def numba_focal_loss(mx):
    """The operator on the executor's memory with compiled loops (lightmod only)."""
    import math

    import numba

    @numba.njit(parallel=True, fastmath=True, cache=True)
    def forward_kernel(scores, label, loss):
        for r in numba.prange(scores.shape[0]):
            top = scores[r, 0]
            for j in range(1, scores.shape[1]):
                top = max(top, scores[r, j])
            total = 0.0
            for j in range(scores.shape[1]):
                total += math.exp(scores[r, j] - top)
            pt = math.exp(scores[r, int(label[r])] - top) / total
            loss[r] = -ALPHA * (1.0 - pt) ** GAMMA * math.log(pt)

    @numba.njit(parallel=True, fastmath=True, cache=True)
    def backward_kernel(scores, label, grad, add):
        for r in numba.prange(scores.shape[0]):
            top = scores[r, 0]
            for j in range(1, scores.shape[1]):
                top = max(top, scores[r, j])
            total = 0.0
            for j in range(scores.shape[1]):
                total += math.exp(scores[r, j] - top)
            y = int(label[r])
            pt = math.exp(scores[r, y] - top) / total
            c = ALPHA * (GAMMA * (1.0 - pt) ** (GAMMA - 1.0) * pt * math.log(pt)
                         - (1.0 - pt) ** GAMMA)
            for j in range(scores.shape[1]):
                g = c * ((1.0 if j == y else 0.0) - math.exp(scores[r, j] - top) / total)
                grad[r, j] = grad[r, j] + g if add else g

    class FocalLoss(mx.operator.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            forward_kernel(in_data[0].numpy_view(), in_data[1].numpy_view(),
                           out_data[0].numpy_view())

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            if req[0] != "null":
                backward_kernel(in_data[0].numpy_view(), in_data[1].numpy_view(),
                                in_grad[0].numpy_view(), req[0] == "add")
            self.assign(in_grad[1], req[1], 0)

    return FocalLoss


def numpy_smooth_l1(mx):
    """Weighted smooth-L1 as MXNet's examples write an operator: numpy on copies."""
    sigma2 = SIGMA * SIGMA

    class SmoothL1(mx.operator.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            diff = in_data[0].asnumpy() - in_data[1].asnumpy()
            absd = np.abs(diff)
            loss = np.where(absd < 1.0 / sigma2, 0.5 * sigma2 * diff * diff, absd - 0.5 / sigma2)
            self.assign(out_data[0], req[0], mx.nd.array(loss * in_data[2].asnumpy()))

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            diff = in_data[0].asnumpy() - in_data[1].asnumpy()
            grad = np.where(np.abs(diff) < 1.0 / sigma2, sigma2 * diff, np.sign(diff))
            self.assign(in_grad[0], req[0], mx.nd.array(grad * in_data[2].asnumpy()))
            self.assign(in_grad[1], req[1], 0)
            self.assign(in_grad[2], req[2], 0)

    return SmoothL1


def numba_smooth_l1(mx):
    """Weighted smooth-L1 on the executor's memory with compiled loops (lightmod only)."""
    import numba

    @numba.njit(parallel=True, fastmath=True, cache=True)
    def forward_kernel(pred, target, weight, out, sigma2):
        for i in numba.prange(pred.size):
            d = pred[i] - target[i]
            a = abs(d)
            out[i] = weight[i] * (0.5 * sigma2 * d * d if a < 1.0 / sigma2 else a - 0.5 / sigma2)

    @numba.njit(parallel=True, fastmath=True, cache=True)
    def backward_kernel(pred, target, weight, grad, sigma2, add):
        for i in numba.prange(pred.size):
            d = pred[i] - target[i]
            if abs(d) < 1.0 / sigma2:
                g = sigma2 * d
            else:
                g = 1.0 if d > 0 else -1.0
            grad[i] = grad[i] + weight[i] * g if add else weight[i] * g

    def flat(array):
        return array.numpy_view().reshape(-1)

    class SmoothL1(mx.operator.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            forward_kernel(flat(in_data[0]), flat(in_data[1]), flat(in_data[2]),
                           flat(out_data[0]), SIGMA * SIGMA)

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            if req[0] != "null":
                backward_kernel(flat(in_data[0]), flat(in_data[1]), flat(in_data[2]),
                                flat(in_grad[0]), SIGMA * SIGMA, req[0] == "add")
            self.assign(in_grad[1], req[1], 0)
            self.assign(in_grad[2], req[2], 0)

    return SmoothL1


def register(mx, op_name, op_class):
    @mx.operator.register("bench_" + op_name)
    class LossProp(mx.operator.CustomOpProp):
        def __init__(self):
            super().__init__(need_top_grad=False)

        def list_arguments(self):
            return ["data", "label"] if op_name == "focal" else ["pred", "target", "weight"]

        def infer_shape(self, in_shape):
            if op_name == "focal":
                rows = in_shape[0][0]
                return [in_shape[0], (rows,)], [(rows,)], []
            return [in_shape[0]] * 3, [in_shape[0]], []

        def create_operator(self, ctx, in_shapes, in_dtypes):
            return op_class()

    return LossProp


IMPLEMENTATIONS = {("focal", "numba"): numba_focal_loss, ("focal", "numpy"): numpy_focal_loss,
                   ("smooth_l1", "numba"): numba_smooth_l1,
                   ("smooth_l1", "numpy"): numpy_smooth_l1}


def build(mx, op_name, rows):
    """The bound executor of the head, with its inputs filled."""
    rng = np.random.RandomState(0)
    data = mx.sym.Variable("data")
    if op_name == "focal":
        scores = mx.sym.FullyConnected(data, num_hidden=CLASSES, name="fc")
        net = mx.sym.Custom(scores, mx.sym.Variable("label"), op_type="bench_focal",
                            name="loss")
        ex = net.simple_bind(mx.cpu(), grad_req={"fc_weight": "write", "fc_bias": "write"},
                             data=(rows, FEATURES), label=(rows,))
        ex.arg_dict["label"][:] = rng.randint(0, CLASSES, rows)
        ex.arg_dict["fc_weight"][:] = rng.uniform(-0.1, 0.1, (CLASSES, FEATURES))
    else:
        pred = mx.sym.FullyConnected(data, num_hidden=BOX_OUTPUTS, name="fc")
        net = mx.sym.Custom(pred, mx.sym.Variable("target"), mx.sym.Variable("weight"),
                            op_type="bench_smooth_l1", name="loss")
        shape = (rows, BOX_OUTPUTS)
        ex = net.simple_bind(mx.cpu(), grad_req={"fc_weight": "write", "fc_bias": "write"},
                             data=(rows, BOX_FEATURES), target=shape, weight=shape)
        ex.arg_dict["target"][:] = rng.uniform(-0.5, 0.5, shape)
        ex.arg_dict["weight"][:] = (rng.uniform(0, 1, shape) < 0.3).astype(np.float32)
        ex.arg_dict["fc_weight"][:] = rng.uniform(-0.1, 0.1, (BOX_OUTPUTS, BOX_FEATURES))
    ex.arg_dict["data"][:] = rng.uniform(-1, 1, ex.arg_dict["data"].shape)
    ex.arg_dict["fc_bias"][:] = 0
    return ex


def run_worker(backend, op_name, rows, iters):
    if backend == "mxnet":
        import mxnet as mx
    else:
        import lightmod as mx
    flavour = "numba" if backend == "lightmod-numba" else "numpy"
    register(mx, op_name, IMPLEMENTATIONS[op_name, flavour](mx))
    ex = build(mx, op_name, rows)
    params = ["fc_weight", "fc_bias"]
    lr = 1.0 / rows

    def step():
        ex.forward(is_train=True)
        ex.backward()
        for name in params:
            mx.nd.sgd_update(ex.arg_dict[name], ex.grad_dict[name], lr=lr,
                             out=ex.arg_dict[name])
        ex.arg_dict["fc_bias"].wait_to_read()

    for _ in range(3):
        step()
    times, cpu = [], []
    for _ in range(iters):
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    loss = float(ex.outputs[0].asnumpy().astype(np.float64).sum())
    return {"backend": backend, "ms_per_step": 1e3 * statistics.median(times),
            "min_ms_per_step": 1e3 * min(times), "cpu_ms_per_step": 1e3 * statistics.mean(cpu),
            "loss": loss}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--op", choices=["smooth_l1", "focal"], default="smooth_l1")
    ap.add_argument("--rows", type=int, default=32768, help="anchors per step")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--mxnet-python", default=None)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(run_worker(args.worker, args.op, args.rows, args.iters)))
        return

    def spawn(python, backend):
        cmd = [python, os.path.abspath(__file__), "--worker", backend, "--op", args.op,
               "--rows", str(args.rows), "--iters", str(args.iters)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit("%s worker failed:\n%s" % (backend, proc.stderr[-3000:]))
        return json.loads(proc.stdout.strip().splitlines()[-1])

    backends = [("lightmod-numba", sys.executable), ("lightmod-numpy", sys.executable)]
    if args.mxnet_python:
        backends.append(("mxnet", args.mxnet_python))
    runs = {name: [] for name, _ in backends}
    for _ in range(args.repeats):
        for name, python in backends:
            runs[name].append(spawn(python, name))
    fc = (FEATURES, CLASSES) if args.op == "focal" else (BOX_FEATURES, BOX_OUTPUTS)
    print("%s custom operator training step: FC %d->%d over %d anchors, "
          "%d timed steps x %d repeats (load average %.1f)"
          % (args.op, fc[0], fc[1], args.rows, args.iters, args.repeats, os.getloadavg()[0]))
    keys = ("ms_per_step", "min_ms_per_step", "cpu_ms_per_step")
    medians = {name: {k: statistics.median(r[k] for r in runs[name]) for k in keys}
               for name in runs}
    print("%-16s %14s %14s %14s" % ("backend", "median ms", "fastest ms", "cpu ms"))
    for name in runs:
        m = medians[name]
        print("%-16s %14.2f %14.2f %14.2f   (final loss %.4f)"
              % (name, m["ms_per_step"], m["min_ms_per_step"], m["cpu_ms_per_step"],
                 runs[name][-1]["loss"]))
    if "mxnet" in medians:
        for name in ("lightmod-numba", "lightmod-numpy"):
            print("MXNet / %s per step: %.2fx (median), %.2fx (fastest), %.2fx (cpu time)"
                  % (name, *(medians["mxnet"][k] / medians[name][k] for k in keys)))

if __name__ == "__main__":
    main()
