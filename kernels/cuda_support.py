"""Finding CUDA without importing it at lightmod import time, saying what is missing, and
binding the CUDA kernel set to one GPU."""
import functools
import importlib.util
import os

from ..base import MXNetError

_checked = {}
_kernel_sets = {}   # device id -> the kernel set computing on that GPU


def simulator_enabled():
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def numba_cuda_installed():
    return importlib.util.find_spec("numba.cuda") is not None


def num_gpus():
    if not numba_cuda_installed():
        return 0
    try:
        from numba import cuda
        if not cuda.is_available():
            return 0
        return len(cuda.gpus)
    except Exception:  # a broken driver counts as no GPU
        return 0


def require(device_id=0):
    """Raise MXNetError naming what is missing unless gpu(device_id) can be used."""
    if device_id in _checked:
        return
    if not numba_cuda_installed():
        raise MXNetError("gpu(%d) needs numba's CUDA target: pip install 'lightmod[cuda]'"
                         % device_id)
    from numba import cuda
    if not cuda.is_available():
        raise MXNetError("gpu(%d) is not usable: no CUDA driver or GPU was found (numba says: %s)."
                         " Set NUMBA_ENABLE_CUDASIM=1 to run on numba's CUDA simulator."
                         % (device_id, _why_unavailable()))
    count = len(cuda.gpus)
    if device_id < 0 or device_id >= count:
        raise MXNetError("gpu(%d) does not exist: %d GPU(s) are visible" % (device_id, count))
    _checked[device_id] = True


def kernel_set(device_id=0):
    """The CUDA kernel set computing on gpu(device_id).

    numba allocates, copies and launches in the *current* CUDA context, which is GPU 0 unless
    something selects another. With one visible GPU the module ``lightmod.kernels.cuda`` is
    the kernel set; with several, every function of the set runs inside
    ``numba.cuda.gpus[device_id]``, so the arrays and launches of gpu(i) live on GPU i.
    """
    ks = _kernel_sets.get(device_id)
    if ks is None:
        from . import cuda
        ks = cuda if num_gpus() <= 1 else OnDevice(cuda, device_id)
        _kernel_sets[device_id] = ks
    return ks


class OnDevice:
    """A kernel set whose functions run with GPU ``device_id``'s context current."""

    def __init__(self, module, device_id):
        self._module = module
        self.device_id = device_id

    def __getattr__(self, name):
        value = getattr(self._module, name)
        if callable(value) and not isinstance(value, type):
            from numba import cuda
            device = cuda.gpus[self.device_id]
            function = value

            @functools.wraps(function)
            def on_device(*args, **kwargs):
                with device:
                    return function(*args, **kwargs)
            value = on_device
        setattr(self, name, value)    # found once: later look-ups skip __getattr__
        return value

    def __repr__(self):
        return "<CUDA kernel set on GPU %d>" % self.device_id


def _why_unavailable():
    try:
        from numba import cuda
        cuda.detect()
    except Exception as err:
        return str(err)
    return "cuda.is_available() is False"


def memory_info(device_id=0):
    require(device_id)
    from numba import cuda
    with cuda.gpus[device_id]:
        free, total = cuda.current_context().get_memory_info()
    return free, total
