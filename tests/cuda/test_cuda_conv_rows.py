"""Convolution in the row layout (ungrouped, 8+ input channels) on gpu(0) against cpu(0):
forward, and backward with 'write' and 'add' requests (run under NUMBA_ENABLE_CUDASIM=1 or on
a GPU)."""
import numpy as np
import pytest

import lightmod as mx
from lightmod.kernels import cuda_support

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not (cuda_support.simulator_enabled()
                                      or cuda_support.num_gpus() > 0),
                                 reason="needs a GPU or NUMBA_ENABLE_CUDASIM=1")]


@pytest.mark.parametrize("req", ["write", "add"])
def test_row_layout_convolution_matches_cpu(req):
    sym = mx.sym.Convolution(mx.sym.var("data"), kernel=(3, 3), pad=(1, 1), stride=(2, 1),
                             num_filter=3, name="conv")
    rng = np.random.RandomState(0)
    values = {"data": rng.uniform(-1, 1, (2, 8, 5, 4)), "conv_weight": rng.uniform(-1, 1, (3, 8, 3, 3)),
              "conv_bias": rng.uniform(-1, 1, (3,))}
    head = rng.uniform(-1, 1, (2, 3, 3, 4))
    results = []
    for ctx in (mx.cpu(), mx.gpu(0)):
        args = {k: mx.nd.array(v, ctx=ctx) for k, v in values.items()}
        grads = {k: mx.nd.ones(v.shape, ctx=ctx) for k, v in values.items()}
        exe = sym.bind(ctx, args, args_grad=grads, grad_req=req)
        out = exe.forward(is_train=True)[0].asnumpy()
        exe.backward(mx.nd.array(head, ctx=ctx))
        results.append([out] + [grads[k].asnumpy() for k in sorted(grads)])
    for cpu, gpu in zip(*results):
        np.testing.assert_allclose(gpu, cpu, rtol=1e-4, atol=1e-5)
