"""Memory shared with numpy and through DLPack, ctypes handles of NDArrays, and which basic
slices give contiguous blocks."""
import ctypes
import gc
from itertools import product

import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError, NDArrayHandle


@pytest.mark.parametrize("source", [
    np.arange(6, dtype=np.float32).reshape(3, 2),
    np.array(7, dtype=np.int64),                    # 0-dim
    np.zeros((1, 0, 2)),                            # no elements
])
@pytest.mark.parametrize("zero_copy", [False, True])
def test_from_numpy_keeps_values_and_dtype(source, zero_copy):
    expected = source.copy()
    arr = mx.nd.from_numpy(source, zero_copy=zero_copy)
    assert arr.dtype == expected.dtype
    np.testing.assert_array_equal(arr.asnumpy().reshape(expected.shape), expected)


def test_from_numpy_zero_copy_shares_memory_and_locks_the_source():
    source = np.arange(6, dtype=np.float32).reshape(3, 2)
    arr = mx.nd.from_numpy(source)
    with pytest.raises(ValueError):
        source[0, 0] = -1                    # only the NDArray writes now
    arr[2, 1] = 100
    assert source[2, 1] == 100
    again = mx.nd.from_numpy(source)         # a read-only source still gives a writable array
    again[0, 0] = 5
    assert source[0, 0] == 5 and arr.asnumpy()[0, 0] == 5


def test_from_numpy_copy_is_independent_and_bad_inputs():
    source = np.ones((2, 2), np.float32)
    arr = mx.nd.from_numpy(source, zero_copy=False)
    arr[:] = 3
    assert source[0, 0] == 1 and source.flags.writeable
    with pytest.raises(ValueError, match="c-contiguous"):
        mx.nd.from_numpy(np.ones((2, 3)).T)
    np.testing.assert_array_equal(mx.nd.from_numpy(np.ones((2, 3)).T, zero_copy=False)
                                  .asnumpy(), np.ones((3, 2)))
    with pytest.raises(TypeError, match="numpy"):
        mx.nd.from_numpy([1, 2, 3])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
def test_dlpack_round_trip_shares_memory(dtype):
    src = mx.nd.array(np.arange(24).reshape(2, 3, 4), dtype=dtype)
    for export in (lambda a: a.to_dlpack_for_read(), lambda a: a.to_dlpack_for_write(),
                   mx.nd.to_dlpack_for_read, mx.nd.to_dlpack_for_write):
        back = mx.nd.from_dlpack(export(src))
        assert back.shape == (2, 3, 4) and back.dtype == dtype
        np.testing.assert_array_equal(back.asnumpy(), src.asnumpy())
        back[0, 0, 0] = 50
        assert src.asnumpy()[0, 0, 0] == 50
        src[0, 0, 0] = 0


def test_dlpack_memory_outlives_the_producer_and_talks_to_numpy():
    src = mx.nd.array([[1.0, 2.0], [3.0, 4.0]])
    capsule = src.to_dlpack_for_read()
    del src
    gc.collect()
    back = mx.nd.from_dlpack(capsule)
    np.testing.assert_array_equal(back.asnumpy(), [[1.0, 2.0], [3.0, 4.0]])
    # a capsule numpy made is read the same way, and numpy reads lightmod's through a holder
    from_np = mx.nd.from_dlpack(np.arange(3.0).__dlpack__())
    np.testing.assert_array_equal(from_np.asnumpy(), [0.0, 1.0, 2.0])


def test_dlpack_bad_inputs():
    src = mx.nd.ones((2,))
    capsule = src.to_dlpack_for_read()
    mx.nd.from_dlpack(capsule)
    with pytest.raises(MXNetError, match="consumed once"):
        mx.nd.from_dlpack(capsule)
    with pytest.raises(TypeError, match="capsule"):
        mx.nd.from_dlpack(np.ones(2))
    with pytest.raises(TypeError, match="NDArray"):
        mx.nd.to_dlpack_for_read(np.ones(2))
    with pytest.raises(MXNetError, match="row_sparse"):
        mx.nd.ones((2, 2)).tostype("row_sparse").to_dlpack_for_read()


def test_ndarray_handle_round_trip():
    arr = mx.nd.array([[1.0, 5.0], [-2.0, 3.0]])
    handle = ctypes.cast(arr, NDArrayHandle)
    same = mx.nd.NDArray(handle, writable=False)
    assert mx.nd.min(same).asscalar() == -2.0
    arr[0, 0] = -9
    assert same.asnumpy()[0, 0] == -9
    with pytest.raises(ValueError):
        same[0, 0] = 1
    sparse = mx.nd.ones((2, 2)).tostype("row_sparse")
    assert isinstance(mx.nd.NDArray(ctypes.cast(sparse, NDArrayHandle)),
                      mx.nd.RowSparseNDArray)


def test_a_handle_of_a_dead_or_foreign_array_is_refused():
    arr = mx.nd.ones((2,))
    value = ctypes.cast(arr, NDArrayHandle).value
    del arr
    gc.collect()
    with pytest.raises(MXNetError, match="live NDArray"):
        mx.nd.NDArray(NDArrayHandle(value))
    with pytest.raises(MXNetError, match="live NDArray"):
        mx.nd.NDArray(NDArrayHandle(None))


_SLICES = [slice(None), slice(2), slice(1, 3), slice(None, None, 2), slice(0, 1),
           slice(None, None, -1), slice(2, None, -2), slice(3, 3), slice(None, None, 9)]


def test_basic_indexing_contiguity_matches_numpy():
    shape = (4, 3, 5)
    x = np.arange(60).reshape(shape)
    check = mx.nd.NDArray._basic_indexing_slice_is_contiguous
    for key in product(_SLICES, repeat=3):
        assert check(key, shape) == x[key].flags.c_contiguous, key
    with pytest.raises(ValueError, match="one slice per axis"):
        check((slice(None),), shape)
