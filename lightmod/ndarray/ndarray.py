"""NDArray: a numpy array (CPU) or a numba device array (GPU) plus the context it lives on."""
import numpy as np

from ..base import MXNetError
from ..context import Context, current_context

__all__ = ["NDArray", "from_backend", "backend_array", "STYPES"]

STYPES = ("default", "row_sparse", "csr")


class NDArray:
    """An n-dimensional array on a device.

    ``_data`` is the backend array: a numpy ndarray on CPU contexts, a numba
    ``DeviceNDArray`` on GPU contexts. Views (``a[1:3]``, ``reshape``) share memory with their
    base, as in MXNet. ``_stype`` is the storage type MXNet would report; lightmod stores
    row_sparse and csr arrays densely and keeps their sparse *semantics* where MXNet code
    observes them (``stype``, ``tostype``, file format).
    """
    __slots__ = ("_data", "_ctx", "_stype", "writable", "__weakref__")
    # numpy must defer to our operators in mixed expressions (np_array + nd_array).
    __array_priority__ = 1000.0

    def __init__(self, data, ctx=None, stype="default", writable=True):
        self._data = data
        self._ctx = ctx if ctx is not None else current_context()
        if stype not in STYPES:
            raise MXNetError("unknown storage type %r (expected one of %s)" % (stype, STYPES))
        self._stype = stype
        self.writable = writable

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

    @property
    def context(self):
        return self._ctx

    ctx = context

    @property
    def stype(self):
        return self._stype

    @property
    def handle(self):
        return self._data

    # --- host transfer ------------------------------------------------------------------------
    def asnumpy(self):
        """A numpy copy of the contents (always a copy, as in MXNet)."""
        if isinstance(self._data, np.ndarray):
            return self._data.copy()
        return self._data.copy_to_host()

    def _host_view(self):
        """The contents as a numpy array without copying when on the CPU (internal)."""
        if isinstance(self._data, np.ndarray):
            return self._data
        return self._data.copy_to_host()

    def asscalar(self):
        if self.size != 1:
            raise ValueError("The current array is not a scalar (shape %s)" % (self.shape,))
        return self._host_view().reshape(-1)[0]

    def wait_to_read(self):
        if not isinstance(self._data, np.ndarray):
            from numba import cuda
            cuda.synchronize()

    def wait_to_write(self):
        self.wait_to_read()

    def __repr__(self):
        shape_info = "x".join(str(d) for d in self.shape)
        return "\n%s\n<NDArray %s @%s>" % (str(self.asnumpy()), shape_info, self._ctx)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __bool__(self):
        if self.size == 0:
            return False
        if self.size == 1:
            return bool(self.asscalar())
        raise ValueError("The truth value of an NDArray with multiple elements is ambiguous.")

    def __array__(self, dtype=None, copy=None):
        arr = self._host_view()
        return arr.astype(dtype) if dtype is not None else arr


def from_backend(data, ctx=None, stype="default"):
    """Wrap a backend array (numpy / device array) without copying."""
    return NDArray(data, ctx if ctx is not None else Context("cpu", 0), stype)


def backend_array(x):
    """The backend array behind an NDArray (or a numpy array passed through)."""
    return x._data if isinstance(x, NDArray) else x
