"""Every registered operator, checked from cases its registry declaration generates.

For each operator, ``lightmod.testing.operators.op_cases`` draws attributes, input shapes and
values from the declaration (plus the few hints in ``lightmod.testing.op_hints``), and
``check_op_case`` runs them: executor outputs with the inferred shapes/dtypes, ``nd.<op>`` and
the JSON round trip agree with the executor, the backward pass matches finite differences
(float64), ``grad_req='add'`` adds, a loss head ignores its head gradient. A newly registered
operator is picked up automatically; if its declaration cannot produce valid cases the test
says so (hypothesis reports the unsatisfiable strategy) and the operator needs a hint.

The tests at the end pin behaviours of MXNet 1.9.1 these properties once found lightmod
missing (1-D reduction shapes, None keywords, softmax's length input, bilinear UpSampling's
weight, topk masks); the generic cases step around them.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given

import lightmod as mx
from lightmod.operator import registry
from lightmod.testing import op_hints, operators
from lightmod.testing._profile import settings_for

OPS = operators.operator_names()
EXAMPLES = 4


# operators with a 0-d output (contrib.allclose, as in MXNet 1.9.1): lightmod's graphs read an
# empty shape as unknown, so they cannot be bound; their imperative call is checked instead
ZERO_DIM_OUTPUT = {"_contrib_allclose": lambda a, b: np.allclose(a, b, rtol=1e-5, atol=1e-8)}


def _check_zero_dim_output(op_name):
    rng = np.random.default_rng(3)
    for shape in ((3,), (2, 4), (2, 1, 3)):
        a = rng.uniform(-1, 1, shape)
        for b in (a, a + 1e-9, a + 1e-3):
            out = getattr(mx.nd.op, op_name)(mx.nd.array(a, dtype="float64"),
                                              mx.nd.array(b, dtype="float64"))
            assert out.shape == () and out.asnumpy() == ZERO_DIM_OUTPUT[op_name](a, b)


@pytest.mark.parametrize("op_name", OPS)
def test_operator_from_registry(op_name):
    if op_name in ZERO_DIM_OUTPUT:
        _check_zero_dim_output(op_name)
        return
    reasons = []

    # cases are filtered by the op's own validity checks: many draws may be discarded
    @settings_for(EXAMPLES, profile="lightmod-ci",
                  suppress_health_check=list(HealthCheck))
    @given(operators.op_cases(op_name))
    def check(case):
        reasons.append(operators.check_op_case(case))

    check()
    assert reasons, "no case was run for %s" % op_name


def test_every_operator_is_covered():
    assert len(OPS) == len(registry.all_ops()) > 150
    assert "FullyConnected" in OPS and "_plus_scalar" in OPS


def test_hints_name_registered_operators_and_parameters():
    for name, hint in op_hints.HINTS.items():
        op = registry.find(name)
        assert op is not None and op.name == name, "hint for unknown operator %s" % name
        for param in hint.params:
            assert param in op.params, "%s has no parameter %s" % (name, param)


def test_numeric_check_reasons_come_from_the_declaration():
    from hypothesis import find
    sgd = find(operators.op_cases("sgd_update"), lambda c: True)
    assert sgd.numeric_check_reason() == "the operator has no backward pass"
    loss = find(operators.op_cases("LinearRegressionOutput"), lambda c: True)
    assert "loss head" in loss.numeric_check_reason()
    cast = find(operators.op_cases("Cast"), lambda c: c.attrs["dtype"] == "float32")
    assert "float32" in cast.numeric_check_reason()
    tanh = find(operators.op_cases("tanh"), lambda c: True)
    assert tanh.numeric_check_reason() is None


def test_param_strategy_follows_mxnet_names():
    from hypothesis import find
    conv = registry.get("Convolution")
    kernel = find(operators.param_strategy("kernel", conv.params["kernel"], 4),
                  lambda k: len(k) == 2)
    assert all(1 <= k <= 3 for k in kernel)
    axis = registry.get("sum").params["axis"]
    axes = find(operators.param_strategy("axis", axis, 3), lambda a: a is not None and len(a) > 1)
    assert len(set(axes)) == len(axes) and all(0 <= a < 3 for a in axes)
    workspace = find(operators.param_strategy("workspace", conv.params["workspace"], 4),
                     lambda w: True)
    assert workspace == conv.params["workspace"].default


def test_a_broken_gradient_is_caught():
    """The check really compares: a gradient scaled by 1.01 fails it."""
    from hypothesis import find
    case = find(operators.op_cases("tanh"), lambda c: c.values["data"].size > 1)
    op = registry.get("tanh")
    original = type(op).backward

    def scaled(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        original(self, p, k, out_grads, inputs, outputs, in_grads, req, state)
        in_grads[0][...] *= 1.01

    type(op).backward = scaled
    try:
        with pytest.raises(AssertionError, match="NUMERICAL_data"):
            operators.check_gradient(case)
    finally:
        type(op).backward = original


# --- MXNet 1.9.1 behaviours these properties found missing (now matched) -----------------------------------
@pytest.mark.filterwarnings("ignore:Cannot decide shape")
@pytest.mark.parametrize("make, second", [
    (lambda d, x: mx.sym.pick(d, x), "index"),
    (lambda d, x: mx.sym.softmax(d, length=x, use_length=True), "length")])
def test_1d_reduction_shapes_are_1(make, second):
    shapes, out_shapes, _ = make(mx.sym.Variable("data"), mx.sym.Variable(second)).infer_shape(
        data=(3,))
    assert shapes is not None and shapes[1] == (1,)


def test_nd_keeps_none_keywords():
    x = mx.nd.array([[-0.5, -0.9], [0.2, -0.9]])
    # axis=None means "over the flattened array" (MXNet 1.9.1: [0.2])
    np.testing.assert_allclose(mx.nd.topk(x, axis=None, ret_typ="value").asnumpy(), [0.2])


def test_nd_bilinear_upsampling_with_num_args_1():
    x, w = mx.nd.ones((1, 2, 3, 3)), mx.nd.ones((2, 1, 4, 4))
    out = mx.nd.UpSampling(x, w, scale=2, num_filter=2, sample_type="bilinear", num_args=1)
    assert out.shape == (1, 2, 6, 6)


@pytest.mark.parametrize("call", ["nd_keyword", "sym_positional"])
def test_softmax_length_input_in_signature(call):
    if call == "nd_keyword":
        out = mx.nd.softmax(data=mx.nd.ones((2, 3)), length=mx.nd.array([1, 2]),
                            use_length=True)
        np.testing.assert_allclose(out.asnumpy()[0], [1, 0, 0])
    else:
        s = mx.sym.softmax(mx.sym.Variable("data"), mx.sym.Variable("length"), use_length=True)
        assert s.list_arguments() == ["data", "length"]


def test_topk_mask_rejects_large_k_at_inference():
    sym = mx.sym.topk(mx.sym.Variable("d"), k=2, ret_typ="mask")
    with pytest.raises(mx.base.MXNetError):
        sym.infer_shape(d=(1,))
