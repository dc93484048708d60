"""The ONNX translation table, keyed by the operator registry.

Every entry belongs to one operator of :mod:`lightmod.operator.registry`, under its canonical name;
aliases (``flatten``, ``_Plus``, ``Softmax``...) reach the same entry through the registry's own
lookup, so the table never repeats the operator list. :func:`translates` checks each name against
the registry when the entry is declared: a misspelt name or an alias fails at import time.

A translation is ``fn(g, node)``: ``g`` is the :class:`~lightmod.onnx._export.OnnxGraph` being
built and ``node`` the :class:`~lightmod.onnx._export.NodeInfo` of one lightmod node (parsed
parameters, input tensor names, inferred shapes and dtypes). It adds ONNX nodes to ``g`` and
returns the ONNX tensor names of the node's visible outputs, in order.
"""
import collections
import importlib

from ..base import MXNetError
from ..operator import registry

__all__ = ["Translation", "translates", "lookup", "supported_operators", "TRANSLATIONS"]

Translation = collections.namedtuple("Translation", "op_name fn reads")

TRANSLATIONS = {}   # canonical registry name -> Translation


def translates(*op_names, reads=None):
    """Decorator: declare ``fn`` as the ONNX translation of the registry operators ``op_names``.

    ``reads`` lists the input positions the translation uses (None: all of them). Inputs left out
    (the label of a loss head) are not exported, nor is anything that only feeds them.
    """
    def declare(fn):
        for name in op_names:
            op = registry.find(name)
            if op is None:
                raise MXNetError("ONNX translation %s: no operator named '%s' in the registry"
                                 % (fn.__name__, name))
            if op.name != name:
                raise MXNetError("ONNX translation %s: '%s' is an alias of '%s'; key the entry "
                                 "by the canonical name" % (fn.__name__, name, op.name))
            if name in TRANSLATIONS:
                raise MXNetError("ONNX translation for '%s' declared twice" % name)
            TRANSLATIONS[name] = Translation(name, fn, None if reads is None else tuple(reads))
        return fn
    return declare


def lookup(op_name):
    """The Translation for an operator name or alias, or None."""
    _load()
    op = registry.find(op_name)
    return None if op is None else TRANSLATIONS.get(op.name)


def supported_operators():
    """Canonical names of every operator that has a translation, sorted."""
    _load()
    return sorted(TRANSLATIONS)


def _load():
    # importing the module declares its entries (once; later calls find it in sys.modules)
    importlib.import_module(__package__ + "._translations")
