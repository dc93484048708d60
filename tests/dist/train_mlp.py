"""Module training on the MPI store, run by tests/test_dist_kvstore.py:

    mpiexec -n 2 python tests/dist/train_mlp.py OUT --batch 8 --devices 2   # 2 workers x 8
    python tests/dist/train_mlp.py OUT --batch 16                            # 1 worker x 16

Phase 1 runs ``steps`` manual forward_backward/update steps: at step i the global batch is
rows [i*G, (i+1)*G) of the data (G = batch x workers) and worker r takes its r-th slice of
``batch`` rows. Phase 2 runs ``fit`` for ``epochs`` epochs on the shard ``x[rank::workers]``
(no shuffling), so worker batches again partition the single-worker batches. Each rank writes
``OUT/rank<r>.npz`` (parameters after each phase) and ``OUT/rank<r>.json`` (rank, workers,
how often the callbacks ran on this rank).
"""
import argparse
import json
import os

import numpy as np

import lightmod as mx

FEATURES, CLASSES, ROWS = 6, 4, 128


def make_data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((ROWS, FEATURES)).astype(np.float32)
    w = rng.standard_normal((FEATURES, CLASSES))
    y = np.argmax(x @ w + 0.3 * rng.standard_normal((ROWS, CLASSES)), axis=1)
    return x, y.astype(np.float32)


def build_net():
    net = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(net, num_hidden=16, name="fc1")
    net = mx.sym.Activation(net, act_type="relu", name="relu1")
    net = mx.sym.FullyConnected(net, num_hidden=CLASSES, name="fc2")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def params_of(mod, prefix):
    arg, aux = mod.get_params()
    out = {prefix + name: value.asnumpy() for name, value in arg.items()}
    out.update({prefix + "aux_" + name: value.asnumpy() for name, value in aux.items()})
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--batch", type=int, required=True, help="batch size per worker")
    parser.add_argument("--devices", type=int, default=1, help="CPU contexts per worker")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--kv-store", default="dist_sync")
    args = parser.parse_args()

    kv = mx.kv.create(args.kv_store)
    rank, workers = kv.rank, kv.num_workers
    x, y = make_data()
    contexts = [mx.cpu(d) for d in range(args.devices)]
    optimizer_params = {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-3}
    results = {}

    # phase 1: manual steps; every rank initialises differently, rank 0's values must win
    mx.random.seed(7 + rank)
    mod = mx.mod.Module(build_net(), context=contexts)
    mod.bind(data_shapes=[("data", (args.batch, FEATURES))],
             label_shapes=[("softmax_label", (args.batch,))])
    mod.init_params(mx.init.Xavier())
    mod.init_optimizer(kvstore=kv, optimizer="sgd", optimizer_params=optimizer_params)
    glob = args.batch * workers
    for step in range(args.steps):
        lo = step * glob + rank * args.batch
        batch = mx.io.DataBatch([mx.nd.array(x[lo:lo + args.batch])],
                                [mx.nd.array(y[lo:lo + args.batch])])
        mod.forward_backward(batch)
        mod.update()
    results.update(params_of(mod, "steps_"))

    # phase 2: fit on this worker's shard, callbacks counted
    calls = {"epoch_end": 0, "batch_end": 0}

    def on_epoch_end(epoch, symbol, arg, aux):
        calls["epoch_end"] += 1

    def on_batch_end(param):
        calls["batch_end"] += 1

    mx.random.seed(11 + rank)
    train = mx.io.NDArrayIter(x[rank::workers], y[rank::workers], args.batch)
    val = mx.io.NDArrayIter(x[:32], y[:32], 16)
    fit_mod = mx.mod.Module(build_net(), context=contexts)
    fit_mod.fit(train, eval_data=val, kvstore=args.kv_store, optimizer="sgd",
                optimizer_params=optimizer_params, initializer=mx.init.Xavier(),
                num_epoch=args.epochs, epoch_end_callback=on_epoch_end,
                batch_end_callback=on_batch_end)
    results.update(params_of(fit_mod, "fit_"))

    np.savez(os.path.join(args.out, "rank%d.npz" % rank), **results)
    with open(os.path.join(args.out, "rank%d.json" % rank), "w") as f:
        json.dump({"rank": rank, "workers": workers, **calls}, f)


if __name__ == "__main__":
    main()
