"""Data-parallel training of the digits MLP on several workers with the MPI kvstore.

    mpiexec -n 2 python examples/dist_train.py --kv-store dist_sync
    mpiexec -f hosts.txt -n 8 python examples/dist_train.py    # over several machines
    python examples/dist_train.py                               # alone: one worker

Each MPI rank is one worker: it trains on its own shard of the data, the kvstore sums the
gradients of all workers and every worker applies the same update, so all of them hold the
same parameters. The code is what an MXNet 1.x ``--kv-store dist_sync`` script looks like
(swap the import for `mxnet` and launch it with MXNet's tools/launch.py).
"""
import argparse
import logging

import lightmod as mx
from lightmod.data import load_digits


def build_mlp(hidden=(128, 64), num_classes=10):
    net = mx.sym.Variable("data")
    for i, width in enumerate(hidden):
        net = mx.sym.FullyConnected(net, num_hidden=width, name="fc%d" % (i + 1))
        net = mx.sym.Activation(net, act_type="relu", name="relu%d" % (i + 1))
    net = mx.sym.FullyConnected(net, num_hidden=num_classes, name="fc%d" % (len(hidden) + 1))
    return mx.sym.SoftmaxOutput(net, name="softmax")


def shard(x, y, kv):
    """This worker's part of (x, y). Every worker gets the same number of samples, hence the
    same number of batches per epoch (the workers meet at every batch)."""
    n = len(x) // kv.num_workers * kv.num_workers
    return x[kv.rank:n:kv.num_workers], y[kv.rank:n:kv.num_workers]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kv-store", default="dist_sync",
                        help="dist_sync, dist_device_sync, or local for comparison")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--model-prefix", default=None,
                        help="checkpoint every epoch to PREFIX-%%04d.params (rank 0 writes)")
    parser.add_argument("--min-accuracy", type=float, default=0.95)
    args = parser.parse_args()

    kv = mx.kv.create(args.kv_store)
    logging.basicConfig(level=logging.INFO,
                        format="[worker %d/%d] %%(message)s" % (kv.rank, kv.num_workers))
    mx.random.seed(42 + kv.rank)   # shuffling differs per worker; rank 0's init is used

    x_train, y_train = shard(*load_digits("train", flat=True), kv)
    x_val, y_val = load_digits("val", flat=True)
    train = mx.io.NDArrayIter(x_train, y_train, args.batch_size, shuffle=True)
    val = mx.io.NDArrayIter(x_val, y_val, args.batch_size)

    mod = mx.mod.Module(build_mlp(), context=mx.cpu())
    checkpoint = mx.callback.do_checkpoint(args.model_prefix) if args.model_prefix else None
    # rescale_grad becomes 1 / (batch_size x num_workers): the gradient of the global batch
    mod.fit(train, eval_data=val, eval_metric="acc", num_epoch=args.epochs, kvstore=kv,
            optimizer="sgd", optimizer_params={"learning_rate": args.lr, "momentum": 0.9},
            initializer=mx.init.Xavier(), epoch_end_callback=checkpoint,
            batch_end_callback=mx.callback.Speedometer(args.batch_size * kv.num_workers, 10))

    acc = dict(mod.score(val, "acc"))["accuracy"]
    if kv.rank == 0:
        print("validation accuracy: %.4f (%d worker%s)"
              % (acc, kv.num_workers, "s" if kv.num_workers > 1 else ""))
    # the parameters are the same on every worker, so every worker sees the same accuracy
    if acc < args.min_accuracy:
        raise SystemExit("worker %d: accuracy %.4f is below %.2f"
                         % (kv.rank, acc, args.min_accuracy))


if __name__ == "__main__":
    main()
