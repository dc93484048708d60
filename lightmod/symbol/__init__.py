"""``mx.sym`` / ``mx.symbol``: symbolic graphs (MXNet 1.9.1's Symbol API).

``Symbol``, ``var``/``Variable``, ``Group``, ``load``/``load_json``, ``pow``/``maximum``/...,
``zeros``/``ones``/``full``, and one generated function per registered operator
(``sym.FullyConnected``...; created on first access). ``sym.contrib.X`` are the ``_contrib_X``
operators; ``sym._internal`` and ``sym.op`` hold every operator name, underscore ones included.
"""
from .symbol import (Symbol, var, Variable, Group, load, load_json, pow, power,  # noqa: F401
                     maximum, minimum, hypot, zeros, ones, full, NotImplementedForSymbol)
from . import register  # noqa: F401
from . import contrib, _internal, op, random, linalg, sparse  # noqa: F401
from ._namespace import lazy_getattr as _lazy_getattr, lazy_dir as _lazy_dir

_op_getattr = _lazy_getattr(__name__, ("",))


def __getattr__(name):
    # underscore operators live in sym._internal only, as in MXNet
    if name.startswith("_"):
        raise AttributeError("module '%s' has no attribute '%s'" % (__name__, name))
    return _op_getattr(name)


__dir__ = _lazy_dir(__name__, ("",))
