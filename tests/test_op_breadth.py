"""Operators added for MXNet 1.9.1's operator breadth: diag, depth_to_space, space_to_depth,
slice_like, split_v2, batch_take, choose_element_0index, fill_element_0index, hard_sigmoid,
all_finite, multi_all_finite, moments. Forward against numpy, backward against numeric
gradients, and bad inputs answered with MXNetError naming the operator and argument."""
import numpy as np
import pytest
from ophelpers import backward, check_grad, forward, prepare

import lightmod as mx
from lightmod.base import MXNetError


def rand(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def run(name, attrs, inputs):
    return forward(name, attrs, inputs)[0]


def raises(name, attrs, inputs, *fragments):
    with pytest.raises(MXNetError) as err:
        forward(name, attrs, inputs)
    msg = str(err.value)
    assert "Operator %s" % name in msg, msg
    for fragment in fragments:
        assert fragment in msg, (fragment, msg)


# ---------------------------------------------------------------------------------------------
# diag
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [0, 1, -1, 2, -2])
def test_diag_of_a_matrix_and_of_a_vector(k):
    m = rand((4, 5))
    np.testing.assert_array_equal(run("diag", {"k": k}, [m])[0], np.diag(m, k))
    v = rand((3,))
    np.testing.assert_array_equal(run("diag", {"k": k}, [v])[0], np.diag(v, k))


@pytest.mark.parametrize("k, axis1, axis2", [(0, 0, 1), (1, 1, 0), (-1, 1, 3), (2, -2, 0),
                                              (0, 3, 0)])
def test_diag_of_a_4d_array_is_numpys_diagonal(k, axis1, axis2):
    x = rand((3, 4, 5, 6))
    out = run("diag", {"k": k, "axis1": axis1, "axis2": axis2}, [x])[0]
    np.testing.assert_array_equal(out, np.diagonal(x, k, axis1, axis2))


@pytest.mark.parametrize("shape, attrs", [((3, 4), {"k": 1}), ((3, 4), {"k": -2}),
                                          ((4,), {"k": 1}), ((2, 3, 4), {"axis1": 2, "axis2": 0})])
def test_diag_gradient(shape, attrs):
    check_grad("diag", attrs, [rand(shape)])


def test_diag_rejects_an_empty_diagonal_and_equal_axes():
    raises("diag", {"k": 5}, [rand((3, 4))], "k=5", "(3, 4)")
    raises("diag", {"axis1": 1, "axis2": -1}, [rand((3, 4))], "axis1=1", "axis2=-1")


# ---------------------------------------------------------------------------------------------
# depth_to_space, space_to_depth
# ---------------------------------------------------------------------------------------------
def _depth_to_space(x, b):
    n, c, h, w = x.shape
    return x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2) \
        .reshape(n, c // (b * b), h * b, w * b)


def _space_to_depth(x, b):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4) \
        .reshape(n, c * b * b, h // b, w // b)


@pytest.mark.parametrize("block", [1, 2, 3])
def test_depth_to_space_and_back(block):
    x = rand((2, 2 * block * block, 3, 2))
    y = run("depth_to_space", {"block_size": block}, [x])[0]
    np.testing.assert_array_equal(y, _depth_to_space(x, block))
    np.testing.assert_array_equal(run("space_to_depth", {"block_size": block}, [y])[0],
                                  _space_to_depth(y, block))
    np.testing.assert_array_equal(_space_to_depth(y, block), x)


def test_depth_space_gradients():
    check_grad("depth_to_space", {"block_size": 2}, [rand((1, 8, 2, 1))])
    check_grad("space_to_depth", {"block_size": 2}, [rand((1, 2, 2, 4))])


def test_depth_space_bad_inputs():
    raises("depth_to_space", {"block_size": 2}, [rand((1, 3, 2, 2))], "block_size^2 = 4")
    raises("depth_to_space", {"block_size": 2}, [rand((1, 4, 0, 3))], "empty dim")
    raises("depth_to_space", {"block_size": 0}, [rand((1, 4, 2, 2))], "block_size=0")
    raises("space_to_depth", {"block_size": 2}, [rand((1, 4, 3, 2))], "block_size=2")
    raises("space_to_depth", {"block_size": 2}, [rand((4, 2, 2))], "4 dims")


# ---------------------------------------------------------------------------------------------
# slice_like
# ---------------------------------------------------------------------------------------------
def test_slice_like_all_axes_and_chosen_axes():
    x = rand((4, 5, 3))
    like = np.zeros((2, 3, 1), dtype=np.int32)
    np.testing.assert_array_equal(run("slice_like", {}, [x, like])[0], x[:2, :3, :1])
    np.testing.assert_array_equal(run("slice_like", {"axes": (0, -1)}, [x, like])[0],
                                  x[:2, :, :1])


def test_slice_like_gradient_goes_to_data_only():
    x, like = rand((3, 4)), rand((2, 2))
    check_grad("slice_like", {"axes": (1,)}, [x, like], wrt=[0])
    grads = backward("slice_like", {}, [x, like], [np.ones((2, 2))])
    expected = np.zeros((3, 4))
    expected[:2, :2] = 1
    np.testing.assert_array_equal(grads[0], expected)
    np.testing.assert_array_equal(grads[1], np.zeros((2, 2)))


def test_slice_like_bad_shapes():
    raises("slice_like", {}, [rand((3, 4)), rand((2, 2, 2))], "shape_like", "(3, 4)")
    raises("slice_like", {}, [rand((3, 4)), rand((5, 2))], "axis 0", "(5, 2)")
    raises("slice_like", {"axes": (2,)}, [rand((3, 4)), rand((1, 1))], "axes=2")
    raises("slice_like", {"axes": (2,)}, [rand((3, 4, 2)), rand((1, 1))], "axes=(2,)")


# ---------------------------------------------------------------------------------------------
# split_v2, _split_v2
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("points, axis", [((1, 3), 1), ((2,), -1), ((), 0), ((0, 4), 1)])
def test_split_v2_is_numpys_split(points, axis):
    x = rand((3, 4, 5))
    outs = mx.nd.split_v2(mx.nd.array(x), points if points else 3, axis=axis)
    outs = outs if isinstance(outs, list) else [outs]
    expected = np.split(x, list(points) if points else 3, axis=axis)
    assert len(outs) == len(expected)
    for got, want in zip(outs, expected):
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6)


def test_split_v2_squeeze_and_gradient():
    x = rand((3, 4))
    outs = run("_split_v2", {"indices": (0, 1, 3), "axis": 1, "squeeze_axis": True}, [x])
    assert [o.shape for o in outs] == [(3,), (3, 2), (3,)]
    check_grad("_split_v2", {"indices": (0, 1), "axis": 0}, [x])
    check_grad("split_v2", {"indices_or_sections": 2, "axis": 1}, [x])


def test_split_v2_bad_inputs():
    raises("split_v2", {"indices_or_sections": 3, "axis": 1}, [rand((3, 4))], "3 sections")
    raises("_split_v2", {"indices": (0, 3, 2), "axis": 1}, [rand((3, 4))], "increase")
    raises("split_v2", {"indices_or_sections": 0}, [rand((3, 4))], "indices_or_sections=0")


# ---------------------------------------------------------------------------------------------
# one element per row
# ---------------------------------------------------------------------------------------------
def test_batch_take_and_choose_element_pick_one_per_row():
    x = rand((5, 4))
    idx = np.array([0, 3, 1, 7, -2])       # out-of-range indices are clipped
    want = x[np.arange(5), np.clip(idx, 0, 3)]
    np.testing.assert_array_equal(run("batch_take", {}, [x, idx.astype(np.int32)])[0], want)
    np.testing.assert_array_equal(run("choose_element_0index", {}, [x, idx.astype(float)])[0],
                                  want)
    # batch_take has no gradient (as in MXNet: see test_nondifferentiable_ops.py); the
    # legacy choose_element_0index picks the same way and has one
    check_grad("choose_element_0index", {}, [x, np.array([0, 3, 1, 2, 2])], wrt=[0])


def test_fill_element_0index_and_its_gradient():
    x, val, idx = rand((4, 3)), rand((4,), seed=1), np.array([2.0, 0.0, 1.0, 2.0])
    want = x.copy()
    want[np.arange(4), idx.astype(int)] = val
    np.testing.assert_array_equal(run("fill_element_0index", {}, [x, val, idx])[0], want)
    check_grad("fill_element_0index", {}, [x, val, idx], wrt=[0, 1])
    add = backward("fill_element_0index", {}, [x, val, idx], [np.ones((4, 3))],
                   req=["add", "add", "null"], init_grads=[np.ones((4, 3)), np.ones(4), None])
    np.testing.assert_array_equal(add[1], np.full(4, 2.0))
    assert add[0].sum() == 12 + 8


def test_row_picks_check_the_index_count():
    raises("batch_take", {}, [rand((5, 4)), np.zeros(3)], "'indices'", "(5, 4)")
    raises("fill_element_0index", {}, [rand((5, 4)), rand((4,)), np.zeros(5)], "'mhs'")


# ---------------------------------------------------------------------------------------------
# hard_sigmoid
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_hard_sigmoid_forward_and_backward(dtype):
    x = np.array([-4.0, -2.0, -0.3, 0.0, 1.0, 2.4, 3.0], dtype=dtype)
    attrs = {"alpha": 0.3, "beta": 0.4}
    y = np.clip(0.3 * x.astype(np.float64) + 0.4, 0, 1)
    np.testing.assert_allclose(run("hard_sigmoid", attrs, [x])[0], y, rtol=1e-3, atol=1e-3)
    g = backward("hard_sigmoid", attrs, [x], [np.ones(7)])[0]
    np.testing.assert_allclose(g, np.where((y > 0) & (y < 1), 0.3, 0.0), rtol=1e-3)


def test_hard_sigmoid_numeric_gradient():
    check_grad("hard_sigmoid", {}, [np.array([-2.0, -1.0, 0.5, 2.0])])


# ---------------------------------------------------------------------------------------------
# all_finite, multi_all_finite
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_all_finite_flags_inf_and_nan(bad):
    x = np.zeros((3, 2), dtype=np.float32)
    assert run("all_finite", {}, [x])[0].tolist() == [1.0]
    x[1, 1] = bad
    out = run("all_finite", {}, [x])[0]
    assert out.dtype == np.float32 and out.tolist() == [0.0]
    finite = np.ones(4)
    assert run("multi_all_finite", {"num_arrays": 2}, [finite, finite])[0].tolist() == [1.0]
    assert run("multi_all_finite", {"num_arrays": 2}, [finite, x])[0].tolist() == [0.0]


def test_all_finite_without_init_keeps_a_cleared_flag():
    flag = mx.nd.zeros((1,))
    mx.nd.all_finite(mx.nd.ones((3,)), init_output=False, out=flag)
    assert flag.asnumpy().tolist() == [0.0]
    flag[:] = 1
    mx.nd.all_finite(mx.nd.ones((3,)), init_output=False, out=flag)
    assert flag.asnumpy().tolist() == [1.0]


# ---------------------------------------------------------------------------------------------
# moments
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("axes, keepdims", [((0, 2), True), ((1,), False), (None, False)])
def test_moments_are_mean_and_variance(axes, keepdims):
    x = rand((3, 4, 2))
    attrs = {"keepdims": keepdims} if axes is None else {"axes": axes, "keepdims": keepdims}
    mean, var = run("moments", attrs, [x])
    np.testing.assert_allclose(mean, np.mean(x, axis=axes, keepdims=keepdims).reshape(mean.shape))
    np.testing.assert_allclose(var, np.var(x, axis=axes, keepdims=keepdims).reshape(var.shape))
    if axes is None:
        assert mean.shape == (1,)


def test_moments_gradient():
    check_grad("moments", {"axes": (0, 2)}, [rand((3, 2, 2))], rtol=1e-4, atol=1e-6)
    check_grad("moments", {"axes": (1,), "keepdims": True}, [rand((2, 3))],
               head_grads=[np.zeros((2, 1)), np.ones((2, 1))])


def test_moments_rejects_bad_axes():
    with pytest.raises(MXNetError, match="moments"):
        op, p = prepare("moments", {"axes": (3,)})
        op.infer_shape(p, [(2, 3)])


# ---------------------------------------------------------------------------------------------
# _arange, _linspace, _eye
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("args", [(10,), (0, 10), (5, 100, 4), (50, -50, -2), (1.3, 45.6, 1.3)])
def test_arange_is_numpys_arange(dtype, args):
    for repeat in (1, 3):
        want = np.repeat(np.arange(*args, dtype=dtype), repeat)
        got = mx.nd.arange(*args, repeat=repeat, dtype=dtype).asnumpy()
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_arange_rejects_a_zero_step_and_an_empty_range():
    with pytest.raises(MXNetError, match="step=0"):
        mx.nd.arange(0, 3, 0)
    with pytest.raises(MXNetError, match="empty"):
        mx.nd.arange(3, 0, 1)


@pytest.mark.parametrize("kwargs", [{}, {"endpoint": False}, {"dtype": "int32"}])
@pytest.mark.parametrize("num", [0, 1, 2, 7])
def test_linspace_is_numpys_linspace(kwargs, num):
    # integer results are truncated toward zero, as MXNet casts (numpy 2 rounds down instead)
    plain = {k: v for k, v in kwargs.items() if k != "dtype"}
    want = np.linspace(3.7, -12.25, num, **plain)
    got = mx.nd.linspace(3.7, -12.25, num, **kwargs).asnumpy()
    assert got.dtype == np.dtype(kwargs.get("dtype", "float32"))
    np.testing.assert_allclose(got, np.trunc(want).astype(got.dtype) if "dtype" in kwargs
                               else want.astype(got.dtype), rtol=1e-6)


@pytest.mark.parametrize("n, m, k", [(3, 4, 1), (5, 2, -7), (2, 2, 9), (4, 6, -2), (3, 0, 0)])
def test_eye_is_numpys_eye(n, m, k):
    np.testing.assert_array_equal(mx.nd.eye(n, m, k).asnumpy(), np.eye(n, m or None, k))


# ---------------------------------------------------------------------------------------------
# _slice_assign, _slice_assign_scalar
# ---------------------------------------------------------------------------------------------
def test_slice_assign_writes_the_window():
    x, rhs = rand((3, 4)), rand((2, 2), seed=1)
    attrs = {"begin": (1, None), "end": (3, None), "step": (1, 2)}
    want = x.copy()
    want[1:3, ::2] = rhs
    np.testing.assert_array_equal(run("_slice_assign", attrs, [x, rhs])[0], want)
    want[1:3, ::2] = -2.5
    np.testing.assert_array_equal(
        run("_slice_assign_scalar", dict(attrs, scalar=-2.5), [x])[0], want)
    check_grad("_slice_assign", attrs, [x, rhs])
    check_grad("_slice_assign_scalar", dict(attrs, scalar=1.0), [x])


def test_slice_assign_checks_the_value_shape():
    raises("_slice_assign", {"begin": (0,), "end": (2,)}, [rand((3, 4)), rand((3, 4))],
           "'rhs'", "(2, 4)")


# ---------------------------------------------------------------------------------------------
# NDArray front end: moveaxis with lists, inplace reshapes, 0-d arrays, out= fills
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("source, destination", [([0, 1], [2, 3]), ([3, 0], [1, 0]),
                                                 (range(4), range(4)), (1, -1), ([2, 0], [0, 3])])
def test_moveaxis_follows_numpy(source, destination):
    x = rand((4, 1, 2, 3))
    got = mx.nd.moveaxis(mx.nd.array(x), source, destination).asnumpy()
    np.testing.assert_array_equal(got, np.moveaxis(x, source, destination).astype(np.float32))


@pytest.mark.parametrize("source, destination", [(3, 0), (0, -4), ([0, 0], [0, 1]), (0, [0, 1])])
def test_moveaxis_bad_axes_raise_value_error(source, destination):
    with pytest.raises(ValueError, match="moveaxis"):
        mx.nd.moveaxis(mx.nd.zeros((1, 2, 3)), source, destination)


def test_inplace_reshapes_share_memory():
    x = mx.nd.array(rand((1, 3, 1, 2)))
    views = [x.flatten(inplace=True), x.squeeze(axis=(0, 2), inplace=True),
             x.expand_dims(axis=1, inplace=True)]
    copies = [x.flatten(), x.squeeze(axis=(0, 2)), x.expand_dims(axis=1)]
    assert [v.shape for v in views] == [c.shape for c in copies] == [(1, 6), (3, 2),
                                                                       (1, 1, 3, 1, 2)]
    x[:] = 7
    assert all((v.asnumpy() == 7).all() for v in views)
    assert not any((c.asnumpy() == 7).all() for c in copies)


def test_zero_dim_source_and_out_fills():
    assert mx.nd.array(np.ones([])).shape == ()
    out = mx.nd.zeros((2, 2))
    assert mx.nd.ones((2, 2), out=out) is out and (out.asnumpy() == 1).all()
    assert mx.nd.zeros((2, 2), out=out) is out and (out.asnumpy() == 0).all()


def test_broadcast_like_with_empty_axes_is_an_error():
    with pytest.raises(MXNetError, match="broadcast_like"):
        mx.nd.broadcast_like(mx.nd.ones((1, 2)), mx.nd.ones((3, 2)), lhs_axes=(), rhs_axes=())


# ---------------------------------------------------------------------------------------------
# gather_nd, scatter_nd
# ---------------------------------------------------------------------------------------------
def test_gather_nd_is_numpy_fancy_indexing():
    x = rand((3, 4, 2))
    idx = np.array([[0, 2, -1, 1], [3, 0, -4, 3]])
    want = x[idx[0], idx[1]]
    np.testing.assert_array_equal(run("gather_nd", {}, [x, idx.astype(np.float32)])[0], want)
    np.testing.assert_array_equal(run("gather_nd", {}, [x, idx[:1, :2]])[0], x[idx[0, :2]])


def test_gather_nd_out_of_bounds_is_an_index_error():
    for bad in ([[0, 1], [0, 3]], [[0, 1], [0, -4]]):
        with pytest.raises(IndexError, match="gather_nd"):
            run("gather_nd", {}, [rand((2, 3)), np.array(bad)])
    with pytest.raises(MXNetError, match="addresses 3 axes"):
        run("gather_nd", {}, [rand((2, 3)), np.zeros((3, 1))])


def test_gather_nd_gradient_adds_repeated_indices():
    x = rand((3, 2))
    idx = np.array([[1, 1, 0]])
    check_grad("gather_nd", {}, [x, idx], wrt=[0])
    g = backward("gather_nd", {}, [x, idx], [np.ones((3, 2))])[0]
    np.testing.assert_array_equal(g, [[1, 1], [2, 2], [0, 0]])


def test_scatter_nd_places_values_and_gathers_the_gradient():
    data = rand((3, 2))
    idx = np.array([[2, 0, 1], [1, 3, 0]])
    out = run("scatter_nd", {"shape": (3, 4, 2)}, [data, idx])[0]
    want = np.zeros((3, 4, 2))
    want[idx[0], idx[1]] = data
    np.testing.assert_array_equal(out, want)
    check_grad("scatter_nd", {"shape": (3, 4, 2)}, [data, idx], wrt=[0])
    raises("scatter_nd", {"shape": (3, 4)}, [rand((2,)), idx], "'data'", "(3,)")


# ---------------------------------------------------------------------------------------------
# ravel_multi_index, unravel_index
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(7,), (3, 5), (4, 2, 6), (2, 3, 2, 5)])
def test_ravel_and_unravel_are_numpys(shape):
    rng = np.random.default_rng(1)
    coords = np.stack([rng.integers(0, d, 20) for d in shape])
    flat = np.ravel_multi_index(coords, shape)
    for attr_shape in (shape, (-1,) + shape[1:]):
        np.testing.assert_array_equal(
            run("_ravel_multi_index", {"shape": attr_shape}, [coords.astype(np.float64)])[0],
            flat)
        np.testing.assert_array_equal(
            run("_unravel_index", {"shape": attr_shape}, [flat.astype(np.float64)])[0], coords)


def test_ravel_checks_the_row_count_and_shape():
    raises("_ravel_multi_index", {"shape": (3, 4)}, [np.zeros((3, 5))], "(2, N)", "(3, 5)")
    with pytest.raises(MXNetError, match="shape=\\(3, 0\\)"):
        prepare("_unravel_index", {"shape": (3, 0)})


# ---------------------------------------------------------------------------------------------
# histogram
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(7,), (4, 5), (2, 3, 4)])
def test_histogram_matches_numpy(shape):
    x = np.random.default_rng(3).uniform(-3, 3, shape)
    x.reshape(-1)[:2] = [2.5, -2.5]          # the range's ends belong to the end bins
    counts, edges = run("_histogram", {"bin_cnt": 6, "range": (-2.5, 2.5)}, [x])
    want_counts, want_edges = np.histogram(x, 6, range=(-2.5, 2.5))
    assert counts.dtype == np.int64
    np.testing.assert_array_equal(counts, want_counts)
    np.testing.assert_allclose(edges, want_edges)
    given = np.array([-1.0, 0.5, 2.0, 2.5, 50.0])
    counts, edges = run("_histogram", {}, [x, given])
    np.testing.assert_array_equal(counts, np.histogram(x, bins=given)[0])
    np.testing.assert_array_equal(edges, given)


def test_histogram_front_ends():
    x = mx.nd.array(np.arange(10.0))
    counts, edges = mx.nd.histogram(x, bins=3)           # no range: numpy over the data
    np.testing.assert_array_equal(counts.asnumpy(), np.histogram(np.arange(10.0), 3)[0])
    with pytest.raises(ValueError, match="range"):
        mx.sym.histogram(mx.sym.var("a"), bins=3)
    with pytest.raises(ValueError, match="bins"):
        mx.nd.histogram(x, bins=2.5)
    with pytest.raises(MXNetError, match="range"):
        prepare("_histogram", {"bin_cnt": 3, "range": (2.0, 1.0)})


# ---------------------------------------------------------------------------------------------
# executor: heads with a zero gradient, backward before forward
# ---------------------------------------------------------------------------------------------
def test_zero_gradient_heads_need_no_head_gradient():
    x, y = mx.sym.var("x"), mx.sym.var("y")
    for head in (x == y, mx.sym.broadcast_greater(x, y), mx.sym.shape_array(x),
                 mx.sym.floor(x), x > 1):
        exe = head.simple_bind(mx.cpu(), x=(2, 3), y=(2, 3))
        values = {"x": rand((2, 3)), "y": rand((2, 3), seed=1)}
        exe.forward(is_train=True, **{n: values[n] for n in head.list_arguments()})
        exe.backward()                               # no head gradient needed
        exe.backward([mx.nd.ones((7,))])             # one of any shape is ignored
        assert (exe.grad_dict["x"].asnumpy() == 0).all()


def test_a_head_with_a_gradient_still_needs_one():
    exe = (mx.sym.var("x") * 2).simple_bind(mx.cpu(), x=(2,))
    exe.forward(is_train=True)
    with pytest.raises(MXNetError, match="head gradient"):
        exe.backward()


def test_backward_before_forward_runs_the_forward_first():
    data = mx.sym.var("data")
    x = rand((3, 4))
    grad = mx.nd.zeros((3, 4))
    exe = mx.sym.repeat(data, repeats=2, axis=1).bind(mx.cpu(), args=[mx.nd.array(x)],
                                                      args_grad=[grad])
    head = rand((3, 8), seed=2)
    exe.backward(mx.nd.array(head))
    np.testing.assert_allclose(grad.asnumpy(), head.reshape(3, 4, 2).sum(axis=2), rtol=1e-6)
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), np.repeat(x, 2, axis=1), rtol=1e-6)


@pytest.mark.parametrize("name, attrs, inputs", [
    ("broadcast_mod", {}, [np.array([[7, 9]]), np.array([[2], [4]])]),
    ("_mod", {}, [np.array([7, -9]), np.array([2, 4])]),
    ("_mod_scalar", {"scalar": 4}, [np.array([7, -9])])])
def test_integer_mod_sends_no_gradient(name, attrs, inputs):
    ints = [x.astype(np.int32) for x in inputs]
    out = run(name, attrs, ints)[0]
    grads = backward(name, attrs, ints, [np.ones(out.shape, dtype=np.int32)])
    assert all((g == 0).all() for g in grads)
    floats = backward(name, attrs, [x.astype(np.float64) + 0.5 for x in inputs],
                      [np.ones(out.shape)])
    assert (floats[0] != 0).any()              # the float remainder still has one


def test_arange_infers_its_length_from_consumers_and_arange_like():
    s = mx.sym.elemwise_add(mx.sym.arange(start=2, stop=None, infer_range=True, step=0.5),
                            mx.sym.zeros(shape=[5]))
    exe = s.bind(ctx=mx.cpu(), args={})
    exe.forward()
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), 2 + 0.5 * np.arange(5))
    x = mx.nd.zeros((2, 3))
    np.testing.assert_array_equal(mx.nd.contrib.arange_like(x, start=1).asnumpy(),
                                  np.arange(1, 7).reshape(2, 3))
    np.testing.assert_array_equal(mx.nd.contrib.arange_like(x, axis=-1, repeat=2).asnumpy(),
                                  [0, 0, 1])


# ---------------------------------------------------------------------------------------------
# attributes given as numpy scalars (numpy 2 prints them as np.int64(3))
# ---------------------------------------------------------------------------------------------
def test_numpy_scalar_attributes_parse_like_ints():
    axes = tuple(np.int64(a) for a in (1, 0, 2))
    y = mx.sym.transpose(mx.sym.var("a"), axes=axes)
    assert y.infer_shape(a=(2, 3, 4))[1] == [(3, 2, 4)]
    op, p = prepare("Convolution", {"kernel": "(np.int64(3), np.int32(2))", "num_filter":
                                    "np.int64(4)", "no_bias": "np.bool_(True)"})
    assert p.kernel == (3, 2) and p.num_filter == 4 and p.no_bias is True
    assert prepare("clip", {"a_min": "np.float32(0.25)", "a_max": "1"})[1].a_min == 0.25


def test_attribute_text_with_other_calls_is_refused():
    with pytest.raises(MXNetError, match="kernel"):
        prepare("Convolution", {"kernel": "(os.getpid(), 3)", "num_filter": 2})
    with pytest.raises(MXNetError, match="kernel"):
        prepare("Convolution", {"kernel": "(np.int64(np.int64(3)), 3)", "num_filter": 2})
