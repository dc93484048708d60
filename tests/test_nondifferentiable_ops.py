"""Operators MXNet registers no gradient for, and partial shape inference of batch_dot/where.

Binding: MXNet 1.9.1 builds the backward graph over everything a head gradient reaches as soon
as any gradient is requested, and fails for an operator without a gradient ("Operator batch_take
is non-differentiable ..."), whether or not its own inputs need one; BlockGrad/stop_gradient
after it, or grad_req='null' everywhere, avoids that (tests/python/unittest/test_symbol.py
test_zero_prop2; each case below was run on MXNet 1.9.1).
Shapes: MXNet's legacy rules from test_infer_shape.py (test_batch_dot_partial_shape,
test_where_partial_shape) and the same probes on MXNet 1.9.1.
"""
import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError

X, IDX = mx.sym.Variable("x"), mx.sym.Variable("idx")
SHAPES = {"x": (10, 10), "idx": (10,)}
TYPES = {"x": np.float32, "idx": np.int32}


def bind(sym, **kw):
    return sym.simple_bind(ctx=mx.cpu(), type_dict=TYPES, **SHAPES, **kw)


def test_stop_gradient_after_batch_take_binds_and_runs():
    exe = bind(mx.sym.stop_gradient(mx.sym.batch_take(X, IDX)))
    x = np.random.default_rng(0).standard_normal((10, 10)).astype(np.float32)
    idx = np.array([0, 9, 3, 3, 1, 2, 8, 7, 5, 4])
    exe.arg_dict["x"][:] = x
    exe.arg_dict["idx"][:] = idx
    exe.forward(is_train=True)
    exe.backward()
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), x[np.arange(10), idx])
    assert not exe.grad_dict["x"].asnumpy().any()     # behind stop_gradient: zeros


@pytest.mark.parametrize("make, grad_req", [
    (lambda y: y, "write"),
    (lambda y: y, "add"),
    (lambda y: y, {"x": "null", "idx": "write"}),
    (lambda y: y, {"x": "write", "idx": "null"}),
    (lambda y: mx.sym.sum(y) + mx.sym.sum(X), "write"),
    (lambda y: mx.sym.MakeLoss(y), "write"),
])
def test_gradient_into_batch_take_fails_at_bind(make, grad_req):
    with pytest.raises(MXNetError, match="batch_take is non-differentiable"):
        bind(make(mx.sym.batch_take(X, IDX)), grad_req=grad_req)


def test_gradient_into_batch_take_fails_even_when_its_inputs_need_none():
    # MXNet: the backward graph covers batch_take once a head gradient reaches it
    y = mx.sym.batch_take(mx.sym.stop_gradient(X), mx.sym.stop_gradient(IDX))
    with pytest.raises(MXNetError, match="batch_take is non-differentiable"):
        bind(y)


def test_batch_take_without_any_gradient_binds():
    y = mx.sym.batch_take(X, IDX)
    exe = bind(y, grad_req="null")
    exe.forward()
    exe = y.bind(mx.cpu(), {"x": mx.nd.ones((10, 10)), "idx": mx.nd.zeros((10,), dtype="int32")})
    exe.forward()
    with pytest.raises(MXNetError, match="batch_take is non-differentiable"):
        y.bind(mx.cpu(), {"x": mx.nd.ones((10, 10)), "idx": mx.nd.zeros((10,), dtype="int32")},
               args_grad={"x": mx.nd.zeros((10, 10))})


def test_block_grad_beside_batch_take_binds():
    y = mx.sym.BlockGrad(mx.sym.batch_take(X, IDX)) + mx.sym.sum(X, axis=1)
    exe = bind(y)
    exe.forward(is_train=True)
    exe.backward(mx.nd.ones((10,)))
    np.testing.assert_array_equal(exe.grad_dict["x"].asnumpy(), np.ones((10, 10)))


@pytest.mark.parametrize("make", [
    lambda: mx.sym.argmax_channel(X),
    lambda: mx.sym.all_finite(X),
    lambda: mx.sym.multi_all_finite(X, X, num_arrays=2),
    lambda: mx.sym.histogram(X, bins=3, range=(0, 1))[0],
])
def test_other_operators_without_gradient(make):
    y = make()
    with pytest.raises(MXNetError, match="non-differentiable"):
        bind(y)
    bind(y, grad_req="null").forward()
    bind(mx.sym.BlockGrad(y))


def test_module_training_through_batch_take_fails_like_mxnet():
    data, label = mx.sym.Variable("data"), mx.sym.Variable("softmax_label")
    fc = mx.sym.FullyConnected(data, num_hidden=4, name="fc")
    picked = mx.sym.batch_take(fc, mx.sym.Cast(label, dtype="int32"))
    net = mx.sym.MakeLoss(mx.sym.sum(picked))
    mod = mx.mod.Module(net, data_names=["data"], label_names=["softmax_label"])
    with pytest.raises(MXNetError, match="batch_take is non-differentiable"):
        mod.bind(data_shapes=[("data", (3, 5))], label_shapes=[("softmax_label", (3,))])
    inference = mx.mod.Module(net, data_names=["data"], label_names=["softmax_label"])
    inference.bind(data_shapes=[("data", (3, 5))], label_shapes=[("softmax_label", (3,))],
                   for_training=False)


# ---------------------------------------------------------------------------------------------
# partial shapes (MXNet's legacy rule: 0 = unknown dim)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shapes, args, out", [
    ({"x": (0, 3, 4), "y": (0, 4, 5)}, [(0, 3, 4), (0, 4, 5)], [(0, 3, 5)]),
    ({"x": (0, 3, 4), "y": (0, 0, 5)}, [(0, 3, 4), (0, 0, 5)], [()]),
    ({"x": (2, 3, 4), "y": (2, 0, 5)}, [(2, 3, 4), (2, 0, 5)], [()]),
    ({"x": (0, 3, 0), "y": (0, 4, 5)}, [(0, 3, 0), (0, 4, 5)], [()]),
    ({"x": (0, 0, 4), "y": (0, 4, 5)}, [(0, 0, 4), (0, 4, 5)], [(0, 0, 5)]),
    ({"x": (0, 3, 4), "y": (0, 4, 0)}, [(0, 3, 4), (0, 4, 0)], [(0, 3, 0)]),
    ({"x": (2, 3, 4)}, [(2, 3, 4), ()], [()]),
])
def test_batch_dot_partial_shapes(shapes, args, out):
    z = mx.sym.batch_dot(mx.sym.Variable("x"), mx.sym.Variable("y"))
    got_args, got_out, _ = z.infer_shape_partial(**shapes)
    assert (got_args, got_out) == (args, out)


def test_batch_dot_transposed_partial_and_mismatch():
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    z = mx.sym.batch_dot(x, y, transpose_a=True, transpose_b=True)
    assert z.infer_shape_partial(x=(0, 4, 3), y=(0, 5, 4))[1] == [(0, 3, 5)]
    assert z.infer_shape(x=(2, 4, 3), y=(2, 5, 4))[1] == [(2, 3, 5)]
    with pytest.raises(MXNetError):
        mx.sym.batch_dot(x, y).infer_shape(x=(2, 3, 4), y=(2, 5, 5))


@pytest.mark.parametrize("shapes, args, out", [
    ({"cond": (0, 2), "x": (0, 2), "y": (0, 2)}, [(0, 2), (0, 2), (0, 2)], [()]),
    ({"cond": (0,), "x": (2, 2), "y": (2, 2)}, [(0,), (2, 2), (2, 2)], [()]),
    ({"cond": (2, 0), "x": (2, 3), "y": (2, 3)}, [(2, 0), (2, 3), (2, 3)], [()]),
    ({"x": (2, 3)}, [(), (2, 3), ()], [()]),
    ({"x": (2, 3), "y": (2, 3)}, [(), (2, 3), (2, 3)], [()]),
    ({"cond": (2, 2), "x": (0, 2), "y": (2, 2)}, [(2, 2), (2, 2), (2, 2)], [(2, 2)]),
    ({"cond": (2, 2), "x": (0, 2), "y": (0, 2)}, [(2, 2), (0, 2), (0, 2)], [(0, 2)]),
    ({"cond": (2,), "x": (2, 0), "y": (2, 3)}, [(2,), (2, 3), (2, 3)], [(2, 3)]),
    ({"cond": (2,), "x": (2, 3)}, [(2,), (2, 3), (2, 3)], [(2, 3)]),
])
def test_where_partial_shapes_need_a_known_condition(shapes, args, out):
    w = mx.sym.where(mx.sym.Variable("cond"), mx.sym.Variable("x"), mx.sym.Variable("y"))
    got_args, got_out, _ = w.infer_shape_partial(**shapes)
    assert (got_args, got_out) == (args, out)


def test_where_bad_condition_shape_still_raises():
    w = mx.sym.where(mx.sym.Variable("cond"), mx.sym.Variable("x"), mx.sym.Variable("y"))
    with pytest.raises(MXNetError):
        w.infer_shape(cond=(3,), x=(2, 3), y=(2, 3))
    with pytest.raises(MXNetError):
        w.infer_shape(cond=(2, 3), x=(2, 3), y=(2, 4))


# ---------------------------------------------------------------------------------------------
# operators whose gradient is zero: MXNet never reads their head gradient
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make, shape", [
    (lambda a: mx.sym.argmax(a, axis=1, keepdims=True), (3, 4)),
    (lambda a: mx.sym.argmin(a, axis=1), (3, 4)),
    (lambda a: mx.sym.one_hot(a, depth=3), (4,)),
    (lambda a: mx.sym.argsort(a), (3, 4)),
])
def test_zero_gradient_heads_ignore_the_head_gradient(make, shape):
    # test_operator.py::test_order passes a (5, 5, 5, 5) head gradient for argmax's
    # (5, 1, 5, 5) output; MXNet ignores it, as it does a missing one
    a = mx.sym.Variable("a")
    for head in ([mx.nd.ones((7, 7))], None):
        exe = make(a).simple_bind(mx.cpu(), a=shape)
        exe.arg_dict["a"][:] = np.random.default_rng(1).standard_normal(shape)
        exe.grad_dict["a"][:] = 5.0
        exe.forward(is_train=True)
        exe.backward(head)
        assert not exe.grad_dict["a"].asnumpy().any()


def test_head_gradient_shape_still_checked_where_it_is_read():
    a = mx.sym.Variable("a")
    exe = mx.sym.relu(a).simple_bind(mx.cpu(), a=(3, 4))
    exe.forward(is_train=True)
    with pytest.raises(MXNetError, match="head gradient 0 has shape"):
        exe.backward([mx.nd.ones((7, 7))])
    with pytest.raises(MXNetError, match="head gradient is required"):
        exe.backward()
