"""``mx.gluon.utils``: split a batch across devices and clip gradients by their global norm."""
import warnings

import numpy as np

from .. import ndarray as _nd
from ..base import MXNetError
from ..context import Context
from ..ndarray.ndarray import NDArray

__all__ = ["split_data", "split_and_load", "clip_global_norm"]


def split_data(data, num_slice, batch_axis=0, even_split=True):
    """Split ``data`` into ``num_slice`` parts along ``batch_axis`` (always a list).

    With ``even_split`` the axis length must be a multiple of ``num_slice`` (ValueError
    otherwise); without it the first ``length % num_slice`` parts get one extra element. Parts
    along axis 0 are views of ``data``; along other axes they are copies.
    """
    num_slice = int(num_slice)
    if num_slice < 1:
        raise ValueError("split_data: num_slice must be at least 1, got %d" % num_slice)
    ndim = len(data.shape)
    if not -ndim <= batch_axis < ndim:
        raise ValueError("split_data: batch_axis %d is out of range for data with shape %s"
                         % (batch_axis, data.shape))
    axis = batch_axis % ndim
    size = data.shape[axis]
    if even_split and size % num_slice != 0:
        raise ValueError("data with shape %s cannot be evenly split into %d slices along axis %d. "
                         "Use a batch size that's multiple of %d or set even_split=False to allow "
                         "uneven partitioning of data." % (str(data.shape), num_slice, batch_axis,
                                                           num_slice))
    if size < num_slice:
        raise MXNetError("split_data: cannot split axis %d of length %d (data shape %s) into %d "
                         "non-empty slices" % (batch_axis, size, data.shape, num_slice))
    base, extra = divmod(size, num_slice)
    bounds = [0]
    for i in range(num_slice):
        bounds.append(bounds[-1] + base + (1 if i < extra else 0))
    if axis == 0:
        return [data[bounds[i]:bounds[i + 1]] for i in range(num_slice)]
    return [_nd.slice_axis(data, axis=axis, begin=bounds[i], end=bounds[i + 1])
            for i in range(num_slice)]


def split_and_load(data, ctx_list, batch_axis=0, even_split=True):
    """Split ``data`` (an NDArray, or anything ``mx.nd.array`` takes) into one part per context
    of ``ctx_list`` and copy each part to its context."""
    if not ctx_list or not all(isinstance(c, Context) for c in ctx_list):
        raise MXNetError("split_and_load: ctx_list must be a non-empty list of Contexts, got %r"
                         % (ctx_list,))
    if not isinstance(data, NDArray):
        data = _nd.array(data, ctx=ctx_list[0])
    if len(ctx_list) == 1:
        return [data.as_in_context(ctx_list[0])]
    parts = split_data(data, len(ctx_list), batch_axis, even_split)
    return [part.as_in_context(ctx) for part, ctx in zip(parts, ctx_list)]


def clip_global_norm(arrays, max_norm, check_isfinite=True):
    """Scale ``arrays`` in place so that their joint 2-norm is at most ``max_norm``.

    The scale is ``min(1, max_norm / (norm + 1e-8))``. Returns the norm before scaling: a float,
    or with ``check_isfinite=False`` an NDArray of shape (1,) (no host synchronisation). A
    non-finite norm gives a warning; the arrays are then scaled by NaN as in MXNet.
    """
    if len(arrays) == 0:
        raise MXNetError("clip_global_norm: arrays must be a non-empty list of NDArrays")
    ctx = arrays[0].context
    total = 0.0
    for arr in arrays:
        values = arr.asnumpy().astype(np.float64).ravel()
        total += float(np.dot(values, values))
    norm = np.float32(np.sqrt(np.float32(total)))
    if check_isfinite and not np.isfinite(norm):
        warnings.warn(UserWarning("nan or inf is detected. Clipping results will be undefined."),
                      stacklevel=2)
    scale = min(np.float32(max_norm) / (norm + np.float32(1e-8)), np.float32(1.0))
    for arr in arrays:
        arr *= float(scale)
    if check_isfinite:
        return norm
    return _nd.array([norm], ctx=ctx)
