"""The CPU kernel set: ``k`` for operators on cpu contexts (never imports numba.cuda).

Each family lives in its own file and is re-exported here. The families most graphs use are
imported with the set; the others (``_ON_DEMAND``) are imported by the first look-up of a name
the set does not have yet (a module ``__getattr__``), so a process that never runs, say, a
convolution or a linear-algebra operator does not pay for creating their compiled
dispatchers (a tenth of a second or more at the first kernel call of a training run).
No two families export the same name (tests/test_kernel_families.py), so the order they are
imported in does not change what a name means.
"""
import importlib

import numpy as np

__all__ = ["device_kind"]
device_kind = "cpu"

# --- families imported with the set (one line each; assign and assign_scalar are
# elemwise.py's memory helpers) ---
from .elemwise import *  # noqa: F401,F403,E402
from .nn import *  # noqa: F401,F403,E402
from .optimizer import *  # noqa: F401,F403,E402
from .tensor import *  # noqa: F401,F403,E402
from .reduce import *  # noqa: F401,F403,E402
from .fused import *  # noqa: F401,F403,E402

# --- families imported at the first look-up of a name none of the above exports ---
_ON_DEMAND = ("conv", "conv_direct", "conv_wgrad", "winograd", "pooling", "norm", "rnn", "svm",
              "linalg", "contrib", "ctc", "sequence", "spatial", "detection")
_imported_on_demand = set()

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


def _import_family(family):
    """Import one on-demand family and export its names here, staged like the others."""
    module = importlib.import_module("%s.%s" % (__name__, family))
    names = {name: getattr(module, name) for name in module.__all__}
    _stage_kernels(names)
    globals().update(names)
    _imported_on_demand.add(family)


def __getattr__(name):
    """A kernel of an on-demand family: import the families not imported yet, in order, until
    one exports ``name``."""
    if name.startswith("__"):       # probes for module dunders (copy, pickle, inspect)
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    for family in _ON_DEMAND:
        if family not in _imported_on_demand:
            _import_family(family)
            if name in globals():
                return globals()[name]
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def import_all_families():
    """Import every on-demand family now (for code that lists the whole kernel set)."""
    for family in _ON_DEMAND:
        if family not in _imported_on_demand:
            _import_family(family)
