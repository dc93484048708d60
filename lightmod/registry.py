"""Name → class registries with MXNet's factory functions (``mxnet.registry``).

Initializers and metrics are looked up by lower-cased name: ``create('Xavier')``,
``create('acc')``, ``create('["constant", {"value": 0.5}]')``. The three factories below build,
for one base class, the ``register`` decorator, the ``alias`` decorator and ``create``.
"""
import functools
import json
import warnings

from .base import string_types

__all__ = ["get_registry", "get_register_func", "get_alias_func", "get_create_func"]

_REGISTRY = {}


def _table(base_class):
    return _REGISTRY.setdefault(base_class, {})


def get_registry(base_class):
    """A copy of the name → class table registered for ``base_class``."""
    return dict(_table(base_class))


def get_register_func(base_class, nickname):
    """A ``register(klass, name=None)`` function for subclasses of ``base_class``."""
    table = _table(base_class)

    def register(klass, name=None):
        if not (isinstance(klass, type) and issubclass(klass, base_class)):
            raise AssertionError("Can only register subclass of %s (got %r)"
                                 % (base_class.__name__, klass))
        key = (name if name is not None else klass.__name__).lower()
        if key in table and table[key] is not klass:
            old = table[key]
            warnings.warn("New %s %s.%s registered with name %s is overriding existing %s %s.%s"
                          % (nickname, klass.__module__, klass.__name__, key, nickname,
                             old.__module__, old.__name__), UserWarning, stacklevel=2)
        table[key] = klass
        return klass

    register.__doc__ = "Register a %s class under its lower-cased name." % nickname
    return register


def get_alias_func(base_class, nickname):
    """An ``alias(*names)`` decorator that registers a class under extra names."""
    register = get_register_func(base_class, nickname)

    def alias(*aliases):
        return functools.partial(_register_under, register, aliases)

    alias.__doc__ = "Class decorator: register a %s class under each given name too." % nickname
    return alias


def _register_under(register, names, klass):
    """``register(klass, name)`` for every name; returns the class (a decorator's result)."""
    for name in names:
        register(klass, name)
    return klass


def get_create_func(base_class, nickname):
    """A ``create(name_or_instance, *args, **kwargs)`` factory for ``base_class``.

    Accepted first arguments: an instance (returned as is; extra arguments are an error), a
    dict of constructor keywords with the name under ``nickname``, a JSON string
    ``'["name", {kwargs}]'`` or ``'{"nickname": "name", ...}'``, or a registered name
    (case-insensitive).
    """
    table = _table(base_class)

    def create(*args, **kwargs):
        if args:
            name, args = args[0], args[1:]
        else:
            if nickname not in kwargs:
                raise TypeError("create() needs the %s name as first argument or as %s=..."
                                % (nickname, nickname))
            name = kwargs.pop(nickname)
        if isinstance(name, base_class):
            if args or kwargs:
                raise AssertionError("%s is already an instance. Additional arguments are "
                                     "invalid" % nickname)
            return name
        if isinstance(name, dict):
            return create(**name)
        if not isinstance(name, string_types):
            raise AssertionError("%s must be of string type (got %r)" % (nickname, name))
        if name.startswith("["):
            if args or kwargs:
                raise AssertionError("a JSON %s description takes no extra arguments" % nickname)
            name, kwargs = json.loads(name)
            return create(name, **kwargs)
        if name.startswith("{"):
            if args or kwargs:
                raise AssertionError("a JSON %s description takes no extra arguments" % nickname)
            return create(**json.loads(name))
        key = name.lower()
        if key not in table:
            raise AssertionError("%s is not registered. Please register with %s.register first"
                                 % (key, nickname))
        return table[key](*args, **kwargs)

    create.__doc__ = "Create a %s instance from a name, JSON string, dict or instance." % nickname
    return create
