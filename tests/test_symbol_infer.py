"""Shape inference over whole graphs: partial shapes meet from both sides of an operator and
the pass repeats until nothing new is learnt (what MXNet's InferShape does)."""
import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError


@pytest.mark.parametrize("lhs_shape, rhs_shape", [
    ((4, 5), (-1, -1)),        # everything comes back through transpose
    ((4, -1), (5, -1)),        # each side knows one dim
    ((-1, 5), (-1, 4)),
    ((0, 5), (0, 4)),          # 0 is MXNet's older spelling of an unknown dim
])
def test_partial_fill_shapes_meet_through_transpose(lhs_shape, rhs_shape):
    lhs = mx.sym.ones(shape=lhs_shape)
    rhs = mx.sym.full(shape=rhs_shape, val=2.5)
    out = lhs + mx.sym.transpose(rhs)
    _, out_shapes, _ = out.infer_shape()
    assert out_shapes == [(4, 5)]
    result = out.bind(mx.cpu(), args={}).forward()[0]
    np.testing.assert_array_equal(result.asnumpy(), np.full((4, 5), 3.5, np.float32))


def test_partial_shapes_that_disagree_name_the_operator():
    lhs = mx.sym.ones(shape=(4, -1))
    rhs = mx.sym.ones(shape=(3, -1))          # transposed: (-1, 3), but lhs has 4 rows...
    out = lhs + mx.sym.transpose(rhs) + mx.sym.ones(shape=(-1, 6))   # ...and 6 != 3 columns
    with pytest.raises(MXNetError, match="_plus"):
        out.infer_shape()


def test_unknown_spatial_dims_come_back_through_a_stride_one_convolution():
    data = mx.sym.var("data", shape=(0, 10, 0, 0))
    conv = mx.sym.Convolution(data=data, num_filter=21, kernel=(3, 3), dilate=(2, 1),
                              pad=(1, 1), name="conv")
    other = mx.sym.var("other", shape=(5, 21, 30, 32))
    arg_shapes, out_shapes, _ = (conv + other).infer_shape()
    shapes = dict(zip((conv + other).list_arguments(), arg_shapes))
    # the height: 30 = h + 2 * 1 - (2 * 2 + 1) + 1, so h = 32; the width: 32 = w + 2 - 3 + 1
    assert shapes["data"] == (5, 10, 32, 32)
    assert shapes["conv_weight"] == (21, 10, 3, 3)
    assert out_shapes == [(5, 21, 30, 32)]
    # the forward convolution gives back the shape the output was told
    ex = (conv + other).simple_bind(mx.cpu())
    assert ex.outputs[0].shape == (5, 21, 30, 32)


def test_a_strided_convolution_leaves_the_input_size_open():
    data = mx.sym.var("data", shape=(0, 3, 0, 0))
    conv = mx.sym.Convolution(data=data, num_filter=4, kernel=(3, 3), stride=(2, 1),
                              name="conv")
    total = conv + mx.sym.var("other", shape=(2, 4, 8, 8))
    arg_shapes, _, _ = total.infer_shape_partial()
    # stride 2 maps two input heights to one output height: only the width is certain
    assert arg_shapes[0] == (2, 3, 0, 10)
    with pytest.warns(UserWarning, match="data"):
        assert total.infer_shape() == (None, None, None)


def test_identity_with_attr_like_rhs_carries_a_shape_backwards():
    weight = mx.sym.var("weight")
    shift = mx.sym.var("shift", shape=(1,))
    shifted = mx.sym.broadcast_add(weight, shift)     # cannot tell weight's shape by itself
    tied = mx.sym._internal._identity_with_attr_like_rhs(shifted, weight)
    net = mx.sym.FullyConnected(data=mx.sym.var("data"), weight=tied, num_hidden=11,
                                no_bias=True)
    arg_shapes, out_shapes, _ = net.infer_shape(data=(7, 100))
    assert dict(zip(net.list_arguments(), arg_shapes)) == {
        "data": (7, 100), "weight": (11, 100), "shift": (1,)}
    assert out_shapes == [(7, 11)]


def test_identity_with_attr_like_rhs_values_and_gradients():
    x, y = mx.sym.var("x"), mx.sym.var("y")
    out = mx.sym._internal._identity_with_attr_like_rhs(x * 3, y)
    rng = np.random.RandomState(0)
    xv, yv, head = (rng.rand(2, 3).astype(np.float32) for _ in range(3))
    for req in ("write", "add"):
        ex = out.simple_bind(mx.cpu(), grad_req=req, x=(2, 3), y=(2, 3))
        for g in ex.grad_arrays:
            g[:] = 1.0
        res = ex.forward(is_train=True, x=mx.nd.array(xv), y=mx.nd.array(yv))[0]
        ex.backward(mx.nd.array(head))
        np.testing.assert_allclose(res.asnumpy(), xv * 3, rtol=1e-6)
        base = 1.0 if req == "add" else 0.0
        np.testing.assert_allclose(ex.grad_dict["x"].asnumpy(), base + 3 * head, rtol=1e-6)
        np.testing.assert_array_equal(ex.grad_dict["y"].asnumpy(), np.full((2, 3), base))
    with pytest.raises(MXNetError, match="_identity_with_attr_like_rhs"):
        out.infer_shape(x=(2, 3), y=(3, 2))


def test_infer_type_with_mx_real_t():
    fc = mx.sym.FullyConnected(data=mx.sym.var("data"), num_hidden=5, name="fc")
    arg_types, out_types, _ = fc.infer_type(data=mx.base.mx_real_t)
    assert mx.base.mx_real_t is np.float32
    assert arg_types == [np.float32] * 3 and out_types == [np.float32]


def test_not_implemented_for_symbol_is_an_mxnet_error_in_base():
    x = mx.sym.var("x")
    assert mx.base.NotImplementedForSymbol is mx.sym.NotImplementedForSymbol
    with pytest.raises(mx.base.NotImplementedForSymbol, match="bool"):
        bool(x)
    with pytest.raises(MXNetError, match=r"\+="):
        x += 1


def test_gen_atomic_symbol_composes_like_the_operator_function():
    data, param, h0, h1 = (mx.sym.var(n) for n in ("data", "param", "h0", "h1"))
    rnn = mx.sym.RNN(data, param, h0, h1, state_size=4, num_layers=1, state_outputs=True,
                     mode="lstm", name="rnn")
    atomic = rnn._gen_atomic_symbol()
    assert len(atomic) == 3 and atomic.list_arguments() == []
    by_position = atomic(data, param, name="again")
    assert by_position.list_arguments() == ["data", "param", "again_state",
                                            "again_state_cell"]
    assert by_position.list_outputs() == ["again_output", "again_state_output",
                                          "again_statecell_output"]
    assert by_position.attr("mode") == "lstm"
    by_name = atomic(data=data, state_cell=h1)
    assert by_name.list_arguments() == ["data", "parameters", "state", "h1"]
    # the atomic symbol itself stays unconnected and refuses inference until it is called
    with pytest.raises(MXNetError, match="not been given its inputs"):
        atomic.infer_shape(data=(2, 3, 4))


def test_gen_atomic_symbol_runs_and_refuses_bad_sources():
    x = mx.sym.var("x")
    scaled = x * 2.0
    again = scaled._gen_atomic_symbol()(x * 3.0)
    res = again.eval(x=mx.nd.array([1.0, 2.0]))[0]
    np.testing.assert_array_equal(res.asnumpy(), [6.0, 12.0])
    with pytest.raises(MXNetError, match="too many inputs"):
        scaled._gen_atomic_symbol()(x, x)
    with pytest.raises(MXNetError, match="not supported"):
        mx.sym.Group([x * 2, x + 1])._gen_atomic_symbol()
    with pytest.raises(MXNetError, match="Variable"):
        x._gen_atomic_symbol()


def test_variable_shape_attributes_with_unknown_dims_meet():
    a = mx.sym.var("a", shape=(-1, 3))
    b = mx.sym.var("b", shape=(2, 0))
    assert (a + b).infer_shape() == ([(2, 3), (2, 3)], [(2, 3)], [])
    with pytest.raises(MXNetError, match="_plus"):
        (a + mx.sym.var("c", shape=(2, 4))).infer_shape()
