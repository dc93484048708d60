"""A worker that fails mid-training, run by tests/test_dist_kvstore.py:

    mpiexec -n 2 python tests/dist/fault.py OUT --mode die    # rank 1 exits abruptly
    mpiexec -n 2 python tests/dist/fault.py OUT --mode hang   # rank 1 stops responding

Both ranks train with ``fit`` and checkpoint every epoch (only rank 0 writes, through fit's
epoch-end callbacks) to ``OUT/mlp``. Rank 1's data iterator fails during epoch 3. The other
rank must not finish (it is killed, or its kvstore times out and aborts the job); a rank that
does finish writes ``OUT/finished.<rank>``.
"""
import argparse
import os
import time

import numpy as np

import lightmod as mx



class FailingIter(mx.io.NDArrayIter):
    """An NDArrayIter that dies or hangs when asked for its ``fail_at``-th batch."""

    def __init__(self, *args, fail_at=None, mode="die", **kwargs):
        super().__init__(*args, **kwargs)
        self.fail_at, self.mode, self.served = fail_at, mode, 0

    def next(self):
        self.served += 1
        if self.fail_at is not None and self.served == self.fail_at:
            if self.mode == "die":
                os._exit(3)
            time.sleep(3600)
        return super().next()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--mode", choices=["die", "hang"], required=True)
    args = parser.parse_args()

    kv = mx.kv.create("dist_sync")
    rank, workers = kv.rank, kv.num_workers
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 6)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)
    batches_per_epoch = 64 // workers // 8
    # next() is called once more per epoch than there are batches (the StopIteration)
    fail_at = 2 * (batches_per_epoch + 1) + 2 if rank == 1 else None    # in epoch 3
    train = FailingIter(x[rank::workers], y[rank::workers], 8, fail_at=fail_at,
                        mode=args.mode)

    net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=2, name="fc")
    net = mx.sym.SoftmaxOutput(net, name="softmax")
    mod = mx.mod.Module(net, context=mx.cpu())
    prefix = os.path.join(args.out, "mlp")
    mod.fit(train, kvstore=kv, optimizer="sgd", optimizer_params={"learning_rate": 0.1},
            num_epoch=10,
            epoch_end_callback=mx.callback.module_checkpoint(mod, prefix,
                                                             save_optimizer_states=True))
    with open(os.path.join(args.out, "finished.%d" % rank), "w") as f:
        f.write("finished\n")


if __name__ == "__main__":
    main()
