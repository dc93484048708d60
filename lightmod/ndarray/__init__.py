"""``mx.nd``: NDArray, creation functions, the .params format, and one function per operator.

Operator functions (``nd.FullyConnected``, ``nd.sum``, ``nd.relu`` ...) are generated on first
access from the operator registry (``register.py``); ``nd.contrib.X`` are the ``_contrib_X``
operators and ``nd._internal`` holds every name, the underscore ones included.
"""
from .ndarray import (NDArray, array, empty, zeros, ones, full, arange, moveaxis, waitall,  # noqa
                      histogram,
                      add, subtract, multiply, divide, true_divide, modulo, power, maximum,
                      minimum, equal, not_equal, greater, greater_equal, lesser, lesser_equal,
                      logical_and, logical_or, logical_xor, onehot_encode, concatenate,
                      imperative_invoke)
from .ndarray import mx_real_t  # noqa: F401
from . import register  # noqa: F401
from .register import invoke  # noqa: F401
from . import sparse  # noqa: F401
from .sparse import CSRNDArray, RowSparseNDArray, BaseSparseNDArray  # noqa: F401
from . import random  # noqa: F401
from . import utils  # noqa: F401
from .utils import save, load, load_frombuffer  # noqa: F401
from . import contrib, _internal, op, linalg, image  # noqa: F401
from .interop import from_dlpack, from_numpy, to_dlpack_for_read, to_dlpack_for_write  # noqa: F401
from . import custom_array  # noqa: F401  (installs the custom operators' array wrapper)
from ..operator import install_array_class as _install_array_class
from ..operator.frontend import namespace_hooks as _namespace_hooks
from .register import find_function as _find_function

__getattr__, __dir__ = _namespace_hooks(__name__, ("",), _find_function)
_install_array_class(NDArray)
