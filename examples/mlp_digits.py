"""Train a multi-layer perceptron on the 8x8 digits that ship with lightmod.

    python examples/mlp_digits.py [--epochs 10] [--context cpu]

The script is written exactly as it would be for MXNet 1.x (swap the import for `mxnet`).
"""
import argparse
import logging

import numpy as np

import lightmod as mx
from lightmod.data import load_digits


def build_mlp(hidden=(128, 64), num_classes=10):
    net = mx.sym.Variable("data")
    for i, width in enumerate(hidden):
        net = mx.sym.FullyConnected(net, num_hidden=width, name="fc%d" % (i + 1))
        net = mx.sym.Activation(net, act_type="relu", name="relu%d" % (i + 1))
    net = mx.sym.FullyConnected(net, num_hidden=num_classes, name="fc%d" % (len(hidden) + 1))
    return mx.sym.SoftmaxOutput(net, name="softmax")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--min-accuracy", type=float, default=0.95)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    mx.random.seed(42)
    np.random.seed(42)      # NDArrayIter shuffles with numpy's generator, as MXNet's does

    x_train, y_train = load_digits("train", flat=True)
    x_val, y_val = load_digits("val", flat=True)
    train = mx.io.NDArrayIter(x_train, y_train, args.batch_size, shuffle=True)
    val = mx.io.NDArrayIter(x_val, y_val, args.batch_size)

    mod = mx.mod.Module(build_mlp(), context=mx.cpu())
    mod.fit(train, eval_data=val, eval_metric="acc", num_epoch=args.epochs,
            optimizer="sgd", optimizer_params={"learning_rate": args.lr, "momentum": 0.9},
            initializer=mx.init.Xavier(),
            batch_end_callback=mx.callback.Speedometer(args.batch_size, 20))
    acc = dict(mod.score(val, "acc"))["accuracy"]
    print("validation accuracy: %.4f" % acc)
    if acc < args.min_accuracy:
        raise SystemExit("accuracy %.4f is below %.2f" % (acc, args.min_accuracy))


if __name__ == "__main__":
    main()
