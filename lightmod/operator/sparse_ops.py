"""The sparse family: operators whose result depends on which entries a sparse input stores.

lightmod keeps sparse values dense, so "stored" means non-zero: a csr array stores its
non-zero elements, a row_sparse array its rows holding a non-zero. The storage types of the
inputs reach ``forward`` as ``state["in_stypes"]`` (set by ``nd`` calls and by the executor
from ``operator/storage.py``'s inference); with dense inputs these operators are the plain
element-wise ones.

* ``_sparse_retain(data, indices)`` (``nd.sparse.retain``): the rows of ``data`` listed in
  ``indices``, every other row zero. MXNet accepts only row_sparse data; lightmod also takes
  a dense array (the result is row_sparse either way).
* ``_scatter_plus_scalar``, ``_scatter_minus_scalar``, ``_scatter_elemwise_div``: the
  operation applied to the stored entries of a sparse left operand only; entries it does not
  store stay zero. Their gradient is the dense operation's, as in MXNet.

Everything is composed from kernels both kernel sets have (``where_forward``,
``take_backward``, ``reduce_axes``, the element-wise launchers); scratch arrays live in the
step's ``state`` so a bound executor allocates them once.
"""
from .common import zero_grads
from .elemwise import _Binary, _Scalar
from .reduce import R_NORM1
from .registry import Operator, register

__all__ = []


def _scratch(k, state, key, shape, dtype):
    """A work array kept in the step's state (reallocated only when shape or dtype change)."""
    buf = state.get(key)
    if buf is None or tuple(buf.shape) != tuple(shape) or buf.dtype != dtype:
        buf = state[key] = k.empty(tuple(shape), dtype)
    return buf


def _lhs_stype(state):
    stypes = state.get("in_stypes") if state else None
    return stypes[0] if stypes else "default"


def _stored_mask(k, state, x, stype):
    """(mask, inner): non-zero where a ``stype`` array ``x`` stores an entry, one mask value
    per ``inner`` consecutive elements (per element for csr, per row for row_sparse)."""
    if stype == "csr":
        mask = _scratch(k, state, "stored_mask", x.shape, x.dtype)
        k.elemwise_scalar("not_equal", x, 0.0, mask, False)
        return mask, 1
    rows = x.shape[0]
    inner = x.size // rows if rows else 1
    mask = _scratch(k, state, "stored_rows", (rows,), x.dtype)
    k.reduce_axes(mask, x, (rows, inner), (1,), R_NORM1, "write")
    return mask, inner


def _scatter(k, state, stype, lhs, dense_result, out):
    """out = dense_result where lhs stores an entry, else lhs (zero there)."""
    mask, inner = _stored_mask(k, state, lhs, stype)
    k.where_forward(out, mask, dense_result, lhs, inner)


class _ScatterScalar(_Scalar):
    def forward(self, p, k, inputs, outputs, is_train, state):
        stype = _lhs_stype(state)
        if stype == "default" or inputs[0].size == 0:
            return super().forward(p, k, inputs, outputs, is_train, state)
        x = inputs[0]
        result = _scratch(k, state, "scatter_result", x.shape, x.dtype)
        k.elemwise_scalar(self.fn, x, p.scalar, result, False)
        _scatter(k, state, stype, x, result, outputs[0])


@register
class ScatterPlusScalar(_ScatterScalar):
    name = "_scatter_plus_scalar"
    fn = "add"


@register
class ScatterMinusScalar(_ScatterScalar):
    name = "_scatter_minus_scalar"
    fn = "sub"


@register
class ScatterElemwiseDiv(_Binary):
    name = "_scatter_elemwise_div"
    fn = "div"

    def forward(self, p, k, inputs, outputs, is_train, state):
        lhs, rhs = inputs
        if _lhs_stype(state) != "row_sparse" or lhs.size == 0:
            return super().forward(p, k, inputs, outputs, is_train, state)
        result = _scratch(k, state, "scatter_result", lhs.shape, lhs.dtype)
        k.elemwise_binary("div", lhs, rhs, result)
        _scatter(k, state, "row_sparse", lhs, result, outputs[0])


@register
class SparseRetain(Operator):
    name = "_sparse_retain"
    inputs = ("data", "indices")

    def infer_shape(self, p, in_shapes):
        data, idx = in_shapes
        if data is not None and len(data) == 0:
            raise self.error("input 'data' needs at least one dimension")
        if idx is not None and len(idx) != 1:
            raise self.error("input 'indices' must be 1-D, got shape %s", idx)
        return [data, idx], [data]

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        return [in_shapes[0] if in_shapes[0] is not None else out_shapes[0], in_shapes[1]]

    def infer_type(self, p, in_types):
        data, idx = in_types
        return [data, idx if idx is not None else data], [data]

    def infer_storage_type(self, p, in_stypes):
        return ["row_sparse"]

    def _row_mask(self, k, state, data, idx):
        rows = data.shape[0]
        if not k.indices_in_range(idx, rows):
            raise self.error("input 'indices' holds row ids outside [0, %d)", rows)
        mask = _scratch(k, state, "kept_rows", (rows,), data.dtype)
        ones = _scratch(k, state, "ones", (idx.size,), data.dtype)
        k.fill(ones, 1)
        # the count of each row id in indices: non-zero marks a kept row
        k.take_backward(mask, ones, idx.reshape(idx.size), 1, rows, 1, False, "write")
        return mask, (data.size // rows if rows else 1)

    def forward(self, p, k, inputs, outputs, is_train, state):
        data, idx = inputs
        out = outputs[0]
        k.fill(out, 0)
        if data.size == 0:
            return
        mask, inner = self._row_mask(k, state, data, idx)
        k.where_forward(out, mask, data, out, inner)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        zero_grads(k, in_grads[1:], req[1:])
        grad = in_grads[0]
        if grad is None or req[0] == "null":
            return
        if out_grads[0] is None or grad.size == 0:
            return zero_grads(k, in_grads[:1], req[:1])
        mask, inner = self._row_mask(k, state, inputs[0], inputs[1])
        kept = _scratch(k, state, "kept_grad", grad.shape, grad.dtype)
        k.fill(kept, 0)
        k.where_forward(kept, mask, out_grads[0], kept, inner)
        k.assign(grad, kept, req[0])
