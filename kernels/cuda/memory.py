"""Device memory for the CUDA kernel set: creation, host transfers, copies with dtype casts and
broadcasting, fills, and ``assign`` (the gradient-request store every operator uses).

Arrays are numba ``DeviceNDArray`` objects, always C-contiguous in lightmod. Kernels are
grid-stride loops over flat views; index math comes from ``kernels/scalar.py``.
"""
import numpy as np
from numba import cuda

from .. import scalar as S
from ..cpu.elemwise import broadcast_plan

__all__ = ["empty", "zeros", "full", "fill", "copy", "shares_memory", "from_host", "to_host",
           "assign", "assign_scalar",
           "launch_config", "flat", "is_device_array"]

MAX_BLOCKS = 4096


def launch_config(n):
    """(blocks, threads) for a grid-stride loop over n items (small launches stay small,
    which also keeps the simulator fast)."""
    threads = 256 if n >= 256 else max(32, (n + 31) // 32 * 32)
    blocks = min(MAX_BLOCKS, max(1, (n + threads - 1) // threads))
    return blocks, threads


def is_device_array(x):
    # (the simulator has no cuda.is_cuda_array; device arrays all have copy_to_host)
    return not isinstance(x, np.ndarray) and hasattr(x, "copy_to_host")


def flat(arr):
    """A 1-d view of a contiguous device array."""
    return arr if arr.ndim == 1 else arr.reshape(arr.size)


@cuda.jit
def _fill_kernel(out, value):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = value


@cuda.jit
def _gather_kernel(src, out, shape, strides):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = src[S.strided_offset(i, shape, strides)]


@cuda.jit
def _add_scalar_kernel(out, value):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] += value


@cuda.jit
def _add_kernel(dst, src):
    for i in range(cuda.grid(1), dst.shape[0], cuda.gridsize(1)):
        dst[i] += src[i]


def empty(shape, dtype):
    return cuda.device_array(shape, dtype=np.dtype(dtype))


def fill(dst, value):
    if dst.size == 0:
        return
    out = flat(dst)
    _fill_kernel[launch_config(out.size)](out, np.dtype(dst.dtype).type(value))


def zeros(shape, dtype):
    out = empty(shape, dtype)
    fill(out, 0)
    return out


def full(shape, value, dtype):
    out = empty(shape, dtype)
    fill(out, value)
    return out


def from_host(arr, dtype=None):
    return cuda.to_device(np.asarray(arr, dtype=dtype, order="C"))


def to_host(arr):
    return arr.copy_to_host()


def copy(dst, src):
    """dst[...] = src: src is a host array (broadcast to dst) or a device array whose shape
    broadcasts to dst's; dtypes are converted."""
    if dst.size == 0:
        return
    if not is_device_array(src):
        host = np.broadcast_to(np.asarray(src), tuple(dst.shape))
        # a fresh copy: numba's copy treats a zero stride (which numpy allows on a size-1 axis of
        # a "contiguous" array) as a broadcast axis and drops it, e.g. (2, 1, 6, 6) -> (2, 6, 6)
        dst.copy_to_device(np.array(host, dtype=dst.dtype, order="C"))
        return
    if tuple(src.shape) == tuple(dst.shape) and src.dtype == dst.dtype:
        dst.copy_to_device(src)
        return
    if src.dtype == np.float16 and np.dtype(dst.dtype).kind in "biu":
        # numba-cuda converts half to integer rounding to nearest (cvt.rni); numpy and MXNet
        # truncate toward zero, as the float32 conversion does
        src32 = empty(src.shape, np.float32)
        copy(src32, src)
        src = src32
    out_shape, shape, strides, _, _, _ = broadcast_plan(tuple(src.shape), tuple(dst.shape))
    if out_shape != tuple(dst.shape):
        raise ValueError("cannot copy an array of shape %s into shape %s"
                         % (tuple(src.shape), tuple(dst.shape)))
    out = flat(dst)
    _gather_kernel[launch_config(out.size)](flat(src), out, shape, strides)


def shares_memory(a, b):
    """Whether device arrays a and b overlap in memory."""
    try:
        pa, pb = a.device_ctypes_pointer.value, b.device_ctypes_pointer.value
    except AttributeError:      # the simulator's arrays are numpy-backed
        return bool(np.may_share_memory(np.asarray(a), np.asarray(b)))
    if pa is None or pb is None:    # empty arrays
        return False
    return pa < pb + b.nbytes and pb < pa + a.nbytes


def assign(dst, src, req):
    """Store src into dst following a gradient request ('write', 'add', 'null')."""
    if req == "write":
        copy(dst, src)
    elif req == "add" and dst.size:
        if src.dtype != dst.dtype or tuple(src.shape) != tuple(dst.shape):
            tmp = empty(dst.shape, dst.dtype)
            copy(tmp, src)
            src = tmp
        out = flat(dst)
        _add_kernel[launch_config(out.size)](out, flat(src))


def assign_scalar(dst, value, req):
    """Store the constant value into every element of dst following a gradient request."""
    if dst.size == 0:
        return
    if req == "write":
        fill(dst, value)
    elif req == "add":
        out = flat(dst)
        _add_scalar_kernel[launch_config(out.size)](out, np.dtype(dst.dtype).type(value))
