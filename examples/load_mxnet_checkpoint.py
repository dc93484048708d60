"""Load a checkpoint that MXNet 1.9.1 saved, evaluate it, and keep training it with lightmod.

    python examples/load_mxnet_checkpoint.py

examples/data/mxnet-digits-* was written by MXNet 1.9.1's Module.save_checkpoint(...,
save_optimizer_states=True) (tests/fixtures/make_example_checkpoint.py). lightmod reads the
symbol JSON, the .params and the .states files as they are, and writes files MXNet reads back.
"""
import argparse
import logging
import os
import tempfile

import lightmod as mx
from lightmod.data import load_digits

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prefix", default=os.path.join(HERE, "data", "mxnet-digits"))
    parser.add_argument("--epoch", type=int, default=5)
    parser.add_argument("--min-accuracy", type=float, default=0.95)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    x_val, y_val = load_digits("val", flat=True)
    val = mx.io.NDArrayIter(x_val, y_val, batch_size=32)
    mod = mx.mod.Module.load(args.prefix, args.epoch, load_optimizer_states=True)
    mod.bind(data_shapes=val.provide_data, label_shapes=val.provide_label)
    acc = dict(mod.score(val, "acc"))["accuracy"]
    print("accuracy of the MXNet-trained checkpoint: %.4f" % acc)
    assert acc >= args.min_accuracy

    # continue training where MXNet stopped (momentum state included), then save again
    x_train, y_train = load_digits("train", flat=True)
    train = mx.io.NDArrayIter(x_train, y_train, batch_size=32, shuffle=True)
    mod.fit(train, begin_epoch=args.epoch, num_epoch=args.epoch + 2, optimizer="sgd",
            optimizer_params={"learning_rate": 0.05, "momentum": 0.9})
    acc = dict(mod.score(val, "acc"))["accuracy"]
    out = os.path.join(tempfile.mkdtemp(), "lightmod-digits")
    mod.save_checkpoint(out, args.epoch + 2, save_optimizer_states=True)
    print("after 2 more epochs in lightmod: %.4f; saved %s-%04d.params" % (acc, out, args.epoch + 2))
    assert acc >= args.min_accuracy


if __name__ == "__main__":
    main()
