"""Lazily generated operator namespaces (``nd.contrib``, ``nd._internal``, ``nd.op`` ...).

Each namespace module defines ``__getattr__ = lazy_getattr(prefixes)``: an attribute ``X`` is
the nd function of the first registered operator among ``prefix + X``. Functions are created
on first use and cached in the module, so importing lightmod generates nothing.
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
                if prefix and op_name.startswith(prefix):
                    names.add(op_name[len(prefix):])
                elif not prefix:
                    names.add(op_name)
        return sorted(names)
    return __dir__
