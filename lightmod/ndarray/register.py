"""Imperative operator calls: ``invoke`` and the generated ``nd.<op>`` functions.

``invoke(op, inputs, attrs, out=None)`` runs one registered operator on NDArrays: parse the
attributes, infer output shapes and dtypes, allocate outputs on the inputs' context (or use
``out``, which may alias an input, as in ``nd.sgd_update(w, g, out=w)``; it is never cleared
first), run ``op.forward`` with the context's kernel set, and return the visible output(s).

``op_function(name)`` builds (once, lazily) the Python function that ``nd.<name>`` exposes:
inputs positionally or by input name, then parameters positionally in declaration order or by
keyword, plus ``out=`` and ``name=`` (ignored). Variadic operators (``Concat``, ``add_n``,
``stack``) take ``*arrays`` and set their count parameter themselves.
"""
import numpy as np

from .. import engine, kernels
from ..base import MXNetError
from ..context import Context, current_context
from ..operator import frontend, registry, storage
from . import autograd as _autograd
from .ndarray import NDArray, _alloc, install_hooks

__all__ = ["invoke", "op_function", "find_function"]


def _get_op(op):
    if isinstance(op, registry.Operator):
        return op
    found = registry.find(op)
    if found is None:
        raise MXNetError("Cannot find operator '%s' in the registry" % (op,))
    return found


def _context_of(op, p, inputs):
    if inputs:
        ctx = inputs[0].context
        for x in inputs[1:]:
            other = x.context
            if other != ctx and (other.device_typeid == 2 or ctx.device_typeid == 2):
                raise MXNetError("Operator %s: inputs live on different contexts (%s and %s)"
                                 % (op.name, ctx, other))
        return ctx
    text = p.get("ctx")
    if text:
        if isinstance(text, Context):
            return text
        name, _, rest = str(text).partition("(")
        return Context(name.strip(), int(rest.rstrip(")") or 0))
    return current_context()


_DTYPE_NAMES = {}   # numpy dtype -> its name (np.dtype.name is slow on the hot path)


def _dtype_name(dtype):
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = np.dtype(dtype).name
    return name


def _shape_known(shape):
    return shape is not None and all(d is not None and d >= 0 for d in shape)


def invoke(op, inputs, attrs=None, out=None):
    """Run operator ``op`` (name or Operator) on NDArray ``inputs`` with ``attrs``."""
    op = _get_op(op)
    return invoke_parsed(op, op.parse(attrs or {}), inputs, out)


def invoke_parsed(op, p, inputs, out=None):
    """``invoke`` with already parsed parameters."""
    names = op.list_inputs(p)
    if len(inputs) != len(names):
        raise MXNetError("Operator %s expects %d input(s) (%s), got %d"
                         % (op.name, len(names), ", ".join(names), len(inputs)))
    for name, x in zip(names, inputs):
        if not isinstance(x, NDArray):
            raise TypeError("Operator %s: input '%s' must be an NDArray, got %s"
                            % (op.name, name, type(x).__name__))
    ctx = _context_of(op, p, inputs)
    in_shapes = [x.shape for x in inputs]
    try:
        filled, out_shapes = op.infer_shape(p, list(in_shapes))
    except MXNetError as err:
        # say which arrays came in, whatever the operator's own message says
        message = "%s (input shapes: %s)" % (err, _describe(names, in_shapes))
        try:
            wrapped = type(err)(message)
        except TypeError:
            wrapped = MXNetError(message)
        raise wrapped from None
    for name, given, inferred in zip(names, in_shapes, filled):
        if inferred == given:
            continue
        try:
            registry.merge_shape(given, inferred)
        except ValueError:
            raise MXNetError("Operator %s: input '%s' has shape %s, expected %s (input shapes: %s)"
                             % (op.name, name, given, inferred, _describe(names, in_shapes))) \
                from None
    if not all(_shape_known(s) for s in out_shapes):
        raise MXNetError("Operator %s: cannot infer the output shape from input shapes %s "
                         "(got %s)" % (op.name, _describe(names, in_shapes), out_shapes))
    in_types = [_dtype_name(x._data.dtype) for x in inputs]
    _, out_types = op.infer_type(p, in_types)
    out_types = [t if t is not None else "float32" for t in out_types]

    visible = op.num_visible_outputs(p)
    given = [] if out is None else (list(out) if isinstance(out, (list, tuple)) else [out])
    if len(given) > visible:
        raise MXNetError("Operator %s has %d output(s), got %d arrays in out="
                         % (op.name, visible, len(given)))
    if given and _autograd.takes_part(inputs):
        _autograd.check_writes(inputs, given, "operator %s with out=" % op.name)
    in_stypes = [x.stype for x in inputs]
    stypes = storage.output_stypes(op, p, in_stypes, in_shapes)
    outputs = []
    for i, (shape, dtype) in enumerate(zip(out_shapes, out_types)):
        if i < len(given):
            o = given[i]
            if not isinstance(o, NDArray):
                raise TypeError("Operator %s: out= must be NDArray(s)" % op.name)
            if o.shape != tuple(shape):
                raise MXNetError("Operator %s: out= has shape %s, the result has shape %s"
                                 % (op.name, o.shape, tuple(shape)))
            if not o.writable:
                raise MXNetError("Operator %s: out= is read-only" % op.name)
            outputs.append(o)
        else:
            # the storage type picks the class (CSRNDArray, RowSparseNDArray) at creation
            outputs.append(NDArray(_alloc(tuple(shape), dtype, ctx), ctx, stypes[i]))
    # a failure while computing is reported where the result is read (lightmod/engine.py);
    # an input holding such a failure makes the outputs hold it too, without computing
    failed = engine.pending_of(inputs) if engine.any_uncleared() else None
    state = {"context": ctx, "in_stypes": in_stypes}
    if failed is None:
        try:
            op.forward(p, kernels.for_context(ctx), [x._data for x in inputs],
                       [o._data for o in outputs], _autograd.is_training(), state)
        except engine.DeferredOperatorError as err:
            failed = engine.defer(err)
    if failed is not None:
        for o in outputs:
            o._error = failed
    elif _autograd.takes_part(inputs):
        node = _autograd.record_operator(op, p, inputs, [o._data for o in outputs], visible,
                                         state)
        _autograd.label_outputs(node, outputs[:visible])
    if out is not None:
        return out
    if visible == 1:
        return outputs[0]
    return outputs[:visible]


def _describe(names, shapes):
    return "[" + ", ".join("%s: %s" % (n, s) for n, s in zip(names, shapes)) + "]"


# ---------------------------------------------------------------------------------------------
# generated functions
# ---------------------------------------------------------------------------------------------
def _is_input_value(x):
    return isinstance(x, NDArray) or x is None


def _accepts_none(op, key):
    """Whether parameter ``key`` of ``op`` takes None as a value of its own (``axis=None``
    of the reductions means "the flattened input", not "the default")."""
    decl = op.params.get(key)
    if decl is None:
        return False
    try:
        return decl.parse(None) is None
    except (TypeError, ValueError, AttributeError):
        return False


def _make_function(op, public_name):
    param_names = list(op.params)
    declared_inputs = list(op.inputs) + list(op.optional_inputs)

    def function(*args, out=None, name=None, **kwargs):
        attrs = {}
        by_name = {}
        if op.variadic is not None or op.positional_inputs:
            arrays = []
            for a in args:
                if isinstance(a, (list, tuple)) and all(isinstance(x, NDArray) for x in a):
                    arrays.extend(a)
                elif isinstance(a, NDArray):
                    arrays.append(a)
                else:
                    raise TypeError("%s: positional arguments must be NDArrays, got %s"
                                    % (public_name, type(a).__name__))
            for key, value in kwargs.items():
                if key == "attr" or value is None:
                    continue
                attrs[key] = value
            if op.variadic is not None and op.variadic not in attrs:
                attrs[op.variadic] = len(arrays)
            p = op.parse(attrs)
            # the count need not be the number of arrays (bilinear UpSampling's weight is extra);
            # operators with positional inputs check their own count
            if op.variadic is not None and len(op.list_inputs(p)) != len(arrays):
                raise MXNetError("%s: %s=%s means %d input arrays, but %d were given"
                                 % (public_name, op.variadic, attrs[op.variadic],
                                    len(op.list_inputs(p)), len(arrays)))
            return invoke_parsed(op, p, arrays, out)
        pos = list(args)
        for input_name in declared_inputs:
            if not pos or not _is_input_value(pos[0]):
                break
            value = pos.pop(0)
            if value is not None:
                by_name[input_name] = value
        if len(pos) > len(param_names):
            unfilled = [n for n in declared_inputs if n not in by_name]
            if unfilled:
                raise TypeError("%s: input '%s' must be an NDArray, got %s"
                                % (public_name, unfilled[0], type(pos[0]).__name__))
            raise TypeError("%s: too many positional arguments" % public_name)
        for pname, value in zip(param_names, pos):
            if isinstance(value, NDArray):
                raise TypeError("%s: got an NDArray for parameter '%s'" % (public_name, pname))
            if pname in kwargs:
                raise TypeError("%s: got multiple values for '%s'" % (public_name, pname))
            if value is not None:
                attrs[pname] = value
        for key, value in kwargs.items():
            if key in declared_inputs:
                if key in by_name:
                    raise TypeError("%s: got multiple values for input '%s'" % (public_name, key))
                if value is not None:
                    by_name[key] = value
            elif key == "attr" or (value is None and not _accepts_none(op, key)):
                continue
            else:
                attrs[key] = value
        p = op.parse(attrs)
        names = op.list_inputs(p)
        inputs = []
        for input_name in names:
            if input_name not in by_name:
                raise MXNetError("Operator %s: input '%s' is missing (inputs: %s)"
                                 % (op.name, input_name, ", ".join(names)))
            inputs.append(by_name.pop(input_name))
        if by_name:
            raise MXNetError("Operator %s: unexpected input(s) %s for these parameters"
                             % (op.name, sorted(by_name)))
        return invoke_parsed(op, p, inputs, out)

    function.__name__ = public_name
    function.__qualname__ = public_name
    function.__doc__ = frontend.docstring(op, public_name, "NDArray", "",
                                          ["out : NDArray, optional (the output to write)"])
    return function


_FUNCTIONS = frontend.FunctionTable(_make_function)
find_function = _FUNCTIONS.find     # the nd function of an operator name or alias, or None
op_function = _FUNCTIONS.get        # the same, MXNetError for an unknown name


install_hooks(op_function=op_function, invoke=invoke)
