"""Loss heads at the registry level: SoftmaxOutput (Softmax), Linear/Logistic/MAE regression
outputs, MakeLoss, make_loss, BlockGrad (stop_gradient), smooth_l1, softmax_cross_entropy.

Gradients are checked against the closed forms of spec 4.3 on hypothesis-drawn shapes,
attribute combinations and labels (ignored and out-of-range ones included), against numeric
gradients where the op is differentiable, and against golden values from MXNet 1.9.1.
"""
import numpy as np
import ophelpers as oh
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_op_nn import GOLDEN, cases_of, run_golden_case, run_shape_case

from lightmod.base import MXNetError

LOSS_OPS = {"SoftmaxOutput", "Softmax", "LinearRegressionOutput", "LogisticRegressionOutput",
            "MAERegressionOutput", "MakeLoss", "make_loss", "BlockGrad", "stop_gradient",
            "smooth_l1", "softmax_cross_entropy"}


@pytest.mark.parametrize("case", cases_of(LOSS_OPS))
def test_golden_mxnet(case):
    run_golden_case(case)


@pytest.mark.parametrize("case", sorted(c for c, s in GOLDEN["shapes"].items()
                                        if s["op"] in LOSS_OPS))
def test_golden_shapes(case):
    run_shape_case(case)


# ---------------------------------------------------------------------------------------------
# SoftmaxOutput
# ---------------------------------------------------------------------------------------------
def softmax_output_reference(x, label, grad_scale=1.0, ignore_label=-1.0, multi_output=False,
                             use_ignore=False, preserve_shape=False, normalization="null",
                             out_grad=False, smooth_alpha=0.0):
    """(prob, grad) following spec 4.3, written independently of the kernels."""
    shape = x.shape
    if multi_output:
        view = (shape[0], shape[1], x.size // (shape[0] * shape[1]))
    elif preserve_shape:
        view = (x.size // shape[-1], shape[-1], 1)
    else:
        view = (shape[0], x.size // shape[0], 1)
    x3 = x.reshape(view)
    e = np.exp(x3 - x3.max(axis=1, keepdims=True))
    prob = e / e.sum(axis=1, keepdims=True)
    if label.shape == shape:
        grad = (prob.reshape(shape) - label) * grad_scale
        return prob.reshape(shape), grad * (prob.reshape(shape) if out_grad else 1)
    outer, ncls, inner = view
    lab = np.trunc(label.reshape(-1)[:outer * inner]).astype(int).reshape(outer, inner)
    target = np.full(view, smooth_alpha / (ncls - 1) if ncls > 1 else 0.0)
    for o in range(outer):
        for j in range(inner):
            if 0 <= lab[o, j] < ncls:
                target[o, lab[o, j], j] = 1 - smooth_alpha
    grad = (prob - target) * grad_scale
    if use_ignore:
        grad *= (lab != int(ignore_label))[:, None, :]
    if normalization == "valid":
        norm = max(1, int(np.sum(np.trunc(label) != int(ignore_label))))
    elif normalization == "batch":
        norm = outer if multi_output else label.size
    else:
        norm = 1
    if multi_output and normalization != "valid":
        norm *= inner
    grad = grad / norm
    if out_grad:
        grad = grad * prob
    return prob.reshape(shape), grad.reshape(shape)


@st.composite
def softmax_output_case(draw):
    multi = draw(st.booleans())
    preserve = not multi and draw(st.booleans())
    ndim = draw(st.integers(2, 4 if (multi or preserve) else 3))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim)))
    if multi:
        label_shape = draw(st.sampled_from([
            (shape[0], int(np.prod(shape[2:]))), (shape[0],) + shape[2:],
            (shape[0], 1) + shape[2:]]))
        ncls = shape[1]
    else:
        label_shape = shape[:-1]
        ncls = shape[-1] if preserve else int(np.prod(shape[1:]))
    attrs = {"multi_output": multi, "preserve_shape": preserve,
             "normalization": draw(st.sampled_from(["null", "batch", "valid"])),
             "use_ignore": draw(st.booleans()),
             "grad_scale": draw(st.sampled_from([1.0, 0.5, 3.0])),
             "ignore_label": draw(st.sampled_from([-1.0, 0.0, 2.0])),
             "smooth_alpha": draw(st.sampled_from([0.0, 0.1])) if ncls > 1 else 0.0,
             "out_grad": draw(st.booleans())}
    seed = draw(st.integers(0, 2 ** 16))
    rng = np.random.default_rng(seed)
    # integer labels, some ignored, some out of range, some fractional (truncated toward 0)
    label = rng.integers(-1, ncls + 2, size=label_shape) + rng.choice([0.0, 0.4], label_shape)
    return shape, label.astype(np.float64), attrs, seed


@settings(max_examples=40, deadline=None)
@given(case=softmax_output_case())
def test_softmax_output_matches_closed_form(case):
    shape, label, attrs, seed = case
    x = np.random.default_rng(seed + 1).standard_normal(shape)
    prob_ref, grad_ref = softmax_output_reference(x, label, **attrs)
    outs, _, op, p = oh.forward("SoftmaxOutput", attrs, [x, label])
    np.testing.assert_allclose(outs[0], prob_ref, rtol=1e-12, atol=1e-15)
    # the head gradient is ignored (loss head)
    head = np.random.default_rng(seed).standard_normal(shape)
    grads = oh.backward("SoftmaxOutput", attrs, [x, label], [head])
    np.testing.assert_allclose(grads[0], grad_ref, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(grads[1], np.zeros_like(label))
    added = oh.backward("SoftmaxOutput", attrs, [x, label], [head], req=["add", "add"],
                        init_grads=[np.ones(shape), np.ones(label.shape)])
    np.testing.assert_allclose(added[0], grad_ref + 1, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(added[1], np.ones(label.shape))


def test_softmax_output_probabilities_as_label():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4))
    target = rng.dirichlet(np.ones(4), size=3)
    attrs = {"grad_scale": 2.0, "normalization": "valid"}
    prob, grad = softmax_output_reference(x, target, **attrs)
    g = oh.backward("SoftmaxOutput", attrs, [x, target], [None])[0]
    np.testing.assert_allclose(g, grad, rtol=1e-12)
    np.testing.assert_allclose(g, (prob - target) * 2.0, rtol=1e-12)


def test_softmax_output_declaration():
    op, p = oh.prepare("SoftmaxOutput", {})
    assert op.is_loss and op.get_hint() == "softmaxoutput"
    assert op.list_inputs(p) == ["data", "label"] and op.list_outputs(p) == ["output"]
    assert (p.grad_scale, p.ignore_label, p.multi_output, p.use_ignore, p.preserve_shape,
            p.normalization, p.out_grad, p.smooth_alpha) == (1.0, -1.0, False, False, False,
                                                             "null", False, 0.0)
    alias, _ = oh.prepare("Softmax", {})
    assert alias is op
    with pytest.raises(MXNetError, match="normalization"):
        oh.prepare("SoftmaxOutput", {"normalization": "sum"})


def test_softmax_output_label_shapes():
    op, p = oh.prepare("SoftmaxOutput", {})
    assert op.infer_shape(p, [(4, 5), None]) == ([(4, 5), (4,)], [(4, 5)])
    assert op.infer_shape(p, [None, (4,)]) == ([None, (4,)], [None])
    with pytest.raises(MXNetError, match=r"label has shape \(3,\), expected \(4,\) for data "
                                         r"\(4, 5\)"):
        op.infer_shape(p, [(4, 5), (3,)])
    op, p = oh.prepare("SoftmaxOutput", {"multi_output": True})
    with pytest.raises(MXNetError, match=r"label has shape \(4, 3\), expected \(4, 42\) or "
                                         r"\(4, 6, 7\)"):
        op.infer_shape(p, [(4, 5, 6, 7), (4, 3)])
    # unknown dims merge with the accepted layouts
    assert op.infer_shape(p, [(4, 5, 6, 7), (0, 6, 7)])[0][1] == (4, 6, 7)


# ---------------------------------------------------------------------------------------------
# Regression heads
# ---------------------------------------------------------------------------------------------
@settings(max_examples=20, deadline=None)
@given(op=st.sampled_from(["LinearRegressionOutput", "LogisticRegressionOutput",
                           "MAERegressionOutput"]),
       shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
       grad_scale=st.sampled_from([1.0, 0.25, 2.0]), seed=st.integers(0, 999))
def test_regression_heads(op, shape, grad_scale, seed):
    rng = np.random.default_rng(seed)
    shape = tuple(shape)
    x = rng.standard_normal(shape)
    label_shape = (shape[0],) if shape[1:] == (1,) else shape
    label = rng.standard_normal(label_shape)
    attrs = {"grad_scale": grad_scale}
    opd, p = oh.prepare(op, attrs)
    assert opd.infer_shape(p, [shape, None])[0][1] == label_shape
    out = oh.forward(op, attrs, [x, label])[0][0]
    ref = 1 / (1 + np.exp(-x)) if op.startswith("Logistic") else x
    np.testing.assert_allclose(out, ref, rtol=1e-12)
    diff = ref - label.reshape(shape)
    per_sample = label.size // label.shape[0]
    expected = (np.sign(diff) if op.startswith("MAE") else diff) * grad_scale / per_sample
    head = rng.standard_normal(shape)
    grads = oh.backward(op, attrs, [x, label], [head])
    np.testing.assert_allclose(grads[0], expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(grads[1], 0)
    added = oh.backward(op, attrs, [x, label], [head], req=["add", "null"],
                        init_grads=[np.full(shape, -1.0), None])
    np.testing.assert_allclose(added[0], expected - 1, rtol=1e-12, atol=1e-15)


def test_regression_label_errors():
    op, p = oh.prepare("LinearRegressionOutput", {})
    assert op.is_loss and op.get_hint() == "linearregressionoutput"
    with pytest.raises(MXNetError, match=r"label has shape \(4,\), expected \(4, 3\)"):
        op.infer_shape(p, [(4, 3), (4,)])
    assert op.infer_shape(p, [(4, 3), (4, 3, 1)])[0][1] == (4, 3, 1)    # same size per sample


# ---------------------------------------------------------------------------------------------
# MakeLoss, make_loss, BlockGrad, smooth_l1, softmax_cross_entropy
# ---------------------------------------------------------------------------------------------
@settings(max_examples=10, deadline=None)
@given(norm=st.sampled_from(["null", "batch", "valid"]), scale=st.sampled_from([1.0, 0.3]),
       thresh=st.sampled_from([0.0, 0.5, 100.0]), seed=st.integers(0, 999))
def test_make_loss(norm, scale, thresh, seed):
    x = np.random.default_rng(seed).standard_normal((5, 3))
    attrs = {"normalization": norm, "grad_scale": scale, "valid_thresh": thresh}
    out = oh.forward("MakeLoss", attrs, [x])[0][0]
    np.testing.assert_array_equal(out, x)
    denom = {"null": 1, "batch": 5, "valid": max(1, int((x > thresh).sum()))}[norm]
    g = oh.backward("MakeLoss", attrs, [x], [np.full(x.shape, 7.0)])[0]
    np.testing.assert_allclose(g, np.full(x.shape, scale / denom))
    g = oh.backward("MakeLoss", attrs, [x], [None], req=["add"], init_grads=[np.ones(x.shape)])
    np.testing.assert_allclose(g[0], 1 + scale / denom)


def test_make_loss_block_grad_declarations():
    op, p = oh.prepare("make_loss", {})
    assert op.list_outputs(p) == ["loss"] and op.get_hint() == "make_loss" and op.is_loss
    op2, p2 = oh.prepare("MakeLoss", {})
    assert op2 is not op and op2.get_hint() == "makeloss" and op2.list_outputs(p2) == ["output"]
    x = np.arange(6.0).reshape(2, 3)
    g = oh.backward("make_loss", {}, [x], [np.full(x.shape, 5.0)])[0]
    np.testing.assert_array_equal(g, np.ones_like(x))
    bg, _ = oh.prepare("stop_gradient", {})
    assert bg.name == "BlockGrad" and bg.get_hint() == "blockgrad"
    out = oh.forward("BlockGrad", {}, [x])[0][0]
    np.testing.assert_array_equal(out, x)
    g = oh.backward("BlockGrad", {}, [x], [np.ones_like(x)])[0]
    np.testing.assert_array_equal(g, 0)
    g = oh.backward("BlockGrad", {}, [x], [np.ones_like(x)], req=["add"],
                    init_grads=[np.full(x.shape, 2.0)])[0]
    np.testing.assert_array_equal(g, 2.0)
    assert op.infer_shape_backward(p, [None], [(2, 3)]) == [(2, 3)]


@settings(max_examples=8, deadline=None)
@given(sigma=st.sampled_from([0.5, 1.0, 2.0]), seed=st.integers(0, 999))
def test_smooth_l1(sigma, seed):
    x = np.random.default_rng(seed).standard_normal((4, 5)) * 2
    s2 = sigma * sigma
    x = np.where(np.abs(np.abs(x) - 1 / s2) < 1e-3, x + 0.01, x)     # off the seam
    out = oh.forward("smooth_l1", {"scalar": sigma}, [x])[0][0]
    ref = np.where(np.abs(x) < 1 / s2, 0.5 * s2 * x * x, np.abs(x) - 0.5 / s2)
    np.testing.assert_allclose(out, ref, rtol=1e-12)
    oh.check_grad("smooth_l1", {"scalar": sigma}, [x])
    _, p = oh.prepare("smooth_l1", {})
    assert p.scalar == 1.0


@settings(max_examples=8, deadline=None)
@given(n=st.integers(1, 4), c=st.integers(1, 5), seed=st.integers(0, 999))
def test_softmax_cross_entropy(n, c, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c))
    label = rng.integers(0, c, n).astype(np.float64)
    out = oh.forward("softmax_cross_entropy", {}, [x, label])[0][0]
    e = np.exp(x - x.max(1, keepdims=True))
    prob = e / e.sum(1, keepdims=True)
    assert out.shape == (1,)
    np.testing.assert_allclose(out[0], -np.log(prob[np.arange(n), label.astype(int)]).sum(),
                               rtol=1e-12)
    head = [np.array([1.7])]
    g = oh.backward("softmax_cross_entropy", {}, [x, label], head, req=["write", "null"])[0]
    num = oh.numeric_grad("softmax_cross_entropy", {}, [x, label], head, 0, eps=1e-5)
    np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-8)


def test_softmax_cross_entropy_errors():
    op, p = oh.prepare("softmax_cross_entropy", {})
    assert op.infer_shape(p, [(4, 5), None]) == ([(4, 5), (4,)], [(1,)])
    with pytest.raises(MXNetError, match=r"data must be 2-D"):
        op.infer_shape(p, [(4, 5, 2), None])
    with pytest.raises(MXNetError, match=r"label has shape \(3,\), expected \(4,\)"):
        op.infer_shape(p, [(4, 5), (3,)])
    x, label = np.zeros((2, 3)), np.array([0.0, 1.0])
    with pytest.raises(MXNetError, match="gradient with respect to label"):
        oh.backward("softmax_cross_entropy", {}, [x, label], [np.ones(1)])
