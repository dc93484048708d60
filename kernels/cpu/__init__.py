"""The CPU kernel set: ``k`` for operators on cpu contexts (never imports numba.cuda).

Each family lives in its own file and is re-exported here, one line per family.
"""
import numpy as np

__all__ = ["device_kind"]
device_kind = "cpu"

# --- families (one line each; assign and assign_scalar are elemwise.py's memory helpers) ---
from .conv import *  # noqa: F401,F403,E402
from .pooling import *  # noqa: F401,F403,E402
from .winograd import *  # noqa: F401,F403,E402
from .norm import *  # noqa: F401,F403,E402
from .elemwise import *  # noqa: F401,F403,E402
from .nn import *  # noqa: F401,F403,E402
from .optimizer import *  # noqa: F401,F403,E402
from .tensor import *  # noqa: F401,F403,E402
from .reduce import *  # noqa: F401,F403,E402
from .rnn import *  # noqa: F401,F403,E402
from .svm import *  # noqa: F401,F403,E402
from .linalg import *  # noqa: F401,F403,E402
from .contrib import *  # noqa: F401,F403,E402
from .ctc import *  # noqa: F401,F403,E402
from .sequence import *  # noqa: F401,F403,E402
from .spatial import *  # noqa: F401,F403,E402
from .detection import *  # noqa: F401,F403,E402
from .fused import *  # noqa: F401,F403,E402


# --- float16 staging (kernels/float16.py): every kernel of the set takes float16 arrays ---
def _float32_copy(a):
    return a.astype(np.float32)


def _copy_back(original, copy32):
    np.copyto(original, copy32, casting="unsafe")


def _is_host_array(a):
    return isinstance(a, np.ndarray)


def _stage_kernels(namespace):
    from ..float16 import Float16Staging
    # numba's float16 lowering error is a NotImplementedError
    staging = Float16Staging(_is_host_array, _float32_copy, _copy_back, (NotImplementedError,))
    for name, obj in list(namespace.items()):
        module = getattr(getattr(obj, "py_func", obj), "__module__", "") or ""
        if name.startswith("_") or isinstance(obj, type) or not callable(obj):
            continue
        if module.startswith(__name__ + ".") or module == __name__:
            namespace[name] = staging.wrap(obj)


_stage_kernels(globals())
