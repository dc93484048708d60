"""The sparse dispatches of the sparse operator family on gpu(0) agree with cpu(0): retain,
and the scatter operators on csr and row_sparse left operands (the registry test runs them on
dense inputs only), through ``nd`` calls and a bound executor."""
import numpy as np
import pytest

import lightmod as mx
from lightmod.kernels import cuda_support

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not (cuda_support.simulator_enabled()
                                      or cuda_support.num_gpus() > 0),
                                 reason="needs a GPU or NUMBA_ENABLE_CUDASIM=1")]

CPU, GPU = mx.cpu(0), mx.gpu(0)
LHS = np.array([[0, 1.5, 0], [0, 0, 0], [2, 0, -1], [0, 0, 4]], np.float32)
RHS = np.array([[2, 4, 1], [1, 2, 3], [4, 5, 2], [1, 1, 8]], np.float32)


def _on(ctx, values, stype):
    arr = mx.nd.array(values, ctx=ctx)
    return arr.tostype(stype) if stype != "default" else arr


@pytest.mark.parametrize("stype", ["csr", "row_sparse"])
@pytest.mark.parametrize("op", ["_scatter_plus_scalar", "_scatter_minus_scalar"])
def test_scatter_scalar_on_gpu_matches_cpu(op, stype):
    outs = [getattr(mx.nd._internal, op)(_on(ctx, LHS, stype), scalar=3.0) for ctx in (CPU, GPU)]
    assert outs[1].context == GPU and outs[1].stype == stype
    np.testing.assert_allclose(outs[1].asnumpy(), outs[0].asnumpy(), rtol=1e-6)
    assert np.count_nonzero(outs[0].asnumpy()) < LHS.size    # absent entries stayed zero


def test_scatter_div_and_retain_on_gpu_match_cpu():
    div = [mx.nd._internal._scatter_elemwise_div(_on(ctx, LHS, "row_sparse"), _on(ctx, RHS, "default"))
           for ctx in (CPU, GPU)]
    np.testing.assert_allclose(div[1].asnumpy(), div[0].asnumpy(), rtol=1e-6)
    kept = [mx.nd.sparse.retain(_on(ctx, LHS, "row_sparse"), mx.nd.array([3, 0], ctx=ctx))
            for ctx in (CPU, GPU)]
    assert kept[1].stype == "row_sparse"
    np.testing.assert_array_equal(kept[1].asnumpy(), kept[0].asnumpy())


def test_retain_gradient_in_an_executor_on_gpu_matches_cpu():
    net = mx.sym.sparse.retain(mx.sym.var("data", stype="row_sparse"), mx.sym.var("indices"))
    grads = []
    for ctx in (CPU, GPU):
        exe = net.bind(ctx, args={"data": _on(ctx, LHS, "row_sparse"),
                                  "indices": mx.nd.array([2, 3], ctx=ctx)},
                       args_grad={"data": mx.nd.zeros(LHS.shape, ctx=ctx)},
                       grad_req={"data": "write", "indices": "null"})
        exe.forward(is_train=True)
        exe.backward(mx.nd.array(RHS, ctx=ctx))
        assert exe.outputs[0].stype == "row_sparse"
        grads.append(exe.grad_dict["data"].asnumpy())
    np.testing.assert_array_equal(grads[1], grads[0])
    np.testing.assert_array_equal(grads[0][2:], RHS[2:])
