"""The element-wise operator family at the registry level: forward against numpy, backward
against numeric gradients, req handling, shape/type inference in both directions, errors."""
import json
import math
import os

import numpy as np
import ophelpers as oh
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lightmod as mx
from lightmod.base import MXNetError
from lightmod.operator import registry

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def _round_half_away(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


# name -> (numpy reference, domain (lo, hi), kinks to stay away from, smooth?)
UNARY = {
    "relu": (lambda x: np.maximum(x, 0), (-3, 3), [0], True),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), (-4, 4), [], True),
    "tanh": (np.tanh, (-3, 3), [], True),
    "exp": (np.exp, (-3, 3), [], True),
    "log": (np.log, (0.2, 5), [], True),
    "sqrt": (np.sqrt, (0.2, 5), [], True),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (0.2, 5), [], True),
    "square": (np.square, (-3, 3), [], True),
    "abs": (np.abs, (-3, 3), [0], True),
    "negative": (np.negative, (-3, 3), [], True),
    "softsign": (lambda x: x / (1 + np.abs(x)), (-3, 3), [0], True),
    "log1p": (np.log1p, (-0.5, 3), [], True),
    "expm1": (np.expm1, (-3, 3), [], True),
    "reciprocal": (np.reciprocal, (0.3, 3), [], True),
    "cos": (np.cos, (-3, 3), [], True),
    "sin": (np.sin, (-3, 3), [], True),
    "tan": (np.tan, (-1.2, 1.2), [], True),
    "log2": (np.log2, (0.2, 5), [], True),
    "log10": (np.log10, (0.2, 5), [], True),
    "cbrt": (np.cbrt, (0.2, 5), [], True),
    "sinh": (np.sinh, (-3, 3), [], True),
    "cosh": (np.cosh, (-3, 3), [], True),
    "arcsin": (np.arcsin, (-0.9, 0.9), [], True),
    "arccos": (np.arccos, (-0.9, 0.9), [], True),
    "arctan": (np.arctan, (-3, 3), [], True),
    "arcsinh": (np.arcsinh, (-3, 3), [], True),
    "arccosh": (np.arccosh, (1.2, 4), [], True),
    "arctanh": (np.arctanh, (-0.9, 0.9), [], True),
    "degrees": (np.degrees, (-3, 3), [], True),
    "radians": (np.radians, (-100, 100), [], True),
    "rcbrt": (lambda x: 1 / np.cbrt(x), (0.3, 5), [], True),
    "erf": (lambda x: np.vectorize(math.erf)(x), (-2, 2), [], True),
    "gamma": (lambda x: np.vectorize(math.gamma)(x), (-2.8, 4), [-2, -1, 0], True),
    "gammaln": (lambda x: np.vectorize(math.lgamma)(x), (0.2, 6), [], True),
    "logical_not": (lambda x: (x == 0).astype(x.dtype), (-3, 3), [], False),
    "_copy": (lambda x: x, (-3, 3), [], True),
    "sign": (np.sign, (-3, 3), [0], False),
    "floor": (np.floor, (-3, 3), [], False),
    "ceil": (np.ceil, (-3, 3), [], False),
    "round": (_round_half_away, (-3, 3), [], False),
    "trunc": (np.trunc, (-3, 3), [], False),
    "fix": (np.fix, (-3, 3), [], False),
    "rint": (lambda x: np.where(x - np.floor(x) <= np.ceil(x) - x, np.floor(x), np.ceil(x)),
             (-3, 3), [], False),
    "zeros_like": (np.zeros_like, (-3, 3), [], False),
    "ones_like": (np.ones_like, (-3, 3), [], False),
}

SAME_SHAPE = {
    "elemwise_add": np.add, "elemwise_sub": np.subtract, "elemwise_mul": np.multiply,
    "elemwise_div": np.divide, "_maximum": np.maximum, "_minimum": np.minimum,
    "_power": np.power, "_hypot": np.hypot,
}
COMPARE = {
    "equal": np.equal, "not_equal": np.not_equal, "greater": np.greater,
    "greater_equal": np.greater_equal, "lesser": np.less, "lesser_equal": np.less_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}
BROADCAST = {
    "broadcast_add": np.add, "broadcast_sub": np.subtract, "broadcast_mul": np.multiply,
    "broadcast_div": np.divide, "broadcast_maximum": np.maximum,
    "broadcast_minimum": np.minimum, "broadcast_power": np.power, "broadcast_hypot": np.hypot,
}
SCALAR = {
    "_plus_scalar": lambda x, s: x + s, "_minus_scalar": lambda x, s: x - s,
    "_rminus_scalar": lambda x, s: s - x, "_mul_scalar": lambda x, s: x * s,
    "_div_scalar": lambda x, s: x / s, "_rdiv_scalar": lambda x, s: s / x,
    "_power_scalar": lambda x, s: x ** s, "_rpower_scalar": lambda x, s: s ** x,
    "_maximum_scalar": np.maximum, "_minimum_scalar": np.minimum,
    "_hypot_scalar": np.hypot,
}

small_shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3)


def _draw(data, shape, lo, hi, kinks=()):
    x = data.draw(hnp.arrays(np.float64, shape, elements=st.floats(lo, hi)))
    for k in kinks:
        x = np.where(np.abs(x - k) < 0.05, k + 0.1, x)
    return x


# ---------------------------------------------------------------------------------------------
# unary
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(UNARY))
@settings(max_examples=4, deadline=None)
@given(data=st.data())
def test_unary_forward_and_gradient(name, data):
    ref, (lo, hi), kinks, smooth = UNARY[name]
    x = _draw(data, data.draw(small_shapes), lo, hi, kinks)
    out = oh.forward(name, {}, [x.astype(np.float32)])[0][0]
    np.testing.assert_allclose(out, ref(x.astype(np.float32)), rtol=2e-6, atol=1e-6)
    if smooth:
        oh.check_grad(name, {}, [x], rtol=1e-4, atol=1e-6)
    else:
        g = oh.backward(name, {}, [x], [np.ones_like(x)])[0]
        assert (g == 0).all()


def test_unary_special_values():
    x = np.array([-2.5, -0.5, 0.5, 1.5, 2.5, np.nan], dtype=np.float32)
    np.testing.assert_array_equal(oh.forward("round", {}, [x])[0][0][:5], [-3, -1, 1, 2, 3])
    # MXNet's rint takes the floor on ties
    np.testing.assert_array_equal(oh.forward("rint", {}, [x])[0][0][:5], [-3, -1, 0, 1, 2])
    relu = oh.forward("relu", {}, [x])[0][0]
    assert np.isnan(relu[-1]) and relu[0] == 0 and not np.signbit(relu[0])
    # its gradient passes NaN through too (MXNet 1.9.1: relu's gradient at NaN is NaN)
    grad = oh.backward("relu", {}, [x], [np.ones_like(x)])[0]
    np.testing.assert_array_equal(grad[:5], [0, 0, 1, 1, 1])
    assert np.isnan(grad[-1])
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = oh.forward("log", {}, [np.array([0.0, -1.0], dtype=np.float32)])[0][0]
    assert logs[0] == -np.inf and np.isnan(logs[1])


def test_new_unary_special_values():
    x = np.array([-2.0, 0.0, 1.0, np.nan], dtype=np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        asin = oh.forward("arcsin", {}, [x])[0][0]
        acosh = oh.forward("arccosh", {}, [x])[0][0]
        atanh = oh.forward("arctanh", {}, [x])[0][0]
        rcbrt = oh.forward("rcbrt", {}, [np.array([-8.0, 0.0, 27.0])])[0][0]
    assert np.isnan(asin[0]) and asin[1] == 0 and np.isclose(asin[2], np.pi / 2)
    assert np.isnan(acosh[0]) and np.isnan(acosh[1]) and acosh[2] == 0
    assert np.isnan(atanh[0]) and atanh[2] == np.inf
    np.testing.assert_allclose(rcbrt, [-0.5, np.inf, 1 / 3])
    # logical_not: 1 exactly where the input is 0; nan is "true", so it gives 0
    np.testing.assert_array_equal(oh.forward("logical_not", {}, [x])[0][0], [0, 1, 0, 0])
    xi = np.array([0, 3, -1], dtype=np.int32)
    out = oh.forward("logical_not", {}, [xi])[0][0]
    assert out.dtype == np.int32 and out.tolist() == [1, 0, 0]
    # an operator without parameters keeps and ignores what it is given, as MXNet's do
    half = mx.nd.ones((2,)) * 0.5
    np.testing.assert_array_equal(mx.nd.arcsin(half, axis=0).asnumpy(),
                                  mx.nd.arcsin(half).asnumpy())
    assert mx.sym.arcsin(mx.sym.var("x"), axis=0).attr("axis") == "0"
    with pytest.raises(TypeError, match="rcbrt: input 'data' must be an NDArray"):
        mx.nd.rcbrt([1.0, 2.0])


def test_gamma_poles_and_digamma():
    from lightmod.kernels.scalar import digamma
    with np.errstate(invalid="ignore"):
        out = oh.forward("gamma", {}, [np.array([0.0, -0.0, -1.0, -2.0, -np.inf, 5.0])])[0][0]
        ln = oh.forward("gammaln", {}, [np.array([0.0, -3.0, 1.0, 30.0])])[0][0]
    # MXNet 1.9.1 (and C's tgamma): gamma(+-0) = +-inf, nan at the negative integers and -inf
    assert out[0] == np.inf and out[1] == -np.inf
    assert np.isnan(out[2:5]).all() and out[5] == 24.0
    np.testing.assert_allclose(ln, [np.inf, np.inf, 0.0, math.lgamma(30.0)], rtol=1e-14)
    # psi(1) = -euler_gamma, psi(1/2) = -euler_gamma - 2 log 2, psi(n + 1) = psi(n) + 1 / n
    euler = 0.5772156649015329
    assert abs(digamma(1.0) + euler) < 1e-14
    assert abs(digamma(0.5) + euler + 2 * math.log(2)) < 1e-14
    for x in (-2.5, -0.3, 0.7, 3.2, 40.0):
        assert abs(digamma(x + 1) - digamma(x) - 1 / x) < 1e-12, x
    # the poles: +inf, as MXNet's gradients of gamma and gammaln give there
    assert digamma(-2.0) == digamma(0.0) == digamma(-0.0) == digamma(-math.inf) == math.inf
    assert math.isnan(digamma(float("nan")))


def test_gamma_and_gammaln_gradients_at_the_poles_match_mxnet():
    # values MXNet 1.9.1 gives (float32): x, gamma'(x), gammaln'(x)
    x = np.array([0.0, -0.0, -1.0, -2.0, np.inf, -np.inf, np.nan])
    want_gamma = [np.inf, -np.inf, np.nan, np.nan, np.inf, np.nan, np.nan]
    want_gammaln = [np.inf, np.inf, np.inf, np.inf, np.inf, np.inf, np.nan]
    for op, want in (("gamma", want_gamma), ("gammaln", want_gammaln)):
        v = mx.sym.Variable("x")
        exe = getattr(mx.sym, op)(v).simple_bind(mx.cpu(), x=x.shape)
        exe.arg_dict["x"][:] = x
        exe.forward(is_train=True)
        exe.backward(mx.nd.ones(x.shape))
        np.testing.assert_array_equal(exe.grad_dict["x"].asnumpy(), np.array(want, np.float32),
                                      err_msg=op)


def test_unary_dtypes():
    x16 = np.array([0.5, 2.0, 4.0], dtype=np.float16)
    out = oh.forward("sqrt", {}, [x16])[0][0]
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, np.sqrt(x16), rtol=1e-3)
    xi = np.array([-3, 2, 5], dtype=np.int32)
    np.testing.assert_array_equal(oh.forward("abs", {}, [xi])[0][0], [3, 2, 5])
    np.testing.assert_array_equal(oh.forward("square", {}, [xi])[0][0], [9, 4, 25])
    x64 = np.array([1e-8, 3.0])
    np.testing.assert_allclose(oh.forward("log1p", {}, [x64])[0][0], np.log1p(x64), rtol=1e-15)


def test_clip_forward_and_gradient():
    x = np.array([-2.0, -1.0, 0.3, 1.0, 2.0, 0.9])
    out = oh.forward("clip", {"a_min": -1, "a_max": 1}, [x])[0][0]
    np.testing.assert_allclose(out, np.clip(x, -1, 1))
    g = oh.backward("clip", {"a_min": -1, "a_max": 1}, [x], [np.full(6, 2.0)])[0]
    np.testing.assert_allclose(g, [0, 2, 2, 2, 0, 2])            # bounds pass the gradient
    with pytest.raises(MXNetError, match="a_min"):
        oh.prepare("clip", {"a_max": 1})


# ---------------------------------------------------------------------------------------------
# binary
# ---------------------------------------------------------------------------------------------
def _binary_inputs(data, name, a_shape, b_shape):
    if "power" in name:
        return _draw(data, a_shape, 0.5, 2), _draw(data, b_shape, -2, 2)
    if "div" in name:
        return _draw(data, a_shape, -3, 3), _draw(data, b_shape, 0.5, 3)
    a = _draw(data, a_shape, -3, 3, kinks=[0] if "hypot" in name else ())
    b = _draw(data, b_shape, -3, 3)
    if "maximum" in name or "minimum" in name:
        # stay away from ties, where the function has a kink
        b = np.where(np.abs(a - b) < 0.1, b + 0.3, b) if a.shape == b.shape else b
    return a, b


@pytest.mark.parametrize("name", sorted(SAME_SHAPE))
@settings(max_examples=4, deadline=None)
@given(data=st.data())
def test_same_shape_binary(name, data):
    shape = data.draw(small_shapes)
    a, b = _binary_inputs(data, name, shape, shape)
    out = oh.forward(name, {}, [a, b])[0][0]
    np.testing.assert_allclose(out, SAME_SHAPE[name](a, b), rtol=1e-12)
    oh.check_grad(name, {}, [a, b], rtol=1e-4, atol=1e-6)


def test_mod_forward_and_gradient():
    a = np.array([-7.0, 7.0, 5.5, -5.5, 3.0])
    b = np.array([3.0, -3.0, 2.0, 2.0, 0.0])
    out = oh.forward("_mod", {}, [a, b])[0][0]
    np.testing.assert_allclose(out, [2, -2, 1.5, 0.5, 0])
    ga, gb = oh.backward("_mod", {}, [a, b], [np.ones(5)])
    np.testing.assert_allclose(ga, np.ones(5))
    np.testing.assert_allclose(gb[:4], -np.floor(a[:4] / b[:4]))


@pytest.mark.parametrize("fn", sorted(COMPARE))
@pytest.mark.parametrize("kind", ["same", "broadcast", "scalar"])
def test_comparisons(fn, kind):
    a = np.array([[0.0, 1.0, 2.0], [2.0, -1.0, 0.0]], dtype=np.float32)
    if kind == "scalar":
        name, inputs, attrs, expected = ("_%s_scalar" % fn, [a], {"scalar": 1.0},
                                         COMPARE[fn](a, np.float32(1.0)))
    elif kind == "same":
        b = np.array([[0.0, 2.0, 1.0], [2.0, 0.0, 0.0]], dtype=np.float32)
        name, inputs, attrs, expected = "_" + fn, [a, b], {}, COMPARE[fn](a, b)
    else:
        b = np.array([1.0, 0.0, 2.0], dtype=np.float32)
        name, inputs, attrs, expected = "broadcast_" + fn, [a, b], {}, COMPARE[fn](a, b)
    out = oh.forward(name, attrs, inputs)[0][0]
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, expected.astype(np.float32))
    grads = oh.backward(name, attrs, [x.astype(np.float64) for x in inputs],
                        [np.ones(out.shape)])
    for g in grads:
        assert (g == 0).all()


@pytest.mark.parametrize("name", sorted(BROADCAST))
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_broadcast_binary(name, data):
    shape = data.draw(small_shapes)
    other = data.draw(hnp.broadcastable_shapes(shape, min_dims=1, max_dims=len(shape)))
    if data.draw(st.booleans()):
        shape, other = other, shape
    a, b = _binary_inputs(data, name, shape, other)
    if "maximum" in name or "minimum" in name:
        a = np.round(a) + 0.25          # never tie with b = round(b) + 0.75
        b = np.round(b) + 0.75
    out = oh.forward(name, {}, [a, b])[0][0]
    np.testing.assert_allclose(out, BROADCAST[name](a, b), rtol=1e-12)
    oh.check_grad(name, {}, [a, b], rtol=1e-4, atol=1e-6)


def test_broadcast_mod_and_aliases():
    a = np.array([[-7.0, 7.0], [5.5, -5.5]])
    b = np.array([3.0, -2.0])
    np.testing.assert_allclose(oh.forward("broadcast_mod", {}, [a, b])[0][0], np.mod(a, b))
    for alias, op in [("broadcast_plus", "broadcast_add"), ("broadcast_minus", "broadcast_sub"),
                      ("_plus", "elemwise_add"), ("_Minus", "elemwise_sub"),
                      ("identity", "_copy"), ("_MulScalar", "_mul_scalar")]:
        assert registry.get(alias) is registry.get(op)


# ---------------------------------------------------------------------------------------------
# scalar ops
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(SCALAR))
@settings(max_examples=4, deadline=None)
@given(data=st.data(), scalar=st.sampled_from([-1.5, 0.5, 2.0, 3.0]))
def test_scalar_ops(name, data, scalar):
    lo = 0.5 if "power" in name or "rdiv" in name else -3
    if name == "_rpower_scalar":
        scalar = abs(scalar)
    x = _draw(data, data.draw(small_shapes), lo, 3)
    if "maximum" in name or "minimum" in name:
        x = np.where(np.abs(x - scalar) < 0.1, scalar + 0.3, x)
    attrs = {"scalar": scalar}
    out = oh.forward(name, attrs, [x])[0][0]
    np.testing.assert_allclose(out, SCALAR[name](x, scalar), rtol=1e-12)
    oh.check_grad(name, attrs, [x], rtol=1e-4, atol=1e-6)


def test_scalar_mod_ops():
    x = np.array([-7.0, 7.0, 5.5])
    np.testing.assert_allclose(oh.forward("_mod_scalar", {"scalar": 3}, [x])[0][0], x % 3)
    np.testing.assert_allclose(oh.forward("_rmod_scalar", {"scalar": 3}, [x])[0][0], 3 % x)
    g = oh.backward("_rmod_scalar", {"scalar": 3}, [x], [np.ones(3)])[0]
    np.testing.assert_allclose(g, -np.floor(3 / x))
    g = oh.backward("_mod_scalar", {"scalar": 3}, [x], [np.ones(3)])[0]
    np.testing.assert_allclose(g, np.ones(3))


def test_scalar_params_parse_like_mxnet():
    op, p = oh.prepare("_plus_scalar", {})
    assert p.scalar == 1.0 and p.is_int is True
    _, p = oh.prepare("_mul_scalar", {"scalar": "-1.0", "is_int": "False"})
    assert p.scalar == -1.0 and p.is_int is False
    out = oh.forward("_plus_scalar", {"scalar": "2.7"}, [np.array([1, 2], dtype=np.int32)])
    np.testing.assert_array_equal(out[0][0], [3, 4])    # scalar cast to int32 first


# ---------------------------------------------------------------------------------------------
# req handling
# ---------------------------------------------------------------------------------------------
def test_req_add_and_null():
    x = np.array([1.0, -2.0, 3.0])
    g = oh.backward("square", {}, [x], [np.ones(3)], req=["add"], init_grads=[np.full(3, 10.0)])
    np.testing.assert_allclose(g[0], 10 + 2 * x)
    a, b = np.ones((2, 3)), np.array([1.0, 2.0, 3.0])
    ga, gb = oh.backward("broadcast_mul", {}, [a, b], [np.ones((2, 3))], req=["null", "add"],
                         init_grads=[None, np.ones(3)])
    assert ga is None
    np.testing.assert_allclose(gb, 1 + a.sum(axis=0))
    g = oh.backward("_mul_scalar", {"scalar": 3}, [x], [np.ones(3)], req=["add"],
                    init_grads=[np.ones(3)])
    np.testing.assert_allclose(g[0], 4 * np.ones(3))
    g = oh.backward("clip", {"a_min": 0, "a_max": 2}, [x], [np.ones(3)], req=["add"],
                    init_grads=[np.ones(3)])
    np.testing.assert_allclose(g[0], [2, 1, 1])


def test_missing_head_gradient_gives_zeros():
    op, p = oh.prepare("exp", {})
    x = np.array([1.0, 2.0])
    dx = np.full(2, 5.0)
    from lightmod.kernels import cpu as k
    op.backward(p, k, [None], [x], [np.exp(x)], [dx], ["write"], {})
    assert (dx == 0).all()


def test_float16_binary_and_large_parallel_path():
    a = np.linspace(-2, 2, 1 << 16).astype(np.float16)
    out = oh.forward("elemwise_mul", {}, [a, a])[0][0]
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, a * a, rtol=1e-3)
    big = np.linspace(-3, 3, 70000)
    np.testing.assert_allclose(oh.forward("tanh", {}, [big])[0][0], np.tanh(big), rtol=1e-14)
    b = np.linspace(1, 2, 400)
    g = oh.backward("broadcast_add", {}, [big.reshape(175, 400), b], [np.ones((175, 400))])
    np.testing.assert_allclose(g[1], np.full(400, 175.0))


# ---------------------------------------------------------------------------------------------
# shape and type inference
# ---------------------------------------------------------------------------------------------
def test_same_shape_inference_both_directions():
    op, p = oh.prepare("elemwise_add", {})
    ins, outs = op.infer_shape(p, [None, (2, 3)])
    assert ins == [(2, 3), (2, 3)] and outs == [(2, 3)]
    ins, outs = op.infer_shape(p, [(0, 3), (4, 0)])
    assert ins == [(4, 3), (4, 3)] and outs == [(4, 3)]
    assert op.infer_shape_backward(p, [None, (0, 3)], [(5, 3)]) == [(5, 3), (5, 3)]
    with pytest.raises(MXNetError, match=r"elemwise_add.*rhs.*\(2, 4\)"):
        op.infer_shape(p, [(2, 3), (2, 4)])
    with pytest.raises(MXNetError, match="elemwise_add"):
        op.infer_shape_backward(p, [(2, 3), None], [(2, 4)])
    op, p = oh.prepare("relu", {})
    assert op.infer_shape_backward(p, [None], [(7,)]) == [(7,)]


def test_broadcast_inference_and_errors():
    op, p = oh.prepare("broadcast_add", {})
    assert op.infer_shape(p, [(2, 1, 3), (4, 1)])[1] == [(2, 4, 3)]
    assert op.infer_shape(p, [None, (4, 1)])[1] == [None]
    with pytest.raises(MXNetError, match=r"broadcast_add.*\(2, 3\).*\(4,\)"):
        op.infer_shape(p, [(2, 3), (4,)])
    with pytest.raises(MXNetError, match=r"broadcast_add"):
        mx.nd.broadcast_add(mx.nd.ones((2, 3)), mx.nd.ones(4))


def test_type_inference():
    op, p = oh.prepare("elemwise_mul", {})
    assert op.infer_type(p, ["float64", None]) == (["float64", "float64"], ["float64"])
    with pytest.raises(MXNetError, match="elemwise_mul"):
        op.infer_type(p, ["float32", "float16"])


def test_hints_are_lowercased_names():
    assert registry.get("elemwise_add").get_hint() == "elemwise_add"
    assert registry.get("_plus_scalar").get_hint() == "_plus_scalar"
    assert registry.get("relu").get_hint() == "relu"


def test_mxnet_names_and_aliases_exist():
    """Every name/alias MXNet 1.9.1 registers for this family maps to the same operator."""
    with open(os.path.join(FIXTURES, "elemwise_names.json")) as f:
        groups = json.load(f)["alias_groups"]
    for names in groups:
        ops = {n: registry.find(n) for n in names}
        missing = [n for n, o in ops.items() if o is None]
        assert not missing, "not registered: %s" % missing
        assert len({id(o) for o in ops.values()}) == 1, names


# ---------------------------------------------------------------------------------------------
# through mx.nd
# ---------------------------------------------------------------------------------------------
def test_nd_functions_for_the_family():
    x = mx.nd.array([[-1.0, 0.5], [2.0, -3.0]])
    np.testing.assert_allclose(mx.nd.relu(x).asnumpy(), [[0, 0.5], [2, 0]])
    np.testing.assert_allclose(mx.nd.clip(x, -1, 1).asnumpy(), [[-1, 0.5], [1, -1]])
    np.testing.assert_allclose(mx.nd.clip(x, a_min=0, a_max=1).asnumpy(), [[0, 0.5], [1, 0]])
    np.testing.assert_allclose(mx.nd._internal._rminus_scalar(x, scalar=1).asnumpy(), 1 - x.asnumpy())
    np.testing.assert_allclose(mx.nd.elemwise_add(lhs=x, rhs=x).asnumpy(), 2 * x.asnumpy())
    out = mx.nd.zeros((2, 2))
    res = mx.nd.square(x, out=out)
    assert res is out
    np.testing.assert_allclose(out.asnumpy(), x.asnumpy() ** 2)
    # out= may alias the input
    mx.nd.exp(x, out=x)
    np.testing.assert_allclose(x.asnumpy(), np.exp([[-1.0, 0.5], [2.0, -3.0]]), rtol=1e-6)
    np.testing.assert_allclose(mx.nd.zeros_like(x).asnumpy(), 0)
    np.testing.assert_allclose(mx.nd.ones_like(x).asnumpy(), 1)
    assert mx.nd.identity is mx.nd.identity
    with pytest.raises(MXNetError, match="elemwise_add"):
        mx.nd.elemwise_add(mx.nd.ones(2), mx.nd.ones(3))
    with pytest.raises(MXNetError, match="unknown attribute 'bogus'"):
        mx.nd.clip(x, 0, 1, bogus=1)
    with pytest.raises(MXNetError, match="input 'rhs' is missing"):
        mx.nd.elemwise_add(x)
