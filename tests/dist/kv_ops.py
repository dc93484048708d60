"""kvstore-level checks of the MPI store, run by tests/test_dist_kvstore.py as
``mpiexec -n 2 python tests/dist/kv_ops.py <out_dir>`` (and without mpiexec: one worker).

Every worker knows every other worker's inputs (they are functions of the rank), so each
checks the cross-worker results against numpy on its own. Each rank writes
``<out_dir>/rank<r>.npz`` with what must be bit-identical across ranks, and ``rank<r>.ok``
when every check passed.
"""
import os
import sys

import numpy as np

import lightmod as mx
from lightmod.base import MXNetError

SHAPE = (3, 5)


def grad_of(rank, step, device=0):
    """The gradient worker ``rank`` pushes from ``device`` at ``step``."""
    rng = np.random.default_rng(1000 * rank + 10 * step + device)
    return rng.standard_normal(SHAPE).astype(np.float32)


def main(out_dir):
    kv = mx.kv.create("dist_sync")
    rank, size = kv.rank, kv.num_workers
    assert kv.type == "dist_sync"
    assert 0 <= rank < size
    results = {}

    # numba threads: the cores shared out among the ranks on this machine
    if not os.environ.get("NUMBA_NUM_THREADS") and not os.environ.get("LIGHTMOD_NUM_THREADS"):
        import numba
        expect = max(1, min(len(os.sched_getaffinity(0)), (os.cpu_count() or 1) // size))
        assert numba.get_num_threads() == expect, (numba.get_num_threads(), expect)

    # init: every worker ends up with rank 0's value (int and str keys, lists of keys)
    kv.init(3, mx.nd.full(SHAPE, 10.0 + rank))
    kv.init([5, 7], [mx.nd.full(SHAPE, 20.0 + rank), mx.nd.full(SHAPE, 30.0 + rank)])
    out = mx.nd.zeros(SHAPE)
    for key, value in ((3, 10.0), (5, 20.0), (7, 30.0)):
        kv.pull(key, out=out)
        np.testing.assert_array_equal(out.asnumpy(), np.full(SHAPE, value, np.float32))

    # push without an updater: the stored value becomes the sum over workers (and devices)
    kv.push(3, mx.nd.array(grad_of(rank, 0)))
    kv.pull(3, out=out)
    expect = sum(grad_of(r, 0) for r in range(size))
    np.testing.assert_allclose(out.asnumpy(), expect, rtol=1e-6, atol=1e-6)
    results["push_sum"] = out.asnumpy()

    devs = [mx.nd.array(grad_of(rank, 1, d), ctx=mx.cpu(d)) for d in range(2)]
    outs = [mx.nd.zeros(SHAPE, ctx=mx.cpu(d)) for d in range(2)]
    kv.pushpull(5, devs, out=outs)
    expect = sum(grad_of(r, 1, d) for r in range(size) for d in range(2))
    for o in outs:
        np.testing.assert_allclose(o.asnumpy(), expect, rtol=1e-5, atol=1e-5)
    results["pushpull_devices"] = outs[0].asnumpy()

    # the pushed arrays are left alone
    np.testing.assert_array_equal(devs[0].asnumpy(), grad_of(rank, 1, 0))

    # an updater sees the cross-worker sum and every worker applies it
    kv2 = mx.kv.create("dist_sync")
    seen = []

    def updater(key, grad, weight):
        seen.append(key)
        weight[:] = weight - 0.5 * grad
    kv2._set_updater(updater)
    kv2.init("w", mx.nd.full(SHAPE, float(rank)))
    kv2.pushpull("w", mx.nd.array(grad_of(rank, 2)), out=out)
    expect = 0.0 - 0.5 * sum(grad_of(r, 2) for r in range(size))
    np.testing.assert_allclose(out.asnumpy(), expect, rtol=1e-5, atol=1e-6)
    assert seen == ["w"] or seen == [b"w"], seen

    # set_optimizer: momentum SGD on the summed gradient, states saved and loaded per worker
    kv3 = mx.kv.create("dist_sync")
    opt = mx.optimizer.create("sgd", learning_rate=0.1, momentum=0.9, wd=0.01,
                              rescale_grad=1.0 / size)
    kv3.set_optimizer(opt)
    w0 = np.linspace(-1, 1, 15, dtype=np.float32).reshape(SHAPE)
    kv3.init("fc_weight", mx.nd.array(w0 + rank))      # rank 0's value wins
    ref_w, ref_mom = w0.astype(np.float64), np.zeros(SHAPE)
    for step in range(3):
        kv3.pushpull("fc_weight", mx.nd.array(grad_of(rank, 10 + step)), out=out)
        g = sum(grad_of(r, 10 + step) for r in range(size)).astype(np.float64) / size
        ref_mom = 0.9 * ref_mom - 0.1 * (g + 0.01 * ref_w)
        ref_w = ref_w + ref_mom
        np.testing.assert_allclose(out.asnumpy(), ref_w, rtol=1e-5, atol=1e-5)
    results["sgd"] = out.asnumpy()
    states = os.path.join(out_dir, "rank%d.states" % rank)
    kv3.save_optimizer_states(states)
    kv3.pushpull("fc_weight", mx.nd.array(grad_of(rank, 20)), out=out)
    after_one_more = out.asnumpy()
    kv4 = mx.kv.create("dist_sync")
    kv4.set_optimizer(mx.optimizer.create("sgd", learning_rate=0.1, momentum=0.9, wd=0.01,
                                          rescale_grad=1.0 / size))
    kv4.init("fc_weight", mx.nd.array(results["sgd"]))
    kv4.load_optimizer_states(states)
    kv4.pushpull("fc_weight", mx.nd.array(grad_of(rank, 20)), out=out)
    np.testing.assert_array_equal(out.asnumpy(), after_one_more)

    # 2-bit compression across workers: each worker quantizes its own (device-summed)
    # gradient against its own residual; the decoded contributions are summed
    threshold = 0.5
    for kv_type in ("dist_sync", "dist_device_sync"):
        kvc = mx.kv.create(kv_type)
        kvc.set_gradient_compression({"type": "2bit", "threshold": threshold})
        kvc.init(9, mx.nd.zeros(SHAPE))
        residuals = [np.zeros(SHAPE, np.float32) for _ in range(size)]
        for step in range(4):
            pushed = [mx.nd.array(grad_of(rank, 30 + step, d), ctx=mx.cpu(d)) for d in range(2)]
            kvc.pushpull(9, pushed, out=out)
            expect = np.zeros(SHAPE, np.float32)
            for r in range(size):
                residuals[r] += grad_of(r, 30 + step, 0) + grad_of(r, 30 + step, 1)
                sent = np.where(residuals[r] >= threshold, threshold,
                                np.where(residuals[r] <= -threshold, -threshold, 0.0))
                residuals[r] -= sent.astype(np.float32)
                expect += sent.astype(np.float32)
            np.testing.assert_allclose(out.asnumpy(), expect, rtol=1e-6, atol=1e-6)
        results["compressed_" + kv_type] = out.asnumpy()

    # compression refuses row_sparse gradients (on every worker, before any communication)
    try:
        kvc.push(9, mx.nd.zeros(SHAPE).tostype("row_sparse"))
        raise AssertionError("compressed row_sparse push went through")
    except MXNetError as err:
        assert "row_sparse" in str(err), err

    # float16 values are summed in float32 and stored as float16; float64 stays float64
    for key, dtype in ((13, np.float16), (15, np.float64)):
        kv.init(key, mx.nd.zeros(SHAPE, dtype=dtype))
        kv.push(key, mx.nd.array(grad_of(rank, 40), dtype=dtype))
        typed = mx.nd.zeros(SHAPE, dtype=dtype)
        kv.pull(key, out=typed)
        assert typed.dtype == dtype
        expect = sum(grad_of(r, 40).astype(dtype).astype(np.float32) for r in range(size))
        np.testing.assert_allclose(typed.asnumpy(), expect.astype(dtype), rtol=1e-3)

    # row_sparse_pull reads the (identical) stored value
    kv.init(11, mx.nd.array(np.arange(15, dtype=np.float32).reshape(SHAPE) * (rank + 1)))
    rsp = mx.nd.zeros(SHAPE).tostype("row_sparse")
    kv.row_sparse_pull(11, out=rsp, row_ids=mx.nd.array([2]))
    expect = np.zeros(SHAPE, np.float32)
    expect[2] = np.arange(10, 15)
    np.testing.assert_array_equal(rsp.asnumpy(), expect)

    # the workers must init the same keys: a mismatch is an error on every rank
    try:
        kv.init(100 + rank if size > 1 else 100, mx.nd.zeros(SHAPE))
        assert size == 1, "mismatched init keys went unnoticed"
    except MXNetError as err:
        assert size > 1 and "different keys" in str(err), err

    # fit hooks: parameters from rank 0, rank 0's stop decision, unequal epochs detected
    params = {"a": mx.nd.full(SHAPE, float(rank)), "b": mx.nd.full((2,), 5.0 + rank)}
    kv._sync_params_from_rank0(params, {"c": mx.nd.full((1,), 7.0 + rank)})
    np.testing.assert_array_equal(params["a"].asnumpy(), np.zeros(SHAPE, np.float32))
    np.testing.assert_array_equal(params["b"].asnumpy(), np.full((2,), 5.0, np.float32))
    assert kv._agree_to_stop(rank == 0) is True
    assert kv._agree_to_stop(rank == 1) is False
    try:
        kv._agree_to_stop(False, last_batch=(rank == 0))
        assert size == 1, "unequal epoch lengths went unnoticed"
    except MXNetError as err:
        assert size > 1 and "different lengths" in str(err), err

    kv.barrier()
    kv._barrier()
    np.savez(os.path.join(out_dir, "rank%d.npz" % rank), **results)
    with open(os.path.join(out_dir, "rank%d.ok" % rank), "w") as f:
        f.write("%d of %d\n" % (rank, size))


if __name__ == "__main__":
    main(sys.argv[1])
