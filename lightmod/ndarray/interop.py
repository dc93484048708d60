"""Sharing memory with other libraries: numpy arrays (``nd.from_numpy``) and DLPack capsules
(``nd.to_dlpack_for_read`` / ``_for_write``, ``nd.from_dlpack``), on CPU arrays.

A capsule is the standard one-use 'dltensor' PyCapsule, so it passes to and from any DLPack
library (numpy, PyTorch, CuPy...); consuming it marks it used, as the protocol requires.
"""
import ctypes

import numpy as np

from ..base import MXNetError
from ..context import Context
from .ndarray import NDArray, array

__all__ = ["from_numpy", "from_dlpack", "to_dlpack_for_read", "to_dlpack_for_write"]


def from_numpy(ndarray, zero_copy=True, array_cls=NDArray):
    """An NDArray on the memory of the numpy array ``ndarray`` (``zero_copy``), which then
    becomes read-only so that only the NDArray writes it; it must be C-contiguous. With
    ``zero_copy=False`` the values are copied."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError("from_numpy expects a numpy.ndarray, got %s" % type(ndarray).__name__)
    if not zero_copy:
        return array(ndarray, dtype=ndarray.dtype)
    if not ndarray.flags["C_CONTIGUOUS"]:
        raise ValueError("Only c-contiguous arrays are supported for zero-copy")
    shared = _writable(ndarray)
    ndarray.flags["WRITEABLE"] = False
    return array_cls(shared, Context("cpu", 0))


def to_dlpack_for_read(data):
    """``data.to_dlpack_for_read()``: a DLPack capsule on the array's memory."""
    return _check_array(data).to_dlpack_for_read()


def to_dlpack_for_write(data):
    """``data.to_dlpack_for_write()``: a DLPack capsule on the array's memory."""
    return _check_array(data).to_dlpack_for_write()


def _check_array(data):
    if not isinstance(data, NDArray):
        raise TypeError("expected an NDArray, got %s" % type(data).__name__)
    return data


_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


class _Capsule:
    """Presents a bare capsule through the ``__dlpack__`` protocol numpy reads."""

    def __init__(self, capsule):
        self._capsule = capsule

    def __dlpack__(self, stream=None, **_options):
        return self._capsule

    def __dlpack_device__(self):
        return (1, 0)           # kDLCPU, device 0


def from_dlpack(dlpack):
    """An NDArray on the memory a DLPack capsule ('dltensor') describes; the capsule is used
    up. The NDArray is writable, as MXNet's is."""
    if type(dlpack).__name__ != "PyCapsule":
        raise TypeError("from_dlpack expects a DLPack capsule (from to_dlpack_for_read / "
                        "_for_write or another library), got %s" % type(dlpack).__name__)
    if not (_capsule_is_valid(dlpack, b"dltensor")
            or _capsule_is_valid(dlpack, b"dltensor_versioned")):
        raise MXNetError("from_dlpack: the capsule is not an unused DLPack tensor (each "
                         "capsule can be consumed once)")
    try:
        shared = np.from_dlpack(_Capsule(dlpack))
    except (BufferError, RuntimeError, ValueError, TypeError) as err:
        raise MXNetError("from_dlpack: %s" % err) from None
    if not shared.flags["WRITEABLE"]:
        shared = _writable(shared)
    return NDArray(shared, Context("cpu", 0))


def _writable(shared):
    """A writable numpy array on the memory of ``shared`` (which may be read-only).

    The NDArray owns writing to memory it shares: numpy marks tensors from unversioned DLPack
    capsules read-only (such a capsule cannot say whether writing is allowed) although
    to_dlpack_for_write promises it is, and from_numpy makes the source read-only. A compact
    array is viewed again writably, the view keeping ``shared`` (and so the producer's memory)
    alive; a strided one (no NDArray is) is copied."""
    if shared.flags["WRITEABLE"]:
        return shared.view()
    if shared.size == 0:
        return np.empty(shared.shape, shared.dtype)
    if not shared.flags["C_CONTIGUOUS"]:
        return np.ascontiguousarray(shared)
    raw = (ctypes.c_char * shared.nbytes).from_address(shared.ctypes.data)
    raw.owner = shared
    return np.frombuffer(raw, dtype=shared.dtype).reshape(shared.shape)
