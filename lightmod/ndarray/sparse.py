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

__all__ = ["SparseValueError", "BaseSparseNDArray", "CSRNDArray", "RowSparseNDArray", "csr_matrix",
           "row_sparse_array", "zeros", "empty", "array", "add", "subtract", "multiply",
           "divide"]


class SparseValueError(MXNetError, ValueError):
    """A bad argument to a sparse constructor: MXNet raises ValueError for most of them, and
    lightmod's callers catch MXNetError, so it is both."""


class BaseSparseNDArray(NDArray):
    """Common base of the sparse array classes (dense-backed)."""
    # what check_format reports about the parts the array was built from (None: well formed)
    __slots__ = ("_format_error",)

    def _wrap(self, host, dtype=None):
        host = np.ascontiguousarray(host if dtype is None else host.astype(dtype))
        return NDArray(_to_ctx_buffer(host, self._ctx), self._ctx)

    @property
    def _num_aux(self):
        """How many auxiliary arrays the format has (row_sparse: indices; csr: indptr and
        indices)."""
        return 2 if self.stype == "csr" else 1

    def check_format(self, full_check=True):
        """Raise MXNetError if the parts this array was built from (``indptr``, ``indices``)
        are malformed: out of range, negative, or not ascending. ``full_check=False`` checks
        nothing, as MXNet's cheap check only looks at the aux array shapes, which lightmod
        validates when the array is made."""
        error = getattr(self, "_format_error", None)
        if full_check and error:
            raise MXNetError("check_format: %s" % error)


def _part(position, doc):
    """A property: the array at ``position`` in the class's ``_parts()`` (the compressed form
    computed from the dense values), as an NDArray on the array's context."""
    return property(lambda self: self._wrap(self._parts()[position]), doc=doc)


class CSRNDArray(BaseSparseNDArray):
    """A 2-D compressed-sparse-row array (values kept dense)."""
    __slots__ = ()

    def _parts(self):
        host = self._host_view()
        rows, cols = np.nonzero(host)
        counts = np.bincount(rows, minlength=host.shape[0])
        indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return host[rows, cols], cols.astype(np.int64), indptr

    data = _part(0, "The nonzero values, row by row.")
    indices = _part(1, "The column index of each value.")
    indptr = _part(2, "Where each row's values start in ``data`` (and the last one ends).")

    def __getitem__(self, key):
        """Rows as a CSRNDArray: ``a[i]`` is row i as a 1-row matrix, ``a[i:j]`` a block of
        rows (step 1 only); other keys give a dense result."""
        rows = self.shape[0]
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            if not -rows <= key < rows:
                raise IndexError("index %d is out of bounds for a CSRNDArray with %d rows"
                                 % (key, rows))
            start = int(key) % rows
            return self._rows(start, start + 1)
        if isinstance(key, slice):
            if key.step not in (None, 1):
                raise ValueError("CSRNDArray only supports continuous slicing on axis 0, "
                                 "got step %s" % (key.step,))
            start, stop, _ = key.indices(rows)
            return self._rows(start, max(start, stop))
        return super().__getitem__(key)

    def _rows(self, start, stop):
        view = NDArray.__getitem__(self, slice(start, stop))
        return NDArray(view._data, view._ctx, "csr", view.writable)


class RowSparseNDArray(BaseSparseNDArray):
    """An array whose nonzero rows (along axis 0) are stored (values kept dense)."""
    __slots__ = ()

    def _parts(self):
        host = self._host_view()
        flat = host.reshape(host.shape[0], -1) if host.shape[0] else host.reshape(0, 1)
        rows = np.nonzero(np.any(flat != 0, axis=1))[0].astype(np.int64)
        return host[rows], rows

    data = _part(0, "The stored rows.")
    indices = _part(1, "The index of each stored row.")

    def retain(self, *args, **kwargs):
        """Keep only the rows listed in ``indices`` (the ``_sparse_retain`` operator)."""
        return _find_function("_sparse_retain")(self, *args, **kwargs)


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


def _csr_problem(indices, indptr, shape):
    """What is wrong with csr parts (None when they are well formed)."""
    nnz = len(indices)
    if indptr[0] != 0:
        return "csr indptr must start at 0, got %d" % indptr[0]
    if np.any(indptr < 0):
        return "csr indptr must not be negative: %s" % (indptr.tolist(),)
    if np.any(np.diff(indptr) < 0):
        return "csr indptr must be non-decreasing: %s" % (indptr.tolist(),)
    if indptr[-1] != nnz:
        return "csr indptr must end at the number of indices (%d), got %d" % (nnz, indptr[-1])
    if nnz and (indices.min() < 0 or indices.max() >= shape[1]):
        return "csr indices must lie in [0, %d): %s" % (shape[1], indices.tolist())
    # consecutive indices of one row must increase; a row's end resets the order
    within_row = np.ones(max(nnz - 1, 0), dtype=bool)
    ends = indptr[1:-1] - 1
    within_row[ends[(ends >= 0) & (ends < nnz - 1)]] = False
    bad = np.nonzero((np.diff(indices) <= 0) & within_row)[0]
    if bad.size:
        r = int(np.searchsorted(indptr, bad[0], side="right")) - 1
        return "csr indices must be ascending within each row (row %d: %s)" % (
            r, indices[indptr[r]:indptr[r + 1]].tolist())
    return None


def _rsp_problem(indices, rows):
    if len(indices) and (indices.min() < 0 or indices.max() >= rows):
        return "row_sparse indices must lie in [0, %d): %s" % (rows, indices.tolist())
    if np.any(np.diff(indices) <= 0):
        return "row_sparse indices must be ascending: %s" % (indices.tolist(),)
    return None


def _from_parts(dense, stype, ctx, problem):
    arr = _make(dense, stype, ctx)
    arr._format_error = problem
    return arr


def _csr_from_parts(data, indices, indptr, shape, dtype, ctx):
    indices, indptr = indices.astype(np.int64).reshape(-1), indptr.astype(np.int64).reshape(-1)
    data = data.reshape(-1)
    if shape is None:
        if not indices.size:
            raise SparseValueError("csr_matrix: cannot infer the shape from empty indices; pass "
                             "shape=")
        shape = (len(indptr) - 1, int(indices.max()) + 1)
    shape = _as_shape(shape)
    if len(shape) != 2:
        raise SparseValueError("csr_matrix: shape must be 2-D, got %s" % (shape,))
    if len(indptr) != shape[0] + 1:
        raise SparseValueError("csr_matrix: indptr has %d entries, shape %s needs %d"
                         % (len(indptr), shape, shape[0] + 1))
    if len(indices) != len(data):
        raise SparseValueError("csr_matrix: %d values but %d column indices"
                         % (len(data), len(indices)))
    problem = _csr_problem(indices, indptr, shape)
    dense = np.zeros(shape, dtype=dtype)
    if problem is None:
        rows = np.repeat(np.arange(shape[0]), np.diff(indptr))
        np.add.at(dense, (rows, indices), data.astype(dtype))
    else:
        # malformed parts (check_format reports them): row r takes the entries of
        # indptr[r]:indptr[r + 1] that exist (clipped to [0, nnz)) and whose column lies in
        # the shape; nothing is read or written outside the arrays
        nnz = len(indices)
        starts = np.clip(indptr[:-1], 0, nnz)
        counts = np.maximum(np.clip(indptr[1:], 0, nnz) - starts, 0)
        rows = np.repeat(np.arange(shape[0]), counts)
        entries = np.arange(int(counts.sum())) + np.repeat(starts - (np.cumsum(counts) - counts),
                                                           counts)
        cols = indices[entries]
        placed = (cols >= 0) & (cols < shape[1])
        np.add.at(dense, (rows[placed], cols[placed]), data[entries[placed]].astype(dtype))
    return _from_parts(dense, "csr", ctx, problem)


def csr_matrix(arg1, shape=None, ctx=None, dtype=None):
    """A CSRNDArray from ``(data, indices, indptr)``, ``(data, (row, col))``, a dense array
    (NDArray / numpy / lists), a CSRNDArray, a scipy csr matrix, or a shape ``(M, N)`` (all
    zeros). Malformed ``indices``/``indptr`` are accepted and reported by ``check_format``."""
    if isinstance(arg1, tuple) and len(arg1) == 3:
        dtype = _default_dtype(arg1[0], dtype)
        data, indices, indptr = (_host(a) for a in arg1)
        return _csr_from_parts(data, indices, indptr, shape, dtype, ctx)
    if isinstance(arg1, tuple) and len(arg1) == 2:
        if isinstance(arg1[1], tuple) and len(arg1[1]) == 2:
            data = _host(arg1[0])
            row, col = (_host(a).astype(np.int64) for a in arg1[1])
            dtype = _default_dtype(arg1[0], dtype)
            if shape is None:
                if not row.size:
                    raise SparseValueError("csr_matrix: cannot infer the shape from empty "
                                     "coordinates; pass shape=")
                shape = (int(row.max()) + 1, int(col.max()) + 1)
            shape = _as_shape(shape)
            if row.size and (row.min() < 0 or row.max() >= shape[0] or col.min() < 0
                             or col.max() >= shape[1]):
                raise SparseValueError("csr_matrix: coordinates outside shape %s" % (shape,))
            dense = np.zeros(shape, dtype=dtype)
            np.add.at(dense, (row, col), data.astype(dtype))
            return _make(dense, "csr", ctx)
        # (M, N): an empty matrix of that shape
        if shape is not None and _as_shape(shape) != _as_shape(arg1):
            raise SparseValueError("csr_matrix: shape %s differs from the shape argument %s"
                             % (tuple(shape), tuple(arg1)))
        return zeros("csr", arg1, ctx=ctx, dtype=dtype)
    if hasattr(arg1, "indptr") and hasattr(arg1, "tocsr") and not isinstance(arg1, NDArray):
        csr = arg1.tocsr()
        csr.sum_duplicates()
        csr.sort_indices()
        return csr_matrix((csr.data, csr.indices, csr.indptr), shape=csr.shape, ctx=ctx,
                          dtype=dtype if dtype is not None else csr.dtype)
    dtype = _default_dtype(arg1, dtype)
    dense = _host(arg1).astype(dtype)
    if dense.ndim != 2:
        raise SparseValueError("csr_matrix needs a 2-D source, got shape %s" % (dense.shape,))
    if shape is not None and _as_shape(shape) != dense.shape:
        raise SparseValueError("csr_matrix: shape %s does not match the source's %s"
                         % (tuple(shape), dense.shape))
    return _make(dense, "csr", ctx if ctx is not None or not isinstance(arg1, NDArray)
                 else arg1.context)


def row_sparse_array(arg1, shape=None, ctx=None, dtype=None):
    """A RowSparseNDArray from ``(data, indices)`` (and ``shape``), a dense array, a
    RowSparseNDArray, or a shape tuple (all zeros). Malformed ``indices`` are accepted and
    reported by ``check_format``."""
    if isinstance(arg1, tuple) and len(arg1) == 2 and not all(
            isinstance(d, (int, np.integer)) for d in arg1):
        data, indices = _host(arg1[0]), _host(arg1[1]).astype(np.int64).reshape(-1)
        dtype = _default_dtype(arg1[0], dtype)
        if shape is None:
            if not indices.size:
                raise SparseValueError("row_sparse_array: cannot infer the shape from empty "
                                 "indices; pass shape=")
            shape = (int(indices.max()) + 1,) + data.shape[1:]
        shape = _as_shape(shape)
        if data.ndim == 0 or data.shape[0] != indices.shape[0] or data.shape[1:] != shape[1:]:
            raise SparseValueError("row_sparse_array: data %s and indices %s do not fit shape %s"
                             % (data.shape, indices.shape, shape))
        problem = _rsp_problem(indices, shape[0])
        dense = np.zeros(shape, dtype=dtype)
        placed = (indices >= 0) & (indices < shape[0])
        dense[indices[placed]] = data[placed].astype(dtype)
        return _from_parts(dense, "row_sparse", ctx, problem)
    if isinstance(arg1, tuple):
        if shape is not None and _as_shape(shape) != _as_shape(arg1):
            raise SparseValueError("row_sparse_array: shape %s differs from the shape argument %s"
                             % (tuple(shape), tuple(arg1)))
        return zeros("row_sparse", arg1, ctx=ctx, dtype=dtype)
    dtype = _default_dtype(arg1, dtype)
    dense = _host(arg1).astype(dtype)
    if shape is not None and _as_shape(shape) != dense.shape:
        raise SparseValueError("row_sparse_array: shape %s does not match the source's %s"
                         % (tuple(shape), dense.shape))
    return _make(dense, "row_sparse", ctx if ctx is not None or not isinstance(arg1, NDArray)
                 else arg1.context)


def zeros(stype, shape, ctx=None, dtype=None, **kwargs):
    """An all-zero array of storage type ``stype`` ('default', 'row_sparse' or 'csr')."""
    if stype not in _nd.STYPES:
        raise SparseValueError("zeros: unknown storage type %r (expected one of %s)"
                         % (stype, _nd.STYPES))
    if stype == "csr" and len(_as_shape(shape)) != 2:
        raise SparseValueError("zeros('csr') needs a 2-D shape, got %s" % (shape,))
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


def _arith(same_shape_op, broadcast_op, scalar_op, rscalar_op, py_fn, doc):
    def fn(lhs, rhs):
        same = isinstance(lhs, NDArray) and isinstance(rhs, NDArray) and lhs.shape == rhs.shape
        return _nd._ufunc(lhs, rhs, same_shape_op if same else broadcast_op, scalar_op,
                          rscalar_op, py_fn)
    fn.__doc__ = doc
    return fn


add = _arith("elemwise_add", "broadcast_add", "_plus_scalar", "_plus_scalar",
             lambda a, b: a + b,
             "lhs + rhs: elemwise_add for equal shapes (csr + csr stays csr), else "
             "broadcast_add; a number on either side adds a scalar.")
subtract = _arith("elemwise_sub", "broadcast_sub", "_minus_scalar", "_rminus_scalar",
                  lambda a, b: a - b,
                  "lhs - rhs: elemwise_sub for equal shapes, else broadcast_sub.")
multiply = _arith("elemwise_mul", "broadcast_mul", "_mul_scalar", "_mul_scalar",
                  lambda a, b: a * b,
                  "lhs * rhs: elemwise_mul for equal shapes, else broadcast_mul (a csr array "
                  "times a dense row, column or scalar array stays csr).")
divide = _arith("elemwise_div", "broadcast_div", "_div_scalar", "_rdiv_scalar",
                lambda a, b: a / b,
                "lhs / rhs: elemwise_div for equal shapes, else broadcast_div (a csr array "
                "divided by a dense row, column or scalar array stays csr).")


__getattr__, __dir__ = _namespace_hooks(__name__, ("_sparse_", ""), _find_function)
