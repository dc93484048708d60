"""Lazily generated operator namespaces for symbols (``sym.contrib``, ``sym._internal`` ...).

A namespace module sets ``__getattr__ = lazy_getattr(__name__, prefixes)``: attribute ``X`` is
the sym function of the first registered operator among ``prefix + X``, created on first use
and cached in the module.
"""
import sys

from .register import find_function

__all__ = ["lazy_getattr", "lazy_dir"]


def lazy_getattr(module_name, prefixes):
    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        for prefix in prefixes:
            fn = find_function(prefix + name)
            if fn is not None:
                setattr(sys.modules[module_name], name, fn)
                return fn
        raise AttributeError("module '%s' has no attribute '%s'" % (module_name, name))
    return __getattr__


def lazy_dir(module_name, prefixes):
    def __dir__():
        from ..operator.registry import all_names
        names = set(vars(sys.modules[module_name]))
        for op_name in all_names():
            for prefix in prefixes:
                if op_name.startswith(prefix):
                    names.add(op_name[len(prefix):])
        return sorted(names)
    return __dir__
