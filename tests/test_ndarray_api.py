"""mx.nd beyond the array itself: generated operator functions and namespaces, invoke,
nd.random, nd.sparse, pickling, views under hypothesis."""
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lightmod as mx
from lightmod.base import MXNetError
from lightmod.ndarray import NDArray


# ---------------------------------------------------------------------------------------------
# generated functions and invoke
# ---------------------------------------------------------------------------------------------
def test_generated_function_argument_forms():
    x = mx.nd.array([-2.0, 0.5, 3.0])
    ref = np.clip(x.asnumpy(), -1, 1)
    for res in (mx.nd.clip(x, -1, 1), mx.nd.clip(x, -1, a_max=1), mx.nd.clip(data=x, a_min=-1,
                                                                              a_max=1),
                mx.nd.clip(x, a_min="-1", a_max="1.0"), mx.nd.clip(x, -1, 1, name="c0")):
        np.testing.assert_allclose(res.asnumpy(), ref)
    with pytest.raises(TypeError, match="multiple values"):
        mx.nd.clip(x, -1, 1, a_min=0)
    with pytest.raises(TypeError, match="too many"):
        mx.nd.clip(x, -1, 1, 2)
    with pytest.raises(TypeError, match="NDArray"):
        mx.nd.relu([1, 2])
    with pytest.raises(MXNetError, match="required attribute 'a_max'"):
        mx.nd.clip(x, -1)
    assert "a_min" in mx.nd.clip.__doc__ and mx.nd.clip.__name__ == "clip"


def test_generated_functions_are_cached_and_listed():
    assert mx.nd.relu is mx.nd.relu
    assert mx.nd._internal._plus_scalar is mx.nd._internal._plus_scalar
    assert "broadcast_add" in dir(mx.nd) and "_plus_scalar" in dir(mx.nd._internal)
    assert mx.nd.op.elemwise_add is mx.nd.elemwise_add
    with pytest.raises(AttributeError):
        mx.nd.no_such_operator
    with pytest.raises(AttributeError):
        mx.nd.contrib.no_such_operator


def test_alias_functions_share_the_operator():
    a, b = mx.nd.array([1.0, 2.0]), mx.nd.array([3.0, 5.0])
    for fn in (mx.nd.elemwise_add, mx.nd._internal._plus, mx.nd._internal._Plus,
               mx.nd.broadcast_plus):
        np.testing.assert_allclose(fn(a, b).asnumpy(), [4, 7])
    np.testing.assert_allclose(mx.nd._internal._PlusScalar(a, scalar=1).asnumpy(), [2, 3])
    np.testing.assert_allclose(mx.nd.sparse.sqrt(mx.nd.array([4.0])).asnumpy(), [2])


def test_invoke_directly_and_out_aliasing():
    a = mx.nd.array([[1.0, 2.0], [3.0, 4.0]])
    res = mx.nd.invoke("_mul_scalar", [a], {"scalar": "3"})
    np.testing.assert_allclose(res.asnumpy(), 3 * a.asnumpy())
    from lightmod.operator import registry
    op = registry.get("elemwise_add")
    out = mx.nd.invoke(op, [a, a], {}, out=a)            # out aliases an input: never cleared
    assert out is a
    np.testing.assert_allclose(a.asnumpy(), [[2, 4], [6, 8]])
    with pytest.raises(MXNetError, match="expects 2 input"):
        mx.nd.invoke("elemwise_add", [a], {})
    with pytest.raises(MXNetError, match="Cannot find operator"):
        mx.nd.invoke("not_an_op", [a], {})
    with pytest.raises(MXNetError, match="out= has shape"):
        mx.nd.relu(a, out=mx.nd.zeros(3))
    with pytest.raises(MXNetError, match=r"elemwise_add.*\(2, 2\).*\(3,\)"):
        mx.nd.elemwise_add(a, mx.nd.ones(3))


def test_out_dtype_and_context_follow_inputs():
    a = mx.nd.array([1, 2], dtype="float64", ctx=mx.cpu(2))
    r = mx.nd.exp(a)
    assert r.dtype == np.float64 and r.context == mx.cpu(2)
    assert (a + 1).context == mx.cpu(2)


@pytest.mark.skipif(mx.operator.find("Concat") is None or mx.operator.find("stack") is None,
                    reason="Concat/stack are registered by the tensor family")
def test_variadic_functions():
    a, b = mx.nd.array([[1, 2]]), mx.nd.array([[3, 4]])
    np.testing.assert_allclose(mx.nd.concat(a, b, dim=0).asnumpy(), [[1, 2], [3, 4]])
    np.testing.assert_allclose(mx.nd.Concat(a, b).asnumpy(), [[1, 2, 3, 4]])
    np.testing.assert_allclose(mx.nd.concat(*[a, b], dim=1).asnumpy(), [[1, 2, 3, 4]])
    assert mx.nd.stack(a, b, axis=0).shape == (2, 1, 2)
    with pytest.raises(MXNetError, match="num_args"):
        mx.nd.Concat(a, b, num_args=3)
    with pytest.raises(TypeError):
        mx.nd.Concat(a, 5)


@pytest.mark.skipif(mx.operator.find("sum") is None, reason="sum is registered elsewhere")
def test_methods_route_through_operators():
    x = mx.nd.array(np.arange(6).reshape(2, 3))
    np.testing.assert_allclose(x.sum().asnumpy(), [15])
    np.testing.assert_allclose(x.sum(axis=1).asnumpy(), [3, 12])
    np.testing.assert_allclose(x.clip(1, 4).asnumpy(), np.clip(np.arange(6).reshape(2, 3), 1, 4))
    np.testing.assert_allclose(x.square().asnumpy(), np.arange(6).reshape(2, 3) ** 2)
    assert x.zeros_like().asnumpy().sum() == 0 and x.ones_like().asnumpy().sum() == 6


# ---------------------------------------------------------------------------------------------
# nd.random
# ---------------------------------------------------------------------------------------------
def test_random_is_reproducible_and_shaped():
    mx.random.seed(42)
    a = mx.nd.random.uniform(-1, 1, shape=(3, 4))
    b = mx.nd.random.normal(2, 0.5, shape=5, dtype="float64")
    mx.nd.random.seed(42)
    a2 = mx.random.uniform(-1, 1, shape=(3, 4))
    b2 = mx.random.normal(2, 0.5, shape=5, dtype="float64")
    np.testing.assert_array_equal(a.asnumpy(), a2.asnumpy())
    np.testing.assert_array_equal(b.asnumpy(), b2.asnumpy())
    assert a.dtype == np.float32 and b.dtype == np.float64 and b.shape == (5,)
    assert ((a.asnumpy() >= -1) & (a.asnumpy() < 1)).all()
    assert mx.nd.random.uniform().shape == (1,)
    r = mx.nd.random.randint(0, 3, shape=(100,))
    assert r.dtype == np.int32 and set(np.unique(r.asnumpy())) <= {0, 1, 2}
    assert mx.nd.random.randn(2, 3).shape == (2, 3)


def test_random_with_array_parameters_and_out():
    low, high = mx.nd.array([0, 10]), mx.nd.array([1, 11])
    s = mx.nd.random.uniform(low, high, shape=4)
    assert s.shape == (2, 4)
    assert (s.asnumpy()[0] < 1).all() and (s.asnumpy()[1] >= 10).all()
    out = mx.nd.zeros((2, 2))
    res = mx.nd.random.normal(shape=(2, 2), out=out)
    assert res is out and out.asnumpy().std() > 0
    with pytest.raises(MXNetError):
        mx.nd.random.normal(shape=(3,), out=out)


def test_shuffle_permutes_rows():
    mx.random.seed(1)
    x = mx.nd.array(np.arange(20).reshape(10, 2))
    y = mx.nd.random.shuffle(x)
    assert sorted(map(tuple, y.asnumpy().tolist())) == sorted(map(tuple, x.asnumpy().tolist()))
    assert not np.array_equal(x.asnumpy(), y.asnumpy())
    assert x.asnumpy()[0, 0] == 0


def test_multinomial():
    mx.random.seed(3)
    p = mx.nd.array([[0.0, 1.0, 0.0], [0.5, 0.0, 0.5]])
    s = mx.nd.random.multinomial(p, shape=8)
    assert s.shape == (2, 8) and s.dtype == np.int32
    assert (s.asnumpy()[0] == 1).all() and set(s.asnumpy()[1]) <= {0, 2}


# ---------------------------------------------------------------------------------------------
# nd.sparse
# ---------------------------------------------------------------------------------------------
def test_csr_constructors():
    dense = np.array([[1, 0, 2], [0, 0, 3]], dtype=np.float32)
    forms = [mx.nd.sparse.csr_matrix(([1, 2, 3], [0, 2, 2], [0, 2, 3]), shape=(2, 3)),
             mx.nd.sparse.csr_matrix(([1, 2, 3], ([0, 0, 1], [0, 2, 2])), shape=(2, 3)),
             mx.nd.sparse.csr_matrix(dense), mx.nd.sparse.csr_matrix(mx.nd.array(dense)),
             mx.nd.sparse.array(mx.nd.array(dense).tostype("csr"))]
    for c in forms:
        assert isinstance(c, mx.nd.sparse.CSRNDArray) and c.stype == "csr"
        np.testing.assert_array_equal(c.asnumpy(), dense)
        assert c.indptr.asnumpy().tolist() == [0, 2, 3]
    empty = mx.nd.sparse.csr_matrix((2, 4))
    assert empty.shape == (2, 4) and empty.indices.shape == (0,)
    with pytest.raises(MXNetError):
        mx.nd.sparse.csr_matrix(([1, 2], [0], [0, 1, 2]), shape=(2, 3))
    with pytest.raises(MXNetError):
        mx.nd.sparse.csr_matrix(np.zeros((2, 2, 2)))


def test_row_sparse_constructors_and_retain():
    r = mx.nd.sparse.row_sparse_array(([[1, 2], [3, 4]], [0, 3]), shape=(5, 2))
    assert isinstance(r, mx.nd.sparse.RowSparseNDArray)
    assert r.indices.asnumpy().tolist() == [0, 3]
    np.testing.assert_array_equal(r.data.asnumpy(), [[1, 2], [3, 4]])
    kept = r.retain(mx.nd.array([3]))
    assert kept.stype == "row_sparse" and kept.indices.asnumpy().tolist() == [3]
    z = mx.nd.sparse.zeros("row_sparse", (3, 2), dtype="float64")
    assert z.stype == "row_sparse" and z.dtype == np.float64 and z.indices.shape == (0,)
    assert mx.nd.sparse.zeros("csr", (2, 2)).stype == "csr"
    with pytest.raises(MXNetError):
        mx.nd.sparse.zeros("bogus", (2, 2))
    np.testing.assert_array_equal(mx.nd.sparse.row_sparse_array(np.eye(2)).asnumpy(), np.eye(2))


def test_sparse_arrays_compute_densely():
    c = mx.nd.array([[0, 1], [2, 0]]).tostype("csr")
    np.testing.assert_array_equal((c * 2).asnumpy(), [[0, 2], [4, 0]])
    assert (c * 2).stype == "default"
    assert c.copy().stype == "csr" and isinstance(c.copy(), mx.nd.sparse.CSRNDArray)


# ---------------------------------------------------------------------------------------------
# pickling and views
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", [0, 2, pickle.HIGHEST_PROTOCOL])
def test_pickle_protocols(protocol):
    a = mx.nd.array([[1.5, 2.5]], dtype="float16")
    b = pickle.loads(pickle.dumps(a, protocol=protocol))
    assert type(b) is NDArray and b.dtype == np.float16 and b.context == mx.cpu(0)
    np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
    nested = pickle.loads(pickle.dumps({"s": (a, None, [a])}, protocol=protocol))
    np.testing.assert_array_equal(nested["s"][2][0].asnumpy(), a.asnumpy())


_slices = st.one_of(st.integers(-3, 2), st.slices(3))


@settings(max_examples=40, deadline=None)
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=3, max_side=4),
       key=st.lists(_slices, min_size=1, max_size=3))
def test_basic_indexing_matches_numpy(shape, key):
    key = tuple(key[:len(shape)])
    base = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    a = mx.nd.array(base)
    want = base[key]
    got = a[key]
    assert got.shape == (want.shape if want.ndim else (1,))
    np.testing.assert_array_equal(got.asnumpy().reshape(np.shape(want)), want)
    # writing through the result changes the base exactly when numpy's result is a
    # contiguous view (what MXNet hands back as a view)
    got[:] = -1
    view_of_base = isinstance(want, np.ndarray) and want.base is not None and \
        want.flags.c_contiguous
    changed = (a.asnumpy() == -1).any()
    if want.size:
        assert changed == bool(view_of_base or np.ndim(want) == 0), (key, shape)


@settings(max_examples=30, deadline=None)
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4),
       key=st.lists(_slices, min_size=1, max_size=3), value=st.floats(-5, 5, width=32))
def test_slice_assignment_matches_numpy(shape, key, value):
    key = tuple(k if isinstance(k, slice) else k % shape[i] for i, k in
                enumerate(key[:len(shape)]))
    base = np.zeros(shape, dtype=np.float32)
    a = mx.nd.array(base)
    a[key] = value
    base[key] = value
    np.testing.assert_array_equal(a.asnumpy(), base)


class _ScipyLikeCSR:
    """What nd.array reads from a scipy.sparse matrix: indptr/tocsr mark it, toarray gives the
    values (scipy is not a test dependency)."""

    def __init__(self, dense):
        self._dense = np.asarray(dense)
        self.indptr = None
        self.dtype = self._dense.dtype

    def tocsr(self):
        return self

    def toarray(self):
        return self._dense.copy()


def test_array_of_a_scipy_sparse_matrix_is_csr():
    dense = np.array([[0, 1.5, 0], [2, 0, 0]], dtype=np.float64)
    arr = mx.nd.array(_ScipyLikeCSR(dense))
    assert arr.stype == "csr" and arr.dtype == np.float64
    np.testing.assert_array_equal(arr.asnumpy(), dense)
    as_f32 = mx.nd.array(_ScipyLikeCSR(dense), dtype="float32")
    assert as_f32.dtype == np.float32 and as_f32.stype == "csr"
    np.testing.assert_array_equal(as_f32.indptr.asnumpy(), [0, 1, 2])
