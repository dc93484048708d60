"""Finding CUDA without importing it at lightmod import time, and saying what is missing."""
import importlib.util
import os

from ..base import MXNetError

_checked = {}


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
