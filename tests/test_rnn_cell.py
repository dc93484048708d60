"""mx.rnn cells: graphs, names and JSON against MXNet 1.9.1 (tests/fixtures/make_rnn_golden.py),
unrolled values against a numpy reference, begin-state shape inference, weight (un)packing,
FusedRNNCell vs its unfused stack, and the checkpoint helpers."""
import json
import os
import warnings

import numpy as np
import pytest

import lightmod as mx

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = json.load(open(os.path.join(HERE, "fixtures", "rnn_golden.json")))
ARRAYS = np.load(os.path.join(HERE, "fixtures", "rnn_golden.npz"))

N, T, C, H = 2, 3, 5, 4


# ---------------------------------------------------------------------------------------------
# the graphs of the golden file, built the same way
# ---------------------------------------------------------------------------------------------
def _steps():
    return [mx.sym.Variable("x%d" % i) for i in range(T)]


def _sequential_dropout():
    stack = mx.rnn.SequentialRNNCell()
    stack.add(mx.rnn.LSTMCell(H, prefix="lstm_l0_"))
    stack.add(mx.rnn.DropoutCell(0.5, prefix="drop_"))
    stack.add(mx.rnn.LSTMCell(H, prefix="lstm_l1_"))
    return stack


def _residual():
    stack = mx.rnn.SequentialRNNCell()
    stack.add(mx.rnn.GRUCell(H, prefix="gru_l0_"))
    stack.add(mx.rnn.ResidualCell(mx.rnn.GRUCell(H, prefix="gru_l1_")))
    return stack


def _lstm_var_states():
    cell = mx.rnn.LSTMCell(H, prefix="lstm_")
    return cell, dict(begin_state=cell.begin_state(func=mx.sym.Variable))


def _lstm_second_begin_state():
    cell = mx.rnn.LSTMCell(H, prefix="lstm_")
    cell.begin_state()
    return cell, {}


# case -> (cell factory, unroll keyword arguments)
CASES = {
    "lstm_merge": (lambda: mx.rnn.LSTMCell(H, prefix="lstm_"), dict(merge=True)),
    "lstm_list": (lambda: mx.rnn.LSTMCell(H, prefix="lstm_"), dict(merge=False)),
    "lstm_default": (lambda: mx.rnn.LSTMCell(H, prefix="lstm_", forget_bias=2.5), {}),
    "lstm_tnc": (lambda: mx.rnn.LSTMCell(H, prefix="lstm_"), dict(layout="TNC", merge=True)),
    "gru_merge": (lambda: mx.rnn.GRUCell(H, prefix="gru_"), dict(merge=True)),
    "rnn_tanh": (lambda: mx.rnn.RNNCell(H, prefix="rnn_"), dict(merge=True)),
    "rnn_relu": (lambda: mx.rnn.RNNCell(H, activation="relu", prefix="rnn_"),
                 dict(merge=False)),
    "gru_list_inputs": (lambda: mx.rnn.GRUCell(H, prefix="g_"),
                        dict(data=_steps, merge=False)),
    "rnn_list_inputs_merge": (lambda: mx.rnn.RNNCell(H, prefix="r_"),
                              dict(data=_steps, merge=True)),
    "lstm_var_states": (_lstm_var_states, dict(merge=False)),
    "lstm_second_begin_state": (_lstm_second_begin_state, dict(merge=True)),
    "sequential": (_sequential_dropout, dict(merge=True)),
    "residual_list": (_residual, dict(merge=False)),
    "residual_merge": (_residual, dict(merge=True)),
    "bidirectional_merge": (lambda: mx.rnn.BidirectionalCell(
        mx.rnn.LSTMCell(H, prefix="l_"), mx.rnn.LSTMCell(H, prefix="r_")), dict(merge=True)),
    "bidirectional_list": (lambda: mx.rnn.BidirectionalCell(
        mx.rnn.GRUCell(H, prefix="l_"), mx.rnn.GRUCell(H, prefix="r_"),
        output_prefix="bio_"), dict(merge=False)),
    "bidirectional_default": (lambda: mx.rnn.BidirectionalCell(
        mx.rnn.RNNCell(H, prefix="l_"), mx.rnn.RNNCell(H, prefix="r_")), {}),
    "zoneout": (lambda: mx.rnn.ZoneoutCell(mx.rnn.RNNCell(H, prefix="rnn_"),
                                           zoneout_outputs=0.3, zoneout_states=0.4),
                dict(merge=False)),
    "dropout_merge": (lambda: mx.rnn.DropoutCell(0.5), dict(merge=True)),
    "fused_lstm_ntc": (lambda: mx.rnn.FusedRNNCell(H, num_layers=2, mode="lstm", prefix="f_"),
                       dict(merge=True)),
    "fused_gru_bi_states": (lambda: mx.rnn.FusedRNNCell(
        H, num_layers=2, mode="gru", bidirectional=True, get_next_state=True, prefix="f_"),
        dict(layout="TNC", merge=False)),
    "fused_rnn_tanh_default": (lambda: mx.rnn.FusedRNNCell(
        H, num_layers=1, mode="rnn_tanh", get_next_state=True), dict(layout="TNC")),
    "unfused_lstm_bi": (lambda: mx.rnn.FusedRNNCell(
        H, num_layers=2, mode="lstm", bidirectional=True, dropout=0.2, prefix="f_").unfuse(),
        dict(merge=True)),
    "unfused_gru": (lambda: mx.rnn.FusedRNNCell(H, num_layers=2, mode="gru",
                                                prefix="f_").unfuse(),
                    dict(layout="TNC", merge=True)),
    "conv_lstm": (lambda: mx.rnn.ConvLSTMCell((N, 3, 6, 6), num_hidden=2, prefix="clstm_"),
                  dict(merge=False)),
    "conv_gru": (lambda: mx.rnn.ConvGRUCell((N, 3, 6, 6), num_hidden=2, prefix="cgru_"),
                 dict(merge=True)),
    "conv_rnn": (lambda: mx.rnn.ConvRNNCell((N, 3, 6, 6), num_hidden=2, prefix="crnn_"),
                 dict(merge=True)),
}


def build(case):
    """(group of outputs + flattened states, list of outputs, list of states) for a case."""
    factory, kwargs = CASES[case]
    made = factory()
    cell, extra = made if isinstance(made, tuple) else (made, {})
    kwargs = dict(kwargs)
    data = kwargs.pop("data", None)
    with mx.name.NameManager():
        data = mx.sym.Variable("data") if data is None else data()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outputs, states = cell.unroll(T, inputs=data, layout=kwargs.get("layout", "NTC"),
                                          merge_outputs=kwargs.get("merge"), **extra)
    outs = [outputs] if isinstance(outputs, mx.sym.Symbol) else list(outputs)
    flat = []
    for s in states:
        flat.extend(s if isinstance(s, list) else [s])
    return mx.sym.Group(outs + flat), outs, flat, isinstance(outputs, mx.sym.Symbol)


def test_every_golden_graph_is_covered():
    assert set(CASES) | {"lstm_step"} == set(GOLDEN["cells"])


@pytest.mark.parametrize("case", sorted(CASES))
def test_graph_names_match_mxnet(case):
    entry = GOLDEN["cells"][case]
    group, outs, states, merged = build(case)
    assert merged == entry["merged"]
    assert [o.name for o in outs] == entry["output_names"]
    assert [s.name for s in states] == entry["state_names"]
    assert group.list_arguments() == entry["arguments"]
    assert group.list_outputs() == entry["outputs"]
    assert group.get_internals().list_outputs() == entry["internals"]
    assert group.list_auxiliary_states() == entry["aux"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_graph_json_matches_mxnet(case):
    expected = GOLDEN["cells"][case]["json"]
    got = json.loads(build(case)[0].tojson())
    assert len(got["nodes"]) == len(expected["nodes"])
    for mine, theirs in zip(got["nodes"], expected["nodes"]):
        assert mine == theirs
    for key in ("arg_nodes", "heads", "node_row_ptr"):
        assert got[key] == expected[key], key


@pytest.mark.parametrize("case", sorted(c for c in CASES if "shape_inputs" in GOLDEN["cells"][c]))
def test_shape_inference_matches_mxnet(case):
    entry = GOLDEN["cells"][case]
    group = build(case)[0]
    shapes = {k: tuple(v) for k, v in entry["shape_inputs"].items()}
    arg_shapes, out_shapes, _ = group.infer_shape(**shapes)
    assert [list(s) for s in arg_shapes] == entry["arg_shapes"]
    assert [list(s) for s in out_shapes] == entry["out_shapes"]


@pytest.mark.parametrize("case", sorted(c for c in CASES if GOLDEN["cells"][c].get("values")))
def test_unrolled_values_match_mxnet(case):
    group = build(case)[0]
    args = {name: mx.nd.array(ARRAYS["cell/%s/arg/%s" % (case, name)])
            for name in group.list_arguments()}
    ex = group.bind(mx.cpu(), args)
    outs = ex.forward(is_train=False)
    for i, out in enumerate(outs):
        np.testing.assert_allclose(out.asnumpy(), ARRAYS["cell/%s/out/%d" % (case, i)],
                                   rtol=1e-5, atol=1e-6, err_msg="%s output %d" % (case, i))


def test_single_step_names_and_state_info():
    entry = GOLDEN["cells"]["lstm_step"]
    cell = mx.rnn.LSTMCell(H, prefix="step_")
    with mx.name.NameManager():
        out, states = cell(mx.sym.Variable("x"), cell.begin_state())
    group = mx.sym.Group([out] + states)
    assert group.get_internals().list_outputs() == entry["internals"]
    assert [dict(d, shape=list(d["shape"])) for d in cell.state_info] == entry["state_info"]
    assert sorted(cell.params._params) == entry["params"]
    assert cell.state_shape == [(0, H), (0, H)]


# ---------------------------------------------------------------------------------------------
# values against numpy
# ---------------------------------------------------------------------------------------------
def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _bind_random(group, shapes, seed=0):
    rng = np.random.default_rng(seed)
    arg_shapes, _, _ = group.infer_shape(**shapes)
    args = {n: rng.standard_normal(s) * 0.5 for n, s in zip(group.list_arguments(), arg_shapes)}
    ex = group.bind(mx.cpu(), {n: mx.nd.array(v) for n, v in args.items()})
    return args, [o.asnumpy() for o in ex.forward(is_train=False)]


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn_tanh", "rnn_relu"])
def test_unroll_matches_numpy(kind):
    if kind == "lstm":
        cell = mx.rnn.LSTMCell(H, prefix="c_")
    elif kind == "gru":
        cell = mx.rnn.GRUCell(H, prefix="c_")
    else:
        cell = mx.rnn.RNNCell(H, activation=kind[4:], prefix="c_")
    outputs, states = cell.unroll(T, mx.sym.Variable("data"), merge_outputs=True)
    group = mx.sym.Group([outputs] + states)
    args, outs = _bind_random(group, {"data": (N, T, C)}, seed=3)
    x = args["data"]
    h = np.zeros((N, H))
    c = np.zeros((N, H))
    expected = []
    for t in range(T):
        a = x[:, t] @ args["c_i2h_weight"].T + args["c_i2h_bias"]
        b = h @ args["c_h2h_weight"].T + args["c_h2h_bias"]
        if kind == "lstm":
            i, f, g, o = np.split(a + b, 4, axis=1)
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            h = _sigmoid(o) * np.tanh(c)
        elif kind == "gru":
            ar, az, an = np.split(a, 3, axis=1)
            br, bz, bn = np.split(b, 3, axis=1)
            r, z = _sigmoid(ar + br), _sigmoid(az + bz)
            h = (1 - z) * np.tanh(an + r * bn) + z * h
        elif kind == "rnn_tanh":
            h = np.tanh(a + b)
        else:
            h = np.maximum(a + b, 0)
        expected.append(h)
    np.testing.assert_allclose(outs[0], np.stack(expected, axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs[1], h, rtol=1e-5, atol=1e-6)
    if kind == "lstm":
        np.testing.assert_allclose(outs[2], c, rtol=1e-5, atol=1e-6)


def test_lstm_bias_initializer_attribute():
    cell = mx.rnn.LSTMCell(H, prefix="lstm_", forget_bias=1.0)
    outputs, _ = cell.unroll(2, mx.sym.Variable("data"))
    attrs = outputs[-1].attr_dict()
    assert json.loads(attrs["lstm_i2h_bias"]["__init__"]) == ["lstmbias", {"forget_bias": 1.0}]
    assert "__init__" not in attrs.get("lstm_h2h_bias", {})


def test_begin_state_shapes_filled_by_inference():
    stack = mx.rnn.SequentialRNNCell()
    stack.add(mx.rnn.LSTMCell(H, prefix="l0_"))
    stack.add(mx.rnn.GRUCell(3, prefix="l1_"))
    states = stack.begin_state()
    assert [s.name for s in states] == ["l0_begin_state_0", "l0_begin_state_1",
                                        "l1_begin_state_0"]
    assert [s.attr("__layout__") for s in states] == ["NC"] * 3
    outputs, final = stack.unroll(T, mx.sym.Variable("data"), begin_state=states,
                                  merge_outputs=True)
    internals = mx.sym.Group([outputs] + final).get_internals()
    _, out_shapes, _ = internals.infer_shape(data=(7, T, C))
    shape_of = dict(zip(internals.list_outputs(), out_shapes))
    assert shape_of["l0_begin_state_0_output"] == (7, H)
    assert shape_of["l1_begin_state_0_output"] == (7, 3)
    # state variables (test_module_states): __shape__ (0, H), the batch comes from the data
    cell = mx.rnn.LSTMCell(20, prefix="lstm_")
    begin = cell.begin_state(func=mx.sym.Variable)
    assert begin[0].attr("__shape__") == "(0, 20)"
    outputs, states = cell.unroll(10, mx.sym.Variable("data"), begin_state=begin,
                                  merge_outputs=False)
    group = mx.sym.Group(list(outputs) + states)
    arg_shapes, _, _ = group.infer_shape(data=(5, 10))
    shapes = dict(zip(group.list_arguments(), arg_shapes))
    assert shapes["lstm_begin_state_0"] == (5, 20) and shapes["lstm_begin_state_1"] == (5, 20)
    assert shapes["lstm_i2h_weight"] == (80, 1)


def test_modified_cell_cannot_be_used_directly():
    base = mx.rnn.GRUCell(H, prefix="g_")
    wrapped = mx.rnn.ResidualCell(base)
    with pytest.raises(AssertionError, match="modifier"):
        base.begin_state()
    assert [s.name for s in wrapped.begin_state()] == ["g_begin_state_0"]
    assert wrapped.params is base.params
    with pytest.raises(AssertionError, match="zoneout"):
        mx.rnn.ZoneoutCell(mx.rnn.FusedRNNCell(H))
    with pytest.raises(NotImplementedError, match="unroll"):
        mx.rnn.FusedRNNCell(H)(mx.sym.Variable("x"), [])
    with pytest.raises(AssertionError, match="dropout probability"):
        mx.rnn.DropoutCell("0.5")


def test_params_sharing_rules():
    params = mx.rnn.RNNParams("shared_")
    a = mx.rnn.LSTMCell(H, prefix="a_", params=params)
    b = mx.rnn.LSTMCell(H, prefix="b_", params=params)
    assert a._iW is b._iW and a._iW.name == "shared_i2h_weight"
    # as in MXNet, a cell's own constructor already reads `params`, so a stack with its own
    # params refuses every cell
    stack = mx.rnn.SequentialRNNCell(params=mx.rnn.RNNParams("s_"))
    with pytest.raises(AssertionError, match="not both"):
        stack.add(mx.rnn.GRUCell(H, prefix="g_"))
    stack = mx.rnn.SequentialRNNCell()
    stack.add(mx.rnn.GRUCell(H, prefix="g_"))
    stack.add(a)
    assert sorted(stack.params._params) == ["g_h2h_bias", "g_h2h_weight", "g_i2h_bias",
                                            "g_i2h_weight", "shared_h2h_bias",
                                            "shared_h2h_weight", "shared_i2h_bias",
                                            "shared_i2h_weight"]


def test_unroll_input_checks():
    cell = mx.rnn.RNNCell(H)
    with pytest.raises(AssertionError, match="deprecated"):
        cell.unroll(3, None)
    with pytest.raises(AssertionError, match="grouped"):
        cell.unroll(2, mx.sym.Group([mx.sym.Variable("a"), mx.sym.Variable("b")]))
    with pytest.raises(AssertionError):
        cell.unroll(3, [mx.sym.Variable("a")])


# ---------------------------------------------------------------------------------------------
# weights: unpack / pack, FusedRNN initializer, fused vs unfused
# ---------------------------------------------------------------------------------------------
def test_cell_unpack_pack_matches_mxnet():
    cell = mx.rnn.LSTMCell(H, prefix="p_")
    names = GOLDEN["unpack"]["lstm_cell"]["names"]
    packed = {k.split("/")[-1]: mx.nd.array(ARRAYS[k]) for k in ARRAYS.files
              if k.startswith("unpack/lstm_cell/packed/")}
    unpacked = cell.unpack_weights(packed)
    assert sorted(unpacked) == names
    for name in names:
        np.testing.assert_array_equal(unpacked[name].asnumpy(),
                                      ARRAYS["unpack/lstm_cell/unpacked/%s" % name])
    repacked = cell.pack_weights(unpacked)
    assert sorted(repacked) == sorted(packed)
    for name, arr in packed.items():
        np.testing.assert_array_equal(repacked[name].asnumpy(), arr.asnumpy())
    # cells without gates pass dictionaries through
    assert mx.rnn.DropoutCell(0.5).unpack_weights({"x": 1}) == {"x": 1}


@pytest.mark.parametrize("case", sorted(c for c in GOLDEN["unpack"] if c != "lstm_cell"))
def test_fused_unpack_pack_and_initializer_match_mxnet(case):
    entry = GOLDEN["unpack"][case]
    key = "unpack/" + case
    cell = mx.rnn.FusedRNNCell(entry["hidden"], num_layers=entry["num_layers"],
                               mode=entry["mode"], bidirectional=entry["bidirectional"],
                               prefix="f_")
    packed = ARRAYS[key + "/packed"]
    unpacked = cell.unpack_weights({"f_parameters": mx.nd.array(packed)})
    assert sorted(unpacked) == entry["names"]
    for name in entry["names"]:
        np.testing.assert_array_equal(unpacked[name].asnumpy(),
                                      ARRAYS["%s/unpacked/%s" % (key, name)])
    repacked = cell.pack_weights(unpacked)
    assert list(repacked) == ["f_parameters"]
    np.testing.assert_array_equal(repacked["f_parameters"].asnumpy(), packed)
    # the initializer, through the __init__ attribute with the global initializer ...
    init = mx.init.FusedRNN(None, entry["hidden"], entry["num_layers"], entry["mode"],
                            entry["bidirectional"], forget_bias=3.0)
    assert json.loads(init.dumps()) == json.loads(entry["init_json"])
    arr = mx.nd.zeros((entry["size"],))
    mx.init.Constant(0.25)(mx.init.InitDesc("f_parameters",
                                            attrs={"__init__": init.dumps()}), arr)
    np.testing.assert_array_equal(arr.asnumpy(), ARRAYS[key + "/init_global"])
    # ... and given an initializer object
    init_b = mx.init.FusedRNN(mx.init.Constant(-0.5), entry["hidden"], entry["num_layers"],
                              entry["mode"], entry["bidirectional"])
    assert json.loads(init_b.dumps()) == json.loads(entry["init_object_json"])
    arr = mx.nd.zeros((entry["size"],))
    init_b._init_weight(mx.init.InitDesc("f_parameters"), arr)
    np.testing.assert_array_equal(arr.asnumpy(), ARRAYS[key + "/init_object"])
    # MXNet 1.9.1 cannot rebuild this one from its JSON (registry lookup bug); we can
    arr2 = mx.nd.zeros((entry["size"],))
    mx.init.Uniform()(mx.init.InitDesc("f_parameters", attrs={"__init__": init_b.dumps()}),
                      arr2)
    np.testing.assert_array_equal(arr2.asnumpy(), arr.asnumpy())


@pytest.mark.parametrize("case", sorted(c for c in GOLDEN["unpack"] if c != "lstm_cell"))
def test_fused_and_unfused_match_mxnet(case):
    entry = GOLDEN["unpack"][case]
    key = "unpack/" + case
    cell = mx.rnn.FusedRNNCell(entry["hidden"], num_layers=entry["num_layers"],
                               mode=entry["mode"], bidirectional=entry["bidirectional"],
                               prefix="f_")
    data = ARRAYS[key + "/data"]
    packed = ARRAYS[key + "/packed"]
    outs, _ = cell.unroll(T, mx.sym.Variable("data"), layout="TNC", merge_outputs=True)
    ex = outs.bind(mx.cpu(), {"data": mx.nd.array(data), "f_parameters": mx.nd.array(packed)})
    fused = ex.forward(is_train=False)[0].asnumpy()
    np.testing.assert_allclose(fused, ARRAYS[key + "/fused_out"], rtol=1e-5, atol=1e-6)
    unfused = cell.unfuse()
    uouts, _ = unfused.unroll(T, mx.sym.Variable("data"), layout="TNC", merge_outputs=True)
    args = unfused.pack_weights(cell.unpack_weights({"f_parameters": mx.nd.array(packed)}))
    args["data"] = mx.nd.array(data)
    uex = uouts.bind(mx.cpu(), {k: v for k, v in args.items() if k in uouts.list_arguments()})
    np.testing.assert_allclose(uex.forward(is_train=False)[0].asnumpy(), fused, rtol=1e-5,
                               atol=1e-6)


def test_fused_training_gradients_match_unfused():
    cell = mx.rnn.FusedRNNCell(3, num_layers=2, mode="lstm", bidirectional=True, prefix="f_",
                               get_next_state=True)
    outs, states = cell.unroll(T, mx.sym.Variable("data"), layout="TNC", merge_outputs=True)
    loss = mx.sym.MakeLoss(mx.sym.sum(outs * outs))
    rng = np.random.default_rng(9)
    data = rng.standard_normal((T, N, C))
    _, (size,) = loss.infer_shape(data=(T, N, C))[0]
    packed = rng.standard_normal(size) * 0.3
    exe = loss.simple_bind(mx.cpu(), data=(T, N, C))
    exe.arg_dict["data"][:] = data
    exe.arg_dict["f_parameters"][:] = packed
    exe.forward(is_train=True)
    exe.backward()
    fused_grad = cell.unpack_weights({"f_parameters": exe.grad_dict["f_parameters"]})

    unfused = cell.unfuse()
    uouts, _ = unfused.unroll(T, mx.sym.Variable("data"), layout="TNC", merge_outputs=True)
    uloss = mx.sym.MakeLoss(mx.sym.sum(uouts * uouts))
    uexe = uloss.simple_bind(mx.cpu(), data=(T, N, C))
    weights = unfused.pack_weights(cell.unpack_weights({"f_parameters": mx.nd.array(packed)}))
    for name, arr in uexe.arg_dict.items():
        arr[:] = data if name == "data" else weights[name]
    uexe.forward(is_train=True)
    uexe.backward()
    unfused_grad = unfused.unpack_weights({k: v for k, v in uexe.grad_dict.items()
                                           if k != "data"})
    assert sorted(unfused_grad) == sorted(fused_grad)
    for name in fused_grad:
        np.testing.assert_allclose(fused_grad[name].asnumpy(), unfused_grad[name].asnumpy(),
                                   rtol=1e-4, atol=1e-5, err_msg=name)
    np.testing.assert_allclose(exe.grad_dict["data"].asnumpy(),
                               uexe.grad_dict["data"].asnumpy(), rtol=1e-4, atol=1e-5)


def test_rnn_checkpoint_helpers_roundtrip(tmp_path):
    cell = mx.rnn.FusedRNNCell(H, num_layers=1, mode="gru", prefix="f_")
    outs, _ = cell.unroll(T, mx.sym.Variable("data"), layout="TNC", merge_outputs=True)
    size = outs.infer_shape(data=(T, N, C))[0][1][0]
    packed = mx.nd.array(np.arange(size, dtype=np.float32))
    prefix = str(tmp_path / "m")
    callback = mx.rnn.do_rnn_checkpoint(cell, prefix, period=2)
    callback(0, outs, {"f_parameters": packed}, {})
    assert not os.path.exists(prefix + "-0001.params")
    callback(1, outs, {"f_parameters": packed}, {})
    saved = mx.nd.load(prefix + "-0002.params")
    assert "arg:f_l0_i2h_r_weight" in saved and "arg:f_parameters" not in saved
    sym, args, aux = mx.rnn.load_rnn_checkpoint([cell], prefix, 2)
    assert list(args) == ["f_parameters"] and aux == {}
    np.testing.assert_array_equal(args["f_parameters"].asnumpy(), packed.asnumpy())
    assert sym.tojson() == outs.tojson()
    with pytest.warns(UserWarning, match="deprecated"):
        out, _ = mx.rnn.rnn_unroll(mx.rnn.RNNCell(H), 2, mx.sym.Variable("data"))
    assert len(out) == 2


def test_zoneout_is_the_base_cell_at_inference_and_mixes_in_training():
    def outputs_of(cell, is_train, seed=0):
        outs, _ = cell.unroll(T, mx.sym.Variable("data"), merge_outputs=False)
        group = mx.sym.Group(list(outs))
        rng = np.random.default_rng(seed)
        arg_shapes, _, _ = group.infer_shape(data=(N, T, C))
        args = {n: mx.nd.array(rng.standard_normal(s))
                for n, s in zip(group.list_arguments(), arg_shapes)}
        mx.random.seed(5)
        return [o.asnumpy() for o in group.bind(mx.cpu(), args).forward(is_train=is_train)]

    plain = outputs_of(mx.rnn.RNNCell(H, prefix="rnn_"), False)
    zoned = outputs_of(mx.rnn.ZoneoutCell(mx.rnn.RNNCell(H, prefix="rnn_"),
                                          zoneout_outputs=0.5), False)
    for a, b in zip(plain, zoned):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    trained = outputs_of(mx.rnn.ZoneoutCell(mx.rnn.RNNCell(H, prefix="rnn_"),
                                            zoneout_outputs=0.5), True)
    # step 0 keeps either the new output or the zero previous one, unit by unit
    kept = np.isclose(trained[0], plain[0])
    assert np.all(kept | (trained[0] == 0)) and kept.any() and not kept.all()
