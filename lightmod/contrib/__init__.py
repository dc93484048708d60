"""``mx.contrib``: the contrib operator namespaces and the contrib add-ons.

``mx.contrib.nd`` / ``mx.contrib.ndarray`` and ``mx.contrib.sym`` / ``mx.contrib.symbol`` are the
contrib operator namespaces (the same modules as ``mx.nd.contrib`` and ``mx.sym.contrib``). Every
other attribute names a submodule of this package (for example ``mx.contrib.onnx``) and is imported
on first use, so that importing lightmod stays cheap.
"""
import importlib

from ..ndarray import contrib as ndarray
from ..symbol import contrib as symbol

nd = ndarray
sym = symbol


def __getattr__(name):
    if name.startswith("_"):
        raise AttributeError(name)
    try:
        module = importlib.import_module("%s.%s" % (__name__, name))
    except ModuleNotFoundError as err:
        if err.name != "%s.%s" % (__name__, name):
            raise
        raise AttributeError("module %r has no attribute %r" % (__name__, name)) from None
    globals()[name] = module
    return module
