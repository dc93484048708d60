"""The generated ``sym.<op>`` functions, one per registered operator name or alias.

Each function takes the operator's inputs first (positionally or by input name), then its
parameters positionally in declaration order or by keyword, plus ``name=``, ``attr=`` and
``__dunder__`` attributes, exactly like MXNet's generated functions; the new node is named by
the current NameManager with the lower-cased function name as hint (``sym.FullyConnected`` →
``fullyconnected0``, ``sym._PlusScalar`` → ``_plusscalar0``). Variadic operators (``Concat``,
``add_n``...) take ``*symbols`` and set their count parameter themselves. Functions are built
lazily on first use and cached.
"""
from ..operator import custom as _custom_op
from ..operator import frontend
from .symbol import Symbol, create_op_symbol, install_hooks

__all__ = ["find_function", "op_function"]


def _make_function(op, public_name):
    hint = op.hint if (op.hint is not None and public_name == op.name) else public_name.lower()
    if op.variadic is not None or op.positional_inputs:
        function = _variadic_function(op, hint, public_name)
    else:
        function = _plain_function(op, hint, public_name)
    function.__name__ = public_name
    function.__qualname__ = public_name
    function.__doc__ = frontend.docstring(
        op, public_name, "Symbol", ", optional (a variable '<name>_{input}' when missing)",
        ["name : str, optional (the node's name; default from the NameManager)",
         "attr : dict of str to str, optional (extra attributes)"])
    return function


def _pop_common(kwargs):
    kwargs.pop("out", None)
    return kwargs.pop("name", None), kwargs.pop("attr", None)


def _variadic_function(op, hint, public_name):
    def function(*args, **kwargs):
        name, attr = _pop_common(kwargs)
        sym_args = []
        for a in args:
            if isinstance(a, Symbol):
                sym_args.append(a)
            elif isinstance(a, (list, tuple)) and a and all(isinstance(x, Symbol) for x in a):
                sym_args.extend(a)
            else:
                raise AssertionError("Positional arguments must be Symbol instances, but got "
                                     "%s" % str(a))
        sym_kwargs = {k: v for k, v in kwargs.items() if isinstance(v, Symbol)}
        params = {k: v for k, v in kwargs.items() if not isinstance(v, Symbol)}
        if op.variadic is not None and op.variadic not in params:
            params[op.variadic] = len(sym_args) + len(sym_kwargs)
        return create_op_symbol(op, hint, sym_args, params, sym_kwargs, name, attr)
    return function


def _plain_function(op, hint, public_name):
    inputs = tuple(op.inputs) + tuple(op.optional_inputs)
    slots = inputs + tuple(op.params)

    def function(*args, **kwargs):
        name, attr = _pop_common(kwargs)
        if len(args) > len(slots):
            raise TypeError("%s() takes at most %d positional arguments (%s), %d given"
                            % (public_name, len(slots), ", ".join(slots), len(args)))
        sym_kwargs, params = {}, {}
        for slot, value in zip(slots, args):
            if slot in kwargs:
                raise TypeError("%s() got multiple values for argument '%s'"
                                % (public_name, slot))
            if slot in inputs:
                if value is not None:
                    _check_input(slot, value)
                    sym_kwargs[slot] = value
            elif isinstance(value, Symbol):
                raise TypeError("%s(): parameter '%s' got a Symbol; inputs are %s"
                                % (public_name, slot, ", ".join(inputs)))
            else:
                params[slot] = value
        for key, value in kwargs.items():
            if key in inputs:
                if value is not None:
                    _check_input(key, value)
                    sym_kwargs[key] = value
            elif isinstance(value, Symbol):
                sym_kwargs[key] = value
            else:
                params[key] = value
        return create_op_symbol(op, hint, (), params, sym_kwargs, name, attr)
    return function


def _check_input(slot, value):
    if not isinstance(value, Symbol):
        raise AssertionError("Argument %s must be Symbol instances, but got %s"
                             % (slot, str(value)))


_FUNCTIONS = frontend.FunctionTable(_make_function)
find_function = _FUNCTIONS.find     # the sym function of an operator name or alias, or None
op_function = _FUNCTIONS.get        # the same, MXNetError for an unknown name


install_hooks(op_function=op_function)
# the legacy NumpyOp/NDArrayOp classes build their symbols through sym.Custom
_custom_op.install_front_ends(symbol_custom=lambda *args, **kwargs:
                              op_function("Custom")(*args, **kwargs))
