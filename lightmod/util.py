"""``mx.util``: MXNet's general helpers that mean something without the numpy interface.

``get_gpu_count`` / ``get_gpu_memory`` ask numba.cuda (imported only when called).
``getenv`` / ``setenv``: MXNet reads and writes its C runtime's environment; lightmod has no
C runtime of its own, so these are the process environment (``os.environ``), which is where
lightmod reads its settings (``MXNET_*``) from.

The numpy-interface switches of ``mxnet.util`` (``np_shape``, ``use_np``, ``set_np``...) are not
here: lightmod implements the legacy NDArray/Symbol semantics only.
"""
import os

from .context import gpu_memory_info, num_gpus

__all__ = ["get_gpu_count", "get_gpu_memory", "getenv", "setenv"]


def get_gpu_count():
    """Number of GPUs numba.cuda can use (0 without a driver or numba-cuda)."""
    return num_gpus()


def get_gpu_memory(gpu_dev_id):
    """``(free, total)`` bytes of GPU ``gpu_dev_id``; MXNetError when that GPU is not usable."""
    return gpu_memory_info(gpu_dev_id)


def getenv(name):
    """The value of environment variable ``name``, or None when it is not set."""
    return os.environ.get(name)


def setenv(name, value):
    """Set environment variable ``name`` to ``value`` (a string); None removes it."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = str(value)
