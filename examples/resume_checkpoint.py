"""Save a checkpoint with optimizer state, then resume training from it.

    python examples/resume_checkpoint.py [--prefix /tmp/digits]

Training 3 epochs, saving, loading with `Module.load(..., load_optimizer_states=True)` and
training 3 more gives the same parameters as 6 uninterrupted epochs (momentum included).
"""
import argparse
import logging
import os
import tempfile

import numpy as np

import lightmod as mx
from lightmod.data import load_digits


def symbol():
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=32, name="fc1")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.FullyConnected(net, num_hidden=10, name="fc2")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def fit(mod, it, begin, end, **kwargs):
    mod.fit(it, begin_epoch=begin, num_epoch=end, optimizer="sgd",
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9}, **kwargs)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prefix", default=os.path.join(tempfile.mkdtemp(), "digits"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    x, y = load_digits("train", flat=True)
    it = mx.io.NDArrayIter(x, y, batch_size=50, last_batch_handle="discard")

    mx.random.seed(1)
    straight = mx.mod.Module(symbol())
    fit(straight, it, 0, 6, initializer=mx.init.Xavier())

    mx.random.seed(1)
    first = mx.mod.Module(symbol())
    fit(first, it, 0, 3, initializer=mx.init.Xavier())
    first.save_checkpoint(args.prefix, 3, save_optimizer_states=True)
    print("saved %s-symbol.json, %s-0003.params, %s-0003.states" % ((args.prefix,) * 3))

    resumed = mx.mod.Module.load(args.prefix, 3, load_optimizer_states=True)
    fit(resumed, it, 3, 6)
    for name, arr in straight.get_params()[0].items():
        diff = np.abs(arr.asnumpy() - resumed.get_params()[0][name].asnumpy()).max()
        print("%-10s max |resumed - uninterrupted| = %.2e" % (name, diff))
        assert diff < 1e-5, name


if __name__ == "__main__":
    main()
