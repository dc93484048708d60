"""Reduction-family operators at the registry level: axis reductions, norm, dot / batch_dot,
broadcast_to / broadcast_axis / broadcast_like — forward against numpy, backward against
numeric gradients and MXNet 1.9.1 golden values, shape inference, errors."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ophelpers import backward, check_grad, forward, prepare
from test_op_tensor import (
    GOLDEN,
    _golden_value_cases,
    check_golden_value,
    fixpoint,
    raises,
    rand,
    run,
    shapes,
    small_shape,
)

from lightmod.base import MXNetError
from lightmod.operator import reduce as R
from lightmod.operator import tensor as T

FAST = settings(max_examples=12, deadline=None)

NUMPY = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod,
         "nansum": np.nansum, "nanprod": np.nanprod,
         "_square_sum": lambda x, axis, keepdims: np.sum(x * x, axis=axis, keepdims=keepdims)}


def _np_axes(shape, axis, exclude):
    nd = len(shape)
    if axis is None or axis == ():
        return tuple(range(nd))
    axes = tuple(sorted(a % nd for a in axis))
    return tuple(a for a in range(nd) if a not in axes) if exclude else axes


def _expect(fn, x, axes, keepdims):
    out = np.asarray(fn(x, axis=axes, keepdims=keepdims))   # axes () reduce nothing
    return out.reshape(out.shape or (1,))


reduce_axis = st.one_of(st.none(), st.just(()), st.integers(-4, 3).map(lambda a: (a,)),
                        st.lists(st.integers(-4, 3), min_size=1, max_size=3).map(tuple))


def test_reduction_codes_match_the_kernels():
    from lightmod.kernels import scalar_tensor as S
    for name in ("R_SUM", "R_MEAN", "R_PROD", "R_MAX", "R_MIN", "R_NANSUM", "R_NANPROD",
                 "R_SUMSQ", "R_NORM1", "R_NORM2", "R_NONFINITE"):
        assert getattr(R, name) == getattr(S, name)
    assert T.R_SUM == S.R_SUM


@pytest.mark.parametrize("name", sorted(NUMPY))
@given(shape=small_shape, axis=reduce_axis, keepdims=st.booleans(), exclude=st.booleans())
@FAST
def test_reductions_forward_and_gradient(name, shape, axis, keepdims, exclude):
    nd = len(shape)
    if axis:
        axis = tuple(a for a in axis if -nd <= a < nd)
        if not axis or len({a % nd for a in axis}) != len(axis):
            return
    x = rand(shape)
    if name in ("prod", "nanprod"):
        x = np.sign(x) * (0.5 + np.abs(x))      # away from 0 for the y / x gradient
    attrs = {"axis": axis, "keepdims": keepdims, "exclude": exclude}
    axes = _np_axes(shape, axis, exclude)
    out = run(name, attrs, [x])[0]
    np.testing.assert_allclose(out, _expect(NUMPY[name], x, axes, keepdims), rtol=1e-12)
    check_grad(name, attrs, [x], rtol=1e-4, atol=1e-6)


def test_aliases_and_full_reduction_shapes():
    x = rand((2, 3, 4))
    np.testing.assert_allclose(run("sum_axis", {"axis": 1}, [x])[0], x.sum(1))
    np.testing.assert_allclose(run("max_axis", {"axis": 1}, [x])[0], x.max(1))
    np.testing.assert_allclose(run("min_axis", {"axis": 1}, [x])[0], x.min(1))
    assert run("sum", {}, [x])[0].shape == (1,)
    assert run("sum", {"keepdims": True}, [x])[0].shape == (1, 1, 1)
    # () and exclude with () still reduce everything; exclude of all axes reduces nothing
    assert run("sum", {"axis": (), "exclude": True}, [x])[0].shape == (1,)
    np.testing.assert_array_equal(run("sum", {"axis": (0, 1, 2), "exclude": True}, [x])[0], x)
    # integer mean truncates like MXNet's integer division
    assert run("mean", {}, [np.array([[1, 2]], np.int32)])[0].tolist() == [1]


def test_nan_reductions():
    x = np.array([[np.nan, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(run("nansum", {"axis": 1}, [x])[0], [2.0, 7.0])
    np.testing.assert_array_equal(run("nanprod", {"axis": 1}, [x])[0], [2.0, 12.0])
    assert np.isnan(run("max", {"axis": 1}, [x])[0][0])
    assert np.isnan(run("min", {"axis": 1}, [x])[0][0])
    g = backward("nansum", {"axis": 1}, [x], [np.ones(2)])[0]
    np.testing.assert_array_equal(g, [[0.0, 1.0], [1.0, 1.0]])


def test_max_min_gradient_goes_to_every_tied_position():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    g = backward("max", {"axis": 1}, [x], [np.array([1.0, 2.0])])[0]
    np.testing.assert_array_equal(g, [[0, 1, 1], [2, 2, 0]])
    g = backward("min", {}, [x], [np.array([5.0])])[0]
    np.testing.assert_array_equal(g, [[0, 0, 0], [0, 0, 5]])


@pytest.mark.parametrize("ord_", [1, 2])
@given(shape=small_shape, axis=reduce_axis, keepdims=st.booleans())
@FAST
def test_norm(ord_, shape, axis, keepdims):
    nd = len(shape)
    if axis:
        axis = tuple(a for a in axis if -nd <= a < nd)
        if not axis or len({a % nd for a in axis}) != len(axis):
            return
    x = rand(shape)
    attrs = {"ord": ord_, "axis": axis, "keepdims": keepdims}
    axes = _np_axes(shape, axis, False)
    ref = (lambda v, axis, keepdims: np.sum(np.abs(v), axis=axis, keepdims=keepdims)) \
        if ord_ == 1 else \
        (lambda v, axis, keepdims: np.sqrt(np.sum(v * v, axis=axis, keepdims=keepdims)))
    expect = _expect(ref, x, axes, keepdims)
    np.testing.assert_allclose(run("norm", attrs, [x])[0], expect, rtol=1e-12)
    check_grad("norm", attrs, [x])


def test_norm_types_and_errors():
    op, p = prepare("norm", {"out_dtype": "float64"})
    assert op.infer_type(p, ["float32"]) == (["float32"], ["float64"])
    op, p = prepare("norm", {})
    assert op.infer_type(p, ["float16"]) == (["float16"], ["float16"])
    out = run("norm", {"out_dtype": "float64"}, [np.array([3.0, 4.0], np.float32)])[0]
    assert out.dtype == np.float64 and out.tolist() == [5.0]
    with pytest.raises(MXNetError, match="norm.*ord=3"):
        prepare("norm", {"ord": 3})
    raises("norm", {"exclude": True}, [(2,)], "exclude")


def test_reduce_errors_name_axis_and_shape():
    raises("sum", {"axis": (1, 1)}, [(2, 3, 4)], "duplicates", "(1, 1)", "(2, 3, 4)")
    raises("sum", {"axis": 3}, [(2, 3, 4)], "axis 3", "(2, 3, 4)")
    raises("mean", {"axis": -4}, [(2, 3, 4)], "axis -4", "(2, 3, 4)")
    raises("sum", {"keepdims": "maybe"}, [(2,)], "keepdims")
    raises("sum", {"bogus": 1}, [(2,)], "bogus")


def test_reduce_inference_both_ways():
    assert shapes("sum", {"axis": 1}, [(0, 3)])[1] == [(0,)]
    assert fixpoint("sum", {"axis": 1}, [(0, 3)], [(5,)])[0] == [(5, 3)]
    assert fixpoint("max", {"axis": 1, "keepdims": True}, [(0, 3, 0)], [(2, 1, 4)])[0] == \
        [(2, 3, 4)]
    assert fixpoint("sum", {"axis": 1, "exclude": True}, [(3, 0)], [(7,)])[0] == [(3, 7)]


def test_square_sum_forward_and_gradient():
    x = rand((3, 4))
    np.testing.assert_allclose(run("_square_sum", {"axis": 1}, [x])[0], (x * x).sum(1))
    np.testing.assert_allclose(run("_square_sum", {"axis": 0, "keepdims": True}, [x])[0],
                               (x * x).sum(0, keepdims=True))
    g = backward("_square_sum", {"axis": 1}, [x], [np.ones(3)])[0]
    np.testing.assert_allclose(g, 2 * x)


def test_reduce_gradient_accumulates_with_req_add():
    x = rand((2, 3))
    g = backward("sum", {"axis": 1}, [x], [np.array([1.0, 2.0])], req=["add"],
                 init_grads=[np.ones((2, 3))])[0]
    np.testing.assert_array_equal(g, [[2, 2, 2], [3, 3, 3]])


def test_float16_reductions():
    x = rand((3, 5)).astype(np.float16)
    out = run("sum", {"axis": 1}, [x])[0]
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, x.astype(np.float32).sum(1), rtol=2e-3)
    g = backward("mean", {"axis": 1}, [x], [np.ones(3, np.float16)])[0]
    assert g.dtype == np.float16
    np.testing.assert_allclose(g, np.full((3, 5), 0.2), rtol=1e-3)


# ---------------------------------------------------------------------------------------------
# dot, batch_dot
# ---------------------------------------------------------------------------------------------
def _np_dot(a, b, ta, tb):
    if a.ndim == 1 and b.ndim == 1:
        return np.array([a @ b])
    A = a if a.ndim == 1 else (np.moveaxis(a, 0, -1) if ta else a)
    B = b if b.ndim == 1 else (np.moveaxis(b, -1, 0) if tb else b)
    return np.tensordot(A, B, axes=([A.ndim - 1], [0]))


dims = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)


@given(st.integers(1, 3), dims, dims, st.booleans(), st.booleans(), st.booleans(),
       st.booleans())
@FAST
def test_dot(k, ka, kb, ta, tb, vec_a, vec_b):
    a_shape = (k,) if vec_a else ((k,) + ka if ta else ka + (k,))
    b_shape = (k,) if vec_b else ((kb + (k,)) if tb else (k,) + kb)
    if len(a_shape) == 1 and len(b_shape) == 1:
        ta = tb = False            # MXNet refuses to transpose vectors (tested below)
    a, b = rand(a_shape, 1), rand(b_shape, 2)
    attrs = {"transpose_a": ta, "transpose_b": tb}
    out = run("dot", attrs, [a, b])[0]
    expect = _np_dot(a, b, ta and a.ndim > 1, tb and b.ndim > 1)
    np.testing.assert_allclose(out, expect.reshape(expect.shape or (1,)), rtol=1e-12)
    check_grad("dot", attrs, [a, b])


def test_dot_shapes_and_errors():
    assert shapes("dot", {}, [(2, 3, 4), (4, 5, 6)])[1] == [(2, 3, 5, 6)]
    assert shapes("dot", {"transpose_a": True}, [(4, 3, 2), (4, 5, 6)])[1] == [(3, 2, 5, 6)]
    assert shapes("dot", {"transpose_b": True}, [(2, 3, 4), (5, 6, 4)])[1] == [(2, 3, 5, 6)]
    assert shapes("dot", {}, [(3,), (3,)])[1] == [(1,)]
    assert shapes("dot", {"transpose_b": True}, [(2, 3), (3,)])[1] == [(2,)]
    ins, outs = shapes("dot", {}, [(0, 3), (0, 4)])
    assert ins == [(0, 3), (3, 4)] and outs == [(0, 4)]
    raises("dot", {}, [(2, 3), (4, 5)], "(2, 3)", "(4, 5)")
    raises("dot", {"transpose_a": True}, [(3,), (3,)], "transpose vectors", "(3,)")
    raises("dot", {"transpose_a": True}, [(3,), (1, 4)], "(3,)", "(1, 4)")


@given(st.lists(st.integers(1, 3), min_size=1, max_size=2).map(tuple), st.integers(1, 3),
       st.integers(1, 3), st.integers(1, 3), st.booleans(), st.booleans())
@FAST
def test_batch_dot(batch, m, k, n, ta, tb):
    a = rand(batch + ((k, m) if ta else (m, k)), 1)
    b = rand(batch + ((n, k) if tb else (k, n)), 2)
    attrs = {"transpose_a": ta, "transpose_b": tb}
    A = np.swapaxes(a, -1, -2) if ta else a
    B = np.swapaxes(b, -1, -2) if tb else b
    np.testing.assert_allclose(run("batch_dot", attrs, [a, b])[0], A @ B, rtol=1e-12)
    check_grad("batch_dot", attrs, [a, b])


def test_batch_dot_shapes_and_errors():
    # MXNet 1.9.1 completes neither input from the other; an unknown contracted dim leaves
    # the output unknown (test_infer_shape.py::test_batch_dot_partial_shape)
    ins, outs = shapes("batch_dot", {}, [(5, 2, 0), (5, 3, 4)])
    assert ins == [(5, 2, 0), (5, 3, 4)] and outs == [None]
    ins, outs = shapes("batch_dot", {}, [(0, 2, 3), (0, 3, 4)])
    assert ins == [(0, 2, 3), (0, 3, 4)] and outs == [(0, 2, 4)]
    raises("batch_dot", {}, [(2, 3, 4), (3, 4, 5)], "batch dim", "(2, 3, 4)", "(3, 4, 5)")
    raises("batch_dot", {}, [(2, 3, 4), (2, 5, 5)], "contracted", "(2, 5, 5)")
    raises("batch_dot", {}, [(3, 4), (4, 5)], "(3, 4)", "N >= 3")
    raises("batch_dot", {}, [(2, 3, 4), (2, 1, 4, 5)], "(2, 1, 4, 5)")


def test_dot_gradient_accumulates_and_uses_blas_views():
    a, b = rand((3, 4), 1), rand((4, 2), 2)
    g = np.ones((3, 2))
    da, db = backward("dot", {}, [a, b], [g], req=["add", "add"],
                      init_grads=[np.ones((3, 4)), np.ones((4, 2))])
    np.testing.assert_allclose(da, g @ b.T + 1)
    np.testing.assert_allclose(db, a.T @ g + 1)


# ---------------------------------------------------------------------------------------------
# broadcast_to, broadcast_axis, broadcast_like
# ---------------------------------------------------------------------------------------------
@given(small_shape, st.data())
@FAST
def test_broadcast_to_axis_like(shape, data):
    mask = data.draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)))
    in_shape = tuple(1 if m else d for d, m in zip(shape, mask))
    x = rand(in_shape)
    target = tuple(0 if (not m and data.draw(st.booleans())) else d
                   for d, m in zip(shape, mask))
    expect = np.broadcast_to(x, shape)
    np.testing.assert_array_equal(run("broadcast_to", {"shape": target}, [x])[0], expect)
    check_grad("broadcast_to", {"shape": target}, [x])
    axes = tuple(i for i, m in enumerate(mask) if m)
    attrs = {"axis": axes, "size": tuple(shape[i] for i in axes)}
    np.testing.assert_array_equal(run("broadcast_axis", attrs, [x])[0], expect)
    check_grad("broadcast_axes", attrs, [x])
    like = rand(shape, 3)
    np.testing.assert_array_equal(run("broadcast_like", {}, [x, like])[0], expect)
    check_grad("broadcast_like", {}, [x, like])


def test_broadcast_inference_and_errors():
    assert shapes("broadcast_to", {"shape": (0, 4)}, [(2, 1)])[1] == [(2, 4)]
    assert shapes("broadcast_to", {"shape": (0, 4)}, [(0, 1)])[1] == [(0, 4)]
    assert fixpoint("broadcast_to", {"shape": (0, 4)}, [(0, 1)], [(3, 4)])[0] == [(3, 1)]
    assert fixpoint("broadcast_axis", {"axis": 1, "size": 3}, [None], [(2, 3)])[0] == \
        [(2, 1)]
    assert shapes("broadcast_like", {"lhs_axes": (1, 2), "rhs_axes": (0, 1)},
                  [(2, 1, 1), (5, 6)])[1] == [(2, 5, 6)]
    raises("broadcast_to", {"shape": (2, 2, 3)}, [(1, 3)], "(1, 3)", "(2, 2, 3)")
    raises("broadcast_to", {"shape": (4, 3)}, [(2, 3)], "(2, 3)", "(4, 3)")
    raises("broadcast_axis", {"axis": 1, "size": 4}, [(2, 2, 1)], "axis 1", "(2, 2, 1)")
    raises("broadcast_axis", {"axis": (1, 2), "size": 4}, [(2, 1, 1)], "axis=(1, 2)")
    raises("broadcast_like", {}, [(2, 1, 1), (3, 4)], "'lhs'", "(2, 1, 1)", "(3, 4)")
    raises("broadcast_like", {"lhs_axes": (0,)}, [(2, 1), (3, 4)], "lhs_axes")


REDUCE_OPS = ("max", "min", "prod", "nanprod", "nansum", "norm", "sum", "mean", "dot",
              "batch_dot", "broadcast_like")


@pytest.mark.parametrize("key", _golden_value_cases(REDUCE_OPS))
def test_golden_values(key):
    check_golden_value(key)


def test_golden_file_is_from_mxnet_1_9_1():
    assert GOLDEN["mxnet"] == "1.9.1"


def test_matmul_kernel_batches_and_req():
    from lightmod.kernels import cpu as k
    a, b = rand((3, 2, 4), 1), rand((3, 5, 4), 2)
    c = np.ones((3, 2, 5))
    k.matmul_batched(c, a, b, False, True, "add")
    np.testing.assert_allclose(c, a @ np.swapaxes(b, 1, 2) + 1)
    forward("batch_dot", {"transpose_b": True}, [a, b])


@pytest.mark.parametrize("name", ["sum", "mean", "max", "prod", "norm"])
def test_parallel_gradient_loop_on_large_arrays(name):
    """Gradients above the kernel's PARALLEL_MIN take the prange path."""
    x = rand((300, 60, 2), 4)
    g = np.random.default_rng(5).standard_normal((300, 2))
    got = backward(name, {"axis": 1}, [x], [g])[0]
    y = run(name, {"axis": 1}, [x])[0]
    factor = {"sum": np.ones_like(x), "mean": np.full_like(x, 1 / 60),
              "max": (x == y[:, None]).astype(float), "prod": y[:, None] / x,
              "norm": x / y[:, None]}[name]
    np.testing.assert_allclose(got, g[:, None] * factor, rtol=1e-12)
