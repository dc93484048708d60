"""The random operators on a GPU context (run under NUMBA_ENABLE_CUDASIM=1): samples are drawn
on the host from the GPU's own stream and copied to the device; failures are reported where
the device result is read."""
import os

import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError

if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") in ("", "0") and mx.num_gpus() == 0:
    pytest.skip("needs a GPU or NUMBA_ENABLE_CUDASIM=1", allow_module_level=True)

G = mx.gpu(0)


def test_samples_land_on_the_gpu_and_follow_the_law():
    mx.random.seed(3)
    x = mx.nd.random.normal(1.0, 2.0, shape=(100000,), ctx=G)
    assert x.context == G and not isinstance(x._data, np.ndarray)
    host = x.asnumpy().astype(np.float64)
    assert abs(host.mean() - 1.0) < 5 * 2.0 / np.sqrt(host.size)
    assert abs(host.std() - 2.0) < 0.05
    params = mx.nd.array([[0.5], [4.0]], ctx=G)
    s = mx.nd.random.poisson(params, shape=(50000,))
    assert s.context == G and s.shape == (2, 1, 50000)
    means = s.asnumpy().mean(axis=(1, 2))
    np.testing.assert_allclose(means, [0.5, 4.0], atol=5 * np.sqrt(4.0 / 50000))


def test_gpu_and_host_streams_follow_the_seeding_rules():
    # seed(s): gpu(0) starts from s + 0, like the host: the same numbers
    mx.random.seed(21)
    on_gpu = mx.nd.random.uniform(shape=(6,), ctx=G).asnumpy()
    mx.random.seed(21)
    np.testing.assert_array_equal(on_gpu, mx.nd.random.uniform(shape=(6,)).asnumpy())
    # seed(s, ctx=gpu(0)) replays the GPU stream without touching the host's
    mx.random.seed(21)
    host_first = mx.nd.random.uniform(shape=(6,)).asnumpy()
    mx.random.seed(5, ctx=G)
    a = mx.nd.random.uniform(shape=(6,), ctx=G).asnumpy()
    host_second = mx.nd.random.uniform(shape=(6,)).asnumpy()
    mx.random.seed(5, ctx=G)
    np.testing.assert_array_equal(a, mx.nd.random.uniform(shape=(6,), ctx=G).asnumpy())
    mx.random.seed(21)
    mx.nd.random.uniform(shape=(6,))
    np.testing.assert_array_equal(host_second, mx.nd.random.uniform(shape=(6,)).asnumpy())
    assert not np.array_equal(host_first, host_second)


def test_bound_graph_on_the_gpu_draws_from_the_gpu_stream():
    x = mx.sym.var("x")
    y = mx.sym.random.uniform(-1.5, 3.0, shape=(3, 4)) + x
    exe = y.bind(G, {"x": mx.nd.zeros((3, 4), ctx=G)})
    mx.random.seed(9, ctx=G)
    first = exe.forward()[0].asnumpy()
    mx.random.seed(9, ctx=G)
    np.testing.assert_array_equal(exe.forward()[0].asnumpy(), first)
    assert first.min() >= -1.5 and first.max() < 3.0


def test_multinomial_shuffle_and_failures_on_the_gpu():
    probs = mx.nd.array([[0.0, 1.0], [1.0, 0.0]], ctx=G)
    idx, logp = mx.nd.random.multinomial(probs, shape=4, get_prob=True)
    assert idx.context == G
    np.testing.assert_array_equal(idx.asnumpy(), [[1] * 4, [0] * 4])
    np.testing.assert_array_equal(logp.asnumpy(), np.zeros((2, 4)))
    data = mx.nd.array(np.arange(12).reshape(6, 2), ctx=G)
    rows = mx.nd.random.shuffle(data).asnumpy()
    assert sorted(rows[:, 0].tolist()) == list(range(0, 12, 2))
    np.testing.assert_array_equal(rows[:, 1] - rows[:, 0], np.ones(6))
    bad = mx.nd.random.normal(0, -1, shape=(2,), ctx=G)
    result = mx.nd.dot(bad, bad)
    with pytest.raises(MXNetError, match="_random_normal"):
        result.asnumpy()
    bad.asnumpy()
