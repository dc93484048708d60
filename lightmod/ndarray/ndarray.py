"""NDArray: a numpy array (CPU) or a numba device array (GPU) plus the context it lives on.

This module holds the class, the creation functions (``array``, ``zeros``, ``arange`` ...) and
the Python-level arithmetic helpers (``add``, ``maximum``, ``equal`` ...). Computation that
corresponds to a registered operator goes through ``register.invoke`` so it runs on any device;
CPU-only memory management (creation, copies, indexing) uses numpy directly, and GPU memory goes
through the CUDA kernel set (``k.empty``, ``k.from_host``, ``k.copy`` ...).
"""
import ctypes
import numbers
import weakref

import numpy as np

from .. import engine, kernels
from ..base import MXNetError, NDArrayHandle, dtype_np, numeric_types
from ..context import Context, current_context
from ..operator import registry
from . import _format
from . import autograd as _autograd

__all__ = ["NDArray", "from_backend", "backend_array", "STYPES", "array", "empty", "zeros",
           "ones", "full", "arange", "moveaxis", "histogram", "waitall", "add", "subtract", "multiply",
           "divide", "true_divide", "modulo", "power", "maximum", "minimum", "equal",
           "not_equal", "greater", "greater_equal", "lesser", "lesser_equal", "logical_and",
           "logical_or", "logical_xor", "onehot_encode", "concatenate",
           "reshape_target_shape", "imperative_invoke"]

STYPES = ("default", "row_sparse", "csr")
py_slice = slice    # MXNet's module-level name for the built-in (code imports it from here)
mx_real_t = np.float32

# stype -> NDArray subclass (filled by sparse.py, which defines CSRNDArray/RowSparseNDArray)
_STYPE_CLASS = {}

# The arrays whose handle someone took (``ctypes.cast(arr, NDArrayHandle)``, MXNet's monitor
# idiom): handle value -> array, held weakly, so ``NDArray(handle)`` finds a live array or
# fails cleanly, never reads freed memory.
_HANDLES = weakref.WeakValueDictionary()


def _array_of_handle(handle):
    """The NDArray an NDArrayHandle (or its integer value) stands for."""
    value = handle.value if isinstance(handle, ctypes.c_void_p) else handle
    found = _HANDLES.get(value) if value else None
    if found is None:
        raise MXNetError("NDArray: handle %r does not belong to a live NDArray (lightmod hands "
                         "out handles only through ctypes.cast(array, NDArrayHandle))"
                         % (value,))
    return found


def _is_host(data):
    return isinstance(data, np.ndarray)


def _device_kernels(ctx):
    """The kernel set of a context (raises the MXNetError saying why CUDA is unusable)."""
    return kernels.for_context(ctx)


def _as_ctx(ctx):
    if ctx is None:
        return current_context()
    if isinstance(ctx, Context):
        return ctx
    if isinstance(ctx, str):
        name, _, rest = ctx.partition("(")
        return Context(name.strip(), int(rest.rstrip(")") or 0))
    raise MXNetError("expected a Context, got %r" % (ctx,))


def _as_shape(shape):
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    if isinstance(shape, (str, bytes)) or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool)
            for d in (shape if hasattr(shape, "__iter__") else [None])):
        raise MXNetError("expected a shape (int or tuple of int), got %r" % (shape,))
    return tuple(int(d) for d in shape)


def _alloc(shape, dtype, ctx, fill=None):
    """A fresh backend buffer of shape/dtype on ctx, filled with `fill` unless None."""
    if any(d < 0 for d in shape):
        raise MXNetError("shape %s has a negative dimension" % (shape,))
    dtype = np.dtype(dtype)
    if ctx.device_typeid == 2:
        k = _device_kernels(ctx)
        if fill is None:
            return k.empty(shape, dtype)
        return k.full(shape, fill, dtype)
    if fill is None:
        return np.empty(shape, dtype=dtype)
    if fill == 0:
        return np.zeros(shape, dtype=dtype)
    return np.full(shape, fill, dtype=dtype)


def _to_ctx_buffer(host, ctx):
    """Put a numpy array onto ctx as a fresh backend buffer (a copy)."""
    if ctx.device_typeid == 2:
        return _device_kernels(ctx).from_host(np.asarray(host, order="C"))
    return np.array(host, copy=True, order="C")


def _new(data, ctx, stype="default"):
    return NDArray(data, ctx, stype)


def _scalar_attr(value):
    return float(value)


class NDArray:
    """An n-dimensional array on a device.

    ``_data`` is the backend array: a numpy ndarray on CPU contexts, a numba
    ``DeviceNDArray`` on GPU contexts. Views (``a[1:3]``, ``reshape``) share memory with their
    base, as in MXNet. ``_stype`` is the storage type MXNet would report; lightmod stores
    row_sparse and csr arrays densely and keeps their sparse *semantics* where MXNet code
    observes them (``stype``, ``tostype``, ``indices``/``indptr``/``data``, file format).
    ``_error`` is the :class:`lightmod.engine.PendingError` of a failed operation whose
    result this array holds (None when there is none): reading the array reports it.
    """
    __slots__ = ("_data", "_ctx", "_stype", "writable", "_error", "_autograd", "__weakref__")
    # numpy must defer to our operators in mixed expressions (np_array + nd_array).
    __array_priority__ = 1000.0

    def __new__(cls, data=None, ctx=None, stype="default", writable=True):
        if isinstance(data, NDArrayHandle):
            stype = _array_of_handle(data)._stype
        if cls is NDArray and stype != "default" and stype in _STYPE_CLASS:
            cls = _STYPE_CLASS[stype]
        return object.__new__(cls)

    def __init__(self, data, ctx=None, stype="default", writable=True):
        source = None
        if isinstance(data, NDArrayHandle):
            # MXNet's NDArray(handle): a second NDArray on the same memory
            source = _array_of_handle(data)
            data, ctx, stype = source._data, source._ctx, source._stype
        self._data = data
        self._ctx = ctx if ctx is not None else current_context()
        if stype not in STYPES:
            raise MXNetError("unknown storage type %r (expected one of %s)" % (stype, STYPES))
        self._stype = stype
        self.writable = writable
        self._error = None if source is None else source._error
        self._autograd = None   # its tape entry, when autograd records it (ndarray/autograd.py)

    @property
    def _as_parameter_(self):
        """What ctypes passes for this array (``ctypes.cast(arr, NDArrayHandle)``): a handle
        that ``NDArray(handle)`` turns back into an array on the same memory."""
        _HANDLES[id(self)] = self
        return id(self)

    # --- DLPack ------------------------------------------------------------------------------
    def to_dlpack_for_read(self):
        """A DLPack capsule ('dltensor') on this array's memory, for a reader (lightmod runs
        every operation before it returns, so nothing is pending)."""
        return self._dlpack()

    def to_dlpack_for_write(self):
        """A DLPack capsule ('dltensor') on this array's memory, for a writer."""
        return self._dlpack()

    def _dlpack(self):
        if not _is_host(self._data):
            raise MXNetError("to_dlpack: only CPU arrays can be shared through DLPack in "
                             "lightmod (this one is on %s); copy it to mx.cpu() first"
                             % self._ctx)
        if self._stype != "default":
            raise MXNetError("to_dlpack: a %s array has no dense DLPack form; convert it "
                             "with tostype('default') first" % self._stype)
        return self._data.__dlpack__()

    @staticmethod
    def _basic_indexing_slice_is_contiguous(slices, shape):
        """Whether indexing an array of ``shape`` with ``slices`` (one slice per axis) gives
        a C-contiguous block: at most one element, or, reading the axes from the last, every
        axis that keeps several elements steps by 1 and lies left of no axis that was cut
        short."""
        if len(slices) != len(shape):
            raise ValueError("need one slice per axis: %d slices for shape %s"
                             % (len(slices), tuple(shape)))
        picked = [slc.indices(n) for slc, n in zip(slices, shape)]
        lengths = [len(range(*p)) for p in picked]
        if int(np.prod(lengths, dtype=np.int64)) <= 1:
            return True
        cut = False
        for (_, _, step), length, n in zip(reversed(picked), reversed(lengths),
                                           reversed(shape)):
            if length > 1 and (step != 1 or cut):
                return False
            cut = cut or length < n
        return True

    # --- properties ---------------------------------------------------------------------------
    @property
    def shape(self):
        return tuple(self._data.shape)

    @property
    def dtype(self):
        return np.dtype(self._data.dtype).type

    @property
    def size(self):
        return int(np.prod(self._data.shape, dtype=np.int64))

    @property
    def ndim(self):
        return len(self._data.shape)

    context = ctx = property(lambda self: self._ctx, doc="The Context holding the array.")
    stype = property(lambda self: self._stype,
                     doc="Storage type: 'default', 'row_sparse' or 'csr'.")
    handle = property(lambda self: self._data,
                      doc="The backing buffer (a numpy array, or a device array on a GPU).")

    @property
    def T(self):
        """The array with its axes reversed (1-d arrays are returned as they are)."""
        if self.ndim < 2:
            return self
        if _is_host(self._data):
            return _carry(NDArray(np.ascontiguousarray(self._data.T), self._ctx), self,
                          lambda g: g.T)
        return self.transpose()

    # --- host transfer ------------------------------------------------------------------------
    def asnumpy(self):
        """A numpy copy of the contents (always a copy, as in MXNet)."""
        if self._error is not None:
            engine.report(self._error)
        if _is_host(self._data):
            return self._data.copy()
        return self._data.copy_to_host()

    def _host_view(self):
        """The contents as a numpy array without copying when on the CPU (internal)."""
        if self._error is not None:
            engine.report(self._error)
        if _is_host(self._data):
            return self._data
        return self._data.copy_to_host()

    def asscalar(self):
        if self.size != 1:
            raise ValueError("The current array is not a scalar")
        return self._host_view().reshape(-1)[0]

    def tolist(self):
        return self.asnumpy().tolist()

    def wait_to_read(self):
        if self._error is not None:
            engine.report(self._error)
        if not _is_host(self._data):
            from numba import cuda
            cuda.synchronize()

    def wait_to_write(self):
        self.wait_to_read()

    def __repr__(self):
        shape_info = "x".join(str(d) for d in self.shape)
        return "\n%s\n<%s %s @%s>" % (str(self.asnumpy()), type(self).__name__, shape_info,
                                      self._ctx)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __bool__(self):
        if self.size == 0:
            return False
        if self.size == 1:
            return bool(self.asscalar())
        raise ValueError("The truth value of an NDArray with multiple elements is ambiguous.")

    __nonzero__ = __bool__

    def __float__(self):
        return float(self.asscalar())

    def __int__(self):
        return int(self.asscalar())

    def __index__(self):
        if self.size != 1 or not np.issubdtype(self.dtype, np.integer):
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        return int(self.asscalar())

    def __array__(self, dtype=None, copy=None):
        arr = self._host_view()
        return arr.astype(dtype) if dtype is not None else arr

    def __hash__(self):
        return id(self)

    # --- pickling (the single-array record of the .params format) ------------------------------
    def __getstate__(self):
        return {"handle": bytearray(_format.encode_record(self))}

    def __setstate__(self, state):
        handle = state["handle"] if isinstance(state, dict) else state
        decoded = None if handle is None else _format.decode_record(
            _format.Reader(bytes(handle), "<pickled NDArray>"))
        host, ctx, stype = decoded or (np.empty((0,), dtype=np.float32), Context("cpu", 0),
                                       "default")
        self._data, self._ctx, self._stype = _to_ctx_buffer(host, ctx), ctx, stype
        self.writable = True
        self._error = None

    def __deepcopy__(self, memo):
        # what a pickle round trip gives (the same values, context and storage type), without
        # serialising the values to bytes and back
        return self.copy()

    # --- copies and contexts ------------------------------------------------------------------
    def copy(self):
        """A deep copy on the same context."""
        return self.copyto(self._ctx)

    def copyto(self, other):
        """Copy into an NDArray (shapes must match; dtype is converted) or onto a Context."""
        if isinstance(other, NDArray):
            if other is self:
                return other
            if other.shape != self.shape:
                raise MXNetError("copyto: shape mismatch: source %s, target %s"
                                 % (self.shape, other.shape))
            if not other.writable:
                raise ValueError("copyto: the target NDArray is read-only")
            _copy_into(other, self)
            other._error = self._error
            return _autograd.record_view(other, self, lambda g: g)
        if isinstance(other, Context):
            if _is_host(self._data) and other.device_typeid != 2:
                data = self._data.copy()
            elif other.device_typeid == 2 and not _is_host(self._data) and other == self._ctx:
                k = _device_kernels(other)
                data = k.empty(self.shape, self._data.dtype)
                k.copy(data, self._data)
            else:
                data = _to_ctx_buffer(_raw_host(self), other)
            source_ctx = self._ctx
            return _carry(NDArray(data, other, self._stype), self,
                          lambda g: g.as_in_context(source_ctx))
        raise TypeError("copyto does not support type %s" % type(other))

    def as_in_context(self, context):
        if self._ctx == context:
            return self
        return self.copyto(context)

    as_in_ctx = as_in_context

    def astype(self, dtype, copy=True):
        dtype = dtype_np(dtype)
        if not copy and dtype == np.dtype(self._data.dtype):
            return self
        source_dtype = self._data.dtype

        def gradient(g):
            return g.astype(source_dtype)
        if _is_host(self._data):
            return _carry(NDArray(self._data.astype(dtype), self._ctx, self._stype), self,
                          gradient)
        k = _device_kernels(self._ctx)
        data = k.empty(self.shape, dtype)
        k.copy(data, self._data)
        return _carry(NDArray(data, self._ctx, self._stype), self, gradient)

    # --- autograd (ndarray/autograd.py) -------------------------------------------------------
    def attach_grad(self, grad_req="write", stype=None):
        """Mark this array as a variable for autograd, with a zero gradient array of its shape
        (storage ``stype``) that ``backward`` fills as ``grad_req`` says."""
        grad = zeros(self.shape, ctx=self._ctx, dtype=self._data.dtype,
                     stype=stype if stype is not None else "default")
        _autograd.mark_variables([self], [grad], grad_req)

    @property
    def grad(self):
        """The gradient array attached by ``attach_grad`` / ``mark_variables``, or None."""
        entry = getattr(self, "_autograd", None)
        return entry.grad if isinstance(entry, _autograd.Variable) else None

    def backward(self, out_grad=None, retain_graph=False, train_mode=True):
        """Back-propagate from this array (its gradient ``out_grad``, ones by default) into
        the gradients of the variables it was computed from while recording."""
        _autograd.backward([self], None if out_grad is None else [out_grad],
                           retain_graph=retain_graph, train_mode=train_mode)

    def detach(self):
        """The same memory without its autograd history: nothing computed from it is
        differentiated back through it."""
        out = NDArray(self._data, self._ctx, self._stype, self.writable)
        out._error = self._error
        return out

    def tostype(self, stype):
        """A copy with the given storage type (the data stays dense in lightmod)."""
        if stype not in STYPES:
            raise MXNetError("tostype: unknown storage type %r" % (stype,))
        if stype == "csr" and self.ndim != 2:
            raise ValueError("To convert to a CSR, the NDArray should be 2 Dimensional. "
                             "Current shape is %s" % (self.shape,))
        if stype == "row_sparse" and self.ndim < 1:
            raise ValueError("To convert to row_sparse, the NDArray needs at least 1 dim")
        out = self.copy()
        return _carry(NDArray(out._data, out._ctx, stype), self, lambda g: g)

    def wait_to_read_all(self):
        waitall()

    # --- shape manipulation -------------------------------------------------------------------
    def reshape(self, *shape, **kwargs):
        """A view with a new shape; MXNet's codes 0, -1, -2, -3, -4 and ``reverse`` apply."""
        if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
            shape = shape[0]
        elif not shape:
            shape = kwargs.pop("shape", None)
            if shape is None:
                raise TypeError("reshape() needs a shape")
        reverse = kwargs.pop("reverse", False)
        if kwargs:
            raise TypeError("reshape() got unexpected keyword arguments %s" % sorted(kwargs))
        new_shape = reshape_target_shape(self.shape, _as_shape(shape), reverse)
        if _is_host(self._data):
            data = self._data.reshape(new_shape)
        else:
            data = self._data.reshape(*new_shape) if new_shape else self._data.reshape(1)
        source_shape = self.shape
        return _carry(NDArray(data, self._ctx, self._stype, self.writable), self,
                      lambda g: g.reshape(source_shape))

    def reshape_like(self, *args, **kwargs):
        return _op("reshape_like", self, *args, **kwargs)

    def flatten(self, inplace=False):
        """(N, ...) -> (N, rest); ``inplace``: a view sharing this array's memory."""
        return self._reshaping("Flatten", inplace)

    def expand_dims(self, axis, inplace=False):
        """A new size-1 axis at ``axis``; ``inplace``: a view sharing this array's memory."""
        return self._reshaping("expand_dims", inplace, axis=axis)

    def squeeze(self, axis=None, inplace=False):
        """Size-1 axes removed; ``inplace``: a view sharing this array's memory."""
        return self._reshaping("squeeze", inplace, axis=axis)

    def _reshaping(self, op_name, inplace, **attrs):
        """An operator that only changes the shape: its result, or with ``inplace`` a view of
        this array in the shape the operator infers."""
        if not inplace:
            return _op(op_name, self, **attrs)
        op = registry.get(op_name)
        _, out_shapes = op.infer_shape(op.parse(attrs), [self.shape])
        return self.reshape(out_shapes[0])

    def broadcast_to(self, shape):
        shape = _as_shape(shape)
        cur = (1,) * (len(shape) - self.ndim) + self.shape
        if cur != self.shape:
            return self.reshape(cur).broadcast_to(shape)
        return _op("broadcast_to", self, shape=shape)

    def zeros_like(self, *args, **kwargs):
        return _op("zeros_like", self, *args, **kwargs)

    def ones_like(self, *args, **kwargs):
        return _op("ones_like", self, *args, **kwargs)

    # --- indexing -----------------------------------------------------------------------------
    def __getitem__(self, key):
        # a view or gather of an array whose computation failed carries the same failure
        return _carry(self._index(key), self, lambda g: self._index_gradient(key, g))

    def _index_gradient(self, key, out_grad):
        """The gradient of ``self[key]`` given the result's (autograd)."""
        if _is_advanced_key(key):
            return _autograd.scatter_gradient(self, None, out_grad, _host_key(key))
        return _autograd.scatter_gradient(self, _basic_key(key, self.shape), out_grad)

    def _index(self, key):
        if _is_advanced_key(key):
            host = _raw_host(self)[_host_key(key)]
            if host.ndim == 0:
                host = host.reshape(1)
            return NDArray(_to_ctx_buffer(host, self._ctx), self._ctx)
        key = _basic_key(key, self.shape)
        if _is_host(self._data):
            view = self._data[key]
            if view.ndim == 0:
                view = view.reshape(1)
            if not view.flags.c_contiguous:
                return NDArray(np.ascontiguousarray(view), self._ctx)
            return NDArray(view, self._ctx, "default", self.writable)
        region = _device_region(self._data, key)
        if region is None:
            host = self._data.copy_to_host()[key]
            if host.ndim == 0:
                host = host.reshape(1)
            return NDArray(_to_ctx_buffer(host, self._ctx), self._ctx)
        return NDArray(region, self._ctx, "default", self.writable)

    def __setitem__(self, key, value):
        if not self.writable:
            raise ValueError("Cannot assign to a read-only NDArray")
        if isinstance(value, NDArray) and value._error is not None:
            self._error = value._error
        if _autograd.takes_part([value, self]):
            if not (isinstance(value, NDArray) and _whole_key(key)):
                raise MXNetError(_autograd.INPLACE % "x[key] = value")
            # the whole array replaced (x[:] = v, x[...] = v): a recorded copy of v
            _autograd.check_writes([value], [self], "x[:] = value")
            self._assign(key, value)
            value_shape = value.shape
            return _autograd.record_view(self, value,
                                         lambda g: _autograd.sum_to_shape(g, value_shape))
        self._assign(key, value)

    def _assign(self, key, value):
        if _is_host(self._data):
            if isinstance(value, NDArray):
                value = _raw_host(value)
            target = _host_key(key) if _is_advanced_key(key) else _basic_key(key, self.shape)
            if isinstance(value, (list, tuple, np.ndarray)) and np.size(value) == 1 \
                    and np.ndim(value) > 0 and np.ndim(self._data[target]) == 0:
                # one value given as a sequence for one element (MXNet broadcasts it)
                value = np.asarray(value).reshape(())
            self._data[target] = value
            return
        if not _is_advanced_key(key):
            region = _device_region(self._data, _basic_key(key, self.shape))
            if region is not None:
                _fill_device(region, value, self._ctx)
                return
        host = self._data.copy_to_host()
        host[_host_key(key) if _is_advanced_key(key) else _basic_key(key, self.shape)] = \
            _raw_host(value) if isinstance(value, NDArray) else value
        self._data.copy_to_device(host)

    def _slice(self, start, stop):
        return self[start:stop]

    def _at(self, idx):
        return self[idx]

    # --- arithmetic: the binary and in-place operators are attached below the module's
    # arithmetic functions (see _BINARY_OPERATORS); the unary ones are here
    def __neg__(self):
        return _op("_mul_scalar", self, scalar=-1.0)

    def __pos__(self):
        return self

    def __abs__(self):
        return _op("abs", self)

    def _inplace(self, other, what, op_array, op_scalar):
        if not self.writable:
            raise ValueError("trying to %s to a readonly NDArray" % what)
        if isinstance(other, NDArray):
            return _op(op_array, self, other, out=self)
        if isinstance(other, np.ndarray):
            return _op(op_array, self, array(other, self._ctx, self.dtype), out=self)
        if isinstance(other, numeric_types):
            return _op(op_scalar, self, scalar=_scalar_attr(other), out=self)
        raise TypeError("type %s not supported" % str(type(other)))

    # --- misc ---------------------------------------------------------------------------------
    def norm(self, *args, **kwargs):
        return _op("norm", self, *args, **kwargs)


def _whole_key(key):
    """Whether indexing with ``key`` selects the whole array (``:``, ``...``, None, or a tuple
    of them)."""
    keys = key if isinstance(key, tuple) else (key,)
    return all(k is Ellipsis or k is None or (isinstance(k, slice) and k == slice(None))
               for k in keys)


def _carry(out, src, gradient_of=None):
    """``out`` (computed from ``src``) carries ``src``'s pending failure, if any, and, while
    autograd records ``src``, a tape entry whose gradient ``gradient_of(out_grad)`` gives."""
    if src._error is not None:
        out._error = src._error
    if gradient_of is not None and getattr(src, "_autograd", None) is not None:
        _autograd.record_view(out, src, gradient_of)
    return out


def _raw_host(arr):
    """The contents on the host, without reporting a pending failure (internal copies)."""
    if _is_host(arr._data):
        return arr._data
    return arr._data.copy_to_host()


def _method(op_name, doc=None):
    def method(self, *args, **kwargs):
        return _op(op_name, self, *args, **kwargs)
    method.__name__ = op_name
    method.__doc__ = doc or "Same as ``nd.%s(self, *args, **kwargs)``." % op_name
    return method


# Methods that are thin wrappers of registered operators (MXNet's NDArray does the same).
_OP_METHODS = {
    "sum": "sum", "nansum": "nansum", "prod": "prod", "nanprod": "nanprod", "mean": "mean",
    "max": "max", "min": "min", "argmax": "argmax", "argmin": "argmin",
    "argmax_channel": "argmax_channel", "clip": "clip", "exp": "exp", "expm1": "expm1",
    "log": "log", "log1p": "log1p", "log2": "log2", "log10": "log10", "sqrt": "sqrt",
    "rsqrt": "rsqrt", "cbrt": "cbrt", "square": "square", "abs": "abs", "sign": "sign",
    "round": "round", "rint": "rint", "fix": "fix", "floor": "floor", "ceil": "ceil",
    "trunc": "trunc", "sin": "sin", "cos": "cos", "tan": "tan", "reciprocal": "reciprocal",
    "relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "softmax": "softmax",
    "log_softmax": "log_softmax",
    "transpose": "transpose", "swapaxes": "SwapAxis", "tile": "tile", "repeat": "repeat",
    "pad": "pad", "flip": "flip", "slice": "slice", "slice_axis": "slice_axis",
    "slice_like": "slice_like", "take": "take", "one_hot": "one_hot", "pick": "pick",
    "topk": "topk", "sort": "sort", "argsort": "argsort", "split": "SliceChannel",
    "diag": "diag", "broadcast_like": "broadcast_like", "broadcast_axes": "broadcast_axes",
    "depth_to_space": "depth_to_space", "space_to_depth": "space_to_depth",
    "shape_array": "shape_array", "size_array": "size_array",
}
for _meth, _opname in _OP_METHODS.items():
    setattr(NDArray, _meth, _method(_opname))
del _meth, _opname

# more operators MXNet's NDArray offers as methods under their own names
for _meth in ("degrees", "radians", "arcsin", "arccos", "arctan", "sinh", "cosh", "arcsinh",
              "arccosh", "arctanh", "rcbrt", "softmin", "split_v2"):
    setattr(NDArray, _meth, _method(_meth))
del _meth


# Functions this module calls but does not own: ``op_function`` (the generated ``nd.<op>``
# functions) and ``invoke`` (run one operator on NDArrays), installed by ndarray/register.py
# when it is imported (the package imports it). They build on NDArray, so this module cannot
# import them without an import circle.
_HOOKS = {}
_OP_FUNCTIONS = {}


def install_hooks(**functions):
    """Install the functions NDArray's methods call: ``op_function`` and ``invoke``."""
    _HOOKS.update(functions)


def _op(name, *args, **kwargs):
    """Call the generated nd function of a registered operator."""
    fn = _OP_FUNCTIONS.get(name)
    if fn is None:
        fn = _OP_FUNCTIONS[name] = _HOOKS["op_function"](name)
    return fn(*args, **kwargs)


def imperative_invoke(name, inputs, attrs, out=None):
    return _HOOKS["invoke"](name, inputs, attrs, out=out)


# ---------------------------------------------------------------------------------------------
# indexing helpers
# ---------------------------------------------------------------------------------------------
def _is_array_like(x):
    return isinstance(x, (NDArray, np.ndarray, list, range))


def _is_advanced_key(key):
    if _is_array_like(key):
        return True
    return isinstance(key, tuple) and any(_is_array_like(k) for k in key)


def _host_key(key):
    """Turn NDArray / list indices into int64 numpy indices (MXNet truncates float indices)."""
    def conv(k):
        if isinstance(k, NDArray):
            k = k._host_view()
        if isinstance(k, (list, range)):
            k = np.asarray(k)
        if isinstance(k, np.ndarray) and k.dtype != np.bool_:
            k = k.astype(np.int64)
        return k
    if isinstance(key, tuple):
        return tuple(conv(k) for k in key)
    return conv(key)


def _basic_key(key, shape):
    """Normalise a basic index to a tuple ending in Ellipsis; check integer bounds."""
    if not isinstance(key, tuple):
        key = (key,)
    axis = 0
    out = []
    for k in key:
        if k is Ellipsis:
            # dims consumed after the Ellipsis count from the end
            after = sum(1 for x in key[len(out) + 1:] if x is not None)
            axis = len(shape) - after
            out.append(k)
            continue
        if isinstance(k, (bool, np.bool_)):
            raise IndexError("boolean scalars are not supported as indices")
        if isinstance(k, (numbers.Integral, np.integer)):
            if axis >= len(shape):
                raise IndexError("too many indices for an array of shape %s" % (shape,))
            n = shape[axis]
            if not -n <= int(k) < n:
                raise IndexError("index %d is out of bounds for axis %d with size %d"
                                 % (k, axis, n))
            out.append(int(k))
            axis += 1
        elif isinstance(k, slice) or k is None:
            out.append(k)
            if k is not None:
                axis += 1
        else:
            raise IndexError("NDArray does not support indexing with %s" % type(k))
    if Ellipsis not in out:
        out.append(Ellipsis)
    return tuple(out)


def _device_region(dev, key):
    """A device view of dev[key] when that region is C-contiguous, else None."""
    itemsize = np.dtype(dev.dtype).itemsize
    shape = tuple(dev.shape)
    strides = []
    acc = itemsize
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    probe_base = np.zeros(1, dtype=dev.dtype)
    probe = np.lib.stride_tricks.as_strided(probe_base, shape=shape, strides=tuple(reversed(strides)))
    view = probe[key]
    if view.ndim == 0:
        view = view.reshape(1)
    if not view.flags.c_contiguous:
        return None
    offset = (view.__array_interface__["data"][0] - probe_base.__array_interface__["data"][0])
    start = offset // itemsize
    flat = dev.reshape(dev.size) if dev.ndim != 1 else dev
    region = flat[start:start + view.size]
    return region.reshape(*view.shape) if view.shape != (view.size,) else region


def _fill_device(region, value, ctx):
    k = _device_kernels(ctx)
    if isinstance(value, numeric_types):
        k.fill(region, value)
    elif isinstance(value, NDArray) and not _is_host(value._data):
        k.copy(region, value._data)
    else:
        host = value._host_view() if isinstance(value, NDArray) else np.asarray(value)
        k.copy(region, np.broadcast_to(host, tuple(region.shape)))


def _copy_into(dst, src):
    """dst[...] = src for NDArrays of equal shape on any contexts (dtype converted)."""
    if _is_host(dst._data):
        np.copyto(dst._data, _raw_host(src), casting="unsafe")
    else:
        k = _device_kernels(dst._ctx)
        source = src._data
        if src._ctx != dst._ctx and not _is_host(source) and np.dtype(source.dtype) != np.dtype(dst.dtype):
            # a casting copy runs a kernel on dst's GPU: bring the source over unchanged first
            staged = k.empty(tuple(source.shape), source.dtype)
            k.copy(staged, source)
            source = staged
        k.copy(dst._data, source)


# ---------------------------------------------------------------------------------------------
# reshape codes
# ---------------------------------------------------------------------------------------------
def reshape_target_shape(src, target, reverse=False):
    """The shape MXNet's Reshape gives ``src`` for ``target`` with the special codes:
    0 copy this dim, -1 infer, -2 copy the remaining dims, -3 merge two dims, -4 split one
    dim into the next two values (one may be -1). ``reverse`` matches from the right.
    Malformed codes raise MXNetError; a size mismatch raises ValueError (as MXNet does)."""
    src, target = tuple(src), tuple(target)
    if reverse:
        return tuple(reversed(reshape_target_shape(tuple(reversed(src)),
                                                   _reverse_codes(target))))
    size = 1
    for d in src:
        size *= d
    out, si, infer_at, i = [], 0, -1, 0

    def bad(msg):
        return MXNetError("Reshape: cannot reshape array of shape %s into %s: %s"
                          % (src, target, msg))
    while i < len(target):
        p = target[i]
        if p == 0:
            if si >= len(src):
                raise bad("code 0 has no matching input dim")
            out.append(src[si])
            si += 1
        elif p == -1:
            if infer_at >= 0:
                raise bad("only one dim may be -1")
            infer_at = len(out)
            out.append(1)
            si += 1
        elif p == -2:
            out.extend(src[si:])
            si = len(src)
        elif p == -3:
            if si + 1 >= len(src):
                raise bad("code -3 needs two input dims")
            out.append(src[si] * src[si + 1])
            si += 2
        elif p == -4:
            if si >= len(src) or i + 2 >= len(target):
                raise bad("code -4 needs an input dim and two values")
            d0, d1, d2 = src[si], target[i + 1], target[i + 2]
            if d1 == -1 and d2 == -1:
                raise bad("code -4 allows one -1")
            if d1 == -1:
                d1 = d0 // d2 if d2 else 0
            if d2 == -1:
                d2 = d0 // d1 if d1 else 0
            if d1 * d2 != d0:
                raise bad("split of %d into %d x %d" % (d0, d1, d2))
            out.extend([d1, d2])
            si += 1
            i += 2
        elif p > 0:
            out.append(p)
            si += 1
        else:
            raise bad("invalid code %d" % p)
        i += 1
    if infer_at >= 0:
        rest = 1
        for j, d in enumerate(out):
            if j != infer_at:
                rest *= d
        if rest == 0 or size % rest:
            raise ValueError("Cannot reshape array of size %d into shape %s" % (size, target))
        out[infer_at] = size // rest
    total = 1
    for d in out:
        total *= d
    if total != size:
        # MXNet raises a plain ValueError here (and MXNetError for malformed codes)
        raise ValueError("Cannot reshape array of size %d into shape %s" % (size, target))
    return tuple(out)


def _reverse_codes(target):
    # -4 takes the two following values; reversing keeps each group's code before its values
    groups, i = [], 0
    while i < len(target):
        if target[i] == -4:
            groups.append((-4, target[i + 2], target[i + 1]))
            i += 3
        else:
            groups.append((target[i],))
            i += 1
    return tuple(x for g in reversed(groups) for x in g)


# ---------------------------------------------------------------------------------------------
# creation
# ---------------------------------------------------------------------------------------------
def from_backend(data, ctx=None, stype="default"):
    """Wrap a backend array (numpy / device array) without copying."""
    return NDArray(data, ctx if ctx is not None else Context("cpu", 0), stype)


def backend_array(x):
    """The backend array behind an NDArray (or a numpy array passed through)."""
    return x._data if isinstance(x, NDArray) else x


def array(source_array, ctx=None, dtype=None):
    """An NDArray holding a copy of ``source_array`` (NDArray, numpy array or nested lists).

    Like MXNet, the dtype defaults to the source NDArray's dtype, and to float32 for anything
    else (a float64 or int numpy array becomes float32 unless ``dtype`` is given)."""
    ctx = _as_ctx(ctx)
    if isinstance(source_array, NDArray):
        dtype = source_array.dtype if dtype is None else dtype
        if source_array.stype != "default":
            out = source_array.astype(dtype).as_in_context(ctx)
            return out.copy() if out is source_array else out
        host = source_array._host_view()
    elif hasattr(source_array, "indptr") and hasattr(source_array, "tocsr"):
        # a scipy.sparse matrix: a csr array (stored densely, as every csr array is)
        dense = source_array.toarray()
        host = dense.astype(dtype_np(dtype) if dtype is not None else dense.dtype)
        return NDArray(_to_ctx_buffer(host, ctx), ctx, "csr")
    else:
        dtype = mx_real_t if dtype is None else dtype
        try:
            host = np.asarray(source_array, dtype=dtype_np(dtype))
        except (TypeError, ValueError):
            raise TypeError("source_array must be array like object (numbers, equal-length nested "
                            "lists, numpy arrays), got %s" % type(source_array).__name__) from None
    # a 0-d source keeps its shape () as in MXNet (nd.array(np.ones([])).shape == ())
    host = np.asarray(host, dtype=dtype_np(dtype))
    return NDArray(_to_ctx_buffer(host, ctx), ctx)


def empty(shape, ctx=None, dtype=None, stype=None):
    ctx = _as_ctx(ctx)
    shape = _as_shape(shape)
    # an empty sparse array stores nothing: all of it reads as zero
    fill = None if stype in (None, "default") else 0
    return NDArray(_alloc(shape, dtype_np(dtype), ctx, fill), ctx, stype or "default")


def zeros(shape, ctx=None, dtype=None, stype=None, **kwargs):
    out = kwargs.pop("out", None)
    if out is not None:         # fill the given array, as the operator behind MXNet's does
        out[:] = 0
        return out
    ctx = _as_ctx(ctx)
    return NDArray(_alloc(_as_shape(shape), dtype_np(dtype), ctx, 0), ctx, stype or "default")


def ones(shape, ctx=None, dtype=None, **kwargs):
    out = kwargs.pop("out", None)
    if out is not None:
        out[:] = 1
        return out
    ctx = _as_ctx(ctx)
    return NDArray(_alloc(_as_shape(shape), dtype_np(dtype), ctx, 1), ctx)


def full(shape, val, ctx=None, dtype=mx_real_t, out=None):
    if out is not None:
        out[:] = val
        return out
    ctx = _as_ctx(ctx)
    return NDArray(_alloc(_as_shape(shape), dtype_np(dtype), ctx, val), ctx)


def arange(start, stop=None, step=1.0, repeat=1, infer_range=None, ctx=None, dtype=mx_real_t):
    """Evenly spaced values in [start, stop) (the ``_arange`` operator), each ``repeat``ed."""
    return _op("_arange", start=start, stop=stop, step=step, repeat=repeat,
               infer_range=bool(infer_range), ctx=_as_ctx(ctx), dtype=dtype)


def _axis_list(axes, ndim, what):
    """``axes`` (an int or a sequence of ints) as a list of axes in [0, ndim); ValueError names
    the argument when one is out of range or repeated."""
    listed = [axes] if isinstance(axes, (int, np.integer)) else list(axes)
    out = []
    for a in listed:
        if not -ndim <= a < ndim:
            raise ValueError("moveaxis: %s axis %d is out of range for an array with %d dims"
                             % (what, a, ndim))
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise ValueError("moveaxis: repeated axis in %s %s" % (what, axes))
    return out


def moveaxis(tensor, source, destination):
    """The array with the axes ``source`` moved to positions ``destination`` (ints or
    sequences of ints, as numpy's moveaxis); the other axes keep their order."""
    src = _axis_list(source, tensor.ndim, "source")
    dst = _axis_list(destination, tensor.ndim, "destination")
    if len(src) != len(dst):
        raise ValueError("moveaxis: source %s and destination %s must have the same number of "
                         "elements" % (source, destination))
    order = [a for a in range(tensor.ndim) if a not in src]
    for d, a in sorted(zip(dst, src)):
        order.insert(d, a)
    return _op("transpose", tensor, axes=tuple(order))


def histogram(a, bins=10, range=None):  # noqa: A002 (MXNet's argument name)
    """(counts, bin edges) of the flattened ``a``: ``bins`` equal bins over ``range``, or the
    bins between the edges in the NDArray ``bins``. Without a range the counts come from
    numpy over the data's own range, as MXNet does."""
    if isinstance(bins, NDArray):
        return _op("_histogram", a, bins)
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, bool):
        if range is None:
            counts, edges = np.histogram(a.asnumpy(), bins=int(bins))
            return array(counts, ctx=a.context, dtype=counts.dtype), \
                array(edges, ctx=a.context, dtype=a.dtype)
        return _op("_histogram", a, bin_cnt=int(bins), range=range)
    raise ValueError("bins argument should be either an integer or an NDArray")


def concatenate(arrays, axis=0, always_copy=True):
    """Join arrays along ``axis`` (deprecated in MXNet in favour of concat)."""
    if not arrays:
        raise MXNetError("concatenate needs at least one array")
    if not always_copy and len(arrays) == 1:
        return arrays[0]
    ctx = arrays[0].context
    host = np.concatenate([a._host_view() for a in arrays], axis=axis)
    return NDArray(_to_ctx_buffer(host, ctx), ctx)


def onehot_encode(indices, out):
    """Write one-hot rows of ``indices`` into ``out`` (shape (n, depth))."""
    host = np.zeros(out.shape, dtype=out.dtype)
    idx = indices._host_view().astype(np.int64)
    host[np.arange(idx.size), idx.reshape(-1)] = 1
    out[:] = host
    return out


def waitall():
    """Wait for every pending computation (CUDA work is asynchronous), then raise the oldest
    operator failure not reported yet (and forget the others), as MXNet does."""
    # only once a GPU kernel set exists: a refused gpu context must not make waitall() sync
    if kernels.cuda_in_use():
        from numba import cuda
        cuda.synchronize()
    engine.report_all()


# ---------------------------------------------------------------------------------------------
# arithmetic between NDArrays and scalars (MXNet's _ufunc_helper)
# ---------------------------------------------------------------------------------------------
def _ufunc(lhs, rhs, op_array, op_scalar, op_rscalar, py_fn):
    if isinstance(lhs, numeric_types) and isinstance(rhs, numeric_types):
        return py_fn(lhs, rhs)
    if isinstance(lhs, np.ndarray) and isinstance(rhs, NDArray):
        lhs = array(lhs, rhs.context, rhs.dtype)
    if isinstance(rhs, np.ndarray) and isinstance(lhs, NDArray):
        rhs = array(rhs, lhs.context, lhs.dtype)
    if isinstance(lhs, NDArray):
        if isinstance(rhs, NDArray):
            return _op(op_array, lhs, rhs)
        if isinstance(rhs, numeric_types):
            return _op(op_scalar, lhs, scalar=_scalar_attr(rhs))
        raise TypeError("type %s not supported" % str(type(rhs)))
    if isinstance(rhs, NDArray) and isinstance(lhs, numeric_types):
        return _op(op_rscalar, rhs, scalar=_scalar_attr(lhs))
    raise TypeError("type %s not supported" % str(type(lhs if not isinstance(lhs, NDArray)
                                                         else rhs)))


def add(lhs, rhs):
    return _ufunc(lhs, rhs, "broadcast_add", "_plus_scalar", "_plus_scalar", lambda a, b: a + b)


def subtract(lhs, rhs):
    return _ufunc(lhs, rhs, "broadcast_sub", "_minus_scalar", "_rminus_scalar",
                  lambda a, b: a - b)


def multiply(lhs, rhs):
    return _ufunc(lhs, rhs, "broadcast_mul", "_mul_scalar", "_mul_scalar", lambda a, b: a * b)


def divide(lhs, rhs):
    return _ufunc(lhs, rhs, "broadcast_div", "_div_scalar", "_rdiv_scalar", lambda a, b: a / b)


true_divide = divide


def modulo(lhs, rhs):
    return _ufunc(lhs, rhs, "broadcast_mod", "_mod_scalar", "_rmod_scalar", lambda a, b: a % b)


def power(base, exp):
    return _ufunc(base, exp, "broadcast_power", "_power_scalar", "_rpower_scalar",
                  lambda a, b: a ** b)


def maximum(lhs, rhs):
    return _ufunc(lhs, rhs, "broadcast_maximum", "_maximum_scalar", "_maximum_scalar",
                  lambda a, b: a if a > b else b)


def minimum(lhs, rhs):
    return _ufunc(lhs, rhs, "broadcast_minimum", "_minimum_scalar", "_minimum_scalar",
                  lambda a, b: a if a < b else b)


def _cmp(name, rname, py_fn):
    def fn(lhs, rhs):
        return _ufunc(lhs, rhs, "broadcast_" + name, "_%s_scalar" % name, "_%s_scalar" % rname,
                      lambda a, b: 1 if py_fn(a, b) else 0)
    fn.__name__ = name
    fn.__doc__ = "1 where ``lhs %s rhs`` holds, else 0 (in the input dtype), with broadcasting." \
        % name
    return fn


equal = _cmp("equal", "equal", lambda a, b: a == b)
not_equal = _cmp("not_equal", "not_equal", lambda a, b: a != b)
greater = _cmp("greater", "lesser", lambda a, b: a > b)
greater_equal = _cmp("greater_equal", "lesser_equal", lambda a, b: a >= b)
lesser = _cmp("lesser", "greater", lambda a, b: a < b)
lesser_equal = _cmp("lesser_equal", "greater_equal", lambda a, b: a <= b)
logical_and = _cmp("logical_and", "logical_and", lambda a, b: a and b)
logical_or = _cmp("logical_or", "logical_or", lambda a, b: a or b)
logical_xor = _cmp("logical_xor", "logical_xor", lambda a, b: bool(a) != bool(b))


def _attach_binary_operators():
    """Give NDArray its Python operators from the module functions above: ``(name, function,
    whether the array is the right operand)``; the comparisons return 0/1 arrays, and the
    in-place forms write into the left operand through NDArray._inplace."""
    forward, reflected = False, True
    table = [("add", add, forward), ("radd", add, forward),
             ("sub", subtract, forward), ("rsub", subtract, reflected),
             ("mul", multiply, forward), ("rmul", multiply, forward),
             ("truediv", divide, forward), ("rtruediv", divide, reflected),
             ("div", divide, forward), ("rdiv", divide, reflected),
             ("mod", modulo, forward), ("rmod", modulo, reflected),
             ("pow", power, forward), ("rpow", power, reflected),
             ("eq", equal, forward), ("ne", not_equal, forward),
             ("gt", greater, forward), ("ge", greater_equal, forward),
             ("lt", lesser, forward), ("le", lesser_equal, forward)]
    for name, func, swapped in table:
        if swapped:
            def method(self, other, func=func):
                return func(other, self)
        else:
            def method(self, other, func=func):
                return func(self, other)
        method.__name__ = "__%s__" % name
        setattr(NDArray, method.__name__, method)
    # in place: (name, verb for the read-only error, array operator, scalar operator)
    for name, verb, op_array, op_scalar in [
            ("iadd", "add", "broadcast_add", "_plus_scalar"),
            ("isub", "subtract", "broadcast_sub", "_minus_scalar"),
            ("imul", "multiply", "broadcast_mul", "_mul_scalar"),
            ("itruediv", "divide", "broadcast_div", "_div_scalar"),
            ("idiv", "divide", "broadcast_div", "_div_scalar"),
            ("imod", "take modulo", "broadcast_mod", "_mod_scalar"),
            ("ipow", "raise", "broadcast_power", "_power_scalar")]:
        def method(self, other, spec=(verb, op_array, op_scalar)):
            return self._inplace(other, *spec)
        method.__name__ = "__%s__" % name
        setattr(NDArray, method.__name__, method)


_attach_binary_operators()
# autograd records views of NDArrays and makes their gradients with these
_autograd.install(NDArray=NDArray, zeros=zeros, full=full, _to_ctx_buffer=_to_ctx_buffer)
