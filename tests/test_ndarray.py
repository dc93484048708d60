"""NDArray API: creation, dtype rules, copies, views, indexing, arithmetic (against numpy)."""
import pickle
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lightmod as mx
from lightmod.base import MXNetError
from lightmod.ndarray import NDArray


def close(a, b, **kw):
    np.testing.assert_allclose(a.asnumpy() if isinstance(a, NDArray) else a,
                               b.asnumpy() if isinstance(b, NDArray) else b, **kw)


# ---------------------------------------------------------------------------------------------
# creation and dtypes
# ---------------------------------------------------------------------------------------------
def test_array_dtype_rules():
    assert mx.nd.array(np.zeros(3)).dtype == np.float32          # float64 numpy -> float32
    assert mx.nd.array(np.zeros(3, dtype=np.int32)).dtype == np.float32
    assert mx.nd.array([1, 2, 3]).dtype == np.float32
    assert mx.nd.array(np.zeros(3), dtype=np.float64).dtype == np.float64
    assert mx.nd.array([1, 2], dtype="int32").dtype == np.int32
    src = mx.nd.array([1, 2], dtype="int64")
    assert mx.nd.array(src).dtype == np.int64                     # NDArray keeps its dtype
    assert mx.nd.array(src, dtype="float16").dtype == np.float16
    with pytest.raises(TypeError):
        mx.nd.array(object())


def test_array_copies_source():
    src = np.arange(6.0).reshape(2, 3)
    a = mx.nd.array(src)
    src[0, 0] = 100
    assert a.asnumpy()[0, 0] == 0
    out = a.asnumpy()
    out[0, 0] = 5
    assert a.asnumpy()[0, 0] == 0                                  # asnumpy is a copy


@pytest.mark.parametrize("fn,value", [(mx.nd.zeros, 0), (mx.nd.ones, 1)])
def test_zeros_ones(fn, value):
    a = fn((2, 3), ctx=mx.cpu(1), dtype="int32")
    assert a.shape == (2, 3) and a.dtype == np.int32 and a.context == mx.cpu(1)
    assert (a.asnumpy() == value).all()
    b = fn(4)
    assert b.shape == (4,) and b.dtype == np.float32 and b.context == mx.cpu(0)


def test_full_empty_arange():
    f = mx.nd.full((2, 2), 7, dtype="float64")
    assert f.dtype == np.float64 and (f.asnumpy() == 7).all()
    e = mx.nd.empty((3, 1), dtype="uint8")
    assert e.shape == (3, 1) and e.dtype == np.uint8
    close(mx.nd.arange(5), np.arange(5, dtype=np.float32))
    close(mx.nd.arange(1, 4, 0.5), np.arange(1, 4, 0.5))
    close(mx.nd.arange(3, repeat=2), [0, 0, 1, 1, 2, 2])
    assert mx.nd.arange(3, dtype="int32").dtype == np.int32
    assert mx.nd.zeros((2, 2), stype="row_sparse").stype == "row_sparse"
    assert mx.nd.empty((2, 2), stype="csr").stype == "csr"


def test_context_manager_default():
    with mx.cpu(2):
        assert mx.nd.zeros(2).context == mx.cpu(2)
    assert mx.nd.zeros(2).context == mx.cpu(0)


def test_same_context_object_entered_twice_restores_the_default():
    ctx = mx.cpu(3)
    with ctx:
        with mx.cpu(1):
            with ctx:
                assert mx.current_context() == mx.cpu(3)
            assert mx.current_context() == mx.cpu(1)
        with ctx:
            assert mx.current_context() == mx.cpu(3)
        assert mx.current_context() == mx.cpu(3)
    assert mx.current_context() == mx.cpu(0)


def test_properties():
    a = mx.nd.zeros((2, 3, 4))
    assert (a.shape, a.size, a.ndim, a.dtype, a.stype) == ((2, 3, 4), 24, 3, np.float32,
                                                           "default")
    assert a.context == a.ctx == mx.cpu(0)
    assert len(a) == 2
    assert "NDArray 2x3x4 @cpu(0)" in repr(a)
    a.wait_to_read()
    mx.nd.waitall()


def test_asscalar_tolist():
    assert mx.nd.array([3.5]).asscalar() == np.float32(3.5)
    assert isinstance(mx.nd.array([3.5]).asscalar(), np.float32)
    with pytest.raises(ValueError):
        mx.nd.zeros(2).asscalar()
    assert mx.nd.array([[1, 2]]).tolist() == [[1.0, 2.0]]
    assert float(mx.nd.array([2])) == 2.0


# ---------------------------------------------------------------------------------------------
# copies, contexts, dtype conversion
# ---------------------------------------------------------------------------------------------
def test_copy_copyto_as_in_context():
    a = mx.nd.array([1, 2, 3])
    b = a.copy()
    b[:] = 0
    assert a.asnumpy().tolist() == [1, 2, 3]
    c = mx.nd.zeros(3, dtype="int32")
    assert a.copyto(c) is c
    assert c.dtype == np.int32 and c.asnumpy().tolist() == [1, 2, 3]
    d = a.copyto(mx.cpu(1))
    assert d.context == mx.cpu(1) and d.asnumpy().tolist() == [1, 2, 3]
    assert a.as_in_context(mx.cpu(0)) is a
    e = a.as_in_context(mx.cpu(3))
    assert e.context == mx.cpu(3)
    e[:] = 9
    assert a.asnumpy().tolist() == [1, 2, 3]
    with pytest.raises(MXNetError):
        a.copyto(mx.nd.zeros(4))
    with pytest.raises(TypeError):
        a.copyto("cpu")


def test_astype():
    a = mx.nd.array([1.7, -2.2])
    b = a.astype("int32")
    assert b.dtype == np.int32 and b.asnumpy().tolist() == [1, -2]
    assert a.astype(np.float32, copy=False) is a
    c = a.astype(np.float32)
    assert c is not a
    c[:] = 0
    assert a.asnumpy()[0] != 0


# ---------------------------------------------------------------------------------------------
# reshape
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("src,target,expected", [
    ((2, 3, 4), (-1,), (24,)),
    ((2, 3, 4), (4, -1), (4, 6)),
    ((2, 3, 4), (0, -1), (2, 12)),
    ((2, 3, 4), (0, 0, 2, 2), (2, 3, 2, 2)),
    ((2, 3, 4), (-2,), (2, 3, 4)),
    ((2, 3, 4), (2, -2), (2, 3, 4)),
    ((2, 3, 4), (-3, 4), (6, 4)),
    ((2, 3, 4), (-4, 1, 2, -2), (1, 2, 3, 4)),
    ((2, 3, 4), (2, -4, -1, 3, 4), (2, 1, 3, 4)),
    ((6, 4), (0, -4, 2, -1), (6, 2, 2)),
])
def test_reshape_codes(src, target, expected):
    a = mx.nd.zeros(src)
    assert a.reshape(target).shape == expected
    assert a.reshape(*target).shape == expected
    assert a.reshape(shape=target).shape == expected


def test_reshape_reverse_and_errors():
    a = mx.nd.zeros((10, 5, 4))
    assert a.reshape((-1, 0), reverse=True).shape == (50, 4)
    assert a.reshape((-1, 0)).shape == (40, 5)
    with pytest.raises(ValueError, match="Cannot reshape array of size 200"):
        a.reshape((3, -1))
    with pytest.raises(ValueError):
        a.reshape((7,))
    with pytest.raises(MXNetError):
        a.reshape((-1, -1))


def test_reshape_is_a_view():
    a = mx.nd.zeros((2, 3))
    b = a.reshape(6)
    b[2] = 5
    assert a.asnumpy()[0, 2] == 5


# ---------------------------------------------------------------------------------------------
# indexing
# ---------------------------------------------------------------------------------------------
def test_basic_reads_and_views():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    a = mx.nd.array(base)
    close(a[1], base[1])
    assert a[1].shape == (6,)
    assert a[1, 2].shape == (1,) and a[1, 2].asscalar() == base[1, 2]
    close(a[-1], base[-1])
    close(a[1:3], base[1:3])
    close(a[:, 2], base[:, 2])
    close(a[1:4:2, ::2], base[1:4:2, ::2])
    close(a[..., 1], base[..., 1])
    assert mx.nd.arange(3)[1].shape == (1,)
    # first-axis slices and rows share memory
    v = a[1:3]
    v[:] = -1
    assert (a.asnumpy()[1:3] == -1).all()
    a[1][0] = 42
    assert a.asnumpy()[1, 0] == 42
    # non-contiguous slices are copies (MXNet's slice op)
    col = a[:, 0]
    col[:] = 1000
    assert a.asnumpy()[0, 0] == 0
    with pytest.raises(IndexError):
        a[4]
    with pytest.raises(IndexError):
        a[0, 6]


def test_advanced_reads():
    base = np.arange(12, dtype=np.float32).reshape(4, 3)
    a = mx.nd.array(base)
    close(a[mx.nd.array([0, 2, 2])], base[[0, 2, 2]])
    close(a[[3, 1]], base[[3, 1]])
    close(a[mx.nd.array([1.9, 0.2]), 1], base[[1, 0], 1])
    r = a[mx.nd.array([0])]
    r[:] = 100
    assert a.asnumpy()[0, 0] == 0


def test_slice_assignment():
    a = mx.nd.zeros((3, 4))
    a[:] = 2
    assert (a.asnumpy() == 2).all()
    a[1:3] = mx.nd.ones((2, 4)) * 5
    assert (a.asnumpy()[1:] == 5).all()
    a[0] = np.arange(4)
    assert a.asnumpy()[0].tolist() == [0, 1, 2, 3]
    a[:, 1] = 9
    assert (a.asnumpy()[:, 1] == 9).all()
    a[2, 3] = -1
    assert a.asnumpy()[2, 3] == -1
    a[:] = mx.nd.array([1, 2, 3, 4])          # broadcast
    assert a.asnumpy()[2].tolist() == [1, 2, 3, 4]
    a[mx.nd.array([0, 2])] = 0
    assert a.asnumpy()[0].sum() == 0 and a.asnumpy()[1].sum() == 10
    b = mx.nd.zeros(3, dtype="int32")
    b[:] = 2.7
    assert b.asnumpy().tolist() == [2, 2, 2]


def test_readonly():
    a = NDArray(np.zeros(2, dtype=np.float32), mx.cpu(), writable=False)
    with pytest.raises(ValueError):
        a[:] = 1
    with pytest.raises(ValueError):
        a += 1


def test_iteration_and_T():
    a = mx.nd.array([[1, 2], [3, 4], [5, 6]])
    rows = [r.asnumpy().tolist() for r in a]
    assert rows == [[1, 2], [3, 4], [5, 6]]
    close(a.T, np.array([[1, 3, 5], [2, 4, 6]]))
    v = mx.nd.arange(3)
    assert v.T is v
    cube = mx.nd.array(np.arange(24).reshape(2, 3, 4))
    close(cube.T, np.arange(24).reshape(2, 3, 4).T)


# ---------------------------------------------------------------------------------------------
# arithmetic
# ---------------------------------------------------------------------------------------------
_ARITH = [
    ("+", lambda a, b: a + b), ("-", lambda a, b: a - b), ("*", lambda a, b: a * b),
    ("/", lambda a, b: a / b), ("**", lambda a, b: a ** b), ("%", lambda a, b: a % b),
]


@pytest.mark.parametrize("sym,fn", _ARITH)
def test_arithmetic_scalars_and_arrays(sym, fn):
    x = np.array([[0.5, 1.5, 2.0], [3.0, 4.5, 6.0]], dtype=np.float32)
    y = np.array([1.5, 2.0, 0.5], dtype=np.float32)
    a, b = mx.nd.array(x), mx.nd.array(y)
    close(fn(a, b), fn(x, y), rtol=1e-6)           # broadcasting
    close(fn(a, 2.0), fn(x, np.float32(2.0)), rtol=1e-6)
    close(fn(3.0, a), fn(np.float32(3.0), x), rtol=1e-6)
    close(fn(a, a), fn(x, x), rtol=1e-6)
    assert fn(a, 2).dtype == np.float32


def test_comparisons_return_input_dtype():
    x = np.array([1, 2, 3], dtype=np.float32)
    a = mx.nd.array(x)
    for res, ref in [(a == 2, x == 2), (a != 2, x != 2), (a > 2, x > 2), (a >= 2, x >= 2),
                     (a < 2, x < 2), (a <= 2, x <= 2), (2 < a, 2 < x), (2 >= a, 2 >= x),
                     (a == mx.nd.array([1, 0, 3]), x == np.array([1, 0, 3]))]:
        assert res.dtype == np.float32
        close(res, ref.astype(np.float32))
    i = mx.nd.array([1, 5], dtype="int32")
    assert (i > 2).dtype == np.int32


def test_unary_dunders_and_mod_sign():
    a = mx.nd.array([-1.5, 0.0, 2.0])
    close(-a, [1.5, 0, -2])
    close(abs(a), [1.5, 0, 2])
    close(mx.nd.array([-7, 7]) % 3, np.array([-7, 7]) % 3)        # Python-style sign
    close(mx.nd.array([-7, 7]) % -3, np.array([-7, 7]) % -3)
    close(mx.nd.array([5, 3]) % 0, [0, 0])                         # MXNet: x mod 0 == 0
    close(2 ** mx.nd.array([1, 3]), [2, 8])


def test_scalar_cast_to_array_dtype():
    # MXNet casts the scalar to the array's dtype before the operation
    i = mx.nd.array([1, 2], dtype="int32")
    assert (i + 2.7).asnumpy().tolist() == [3, 4]
    assert (i * 2.5).asnumpy().tolist() == [2, 4]
    x = mx.nd.array([1.0])
    assert (x * 0.1).asnumpy()[0] == np.float32(1.0) * np.float32(0.1)


def test_inplace_operators_keep_identity():
    a = mx.nd.ones((2, 3))
    ident = id(a)
    a += 1
    a *= mx.nd.array([1, 2, 3])
    a -= 0.5
    a /= 2
    a %= 10
    assert id(a) == ident
    close(a, ((np.ones((2, 3)) + 1) * [1, 2, 3] - 0.5) / 2 % 10)
    view = a[0:1]
    view += 100
    assert a.asnumpy()[0, 0] > 100
    with pytest.raises(MXNetError):
        b = mx.nd.ones(3)
        b += mx.nd.ones((2, 3))        # result shape differs from the target


def test_numpy_operands_and_errors():
    a = mx.nd.array([1, 2])
    close(a + np.array([1, 1]), [2, 3])
    with pytest.raises(TypeError):
        a + "x"


def test_free_functions():
    a, b = mx.nd.array([1, 5]), mx.nd.array([3, 2])
    close(mx.nd.maximum(a, b), [3, 5])
    close(mx.nd.minimum(a, 2), [1, 2])
    close(mx.nd.maximum(3, a), [3, 5])
    assert mx.nd.maximum(2, 3) == 3
    close(mx.nd.add(a, b), [4, 7])
    close(mx.nd.subtract(10, a), [9, 5])
    close(mx.nd.power(a, 2), [1, 25])
    close(mx.nd.equal(a, b), [0, 0])
    close(mx.nd.greater(a, b), [0, 1])
    close(mx.nd.lesser(2, a), [0, 1])
    close(mx.nd.logical_and(a, mx.nd.array([0, 1])), [0, 1])


_shapes = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4)


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_broadcasting_matches_numpy(data):
    shape = data.draw(_shapes)
    bshape = data.draw(hnp.broadcastable_shapes(shape, min_dims=0, max_dims=len(shape)))
    x = data.draw(hnp.arrays(np.float32, shape, elements=st.floats(-4, 4, width=32)))
    y = data.draw(hnp.arrays(np.float32, bshape, elements=st.floats(0.5, 4, width=32)))
    if len(bshape) == 0:
        y = y.reshape(1)
    a, b = mx.nd.array(x), mx.nd.array(y)
    close(a + b, x + y, rtol=1e-6)
    close(b - a, y - x, rtol=1e-6)
    close(a * b, x * y, rtol=1e-6)
    close(a / b, x / y, rtol=1e-6)
    close(mx.nd.maximum(a, b), np.maximum(x, y))
    close(a > b, (x > y).astype(np.float32))


# ---------------------------------------------------------------------------------------------
# storage types, pickling, import cost
# ---------------------------------------------------------------------------------------------
def test_tostype_and_sparse_views():
    dense = np.array([[0, 1, 0], [0, 0, 0], [2, 0, 3]], dtype=np.float32)
    a = mx.nd.array(dense)
    c = a.tostype("csr")
    assert isinstance(c, mx.nd.sparse.CSRNDArray) and c.stype == "csr"
    assert c.indptr.asnumpy().tolist() == [0, 1, 1, 3]
    assert c.indices.asnumpy().tolist() == [1, 0, 2]
    assert c.data.asnumpy().tolist() == [1, 2, 3]
    r = a.tostype("row_sparse")
    assert isinstance(r, mx.nd.sparse.RowSparseNDArray)
    assert r.indices.asnumpy().tolist() == [0, 2]
    close(r.data, dense[[0, 2]])
    back = c.tostype("default")
    assert type(back) is NDArray and back.stype == "default"
    close(back, dense)
    with pytest.raises(ValueError, match="2 Dimensional"):
        mx.nd.zeros((2, 2, 2)).tostype("csr")


def test_pickle_roundtrip():
    a = mx.nd.array(np.arange(6).reshape(2, 3), dtype="int64")
    state = a.__getstate__()
    assert set(state) == {"handle"}
    b = pickle.loads(pickle.dumps(a))
    assert b.dtype == np.int64 and b.asnumpy().tolist() == a.asnumpy().tolist()
    c = pickle.loads(pickle.dumps(a.tostype("row_sparse")))
    assert c.stype == "row_sparse"


def test_import_is_cheap():
    code = "import sys, lightmod; lightmod.nd.zeros(2); print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_gpu_without_cuda_raises_the_require_error():
    if mx.num_gpus() > 0:
        pytest.skip("a GPU (or the simulator) is usable here")
    with pytest.raises(MXNetError, match=r"gpu\(0\)"):
        mx.nd.zeros((2, 2), ctx=mx.gpu(0))
    with pytest.raises(MXNetError, match=r"gpu\(0\)"):
        mx.nd.array([1, 2]).as_in_context(mx.gpu(0))


def test_one_value_in_a_sequence_sets_one_element():
    """MXNet's test_ndarray_indexing assigns ``[v]`` to a single element: the value is
    broadcast, where numpy refuses a sequence for a 0-d target."""
    arr = mx.nd.zeros((2, 3))
    arr[1, 2] = [7]
    arr[0, 0] = np.array([5.0])
    np.testing.assert_array_equal(arr.asnumpy(), [[5, 0, 0], [0, 0, 7]])
    with pytest.raises(ValueError):
        arr[1, 1] = [1, 2]
