"""``mx.error``: MXNet's structured error classes.

MXNet's ``register`` maps the error-type names its C++ library raises to Python classes.
lightmod raises Python exceptions directly, so registering only records the class under its
name (``registered(name)`` looks it up); the classes themselves behave as in MXNet.
"""
from .base import MXNetError

__all__ = ["MXNetError", "InternalError", "register", "registered"]

_REGISTERED = {}


def register(name_or_class=None, cls=None):
    """Record an error class under a name: ``@register``, ``@register("Name")`` or
    ``register("Name", cls)``. Returns the class (or, for a bare name, the decorator)."""
    if isinstance(name_or_class, type):
        _REGISTERED[name_or_class.__name__] = name_or_class
        return name_or_class

    def record(klass):
        _REGISTERED[name_or_class or klass.__name__] = klass
        return klass
    return record(cls) if cls is not None else record


def registered(name):
    """The class registered under ``name`` (KeyError when none is)."""
    return _REGISTERED[name]


@register
class InternalError(MXNetError):
    """A bug in lightmod itself rather than in the caller's use of it (MXNet adds a hint to
    report it; so does this, pointing at lightmod rather than MXNet's tracker)."""

    def __init__(self, msg):
        if "hint:" not in msg:
            msg += ("\nlightmod hint: You hit an internal error. Please report it to "
                    "lightmod's maintainers with the traceback.")
        super().__init__(msg)


register(MXNetError)
for _builtin in (ValueError, TypeError, AttributeError, IndexError, NotImplementedError):
    register(_builtin)
del _builtin
