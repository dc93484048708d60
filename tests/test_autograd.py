"""mx.autograd: gradients of recorded NDArray computations against analytic ones, numeric
ones and the executor's on the same graph; views, requests, retained graphs, training mode,
custom Functions and the errors."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lightmod as mx
from lightmod import autograd
from lightmod.base import MXNetError


def _array(values, dtype=np.float32):
    return mx.nd.array(np.asarray(values, dtype=dtype), dtype=dtype)


def test_gradient_of_a_composite_expression():
    x = _array([[1.0, 2.0], [3.0, -4.0]])
    x.attach_grad()
    with autograd.record():
        y = (x * x + 2 * x) / 4 + mx.nd.exp(x * 0.5)
        z = y.sum() * 3
    z.backward()
    xs = x.asnumpy()
    np.testing.assert_allclose(x.grad.asnumpy(), 3 * ((2 * xs + 2) / 4 + 0.5 * np.exp(xs / 2)),
                               rtol=1e-6)


def test_state_switches():
    assert not autograd.is_recording() and not autograd.is_training()
    with autograd.record():
        assert autograd.is_recording() and autograd.is_training()
        with autograd.pause():
            assert not autograd.is_recording() and not autograd.is_training()
        with autograd.predict_mode():
            assert autograd.is_recording() and not autograd.is_training()
    with autograd.record(train_mode=False):
        assert autograd.is_recording() and not autograd.is_training()
    with autograd.train_mode():
        assert not autograd.is_recording() and autograd.is_training()
    assert autograd.set_recording(True) is False
    assert autograd.set_recording(False) is True
    assert autograd.set_training(True) is False
    assert autograd.set_training(False) is True


def test_nothing_is_recorded_outside_record_or_inside_pause():
    x = _array([1.0, 2.0])
    x.attach_grad()
    y = x * 2
    with autograd.record():
        with autograd.pause():
            w = x * 5
        v = x * 3 + w
    with pytest.raises(MXNetError, match="not computed while recording"):
        y.backward()
    v.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [3, 3])


def test_grad_requests_write_add_null_and_retained_graphs():
    x = _array([1.0, -2.0, 3.0])
    x.attach_grad(grad_req="add")
    w = _array([0.5, 0.5, 0.5])
    w.attach_grad(grad_req="null")
    with autograd.record():
        y = (x * x * w).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), 2 * (2 * x.asnumpy() * 0.5))
    np.testing.assert_array_equal(w.grad.asnumpy(), [0, 0, 0])
    with pytest.raises(MXNetError, match="already differentiated and released"):
        y.backward()
    # an intermediate result of a released graph is a constant in a new recording
    with autograd.record():
        middle = x * 3
        (middle * 1).sum().backward()
    with autograd.record():
        again = (middle * middle).sum() + (x * 0).sum()
        alone = (middle * middle).sum()
    before = x.grad.copy()                  # ('add': the zero gradient changes nothing)
    again.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), before.asnumpy())
    with pytest.raises(MXNetError, match="not computed while recording"):
        alone.backward()
    x.attach_grad()         # 'write' replaces
    with autograd.record():
        y = (x * 4).sum()
    y.backward()
    y2 = None
    with autograd.record():
        y2 = (x * 5).sum()
    y2.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [5, 5, 5])


def test_head_gradients_and_several_heads():
    x = _array([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        a = x * x
        b = mx.nd.sin(x)
    autograd.backward([a, b], [_array([1.0, 10.0]), _array([2.0, 0.0])])
    xs = x.asnumpy()
    np.testing.assert_allclose(x.grad.asnumpy(), np.array([1, 10]) * 2 * xs
                               + np.array([2, 0]) * np.cos(xs),
                               rtol=1e-6)
    with autograd.record():
        a = x * x
    with pytest.raises(MXNetError, match="head of shape \\(2,\\) was given a head gradient of "
                                         "shape \\(3,\\)"):
        a.backward(_array([1.0, 1.0, 1.0]))


def test_grad_returns_new_arrays():
    x = _array([1.0, 2.0])
    y = _array([3.0, 4.0])
    x.attach_grad()
    y.attach_grad()
    unused = _array([1.0])
    unused.attach_grad()
    with autograd.record():
        z = (x * y).sum()
    gx, gy, gu = autograd.grad(z, [x, y, unused])
    np.testing.assert_array_equal(gx.asnumpy(), [3, 4])
    np.testing.assert_array_equal(gy.asnumpy(), [1, 2])
    np.testing.assert_array_equal(gu.asnumpy(), [0])
    np.testing.assert_array_equal(x.grad.asnumpy(), [0, 0])
    with pytest.raises(MXNetError, match="create_graph=True .* not provided"):
        autograd.grad(z, [x], create_graph=True)
    with pytest.raises(MXNetError, match="must be marked first"):
        autograd.grad(z, [_array([1.0])])


def test_views_and_copies_pass_gradients():
    x = _array(np.arange(12.0).reshape(3, 4))
    x.attach_grad()
    with autograd.record():
        parts = [x[1], x[:, 1:3], x[0, 2], x[[0, 0, 2]], x.reshape((4, 3)).T,
                 x.astype("float64"), x.copy(), x.as_in_context(mx.cpu(1))]
        total = sum((p.astype("float32") * (i + 1)).sum() for i, p in enumerate(parts))
    total.backward()
    expected = np.zeros((3, 4), np.float32)
    expected[1] += 1
    expected[:, 1:3] += 2
    expected[0, 2] += 3
    expected[0] += 4 * 2          # row 0 taken twice
    expected[2] += 4
    expected += 5 + 6 + 7 + 8
    np.testing.assert_array_equal(x.grad.asnumpy(), expected)


def test_in_place_writes_are_refused_while_recording():
    x = _array([1.0, 2.0, 3.0])
    x.attach_grad()
    target = mx.nd.zeros((3,))
    with autograd.record():
        with pytest.raises(MXNetError, match="Inplace operations .* not supported"):
            x += 1
        y = x * 2
        with pytest.raises(MXNetError, match="Inplace operations .* not supported"):
            target[1:] = y[1:]
        with pytest.raises(MXNetError, match="already part of a recorded computation"):
            mx.nd.exp(x, out=y)
        target[:] = y           # the whole array: a recorded copy
        z = (target * target).sum()
    z.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), 2 * (2 * x.asnumpy()) * 2)
    row = _array([1.0, 2.0, 3.0])
    row.attach_grad()
    wide = mx.nd.zeros((4, 3))
    with autograd.record():
        wide[:] = row           # broadcast: the gradient sums over the new axis
        (wide * 2).sum().backward()
    np.testing.assert_array_equal(row.grad.asnumpy(), [8, 8, 8])
    x += 1                      # outside record: allowed
    np.testing.assert_array_equal(x.asnumpy(), [2, 3, 4])


def test_training_mode_reaches_the_operators():
    x = mx.nd.ones((200,))
    x.attach_grad()
    mx.random.seed(1)
    with autograd.record():
        dropped = mx.nd.Dropout(x, p=0.5)
    kept = dropped.asnumpy() != 0
    assert 0 < kept.sum() < 200
    np.testing.assert_allclose(dropped.asnumpy()[kept], 2.0)
    dropped.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), np.where(kept, 2.0, 0.0))
    with autograd.record(train_mode=False):
        same = mx.nd.Dropout(x, p=0.5)
    np.testing.assert_array_equal(same.asnumpy(), x.asnumpy())


def test_blocked_detached_and_loss_heads():
    x = _array([[0.5, -1.0, 2.0], [1.0, 1.0, 1.0]])
    x.attach_grad()
    label = _array([2, 0])
    with autograd.record():
        y = x * 3 + mx.nd.BlockGrad(x * 100) + x.detach() * 100
        loss = mx.nd.SoftmaxOutput(y, label)
    loss.backward()                 # a loss head ignores the head gradient
    xs = x.asnumpy()
    logits = xs * 3 + 200 * xs
    prob = np.exp(logits - logits.max(1, keepdims=True))
    prob /= prob.sum(1, keepdims=True)
    onehot = np.eye(3)[[2, 0]]
    np.testing.assert_allclose(x.grad.asnumpy(), 3 * (prob - onehot), rtol=1e-5, atol=1e-6)


def test_backward_through_a_non_differentiable_operator_is_an_error():
    x = _array([[1.0, 3.0, 2.0]])
    x.attach_grad()
    with autograd.record():
        y = mx.nd.batch_take(x, mx.nd.array([1], dtype="int32")) * x.sum()
    with pytest.raises(MXNetError, match="operator batch_take.*non-differentiable"):
        y.backward()


def test_custom_function():
    class Sigmoid(autograd.Function):
        def forward(self, x):
            y = 1 / (1 + mx.nd.exp(-x))
            self.save_for_backward(y)
            return y

        def backward(self, dy):
            y, = self.saved_tensors
            return dy * y * (1 - y)

    x = _array([-1.0, 0.0, 2.0])
    x.attach_grad()
    with autograd.record():
        z = (Sigmoid()(x) * 2).sum()
    z.backward()
    s = 1 / (1 + np.exp(-x.asnumpy()))
    np.testing.assert_allclose(x.grad.asnumpy(), 2 * s * (1 - s), rtol=1e-6)

    class NoBackward(autograd.Function):
        def forward(self, x):
            return x * 2

    with pytest.raises(TypeError, match="NoBackward is an autograd.Function without "
                                        "backward"):
        NoBackward()(x)


def test_mark_variables_checks_its_arguments():
    x = _array([1.0, 2.0])
    with pytest.raises(MXNetError, match="gradient of a variable of shape \\(2,\\) has shape"):
        autograd.mark_variables([x], [mx.nd.zeros((3,))])
    with pytest.raises(MXNetError, match="grad_req must be 'write', 'add' or 'null'"):
        autograd.mark_variables([x], [mx.nd.zeros((2,))], "sometimes")
    g = mx.nd.zeros((2,))
    autograd.mark_variables(x, g)
    assert x.grad is g
    with autograd.record():
        y = (x * x).sum()
    y.backward()
    np.testing.assert_array_equal(g.asnumpy(), [2, 4])


_UNARY = ["tanh", "sigmoid", "exp", "sin", "square", "relu", "negative"]
_BINARY = ["broadcast_add", "broadcast_mul", "broadcast_sub", "elemwise_mul"]


@st.composite
def _programs(draw):
    steps = []
    for i in range(draw(st.integers(1, 8))):
        if draw(st.booleans()):
            steps.append((draw(st.sampled_from(_UNARY)), draw(st.integers(0, i + 1)), None))
        else:
            steps.append((draw(st.sampled_from(_BINARY)), draw(st.integers(0, i + 1)),
                          draw(st.integers(0, i + 1))))
    return steps


def _run(module, steps, a, b):
    values = [a, b]
    for op, first, second in steps:
        fn = getattr(module, op)
        values.append(fn(values[first]) if second is None
                      else fn(values[first], values[second]))
    return module.sum(values[-1] * values[-1])


@settings(max_examples=40, deadline=None)
@given(steps=_programs(), seed=st.integers(0, 1000))
def test_autograd_equals_the_executor(steps, seed):
    """The same program of operators, recorded on NDArrays and bound as a symbol graph:
    the same gradients."""
    rng = np.random.RandomState(seed)
    a_val = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
    b_val = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
    a, b = mx.nd.array(a_val), mx.nd.array(b_val)
    a.attach_grad()
    b.attach_grad()
    with autograd.record():
        loss = _run(mx.nd, steps, a, b)
    loss.backward()
    sym = mx.sym.make_loss(_run(mx.sym, steps, mx.sym.var("a"), mx.sym.var("b")))
    used = sym.list_arguments()
    ex = sym.simple_bind(mx.cpu(), **{n: (3, 4) for n in used})
    values = {"a": a_val, "b": b_val}
    for name in used:
        ex.arg_dict[name][:] = values[name]
    ex.forward(is_train=True)
    ex.backward()
    np.testing.assert_allclose(loss.asnumpy(), ex.outputs[0].asnumpy(), rtol=1e-5, atol=1e-6)
    for name, arr in (("a", a), ("b", b)):
        # an input the program never reads keeps its zero gradient
        want = ex.grad_dict[name].asnumpy() if name in used else np.zeros((3, 4))
        np.testing.assert_allclose(arr.grad.asnumpy(), want, rtol=1e-5, atol=1e-6)


def test_gradient_matches_a_numeric_one():
    rng = np.random.RandomState(3)
    w_val = rng.uniform(-1, 1, (4, 3))
    x_val = rng.uniform(-1, 1, (5, 3))

    def loss_of(w):
        h = np.tanh(x_val @ w.T)
        return float((h * h).sum())

    w = mx.nd.array(w_val, dtype="float64")
    w.attach_grad()
    x = mx.nd.array(x_val, dtype="float64")
    with autograd.record():
        h = mx.nd.tanh(mx.nd.FullyConnected(x, w, num_hidden=4, no_bias=True))
        loss = (h * h).sum()
    loss.backward()
    numeric = np.zeros_like(w_val)
    for i in np.ndindex(w_val.shape):
        up, down = w_val.copy(), w_val.copy()
        up[i] += 1e-6
        down[i] -= 1e-6
        numeric[i] = (loss_of(up) - loss_of(down)) / 2e-6
    np.testing.assert_allclose(w.grad.asnumpy(), numeric, rtol=1e-6, atol=1e-8)


class _Cube(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], in_data[0] * in_data[0] * in_data[0])

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], 3 * in_data[0] * in_data[0] * out_grad[0])


@mx.operator.register("autograd_cube")
class _CubeProp(mx.operator.CustomOpProp):
    def __init__(self):
        super().__init__(need_top_grad=True)

    def list_arguments(self):
        return ["data"]

    def list_outputs(self):
        return ["output"]

    def infer_shape(self, in_shape):
        return in_shape, in_shape, []

    def create_operator(self, ctx, shapes, dtypes):
        return _Cube()


def test_python_custom_operator_is_differentiated_by_its_backward():
    x = _array([1.0, -2.0, 0.5])
    x.attach_grad()
    with autograd.record():
        y = mx.nd.Custom(x, op_type="autograd_cube") * 2
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), 6 * x.asnumpy() ** 2, rtol=1e-6)
