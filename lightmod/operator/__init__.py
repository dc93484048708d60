"""Operator declarations (one file per family); see registry.py for the conventions.

``mx.operator`` is also MXNet's module of Python operators: ``CustomOp``, ``CustomOpProp``,
``register``, ``get_all_registered_operators``, ``NumpyOp`` and ``NDArrayOp`` (custom.py), and
``get_operator_arguments`` (frontend.py).
"""
import ctypes  # noqa: F401  (MXNet's operator module provides it to star imports)

from ..base import NDArrayHandle  # noqa: F401  (likewise)
from .custom import (CustomOp, CustomOpProp, NDArrayOp, NumpyOp, PythonOp,  # noqa: F401
                     get_all_registered_operators, register)
from .frontend import OperatorArguments, get_operator_arguments  # noqa: F401
from .registry import all_ops, find, get  # noqa: F401


def install_array_class(array_class):
    """Called by the ndarray layer when it loads: ``mx.operator.NDArray`` is the NDArray
    class, as in MXNet's operator module (this layer sits below it, so cannot import it)."""
    globals()["NDArray"] = array_class
