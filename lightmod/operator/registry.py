"""The operator registry: every operator is declared once, here derived into everything else.

An operator is a subclass of :class:`Operator` decorated with :func:`register`. The declaration
gives MXNet's name and aliases, the inputs (and which are auxiliary states), the parameters with
their types and defaults, the shape and type rules, and forward/backward written against a kernel
set ``k`` (``lightmod.kernels.cpu`` or ``lightmod.kernels.cuda``), so an operator never branches
on the device. ``nd.X``, ``sym.X``, JSON attribute parsing, shape-error messages and the
executor's calls are all derived from it.

Conventions
-----------
* Attributes live on symbol nodes as strings, exactly as MXNet stores them (``"(3, 3)"``,
  ``"True"``). :meth:`Operator.parse` turns such a dict into a :class:`Params` object (attribute
  access, defaults filled, unknown names rejected).
* Shapes are tuples; ``None`` means "not known at all", a ``0`` dim means "this dim unknown".
* ``forward(p, k, inputs, outputs, is_train, state)``: ``inputs`` are backend arrays (numpy
  arrays on the CPU, numba device arrays on the GPU) for every declared input including aux
  states (which the op may update in place); ``outputs`` are preallocated buffers for every output
  including hidden ones. ``state`` is a dict private to this node in this executor, kept between
  forward and backward (masks, saved statistics, scratch buffers allocated once); it starts
  with the node's ``"context"``.
* ``backward(p, k, out_grads, inputs, outputs, in_grads, req, state)``: ``out_grads`` has one
  entry per output (``None`` for hidden outputs / outputs nobody consumed); ``in_grads[i]`` is
  the buffer for input i's gradient and ``req[i]`` is ``'write'``, ``'add'`` or ``'null'``
  (``in_grads[i]`` is ``None`` for ``'null'``). Write with ``k.assign(dst, src, req)`` or
  directly when req is 'write'.
"""
import ast
import collections
import importlib
import threading

import numpy as np

from ..base import MXNetError

__all__ = ["Operator", "register", "get", "find", "all_ops", "Params", "REQUIRED",
           "Int", "Float", "Bool", "Str", "Enum", "Shape", "NoneAllowed", "OptInt", "OptFloat", "Dtype",
           "FloatTuple", "AnyStr", "shape_is_known", "merge_shape"]


class _Required:
    def __repr__(self):
        return "REQUIRED"


REQUIRED = _Required()


# ---------------------------------------------------------------------------------------------
# Parameter types: parse a string (as stored in JSON) or a Python value into a Python value.
# ---------------------------------------------------------------------------------------------
class Param:
    """A typed operator parameter with an optional default."""
    type_name = "any"

    def __init__(self, default=REQUIRED, doc=""):
        self.default = default
        self.doc = doc

    @property
    def required(self):
        return self.default is REQUIRED

    def parse(self, value):
        return value

    def describe(self):
        return self.type_name


class _NumpyScalarCalls(ast.NodeTransformer):
    """Rewrites ``np.int64(3)`` (how numpy 2 prints its scalars, so how ``str`` stores a tuple
    of them) into the literal ``3``; any other call is left for literal_eval to refuse."""

    def visit_Call(self, node):
        func = node.func
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                and func.value.id in ("np", "numpy") and len(node.args) == 1
                and not node.keywords and isinstance(node.args[0], ast.Constant)
                and isinstance(getattr(np, func.attr, None), type)
                and issubclass(getattr(np, func.attr), (np.number, np.bool_))):
            return ast.copy_location(node.args[0], node)
        return node


def _literal(text):
    """A Python literal from an attribute string; numpy scalars written as ``np.int64(3)``
    count as their value. Text that is no literal comes back unchanged."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return text
    try:
        return ast.literal_eval(_NumpyScalarCalls().visit(tree))
    except (ValueError, SyntaxError, TypeError):
        return text


class Int(Param):
    type_name = "int"

    def parse(self, value):
        if isinstance(value, str):
            value = _literal(value.strip())
        if isinstance(value, (bool, np.bool_)):
            return int(value)
        if isinstance(value, (int, np.integer)):
            return int(value)
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            return int(value)
        raise ValueError("expected an integer")


class NoneAllowed:
    """Mixin for the parameters MXNet declares as 'X or None': None, 'None' and '' parse to
    ``none_value``; anything else as the parameter type it is mixed into."""
    none_value = None

    def parse(self, value):
        if value is None or (isinstance(value, str) and value.strip() in ("None", "")):
            return self.none_value
        return super().parse(value)


class OptInt(NoneAllowed, Int):
    type_name = "int or None"


class Float(Param):
    type_name = "float"

    def parse(self, value):
        if isinstance(value, str):
            text = value.strip()
            low = text.lower()
            if low in ("inf", "+inf", "infinity"):
                return float("inf")
            if low in ("-inf", "-infinity"):
                return float("-inf")
            if low == "nan":
                return float("nan")
            value = _literal(text)
        if isinstance(value, (bool, np.bool_)):
            return float(value)
        if isinstance(value, (int, float, np.integer, np.floating)):
            return float(value)
        raise ValueError("expected a number")


class OptFloat(NoneAllowed, Float):
    type_name = "float or None"


class Bool(Param):
    type_name = "boolean"

    def parse(self, value):
        if isinstance(value, str):
            low = value.strip().lower()
            if low in ("true", "1"):
                return True
            if low in ("false", "0"):
                return False
            value = _literal(value.strip())     # np.bool_(True) as numpy 2 prints it
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError("expected True or False")
        if isinstance(value, (bool, np.bool_, int, np.integer)):
            return bool(value)
        raise ValueError("expected True or False")


class Str(Param):
    type_name = "string"

    def parse(self, value):
        if value is None:
            return None
        return str(value)


AnyStr = Str


class Enum(Param):
    def __init__(self, *choices, default=REQUIRED, doc="", none_ok=False):
        super().__init__(default, doc)
        self.choices = tuple(choices)
        self.none_ok = none_ok

    @property
    def type_name(self):
        return "one of {%s}" % ", ".join("'%s'" % c for c in self.choices)

    def parse(self, value):
        if value is None or (self.none_ok and str(value) == "None"):
            if self.none_ok:
                return None
            raise ValueError("expected %s" % self.type_name)
        text = str(value)
        if text not in self.choices:
            raise ValueError("expected %s" % self.type_name)
        return text


class Shape(Param):
    """A tuple of ints: "(3, 3)", "[3,3]", "3", (3, 3), 3 and "()" are accepted."""
    type_name = "shape (tuple of int)"

    def parse(self, value):
        if value is None:
            return None
        if isinstance(value, str):
            text = value.strip()
            if text in ("None",):
                return None
            value = _literal(text) if text else ()
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return (int(value),)
        if isinstance(value, (tuple, list)):
            out = []
            for v in value:
                if v is None:
                    out.append(None)
                elif isinstance(v, (int, np.integer)) and not isinstance(v, bool):
                    out.append(int(v))
                else:
                    raise ValueError("expected a tuple of integers")
            return tuple(out)
        raise ValueError("expected a tuple of integers")


class FloatTuple(Param):
    type_name = "tuple of float"

    def parse(self, value):
        if value is None:
            return None
        if isinstance(value, str):
            value = _literal(value.strip())
        if isinstance(value, (int, float, np.number)):
            return (float(value),)
        if isinstance(value, (tuple, list)):
            return tuple(float(v) for v in value)
        raise ValueError("expected a tuple of floats")


_DTYPE_NAMES = ("float32", "float64", "float16", "uint8", "int8", "int32", "int64", "bool",
                "int16", "uint16", "uint32", "uint64", "bfloat16")


class Dtype(Param):
    """A dtype name ('float32'); numpy dtypes and types are accepted and normalised."""
    type_name = "dtype name"

    def __init__(self, default=REQUIRED, doc="", none_ok=False):
        super().__init__(default, doc)
        self.none_ok = none_ok

    def parse(self, value):
        if value is None or (isinstance(value, str) and value in ("None", "")):
            if self.none_ok:
                return None
            raise ValueError("expected a dtype")
        try:
            name = np.dtype(value).name
        except TypeError:
            name = str(value)
        if name not in _DTYPE_NAMES:
            raise ValueError("expected one of %s" % ", ".join(_DTYPE_NAMES))
        return name


# ---------------------------------------------------------------------------------------------
# Parsed parameters
# ---------------------------------------------------------------------------------------------
class Params:
    """Parsed operator parameters: attribute access, plus the op name for error messages."""

    def __init__(self, op_name, values):
        self.__dict__.update(values)
        self._op_name = op_name

    def get(self, name, default=None):
        return self.__dict__.get(name, default)

    def __repr__(self):
        items = ", ".join("%s=%r" % kv for kv in self.__dict__.items() if not kv[0].startswith("_"))
        return "%s(%s)" % (self._op_name, items)


# ---------------------------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------------------------
def shape_is_known(shape):
    """True when the shape and every dim are known (no None, no 0 dims)."""
    return shape is not None and all(d is not None and d > 0 for d in shape)


def merge_shape(a, b):
    """Combine two partial descriptions of one shape; raise ValueError when they disagree."""
    if a is None:
        return b
    if b is None:
        return a
    if len(a) != len(b):
        raise ValueError("%s vs %s" % (a, b))
    out = []
    for x, y in zip(a, b):
        if not x:
            out.append(y)
        elif not y or x == y:
            out.append(x)
        else:
            raise ValueError("%s vs %s" % (a, b))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# The operator base class
# ---------------------------------------------------------------------------------------------
class Operator:
    """Base class of operator declarations (see the module docstring)."""
    name = None
    aliases = ()
    inputs = ("data",)          # declared input names (aux states included)
    aux = ()                    # names among `inputs` that are auxiliary (mutable) states
    params = {}                 # name -> Param, in the order MXNet's generated function takes them
    variadic = None             # name of the count parameter for ops taking *inputs ("num_args")
    positional_inputs = False   # True: *inputs named by list_inputs(p), no count parameter
    hint = None                 # auto-name hint; default: the op name lower-cased
    is_loss = False             # loss heads ignore the head gradient
    head_grad_unused = False    # backward never reads out_grads (BlockGrad): needs no head gradient
    optional_inputs = ()        # inputs some parameter values add (softmax's length): nd/sym take them
    input_init = {}             # input name -> __init__ JSON attached to auto-created variables
    unnamed_inputs = False      # MXNet registers no input names: monitors see input0, input1...
    # keeps state between calls or draws random numbers: two identical nodes are two different
    # computations (common-subexpression elimination leaves them apart)
    stateful = False
    blocks_gradient = False     # every input gradient is zero (BlockGrad): none flows through
    # Whether attributes the operator does not declare are kept and ignored: MXNet keeps any
    # attribute given to an operator that has no parameter structure (it stays in the
    # symbol's JSON, the computation is unchanged) and rejects unknown ones elsewhere. None:
    # so when ``params`` is empty.
    extra_attributes_ignored = None
    # False where MXNet registers no gradient (batch_take, argmax_channel...): binding a graph
    # that sends a gradient into the operator raises, as in MXNet
    differentiable = True
    # Extra attribute names accepted without being declared (legacy / cudnn / workspace knobs).
    ignored_params = ()

    # --- declaration helpers ------------------------------------------------------------------
    def list_inputs(self, p):
        """Input names for these parameters (override when inputs depend on params)."""
        if self.variadic is not None:
            return ["arg%d" % i for i in range(getattr(p, self.variadic))]
        return list(self.inputs)

    def monitor_input_names(self, p):
        """How a monitor with ``monitor_all`` names the inputs ('<node>_<this name>')."""
        names = self.list_inputs(p)
        return ["input%d" % i for i in range(len(names))] if self.unnamed_inputs else names

    def list_aux(self, p):
        return [n for n in self.list_inputs(p) if n in self.aux]

    def row_sparse_grad_inputs(self, p):
        """Positions of the inputs whose gradient is row_sparse (Embedding with sparse_grad)."""
        return ()

    def list_outputs(self, p):
        """Names of the visible outputs ('output', or 'output0'...)."""
        n = self.num_visible_outputs(p)
        return ["output"] if n == 1 else ["output%d" % i for i in range(n)]

    def num_outputs(self, p):
        """Total outputs, hidden ones included."""
        return 1

    def num_visible_outputs(self, p):
        return self.num_outputs(p)

    def get_hint(self):
        return self.hint if self.hint is not None else self.name.lower()

    # --- attributes ------------------------------------------------------------------------------
    def parse(self, attrs):
        """Parse a {name: str|value} dict (dunder attrs ignored) into Params; errors name the op."""
        values = {}
        for key, raw in attrs.items():
            if key.startswith("__") and key.endswith("__"):
                continue
            if key in self.ignored_params or key in _GLOBAL_IGNORED:
                continue
            decl = self.params.get(key)
            if decl is None:
                if self.extra_attributes_ignored or (self.extra_attributes_ignored is None
                                                     and not self.params):
                    continue
                raise MXNetError(
                    "Operator %s: unknown attribute '%s' (accepted: %s)"
                    % (self.name, key, ", ".join(self.params) or "none"))
            try:
                values[key] = decl.parse(raw)
            except (ValueError, TypeError) as err:
                raise MXNetError(
                    "Operator %s: invalid value %r for attribute '%s': %s"
                    % (self.name, raw, key, err)) from None
        for key, decl in self.params.items():
            if key not in values:
                if decl.required:
                    raise MXNetError("Operator %s: required attribute '%s' (%s) is missing"
                                     % (self.name, key, decl.describe()))
                values[key] = decl.default
        p = Params(self.name, values)
        self.check_params(p)
        return p

    def check_params(self, p):
        """Validate parsed parameters beyond their types (override; raise self.error)."""

    def error(self, message, *args):
        return MXNetError("Operator %s: %s" % (self.name, message % args if args else message))

    # --- shape and type inference --------------------------------------------------------------
    def infer_shape(self, p, in_shapes):
        """Return (in_shapes, out_shapes) with whatever could be filled in.

        ``in_shapes`` has one entry per input (None = unknown). Out shapes cover all outputs,
        hidden ones included. Raise ``self.error(...)`` naming the argument on a mismatch.
        The default treats the op as element-wise over identical shapes.
        """
        shape = self.same_shape(p, in_shapes)
        return [shape] * len(in_shapes), [shape] * self.num_outputs(p)

    def same_shape(self, p, in_shapes, why="all inputs must have the same shape"):
        """The one shape every input must have, merged from what is known of each; the error
        names the first input that does not fit, and ``why``."""
        shape = None
        for name, s in zip(self.list_inputs(p), in_shapes):
            try:
                shape = merge_shape(shape, s)
            except ValueError:
                raise self.error("input '%s' has shape %s, expected %s (%s)", name, s, shape,
                                 why) from None
        return shape

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        """Fill input shapes from known output shapes (MXNet infers in both directions).

        Default: element-wise ops take the output shape for every unknown input.
        """
        return in_shapes

    def infer_type(self, p, in_types):
        """Return (in_types, out_types) as numpy dtype names; None = unknown.

        Default: every input and output share one dtype.
        """
        dtype = next((t for t in in_types if t is not None), None)
        return [t if t is not None else dtype for t in in_types], [dtype] * self.num_outputs(p)

    # --- computation ---------------------------------------------------------------------------
    def forward(self, p, k, inputs, outputs, is_train, state):
        raise MXNetError("Operator %s: forward is not defined" % self.name)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        raise MXNetError("Operator %s: backward is not defined" % self.name)

    def has_backward(self, p):
        return self.differentiable

    def pointwise(self, p):
        """How the executor may fuse this operator into an element-wise group, or None: a
        tuple naming its per-element math (see lightmod/fusion.py)."""
        return None

    def ignores_head_grad(self, p):
        """Whether backward ignores the gradient of the outputs, so a head made by this
        operator needs none (loss heads; BlockGrad)."""
        return self.is_loss or self.head_grad_unused

    def __repr__(self):
        return "<Operator %s>" % self.name


# Attributes every op accepts and ignores (MXNet accepts these on most ops).
_GLOBAL_IGNORED = ("name",)

_REGISTRY = collections.OrderedDict()   # canonical name -> Operator instance
_LOOKUP = {}                            # name or alias -> Operator instance


def register(cls):
    """Class decorator: instantiate the declaration and register it under name and aliases."""
    op = cls()
    if not op.name:
        raise MXNetError("operator class %s has no name" % cls.__name__)
    for key in (op.name,) + tuple(op.aliases):
        if key in _LOOKUP and _LOOKUP[key] is not op:
            raise MXNetError("operator name %r registered twice" % key)
        _LOOKUP[key] = op
    _REGISTRY[op.name] = op
    return cls


def find(name):
    """The Operator registered under name or alias, or None."""
    _ensure_loaded()
    return _LOOKUP.get(name)


def get(name):
    op = find(name)
    if op is None:
        raise MXNetError("Cannot find operator '%s' in the registry" % name)
    return op


def all_ops():
    """{canonical name: Operator} of every registered operator."""
    _ensure_loaded()
    return dict(_REGISTRY)


def all_names():
    _ensure_loaded()
    return dict(_LOOKUP)


_loaded = False
_load_lock = threading.RLock()


def _ensure_loaded():
    """Import every operator family (listed in ``_all.py``) on the first look-up by name: the
    families declare their operators against this module, which never depends on them.

    Threads meeting the first lookup at once wait until every family is registered; the flag
    is set only then. Reentrant: operator modules may look operators up while they load."""
    global _loaded
    if _loaded:
        return
    with _load_lock:
        if not _loaded:
            importlib.import_module(__package__ + "._all")
            _loaded = True
