"""Softmax regression on the shipped 8x8 digits, written from scratch with mx.autograd: the
parameters are plain NDArrays, the loss is NDArray code recorded under ``autograd.record()``,
and the update is a hand-written SGD step (the classroom way of teaching gradients).

    python examples/autograd_digits.py [--epochs 20] [--lr 0.5]

Written exactly as for MXNet 1.x (swap the import for `mxnet`).
"""
import argparse

import numpy as np

import lightmod as mx
from lightmod import autograd
from lightmod.data import load_digits


def cross_entropy(scores, labels):
    """Mean softmax cross-entropy of a batch of scores against integer labels."""
    log_probs = mx.nd.log_softmax(scores, axis=1)
    return -mx.nd.pick(log_probs, labels, axis=1).mean()


def accuracy(w, b, x, y):
    predicted = mx.nd.argmax(mx.nd.dot(x, w) + b, axis=1)
    return float((predicted == y).mean().asscalar())


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--min-accuracy", type=float, default=0.9)
    args = parser.parse_args()
    mx.random.seed(0)
    np.random.seed(0)

    x_train, y_train = load_digits("train", flat=True)
    x_val, y_val = load_digits("val", flat=True)
    x_val, y_val = mx.nd.array(x_val), mx.nd.array(y_val)
    w = mx.nd.random.normal(0, 0.01, shape=(64, 10))
    b = mx.nd.zeros((10,))
    for param in (w, b):
        param.attach_grad()

    train = mx.io.NDArrayIter(x_train, y_train, args.batch_size, shuffle=True)
    for epoch in range(args.epochs):
        train.reset()
        total, batches = 0.0, 0
        for batch in train:
            x, y = batch.data[0], batch.label[0]
            with autograd.record():
                loss = cross_entropy(mx.nd.dot(x, w) + b, y)
            loss.backward()
            for param in (w, b):
                param[:] = param - args.lr * param.grad
            total += float(loss.asscalar())
            batches += 1
        print("epoch %d: training loss %.4f, validation accuracy %.4f"
              % (epoch + 1, total / batches, accuracy(w, b, x_val, y_val)))
    acc = accuracy(w, b, x_val, y_val)
    if acc < args.min_accuracy:
        raise SystemExit("accuracy %.4f is below %.2f" % (acc, args.min_accuracy))


if __name__ == "__main__":
    main()
