"""The sparse family of operators (``_sparse_retain`` and the ``_scatter_*`` operators), the
storage types bound executors give their outputs, and MXNet's refusals of sparse inputs
(``BatchNorm(fix_gamma=True)``), checked against numpy references and numeric gradients."""
import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError
from lightmod.test_utils import check_numeric_gradient, check_symbolic_backward

RNG = np.random.default_rng(7)


def _rows_with_values(shape, keep):
    """A float32 array whose rows in ``keep`` are random non-zero, the rest zero."""
    out = np.zeros(shape, np.float32)
    out[list(keep)] = RNG.uniform(0.5, 2.0, (len(keep),) + tuple(shape[1:]))
    return out


@pytest.mark.parametrize("index_dtype", ["float32", "int32", "int64"])
@pytest.mark.parametrize("shape", [(6, 3), (5, 2, 3)])
def test_retain_keeps_the_listed_rows(shape, index_dtype):
    data = _rows_with_values(shape, [r for r in (0, 2, 3, 5) if r < shape[0]])
    rows = [3, 0, 4]
    out = mx.nd.sparse.retain(mx.nd.array(data).tostype("row_sparse"),
                              indices=mx.nd.array(rows, dtype=index_dtype))
    expected = np.zeros_like(data)
    expected[rows] = data[rows]
    assert out.stype == "row_sparse"
    np.testing.assert_array_equal(out.asnumpy(), expected)
    method = mx.nd.array(data).tostype("row_sparse").retain(mx.nd.array(rows))
    np.testing.assert_array_equal(method.asnumpy(), expected)


def test_retain_refuses_rows_outside_the_array_and_missing_indices():
    data = mx.nd.ones((3, 2)).tostype("row_sparse")
    with pytest.raises(MXNetError, match=r"outside \[0, 3\)"):
        mx.nd.sparse.retain(data, mx.nd.array([0, 3]))
    with pytest.raises(MXNetError, match=r"outside \[0, 3\)"):
        mx.nd.sparse.retain(data, mx.nd.array([-1]))
    # MXNet's own test: the indices missing (an attribute it does not declare is kept and
    # ignored, as by every operator without parameters)
    with pytest.raises(MXNetError, match="indices"):
        mx.nd.sparse.retain(data, invalid_arg="garbage_value")
    kept = mx.nd.sparse.retain(data, mx.nd.array([0]), invalid_arg="garbage_value")
    np.testing.assert_array_equal(kept.asnumpy(), [[1, 1], [0, 0], [0, 0]])
    with pytest.raises(MXNetError, match="must be 1-D"):
        mx.nd.sparse.retain(data, mx.nd.array([[0]]))


def test_retain_gradient_passes_only_the_kept_rows():
    data = mx.sym.var("data", stype="row_sparse")
    idx = mx.sym.var("indices")
    net = mx.sym.sparse.retain(data=data, indices=idx)
    values = _rows_with_values((5, 3), [0, 1, 4])
    rows = mx.nd.array([4, 1])
    check_numeric_gradient(net, [mx.nd.array(values).tostype("row_sparse"), rows],
                           grad_nodes=["data"], grad_stype_dict={"data": "row_sparse"})
    head = RNG.uniform(-1, 1, (5, 3)).astype(np.float32)
    expected = np.zeros_like(head)
    expected[[1, 4]] = head[[1, 4]]
    check_symbolic_backward(net, [mx.nd.array(values).tostype("row_sparse"), rows], [head],
                            [expected, np.zeros(2)], grad_stypes={"data": "row_sparse"})
    # grad_req='add' accumulates the masked head gradient
    exe = net.bind(mx.cpu(), args={"data": mx.nd.array(values), "indices": rows},
                   args_grad={"data": mx.nd.ones((5, 3))}, grad_req={"data": "add"})
    exe.forward(is_train=True)
    exe.backward(mx.nd.array(head))
    np.testing.assert_allclose(exe.grad_dict["data"].asnumpy(), 1 + expected, rtol=1e-6)


def _stored(lhs, stype):
    """Where a ``stype`` array stores an entry (lightmod: non-zero entries, or rows)."""
    if stype == "csr":
        return lhs != 0
    if stype == "row_sparse":
        rows = np.any(lhs.reshape(lhs.shape[0], -1) != 0, axis=1)
        return np.broadcast_to(rows.reshape((-1,) + (1,) * (lhs.ndim - 1)), lhs.shape)
    return np.ones(lhs.shape, bool)


@pytest.mark.parametrize("stype", ["default", "csr", "row_sparse"])
@pytest.mark.parametrize("op, fn", [("_scatter_plus_scalar", np.add),
                                    ("_scatter_minus_scalar", np.subtract)])
def test_scatter_scalar_touches_only_stored_entries(stype, op, fn):
    lhs = _rows_with_values((6, 4), [1, 2, 5])
    lhs[2, 1] = 0                     # a zero inside a stored row: row_sparse stores it
    x = mx.nd.array(lhs).tostype(stype) if stype != "default" else mx.nd.array(lhs)
    out = getattr(mx.nd._internal, op)(x, scalar=9)
    assert out.stype == stype
    np.testing.assert_allclose(out.asnumpy(), np.where(_stored(lhs, stype), fn(lhs, 9), 0),
                               rtol=1e-6)


@pytest.mark.parametrize("rhs_stype", ["default", "row_sparse", "csr"])
def test_scatter_div_of_row_sparse_divides_the_stored_rows(rhs_stype):
    lhs = _rows_with_values((5, 3), [0, 3])
    rhs = _rows_with_values((5, 3), [0, 1, 2, 3, 4])
    l_nd = mx.nd.array(lhs).tostype("row_sparse")
    r_nd = mx.nd.array(rhs) if rhs_stype == "default" else mx.nd.array(rhs).tostype(rhs_stype)
    out = mx.nd._internal._scatter_elemwise_div(l_nd, r_nd)
    assert out.stype == "row_sparse"
    np.testing.assert_allclose(out.asnumpy(), np.where(_stored(lhs, "row_sparse"), lhs / rhs, 0),
                               rtol=1e-6)
    assert out.indices.asnumpy().tolist() == [0, 3]
    # a dense or csr left operand divides everywhere, as elemwise_div does
    dense = mx.nd._internal._scatter_elemwise_div(mx.nd.array(lhs).tostype("csr"), r_nd)
    assert dense.stype == "default"
    np.testing.assert_allclose(dense.asnumpy(), lhs / rhs, rtol=1e-6)


def test_scatter_ops_in_a_bound_executor_follow_the_variable_stypes():
    lhs = _rows_with_values((4, 3), [1, 3])
    rhs = RNG.uniform(1, 2, (4, 3)).astype(np.float32)
    net = mx.sym.Group([
        mx.sym._internal._scatter_elemwise_div(mx.sym.var("l", stype="row_sparse"),
                                               mx.sym.var("r")),
        mx.sym._internal._scatter_plus_scalar(mx.sym.var("l", stype="row_sparse"), 2.0)])
    exe = net.bind(mx.cpu(), args={"l": mx.nd.array(lhs).tostype("row_sparse"),
                                   "r": mx.nd.array(rhs)})
    for _ in range(2):                # the second run reuses the step's scratch arrays
        exe.forward(is_train=False)
        assert [o.stype for o in exe.outputs] == ["row_sparse", "row_sparse"]
        stored = _stored(lhs, "row_sparse")
        np.testing.assert_allclose(exe.outputs[0].asnumpy(), np.where(stored, lhs / rhs, 0),
                                   rtol=1e-6)
        np.testing.assert_allclose(exe.outputs[1].asnumpy(), np.where(stored, lhs + 2, 0),
                                   rtol=1e-6)


def test_scatter_div_gradient_is_the_division_gradient():
    lhs = mx.sym.var("lhs")
    rhs = mx.sym.var("rhs")
    net = mx.sym._internal._scatter_elemwise_div(lhs, rhs)
    check_numeric_gradient(net, [RNG.uniform(0.5, 1, (3, 4)), RNG.uniform(1, 2, (3, 4))],
                           numeric_eps=1e-3, rtol=1e-2, atol=1e-3)


def _batch_norm_inputs(stype, channels=3):
    values = [RNG.normal(0, 1, (4, channels)), np.ones(channels), np.zeros(channels)]
    args = [mx.nd.array(v).tostype(stype) if stype != "default" else mx.nd.array(v)
            for v in values]
    aux = [mx.nd.zeros((channels,)), mx.nd.ones((channels,))]
    return args, aux


def test_batch_norm_refuses_sparse_inputs_with_fixed_gamma():
    args, aux = _batch_norm_inputs("row_sparse")
    fixed = mx.sym.BatchNorm(mx.sym.var("data", stype="row_sparse"), fix_gamma=True, name="bn")
    with pytest.raises(MXNetError, match="Error in operator bn: .*fix_gamma=True"):
        fixed.bind(mx.cpu(), args=args, aux_states=aux)
    with pytest.raises(MXNetError, match="fix_gamma=True is not supported for sparse"):
        mx.nd.BatchNorm(*args, *aux, fix_gamma=True)
    with pytest.raises(MXNetError, match="fix_gamma=True"):
        check_numeric_gradient(fixed, args, aux, numeric_eps=1e-3, rtol=0.16, atol=1e-2)


def test_batch_norm_with_learned_gamma_runs_on_sparse_inputs_densely():
    sparse_args, aux = _batch_norm_inputs("row_sparse")
    net = mx.sym.BatchNorm(mx.sym.var("data"), fix_gamma=False)
    check_numeric_gradient(net, sparse_args, aux, numeric_eps=1e-3, rtol=0.16, atol=1e-2)
    dense_out = mx.nd.BatchNorm(*[mx.nd.array(a.asnumpy()) for a in sparse_args], *aux,
                                fix_gamma=False)
    sparse_out = mx.nd.BatchNorm(*sparse_args, *aux, fix_gamma=False)
    assert sparse_out.stype == "default"
    np.testing.assert_allclose(sparse_out.asnumpy(), dense_out.asnumpy(), rtol=1e-6)


@pytest.mark.parametrize("axis, keepdims", [(0, False), (0, True), (1, False), (1, True)])
def test_square_sum_of_row_sparse(axis, keepdims):
    values = _rows_with_values((5, 4), [0, 2, 3])
    out = mx.nd._internal._square_sum(mx.nd.array(values).tostype("row_sparse"), axis=axis,
                                      keepdims=keepdims)
    assert out.stype == ("row_sparse" if (axis, keepdims) == (1, True) else "default")
    np.testing.assert_allclose(out.asnumpy(), np.sum(values ** 2, axis=axis, keepdims=keepdims),
                               rtol=1e-5)
    net = mx.sym._internal._square_sum(mx.sym.var("data", stype="row_sparse"), axis=axis,
                                       keepdims=keepdims)
    exe = net.bind(mx.cpu(), args=[mx.nd.array(values).tostype("row_sparse")],
                   args_grad=[mx.nd.zeros((5, 4), stype="row_sparse")])
    exe.forward(is_train=True)
    assert exe.outputs[0].stype == out.stype
    head = np.ones(out.shape, np.float32)
    exe.backward(mx.nd.array(head).tostype(out.stype) if out.stype != "default"
                 else mx.nd.array(head))
    np.testing.assert_allclose(exe.grad_dict["data"].asnumpy(), 2 * values, rtol=1e-6)


@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_take_rows_of_csr_gives_csr(mode):
    values = np.array([[0, 1, 0], [2, 0, 0], [0, 0, 3]], np.float32)
    idx = np.array([2, -1, 5, 0])
    out = mx.nd.take(mx.nd.array(values).tostype("csr"), mx.nd.array(idx), mode=mode)
    assert out.stype == "csr" and out.indptr[0].asscalar() == 0
    np.testing.assert_array_equal(out.asnumpy(), np.take(values, idx, axis=0, mode=mode))


def test_slice_of_csr_stays_csr_unless_stepped():
    values = np.arange(12, dtype=np.float32).reshape(4, 3) % 5
    csr = mx.nd.array(values).tostype("csr")
    part = mx.nd.slice(csr, begin=(1, 0), end=(3, 2))
    assert part.stype == "csr"
    np.testing.assert_array_equal(part.asnumpy(), values[1:3, 0:2])
    stepped = mx.nd.sparse.slice(csr, begin=(0,), end=(4,), step=(2,))
    assert stepped.stype == "default"
    np.testing.assert_array_equal(stepped.asnumpy(), values[0:4:2])
