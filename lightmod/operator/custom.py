"""Operators written in Python: ``CustomOp`` / ``CustomOpProp`` / ``register`` and ``Custom``.

A program describes its operator with two classes, as in MXNet 1.x:

* a property class (subclass of :class:`CustomOpProp`) registered under a name with
  ``@mx.operator.register("name")``: it lists the arguments, outputs and auxiliary states,
  infers shapes and types, says which arrays backward needs, and creates the operator;
* an operator class (subclass of :class:`CustomOp`) whose ``forward`` / ``backward`` fill the
  output / gradient arrays, usually through ``self.assign(dst, req, src)``.

``mx.sym.Custom(*inputs, op_type="name", **kwargs)`` and ``mx.nd.Custom(...)`` apply it. Both
come from the one operator declaration ``Custom`` below, registered like every built-in
operator: its parameters are ``op_type`` plus whatever keywords the property's constructor
takes, stored as strings on the symbol node (so JSON keeps them) and handed to the constructor
as strings, as MXNet does.

Speed
-----
The executor calls ``forward`` / ``backward`` directly, as one step of its plan, on the same
thread. The arrays they receive are NDArrays (``lightmod.ndarray.custom_array.CustomOpArray``) that wrap the
executor's own buffers; they are built once per executor and reused every step, so a step
allocates nothing. On the CPU ``x.numpy_view()`` is the array's memory as a numpy array, no
copy: hand it to numpy or to an ``@numba.njit`` function, and writes land in the executor's
buffer. ``x.asnumpy()`` keeps MXNet's meaning (a copy). On a GPU ``x`` itself can be passed to
a ``numba.cuda`` kernel (it has ``__cuda_array_interface__``); ``x.cuda_view()`` is the numba
device array.

Errors
------
An exception raised by any hook (the property's or the operator's) reaches the caller as an
``MXNetError`` whose message names the operator type and the hook and carries the original
message; the original exception is chained as ``__cause__``. Nothing is left half-done that a
later call depends on: the next forward runs the whole graph again.
"""
import warnings

import numpy as np

from ..base import DTYPE_MX_TO_NP, DTYPE_NP_TO_MX, MXNetError
from ..context import Context
from . import registry

__all__ = ["CustomOp", "CustomOpProp", "register", "get_all_registered_operators",
           "PythonOp", "NumpyOp", "NDArrayOp"]

_PROPS = {}            # op_type -> property class


# The one operator that hands NDArrays to user code. The operator layer sits below the array
# and symbol front-ends, so they install what it needs when they load (install_front_ends):
# how to wrap an executor buffer as an NDArray, how to allocate a zero array, and sym.Custom.
_FRONT_END = {}


def install_front_ends(**functions):
    """Called by the ndarray layer (``wrap``, ``zeros_like``) and the symbol layer
    (``symbol_custom``) when they load."""
    _FRONT_END.update(functions)


def _front_end(name):
    try:
        return _FRONT_END[name]
    except KeyError:
        raise MXNetError("custom operators need lightmod's array and symbol front-ends: "
                         "import lightmod first") from None


def _wrap(data, ctx, writable):
    return _front_end("wrap")(data, ctx, writable)


def _zeros_like(data, ctx):
    return _front_end("zeros_like")(data, ctx)


# ---------------------------------------------------------------------------------------------
# the user-facing base classes
# ---------------------------------------------------------------------------------------------
class CustomOp:
    """Base class of the computation of a custom operator (override forward / backward)."""

    def __init__(self):
        pass

    def forward(self, is_train, req, in_data, out_data, aux):
        """Fill ``out_data`` from ``in_data`` (and ``aux``); ``req[i]`` says how to write
        output i ('null', 'write', 'inplace' or 'add'); see :meth:`assign`."""

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        """Fill ``in_grad`` (one array per argument) following ``req``."""

    def assign(self, dst, req, src):
        """Store ``src`` into ``dst`` as ``req`` asks: 'null' leaves dst alone, 'write' and
        'inplace' overwrite it, 'add' accumulates into it."""
        if req == "null":
            return
        if req == "add":
            dst[:] += src
        elif req in ("write", "inplace"):
            dst[:] = src
        else:
            raise MXNetError("CustomOp.assign: req must be 'null', 'write', 'inplace' or "
                             "'add', got %r" % (req,))


class CustomOpProp:
    """Base class of the description of a custom operator (override what differs).

    ``need_top_grad``: whether backward reads the gradient of the outputs; a loss layer says
    False, and then needs no head gradient when it ends a network.
    """

    def __init__(self, need_top_grad=True):
        self.need_top_grad_ = need_top_grad

    def list_arguments(self):
        return ["data"]

    def list_outputs(self):
        return ["output"]

    def list_auxiliary_states(self):
        return []

    def infer_shape(self, in_shape):
        """``(argument shapes, output shapes, aux shapes)`` from the argument shapes; by
        default every output and no aux state has the first argument's shape."""
        return in_shape, [in_shape[0]] * len(self.list_outputs()), []

    def infer_type(self, in_type):
        """``(argument types, output types, aux types)``; by default all the first one's."""
        first = in_type[0]
        return (in_type, [first] * len(self.list_outputs()),
                [first] * len(self.list_auxiliary_states()))

    def infer_storage_type(self, in_stype):
        """Storage types; the default accepts dense ('default') inputs only."""
        for i, stype in enumerate(in_stype):
            if stype != "default":
                raise MXNetError("input %d has storage type '%s': the default "
                                 "infer_storage_type takes dense inputs only" % (i, stype))
        return (in_stype, ["default"] * len(self.list_outputs()),
                ["default"] * len(self.list_auxiliary_states()))

    def infer_storage_type_backward(self, ograd_stype, in_stype, out_stype, igrad_stype,
                                    aux_stype):
        """Storage types of the backward arrays; the default makes every one dense."""
        return tuple(["default"] * len(group) for group in
                     (ograd_stype, in_stype, out_stype, igrad_stype, aux_stype))

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        """The ids (among those given) of the arrays backward reads."""
        needed = list(out_grad) if self.need_top_grad_ else []
        return needed + list(in_data) + list(out_data)

    def create_operator(self, ctx, in_shapes, in_dtypes):
        return CustomOp()


def register(reg_name):
    """Class decorator: register a :class:`CustomOpProp` subclass as op_type ``reg_name``."""
    def do_register(prop_cls):
        if not isinstance(prop_cls, type):
            raise MXNetError("mx.operator.register(%r): expected a class (a CustomOpProp "
                             "subclass), got %r" % (reg_name, prop_cls))
        if reg_name in _PROPS and _PROPS[reg_name] is not prop_cls:
            warnings.warn("custom operator %r registered again: the new class replaces %s"
                          % (reg_name, _PROPS[reg_name].__name__), stacklevel=2)
        _PROPS[reg_name] = prop_cls
        return prop_cls
    if not isinstance(reg_name, str) or not reg_name:
        raise MXNetError("mx.operator.register: the name must be a non-empty string, got %r"
                         % (reg_name,))
    return do_register


register("custom_op")(CustomOpProp)


def get_all_registered_operators():
    """The names (and aliases) of every operator lightmod knows, as MXNet lists its own."""
    return sorted(registry.all_names())


# ---------------------------------------------------------------------------------------------
# calling user code
# ---------------------------------------------------------------------------------------------
def _user_call(op_type, hook, function, *args, **kwargs):
    """function(*args, **kwargs), any exception turned into an MXNetError naming the hook."""
    try:
        return function(*args, **kwargs)
    except Exception as err:  # every user error becomes the MXNetError MXNet raises
        message = str(err) or type(err).__name__
        if not isinstance(err, MXNetError):
            message = "%s: %s" % (type(err).__name__, message)
        raise MXNetError("Error in custom operator '%s' (%s): %s"
                         % (op_type, hook, message)) from err


def _names(op_type, hook, value):
    if isinstance(value, str) or not all(isinstance(n, str) for n in value):
        raise MXNetError("Error in custom operator '%s' (%s): expected a list of names, got %r"
                         % (op_type, hook, value))
    return [str(n) for n in value]


def _split_result(op_type, hook, result, counts):
    """The (args, outputs, aux) lists a property's infer_* returned, checked against counts."""
    if not isinstance(result, (list, tuple)) or len(result) not in (2, 3):
        raise MXNetError("Error in custom operator '%s' (%s): must return 2 or 3 lists, got %r"
                         % (op_type, hook, result))
    parts = list(result) if len(result) == 3 else list(result) + [[]]
    for part, count, what in zip(parts, counts, ("argument", "output", "auxiliary state")):
        if len(part) != count:
            raise MXNetError("Error in custom operator '%s' (%s): returned %d %s entries, "
                             "expected %d" % (op_type, hook, len(part), what, count))
    return parts


def _as_shape(op_type, shape):
    try:
        return tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise MXNetError("Error in custom operator '%s' (infer_shape): %r is not a shape"
                         % (op_type, shape)) from None


def _as_dtype_name(op_type, dtype):
    if dtype is None:
        return None
    try:
        if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
            return np.dtype(DTYPE_MX_TO_NP[int(dtype)]).name
        return np.dtype(dtype).name
    except (TypeError, KeyError):
        raise MXNetError("Error in custom operator '%s' (infer_type): %r is not a dtype"
                         % (op_type, dtype)) from None


def _context_of(k, arrays):
    """The context of backend arrays, for callers whose state does not name it: numpy arrays
    live on cpu(0), device arrays on the kernel set's GPU."""
    if all(isinstance(a, np.ndarray) for a in arrays):
        return Context("cpu", 0)
    return Context("gpu", getattr(k, "device_id", 0))


# ---------------------------------------------------------------------------------------------
# one custom operator bound to one node's arrays
# ---------------------------------------------------------------------------------------------
class _Bound:
    """The operator instance of one node (in one executor, or one nd.Custom call) and the
    NDArrays wrapping that node's buffers, built once and reused every step."""

    def __init__(self, p, k, inputs, outputs, ctx):
        self.p = p
        self.ctx = ctx = ctx if ctx is not None else _context_of(k, list(inputs) + list(outputs))
        n_args = len(p.arg_names)
        self.inputs, self.outputs = inputs, outputs
        self.in_data = [_wrap(x, ctx, False) for x in inputs[:n_args]]
        self.aux = [_wrap(x, ctx, True) for x in inputs[n_args:]]
        self.out_data = [_wrap(x, ctx, True) for x in outputs]
        self.forward_req = ["write"] * len(outputs)
        shapes = [list(x.shape) for x in inputs]
        dtypes = [DTYPE_NP_TO_MX.get(np.dtype(x.dtype).name, -1) for x in inputs]
        with ctx:
            self.op = _user_call(p.op_type, "create_operator", p.prop.create_operator, ctx,
                                 shapes, dtypes)
        if not hasattr(self.op, "forward") or not hasattr(self.op, "backward"):
            raise MXNetError("Error in custom operator '%s' (create_operator): returned %r, "
                             "expected a CustomOp" % (p.op_type, self.op))
        self.grad_src = None

    def forward(self, is_train):
        with self.ctx:
            _user_call(self.p.op_type, "forward", self.op.forward, is_train=is_train,
                       req=self.forward_req, in_data=self.in_data, out_data=self.out_data,
                       aux=self.aux)

    def _bind_grads(self, out_grads, in_grads, req):
        """Wrap the gradient buffers; an output without a head gradient reads zeros and an
        argument nobody needs a gradient of gets a scratch array (its req is 'null')."""
        ctx, n_args = self.ctx, len(self.p.arg_names)
        self.out_grad = []
        for g, o in zip(out_grads, self.outputs):
            if g is None:
                g = _zeros_like(o, ctx)
            self.out_grad.append(_wrap(g, ctx, False))
        self.in_grad = []
        for g, x in zip(in_grads[:n_args], self.inputs):
            if g is None:
                g = _zeros_like(x, ctx)
            self.in_grad.append(_wrap(g, ctx, True))
        self.backward_req = list(req[:n_args])
        self.grad_src = (out_grads, in_grads, req)

    def backward(self, out_grads, in_grads, req):
        src = self.grad_src
        if src is None or src[0] is not out_grads or src[1] is not in_grads or src[2] is not req:
            self._bind_grads(out_grads, in_grads, req)
        with self.ctx:
            _user_call(self.p.op_type, "backward", self.op.backward, req=self.backward_req,
                       out_grad=self.out_grad, in_data=self.in_data, out_data=self.out_data,
                       in_grad=self.in_grad, aux=self.aux)


# ---------------------------------------------------------------------------------------------
# the operator declaration
# ---------------------------------------------------------------------------------------------
def make_prop(op_type, kwargs):
    """A property instance of a registered op_type, built from string keyword arguments."""
    prop_cls = _PROPS.get(op_type)
    if prop_cls is None:
        raise MXNetError("Custom operator: op_type '%s' is not registered (registered: %s); "
                         "register it with @mx.operator.register(%r)"
                         % (op_type, ", ".join(sorted(_PROPS)), op_type))
    return _user_call(op_type, "%s.__init__" % prop_cls.__name__, prop_cls, **kwargs)


@registry.register
class Custom(registry.Operator):
    """Apply the custom operator registered as ``op_type`` (see the module docstring)."""
    name = "Custom"
    inputs = ()
    positional_inputs = True
    stateful = True         # user code: it may keep state or draw random numbers
    params = {"op_type": registry.Str()}

    def parse(self, attrs):
        op_type = None
        kwargs = {}
        for key, value in attrs.items():
            if key.startswith("__") and key.endswith("__") or key == "name":
                continue
            if key == "op_type":
                op_type = None if value is None else str(value)
            else:
                kwargs[key] = value if isinstance(value, str) else str(value)
        if not op_type:
            raise MXNetError("Operator Custom: required attribute 'op_type' (the name a "
                             "CustomOpProp was registered under) is missing")
        prop = make_prop(op_type, kwargs)
        arg_names = _names(op_type, "list_arguments", _user_call(op_type, "list_arguments",
                                                                 prop.list_arguments))
        out_names = _names(op_type, "list_outputs", _user_call(op_type, "list_outputs",
                                                               prop.list_outputs))
        aux_names = _names(op_type, "list_auxiliary_states",
                           _user_call(op_type, "list_auxiliary_states",
                                      prop.list_auxiliary_states))
        n_in, n_out = len(arg_names), len(out_names)
        # ids as MXNet numbers them: output gradients, then inputs, then outputs
        out_grad_ids = list(range(n_out))
        deps = _user_call(op_type, "declare_backward_dependency",
                          prop.declare_backward_dependency, out_grad_ids,
                          list(range(n_out, n_out + n_in)),
                          list(range(n_out + n_in, 2 * n_out + n_in)))
        try:
            deps = {int(d) for d in deps}
        except (TypeError, ValueError):
            raise MXNetError("Error in custom operator '%s' (declare_backward_dependency): "
                             "expected a list of ids, got %r" % (op_type, deps)) from None
        return registry.Params(self.name, {
            "op_type": op_type, "kwargs": kwargs, "prop": prop, "arg_names": arg_names,
            "aux_names": aux_names, "out_names": out_names,
            "need_top_grad": any(i in deps for i in out_grad_ids)})

    def list_inputs(self, p):
        return p.arg_names + p.aux_names

    def list_aux(self, p):
        return list(p.aux_names)

    def list_outputs(self, p):
        return list(p.out_names)

    def num_outputs(self, p):
        return len(p.out_names)

    def ignores_head_grad(self, p):
        return not p.need_top_grad

    def infer_shape(self, p, in_shapes):
        n_args, n_out = len(p.arg_names), len(p.out_names)
        known = [registry.shape_is_known(s) for s in in_shapes[:n_args]]
        if known and not any(known):
            return in_shapes, [None] * n_out
        # unknown argument shapes are handed over as [] (so a hook can derive a label's shape
        # from the data's); a hook that cannot cope with them is asked again once all are known
        given = [list(s) if ok else [] for s, ok in zip(in_shapes, known)]
        if all(known):
            result = _user_call(p.op_type, "infer_shape", p.prop.infer_shape, given)
        else:
            try:
                result = p.prop.infer_shape(given)
            except Exception:  # the hook needs every shape: wait until they are known
                return in_shapes, [None] * n_out
        args, outs, aux = _split_result(p.op_type, "infer_shape", result,
                                        (n_args, n_out, len(p.aux_names)))
        return ([_as_shape(p.op_type, s) for s in list(args) + list(aux)],
                [_as_shape(p.op_type, s) for s in outs])

    def infer_type(self, p, in_types):
        n_args, n_out = len(p.arg_names), len(p.out_names)
        if any(t is None for t in in_types[:n_args]):
            return in_types, [None] * n_out
        result = _user_call(p.op_type, "infer_type", p.prop.infer_type,
                            [np.dtype(t).type for t in in_types[:n_args]])
        args, outs, aux = _split_result(p.op_type, "infer_type", result,
                                        (n_args, n_out, len(p.aux_names)))
        return ([_as_dtype_name(p.op_type, t) for t in list(args) + list(aux)],
                [_as_dtype_name(p.op_type, t) for t in outs])

    def infer_storage_type(self, p, in_stypes):
        n_args = len(p.arg_names)
        result = _user_call(p.op_type, "infer_storage_type", p.prop.infer_storage_type,
                            list(in_stypes[:n_args]))
        _, outs, _ = _split_result(p.op_type, "infer_storage_type", result,
                                   (n_args, len(p.out_names), len(p.aux_names)))
        for stype in outs:
            if stype != "default":
                raise MXNetError("Custom operator '%s': output storage type '%s' is not "
                                 "supported (lightmod's custom operators are dense)"
                                 % (p.op_type, stype))
        return list(outs)

    def forward(self, p, k, inputs, outputs, is_train, state):
        bound = state.get("custom")
        if bound is None or bound.inputs is not inputs or bound.outputs is not outputs:
            bound = state["custom"] = _Bound(p, k, inputs, outputs, state.get("context"))
        bound.forward(is_train)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        bound = state.get("custom")
        if bound is None or bound.inputs is not inputs or bound.outputs is not outputs:
            bound = state["custom"] = _Bound(p, k, inputs, outputs, state.get("context"))
        bound.backward(out_grads, in_grads, req)


# ---------------------------------------------------------------------------------------------
# the older interfaces: NumpyOp (numpy arrays) and NDArrayOp (NDArrays)
# ---------------------------------------------------------------------------------------------
class PythonOp:
    """Base of the older Python operators: one object is both the description and the
    computation; ``get_symbol(*inputs, name=...)`` applies it (through ``Custom``)."""

    def __init__(self, need_top_grad=True):
        self.need_top_grad_ = need_top_grad
        warnings.warn("%s is deprecated; use CustomOp and CustomOpProp"
                      % type(self).__name__, DeprecationWarning, stacklevel=3)

    def __call__(self, *args, **kwargs):
        return self.get_symbol(*args, **kwargs)

    def get_symbol(self, *args, **kwargs):
        op_type = "_python_op_%d" % id(self)
        if op_type not in _PROPS:
            _PROPS[op_type] = _python_op_prop(self)
        return _front_end("symbol_custom")(*args, op_type=op_type, **kwargs)

    def forward(self, in_data, out_data):
        out_data[0][:] = in_data[0]

    def backward(self, out_grad, in_data, out_data, in_grad):
        in_grad[0][:] = 1.0

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]]

    def list_outputs(self):
        return ["output"]

    def list_arguments(self):
        return ["data"]

    def need_top_grad(self):
        return self.need_top_grad_

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        head = list(out_grad) if self.need_top_grad() else []
        return head + list(in_data) + list(out_data)

    def _arrays(self, arrays):
        """What forward / backward receive (NDArrays; NumpyOp overrides)."""
        return arrays


class NumpyOp(PythonOp):
    """A PythonOp computing on numpy arrays (CPU only); they share the executor's memory."""

    def _arrays(self, arrays):
        return [a.numpy_view() for a in arrays]


class NDArrayOp(PythonOp):
    """A PythonOp computing on NDArrays."""


def _python_op_prop(python_op):
    """A property class presenting one PythonOp instance to the Custom operator."""
    class _PythonOpAdapter(CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            python_op.forward(in_data=python_op._arrays(in_data),
                              out_data=python_op._arrays(out_data))

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            python_op.backward(out_grad=python_op._arrays(out_grad),
                               in_data=python_op._arrays(in_data),
                               out_data=python_op._arrays(out_data),
                               in_grad=python_op._arrays(in_grad))

    class _PythonOpProp(CustomOpProp):
        def __init__(self):
            super().__init__(python_op.need_top_grad())

        def list_arguments(self):
            return python_op.list_arguments()

        def list_outputs(self):
            return python_op.list_outputs()

        def infer_shape(self, in_shape):
            args, outs = python_op.infer_shape(in_shape)
            return args, outs, []

        def declare_backward_dependency(self, out_grad, in_data, out_data):
            return python_op.declare_backward_dependency(out_grad, in_data, out_data)

        def create_operator(self, ctx, in_shapes, in_dtypes):
            return _PythonOpAdapter()

    return _PythonOpProp
