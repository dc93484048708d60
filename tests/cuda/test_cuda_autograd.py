"""mx.autograd on GPU arrays (run under NUMBA_ENABLE_CUDASIM=1): the same gradients as on the
CPU, through operators, views, indexing and a copy between the devices."""
import os

import numpy as np
import pytest

import lightmod as mx
from lightmod import autograd

if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") in ("", "0") and mx.num_gpus() == 0:
    pytest.skip("needs a GPU or NUMBA_ENABLE_CUDASIM=1", allow_module_level=True)


def _gradients(ctx):
    rng = np.random.RandomState(0)
    w = mx.nd.array(rng.uniform(-1, 1, (4, 3)), ctx=ctx)
    x = mx.nd.array(rng.uniform(-1, 1, (5, 3)), ctx=ctx)
    w.attach_grad()
    x.attach_grad()
    with autograd.record():
        h = mx.nd.tanh(mx.nd.FullyConnected(x, w, num_hidden=4, no_bias=True))
        parts = h[1:3].reshape((8,)).sum() + (h[[0, 0, 4]] * 2).sum()
        moved = h.as_in_context(mx.cpu()) if ctx != mx.cpu() else h.copy()
        loss = parts + (moved * moved).sum().as_in_context(ctx)
    loss.backward()
    return loss.asnumpy(), w.grad.asnumpy(), x.grad.asnumpy()


def test_gpu_gradients_equal_cpu_gradients():
    gpu = _gradients(mx.gpu(0))
    cpu = _gradients(mx.cpu())
    assert mx.gpu(0) != mx.cpu()
    for got, want in zip(gpu, cpu):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
