"""Operator declarations (one file per family); see registry.py for the conventions.

``mx.operator`` is also MXNet's module of Python operators: ``CustomOp``, ``CustomOpProp``,
``register``, ``get_all_registered_operators``, ``NumpyOp`` and ``NDArrayOp`` (custom.py).
"""
from .custom import (CustomOp, CustomOpProp, NDArrayOp, NumpyOp, PythonOp,  # noqa: F401
                     get_all_registered_operators, register)
from .registry import all_ops, find, get  # noqa: F401
