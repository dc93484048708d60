"""Attribute scopes: ``with mx.AttrScope(ctx_group='dev1', lr_mult='2'):`` (MXNet 1.9.1).

Every symbol created inside a scope (variables and operators alike) receives the scope's
attributes; nested scopes merge, the inner one winning on conflicts. Values must be strings.
The "hidden" keys (``ctx_group``, ``lr_mult``, ...) are stored as ``__key__`` when the attributes
reach a symbol (see ``Symbol._set_attr``). The current scope is thread-local.
"""
import threading

from .base import ThreadScopeMeta, current_scope, string_types

__all__ = ["AttrScope", "current"]


class AttrScope(metaclass=ThreadScopeMeta):
    """Attributes given to every symbol created while the scope is active."""
    _current = threading.local()

    def __init__(self, **kwargs):
        self._old_scope = None
        for key, value in kwargs.items():
            if not isinstance(value, string_types):
                raise ValueError("Attributes need to be string (attribute '%s' is %r)"
                                 % (key, value))
        self._attr = kwargs

    def get(self, attr):
        """The scope's attributes updated with ``attr`` (a new dict; ``attr`` wins)."""
        if self._attr:
            merged = dict(self._attr)
            if attr:
                merged.update(attr)
            return merged
        return dict(attr) if attr else {}

    def __enter__(self):
        self._old_scope = current()
        merged = dict(self._old_scope._attr)
        merged.update(self._attr)
        self._attr = merged
        AttrScope._current.value = self
        return self

    def __exit__(self, ptype, value, trace):
        AttrScope._current.value = self._old_scope


def current():
    """The attribute scope in force in this thread (an empty one is created per thread)."""
    return current_scope(AttrScope)


AttrScope._current.value = AttrScope()
