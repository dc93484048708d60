"""The NDArrays a custom operator's ``forward`` / ``backward`` receive.

They wrap the executor's own buffers, so a custom operator reads and writes them without a
copy. Two accessors give the raw memory to compiled code:

* ``x.numpy_view()`` (CPU): the numpy array itself, for numpy or an ``@numba.njit`` function;
  writes go straight into the buffer. ``x.asnumpy()`` still copies, as in MXNet.
* ``x.cuda_view()`` (GPU): the numba device array; ``x`` also has
  ``__cuda_array_interface__``, so it can be passed to a ``numba.cuda`` kernel as it is.
"""
import numpy as np

from ..base import MXNetError
from ..operator import custom as _custom_op
from .ndarray import NDArray, _alloc

__all__ = ["CustomOpArray"]


class CustomOpArray(NDArray):
    """An NDArray handed to a custom operator: an executor buffer seen without copying."""
    __slots__ = ()

    def numpy_view(self):
        """The memory of this CPU array as a numpy array (no copy; writes go into it)."""
        if not isinstance(self._data, np.ndarray):
            raise MXNetError("numpy_view(): the array lives on %s; pass it to a numba.cuda "
                             "kernel as it is or use cuda_view() (asnumpy() copies it to the "
                             "host)" % (self._ctx,))
        return self._data

    def cuda_view(self):
        """The numba device array of this GPU array (no copy)."""
        if isinstance(self._data, np.ndarray):
            raise MXNetError("cuda_view(): the array lives on %s; use numpy_view()"
                             % (self._ctx,))
        return self._data

    @property
    def __cuda_array_interface__(self):
        if isinstance(self._data, np.ndarray):
            # AttributeError: numba then treats the object as not a CUDA array
            raise AttributeError("a CPU array has no __cuda_array_interface__")
        return self._data.__cuda_array_interface__


_custom_op.install_front_ends(
    wrap=lambda data, ctx, writable: CustomOpArray(data, ctx, writable=writable),
    zeros_like=lambda data, ctx: _alloc(tuple(data.shape), data.dtype, ctx, fill=0))
