"""dist_device_sync with values on gpu(0), run by tests/test_dist_kvstore.py under the CUDA
simulator (``NUMBA_ENABLE_CUDASIM=1``) as ``mpiexec -n 2 python tests/dist/kv_gpu.py OUT``:
the store keeps and updates values on the device, the cross-worker sum goes through host
buffers. Writes ``OUT/rank<r>.ok`` when every check passed.
"""
import os
import sys

import numpy as np

import lightmod as mx

SHAPE = (2, 3)


def grad_of(rank, step):
    return np.random.default_rng(100 * rank + step).standard_normal(SHAPE).astype(np.float32)


def main(out_dir):
    gpu = mx.gpu(0)
    kv = mx.kv.create("dist_device_sync")
    rank, size = kv.rank, kv.num_workers
    kv.set_optimizer(mx.optimizer.create("sgd", learning_rate=0.5, rescale_grad=1.0 / size))
    kv.init("w", mx.nd.full(SHAPE, 1.0 + rank, ctx=gpu))
    assert kv._store["w"].context == gpu
    out = mx.nd.zeros(SHAPE, ctx=gpu)
    expect = np.ones(SHAPE, np.float32)
    for step in range(2):
        # two arrays on the same device are summed there first
        pushed = [mx.nd.array(grad_of(rank, step), ctx=gpu),
                  mx.nd.array(grad_of(rank, step + 10), ctx=gpu)]
        kv.pushpull("w", pushed, out=out)
        total = sum(grad_of(r, step) + grad_of(r, step + 10) for r in range(size))
        expect = expect - 0.5 * total / size
        np.testing.assert_allclose(out.asnumpy(), expect, rtol=1e-5, atol=1e-6)
    assert out.context == gpu

    # the epoch-end sync reaches device arrays too
    params = {"p": mx.nd.full(SHAPE, float(rank), ctx=gpu)}
    kv._sync_params_from_rank0(params, {})
    np.testing.assert_array_equal(params["p"].asnumpy(), np.zeros(SHAPE, np.float32))

    with open(os.path.join(out_dir, "rank%d.ok" % rank), "w") as f:
        f.write("ok\n")


if __name__ == "__main__":
    main(sys.argv[1])
