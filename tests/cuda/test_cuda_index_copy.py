"""contrib.index_copy on gpu(0) (NUMBA_ENABLE_CUDASIM=1 or a GPU): the values and gradients
of the CPU, repeated indices keeping their last row."""
import numpy as np
import pytest

import lightmod as mx
from lightmod.kernels import cuda_support

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not (cuda_support.simulator_enabled()
                                      or cuda_support.num_gpus() > 0),
                                 reason="needs a GPU or NUMBA_ENABLE_CUDASIM=1")]


def _run(ctx, dtype, old, idx, new, head):
    x = mx.nd.array(old, ctx=ctx, dtype=dtype)
    t = mx.nd.array(new, ctx=ctx, dtype=dtype)
    x.attach_grad()
    t.attach_grad()
    with mx.autograd.record():
        out = mx.nd.contrib.index_copy(x, mx.nd.array(idx, ctx=ctx), t)
    out.backward(mx.nd.array(head, ctx=ctx, dtype=dtype))
    return out.asnumpy(), x.grad.asnumpy(), t.grad.asnumpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_index_copy_on_gpu_matches_cpu(dtype):
    rng = np.random.default_rng(0)
    old = rng.standard_normal((7, 3, 2))
    new = rng.standard_normal((4, 3, 2))
    idx = [6, 0, 6, 3]                  # 6 twice: the third row wins
    head = rng.standard_normal((7, 3, 2))
    gpu = _run(mx.gpu(0), dtype, old, idx, new, head)
    cpu = _run(mx.cpu(), dtype, old, idx, new, head)
    for got, want in zip(gpu, cpu):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(gpu[0][6], new[2].astype(dtype))
