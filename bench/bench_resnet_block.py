"""ResNet-style block throughput: lightmod vs MXNet 1.9.1 vs plain numpy.

    python bench/bench_resnet_block.py [--batch 32] [--iters 20] [--repeats 3]
                                       [--mxnet-python /work/mxvenv/bin/python] [--no-profile]

Network: conv 3x3x32 + BatchNorm + relu (stem), then a basic residual block (conv 3x3 +
BatchNorm + relu, conv 3x3 + BatchNorm, + shortcut, relu), global average pooling, FC 10,
SoftmaxOutput; 3x32x32 inputs (CIFAR-sized). Same harness as bench/bench_lenet.py
(alternating subprocesses, medians, CPU time, numpy reference, per-operator profile).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_lenet import main, np_conv_backward, np_conv_forward, np_softmax_grad, run_backend  # noqa: E402

CHANNELS = 32


def build_resnet_block(mx):
    data = mx.sym.Variable("data")

    def conv_bn(x, name, relu=True):
        x = mx.sym.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=CHANNELS, no_bias=True,
                               name=name + "_conv")
        x = mx.sym.BatchNorm(x, fix_gamma=False, eps=2e-5, momentum=0.9, name=name + "_bn")
        return mx.sym.Activation(x, act_type="relu", name=name + "_relu") if relu else x

    stem = conv_bn(data, "stem")
    body = conv_bn(stem, "block_a")
    body = conv_bn(body, "block_b", relu=False)
    net = mx.sym.Activation(body + stem, act_type="relu", name="block_relu")
    net = mx.sym.Pooling(net, global_pool=True, pool_type="avg", kernel=(1, 1), name="gap")
    net = mx.sym.FullyConnected(mx.sym.Flatten(net), num_hidden=10, name="fc")
    return mx.sym.SoftmaxOutput(net, name="softmax"), (3, 32, 32)


# ---------------------------------------------------------------------------------------------
# numpy reference
# ---------------------------------------------------------------------------------------------
def np_bn_forward(x, gamma, beta, eps=2e-5):
    mean = x.mean(axis=(0, 2, 3), keepdims=True)
    var = x.var(axis=(0, 2, 3), keepdims=True)
    xhat = (x - mean) / np.sqrt(var + eps)
    return xhat * gamma.reshape(1, -1, 1, 1) + beta.reshape(1, -1, 1, 1), (xhat, var, eps)


def np_bn_backward(dy, gamma, cache):
    xhat, var, eps = cache
    m = dy.shape[0] * dy.shape[2] * dy.shape[3]
    dgamma = (dy * xhat).sum(axis=(0, 2, 3))
    dbeta = dy.sum(axis=(0, 2, 3))
    dxhat = dy * gamma.reshape(1, -1, 1, 1)
    dx = (dxhat - dxhat.sum(axis=(0, 2, 3), keepdims=True) / m
          - xhat * (dxhat * xhat).sum(axis=(0, 2, 3), keepdims=True) / m) / np.sqrt(var + eps)
    return dx, dgamma, dbeta


class NumpyResNetBlock:
    def __init__(self, batch):
        rng = np.random.RandomState(0)
        f32 = np.float32
        self.x = rng.uniform(0, 1, (batch, 3, 32, 32)).astype(f32)
        self.label = rng.randint(0, 10, batch)
        self.p = {}
        for name, cin in (("stem", 3), ("a", CHANNELS), ("b", CHANNELS)):
            self.p[name + "_w"] = rng.uniform(-.1, .1, (CHANNELS, cin, 3, 3)).astype(f32)
            self.p[name + "_g"] = np.ones(CHANNELS, f32)
            self.p[name + "_b"] = np.zeros(CHANNELS, f32)
        self.p["fc_w"] = rng.uniform(-.1, .1, (10, CHANNELS)).astype(f32)
        self.p["fc_b"] = np.zeros(10, f32)

    def _conv_bn(self, x, name, relu=True):
        p = self.p
        z, cols = np_conv_forward(x, p[name + "_w"], None, pad=1)
        y, cache = np_bn_forward(z, p[name + "_g"], p[name + "_b"])
        self.saved[name] = (x.shape, cols, cache, y if relu else None)
        return np.maximum(y, 0) if relu else y

    def _conv_bn_back(self, d, name, need_dx=True):
        p = self.p
        xshape, cols, cache, y = self.saved[name]
        if y is not None:
            d = d * (y > 0)
        dz, _, _ = np_bn_backward(d, p[name + "_g"], cache)
        dx, _, _ = np_conv_backward(dz, cols, p[name + "_w"], xshape, pad=1, need_dx=need_dx)
        return dx

    def forward(self):
        self.saved = {}
        self.stem = self._conv_bn(self.x, "stem")
        body = self._conv_bn(self._conv_bn(self.stem, "a"), "b", relu=False)
        self.s = body + self.stem
        r = np.maximum(self.s, 0)
        self.pooled = r.mean(axis=(2, 3))
        self.out = self.pooled @ self.p["fc_w"].T + self.p["fc_b"]
        return self.out

    def backward(self):
        d = np_softmax_grad(self.out, self.label)
        dpooled = d @ self.p["fc_w"]
        hw = self.s.shape[2] * self.s.shape[3]
        ds = np.broadcast_to(dpooled[:, :, None, None] / hw, self.s.shape) * (self.s > 0)
        dstem = ds + self._conv_bn_back(self._conv_bn_back(ds, "b"), "a")
        self._conv_bn_back(dstem, "stem", need_dx=False)


def run_worker(backend, batch, iters, profile):
    return run_backend(backend, build_resnet_block, batch, iters, profile, NumpyResNetBlock)


if __name__ == "__main__":
    main(os.path.abspath(__file__), 32, "ResNet-style block (CIFAR-sized)")
