"""Data-parallel training over several contexts, as MXNet users did with several GPUs.

    python examples/multi_context.py [--num-contexts 2]

Each batch is split over the contexts (mx.cpu(0), mx.cpu(1), ... behave as separate replicas;
use mx.gpu(i) on a machine with GPUs), gradients are summed by the kvstore and every replica
applies the same update. The script checks that the result equals single-context training.
"""
import argparse
import logging

import numpy as np

import lightmod as mx
from lightmod.data import load_digits


def train(contexts, epochs, x, y, seed=7):
    mx.random.seed(seed)
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=64, name="fc1")
    net = mx.sym.Activation(net, act_type="tanh")
    net = mx.sym.FullyConnected(net, num_hidden=10, name="fc2")
    net = mx.sym.SoftmaxOutput(net, name="softmax")
    it = mx.io.NDArrayIter(x, y, batch_size=64, shuffle=False, last_batch_handle="discard")
    mod = mx.mod.Module(net, context=contexts)
    mod.fit(it, num_epoch=epochs, kvstore="device", optimizer="sgd",
            optimizer_params={"learning_rate": 0.2}, initializer=mx.init.Xavier())
    return mod


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--num-contexts", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    x, y = load_digits("train", flat=True)
    contexts = [mx.cpu(i) for i in range(args.num_contexts)]
    multi = train(contexts, args.epochs, x, y)
    single = train(mx.cpu(), args.epochs, x, y)
    for name, arr in multi.get_params()[0].items():
        diff = np.abs(arr.asnumpy() - single.get_params()[0][name].asnumpy()).max()
        print("%-10s max |multi - single| = %.2e" % (name, diff))
        assert diff < 1e-4, name
    val_x, val_y = load_digits("val", flat=True)
    acc = dict(multi.score(mx.io.NDArrayIter(val_x, val_y, 64), "acc"))["accuracy"]
    print("validation accuracy on %d contexts: %.4f" % (len(contexts), acc))
    assert acc > 0.9


if __name__ == "__main__":
    main()
