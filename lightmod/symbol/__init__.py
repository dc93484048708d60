"""``mx.sym`` / ``mx.symbol``: symbolic graphs (MXNet 1.9.1's Symbol API).

``Symbol``, ``var``/``Variable``, ``Group``, ``load``/``load_json``, ``pow``/``maximum``/...,
``zeros``/``ones``/``full``, and one generated function per registered operator
(``sym.FullyConnected``...; created on first access). ``sym.contrib.X`` are the ``_contrib_X``
operators; ``sym._internal`` and ``sym.op`` hold every operator name, underscore ones included.
"""
from .symbol import (Symbol, var, Variable, Group, load, load_json, pow, power,  # noqa: F401
                     maximum, minimum, hypot, zeros, ones, full, NotImplementedForSymbol,
                     histogram)
from . import register  # noqa: F401
from . import contrib, _internal, op, random, linalg, sparse, image  # noqa: F401
from ..operator.frontend import namespace_hooks as _namespace_hooks
from .register import find_function as _find_function

_op_getattr, __dir__ = _namespace_hooks(__name__, ("",), _find_function)


def __getattr__(name):
    # underscore operators live in sym._internal only, as in MXNet
    if name.startswith("_"):
        raise AttributeError("module '%s' has no attribute '%s'" % (__name__, name))
    return _op_getattr(name)
