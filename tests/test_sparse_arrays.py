"""Sparse arrays as MXNet code sees them: constructors (shape and dtype inference, bad
arguments), ``check_format`` on malformed parts, csr row indexing, ``nd.sparse``'s arithmetic
functions, and ``Context.default_ctx``. Values are checked against numpy."""
import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError
from lightmod.context import Context
from lightmod.ndarray.sparse import CSRNDArray, RowSparseNDArray, SparseValueError

DENSE = np.array([[0, 1.5, 0, 2], [0, 0, 0, 0], [3, 0, -1, 0]], dtype=np.float32)


def test_aux_array_counts_and_index_dtype():
    rsp = mx.nd.array(DENSE).tostype("row_sparse")
    csr = mx.nd.array(DENSE).tostype("csr")
    assert (rsp._num_aux, csr._num_aux) == (1, 2)
    assert rsp.indices.dtype == np.int64 and csr.indptr.dtype == np.int64
    assert rsp.indices.asnumpy().tolist() == [0, 2]
    assert csr.indptr.asnumpy().tolist() == [0, 2, 2, 4]


@pytest.mark.parametrize("key, rows", [(0, [0]), (2, [2]), (-1, [2]), (-3, [0]),
                                       (slice(1, 3), [1, 2]), (slice(-2, None), [1, 2]),
                                       (slice(None, 1), [0]), (slice(2, 1), [])])
def test_csr_rows_index_to_csr(key, rows):
    csr = mx.nd.array(DENSE).tostype("csr")
    part = csr[key]
    assert isinstance(part, CSRNDArray) and part.stype == "csr"
    np.testing.assert_array_equal(part.asnumpy(), DENSE[rows].reshape(len(rows), 4))


def test_csr_indexing_refuses_steps_and_out_of_range_rows():
    csr = mx.nd.array(DENSE).tostype("csr")
    with pytest.raises(ValueError, match="continuous"):
        csr[0:3:2]
    with pytest.raises(IndexError, match="3 rows"):
        csr[3]
    with pytest.raises(IndexError):
        csr[-4]


def test_well_formed_arrays_pass_check_format():
    for arr in (mx.nd.array(DENSE).tostype("csr"), mx.nd.array(DENSE).tostype("row_sparse"),
                mx.nd.sparse.zeros("csr", (2, 3)), mx.nd.sparse.zeros("row_sparse", (2, 3)),
                mx.nd.sparse.csr_matrix(([1, 2], [1, 3], [0, 1, 1, 2]), shape=(3, 4)),
                # indices restart at each row, empty rows included
                mx.nd.sparse.csr_matrix(([1, 2, 3], [3, 0, 2], [0, 1, 1, 3]), shape=(3, 4)),
                mx.nd.sparse.row_sparse_array(([[1, 2]], [1]), shape=(3, 2))):
        arr.check_format()


@pytest.mark.parametrize("indices, indptr, problem", [
    ([0, 2, 1], [0, 5, 2, 3], "non-decreasing"),
    ([2, 1, 1], [0, 2, 2, 3], "ascending within each row"),
    ([1, 2, 1], [0, 2, 2, 4], "end at the number of indices"),
    ([0, 2, 1], [0, -2, 2, 3], "must not be negative"),
    ([0, 4, 1], [0, 1, 2, 3], r"indices must lie in \[0, 4\)"),
    ([0, 1, 1], [1, 2, 2, 3], "start at 0"),
    ([1, 1, 2], [0, 2, 2, 3], "ascending within each row"),
])
def test_malformed_csr_parts_are_kept_for_check_format(indices, indptr, problem):
    arr = mx.nd.sparse.csr_matrix(([7, 8, 9], indices, indptr), shape=(3, 4))
    assert arr.stype == "csr" and arr.shape == (3, 4)
    with pytest.raises(MXNetError, match=problem):
        arr.check_format()
    arr.check_format(full_check=False)


@pytest.mark.parametrize("indices, problem", [([1, 4], r"lie in \[0, 3\)"),
                                              ([1, 0], "ascending"), ([1, -2], r"\[0, 3\)"),
                                              ([1, 1], "ascending")])
def test_malformed_row_sparse_indices_are_kept_for_check_format(indices, problem):
    arr = mx.nd.sparse.row_sparse_array(([[1, 2], [3, 4]], indices), shape=(3, 2))
    with pytest.raises(MXNetError, match=problem):
        arr.check_format()


def test_malformed_parts_still_give_the_entries_that_have_a_place():
    arr = mx.nd.sparse.row_sparse_array(([[1, 2], [3, 4]], [1, 4]), shape=(3, 2))
    np.testing.assert_array_equal(arr.asnumpy(), [[0, 0], [1, 2], [0, 0]])
    csr = mx.nd.sparse.csr_matrix(([7, 8, 9], [2, 1, 1], [0, 2, 2, 3]), shape=(3, 4))
    np.testing.assert_array_equal(csr.asnumpy(), [[0, 8, 7, 0], [0, 0, 0, 0], [0, 9, 0, 0]])


def test_tostype_csr_needs_two_dimensions():
    for shape in ((3,), (1, 1, 3)):
        with pytest.raises(ValueError, match="2 Dimensional"):
            mx.nd.ones(shape).tostype("csr")


def test_constructors_infer_shape_and_dtype_from_parts():
    csr = mx.nd.sparse.csr_matrix((mx.nd.array([1, 2], dtype="int32"), [3, 0], [0, 1, 2]))
    assert csr.shape == (2, 4) and csr.dtype == np.int32
    rsp = mx.nd.sparse.row_sparse_array((np.ones((2, 3), np.float64), [0, 4]))
    assert rsp.shape == (5, 3) and rsp.dtype == np.float64
    assert rsp.indices.asnumpy().tolist() == [0, 4]


@pytest.mark.parametrize("make", [
    lambda: mx.nd.sparse.csr_matrix(([], [], [0, 0, 0])),
    lambda: mx.nd.sparse.row_sparse_array((np.zeros((0, 3)), [])),
    lambda: mx.nd.sparse.csr_matrix(mx.nd.ones((2, 2)), shape=(3, 2)),
    lambda: mx.nd.sparse.csr_matrix((2, 2), shape=(3, 2)),
    lambda: mx.nd.sparse.row_sparse_array((2, 2), shape=(3, 2)),
    lambda: mx.nd.sparse.row_sparse_array((np.int64(2), np.int32(2)), (np.int32(3), 2)),
    lambda: mx.nd.sparse.row_sparse_array(np.ones((2, 2)), shape=(2, 3)),
    lambda: mx.nd.sparse.row_sparse_array(([[1, 2]], [0, 1]), shape=(3, 2)),
    lambda: mx.nd.sparse.csr_matrix(([1, 2], [0], [0, 1, 2]), shape=(2, 3)),
    lambda: mx.nd.sparse.csr_matrix(([1], [0], [0, 1]), shape=(2, 3)),
    lambda: mx.nd.sparse.csr_matrix(np.zeros((2, 2, 2))),
    lambda: mx.nd.sparse.zeros("invalid_stype", (2, 2)),
    lambda: mx.nd.sparse.zeros("csr", (2, 2, 2)),
])
def test_bad_constructor_arguments_raise_value_errors(make):
    with pytest.raises(SparseValueError) as info:
        make()
    assert isinstance(info.value, ValueError) and isinstance(info.value, MXNetError)


def test_default_context_and_dtype():
    assert Context.default_ctx == mx.cpu(0) == mx.current_context()
    with mx.cpu(2):
        assert Context.default_ctx == mx.cpu(2)
        assert mx.nd.sparse.row_sparse_array((2, 3)).context == mx.cpu(2)
    for make in (mx.nd.sparse.csr_matrix, mx.nd.sparse.row_sparse_array):
        arr = make((2, 3))
        assert arr.dtype == np.float32 and arr.context == Context.default_ctx
        assert make(np.ones((2, 3), np.float64)).dtype == np.float64
        assert make(np.ones((2, 3)).tolist()).dtype == np.float32
        given = make(mx.nd.ones((2, 3)), dtype="int32", ctx=mx.cpu(1))
        assert given.dtype == np.int32 and given.context == mx.cpu(1)


@pytest.mark.parametrize("stype", ["csr", "row_sparse"])
def test_empty_sparse_arrays_read_as_zero(stype):
    arr = mx.nd.empty((3, 5), stype=stype)
    assert arr.stype == stype
    np.testing.assert_array_equal(arr.asnumpy(), np.zeros((3, 5)))


@pytest.mark.parametrize("other_shape", [(1, 4), (4,), (3, 1), (1, 1), (1,)])
def test_sparse_arithmetic_functions_broadcast(other_shape):
    csr = mx.nd.array(DENSE).tostype("csr")
    other = np.arange(1, 1 + int(np.prod(other_shape)), dtype=np.float32).reshape(other_shape)
    dense = mx.nd.array(other)
    for fn, ref in [(mx.nd.sparse.add, np.add), (mx.nd.sparse.subtract, np.subtract),
                    (mx.nd.sparse.multiply, np.multiply), (mx.nd.sparse.divide, np.divide)]:
        np.testing.assert_allclose(fn(csr, dense).asnumpy(), ref(DENSE, other), rtol=1e-6)
        with np.errstate(divide="ignore"):     # other / DENSE divides by its zeros
            expected = ref(other, DENSE)
        np.testing.assert_allclose(fn(dense, csr).asnumpy(), expected, rtol=1e-6)
    # zero stays zero under a product or a quotient by a dense vector: the result stays csr
    assert mx.nd.sparse.multiply(csr, dense).stype == "csr"
    assert mx.nd.sparse.divide(csr, dense).stype == "csr"
    assert mx.nd.sparse.add(csr, dense).stype == "default"


def test_sparse_arithmetic_functions_with_equal_shapes_and_numbers():
    csr = mx.nd.array(DENSE).tostype("csr")
    out = mx.nd.sparse.add(csr, csr)
    assert isinstance(out, CSRNDArray)
    np.testing.assert_array_equal(out.asnumpy(), 2 * DENSE)
    rsp = mx.nd.array(DENSE).tostype("row_sparse")
    out = mx.nd.sparse.multiply(rsp, mx.nd.ones((3, 4)) * 3)
    assert isinstance(out, RowSparseNDArray)
    np.testing.assert_array_equal(out.asnumpy(), 3 * DENSE)
    np.testing.assert_array_equal(mx.nd.sparse.subtract(5, csr).asnumpy(), 5 - DENSE)
    np.testing.assert_array_equal(mx.nd.sparse.divide(csr, 2).asnumpy(), DENSE / 2)
    assert mx.nd.sparse.divide(csr, 2).stype == "csr"
    assert mx.nd.sparse.add(1.5, 2) == 3.5


@pytest.mark.parametrize("stype", ["csr", "row_sparse"])
def test_comparisons_keep_sparse_storage_where_zero_compares_false(stype):
    x = mx.nd.array(DENSE).tostype(stype)
    for expr, ref, kept in [(lambda a: a == 1.5, DENSE == 1.5, True),
                            (lambda a: a == 0, DENSE == 0, False),
                            (lambda a: a != 0, DENSE != 0, True),
                            (lambda a: a > 0, DENSE > 0, True),
                            (lambda a: a >= 0, DENSE >= 0, False),
                            (lambda a: 0 > a, DENSE < 0, True),
                            (lambda a: a < 1, DENSE < 1, False),
                            (lambda a: 1 <= a, DENSE >= 1, True)]:
        out = expr(x)
        assert out.stype == (stype if kept else "default")
        np.testing.assert_array_equal(out.asnumpy(), ref.astype(np.float32))


@pytest.mark.parametrize("stype", ["csr", "row_sparse"])
@pytest.mark.parametrize("name, ref", [("arcsin", np.arcsin), ("arctan", np.arctan),
                                       ("sinh", np.sinh), ("arcsinh", np.arcsinh),
                                       ("arctanh", np.arctanh), ("degrees", np.degrees),
                                       ("radians", np.radians)])
def test_fluent_trigonometric_methods_keep_sparse_storage(stype, name, ref):
    values = DENSE / 4                 # inside the domain of arcsin and arctanh
    x = mx.nd.array(values).tostype(stype)
    out = getattr(x, name)()
    assert out.stype == stype
    np.testing.assert_allclose(out.asnumpy(), ref(values), rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(out.asnumpy(), getattr(mx.nd, name)(x).asnumpy())
