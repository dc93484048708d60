"""Helpers behind NDArrayIter: canonical input lists, host slices, wrapping host arrays."""
from collections import OrderedDict

import numpy as np

from ..context import current_context
from ..ndarray.ndarray import NDArray, array

__all__ = []


def _is_scipy_csr(x):
    """True for a scipy.sparse CSR matrix (checked without importing scipy)."""
    return type(x).__module__.startswith("scipy.sparse") and getattr(x, "format", None) == "csr"


def _wrap_host(host, ctx=None, stype="default"):
    """An NDArray holding the numpy array ``host`` on ``ctx`` (no copy on CPU contexts)."""
    ctx = ctx if ctx is not None else current_context()
    if ctx.device_type == "gpu":
        host = array(host, ctx=ctx, dtype=host.dtype)._data
    return NDArray(host, ctx, stype)


def _to_ndarray(value, name):
    """Convert one iterator input with ``mx.nd.array``: NDArrays are kept as they are,
    anything else (numpy arrays of any dtype, nested lists) becomes float32, MXNet's default
    real type; a scipy CSR matrix becomes a CSRNDArray."""
    if isinstance(value, NDArray):
        return value
    try:
        return array(value)
    except TypeError:
        raise TypeError("Invalid type '%s' for %s, should be NDArray, numpy.ndarray or "
                        "h5py.Dataset" % (type(value), name)) from None


def _init_data(data, allow_empty, default_name):
    """Canonical form of iterator inputs: a list of ``(name, NDArray)`` sorted by name.

    A single array gets ``default_name``; a list of one array too; a longer list is named
    ``_0_<default_name>``, ``_1_<default_name>``, ...; a dict keeps its keys.
    """
    if data is None:
        if not allow_empty:
            raise AssertionError("data must be given (got None)")
        data = []
    if isinstance(data, (np.ndarray, NDArray)) or _is_scipy_csr(data):
        data = [data]
    if isinstance(data, (list, tuple)):
        if not allow_empty and len(data) == 0:
            raise AssertionError("data must not be an empty list")
        if len(data) == 1:
            data = OrderedDict([(default_name, data[0])])
        else:
            data = OrderedDict(("_%d_%s" % (i, default_name), d) for i, d in enumerate(data))
    if not isinstance(data, dict):
        raise TypeError("Input must be NDArray, numpy.ndarray, h5py.Dataset a list of them or "
                        "dict with them as values (got %s)" % type(data).__name__)
    return sorted((k, _to_ndarray(v, k)) for k, v in data.items())


def _has_stype(data, stype):
    """True if any array of a canonical ``(name, NDArray)`` list has storage type ``stype``."""
    return any(getattr(arr, "stype", "default") == stype for _, arr in data)


def _getdata_by_idx(data, idx, axis=0):
    """Reorder every array of a canonical list by ``idx`` along ``axis`` (MXNet's shuffle).

    As in MXNet, dense arrays come back as float32 (they pass through ``nd.array``); csr arrays
    keep their storage type and dtype.
    """
    shuffled = []
    for name, arr in data:
        taken = np.take(arr._host_view(), idx, axis=axis)
        if arr.stype == "csr":
            shuffled.append((name, _wrap_host(taken, arr.context, "csr")))
        else:
            shuffled.append((name, _wrap_host(np.asarray(taken, dtype=np.float32), arr.context)))
    return shuffled


def _auto_interp(old_h, old_w, new_h, new_w):
    """The OpenCV interpolation code of MXNet's automatic mode 9 for a resize: cubic (2) when
    both sides grow, area (3) when both shrink, bilinear (1) otherwise."""
    if new_h > old_h and new_w > old_w:
        return 2
    if new_h < old_h and new_w < old_w:
        return 3
    return 1
