"""Python custom operators (mx.operator.CustomOp / CustomOpProp / register, sym.Custom, nd.Custom).

What MXNet 1.9.1's test_custom_op checks, through symbols and executors (its mx.autograd
checks are in tests/test_autograd.py): every property hook, every req value, JSON round
trips, errors raised inside an operator, aux states, Module / BucketingModule / several
contexts / Monitor, and that the arrays are the executor's memory (no copies).
"""
import json

import numba
import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError
from lightmod.test_utils import check_numeric_gradient

RNG = np.random.default_rng(21)
CALLS = []          # what the hooks saw, for the tests that check arguments


# --- operators used by the tests ----------------------------------------------------------------
class _Scale(mx.operator.CustomOp):
    """out = scale * a * b (elementwise); records the reqs it was given."""

    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, is_train, req, in_data, out_data, aux):
        CALLS.append(("forward", is_train, list(req)))
        self.assign(out_data[0], req[0], self.scale * in_data[0] * in_data[1])

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        CALLS.append(("backward", list(req)))
        self.assign(in_grad[0], req[0], self.scale * out_grad[0] * in_data[1])
        self.assign(in_grad[1], req[1], self.scale * out_grad[0] * in_data[0])


@mx.operator.register("test_scale")
class _ScaleProp(mx.operator.CustomOpProp):
    def __init__(self, scale="1.0"):
        super().__init__(need_top_grad=True)
        CALLS.append(("init", scale))
        self.scale = float(scale)

    def list_arguments(self):
        return ["a", "b"]

    def infer_shape(self, in_shape):
        # b takes a's shape: the shape of b is inferred from a
        return [in_shape[0], in_shape[0]], [in_shape[0]], []

    def create_operator(self, ctx, in_shapes, in_dtypes):
        CALLS.append(("create", ctx, in_shapes, in_dtypes))
        return _Scale(self.scale)


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


class _Softmax(mx.operator.CustomOp):
    """Softmax with its cross-entropy gradient (a loss head: ignores the head gradient)."""

    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], _softmax(in_data[0].numpy_view()))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        label = in_data[1].numpy_view().astype(np.int64)
        grad = out_data[0].asnumpy()
        grad[np.arange(label.shape[0]), label] -= 1.0
        self.assign(in_grad[0], req[0], grad)
        self.assign(in_grad[1], req[1], np.zeros(label.shape))


@mx.operator.register("test_softmax")
class _SoftmaxProp(mx.operator.CustomOpProp):
    def __init__(self):
        super().__init__(need_top_grad=False)

    def list_arguments(self):
        return ["data", "label"]

    def infer_shape(self, in_shape):
        return [in_shape[0], (in_shape[0][0],)], [in_shape[0]]

    def create_operator(self, ctx, in_shapes, in_dtypes):
        return _Softmax()


class _Counter(mx.operator.CustomOp):
    """Identity that counts its training forwards in an aux state."""

    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], in_data[0])
        if is_train:
            aux[0][:] += 1

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], out_grad[0])


@mx.operator.register("test_counter")
class _CounterProp(mx.operator.CustomOpProp):
    def list_auxiliary_states(self):
        return ["count"]

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]], [(1,)]

    def create_operator(self, ctx, in_shapes, in_dtypes):
        return _Counter()


class _Split(mx.operator.CustomOp):
    """Two outputs: the data as float64 and its negation as int32."""

    def forward(self, is_train, req, in_data, out_data, aux):
        x = in_data[0].numpy_view()
        self.assign(out_data[0], req[0], x.astype(np.float64))
        self.assign(out_data[1], req[1], (-x).astype(np.int32))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], out_grad[0].numpy_view().astype(np.float32))


@mx.operator.register("test_split")
class _SplitProp(mx.operator.CustomOpProp):
    def list_outputs(self):
        return ["wide", "negated"]

    def infer_type(self, in_type):
        CALLS.append(("infer_type", list(in_type)))
        return in_type, [np.float64, np.int32], []

    def create_operator(self, ctx, in_shapes, in_dtypes):
        CALLS.append(("create", ctx, in_shapes, in_dtypes))
        return _Split()


def _scale_net(scale=2.5):
    return mx.sym.Custom(mx.sym.var("a"), mx.sym.var("b"), op_type="test_scale", scale=scale,
                         name="sc")


# --- properties and inference --------------------------------------------------------------------
def test_symbol_lists_come_from_the_property():
    net = mx.sym.Custom(mx.sym.var("x"), op_type="test_counter", name="cnt")
    assert net.list_arguments() == ["x"]
    assert net.list_outputs() == ["cnt_output"]
    assert net.list_auxiliary_states() == ["cnt_count"]
    split = mx.sym.Custom(mx.sym.var("x"), op_type="test_split", name="sp")
    assert split.list_outputs() == ["sp_wide", "sp_negated"]
    # a missing input becomes a variable named after the node, as for built-in operators
    loss = mx.sym.Custom(mx.sym.var("data"), op_type="test_softmax", name="softmax")
    assert loss.list_arguments() == ["data", "softmax_label"]


def test_keywords_reach_the_property_as_strings():
    del CALLS[:]
    net = _scale_net(scale=2.5)
    assert ("init", "2.5") in CALLS
    assert json.loads(net.tojson())["nodes"][2]["attrs"] == {"op_type": "test_scale",
                                                             "scale": "2.5"}


def test_infer_shape_fills_arguments_and_aux():
    arg, out, aux = _scale_net().infer_shape(a=(3, 4))
    assert arg == [(3, 4), (3, 4)] and out == [(3, 4)] and aux == []
    net = mx.sym.Custom(mx.sym.var("x"), op_type="test_counter", name="cnt")
    assert net.infer_shape(x=(2, 5)) == ([(2, 5)], [(2, 5)], [(1,)])
    # unknown input shapes: nothing is inferred (the hook is not called with holes)
    assert net.infer_shape_partial() == ([()], [()], [()])


def test_infer_type_hook_sets_output_dtypes():
    del CALLS[:]
    split = mx.sym.Custom(mx.sym.var("x"), op_type="test_split", name="sp")
    arg_t, out_t, aux_t = split.infer_type(x=np.float32)
    assert arg_t == [np.float32] and out_t == [np.float64, np.int32] and aux_t == []
    assert ("infer_type", [np.float32]) in CALLS
    exe = split.simple_bind(mx.cpu(), x=(2, 3))
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    wide, neg = exe.forward(x=x)
    assert wide.dtype == np.float64 and neg.dtype == np.int32
    np.testing.assert_array_equal(wide.asnumpy(), x.astype(np.float64))
    np.testing.assert_array_equal(neg.asnumpy(), (-x).astype(np.int32))


def test_create_operator_gets_context_shapes_and_mxnet_dtype_ids():
    del CALLS[:]
    split = mx.sym.Custom(mx.sym.var("x"), op_type="test_split")
    exe = split.simple_bind(mx.cpu(), x=(2, 3), type_dict={"x": np.float64})
    exe.forward()
    created = [c for c in CALLS if c[0] == "create"]
    assert created == [("create", mx.cpu(0), [[2, 3]], [1])]    # 1: MXNet's id of float64
    exe.forward()
    assert len([c for c in CALLS if c[0] == "create"]) == 1     # once per executor


def test_storage_type_hook_accepts_dense_and_refuses_sparse():
    x = mx.nd.array(RNG.standard_normal((2, 3)))
    out = mx.nd.Custom(x, x, op_type="test_scale")
    assert out.stype == "default"
    with pytest.raises(MXNetError, match="storage type 'csr'"):
        mx.nd.Custom(x.tostype("csr"), x, op_type="test_scale")


def test_declare_backward_dependency_decides_whether_a_head_gradient_is_needed():
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    label = np.array([0, 2, 1, 1], np.float32)
    loss = mx.sym.Custom(mx.sym.var("data"), op_type="test_softmax", name="softmax")
    exe = loss.simple_bind(mx.cpu(), data=(4, 3))
    exe.forward(is_train=True, data=x, softmax_label=label)
    exe.backward()          # no head gradient: the property does not depend on it
    expected = _softmax(x)
    expected[np.arange(4), label.astype(int)] -= 1
    np.testing.assert_allclose(exe.grad_dict["data"].asnumpy(), expected, rtol=1e-6, atol=1e-7)
    # the scale op needs its head gradient
    exe = _scale_net().simple_bind(mx.cpu(), a=(2, 2))
    exe.forward(is_train=True)
    with pytest.raises(MXNetError, match="head gradient is required"):
        exe.backward()


def test_get_all_registered_operators_lists_builtin_and_custom():
    names = mx.operator.get_all_registered_operators()
    assert "Custom" in names and "FullyConnected" in names and names == sorted(names)


# --- forward / backward and req ------------------------------------------------------------------
def _scale_values():
    return (RNG.standard_normal((3, 4)).astype(np.float32),
            RNG.standard_normal((3, 4)).astype(np.float32))


def test_forward_backward_match_numpy_and_numeric_gradient():
    a, b = _scale_values()
    exe = _scale_net(2.5).simple_bind(mx.cpu(), a=(3, 4))
    out = exe.forward(is_train=True, a=a, b=b)[0]
    np.testing.assert_allclose(out.asnumpy(), 2.5 * a * b, rtol=1e-6)
    head = RNG.standard_normal((3, 4)).astype(np.float32)
    exe.backward(mx.nd.array(head))
    np.testing.assert_allclose(exe.grad_dict["a"].asnumpy(), 2.5 * head * b, rtol=1e-6)
    np.testing.assert_allclose(exe.grad_dict["b"].asnumpy(), 2.5 * head * a, rtol=1e-6)
    check_numeric_gradient(_scale_net(1.5), [a.astype(np.float64), b.astype(np.float64)],
                           rtol=1e-5, atol=1e-6, dtype=np.float64)


@pytest.mark.parametrize("grad_req", ["write", "add", "null"])
def test_backward_req_is_the_argument_grad_req(grad_req):
    a, b = _scale_values()
    head = np.ones((3, 4), np.float32)
    exe = _scale_net(1.0).simple_bind(mx.cpu(), grad_req={"a": grad_req, "b": "write"},
                                      a=(3, 4))
    if grad_req == "add":
        exe.grad_dict["a"][:] = 1.0
    del CALLS[:]
    for _ in range(2):
        exe.forward(is_train=True, a=a, b=b)
        exe.backward(mx.nd.array(head))
    assert [c for c in CALLS if c[0] == "backward"] == [("backward", [grad_req, "write"])] * 2
    if grad_req == "null":
        assert exe.grad_dict["a"] is None
    else:
        expected = b if grad_req == "write" else 1.0 + 2 * b
        np.testing.assert_allclose(exe.grad_dict["a"].asnumpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(exe.grad_dict["b"].asnumpy(), a, rtol=1e-6)


def test_forward_req_is_write_and_is_train_is_passed():
    del CALLS[:]
    exe = _scale_net().simple_bind(mx.cpu(), a=(2, 2))
    exe.forward(is_train=False)
    exe.forward(is_train=True)
    assert [c for c in CALLS if c[0] == "forward"] == [("forward", False, ["write"]),
                                                        ("forward", True, ["write"])]


@pytest.mark.parametrize("req", ["null", "write", "inplace", "add"])
def test_assign_honours_every_req(req):
    dst = mx.nd.array([1.0, 2.0, 3.0])
    mx.operator.CustomOp().assign(dst, req, mx.nd.array([10.0, 20.0, 30.0]))
    expected = {"null": [1, 2, 3], "write": [10, 20, 30], "inplace": [10, 20, 30],
                "add": [11, 22, 33]}[req]
    np.testing.assert_array_equal(dst.asnumpy(), expected)


def test_assign_refuses_an_unknown_req():
    with pytest.raises(MXNetError, match="req must be"):
        mx.operator.CustomOp().assign(mx.nd.zeros(2), "overwrite", mx.nd.ones(2))


def test_gradient_into_an_intermediate_result_accumulates():
    # x feeds the custom op twice (a and b): both gradients land in one buffer
    x = mx.sym.var("x")
    net = mx.sym.Custom(x, x, op_type="test_scale", scale=1.0)
    value = RNG.standard_normal((2, 3)).astype(np.float32)
    exe = net.simple_bind(mx.cpu(), x=(2, 3))
    exe.forward(is_train=True, x=value)
    exe.backward(mx.nd.ones((2, 3)))
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), 2 * value, rtol=1e-6)


def test_aux_state_is_updated_in_place():
    net = mx.sym.Custom(mx.sym.var("x"), op_type="test_counter", name="cnt")
    exe = net.simple_bind(mx.cpu(), x=(2, 2))
    for _ in range(3):
        exe.forward(is_train=True)
    exe.forward(is_train=False)
    assert exe.aux_dict["cnt_count"].asnumpy().tolist() == [3.0]


def test_nd_custom_runs_the_operator_imperatively():
    a, b = _scale_values()
    out = mx.nd.Custom(mx.nd.array(a), mx.nd.array(b), op_type="test_scale", scale=3)
    np.testing.assert_allclose(out.asnumpy(), 3 * a * b, rtol=1e-6)
    wide, neg = mx.nd.Custom(mx.nd.array(a), op_type="test_split")
    assert wide.dtype == np.float64 and neg.dtype == np.int32


# --- JSON ----------------------------------------------------------------------------------------
def test_json_round_trip_computes_the_same():
    net = mx.sym.Custom(_scale_net(2.5), op_type="test_counter", name="cnt")
    text = net.tojson()
    node = [n for n in json.loads(text)["nodes"] if n["op"] == "Custom"][0]
    assert node["attrs"] == {"op_type": "test_scale", "scale": "2.5"}
    loaded = mx.sym.load_json(text)
    assert loaded.tojson() == text
    assert loaded.list_auxiliary_states() == ["cnt_count"]
    a, b = _scale_values()
    outs = []
    for sym in (net, loaded):
        exe = sym.simple_bind(mx.cpu(), a=(3, 4))
        outs.append(exe.forward(a=a, b=b)[0].asnumpy())
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], 2.5 * a * b, rtol=1e-6)


def test_loading_an_unregistered_op_type_names_it():
    text = _scale_net().tojson().replace('"test_scale"', '"never_registered"')
    with pytest.raises(MXNetError, match="never_registered"):
        mx.sym.load_json(text)


# --- errors --------------------------------------------------------------------------------------
class _Flaky(mx.operator.CustomOp):
    fail_forward = False
    fail_backward = False

    def forward(self, is_train, req, in_data, out_data, aux):
        if _Flaky.fail_forward:
            raise ValueError("forward refused this batch")
        self.assign(out_data[0], req[0], in_data[0] * 2)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        if _Flaky.fail_backward:
            raise KeyError("backward lost its key")
        self.assign(in_grad[0], req[0], out_grad[0] * 2)


@mx.operator.register("test_flaky")
class _FlakyProp(mx.operator.CustomOpProp):
    def create_operator(self, ctx, in_shapes, in_dtypes):
        return _Flaky()


def test_exception_in_forward_or_backward_is_an_mxnet_error_and_the_next_batch_works():
    net = mx.sym.Custom(mx.sym.var("x"), op_type="test_flaky")
    exe = net.simple_bind(mx.cpu(), x=(2,))
    try:
        _Flaky.fail_forward = True
        with pytest.raises(MXNetError, match="forward refused this batch") as info:
            exe.forward(is_train=True, x=np.array([1.0, 2.0], np.float32))
        assert isinstance(info.value.__cause__, ValueError)
        assert "test_flaky" in str(info.value) and "ValueError" in str(info.value)
        _Flaky.fail_forward = False
        exe.forward(is_train=True, x=np.array([1.0, 2.0], np.float32))
        _Flaky.fail_backward = True
        with pytest.raises(MXNetError, match="backward lost its key"):
            exe.backward(mx.nd.ones(2))
        _Flaky.fail_backward = False
        out = exe.forward(is_train=True, x=np.array([3.0, 4.0], np.float32))[0]
        exe.backward(mx.nd.ones(2))
    finally:
        _Flaky.fail_forward = _Flaky.fail_backward = False
    assert out.asnumpy().tolist() == [6.0, 8.0]
    assert exe.grad_dict["x"].asnumpy().tolist() == [2.0, 2.0]


def test_errors_in_property_hooks_name_the_operator_and_hook():
    class BadShape(mx.operator.CustomOpProp):
        def infer_shape(self, in_shape):
            return in_shape, [in_shape[0], in_shape[0]]     # two outputs for one name

    class Crashing(mx.operator.CustomOpProp):
        def __init__(self, size):
            super().__init__()
            self.size = int(size)

    mx.operator.register("test_bad_shape")(BadShape)
    mx.operator.register("test_crashing")(Crashing)
    with pytest.raises(MXNetError, match=r"test_bad_shape.*infer_shape.*2 output"):
        mx.sym.Custom(mx.sym.var("x"), op_type="test_bad_shape").infer_shape(x=(2,))
    with pytest.raises(MXNetError, match=r"test_crashing.*invalid literal"):
        mx.sym.Custom(mx.sym.var("x"), op_type="test_crashing", size="big")
    with pytest.raises(MXNetError, match=r"test_crashing.*size"):
        mx.sym.Custom(mx.sym.var("x"), op_type="test_crashing")


def test_bad_calls_get_clear_errors():
    with pytest.raises(MXNetError, match="op_type"):
        mx.sym.Custom(mx.sym.var("x"))
    with pytest.raises(MXNetError, match="'nothing_here' is not registered"):
        mx.nd.Custom(mx.nd.zeros(2), op_type="nothing_here")
    with pytest.raises(MXNetError, match=r"expects 2 input\(s\) \(a, b\), got 1"):
        mx.nd.Custom(mx.nd.zeros(2), op_type="test_scale")
    with pytest.raises(MXNetError, match="expected a class"):
        mx.operator.register("not_a_prop")(lambda: None)
    with pytest.raises(MXNetError, match="non-empty string"):
        mx.operator.register("")


def test_exception_inside_nd_custom_leaves_the_process_working():
    _Flaky.fail_forward = True
    try:
        with pytest.raises(MXNetError, match="forward refused"):
            mx.nd.Custom(mx.nd.ones(3), op_type="test_flaky")
    finally:
        _Flaky.fail_forward = False
    assert mx.nd.Custom(mx.nd.ones(3), op_type="test_flaky").asnumpy().tolist() == [2, 2, 2]


# --- zero copy -----------------------------------------------------------------------------------
@numba.njit(cache=False)
def _square_into(x, out):
    for i in range(x.size):
        out.flat[i] = x.flat[i] * x.flat[i]


class _NumbaSquare(mx.operator.CustomOp):
    seen = {}

    def forward(self, is_train, req, in_data, out_data, aux):
        _NumbaSquare.seen["in"] = in_data[0].numpy_view()
        _NumbaSquare.seen["out"] = out_data[0].numpy_view()
        _NumbaSquare.seen["copy"] = in_data[0].asnumpy()
        _square_into(in_data[0].numpy_view(), out_data[0].numpy_view())

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        _NumbaSquare.seen["grad"] = in_grad[0].numpy_view()
        grad = 2 * in_data[0].numpy_view() * out_grad[0].numpy_view()
        self.assign(in_grad[0], req[0], grad)


@mx.operator.register("test_numba_square")
class _NumbaSquareProp(mx.operator.CustomOpProp):
    def create_operator(self, ctx, in_shapes, in_dtypes):
        return _NumbaSquare()


def test_arrays_are_the_executor_memory_and_numba_writes_into_it():
    net = mx.sym.Custom(mx.sym.var("x"), op_type="test_numba_square")
    exe = net.simple_bind(mx.cpu(), x=(2, 3))
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    out = exe.forward(is_train=True, x=x)[0]
    exe.backward(mx.nd.ones((2, 3)))
    seen = _NumbaSquare.seen
    assert seen["in"] is exe.arg_dict["x"].handle
    assert seen["out"] is out.handle
    assert seen["grad"] is exe.grad_dict["x"].handle
    assert not np.shares_memory(seen["copy"], seen["in"])
    np.testing.assert_allclose(out.asnumpy(), x * x, rtol=1e-6)
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), 2 * x, rtol=1e-6)
    # the next step reuses the same wrappers' memory
    exe.forward(is_train=True, x=x + 1)
    assert seen["in"] is exe.arg_dict["x"].handle


def test_read_only_inputs_refuse_writes():
    class Writer(mx.operator.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            in_data[0][:] = 0

    @mx.operator.register("test_writer")
    class WriterProp(mx.operator.CustomOpProp):
        def create_operator(self, ctx, in_shapes, in_dtypes):
            return Writer()

    with pytest.raises(MXNetError, match="read-only"):
        mx.nd.Custom(mx.nd.ones(2), op_type="test_writer")


# --- older interfaces ----------------------------------------------------------------------------
def test_ndarray_op_and_numpy_op():
    class Double(mx.operator.NDArrayOp):
        def forward(self, in_data, out_data):
            out_data[0][:] = in_data[0] * 2

        def backward(self, out_grad, in_data, out_data, in_grad):
            in_grad[0][:] = out_grad[0] * 2

    class Square(mx.operator.NumpyOp):
        def forward(self, in_data, out_data):
            assert isinstance(in_data[0], np.ndarray)
            out_data[0][:] = in_data[0] ** 2

        def backward(self, out_grad, in_data, out_data, in_grad):
            in_grad[0][:] = 2 * in_data[0] * out_grad[0]

    with pytest.warns(DeprecationWarning):
        double, square = Double(), Square()
    net = square(double(mx.sym.var("x"), name="dbl"), name="sq")
    x = np.array([1.0, -2.0, 3.0], np.float32)
    exe = net.simple_bind(mx.cpu(), x=(3,))
    np.testing.assert_allclose(exe.forward(is_train=True, x=x)[0].asnumpy(), 4 * x * x)
    exe.backward(mx.nd.ones(3))
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), 8 * x)


# --- Module, BucketingModule, several contexts, Monitor ---------------------------------------
def _classifier(custom_loss, hidden=5):
    data = mx.sym.var("data")
    net = mx.sym.FullyConnected(data, num_hidden=hidden, name="fc1")
    # inputs by keyword; the aux state's variable carries its initializer
    net = mx.sym.Custom(data=net, count=mx.sym.var("cnt_count", init=mx.init.Zero()),
                        op_type="test_counter", name="cnt")
    net = mx.sym.Activation(net, act_type="tanh")
    net = mx.sym.FullyConnected(net, num_hidden=3, name="fc2")
    if custom_loss:
        return mx.sym.Custom(net, op_type="test_softmax", name="softmax")
    return mx.sym.SoftmaxOutput(net, name="softmax")


TRAIN_X = RNG.standard_normal((48, 4)).astype(np.float32)
TRAIN_Y = (np.arange(48) % 3).astype(np.float32)


def _train(net, context):
    it = mx.io.NDArrayIter(TRAIN_X, TRAIN_Y, batch_size=8)
    mod = mx.mod.Module(net, context=context)
    mx.random.seed(3)
    mod.fit(it, num_epoch=2, optimizer="sgd", optimizer_params={"learning_rate": 0.5},
            initializer=mx.init.Xavier(rnd_type="gaussian"))
    arg, aux = mod.get_params()
    return mod, {k: v.asnumpy() for k, v in arg.items()}, aux


def test_module_trains_a_custom_loss_like_the_builtin_one():
    _, builtin, _ = _train(_classifier(False), mx.cpu())
    mod, custom, aux = _train(_classifier(True), mx.cpu())
    assert set(builtin) == set(custom)
    for name in builtin:
        np.testing.assert_allclose(custom[name], builtin[name], rtol=1e-5, atol=1e-6)
    assert aux["cnt_count"].asnumpy().tolist() == [12.0]      # 2 epochs x 6 training batches
    assert np.isfinite(mod.score(mx.io.NDArrayIter(TRAIN_X, TRAIN_Y, batch_size=8), "acc")[0][1])


def test_several_contexts_in_one_executor_group():
    _, one, _ = _train(_classifier(True), mx.cpu())
    _, two, _ = _train(_classifier(True), [mx.cpu(0), mx.cpu(1)])
    for name in one:
        np.testing.assert_allclose(two[name], one[name], rtol=1e-5, atol=1e-6)


def test_monitor_sees_custom_outputs():
    net = mx.sym.Custom(mx.sym.var("data"), mx.sym.var("other"), op_type="test_scale",
                        name="sc")
    net = mx.sym.MakeLoss(mx.sym.sum(net))
    mod = mx.mod.Module(net, data_names=("data", "other"), label_names=None, context=mx.cpu())
    mod.bind(data_shapes=[("data", (2, 3)), ("other", (2, 3))], inputs_need_grad=True)
    mod.init_params()
    mon = mx.mon.Monitor(1, pattern="sc.*")
    mod.install_monitor(mon)
    mon.tic()
    mod.forward(mx.io.DataBatch([mx.nd.ones((2, 3)) * 2] * 2), is_train=True)
    mod.backward()
    stats = {name: float(value) for _, name, value in mon.toc()}
    # the default statistic is norm(x) / sqrt(size): 4 for the output (2 * 2), 2 for each
    # gradient (head gradient 1 times the other input)
    assert stats == pytest.approx({"sc_output": 4.0, "sc_backward_output0": 2.0,
                                   "sc_backward_output1": 2.0})


def test_bucketing_module_with_a_custom_operator():
    def sym_gen(length):
        data = mx.sym.var("data")                     # (batch, length, 4)
        net = mx.sym.Custom(data, data, op_type="test_scale", scale=0.5, name="sq")
        net = mx.sym.mean(net, axis=1)
        net = mx.sym.FullyConnected(net, num_hidden=3, name="fc")
        net = mx.sym.Custom(net, op_type="test_softmax", name="softmax")
        return net, ("data",), ("softmax_label",)

    def reference(batches, weight, bias, lr):
        for x, y in batches:
            feat = (0.5 * x * x).mean(axis=1)
            p = _softmax(feat @ weight.T + bias)
            p[np.arange(len(y)), y.astype(int)] -= 1
            weight = weight - lr / len(y) * p.T @ feat
            bias = bias - lr / len(y) * p.sum(axis=0)
        return weight, bias

    mod = mx.mod.BucketingModule(sym_gen, default_bucket_key=5, context=mx.cpu())
    mod.bind(data_shapes=[("data", (4, 5, 4))], label_shapes=[("softmax_label", (4,))])
    mod.init_params(initializer=mx.init.Uniform(0.3))
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.2})
    arg, _ = mod.get_params()
    weight, bias = arg["fc_weight"].asnumpy(), arg["fc_bias"].asnumpy()
    batches = []
    for length in (5, 3, 7, 3):
        x = RNG.standard_normal((4, length, 4)).astype(np.float32)
        y = np.array([0, 1, 2, 1], np.float32)
        batches.append((x, y))
        batch = mx.io.DataBatch([mx.nd.array(x)], [mx.nd.array(y)], bucket_key=length,
                                provide_data=[mx.io.DataDesc("data", x.shape)],
                                provide_label=[mx.io.DataDesc("softmax_label", (4,))])
        mod.forward_backward(batch)
        mod.update()
    assert sorted(mod._buckets) == [3, 5, 7]
    arg, _ = mod.get_params()
    want_w, want_b = reference(batches, weight, bias, 0.2)
    np.testing.assert_allclose(arg["fc_weight"].asnumpy(), want_w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(arg["fc_bias"].asnumpy(), want_b, rtol=1e-4, atol=1e-5)


def test_steps_after_the_first_build_no_arrays(monkeypatch):
    from lightmod.operator import custom
    built = []
    for name in ("_wrap", "_zeros_like"):
        original = getattr(custom, name)
        monkeypatch.setattr(custom, name,
                            lambda *a, _f=original, _n=name: built.append(_n) or _f(*a))
    # b's gradient is not requested ('null'): its scratch array is built once too
    exe = _scale_net().simple_bind(mx.cpu(), grad_req={"a": "write", "b": "null"}, a=(2, 3))
    head = mx.nd.ones((2, 3))
    exe.forward(is_train=True)
    exe.backward(head)
    first = len(built)
    # wrappers of a, b, out, the head gradient, a's and b's gradient slots; b's scratch array
    assert sorted(built) == ["_wrap"] * 6 + ["_zeros_like"]
    for _ in range(3):
        exe.forward(is_train=True)
        exe.backward(head)
    assert len(built) == first


def test_each_device_creates_its_operator_with_its_context():
    del CALLS[:]
    split = mx.sym.Custom(mx.sym.var("data"), op_type="test_split", name="sp")
    mod = mx.mod.Module(mx.sym.MakeLoss(mx.sym.sum(split[0])), label_names=None,
                        context=[mx.cpu(0), mx.cpu(1)])
    mod.bind(data_shapes=[("data", (4, 3))])
    mod.init_params()
    mod.forward(mx.io.DataBatch([mx.nd.ones((4, 3))]), is_train=True)
    created = sorted(str(c[1]) for c in CALLS if c[0] == "create")
    assert created == ["cpu(0)", "cpu(1)"]
    # nd.Custom: the inputs' context
    del CALLS[:]
    mx.nd.Custom(mx.nd.ones(2, ctx=mx.cpu(3)), op_type="test_split")
    assert [c[1] for c in CALLS if c[0] == "create"] == [mx.cpu(3)]


# --- what MXNet's test_custom_op checks without mx.autograd ------------------------------------
class _SqrWithAux(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        aux[0][:] = 1
        self.assign(out_data[0], req[0], in_data[0] * in_data[0])

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        assert (aux[0].asnumpy() == 1).all()
        self.assign(in_grad[0], req[0], 2 * in_data[0] * out_grad[0])


@mx.operator.register("test_sqr_aux")
class _SqrWithAuxProp(mx.operator.CustomOpProp):
    def list_auxiliary_states(self):
        return ["aux"]

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]], [in_shape[0]]

    def infer_type(self, in_type):
        return in_type, [in_type[0]], [in_type[0]]

    def infer_storage_type(self, in_stype):
        return ["default"], ["default"], ["default"]

    def create_operator(self, ctx, shapes, dtypes):
        return _SqrWithAux()


def test_numeric_gradient_with_an_aux_state_and_casts():
    data = mx.sym.Variable("data")
    op = mx.sym.Custom(data=data, aux=mx.sym.Variable("aux"), name="sqr", op_type="test_sqr_aux")
    x = RNG.uniform(-1, 1, (4, 10))
    check_numeric_gradient(op, [x], [np.zeros_like(x)], rtol=1e-2, atol=1e-4)
    # MXNet's second case: the output cast (to the same float32)
    check_numeric_gradient(mx.sym.cast(op, dtype="float32"), [x], [np.zeros_like(x)],
                           rtol=1e-2, atol=1e-4)
    # the aux state was written by forward and seen by backward (the operator asserts it)
    exe = op.simple_bind(mx.cpu(), data=(4, 10))
    exe.forward(is_train=True, data=x)
    exe.backward(mx.nd.ones((4, 10)))
    assert (exe.aux_dict["aux"].asnumpy() == 1).all()
    np.testing.assert_allclose(exe.grad_dict["data"].asnumpy(), 2 * x, rtol=1e-6)


class _Ones(mx.operator.CustomOp):
    def __init__(self, length, depth):
        super().__init__()
        self.value = np.ones((length, depth), np.float32)

    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], self.value)


@mx.operator.register("test_no_input")
class _OnesProp(mx.operator.CustomOpProp):
    def __init__(self, length, depth):
        super().__init__()
        self.length, self.depth = int(length), int(depth)

    def list_arguments(self):
        return []

    def infer_shape(self, in_shape):
        return [], [(self.length, self.depth)], []

    def infer_type(self, in_type):
        return [], [np.float32], []

    def create_operator(self, ctx, shapes, dtypes):
        return _Ones(self.length, self.depth)


def test_an_operator_without_inputs():
    np.testing.assert_array_equal(mx.nd.Custom(length=3, depth=2, op_type="test_no_input")
                                  .asnumpy(), np.ones((3, 2)))
    net = mx.sym.Custom(length=2, depth=4, op_type="test_no_input") * 3
    assert net.list_arguments() == []
    exe = net.simple_bind(mx.cpu())
    np.testing.assert_array_equal(exe.forward()[0].asnumpy(), np.full((2, 4), 3.0))
