"""Executor: bind / simple_bind, forward and backward against numpy and numeric gradients,
grad_req, shared executors and buffers, reshape, monitor, contexts, and an end-to-end MLP."""
import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lightmod as mx
from lightmod.base import MXNetError

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "symbols")


def nd(x, dtype=np.float32):
    return mx.nd.array(np.asarray(x), dtype=dtype)


def numeric_grads(sym, values, head, wrt, eps=1e-6):
    """Central-difference gradients of sum(output * head) w.r.t. the named float64 args."""
    shapes = {k: v.shape for k, v in values.items()}
    exe = sym.simple_bind(mx.cpu(), grad_req="null", type_dict={k: "float64" for k in values},
                          **shapes)

    def f():
        for k, v in values.items():
            exe.arg_dict[k][:] = v
        return float(np.sum(exe.forward(is_train=True)[0].asnumpy() * head))
    out = {}
    for name in wrt:
        x = values[name]
        g = np.zeros_like(x)
        for i in range(x.size):
            old = x.flat[i]
            x.flat[i] = old + eps
            up = f()
            x.flat[i] = old - eps
            down = f()
            x.flat[i] = old
            g.flat[i] = (up - down) / (2 * eps)
        out[name] = g
    return out


# ---------------------------------------------------------------------------------------------
# bind with given arrays: element-wise and dot against numpy
# ---------------------------------------------------------------------------------------------
BINARY = [
    (lambda a, b: a + b, lambda a, b, g: (g, g)),
    (lambda a, b: a - b, lambda a, b, g: (g, -g)),
    (lambda a, b: a * b, lambda a, b, g: (g * b, g * a)),
    (lambda a, b: a / b, lambda a, b, g: (g / b, -g * a / (b * b))),
    (lambda a, b: mx.sym.maximum(a, b) if isinstance(a, mx.sym.Symbol) else np.maximum(a, b),
     lambda a, b, g: (g * (a >= b), g * (a < b))),
    (lambda a, b: mx.sym.minimum(a, b) if isinstance(a, mx.sym.Symbol) else np.minimum(a, b),
     lambda a, b, g: (g * (a <= b), g * (a > b))),
]


@pytest.mark.parametrize("case", range(len(BINARY)))
@pytest.mark.parametrize("shape", [(4,), (3, 5), (2, 3, 4)])
@pytest.mark.parametrize("as_dict", [False, True])
def test_bind_binary(case, shape, as_dict):
    fwd, bwd = BINARY[case]
    rng = np.random.default_rng(case)
    a_np = rng.uniform(-1, 1, shape).astype(np.float32)
    b_np = rng.uniform(0.5, 1.5, shape).astype(np.float32) * rng.choice([-1, 1], shape)
    a, b = mx.sym.var("a"), mx.sym.var("b")
    c = fwd(a, b)
    args = [nd(a_np), nd(b_np)]
    grads = [mx.nd.zeros(shape), mx.nd.zeros(shape)]
    if as_dict:
        exe = c.bind(mx.cpu(), args={"a": args[0], "b": args[1]},
                     args_grad={"a": grads[0], "b": grads[1]})
    else:
        exe = c.bind(mx.cpu(), args=args, args_grad=grads)
    out = exe.forward()
    assert len(out) == 1
    np.testing.assert_allclose(out[0].asnumpy(), fwd(a_np, b_np), rtol=1e-6)
    head = rng.standard_normal(shape).astype(np.float32)
    exe.backward([nd(head)])
    ga, gb = bwd(a_np, b_np, head)
    np.testing.assert_allclose(grads[0].asnumpy(), ga, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grads[1].asnumpy(), gb, rtol=1e-5, atol=1e-6)
    assert exe.grad_arrays[0] is grads[0] and exe.arg_arrays[1] is args[1]


def test_dot():
    rng = np.random.default_rng(1)
    for sa, sb in (((3, 4), (4, 5)), ((6,), (6,))):
        a_np = rng.standard_normal(sa).astype(np.float32)
        b_np = rng.standard_normal(sb).astype(np.float32)
        c = mx.sym.dot(mx.sym.var("a"), mx.sym.var("b"))
        ga, gb = mx.nd.zeros(sa), mx.nd.zeros(sb)
        exe = c.bind(mx.cpu(), args=[nd(a_np), nd(b_np)], args_grad=[ga, gb])
        expected = np.dot(a_np, b_np).reshape(exe.outputs[0].shape)
        np.testing.assert_allclose(exe.forward()[0].asnumpy(), expected, rtol=1e-5)
        head = np.ones(exe.outputs[0].shape, np.float32)
        exe.backward([nd(head)])
        if len(sa) == 2:
            np.testing.assert_allclose(ga.asnumpy(), head @ b_np.T, rtol=1e-5)
            np.testing.assert_allclose(gb.asnumpy(), a_np.T @ head, rtol=1e-5)
        else:
            np.testing.assert_allclose(ga.asnumpy(), b_np, rtol=1e-5)
            np.testing.assert_allclose(gb.asnumpy(), a_np, rtol=1e-5)


def test_bind_argument_errors():
    c = mx.sym.var("a") + mx.sym.var("b")
    with pytest.raises(ValueError, match="Length of args"):
        c.bind(mx.cpu(), args=[mx.nd.zeros((2,))])
    with pytest.raises(ValueError, match="missing"):
        c.bind(mx.cpu(), args={"a": mx.nd.zeros((2,))})
    with pytest.raises(TypeError):
        c.bind(mx.cpu(), args=[np.zeros(2), np.zeros(2)])
    with pytest.raises(TypeError, match="Context"):
        c.bind("cpu", args=[mx.nd.zeros((2,)), mx.nd.zeros((2,))])
    with pytest.raises(MXNetError, match="Shape inconsistent|shape"):
        c.bind(mx.cpu(), args=[mx.nd.zeros((2,)), mx.nd.zeros((3,))])
    with pytest.raises(ValueError, match="grad_req"):
        c.bind(mx.cpu(), args=[mx.nd.zeros((2,)), mx.nd.zeros((2,))],
               args_grad=[mx.nd.zeros((2,)), mx.nd.zeros((2,))], grad_req="sometimes")
    exe = c.bind(mx.cpu(), args=[mx.nd.ones((2,)), mx.nd.ones((2,))])
    assert exe.grad_arrays == [None, None]
    exe.forward()
    exe.backward([mx.nd.ones((2,))])          # nothing to differentiate: a silent no-op


# ---------------------------------------------------------------------------------------------
# gradients through graphs: numeric checks, fan-out, grad_req
# ---------------------------------------------------------------------------------------------
def _fanout_net():
    data = mx.sym.var("data")
    y = mx.sym.FullyConnected(data, num_hidden=3, name="fc")
    z = y * y + mx.sym.Activation(y, act_type="tanh") - 0.5 * y
    return mx.sym.FullyConnected(z, num_hidden=2, name="out")


def test_numeric_gradient_with_fanout():
    net = _fanout_net()
    rng = np.random.default_rng(3)
    values = {"data": rng.standard_normal((4, 5)), "fc_weight": rng.standard_normal((3, 5)),
              "fc_bias": rng.standard_normal(3), "out_weight": rng.standard_normal((2, 3)),
              "out_bias": rng.standard_normal(2)}
    head = rng.standard_normal((4, 2))
    exe = net.simple_bind(mx.cpu(), type_dict={k: "float64" for k in values},
                          **{k: v.shape for k, v in values.items()})
    for k, v in values.items():
        exe.arg_dict[k][:] = v
    exe.forward(is_train=True)
    exe.backward(mx.nd.array(head, dtype="float64"))
    expected = numeric_grads(net, values, head, list(values))
    for name in values:
        np.testing.assert_allclose(exe.grad_dict[name].asnumpy(), expected[name], rtol=1e-5,
                                   atol=1e-7, err_msg=name)


@settings(max_examples=8, deadline=None)
@given(rows=st.integers(1, 4), cols=st.integers(1, 4), scalar=st.floats(0.5, 3.0))
def test_elementwise_chain_gradient_property(rows, cols, scalar):
    a, b = mx.sym.var("a"), mx.sym.var("b")
    net = (a * b + scalar) / (b * b + 1.0) - a ** 2
    rng = np.random.default_rng(rows * 10 + cols)
    values = {"a": rng.standard_normal((rows, cols)), "b": rng.standard_normal((rows, cols))}
    head = rng.standard_normal((rows, cols))
    exe = net.simple_bind(mx.cpu(), type_dict={"a": "float64", "b": "float64"},
                          a=(rows, cols), b=(rows, cols))
    exe.forward(is_train=True, a=values["a"], b=values["b"])
    exe.backward([mx.nd.array(head, dtype="float64")])
    expected = numeric_grads(net, values, head, ["a", "b"])
    for name in ("a", "b"):
        np.testing.assert_allclose(exe.grad_dict[name].asnumpy(), expected[name], rtol=1e-5,
                                   atol=1e-7)


def test_grad_req_add_null_and_dict():
    a, b = mx.sym.var("a"), mx.sym.var("b")
    net = a * b + a                         # a feeds two consumers
    a_np = np.arange(6, dtype=np.float32).reshape(2, 3)
    b_np = np.full((2, 3), 2.0, np.float32)
    exe = net.simple_bind(mx.cpu(), grad_req={"a": "add", "b": "null"}, a=(2, 3), b=(2, 3))
    assert exe.grad_dict["b"] is None and exe.grad_arrays[1] is None
    head = mx.nd.ones((2, 3))
    for _ in range(3):
        exe.forward(is_train=True, a=a_np, b=b_np)
        exe.backward([head])
    np.testing.assert_allclose(exe.grad_dict["a"].asnumpy(), 3 * (b_np + 1))
    exe = net.simple_bind(mx.cpu(), grad_req=["write", "add"], a=(2, 3), b=(2, 3))
    for _ in range(2):
        exe.forward(is_train=True, a=a_np, b=b_np)
        exe.backward([head])
    np.testing.assert_allclose(exe.grad_dict["a"].asnumpy(), b_np + 1)   # write: not summed
    np.testing.assert_allclose(exe.grad_dict["b"].asnumpy(), 2 * a_np)
    with pytest.raises(MXNetError, match="grad_req list"):
        net.simple_bind(mx.cpu(), grad_req=["write"], a=(2, 3), b=(2, 3))
    with pytest.raises(RuntimeError):
        net.simple_bind(mx.cpu(), grad_req={}, a=(2, 3), b=(2, 3))


def test_same_entry_twice_in_one_operator():
    a = mx.sym.var("a")
    net = a * a
    exe = net.simple_bind(mx.cpu(), grad_req="add", a=(3,))
    exe.arg_dict["a"][:] = np.array([1, 2, 3], np.float32)
    exe.grad_dict["a"][:] = 10
    exe.forward(is_train=True)
    exe.backward([mx.nd.ones((3,))])
    np.testing.assert_allclose(exe.grad_dict["a"].asnumpy(), 10 + 2 * np.array([1, 2, 3]))


def test_heads_loss_and_required_head_gradients():
    data = mx.sym.var("data")
    fc = mx.sym.FullyConnected(data, num_hidden=3, name="fc")
    loss = mx.sym.make_loss(mx.sym.sum(fc * fc), name="loss")
    exe = loss.simple_bind(mx.cpu(), data=(2, 4))
    exe.arg_dict["data"][:] = 1
    exe.arg_dict["fc_weight"][:] = 0.5
    exe.forward(is_train=True)
    exe.backward()                                  # loss head: no head gradient needed
    grad_w = exe.grad_dict["fc_weight"].asnumpy().copy()
    exe.backward([mx.nd.ones((1,)) * 100])          # and a given one is ignored
    np.testing.assert_allclose(exe.grad_dict["fc_weight"].asnumpy(), grad_w)
    # a non-loss head needs a head gradient ... but only when something depends on it
    group = mx.sym.Group([loss, fc])
    exe = group.simple_bind(mx.cpu(), data=(2, 4))
    exe.forward(is_train=True)
    with pytest.raises(MXNetError, match="head gradient"):
        exe.backward()
    exe = group.simple_bind(mx.cpu(), data=(2, 4), grad_req="null")
    exe.forward(is_train=True)
    exe.backward()
    drop = mx.sym.Dropout(mx.sym.var("x"), p=0.5)
    exe = drop.simple_bind(mx.cpu(), x=(3, 3), grad_req="null")
    exe.forward(is_train=True)
    exe.backward()


def test_head_also_consumed_internally_sums_gradients():
    x = mx.sym.var("x")
    h = x * 3
    net = mx.sym.Group([h, h * 2])
    exe = net.simple_bind(mx.cpu(), x=(2,))
    exe.forward(is_train=True, x=np.array([1.0, 2.0], np.float32))
    exe.backward([mx.nd.ones((2,)), mx.nd.ones((2,)) * 10])
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), [3 + 60, 3 + 60])
    exe.backward([mx.nd.zeros((2,)), mx.nd.ones((2,))])
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), [6, 6])
    with pytest.raises(TypeError):
        exe.backward([np.ones(2), np.ones(2)])
    with pytest.raises(MXNetError, match="shape"):
        exe.backward([mx.nd.ones((3,)), mx.nd.ones((2,))])
    out_names = net.list_outputs()
    exe.backward({out_names[0]: mx.nd.ones((2,)), out_names[1]: mx.nd.zeros((2,))})
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), [3, 3])


# ---------------------------------------------------------------------------------------------
# simple_bind: shapes, dtypes, sharing
# ---------------------------------------------------------------------------------------------
def _mlp(hidden=4, classes=3):
    data = mx.sym.var("data")
    fc1 = mx.sym.FullyConnected(data, num_hidden=hidden, name="fc1")
    act = mx.sym.Activation(fc1, act_type="relu", name="act")
    fc2 = mx.sym.FullyConnected(act, num_hidden=classes, name="fc2")
    return mx.sym.SoftmaxOutput(fc2, name="softmax")


def test_simple_bind_arrays_and_errors():
    net = _mlp()
    exe = net.simple_bind(mx.cpu(), data=(5, 7), type_dict={"data": "float64"})
    assert exe.arg_dict["fc1_weight"].shape == (4, 7)
    assert exe.arg_dict["fc1_weight"].dtype == np.float64
    assert exe.arg_dict["softmax_label"].shape == (5,)
    assert exe.outputs[0].shape == (5, 3)
    assert all(float(np.abs(a.asnumpy()).sum()) == 0 for a in exe.arg_arrays)
    assert exe._total_exec_bytes > 0
    assert int(exe.debug_str().split("\n")[-3].split()[1]) >= 0
    assert exe.output_dict["softmax_output"] is exe.outputs[0]
    exe16 = net.simple_bind(mx.cpu(), data=(5, 7), fc1_weight=(4, 7), unknown_name=(1,))
    assert exe16.arg_dict["data"].dtype == np.float32
    with pytest.raises(MXNetError, match="simple_bind error"):
        net.simple_bind(mx.cpu(), data=(5, 7), fc1_weight=(4, 8))
    with pytest.raises(MXNetError, match="cannot infer"):
        net.simple_bind(mx.cpu())
    v = mx.sym.var("v", dtype="float16", shape=(2, 2))
    exe = (v * 2).simple_bind(mx.cpu())
    assert exe.arg_dict["v"].dtype == np.float16 and exe.outputs[0].dtype == np.float16
    sparse = mx.sym.var("s", stype="row_sparse")
    assert sparse.simple_bind(mx.cpu(), s=(3, 2)).arg_dict["s"].stype == "row_sparse"
    assert sparse.simple_bind(mx.cpu(), s=(3, 2), stype_dict={"s": "csr"}) \
        .arg_dict["s"].stype == "csr"


def test_infershape_happens_for_all_ops_in_graph():
    v = mx.sym.var("V")
    s = mx.sym.transpose(v)
    x = mx.sym.var("x")
    s2 = x + v
    s3 = s + s2
    with pytest.raises(MXNetError):
        s3.simple_bind(mx.cpu(), x=(2, 3), V=(3, 2))
    with pytest.raises(MXNetError, match="_plus"):
        s3.bind(mx.cpu(), args={"x": mx.nd.zeros((2, 3)), "V": mx.nd.zeros((3, 2))})


def test_shared_exec_and_shared_buffer():
    net = _mlp()
    params = ["fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]
    pool = {}
    base = net.simple_bind(mx.cpu(), data=(8, 5), shared_arg_names=params,
                           shared_buffer=pool)
    assert set(pool) == {"data", "softmax_label", "grad of data", "grad of softmax_label"}
    small = net.simple_bind(mx.cpu(), data=(4, 5), shared_arg_names=params, shared_exec=base,
                            shared_buffer=pool)
    for name in params:
        assert small.arg_dict[name] is base.arg_dict[name]
        assert small.grad_dict[name] is base.grad_dict[name]
    base.arg_dict["fc1_weight"][:] = 0.25
    np.testing.assert_allclose(small.arg_dict["fc1_weight"].asnumpy(), 0.25)
    # non-parameter arguments are views of the (larger) pooled arrays
    small.arg_dict["data"][:] = 7
    np.testing.assert_allclose(base.arg_dict["data"].asnumpy()[:4], 7)
    np.testing.assert_allclose(base.arg_dict["data"].asnumpy()[4:], 0)
    big = net.simple_bind(mx.cpu(), data=(16, 5), shared_arg_names=params, shared_exec=base,
                          shared_buffer=pool)
    assert pool["data"] is big.arg_dict["data"] and pool["data"].shape == (16, 5)
    bn = mx.sym.BatchNorm(mx.sym.var("x"), name="bn")
    e1 = bn.simple_bind(mx.cpu(), x=(2, 3))
    e2 = bn.simple_bind(mx.cpu(), x=(4, 3), shared_exec=e1, shared_arg_names=[])
    assert e2.aux_dict["bn_moving_mean"] is e1.aux_dict["bn_moving_mean"]
    with pytest.raises(MXNetError, match="shared"):
        net.simple_bind(mx.cpu(), data=(8, 6), shared_arg_names=params, shared_exec=base)
    with pytest.raises(ValueError):
        net.simple_bind(mx.cpu(), data=(8, 5), shared_arg_names="fc1_weight")


def test_reshape_shares_params_and_memory():
    x = mx.sym.var("x")
    y = mx.sym.FullyConnected(x, num_hidden=4, name="fc")
    exe = y.simple_bind(mx.cpu(), x=(5, 4), grad_req="null")
    exe.arg_arrays[0][:] = 1
    exe.arg_arrays[1][:] = np.eye(4, dtype=np.float32)
    exe.arg_arrays[2][:] = 0
    new = exe.reshape(x=(3, 4))
    new.forward(is_train=False)
    np.testing.assert_allclose(new.outputs[0].asnumpy(), np.ones((3, 4)))
    # the smaller executor writes into the base executor's output memory
    np.testing.assert_allclose(exe.outputs[0].asnumpy()[:3], np.ones((3, 4)))
    np.testing.assert_allclose(exe.outputs[0].asnumpy()[3:], 0)
    assert new.arg_dict["fc_weight"] is exe.arg_dict["fc_weight"]
    new.arg_arrays[0][:] = 2               # data is a view of the base's data too
    np.testing.assert_allclose(exe.arg_arrays[0].asnumpy()[:3], 2)
    with pytest.raises(MXNetError, match="allow_up_sizing"):
        exe.reshape(x=(6, 4))
    up = exe.reshape(allow_up_sizing=True, x=(6, 4))
    assert up.arg_dict["x"].shape == (6, 4) and up.arg_dict["fc_weight"] is \
        exe.arg_dict["fc_weight"]
    up.arg_dict["x"][:] = 3
    up.forward()
    np.testing.assert_allclose(up.outputs[0].asnumpy(), np.full((6, 4), 3.0))
    with pytest.raises(MXNetError, match="partial_shaping"):
        exe.reshape(x=(5, 3))              # would change fc_weight, which was not named
    changed = exe.reshape(partial_shaping=True, x=(5, 2))
    assert changed.arg_dict["fc_weight"].shape == (4, 2)


def test_reshape_keeps_gradients():
    net = _mlp()
    exe = net.simple_bind(mx.cpu(), data=(6, 5))
    child = exe.reshape(data=(3, 5), softmax_label=(3,))
    assert child.grad_dict["fc1_weight"] is exe.grad_dict["fc1_weight"]
    child.arg_dict["fc1_weight"][:] = 0.1
    child.arg_dict["fc2_weight"][:] = 0.1
    child.forward(is_train=True, data=np.ones((3, 5), np.float32))
    child.backward()
    assert np.abs(exe.grad_dict["fc2_weight"].asnumpy()).sum() > 0


# ---------------------------------------------------------------------------------------------
# forward: kwargs, is_train, aux states, copy_params_from
# ---------------------------------------------------------------------------------------------
def test_forward_kwargs_and_copy_params():
    net = _mlp()
    exe = net.simple_bind(mx.cpu(), data=(2, 5))
    with pytest.raises(TypeError, match="Unknown argument"):
        exe.forward(nope=np.zeros((2, 5)))
    with pytest.raises(ValueError, match="Shape not match"):
        exe.forward(data=np.zeros((3, 5)))
    with pytest.raises(ValueError):
        exe.forward(data=[1, 2])
    w = np.arange(20, dtype=np.float64).reshape(4, 5)
    exe.copy_params_from({"fc1_weight": mx.nd.array(w, dtype="float64")})
    np.testing.assert_allclose(exe.arg_dict["fc1_weight"].asnumpy(), w)
    assert exe.arg_dict["fc1_weight"].dtype == np.float32
    with pytest.raises(ValueError, match="extra"):
        exe.copy_params_from({"extra": mx.nd.zeros((1,))})
    exe.copy_params_from({"extra": mx.nd.zeros((1,))}, allow_extra_params=True)
    with pytest.raises(ValueError, match="auxiliary"):
        exe.copy_params_from({}, {"extra": mx.nd.zeros((1,))})


def test_dropout_is_train_and_batchnorm_aux():
    x = mx.sym.var("x")
    drop = mx.sym.Dropout(x, p=0.5)
    exe = drop.simple_bind(mx.cpu(), x=(20, 20))
    exe.arg_dict["x"][:] = 1
    np.testing.assert_allclose(exe.forward(is_train=False)[0].asnumpy(), 1)
    out = exe.forward(is_train=True)[0].asnumpy()
    assert set(np.unique(out)) <= {0.0, 2.0} and 0 < (out == 0).mean() < 1
    exe.backward([mx.nd.ones((20, 20))])
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), out)
    bn = mx.sym.BatchNorm(x, fix_gamma=False, momentum=0.5, name="bn")
    exe = bn.simple_bind(mx.cpu(), x=(4, 3))
    assert list(exe.aux_dict) == ["bn_moving_mean", "bn_moving_var"]
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    exe.arg_dict["bn_gamma"][:] = 1
    exe.forward(is_train=True, x=data)
    np.testing.assert_allclose(exe.aux_dict["bn_moving_mean"].asnumpy(), 0)
    exe.backward([mx.nd.ones((4, 3))])          # moving stats move in the backward pass
    np.testing.assert_allclose(exe.aux_dict["bn_moving_mean"].asnumpy(),
                               0.5 * data.mean(axis=0), rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# contexts, monitor
# ---------------------------------------------------------------------------------------------
def test_group2ctx_places_arrays():
    data = mx.sym.var("data")
    with mx.AttrScope(ctx_group="dev1"):
        fc1 = mx.sym.FullyConnected(data, num_hidden=4, name="fc1")
    with mx.AttrScope(ctx_group="dev2"):
        fc2 = mx.sym.FullyConnected(fc1, num_hidden=2, name="fc2")
    net = mx.sym.make_loss(mx.sym.sum(fc2))
    group2ctx = {"dev1": mx.cpu(1), "dev2": mx.cpu(2)}
    exe = net.simple_bind(mx.cpu(0), group2ctx=group2ctx, data=(3, 5))
    assert exe.arg_dict["data"].context == mx.cpu(0)
    assert exe.arg_dict["fc1_weight"].context == mx.cpu(1)
    assert exe.grad_dict["fc1_weight"].context == mx.cpu(1)
    assert exe.arg_dict["fc2_bias"].context == mx.cpu(2)
    plain = net.simple_bind(mx.cpu(0), data=(3, 5))
    for e in (exe, plain):
        e.arg_dict["data"][:] = 1
        e.arg_dict["fc1_weight"][:] = 0.1
        e.arg_dict["fc2_weight"][:] = 0.2
        e.forward(is_train=True)
        e.backward()
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), plain.outputs[0].asnumpy())
    np.testing.assert_allclose(exe.grad_dict["fc1_weight"].asnumpy(),
                               plain.grad_dict["fc1_weight"].asnumpy())


def test_monitor_names_match_mxnet():
    data = mx.sym.var("data")
    fc0 = mx.sym.FullyConnected(data, num_hidden=4, name="fc_0")
    act0 = mx.sym.Activation(fc0, act_type="relu", name="act_0")
    fc1 = mx.sym.FullyConnected(act0, num_hidden=2, name="fc_1")
    act1 = mx.sym.Activation(fc1, act_type="tanh", name="act_1")
    out = mx.sym.LinearRegressionOutput(act1, name="lro")
    with open(os.path.join(GOLDEN, "monitor.json")) as f:
        expected = json.load(f)["names"]
    for grad_req in ("write", {"fc_0_weight": "write"}):
        exe = out.simple_bind(mx.cpu(), data=(3, 5), grad_req=grad_req)
        seen = []
        exe.set_monitor_callback(lambda name, arr: seen.append((name, arr.shape)))  # noqa: B023
        exe.forward(is_train=True)
        exe.backward()
        assert [n for n, _ in seen] == expected
        assert dict(seen)["fc_1_backward_output1"] == (2, 4)
    seen = []
    exe.set_monitor_callback(lambda name, arr: seen.append(name), monitor_all=True)
    exe.forward()
    # a variable input is reported under its own name, then as the operator's input
    assert seen[:7] == ["data", "fc_0_data", "fc_0_weight", "fc_0_weight", "fc_0_bias",
                        "fc_0_bias", "fc_0_output"]
    child = exe.reshape(data=(2, 5), lro_label=(2, 2))
    seen.clear()
    child.forward()
    assert "fc_0_output" in seen


# ---------------------------------------------------------------------------------------------
# end to end: an MLP learns a real classification task with a hand-written SGD loop
# ---------------------------------------------------------------------------------------------
def _spirals(n_per_class, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for c in range(classes):
        r = np.linspace(0.1, 1.0, n_per_class)
        t = np.linspace(c * 4.0, (c + 1) * 4.0, n_per_class) + rng.normal(0, 0.15, n_per_class)
        xs.append(np.stack([r * np.sin(t), r * np.cos(t)], axis=1))
        ys.append(np.full(n_per_class, c))
    x = np.concatenate(xs).astype(np.float32)
    y = np.concatenate(ys).astype(np.float32)
    order = rng.permutation(len(y))
    return x[order], y[order]


def test_mlp_learns_spirals_with_sgd():
    x, y = _spirals(100)
    net = _mlp(hidden=64, classes=3)
    batch = 30
    exe = net.simple_bind(mx.cpu(), data=(batch, 2))
    rng = np.random.default_rng(1)
    for name, arr in exe.arg_dict.items():
        if name.endswith("weight"):
            arr[:] = rng.normal(0, np.sqrt(2.0 / arr.shape[1]), arr.shape)
    params = [n for n in exe.arg_dict if n not in ("data", "softmax_label")]
    momentum = {n: np.zeros(exe.arg_dict[n].shape, np.float32) for n in params}
    for _ in range(150):
        for i in range(0, len(y), batch):
            exe.forward(is_train=True, data=x[i:i + batch], softmax_label=y[i:i + batch])
            exe.backward()
            for n in params:
                momentum[n] = 0.9 * momentum[n] - 0.2 / batch * exe.grad_dict[n].asnumpy()
                exe.arg_dict[n][:] = exe.arg_dict[n].asnumpy() + momentum[n]
    scorer = exe.reshape(allow_up_sizing=True, data=(len(y), 2), softmax_label=(len(y),))
    prob = scorer.forward(data=x)[0].asnumpy()
    np.testing.assert_allclose(prob.sum(axis=1), 1, rtol=1e-5)
    assert (prob.argmax(axis=1) == y).mean() > 0.95


def test_rebound_backend_array_is_picked_up():
    a = mx.sym.var("a")
    exe = (a * 2).simple_bind(mx.cpu(), a=(3,))
    exe.arg_dict["a"]._data = np.array([1.0, 2.0, 3.0], np.float32)   # not in place
    np.testing.assert_allclose(exe.forward()[0].asnumpy(), [2, 4, 6])
