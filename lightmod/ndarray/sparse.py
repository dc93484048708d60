"""``nd.sparse``: csr and row_sparse arrays, emulated densely.

lightmod keeps the values of a sparse array dense (``_data`` has the logical shape) and gives
it the sparse *interface* MXNet code observes: the classes ``CSRNDArray`` and
``RowSparseNDArray``, ``stype``, ``indptr`` / ``indices`` / ``data`` computed on demand from the
nonzeros, ``tostype``, and sparse records in ``.params`` files. Explicitly stored zeros are
therefore not kept (a row_sparse array whose stored row is all zero reports no such row).
Other attributes fall back to the operators: ``nd.sparse.X`` is the ``_sparse_X`` operator if
one is registered, else ``X``.
"""
import numpy as np

from ..base import MXNetError, dtype_np
from ..operator.frontend import namespace_hooks as _namespace_hooks
from . import ndarray as _nd
from .ndarray import NDArray, _as_ctx, _as_shape, _to_ctx_buffer
from .register import find_function as _find_function

__all__ = ["BaseSparseNDArray", "CSRNDArray", "RowSparseNDArray", "csr_matrix",
           "row_sparse_array", "zeros", "empty", "array"]


class BaseSparseNDArray(NDArray):
    """Common base of the sparse array classes (dense-backed)."""
    __slots__ = ()

    def _wrap(self, host, dtype=None):
        host = np.ascontiguousarray(host if dtype is None else host.astype(dtype))
        return NDArray(_to_ctx_buffer(host, self._ctx), self._ctx)

    def check_format(self, full_check=True):
        """Dense-backed arrays are always well formed."""


class CSRNDArray(BaseSparseNDArray):
    """A 2-D compressed-sparse-row array (values kept dense)."""
    __slots__ = ()

    def _parts(self):
        host = self._host_view()
        rows, cols = np.nonzero(host)
        counts = np.bincount(rows, minlength=host.shape[0])
        indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return host[rows, cols], cols.astype(np.int64), indptr

    @property
    def data(self):
        return self._wrap(self._parts()[0])

    @property
    def indices(self):
        return self._wrap(self._parts()[1])

    @property
    def indptr(self):
        return self._wrap(self._parts()[2])



class RowSparseNDArray(BaseSparseNDArray):
    """An array whose nonzero rows (along axis 0) are stored (values kept dense)."""
    __slots__ = ()

    def _parts(self):
        host = self._host_view()
        flat = host.reshape(host.shape[0], -1) if host.shape[0] else host.reshape(0, 1)
        rows = np.nonzero(np.any(flat != 0, axis=1))[0].astype(np.int64)
        return host[rows], rows

    @property
    def data(self):
        return self._wrap(self._parts()[0])

    @property
    def indices(self):
        return self._wrap(self._parts()[1])


    def retain(self, indices):
        """Keep only the given rows."""
        host = self.asnumpy()
        keep = np.zeros(host.shape[0], dtype=bool)
        idx = indices._host_view() if isinstance(indices, NDArray) else np.asarray(indices)
        keep[idx.astype(np.int64)] = True
        host[~keep] = 0
        return NDArray(_to_ctx_buffer(host, self._ctx), self._ctx, "row_sparse")


_nd._STYPE_CLASS.update(csr=CSRNDArray, row_sparse=RowSparseNDArray)


def _host(x):
    if isinstance(x, NDArray):
        return x._host_view()
    return np.asarray(x)


def _default_dtype(src, dtype):
    if dtype is not None:
        return dtype_np(dtype)
    if isinstance(src, (NDArray, np.ndarray)):
        return np.dtype(src.dtype)
    return np.dtype(np.float32)


def _make(host, stype, ctx):
    ctx = _as_ctx(ctx)
    return NDArray(_to_ctx_buffer(host, ctx), ctx, stype)


def csr_matrix(arg1, shape=None, ctx=None, dtype=None):
    """A CSRNDArray from ``(data, indices, indptr)``, ``(data, (row, col))``, a dense array
    (NDArray / numpy / lists), a CSRNDArray or a scipy csr matrix; ``shape`` is (rows, cols)."""
    if isinstance(arg1, tuple) and len(arg1) == 3:
        data, indices, indptr = (_host(a) for a in arg1)
        dtype = _default_dtype(arg1[0], dtype)
        indices, indptr = indices.astype(np.int64), indptr.astype(np.int64)
        if shape is None:
            shape = (len(indptr) - 1, int(indices.max()) + 1 if indices.size else 0)
        shape = _as_shape(shape)
        if (len(indptr) != shape[0] + 1 or indptr[-1] != len(indices)
                or len(indices) != len(data)):
            raise MXNetError("csr_matrix: inconsistent data (%d), indices (%d), indptr (%d) for "
                             "shape %s" % (len(data), len(indices), len(indptr), shape))
        dense = np.zeros(shape, dtype=dtype)
        rows = np.repeat(np.arange(shape[0]), np.diff(indptr))
        np.add.at(dense, (rows, indices), data.astype(dtype))
        return _make(dense, "csr", ctx)
    if isinstance(arg1, tuple) and len(arg1) == 2:
        if isinstance(arg1[1], tuple) and len(arg1[1]) == 2:
            data = _host(arg1[0])
            row, col = (_host(a).astype(np.int64) for a in arg1[1])
            dtype = _default_dtype(arg1[0], dtype)
            if shape is None:
                shape = (int(row.max()) + 1, int(col.max()) + 1)
            dense = np.zeros(_as_shape(shape), dtype=dtype)
            np.add.at(dense, (row, col), data.astype(dtype))
            return _make(dense, "csr", ctx)
        # (M, N): an empty matrix of that shape
        return zeros("csr", arg1, ctx=ctx, dtype=dtype)
    if hasattr(arg1, "indptr") and hasattr(arg1, "tocsr") and not isinstance(arg1, NDArray):
        csr = arg1.tocsr()
        return csr_matrix((csr.data, csr.indices, csr.indptr), shape=csr.shape, ctx=ctx,
                          dtype=dtype if dtype is not None else csr.dtype)
    dtype = _default_dtype(arg1, dtype)
    dense = _host(arg1).astype(dtype)
    if dense.ndim != 2:
        raise MXNetError("csr_matrix needs a 2-D source, got shape %s" % (dense.shape,))
    if shape is not None and _as_shape(shape) != dense.shape:
        raise MXNetError("csr_matrix: shape %s does not match the source's %s"
                         % (shape, dense.shape))
    return _make(dense, "csr", ctx if ctx is not None or not isinstance(arg1, NDArray)
                 else arg1.context)


def row_sparse_array(arg1, shape=None, ctx=None, dtype=None):
    """A RowSparseNDArray from ``(data, indices)`` with ``shape``, a dense array, a
    RowSparseNDArray, or a shape tuple (all zeros)."""
    if isinstance(arg1, tuple) and len(arg1) == 2 and not all(
            isinstance(d, (int, np.integer)) for d in arg1):
        data, indices = _host(arg1[0]), _host(arg1[1]).astype(np.int64)
        dtype = _default_dtype(arg1[0], dtype)
        if shape is None:
            shape = (int(indices.max()) + 1 if indices.size else 0,) + data.shape[1:]
        shape = _as_shape(shape)
        if data.shape[0] != indices.shape[0] or data.shape[1:] != shape[1:]:
            raise MXNetError("row_sparse_array: data %s and indices %s do not fit shape %s"
                             % (data.shape, indices.shape, shape))
        dense = np.zeros(shape, dtype=dtype)
        dense[indices] = data.astype(dtype)
        return _make(dense, "row_sparse", ctx)
    if isinstance(arg1, tuple):
        return zeros("row_sparse", arg1, ctx=ctx, dtype=dtype)
    dtype = _default_dtype(arg1, dtype)
    dense = _host(arg1).astype(dtype)
    return _make(dense, "row_sparse", ctx if ctx is not None or not isinstance(arg1, NDArray)
                 else arg1.context)


def zeros(stype, shape, ctx=None, dtype=None, **kwargs):
    """An all-zero array of storage type ``stype`` ('default', 'row_sparse' or 'csr')."""
    if stype not in _nd.STYPES:
        raise MXNetError("zeros: unknown storage type %r" % (stype,))
    if stype == "csr" and len(_as_shape(shape)) != 2:
        raise MXNetError("zeros('csr') needs a 2-D shape, got %s" % (shape,))
    return _nd.zeros(shape, ctx=ctx, dtype=dtype, stype=stype)


def empty(stype, shape, ctx=None, dtype=None):
    return zeros(stype, shape, ctx=ctx, dtype=dtype)


def array(source_array, ctx=None, dtype=None):
    """A sparse array with the storage type of ``source_array`` (a sparse NDArray or a scipy
    csr matrix)."""
    if isinstance(source_array, NDArray):
        if source_array.stype == "default":
            raise MXNetError("sparse.array expects a sparse source (csr or row_sparse)")
        out = source_array.astype(dtype if dtype is not None else source_array.dtype)
        ctx = source_array.context if ctx is None else ctx
        return out.as_in_context(ctx) if out is not source_array else out.copy()
    return csr_matrix(source_array, ctx=ctx, dtype=dtype)


__getattr__, __dir__ = _namespace_hooks(__name__, ("_sparse_", ""), _find_function)
