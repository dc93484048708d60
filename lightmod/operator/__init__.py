"""Operator declarations (one file per family); see registry.py for the conventions.

``mx.operator`` is also MXNet's module of Python operators: ``CustomOp``, ``CustomOpProp``,
``register``, ``get_all_registered_operators``, ``NumpyOp`` and ``NDArrayOp`` (custom.py).
"""
from .registry import get, find, all_ops  # noqa: F401
from .custom import (CustomOp, CustomOpProp, register, get_all_registered_operators,  # noqa: F401
                     PythonOp, NumpyOp, NDArrayOp)
