"""kvstores with GPU values (run under NUMBA_ENABLE_CUDASIM=1 or on a GPU): a 'device' store
keeps and reduces each key on the GPU of its first value, a 'local' one on the CPU; both give
the CPU's numbers, MXNet 1.9.1's 2-bit compression golden values included. Two GPUs come from
the ``two_gpus`` fixture of conftest.py, which also checks that every kernel runs on the GPU its
arrays live on.
"""
import os

import numpy as np
import pytest

import lightmod as mx
from lightmod.kernels import cuda_support

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not (cuda_support.simulator_enabled()
                                      or cuda_support.num_gpus() > 0),
                                 reason="needs a GPU or NUMBA_ENABLE_CUDASIM=1")]

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
RNG = np.random.default_rng(8)
SHAPE = (3, 4)


def _values(n):
    return [RNG.uniform(-1, 1, SHAPE).astype(np.float32) for _ in range(n)]


@pytest.mark.parametrize("kv_type", ["device", "local"])
def test_push_sums_and_pull_copies_on_one_gpu(kv_type):
    kv = mx.kv.create(kv_type)
    init, a, b = _values(3)
    kv.init("w", mx.nd.array(init, ctx=mx.gpu(0)))
    home = mx.gpu(0) if kv_type == "device" else mx.cpu(0)
    assert kv._store["w"].context == home
    kv.push("w", [mx.nd.array(a, ctx=mx.gpu(0)), mx.nd.array(b, ctx=mx.gpu(0))])
    assert kv._merge["w"].context == home               # the sum was taken there
    outs = [mx.nd.zeros(SHAPE, ctx=mx.gpu(0)), mx.nd.zeros(SHAPE)]
    kv.pull("w", out=outs)
    for o in outs:
        np.testing.assert_allclose(o.asnumpy(), a + b, rtol=1e-6)
    assert outs[0].context == mx.gpu(0)


def test_device_store_with_optimizer_matches_cpu():
    def run(ctx):
        kv = mx.kv.create("device")
        kv.set_optimizer(mx.optimizer.Adam(learning_rate=0.1, wd=0.01))
        rng = np.random.default_rng(1)
        kv.init(3, mx.nd.array(rng.uniform(-1, 1, SHAPE), ctx=ctx))
        out = mx.nd.zeros(SHAPE, ctx=ctx)
        for _ in range(2):
            grads = [mx.nd.array(rng.uniform(-1, 1, SHAPE), ctx=ctx) for _ in range(2)]
            kv.pushpull(3, grads, out=out)
        return kv._store[3], out.asnumpy()

    stored_cpu, out_cpu = run(mx.cpu())
    stored_gpu, out_gpu = run(mx.gpu(0))
    assert stored_gpu.context == mx.gpu(0)
    np.testing.assert_allclose(out_gpu, out_cpu, rtol=1e-5, atol=1e-6)


def test_row_sparse_pull_into_gpu_arrays():
    kv = mx.kv.create("device")
    value = np.arange(12, dtype=np.float32).reshape(SHAPE)
    kv.init("e", mx.nd.array(value, ctx=mx.gpu(0)))
    out = mx.nd.zeros(SHAPE, ctx=mx.gpu(0)).tostype("row_sparse")
    kv.row_sparse_pull("e", out=out, row_ids=mx.nd.array([2, 0, 2], ctx=mx.gpu(0)))
    expected = np.zeros(SHAPE, np.float32)
    expected[[0, 2]] = value[[0, 2]]
    assert out.context == mx.gpu(0)
    np.testing.assert_array_equal(out.asnumpy(), expected)


# ---------------------------------------------------------------------------------------------
# two GPUs
# ---------------------------------------------------------------------------------------------
def test_device_store_reduces_on_the_first_gpu(two_gpus):
    kv = mx.kv.create("device")
    init, a, b = _values(3)
    kv.init(0, mx.nd.array(init, ctx=mx.gpu(0)))
    kv.push(0, [mx.nd.array(a, ctx=mx.gpu(0)), mx.nd.array(b, ctx=mx.gpu(1))])
    assert kv._merge[0].context == mx.gpu(0)
    outs = [mx.nd.zeros(SHAPE, ctx=mx.gpu(0)), mx.nd.zeros(SHAPE, ctx=mx.gpu(1))]
    kv.pull(0, out=outs)
    for o in outs:
        np.testing.assert_allclose(o.asnumpy(), a + b, rtol=1e-6)
    assert two_gpus.launches[0] > 0


def test_device_store_with_optimizer_over_two_gpus_matches_cpu(two_gpus):
    def run(contexts):
        kv = mx.kv.create("device")
        kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=0.01))
        rng = np.random.default_rng(2)
        kv.init("w", mx.nd.array(rng.uniform(-1, 1, SHAPE), ctx=contexts[0]))
        outs = [mx.nd.zeros(SHAPE, ctx=c) for c in contexts]
        for _ in range(2):
            grads = [mx.nd.array(rng.uniform(-1, 1, SHAPE), ctx=c) for c in contexts]
            kv.pushpull("w", grads, out=outs)
        return [o.asnumpy() for o in outs]

    on_cpus = run([mx.cpu(0), mx.cpu(1)])
    on_gpus = run([mx.gpu(0), mx.gpu(1)])
    for g, c in zip(on_gpus, on_cpus):
        np.testing.assert_allclose(g, c, rtol=1e-5, atol=1e-6)


def test_two_bit_compression_on_two_gpus_matches_mxnet(two_gpus):
    arrays = np.load(os.path.join(FIX, "optimizer_golden.npz"))
    kv = mx.kv.create("device")
    kv.set_gradient_compression({"type": "2bit", "threshold": 0.5})
    kv.init(0, mx.nd.zeros(SHAPE, ctx=mx.gpu(0)))
    for step in range(3):
        vals = [mx.nd.array(arrays["kv2bit/push%d/dev%d" % (step, d)], ctx=mx.gpu(d))
                for d in range(2)]
        kv.push(0, vals)
        out = mx.nd.zeros(SHAPE, ctx=mx.gpu(1))
        kv.pull(0, out=out)
        np.testing.assert_allclose(out.asnumpy(), arrays["kv2bit/pull%d" % step], rtol=1e-6)
    # each device's residual stays on that device
    assert [kv._residuals[(0, d)][0].context for d in range(2)] == [mx.gpu(0), mx.gpu(1)]
