"""What the two operator frontends, ``nd.<op>`` and ``sym.<op>``, share.

Each frontend exposes one generated Python function per registered operator name or alias,
built on first use and cached (a :class:`FunctionTable`), through namespace modules whose
attributes are filled on first access (``nd.contrib``, ``sym._internal`` ...; see
:func:`namespace_hooks`), so importing lightmod generates nothing. How a function takes its
arguments and what it does with them differs between the frontends and stays in
``ndarray/register.py`` (run the operator now) and ``symbol/register.py`` (add a graph node).
"""
import builtins
import collections
import sys
import threading

from ..base import MXNetError
from . import registry

__all__ = ["FunctionTable", "namespace_hooks", "docstring", "OperatorArguments",
           "get_operator_arguments"]


class FunctionTable:
    """The generated functions of one frontend: ``make_function(op, public_name)`` builds the
    function for a name the first time it is asked for; later calls return the same object."""

    def __init__(self, make_function):
        self._make_function = make_function
        self._functions = {}
        self._lock = threading.RLock()    # first use from many threads: one function per name

    def find(self, name):
        """The function of operator ``name`` (name or alias), or None if there is no such op."""
        fn = self._functions.get(name)
        if fn is None:
            op = registry.find(name)
            if op is None:
                return None
            with self._lock:
                fn = self._functions.get(name)
                if fn is None:
                    fn = self._functions[name] = self._make_function(op, name)
        return fn

    def get(self, name):
        """The function of operator ``name``; MXNetError if there is no such op."""
        fn = self.find(name)
        if fn is None:
            raise MXNetError("Cannot find operator '%s' in the registry" % (name,))
        return fn


def namespace_hooks(module_name, prefixes, find_function):
    """``(__getattr__, __dir__)`` for a namespace module of generated functions.

    Attribute ``X`` is ``find_function(prefix + X)`` for the first prefix that names an
    operator (``("_contrib_",)`` makes ``contrib.X`` the ``_contrib_X`` operator; ``""`` takes
    names as they are); it is stored in the module, so the lookup happens once (except for
    names of Python builtins, which the module's own code must keep seeing).
    """
    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        for prefix in prefixes:
            fn = find_function(prefix + name)
            if fn is not None:
                # a cached ``slice`` or ``max`` would shadow the builtin inside the module
                if not hasattr(builtins, name):
                    setattr(sys.modules[module_name], name, fn)
                return fn
        raise AttributeError("module '%s' has no attribute '%s'" % (module_name, name))

    def __dir__():
        names = set(vars(sys.modules[module_name]))
        for op_name in registry.all_names():
            for prefix in prefixes:
                if op_name.startswith(prefix):
                    names.add(op_name[len(prefix):])
        return sorted(names)

    return __getattr__, __dir__


def docstring(op, public_name, array_type, input_note, closing_lines):
    """The docstring of a generated function: one line per input and parameter.

    ``array_type`` names what the inputs are ("NDArray", "Symbol"); ``input_note`` follows each
    input's type (``{input}`` stands for the input's name); ``closing_lines`` describe the
    frontend's own keywords (``out``, ``name``, ``attr``).
    """
    lines = ["%s: the %s operator on %ss." % (public_name, op.name, array_type), "",
             "Parameters", "----------"]
    if op.variadic is not None:
        lines.append("*data : %s (%s is set from their number)" % (array_type, op.variadic))
    else:
        for n in op.inputs:
            lines.append("%s : %s%s" % (n, array_type, input_note.format(input=n)))
    for n, decl in op.params.items():
        if op.variadic is not None and n == op.variadic:
            continue
        default = "required" if decl.required else "optional, default=%r" % (decl.default,)
        lines.append("%s : %s, %s" % (n, decl.describe(), default))
    lines.extend(closing_lines)
    return "\n".join(lines)


OperatorArguments = collections.namedtuple("OperatorArguments", ["narg", "names", "types"])


def get_operator_arguments(op_name):
    """The arguments of operator ``op_name`` (a name or alias) as MXNet describes them: their
    number, their names (inputs first, then parameters) and their types, e.g.
    ``"{'relu', 'sigmoid'}, required"`` or ``"int, optional, default=1"``."""
    op = registry.get(op_name)
    names, types = [], []
    if op.variadic is not None or op.positional_inputs:
        names.append("data")
        types.append("NDArray-or-Symbol[]")
    else:
        for name in tuple(op.inputs) + tuple(op.optional_inputs):
            names.append(name)
            types.append("NDArray-or-Symbol")
    for name, decl in op.params.items():
        names.append(name)
        types.append(_type_text(decl))
    return OperatorArguments(len(names), names, types)


def _type_text(decl):
    """A parameter's type, then 'required' or its default, in MXNet's wording."""
    if isinstance(decl, (registry.Enum, registry.Dtype)):
        values = decl.choices if isinstance(decl, registry.Enum) else registry._DTYPE_NAMES
        choices = ", ".join("'%s'" % c for c in sorted(values))
        kind = "{None, %s}" % choices if decl.none_ok else "{%s}" % choices
        if decl.required:
            return kind + ", required"
        return kind + ",optional, default='%s'" % (decl.default,)
    kind = {registry.OptInt: "int or None", registry.OptFloat: "float or None",
            registry.Int: "int", registry.Float: "float", registry.Bool: "boolean",
            registry.Shape: "Shape(tuple)", registry.FloatTuple: "tuple of <float>",
            registry.Str: "string"}.get(type(decl), decl.type_name)
    if decl.required:
        return kind + ", required"
    default = decl.default
    if isinstance(decl, (registry.OptInt, registry.OptFloat)) and default is None:
        text = "'None'"
    elif isinstance(decl, registry.Bool):
        text = "%d" % bool(default)
    elif isinstance(decl, (registry.Shape, registry.FloatTuple)):
        text = "[%s]" % ",".join(str(d) for d in (default or ()))
    elif isinstance(decl, registry.Str):
        text = "'%s'" % ("" if default is None else default)
    else:
        text = str(default)
    return kind + ", optional, default=" + text
