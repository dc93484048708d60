"""The element-wise family: unary math, same-shape and broadcasting binary ops, scalar ops,
comparisons, clip, zeros_like/ones_like.

Each operator is one row of a table below; the classes here only say how a row runs. The math
is in ``kernels/scalar.py`` (codes named by the ``fn`` strings), launched by the kernel set
``k`` (``k.elemwise_unary`` ...), so nothing here depends on the device.
"""
from .common import zero_grads
from .registry import Bool, Float, Operator, merge_shape, register

__all__ = ["broadcast_shape"]


# ---------------------------------------------------------------------------------------------
# shared behaviour
# ---------------------------------------------------------------------------------------------
def _integer_mod(fn, out):
    """An integer remainder: MXNet sends no gradient through it (its tests expect zeros)."""
    return fn == "mod" and out.dtype.kind in "iu"


class _ElemwiseBase(Operator):
    """Inputs and outputs share one shape and one dtype."""

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        out = out_shapes[0] if out_shapes else None
        filled = []
        for name, s in zip(self.list_inputs(p), in_shapes):
            try:
                filled.append(merge_shape(s, out))
            except ValueError:
                raise self.error("input '%s' has shape %s but the output has shape %s",
                                 name, s, out) from None
        return filled

    def infer_type(self, p, in_types):
        dtype = None
        for name, t in zip(self.list_inputs(p), in_types):
            if t is None:
                continue
            if dtype is not None and t != dtype:
                raise self.error("input '%s' has type %s, expected %s (all inputs must have "
                                 "the same type)", name, t, dtype)
            dtype = t
        return [dtype] * len(in_types), [dtype] * self.num_outputs(p)


class _Unary(_ElemwiseBase):
    fn = None   # kernel function name (scalar.UNARY_CODES)

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.elemwise_unary(self.fn, inputs[0], outputs[0])

    def pointwise(self, p):
        return ("unary", self.fn, False)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if out_grads[0] is None:
            return zero_grads(k, in_grads, req)
        k.elemwise_unary_backward(self.fn, inputs[0], outputs[0], out_grads[0], in_grads[0],
                                  req[0])


class _ConstantGrad(_Unary):
    """Piecewise-constant functions and fills: the gradient is zero, so a head made by one
    needs no head gradient."""
    head_grad_unused = True

    def pointwise(self, p):
        return ("unary", self.fn, True)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        zero_grads(k, in_grads, req)


class _Fill(_ConstantGrad):
    value = 0

    def pointwise(self, p):
        return None

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.fill(outputs[0], self.value)


class _Clip(_ElemwiseBase):
    name = "clip"
    aliases = ("_sparse_clip",)
    params = {"a_min": Float(doc="Minimum value"), "a_max": Float(doc="Maximum value")}

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.elemwise_clip(inputs[0], p.a_min, p.a_max, outputs[0])

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if out_grads[0] is None:
            return zero_grads(k, in_grads, req)
        k.elemwise_clip_backward(inputs[0], p.a_min, p.a_max, out_grads[0], in_grads[0], req[0])


register(_Clip)


class _HardSigmoid(_ElemwiseBase):
    """max(0, min(1, alpha * x + beta)); the gradient is alpha strictly between the kinks."""
    name = "hard_sigmoid"
    params = {"alpha": Float(0.2, doc="Slope"), "beta": Float(0.5, doc="Offset")}

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.elemwise_hard_sigmoid(inputs[0], p.alpha, p.beta, outputs[0])

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if out_grads[0] is None:
            return zero_grads(k, in_grads, req)
        k.elemwise_hard_sigmoid_backward(inputs[0], p.alpha, p.beta, out_grads[0], in_grads[0],
                                         req[0])


register(_HardSigmoid)


class _Binary(_ElemwiseBase):
    """Same-shape binary op: both inputs must have identical shapes."""
    inputs = ("lhs", "rhs")
    fn = None   # kernel function name (scalar.BINARY_CODES)
    zero_grad = False

    def ignores_head_grad(self, p):
        return self.zero_grad or super().ignores_head_grad(p)

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.elemwise_binary(self.fn, inputs[0], inputs[1], outputs[0])

    def pointwise(self, p):
        return ("binary", self.fn, self.zero_grad)   # the executor checks the shapes agree

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if out_grads[0] is None or self.zero_grad or _integer_mod(self.fn, outputs[0]):
            return zero_grads(k, in_grads, req)
        k.elemwise_binary_backward(self.fn, inputs[0], inputs[1], out_grads[0],
                                   in_grads[0], in_grads[1], req[0], req[1])


def broadcast_shape(a, b):
    """numpy broadcasting of two partially known shapes (0 dims unknown); None if unknown."""
    if a is None or b is None:
        return None
    nd = max(len(a), len(b))
    a = (1,) * (nd - len(a)) + tuple(a)
    b = (1,) * (nd - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        elif x == 0 or y == 0:
            out.append(x or y)
        else:
            raise ValueError
    return tuple(out)


class _Broadcast(_Binary):
    """numpy broadcasting; gradients are summed back to each input's shape."""

    def infer_shape(self, p, in_shapes):
        lhs, rhs = in_shapes
        try:
            out = broadcast_shape(lhs, rhs)
        except ValueError:
            raise self.error("operands could not be broadcast together: lhs %s, rhs %s",
                             lhs, rhs) from None
        return list(in_shapes), [out]

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        return in_shapes


class _Scalar(_ElemwiseBase):
    """x op scalar (or scalar op x when ``reverse``); the scalar is cast to x's dtype."""
    params = {"scalar": Float(1.0, doc="Scalar input value"),
              "is_int": Bool(True, doc="Indicate whether scalar input is int type")}
    fn = None
    reverse = False
    zero_grad = False

    def ignores_head_grad(self, p):
        return self.zero_grad or super().ignores_head_grad(p)

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.elemwise_scalar(self.fn, inputs[0], p.scalar, outputs[0], self.reverse)

    def pointwise(self, p):
        return ("scalar", (self.fn, p.scalar, self.reverse), self.zero_grad)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if out_grads[0] is None or self.zero_grad or _integer_mod(self.fn, outputs[0]):
            return zero_grads(k, in_grads, req)
        k.elemwise_scalar_backward(self.fn, inputs[0], p.scalar, out_grads[0], in_grads[0],
                                   req[0], self.reverse)


def _declare(base, name, aliases=(), **attrs):
    cls = type("_op_" + name.strip("_"), (base,), dict(name=name, aliases=tuple(aliases), **attrs))
    register(cls)
    return cls


# ---------------------------------------------------------------------------------------------
# unary math: (op name, kernel function, aliases)
# ---------------------------------------------------------------------------------------------
# (op name, kernel function); MXNet also registers most of them as "_sparse_<name>"
_UNARY = [("relu", "relu"), ("sigmoid", "sigmoid"), ("tanh", "tanh"), ("exp", "exp"),
          ("log", "log"), ("sqrt", "sqrt"), ("rsqrt", "rsqrt"), ("square", "square"),
          ("abs", "abs"), ("negative", "negative"), ("log1p", "log1p"), ("expm1", "expm1"),
          ("cos", "cos"), ("sin", "sin"), ("tan", "tan"), ("log2", "log2"),
          ("log10", "log10"), ("cbrt", "cbrt"), ("sinh", "sinh"), ("arcsin", "arcsin"),
          ("arctan", "arctan"), ("arcsinh", "arcsinh"), ("arctanh", "arctanh"),
          ("degrees", "degrees"), ("radians", "radians")]
for _name, _fn in _UNARY:
    _declare(_Unary, _name, ("_sparse_" + _name,), fn=_fn)
# dense-only in MXNet (no "_sparse_" twin)
for _name in ("softsign", "reciprocal", "cosh", "arccos", "arccosh", "rcbrt", "erf", "gamma",
              "gammaln"):
    _declare(_Unary, _name, fn=_name)
_declare(_Unary, "_copy", ("identity",), fn="copy")


class _IdentityLikeRhs(_ElemwiseBase):
    """out = lhs; rhs only lends its shape and dtype (both inputs and the output share them,
    so a shape known on either side reaches the other). rhs receives a zero gradient."""
    name = "_identity_with_attr_like_rhs"
    inputs = ("lhs", "rhs")

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.assign(outputs[0], inputs[0], "write")

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if out_grads[0] is None:
            return zero_grads(k, in_grads, req)
        if in_grads[0] is not None and req[0] != "null":
            k.assign(in_grads[0], out_grads[0], req[0])
        zero_grads(k, [None, in_grads[1]], req)


register(_IdentityLikeRhs)

# piecewise constant: zero gradient
for _name, _fn in [("sign", "sign"), ("floor", "floor"), ("ceil", "ceil"), ("round", "round"),
                   ("trunc", "trunc"), ("fix", "trunc"), ("rint", "rint")]:
    _declare(_ConstantGrad, _name, ("_sparse_" + _name,), fn=_fn)

_declare(_ConstantGrad, "logical_not", fn="logical_not")

_declare(_Fill, "zeros_like", ("_sparse_zeros_like",), value=0)
_declare(_Fill, "ones_like", value=1)

# ---------------------------------------------------------------------------------------------
# binary: (kernel function, same-shape op + aliases, broadcast op + aliases, scalar ops)
# ---------------------------------------------------------------------------------------------
_COMPARISONS = ("equal", "not_equal", "greater", "greater_equal", "lesser", "lesser_equal",
                "logical_and", "logical_or", "logical_xor")

_SAME_SHAPE = [
    ("add", "elemwise_add", ("_add", "_plus", "_Plus", "_sparse_elemwise_add")),
    ("sub", "elemwise_sub", ("_sub", "_minus", "_Minus", "_sparse_elemwise_sub")),
    ("mul", "elemwise_mul", ("_mul", "_Mul", "_sparse_elemwise_mul")),
    ("div", "elemwise_div", ("_div", "_Div", "_sparse_elemwise_div")),
    ("maximum", "_maximum", ("_Maximum",)),
    ("minimum", "_minimum", ("_Minimum",)),
    ("power", "_power", ("_Power",)),
    ("mod", "_mod", ("_Mod",)),
    ("hypot", "_hypot", ("_Hypot",)),
    ("equal", "_equal", ("_Equal",)),
    ("not_equal", "_not_equal", ("_Not_Equal",)),
    ("greater", "_greater", ("_Greater",)),
    ("greater_equal", "_greater_equal", ("_Greater_Equal",)),
    ("lesser", "_lesser", ("_Lesser",)),
    ("lesser_equal", "_lesser_equal", ("_Lesser_Equal",)),
    ("logical_and", "_logical_and", ("_Logical_And",)),
    ("logical_or", "_logical_or", ("_Logical_Or",)),
    ("logical_xor", "_logical_xor", ("_Logical_Xor",)),
]
for _fn, _name, _aliases in _SAME_SHAPE:
    _declare(_Binary, _name, _aliases, fn=_fn, zero_grad=_fn in _COMPARISONS)

_BROADCAST = [
    ("add", "broadcast_add", ("broadcast_plus", "_sparse_broadcast_add",
                              "_sparse_broadcast_plus")),
    ("sub", "broadcast_sub", ("broadcast_minus", "_sparse_broadcast_sub",
                              "_sparse_broadcast_minus")),
    ("mul", "broadcast_mul", ("_sparse_broadcast_mul",)),
    ("div", "broadcast_div", ("_sparse_broadcast_div",)),
    ("mod", "broadcast_mod", ()), ("power", "broadcast_power", ()),
    ("maximum", "broadcast_maximum", ()), ("minimum", "broadcast_minimum", ()),
    ("hypot", "broadcast_hypot", ()),
] + [(_fn, "broadcast_" + _fn, ()) for _fn in _COMPARISONS]
for _fn, _name, _aliases in _BROADCAST:
    _declare(_Broadcast, _name, _aliases, fn=_fn, zero_grad=_fn in _COMPARISONS)

# (op name, kernel function, scalar first?, alias)
_SCALAR = [
    ("_plus_scalar", "add", False, "_PlusScalar"),
    ("_minus_scalar", "sub", False, "_MinusScalar"),
    ("_rminus_scalar", "sub", True, "_RMinusScalar"),
    ("_mul_scalar", "mul", False, "_MulScalar"),
    ("_div_scalar", "div", False, "_DivScalar"),
    ("_rdiv_scalar", "div", True, "_RDivScalar"),
    ("_power_scalar", "power", False, "_PowerScalar"),
    ("_rpower_scalar", "power", True, "_RPowerScalar"),
    ("_maximum_scalar", "maximum", False, "_MaximumScalar"),
    ("_minimum_scalar", "minimum", False, "_MinimumScalar"),
    ("_mod_scalar", "mod", False, "_ModScalar"),
    ("_rmod_scalar", "mod", True, "_RModScalar"),
    ("_hypot_scalar", "hypot", False, "_HypotScalar"),
    ("_equal_scalar", "equal", False, "_EqualScalar"),
    ("_not_equal_scalar", "not_equal", False, "_NotEqualScalar"),
    ("_greater_scalar", "greater", False, "_GreaterScalar"),
    ("_greater_equal_scalar", "greater_equal", False, "_GreaterEqualScalar"),
    ("_lesser_scalar", "lesser", False, "_LesserScalar"),
    ("_lesser_equal_scalar", "lesser_equal", False, "_LesserEqualScalar"),
    ("_logical_and_scalar", "logical_and", False, "_LogicalAndScalar"),
    ("_logical_or_scalar", "logical_or", False, "_LogicalOrScalar"),
    ("_logical_xor_scalar", "logical_xor", False, "_LogicalXorScalar"),
]
for _name, _fn, _rev, _alias in _SCALAR:
    _declare(_Scalar, _name, (_alias,), fn=_fn, reverse=_rev, zero_grad=_fn in _COMPARISONS)

del _name, _fn, _aliases, _rev, _alias
