"""``mx.error``: MXNet's structured error classes.

In MXNet, ``register`` maps the error-type names its C++ library raises to Python classes.
lightmod has no such library: it raises Python exceptions directly, so there is no name to map
and ``register`` (kept so that code decorating its own error classes runs unchanged) returns
the class as it is. ``InternalError`` behaves as in MXNet.
"""
from .base import MXNetError

__all__ = ["MXNetError", "InternalError", "register"]


def register(name_or_class=None, cls=None):
    """``@register``, ``@register("Name")`` or ``register("Name", cls)``: returns the class
    (or, given only a name, a decorator returning it) unchanged."""
    if isinstance(name_or_class, type):
        return name_or_class
    if cls is not None:
        return cls
    return lambda klass: klass


class InternalError(MXNetError):
    """A bug in lightmod itself rather than in the caller's use of it (MXNet adds a hint to
    report it; so does this, pointing at lightmod rather than MXNet's tracker)."""

    def __init__(self, msg):
        if "hint:" not in msg:
            msg += ("\nlightmod hint: You hit an internal error. Please report it to "
                    "lightmod's maintainers with the traceback.")
        super().__init__(msg)
