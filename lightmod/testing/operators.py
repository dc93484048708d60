"""Cases for any registered operator, derived from its registry declaration.

``op_cases(name)`` draws an :class:`OpCase`: attribute values, input shapes and input values
that the operator accepts. Everything comes from the declaration
(:mod:`lightmod.operator.registry`): each parameter's type and default give its strategy,
``list_inputs``/``list_aux`` give the inputs, ``check_params`` and ``infer_shape`` decide
validity (cases they reject are discarded, so the strategy stays correct as operators change),
``has_backward`` and ``is_loss`` decide which gradient checks apply. A few operators have
constraints the declaration cannot express (a ``Reshape`` target that must match the data
size, index inputs); they declare hints in :mod:`lightmod.testing.op_hints`, keyed by name.

Parameter strategies follow the names MXNet uses throughout: ``axis``/``dim``-like ints are
drawn within the data rank, ``axis``/``axes`` shapes as distinct axes, ``kernel``/``stride``/
``dilate``/``pad``/``adj`` as one entry per spatial dim, other ints as small positive counts,
floats near their defaults (same sign), enums and bools from their choices with the default
first (hypothesis shrinks towards it). Device knobs (``workspace``, ``cudnn_*``, ``layout``)
keep their defaults.

``check_op_case(case)`` runs a case: the executor's outputs have the inferred shapes and
dtypes and are finite; ``nd.<op>`` gives the same values; the symbol's JSON round trip
computes the same; the backward pass matches a central-difference gradient
(:func:`lightmod.test_utils.check_numeric_gradient`) and ``grad_req='add'`` adds to the
existing gradient; a loss head's gradient does not depend on the head gradient.
"""
import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from .. import fusion, test_utils
from .. import ndarray as _nd
from .. import symbol as _sym
from ..base import MXNetError
from ..context import cpu
from ..ndarray import register as _nd_register
from ..operator import registry as _reg
from ..symbol import register as _sym_register
from . import _profile  # noqa: F401  (registers the hypothesis profiles)
from .op_hints import HINTS, Hint

__all__ = ["OpCase", "op_cases", "check_op_case", "param_strategy", "operator_names",
           "MAX_INPUT_SIZE"]

# Elements per input: a numeric gradient costs two forward passes per input element.
MAX_INPUT_SIZE = 48

_AXIS_INTS = ("axis", "dim", "dim1", "dim2")
_AXIS_SHAPES = ("axis", "axes")
_SPATIAL = {"kernel": (1, 3), "stride": (1, 2), "dilate": (1, 2), "pad": (0, 1), "adj": (0, 1)}
_DEVICE_KNOBS = ("workspace", "cudnn_tune", "cudnn_off", "layout", "ctx")
_DTYPE_NAMES = ("dtype", "out_dtype")
_DEFAULT_HINT = Hint()


def _numpy_knows(dtype_name):
    try:
        np.dtype(dtype_name)
        return True
    except TypeError:
        return False


def operator_names():
    """Every registered operator's canonical name, sorted."""
    return sorted(_reg.all_ops())


# ---------------------------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------------------------
def _with_default(decl, strategy):
    """The default first (hypothesis shrinks towards it), then drawn values."""
    if decl.required:
        return strategy
    return st.one_of(st.just(decl.default), strategy)


def _nice_floats(lo, hi):
    # three significant digits: short attribute strings, and small defaults stay non-zero
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False).map(
        lambda x: float("%.3g" % x))


def param_strategy(name, decl, ndim):
    """A strategy for parameter ``name`` (declaration ``decl``) of an op whose first input has
    ``ndim`` dims. Follows MXNet's naming conventions (see the module docstring)."""
    if name in _DEVICE_KNOBS and not decl.required:
        return st.just(decl.default)
    if isinstance(decl, _reg.Bool):
        return _with_default(decl, st.booleans())
    if isinstance(decl, _reg.Enum):
        choices = list(decl.choices) + ([None] if decl.none_ok else [])
        if name in _DTYPE_NAMES:        # only dtypes numpy has (no bfloat16)
            choices = [c for c in choices if c is None or _numpy_knows(c)]
        if not decl.required and decl.default in choices:
            choices.remove(decl.default)
            choices.insert(0, decl.default)
        return st.sampled_from(choices)
    if isinstance(decl, _reg.Dtype):
        return _with_default(decl, st.sampled_from(["float32", "float64"]))
    if isinstance(decl, _reg.Int):      # Int and OptInt
        if name in _AXIS_INTS:
            values = st.integers(-max(ndim, 1), max(ndim - 1, 0))
        else:
            values = st.integers(1, 3)
        if isinstance(decl, _reg.OptInt) and not decl.required:
            values = st.one_of(st.none(), values)
        return _with_default(decl, values)
    if isinstance(decl, _reg.Float):    # Float and OptFloat
        default = decl.default
        if decl.required or default is None:
            # learning rates, epsilons, values: positive and away from 0 (ops divide by lr)
            values = _nice_floats(0.1, 2.0)
        elif 0 < default < 1:           # rates and decays (momentum, beta2, p) stay below 1
            values = _nice_floats(default / 2.0, default)
        elif default > 0:
            values = _nice_floats(default / 2.0, default * 2.0)
        elif default == 0:
            values = _nice_floats(0.0, 1.0)
        else:                           # negative defaults mean "off"; positive turns it on
            values = _nice_floats(0.5, 2.0)
        if isinstance(decl, _reg.OptFloat) and not decl.required:
            values = st.one_of(st.none(), values)
        return _with_default(decl, values)
    if isinstance(decl, _reg.Shape):
        if name in _AXIS_SHAPES:
            axes = st.permutations(list(range(ndim))).flatmap(
                lambda perm: st.integers(1 if decl.required else 0, len(perm)).map(
                    lambda n: tuple(perm[:n])))
            return _with_default(decl, axes)
        if name in _SPATIAL:
            lo, hi = _SPATIAL[name]
            spatial = max(ndim - 2, 1)
            return _with_default(decl, st.tuples(*[st.integers(lo, hi)] * spatial))
        return _with_default(decl, st.lists(st.integers(1, 3), min_size=1,
                                            max_size=max(ndim, 1)).map(tuple))
    if isinstance(decl, _reg.FloatTuple):
        return _with_default(decl, st.lists(_nice_floats(0.0, 1.0), min_size=1,
                                            max_size=3).map(tuple))
    if decl.required:
        raise MXNetError("lightmod.testing: no strategy for required parameter %r of type %s; "
                         "give it in the op's hint" % (name, decl.describe()))
    return st.just(decl.default)


# ---------------------------------------------------------------------------------------------
# the case
# ---------------------------------------------------------------------------------------------
class OpCase:
    """One valid use of an operator: attributes, input shapes and values, inferred outputs."""

    def __init__(self, op_name, attrs, input_names, aux_names, shapes, values, out_shapes,
                 out_types, hint):
        self.op_name = op_name
        self.attrs = attrs                  # {param: Python value}, as passed to sym/nd
        self.input_names = input_names      # op.list_inputs(p), aux states included
        self.aux_names = aux_names
        self.shapes = shapes                # {input name: shape}
        self.values = values                # {input name: numpy array}
        self.out_shapes = out_shapes        # visible outputs
        self.out_types = out_types
        self.hint = hint

    def __repr__(self):
        return "OpCase(%s, attrs=%r, shapes=%r)" % (self.op_name, self.attrs, self.shapes)

    @property
    def op(self):
        return _reg.get(self.op_name)

    @property
    def arg_names(self):
        return [n for n in self.input_names if n not in self.aux_names]

    def symbol(self):
        """The op applied to variables named after its inputs (node name ``op``)."""
        op = self.op
        fn = _sym_register.op_function(self.op_name)
        variables = [_sym.Variable(n) for n in self.input_names]
        if op.variadic is not None:
            return fn(*variables, name="op", **self.attrs)
        return fn(name="op", **dict(zip(self.input_names, variables)), **self.attrs)

    def location(self):
        return {n: self.values[n] for n in self.arg_names}

    def aux_states(self):
        return {n: self.values[n] for n in self.aux_names} or None

    def differentiable_inputs(self):
        """Arguments whose gradient is checked (index/label inputs excluded by the hint)."""
        return [n for n in self.arg_names if n not in self.hint.no_grad_inputs]

    def params(self):
        return self.op.parse(self.attrs)

    def random_reason(self):
        """Why the op's outputs are random for these attributes, or None."""
        return self.hint.reason("random", self.params())

    def numeric_check_reason(self):
        """Why the numeric gradient check does not apply, or None when it does."""
        op = self.op
        p = self.params()
        if not op.has_backward(p):
            return "the operator has no backward pass"
        if op.is_loss:
            return "a loss head's gradient ignores the head gradient (checked separately)"
        reason = self.random_reason() or self.hint.reason("no_grad", p)
        if reason:
            return reason
        if not self.differentiable_inputs():
            return "no differentiable inputs"
        dtype = self.values[self.input_names[0]].dtype
        if self.out_types[0] is not None and np.dtype(self.out_types[0]) != dtype:
            return "output 0 is %s, not a differentiable function in %s" % (
                self.out_types[0], dtype.name)
        return None


def _broadcast_variant(draw, shape):
    """A shape that broadcasts against ``shape``: some dims set to 1, maybe leading dims cut."""
    keep = draw(st.integers(0, len(shape) - 1)) if len(shape) > 1 else 0
    out = list(shape[keep:])
    for i in range(len(out)):
        if draw(st.booleans()):
            out[i] = 1
    return tuple(out) or (1,)


def _infer(op, p, shapes):
    """Run the op's shape inference to a fixed point; None on a mismatch."""
    try:
        for _ in range(3):
            in_shapes, out_shapes = op.infer_shape(p, list(shapes))
            in_shapes = op.infer_shape_backward(p, list(in_shapes), list(out_shapes))
            if list(in_shapes) == list(shapes):
                break
            shapes = list(in_shapes)
        return list(in_shapes), list(out_shapes)
    except (MXNetError, ValueError, IndexError, TypeError, ZeroDivisionError):
        return None


def _default_values(rng, shape):
    """Uniform in +-[0.1, 1]: no kinks at 0, no ties between elements."""
    return rng.uniform(0.1, 1.0, shape) * rng.choice([-1.0, 1.0], shape)


@st.composite
def op_cases(draw, op_name, dtype="float64", max_input_size=MAX_INPUT_SIZE, data_shape=None):
    """A strategy of :class:`OpCase` for the operator ``op_name`` (name or alias).

    ``data_shape`` fixes the shape of the first input (else it is drawn); ``dtype`` is the
    first input's dtype; inputs (and outputs) have at most ``max_input_size`` elements
    (``4 *`` for outputs).
    """
    op = _reg.get(op_name)
    op_name = op.name
    hint = HINTS.get(op_name, _DEFAULT_HINT)
    dtype = hint.dtype or dtype
    if data_shape is None:
        ndims = hint.ndims or (1, 4)
        ndim = draw(st.integers(*ndims))
        data_shape = tuple(draw(st.lists(st.integers(1, hint.max_side), min_size=ndim,
                                         max_size=ndim)))
    else:
        data_shape = tuple(data_shape)
        ndim = len(data_shape)
        assume(hint.ndims is None or hint.ndims[0] <= ndim <= hint.ndims[1])
    assume(int(np.prod(data_shape)) <= max_input_size)

    attrs = {}
    fixed = hint.fix_attrs(draw, op, ndim, data_shape) if hint.fix_attrs else {}
    for name, decl in op.params.items():
        if name in fixed:
            attrs[name] = fixed[name]
            continue
        if op.variadic is not None and name == op.variadic and name not in hint.params:
            attrs[name] = draw(st.integers(1, 3))
            continue
        if name in hint.params:
            strategy = hint.params[name](ndim, data_shape)
        elif name == "shape" and not op.inputs:
            strategy = st.just(data_shape)          # creation ops: make the drawn shape
        else:
            strategy = param_strategy(name, decl, ndim)
        value = draw(strategy)
        if decl.required or value != decl.default:
            attrs[name] = value
    try:
        p = op.parse(attrs)
    except MXNetError:
        assume(False)

    names = op.list_inputs(p)
    aux = op.list_aux(p)
    shapes = [None] * len(names)
    if names:
        shapes[0] = data_shape
    if hint.shapes is not None:
        implied = hint.shapes(data_shape, p)
        shapes = [implied.get(n, s) for n, s in zip(names, shapes)]
    inferred = _infer(op, p, shapes)
    assume(inferred is not None)
    shapes, _ = inferred
    for i, shape in enumerate(shapes):
        if shape is None or not _reg.shape_is_known(shape):
            if names[i] in hint.drawn_shapes:   # a shape the hint draws from the data's
                shapes[i] = tuple(draw(hint.drawn_shapes[names[i]](data_shape)))
                continue
            # not implied by the others: the same shape as the data, or one broadcasting to it
            shapes[i] = _broadcast_variant(draw, data_shape) if hint.broadcast else data_shape
    inferred = _infer(op, p, shapes)
    assume(inferred is not None)
    shapes, out_shapes = inferred
    assume(all(_reg.shape_is_known(s) for s in shapes))
    assume(all(s is not None and all(d > 0 for d in s) for s in out_shapes))
    assume(all(int(np.prod(s)) <= max_input_size for s in shapes))
    assume(all(int(np.prod(s)) <= 4 * max_input_size for s in out_shapes))
    try:
        # the first input has the case's dtype; the op decides the others (mixed-precision
        # updates keep float32 masters), anything still open takes the case's dtype
        in_types, out_types = op.infer_type(p, [dtype] + [None] * (len(names) - 1))
        in_types = [t or dtype for t in in_types]
        if names:
            in_types, out_types = op.infer_type(p, in_types)
        else:
            out_types = [t or dtype for t in out_types]
    except MXNetError:
        assume(False)

    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    by_name = dict(zip(names, shapes))
    joint = hint.values["*"](rng, by_name, p) if "*" in hint.values else {}
    values = {}
    for name, shape, in_type in zip(names, shapes, in_types):
        make = hint.values.get(name)
        if name in joint:
            value = joint[name]
        elif make is not None:
            value = make(rng, shape, p, by_name)
        else:
            value = _default_values(rng, shape)
        values[name] = np.asarray(value, dtype=in_type)
    nvis = op.num_visible_outputs(p)
    return OpCase(op_name, attrs, list(names), list(aux), dict(zip(names, shapes)), values,
                  [tuple(s) for s in out_shapes[:nvis]], list(out_types[:nvis]), hint)


# ---------------------------------------------------------------------------------------------
# the checks
# ---------------------------------------------------------------------------------------------
def _bind(case, sym, ctx, grad_req="null"):
    args = {n: _nd.array(case.values[n], ctx=ctx, dtype=case.values[n].dtype)
            for n in sym.list_arguments()}
    aux = {n: _nd.array(case.values[n], ctx=ctx, dtype=case.values[n].dtype)
           for n in sym.list_auxiliary_states()}
    grads = None
    if grad_req != "null":
        grads = {n: _nd.zeros(a.shape, ctx=ctx, dtype=a.dtype) for n, a in args.items()}
    return sym.bind(ctx, args=args, args_grad=grads, grad_req=grad_req, aux_states=aux)


def _imperative(case, ctx):
    """The op through ``nd.<op>`` (aux states are updated in place, as in MXNet).

    Inputs that only some parameter values add (softmax's ``length``) are not in the
    generated function's signature: those cases go through ``nd.invoke`` (the signature gap
    is pinned apart in tests/test_registry_ops_property.py).
    """
    op = case.op
    fn = _nd_register.op_function(case.op_name)
    arrays = [_nd.array(case.values[n], ctx=ctx, dtype=case.values[n].dtype)
              for n in case.input_names]
    if op.variadic is None and not set(case.input_names) <= set(op.inputs):
        out = _nd_register.invoke(op, arrays, case.attrs)
        return out if isinstance(out, (list, tuple)) else [out]
    # a None value goes as the string "None", as a symbol stores it (the generated nd
    # functions drop None keywords: tests/test_registry_ops_property.py pins that apart)
    attrs = {k: "None" if v is None else v for k, v in case.attrs.items()}
    if op.variadic is not None:
        # the nd function counts the arrays itself (UpSampling's bilinear weight is not
        # counted by num_args: test_registry_ops_property.py pins that difference apart)
        attrs.pop(op.variadic, None)
        out = fn(*arrays, **attrs)
    else:
        out = fn(**dict(zip(case.input_names, arrays)), **attrs)
    return out if isinstance(out, (list, tuple)) else [out]


def check_forward(case, ctx=None):
    """Outputs have the inferred shapes and dtypes, are finite, and ``nd.<op>`` and the JSON
    round trip of the symbol compute the same values. Returns the outputs (numpy)."""
    ctx = ctx or cpu()
    sym = case.symbol()
    exe = _bind(case, sym, ctx)
    exe.forward(is_train=False)
    outs = [o.asnumpy() for o in exe.outputs]
    assert len(outs) == len(case.out_shapes), \
        "%s: %d outputs, inferred %d" % (case.op_name, len(outs), len(case.out_shapes))
    for i, (out, shape, dtype) in enumerate(zip(outs, case.out_shapes, case.out_types)):
        assert out.shape == shape, "%s: output %d has shape %s, inferred %s" % (
            case.op_name, i, out.shape, shape)
        assert dtype is None or out.dtype == np.dtype(dtype), \
            "%s: output %d has dtype %s, inferred %s" % (case.op_name, i, out.dtype, dtype)
        if case.hint.finite:
            assert np.all(np.isfinite(out)), "%s: output %d is not finite: %s" % (
                case.op_name, i, out)
    imperative = _imperative(case, ctx)
    if case.random_reason():
        # random outputs: the other paths can only be checked for shapes
        for out, ref in zip(imperative, outs):
            assert out.shape == ref.shape
        return outs
    for i, (out, ref) in enumerate(zip(imperative, outs)):
        test_utils.assert_almost_equal(out.asnumpy(), ref, rtol=1e-12, atol=1e-12,
                                       names=("nd.%s[%d]" % (case.op_name, i), "executor"),
                                       equal_nan=True)
    # keep amp_cast nodes: by default tojson() leaves them out, as MXNet's does
    loaded = _sym.load_json(sym.tojson(remove_amp_cast=False))
    exe2 = _bind(case, loaded, ctx)
    exe2.forward(is_train=False)
    for i, (out, ref) in enumerate(zip(exe2.outputs, outs)):
        test_utils.assert_almost_equal(out.asnumpy(), ref, rtol=0, atol=0,
                                       names=("from JSON[%d]" % i, "executor"),
                                       equal_nan=True)
    return outs


def check_gradient(case, ctx=None, rtol=None, atol=None):
    """The backward pass against finite differences (output 0, every differentiable input),
    then ``grad_req='add'`` against ``'write'``; or, for a loss head, that its gradient
    ignores the head gradient. Returns the reason when no gradient check applies."""
    ctx = ctx or cpu()
    op = case.op
    p = op.parse(case.attrs)
    if not op.has_backward(p):
        return "the operator has no backward pass"
    sym = case.symbol()
    if op.is_loss:
        _check_loss_head(case, sym, ctx)
        return None
    reason = case.numeric_check_reason()
    if reason is not None:
        return reason
    rtol = case.hint.tol[0] if rtol is None else rtol
    atol = case.hint.tol[1] if atol is None else atol
    head = sym[0] if len(sym.list_outputs()) > 1 else sym
    nodes = case.differentiable_inputs()
    # the operator's own backward is under test: fusion would run a generated kernel instead
    with fusion.disabled():
        test_utils.check_numeric_gradient(
            head, case.location(), aux_states=case.aux_states(), grad_nodes=nodes,
            rtol=rtol, atol=atol, ctx=ctx, dtype=np.float64,
            use_forward_train=case.hint.forward_train)
        _check_grad_add(case, sym, ctx, nodes)
    return None


def _random_heads(case, rng):
    return [rng.standard_normal(s) for s in case.out_shapes]


def _check_grad_add(case, sym, ctx, nodes):
    """'add' must add the gradient 'write' produces to what the buffer held."""
    rng = np.random.default_rng(0)
    heads = _random_heads(case, rng)
    exe = _bind(case, sym, ctx, grad_req={n: "write" for n in nodes})
    exe.forward(is_train=case.hint.forward_train)
    exe.backward([_nd.array(h, ctx=ctx, dtype=t) for h, t in zip(heads, case.out_types)])
    expected = {n: exe.grad_dict[n].asnumpy() for n in nodes}
    test_utils.check_symbolic_backward(
        sym, case.location(), heads, expected, rtol=1e-9, atol=1e-12,
        aux_states=case.aux_states(), grad_req={n: "add" for n in nodes}, ctx=ctx,
        dtype=np.float64)


def _check_loss_head(case, sym, ctx):
    """Two different head gradients give the same input gradients, and they are finite."""
    nodes = case.differentiable_inputs()
    if not nodes:
        return
    rng = np.random.default_rng(1)
    grads = []
    for _ in range(2):
        exe = _bind(case, sym, ctx, grad_req={n: "write" for n in nodes})
        exe.forward(is_train=True)
        exe.backward([_nd.array(h, ctx=ctx, dtype=t)
                      for h, t in zip(_random_heads(case, rng), case.out_types)])
        grads.append({n: exe.grad_dict[n].asnumpy() for n in nodes})
    for n in nodes:
        assert np.all(np.isfinite(grads[0][n])), "%s: gradient of %s is not finite" % (
            case.op_name, n)
        test_utils.assert_almost_equal(grads[0][n], grads[1][n], rtol=0, atol=0,
                                       names=("grad(%s) with head 1" % n,
                                              "grad(%s) with head 2" % n))


def check_op_case(case, ctx=None, seed=0):
    """Every check of this module on one case; returns the reason when the gradient was not
    checked (None when it was).

    The test_utils helpers draw projections and initial gradients from ``np.random``; that
    generator is seeded with ``seed`` for the call (and restored afterwards), so a case
    checks the same way whatever ran before it.
    """
    saved = np.random.get_state()
    np.random.seed(seed)
    try:
        check_forward(case, ctx)
        return check_gradient(case, ctx)
    finally:
        np.random.set_state(saved)
