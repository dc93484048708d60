"""Train a LeNet on the 8x8 digits that ship with lightmod.

    python examples/lenet_digits.py [--epochs 8] [--batch-size 32]

The images are upsampled 2x inside the network (UpSampling, nearest) to 16x16, so the classic
LeNet layers fit: conv 5x5x20, tanh, max-pool 2, conv 5x5x50, tanh, max-pool 2, FC 500, tanh,
FC 10, softmax. Written exactly as it would be for MXNet 1.x (swap the import for `mxnet`).
"""
import argparse
import logging

import lightmod as mx
from lightmod.data import load_digits


def build_lenet(num_classes=10):
    data = mx.sym.Variable("data")
    net = mx.sym.UpSampling(data, scale=2, sample_type="nearest", name="upsample")
    net = mx.sym.Convolution(net, kernel=(5, 5), num_filter=20, name="conv1")
    net = mx.sym.Activation(net, act_type="tanh", name="tanh1")
    net = mx.sym.Pooling(net, pool_type="max", kernel=(2, 2), stride=(2, 2), name="pool1")
    net = mx.sym.Convolution(net, kernel=(5, 5), num_filter=50, name="conv2")
    net = mx.sym.Activation(net, act_type="tanh", name="tanh2")
    net = mx.sym.Pooling(net, pool_type="max", kernel=(2, 2), stride=(2, 2), name="pool2")
    net = mx.sym.Flatten(net, name="flatten")
    net = mx.sym.FullyConnected(net, num_hidden=500, name="fc1")
    net = mx.sym.Activation(net, act_type="tanh", name="tanh3")
    net = mx.sym.FullyConnected(net, num_hidden=num_classes, name="fc2")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--min-accuracy", type=float, default=0.95)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    mx.random.seed(42)

    x_train, y_train = load_digits("train")
    x_val, y_val = load_digits("val")
    train = mx.io.NDArrayIter(x_train, y_train, args.batch_size, shuffle=True)
    val = mx.io.NDArrayIter(x_val, y_val, args.batch_size)

    mod = mx.mod.Module(build_lenet(), context=mx.cpu())
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
