"""Finding CUDA without importing it at lightmod import time, saying what is missing, and
binding the CUDA kernel set to one GPU."""
import functools
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
    if not simulator_enabled():
        check_compiler()
    _checked[device_id] = True


def _add_one(x):
    x[0] += 1


def check_compiler():
    """Raise MXNetError unless numba-cuda can compile a kernel with the numpy installed.

    A numba-cuda release older than the numpy beside it fails inside its own typing set-up
    (numba-cuda 0.30 with numpy 2.5 looks up the removed ``np.row_stack``); without this check
    that surfaces as an AttributeError deep in numba at the first operator.
    """
    if "compiler" in _checked:
        return
    import numpy as np
    from numba import cuda, float32
    try:
        # (an explicit architecture: the check needs no device; CUDA 13 targets 7.5 and newer)
        cuda.compile_ptx(_add_one, (float32[:],), cc=(7, 5))
    except Exception as err:
        raise MXNetError(
            "the GPU is not usable: numba-cuda cannot compile kernels here (%s: %s). numba-cuda "
            "%s may be too old for numpy %s: upgrade numba-cuda or install an older numpy"
            % (type(err).__name__, err, _version_of("numba-cuda"), np.__version__)) from err
    _checked["compiler"] = True


def _version_of(distribution):
    from importlib import metadata
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "(version unknown)"


class KernelSet:
    """The functions of ``lightmod.kernels.cuda`` as one GPU runs them.

    * With several GPUs visible each function runs inside ``numba.cuda.gpus[device_id]``:
      numba allocates, copies and launches in the *current* CUDA context, which is GPU 0
      unless something selects another, so without this gpu(i)'s arrays would live on GPU 0.
    * A function whose kernels cannot compute in half precision (numba's float16 lowering
      error, a kernel that refuses the dtype) is re-run on float32 copies of its float16
      device arrays, and the results are rounded back into them: what the CPU kernel set does
      (the one wrapper of ``kernels/float16.py``) and what MXNet's float16 kernels do with their float32
      accumulators. A failing dtype signature is remembered, so the failing compile is tried
      once per function and signature.
    """

    def __init__(self, module, device_id):
        self._module = module
        self._pin = num_gpus() > 1
        self.device_id = device_id

    def __getattr__(self, name):
        value = getattr(self._module, name)
        if callable(value) and not isinstance(value, type):
            value = _float16_staged(self._module, value)
            if self._pin:
                value = _on_device(value, self.device_id)
        setattr(self, name, value)    # found once: later look-ups skip __getattr__
        return value

    def __repr__(self):
        return "<CUDA kernel set of gpu(%d)>" % self.device_id


def _on_device(function, device_id):
    from numba import cuda
    device = cuda.gpus[device_id]

    @functools.wraps(function)
    def on_device(*args, **kwargs):
        with device:
            return function(*args, **kwargs)
    return on_device


_staging = []    # the CUDA half's Float16Staging, made on first use (it imports numba)


def _float16_staged(module, function):
    if not _staging:
        import numpy as np
        from numba.core.errors import NumbaError

        from .float16 import Float16Staging

        def float32_copy(a):
            copy32 = module.empty(a.shape, np.float32)
            module.copy(copy32, a)
            return copy32

        _staging.append(Float16Staging(module.is_device_array, float32_copy, module.copy,
                                       (NotImplementedError, TypeError, NumbaError)))
    return _staging[0].wrap(function)


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
