"""symbol/stack_fc.py: FullyConnected nodes sharing a weight are bound as one stacked product.

The stacked executor gives the values and gradients of the plain one (LIGHTMOD_STACK_FC=0) for
drawn unrolled RNN cells; groups that must not be stacked (a member feeding another, different
weights, unequal data shapes) are left alone or fall back; bucketing still shares parameters.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lightmod as mx
from lightmod.symbol import stack_fc


def _stacked_nodes(exe):
    return [n.name for n in exe._g.nodes if n.name.startswith("_stacked_")]


def _run(monkeypatch, sym, shapes, stack, seed=0, grad_req="write"):
    """Outputs, gradients (by name) and the executor of one forward/backward pass."""
    monkeypatch.setenv("LIGHTMOD_STACK_FC", "1" if stack else "0")
    exe = sym.simple_bind(mx.cpu(), grad_req=grad_req, **shapes)
    rng = np.random.RandomState(seed)
    for arr in exe.arg_dict.values():
        arr[:] = rng.uniform(-1, 1, arr.shape)
    outs = exe.forward(is_train=True)
    exe.backward([mx.nd.array(rng.uniform(-1, 1, o.shape)) for o in outs])
    grads = {k: v.asnumpy() for k, v in exe.grad_dict.items() if v is not None}
    return [o.asnumpy() for o in outs], grads, exe


def _assert_same(a, b):
    outs_a, grads_a, _ = a
    outs_b, grads_b, _ = b
    for x, y in zip(outs_a, outs_b):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
    assert grads_a.keys() == grads_b.keys()
    for k in grads_a:
        np.testing.assert_allclose(grads_a[k], grads_b[k], rtol=1e-5, atol=1e-5, err_msg=k)


CELLS = {"lstm": mx.rnn.LSTMCell, "gru": mx.rnn.GRUCell, "rnn": mx.rnn.RNNCell}


def _unrolled(cell, layers, length, hidden):
    stack = mx.rnn.SequentialRNNCell()
    for i in range(layers):
        stack.add(CELLS[cell](num_hidden=hidden, prefix="l%d_" % i))
    outputs, _ = stack.unroll(length, inputs=mx.sym.Variable("data"), merge_outputs=True)
    return mx.sym.sum(outputs * outputs) + mx.sym.sum(outputs)


@settings(max_examples=12, deadline=None)
@given(cell=st.sampled_from(sorted(CELLS)), layers=st.integers(1, 2), length=st.integers(2, 5),
       batch=st.integers(1, 4), features=st.integers(1, 6), hidden=st.integers(1, 5),
       seed=st.integers(0, 1000), grad_req=st.sampled_from(["write", "add"]))
def test_stacked_equals_plain(cell, layers, length, batch, features, hidden, seed, grad_req):
    sym = _unrolled(cell, layers, length, hidden)
    shapes = {"data": (batch, length, features)}
    with pytest.MonkeyPatch.context() as mp:
        stacked = _run(mp, sym, shapes, True, seed, grad_req)
        plain = _run(mp, sym, shapes, False, seed, grad_req)
    assert len(_stacked_nodes(stacked[2])) == 3 * layers     # Concat, product, split per layer
    assert not _stacked_nodes(plain[2])
    _assert_same(stacked, plain)


def test_arguments_keep_their_names_and_order(monkeypatch):
    sym = _unrolled("lstm", 2, 4, 3)
    _, _, exe = _run(monkeypatch, sym, {"data": (2, 4, 5)}, True)
    assert _stacked_nodes(exe)
    assert list(exe.arg_dict) == sym.list_arguments()
    for name, arr in exe.arg_dict.items():
        assert arr.shape == sym.infer_shape(data=(2, 4, 5))[0][sym.list_arguments().index(name)]


def test_a_member_feeding_another_is_not_stacked(monkeypatch):
    x = mx.sym.Variable("x")
    w, b = mx.sym.Variable("w"), mx.sym.Variable("b")
    h = mx.sym.FullyConnected(x, weight=w, bias=b, num_hidden=4, name="a")
    h = mx.sym.FullyConnected(mx.sym.tanh(h), weight=w, bias=b, num_hidden=4, name="b")
    stacked = _run(monkeypatch, h, {"x": (3, 4)}, True)
    assert not _stacked_nodes(stacked[2])
    _assert_same(stacked, _run(monkeypatch, h, {"x": (3, 4)}, False))


def test_independent_members_with_a_dependent_one(monkeypatch):
    """Two independent uses of a weight and a third reading one of them: a stack of the
    independent ones would be a cycle through the third, so the whole group stays plain;
    the values are right either way."""
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    w = mx.sym.Variable("w")
    a = mx.sym.FullyConnected(x, weight=w, no_bias=True, num_hidden=3, name="a")
    b = mx.sym.FullyConnected(y, weight=w, no_bias=True, num_hidden=3, name="b")
    c = mx.sym.FullyConnected(a, weight=w, no_bias=True, num_hidden=3, name="c")
    out = mx.sym.Group([b, c])
    shapes = {"x": (2, 3), "y": (2, 3)}
    _assert_same(_run(monkeypatch, out, shapes, True), _run(monkeypatch, out, shapes, False))


def test_different_weights_are_not_stacked(monkeypatch):
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    a = mx.sym.FullyConnected(x, num_hidden=3, name="a")
    b = mx.sym.FullyConnected(y, num_hidden=3, name="b")
    _, _, exe = _run(monkeypatch, a + b, {"x": (2, 5), "y": (2, 5)}, True)
    assert not _stacked_nodes(exe)


def test_unequal_data_shapes_fall_back(monkeypatch):
    x = mx.sym.Variable("x")
    w, b = mx.sym.Variable("w"), mx.sym.Variable("b")
    p = mx.sym.FullyConnected(x, weight=w, bias=b, num_hidden=3, name="p")
    half = mx.sym.slice_axis(x, axis=0, begin=0, end=2)
    q = mx.sym.FullyConnected(half, weight=w, bias=b, num_hidden=3, name="q")
    out = mx.sym.Group([p, q])
    stacked = _run(monkeypatch, out, {"x": (4, 5)}, True)
    assert not _stacked_nodes(stacked[2])
    _assert_same(stacked, _run(monkeypatch, out, {"x": (4, 5)}, False))
    # equal shapes: stacked, and the same values
    q = mx.sym.FullyConnected(mx.sym.sin(x), weight=w, bias=b, num_hidden=3, name="q")
    out = mx.sym.Group([p, q])
    stacked = _run(monkeypatch, out, {"x": (4, 5)}, True)
    assert _stacked_nodes(stacked[2])
    _assert_same(stacked, _run(monkeypatch, out, {"x": (4, 5)}, False))


def test_a_rewrite_that_would_reorder_arguments_is_not_made(monkeypatch):
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    w, b = mx.sym.Variable("w"), mx.sym.Variable("b")
    p = mx.sym.FullyConnected(x, weight=w, bias=b, num_hidden=3, name="p")
    q = mx.sym.FullyConnected(y, weight=w, bias=b, num_hidden=3, name="q")
    out = mx.sym.Group([p, q])          # stacked, y would come before w and b
    stacked = _run(monkeypatch, out, {"x": (2, 5), "y": (2, 5)}, True)
    assert not _stacked_nodes(stacked[2])
    assert list(stacked[2].arg_dict) == ["x", "w", "b", "y"]


def test_shape_errors_name_the_users_graph(monkeypatch):
    x = mx.sym.Variable("x")
    w = mx.sym.Variable("w")
    p = mx.sym.FullyConnected(x, weight=w, no_bias=True, num_hidden=3, name="p")
    q = mx.sym.FullyConnected(mx.sym.Reshape(x, shape=(-1, 3)), weight=w, no_bias=True,
                              num_hidden=3, name="q")
    monkeypatch.setenv("LIGHTMOD_STACK_FC", "1")
    with pytest.raises(mx.MXNetError) as err:
        mx.sym.Group([p, q]).simple_bind(mx.cpu(), x=(2, 5))
    assert "_stacked_" not in str(err.value)


def test_the_users_symbol_is_not_changed(monkeypatch):
    monkeypatch.setenv("MXNET_ELIMINATE_COMMON_EXPR", "0")
    sym = _unrolled("lstm", 1, 3, 2)
    before = sym.tojson()
    _, _, exe = _run(monkeypatch, sym, {"data": (2, 3, 4)}, True)
    assert _stacked_nodes(exe)
    assert sym.tojson() == before


def test_switch_off():
    import os
    old = os.environ.get("LIGHTMOD_STACK_FC")
    try:
        os.environ["LIGHTMOD_STACK_FC"] = "0"
        assert not stack_fc.enabled()
        os.environ["LIGHTMOD_STACK_FC"] = "1"
        assert stack_fc.enabled()
    finally:
        if old is None:
            os.environ.pop("LIGHTMOD_STACK_FC", None)
        else:
            os.environ["LIGHTMOD_STACK_FC"] = old


def _bucketing_module():
    stack = mx.rnn.SequentialRNNCell()
    stack.add(mx.rnn.LSTMCell(num_hidden=6, prefix="l0_"))

    def sym_gen(length):
        data = mx.sym.Variable("data")
        label = mx.sym.Variable("softmax_label")
        embed = mx.sym.Embedding(data, input_dim=11, output_dim=5, name="embed")
        stack.reset()
        out, _ = stack.unroll(length, inputs=embed, merge_outputs=True)
        pred = mx.sym.FullyConnected(mx.sym.Reshape(out, shape=(-1, 6)), num_hidden=11,
                                     name="pred")
        pred = mx.sym.SoftmaxOutput(pred, mx.sym.Reshape(label, shape=(-1,)), name="softmax")
        return pred, ("data",), ("softmax_label",)

    return mx.mod.BucketingModule(sym_gen, default_bucket_key=6, context=mx.cpu())


def _batch(length, rng):
    return mx.io.DataBatch([mx.nd.array(rng.randint(0, 11, (3, length)))],
                           [mx.nd.array(rng.randint(0, 11, (3, length)))], bucket_key=length,
                           provide_data=[mx.io.DataDesc("data", (3, length))],
                           provide_label=[mx.io.DataDesc("softmax_label", (3, length))])


def _train(monkeypatch, stack):
    monkeypatch.setenv("LIGHTMOD_STACK_FC", "1" if stack else "0")
    mod = _bucketing_module()
    mod.bind(data_shapes=[("data", (3, 6))], label_shapes=[("softmax_label", (3, 6))])
    mx.random.seed(3)
    mod.init_params(initializer=mx.init.Xavier())
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    rng = np.random.RandomState(0)
    for length in (6, 3, 4, 6, 3):
        mod.forward_backward(_batch(length, rng))
        mod.update()
    return mod


def test_bucketing_shares_parameters_and_trains_the_same(monkeypatch):
    stacked = _train(monkeypatch, True)
    default = stacked._buckets[6]._exec_group.execs[0]
    assert _stacked_nodes(default)
    for key in (3, 4):
        exe = stacked._buckets[key]._exec_group.execs[0]
        assert _stacked_nodes(exe)
        for name in ("l0_i2h_weight", "l0_i2h_bias", "embed_weight", "pred_weight"):
            assert exe.arg_dict[name] is default.arg_dict[name]
    plain = _train(monkeypatch, False)
    a, _ = stacked.get_params()
    b, _ = plain.get_params()
    for name in a:
        np.testing.assert_allclose(a[name].asnumpy(), b[name].asnumpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=name)


def test_monitor_sees_the_users_nodes(monkeypatch):
    sym = _unrolled("lstm", 1, 3, 2)
    monkeypatch.setenv("LIGHTMOD_STACK_FC", "1")
    exe = sym.simple_bind(mx.cpu(), data=(2, 3, 4))
    assert _stacked_nodes(exe)
    seen = []
    exe.set_monitor_callback(lambda name, arr: seen.append(name))
    assert not _stacked_nodes(exe)
    exe.forward(is_train=True)
    assert any("t1_i2h" in name for name in seen)
    assert not any("_stacked_" in name for name in seen)
    monkeypatch.setenv("LIGHTMOD_STACK_FC", "0")
    plain = sym.simple_bind(mx.cpu(), data=(2, 3, 4))
    plain_seen = []
    plain.set_monitor_callback(lambda name, arr: plain_seen.append(name))
    plain.forward(is_train=True)
    assert seen == plain_seen


def test_reshape_keeps_or_drops_the_stack(monkeypatch):
    # members whose data shapes stay equal under any batch size: the stack is kept
    sym = _unrolled("gru", 1, 3, 2)
    stacked = _run(monkeypatch, sym, {"data": (4, 3, 5)}, True)
    exe = stacked[2].reshape(data=(2, 3, 5))
    assert _stacked_nodes(exe)
    # a reshape that makes the stack's data shapes differ binds the plain graph
    x = mx.sym.Variable("x")
    w = mx.sym.Variable("w")
    p = mx.sym.FullyConnected(x, weight=w, no_bias=True, num_hidden=3, name="p")
    q = mx.sym.FullyConnected(mx.sym.slice_axis(x, axis=0, begin=0, end=2), weight=w,
                              no_bias=True, num_hidden=3, name="q")
    out = mx.sym.Group([p, q])
    first = _run(monkeypatch, out, {"x": (2, 4)}, True)
    assert _stacked_nodes(first[2])
    exe = first[2].reshape(allow_up_sizing=True, x=(4, 4))
    assert not _stacked_nodes(exe)
    rng = np.random.RandomState(1)
    for arr in exe.arg_dict.values():
        arr[:] = rng.uniform(-1, 1, arr.shape)
    got = [o.asnumpy() for o in exe.forward()]
    xv, wv = exe.arg_dict["x"].asnumpy(), exe.arg_dict["w"].asnumpy()
    np.testing.assert_allclose(got[0], xv @ wv.T, rtol=1e-5)
    np.testing.assert_allclose(got[1], xv[:2] @ wv.T, rtol=1e-5)
