"""Symbols: naming, attributes, composition, listing, JSON (golden files from MXNet 1.9.1),
shape and type inference."""
import copy
import json
import os
import pickle
import sys
import threading
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lightmod as mx
from lightmod.base import MXNetError

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
GOLDEN = os.path.join(FIXTURES, "symbols")
sys.path.insert(0, FIXTURES)
import make_symbols  # noqa: E402


def golden_text(name):
    with open(os.path.join(GOLDEN, name), encoding="utf-8") as f:
        return f.read()


def golden_meta(name):
    return json.loads(golden_text(name + ".meta.json"))


# ---------------------------------------------------------------------------------------------
# JSON: byte-identical with MXNet 1.9.1
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", [n for n, _ in make_symbols.BUILDERS])
def test_built_symbol_json_matches_mxnet(name):
    build = dict(make_symbols.BUILDERS)[name]
    with mx.name.NameManager():
        sym, _ = build(mx)
    assert sym.tojson() == golden_text(name + ".json")


@pytest.mark.parametrize("name", [n for n, _ in make_symbols.BUILDERS])
def test_loaded_symbol_rewrites_identically(name, tmp_path):
    path = os.path.join(GOLDEN, name + ".json")
    sym = mx.sym.load(path)
    assert sym.tojson() == golden_text(name + ".json")
    out = str(tmp_path / "again.json")
    sym.save(out)
    with open(out, encoding="utf-8") as f:
        assert f.read() == golden_text(name + ".json")
    assert mx.sym.load_json(sym.tojson()).tojson() == sym.tojson()


@pytest.mark.parametrize("name", [n for n, _ in make_symbols.BUILDERS])
def test_listing_and_inference_match_mxnet(name):
    meta = golden_meta(name)
    sym = mx.sym.load(os.path.join(GOLDEN, name + ".json"))
    assert sym.list_arguments() == meta["list_arguments"]
    assert sym.list_outputs() == meta["list_outputs"]
    assert sym.list_auxiliary_states() == meta["list_auxiliary_states"]
    assert sym.list_inputs() == meta["list_inputs"]
    assert sym.attr_dict() == meta["attr_dict"]
    assert sym.get_internals().list_outputs() == meta["internals"]
    shapes = {k: tuple(v) for k, v in meta["infer_shape_kwargs"].items()}
    arg_shapes, out_shapes, aux_shapes = sym.infer_shape(**shapes)
    assert [list(s) for s in arg_shapes] == meta["arg_shapes"]
    assert [list(s) for s in out_shapes] == meta["out_shapes"]
    assert [list(s) for s in aux_shapes] == meta["aux_shapes"]
    arg_types, out_types, aux_types = sym.infer_type(**{k: "float32" for k in shapes})
    assert [t.__name__ for t in arg_types] == meta["arg_types"]
    assert [t.__name__ for t in out_types] == meta["out_types"]
    assert [t.__name__ for t in aux_types] == meta["aux_types"]


def test_legacy_08_json_is_upgraded_like_mxnet(caplog):
    with caplog.at_level("INFO"):
        sym = mx.sym.load(os.path.join(GOLDEN, "legacy_08.json"))
    assert "previous version v0.8.0" in caplog.text
    assert sym.tojson() == golden_text("legacy_08.upgraded.json")
    # the upgraded BatchNorm got its aux variables, named after the op and holding its attrs
    assert sym.list_auxiliary_states() == ["bn_moving_mean", "bn_moving_var"]
    assert sym.attr_dict()["fc1_weight"]["lr_mult"] == "0.2"
    assert sym.attr_dict()["fc1"]["__ctx_group__"] == "stage1"


def test_legacy_layouts_and_upgrades():
    doc = {
        "nodes": [
            {"op": "null", "name": "x", "inputs": []},
            {"op": "null", "name": "fc_weight", "inputs": []},
            {"op": "FullyConnected", "name": "fc", "inputs": [[0, 0], [1, 0]],
             "param": {"num_hidden": "3", "no_bias": "True"},
             "attr": {"weight_lr_mult": "0.5", "mirror_stage": "True"}},
            {"op": "argmax", "name": "am", "inputs": [[2, 0]], "attrs": {"axis": "-1"}},
        ],
        "arg_nodes": [0, 1],
        "heads": [[3, 0]],
        "attrs": {"mxnet_version": ["int", 900]},
    }
    sym = mx.sym.load_json(json.dumps(doc))
    attrs = sym.attr_dict()
    assert attrs["fc_weight"]["__lr_mult__"] == "0.5"      # moved onto the input variable
    assert attrs["fc"] == {"num_hidden": "3", "no_bias": "True", "__mirror_stage__": "True",
                           "mirror_stage": "True"}
    assert "am" not in attrs                                  # argmax axis=-1 dropped (< 0.9.5)
    assert sym.list_arguments() == ["x", "fc_weight"]
    again = json.loads(sym.tojson())
    assert again["attrs"] == {"mxnet_version": ["int", 10901]}
    assert again["nodes"][2]["inputs"] == [[0, 0, 0], [1, 0, 0]]


def test_json_errors():
    with pytest.raises(MXNetError, match="invalid symbol JSON"):
        mx.sym.load_json("{not json")
    with pytest.raises(MXNetError, match="NoSuchOp"):
        mx.sym.load_json(json.dumps({"nodes": [{"op": "NoSuchOp", "name": "a", "inputs": []}],
                                     "heads": [[0, 0, 0]]}))
    bad_attr = {"nodes": [{"op": "null", "name": "d", "inputs": []},
                          {"op": "Activation", "name": "act", "attrs": {"act_type": "nope"},
                           "inputs": [[0, 0, 0]]}],
                "heads": [[1, 0, 0]], "attrs": {"mxnet_version": ["int", 10901]}}
    with pytest.raises(MXNetError, match="act_type"):
        mx.sym.load_json(json.dumps(bad_attr))
    with pytest.raises(TypeError):
        mx.sym.load_json(b"{}")


@pytest.mark.parametrize("second", [
    {"op": "relu", "name": "r", "inputs": [[1, 0, 0]]},                      # itself
    {"op": "relu", "name": "r", "inputs": [[2, 0, 0]]},                      # a later node
    {"op": "relu", "name": "r", "inputs": [[0, 0, 0]], "control_deps": [1]},
    {"op": "relu", "name": "r", "inputs": [[0, 0, 0]], "control_deps": [9]},
])
def test_json_entries_must_name_earlier_nodes(second):
    """A graph whose node reads itself or a later node is a cycle (MXNet writes nodes in
    topological order): loading it raises, instead of a symbol without its arguments."""
    doc = {"nodes": [{"op": "null", "name": "x", "inputs": []}, second,
                     {"op": "relu", "name": "s", "inputs": [[1, 0, 0]]}],
           "arg_nodes": [0], "heads": [[1, 0, 0]]}
    with pytest.raises(MXNetError, match="refers to a node that is not defined before it"):
        mx.sym.load_json(json.dumps(doc))
    good = dict(doc, nodes=[doc["nodes"][0], {"op": "relu", "name": "r",
                                              "inputs": [[0, 0, 0]]}, doc["nodes"][2]])
    assert mx.sym.load_json(json.dumps(good)).list_arguments() == ["x"]


def test_json_formatting_rules():
    # more than 10 inputs and heads make those arrays multi-line, escaping follows dmlc
    xs = [mx.sym.var("x%d" % i) for i in range(11)]
    cat = mx.sym.Concat(*xs, name="cat")
    v = mx.sym.var('q"\\\t', attr={"note": "a\nb"})
    group = mx.sym.Group([cat] + xs + [v])
    text = group.tojson()
    parsed = json.loads(text)
    assert parsed["nodes"][-2]["inputs"] == [[i, 0, 0] for i in range(11)]
    assert '"inputs": [\n        [0, 0, 0], \n        [1, 0, 0]' in text
    assert '"heads": [\n    [11, 0, 0], \n' in text
    assert '"name": "q\\"\\\\\\t"' in text
    assert parsed["nodes"][-1]["attrs"] == {"note": "a\nb"}
    assert mx.sym.load_json(text).tojson() == text


# ---------------------------------------------------------------------------------------------
# naming
# ---------------------------------------------------------------------------------------------
def test_operator_overload_names_and_ops():
    a, b = mx.sym.var("a"), mx.sym.var("b")
    with mx.name.NameManager():
        cases = [(a + b, "_plus0", "elemwise_add", {}), (a - b, "_minus0", "elemwise_sub", {}),
                 (a * b, "_mul0", "elemwise_mul", {}), (a / b, "_div0", "elemwise_div", {}),
                 (a + 2, "_plusscalar0", "_plus_scalar", {"scalar": "2"}),
                 (2 + a, "_plusscalar1", "_plus_scalar", {"scalar": "2"}),
                 (2 - a, "_rminusscalar0", "_rminus_scalar", {"scalar": "2"}),
                 (a * 2.5, "_mulscalar0", "_mul_scalar", {"scalar": "2.5"}),
                 (-a, "_mulscalar1", "_mul_scalar", {"scalar": "-1.0"}),
                 (2 / a, "_rdivscalar0", "_rdiv_scalar", {"scalar": "2"}),
                 (a ** 2, "_powerscalar0", "_power_scalar", {"scalar": "2"}),
                 (2 ** a, "_rpower_scalar0", "_rpower_scalar", {"scalar": "2"}),
                 (a > b, "_greater0", "_greater", {}), (a <= 1, "_lesser_equal_scalar0",
                                                         "_lesser_equal_scalar", {"scalar": "1"}),
                 (mx.sym.maximum(a, 1), "_maximumscalar0", "_maximum_scalar", {"scalar": "1"}),
                 (mx.sym.pow(2, a), "_rpowerscalar0", "_rpower_scalar", {"scalar": "2"})]
    for sym, name, op, attrs in cases:
        assert sym.name == name
        assert sym.attr("op_name") == op
        assert sym.list_attr() == attrs
    with pytest.raises(TypeError):
        a + "x"
    with pytest.raises(mx.sym.NotImplementedForSymbol):
        bool(a)
    with pytest.raises(mx.sym.NotImplementedForSymbol):
        c = a
        c += 1
    assert mx.sym.maximum(2, 3) == 3


def test_name_manager_counters_prefix_and_threads():
    data = mx.sym.var("data")
    with mx.name.NameManager():
        fc_a = mx.sym.FullyConnected(data, num_hidden=2)
        fc_b = mx.sym.FullyConnected(data, num_hidden=2)
        act = mx.sym.Activation(fc_b, act_type="relu")
        with mx.name.NameManager():
            inner = mx.sym.FullyConnected(data, num_hidden=2)
        after = mx.sym.FullyConnected(data, num_hidden=2)
    assert [fc_a.name, fc_b.name, act.name, inner.name, after.name] == \
        ["fullyconnected0", "fullyconnected1", "activation0", "fullyconnected0",
         "fullyconnected2"]
    assert fc_a.list_arguments() == ["data", "fullyconnected0_weight", "fullyconnected0_bias"]
    with mx.name.Prefix("mynet_"):
        named = mx.sym.FullyConnected(data, num_hidden=10, name="fc1")
        auto = mx.sym.Flatten(data)
    assert named.list_arguments() == ["data", "mynet_fc1_weight", "mynet_fc1_bias"]
    assert auto.name == "mynet_flatten0"
    # the function name is the hint: aliases count separately
    with mx.name.NameManager():
        assert mx.sym.flatten(data).name == "flatten0"
        assert mx.sym.Flatten(data).name == "flatten1"
        assert mx.sym.Softmax(data).name == "softmax0"
        assert mx.sym.SoftmaxOutput(data).list_arguments() == ["data", "softmaxoutput0_label"]

    names = []

    def worker():
        with mx.name.NameManager():
            names.append(mx.sym.Activation(data, act_type="relu").name)
    with mx.name.NameManager():
        mx.sym.Activation(data, act_type="relu")
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert mx.sym.Activation(data, act_type="relu").name == "activation1"
    assert names == ["activation0"]


# ---------------------------------------------------------------------------------------------
# attributes
# ---------------------------------------------------------------------------------------------
def test_variable_attributes():
    init = mx.init.Xavier(magnitude=2.0)
    v = mx.sym.var("w", shape=(3, 0), lr_mult=0.5, wd_mult=0, dtype="float16", init=init,
                   stype="row_sparse", __layout__="NC", attr={"mood": "calm"})
    assert v.list_attr() == {"__shape__": "(3, 0)", "__lr_mult__": "0.5", "lr_mult": "0.5",
                             "__wd_mult__": "0", "wd_mult": "0", "__dtype__": "2",
                             "__init__": init.dumps(), "__storage_type__": "1",
                             "__layout__": "NC", "mood": "calm"}
    assert v.attr("lr_mult") == "0.5" and v.attr("__lr_mult__") == "0.5"
    assert v.attr("nonexistent") is None
    assert v.attr("name") == "w" and v.attr("op_name") == "null"
    assert mx.sym.var("s", init="zeros").attr("__init__") == "zeros"
    with pytest.raises(ValueError, match="double underscores"):
        mx.sym.var("x", layout="NC")
    with pytest.raises(ValueError, match="string"):
        mx.sym.var("x", attr={"n": 1})
    with pytest.raises(TypeError):
        mx.sym.var(3)


def test_attr_scope_and_hidden_keys():
    with mx.AttrScope(ctx_group="g1", lr_mult="3"):
        with mx.AttrScope(group="4"):
            d = mx.sym.var("data", attr={"group": "1"}, lr_mult=1)
            e = mx.sym.var("e")
            with pytest.raises(MXNetError, match="group"):
                mx.sym.FullyConnected(d, num_hidden=3)      # a plain attribute reaches the op
        with mx.AttrScope(__group__="5", wd_mult="0"):
            fc = mx.sym.FullyConnected(d, num_hidden=3, name="fc", lr_mult=2)
    assert d.attr("group") == "1" and d.attr("lr_mult") == "1" and d.attr("ctx_group") == "g1"
    assert e.list_attr() == {"group": "4", "__ctx_group__": "g1", "ctx_group": "g1",
                             "__lr_mult__": "3", "lr_mult": "3"}
    # scope attrs override operator keywords (as MXNet's generated functions do)
    expected = {"num_hidden": "3", "__group__": "5", "__lr_mult__": "3", "lr_mult": "3",
                "__ctx_group__": "g1", "ctx_group": "g1", "__wd_mult__": "0", "wd_mult": "0"}
    assert fc.list_attr() == expected
    attrs = fc.attr_dict()
    # auto-created inputs copy the operator's attributes (test_lr_wd_mult relies on it)
    assert attrs["fc_weight"] == expected and attrs["fc_bias"] == expected
    assert attrs["data"]["lr_mult"] == "1"
    with pytest.raises(ValueError):
        mx.AttrScope(x=1)
    with pytest.raises(MXNetError, match="weight_lr_mult"):
        mx.sym.FullyConnected(d, num_hidden=3, weight_lr_mult=0)
    with pytest.raises(MXNetError, match="group"):
        fc._set_attr(group="1")                   # not a FullyConnected parameter
    assert fc.attr("num_hidden") == "3"
    with pytest.raises(ValueError):
        fc._set_attr(lr_mult=1)
    fc._set_attr(lr_mult="7", __note__="x")
    assert fc.attr("__lr_mult__") == "7" and fc.attr("__note__") == "x"
    assert mx.sym.Group([d, e]).attr("lr_mult") is None
    assert mx.sym.Group([d, e]).list_attr() == d.list_attr()
    with pytest.raises(DeprecationWarning):
        d.list_attr(recursive=True)


def test_op_init_attrs_and_versions():
    data = mx.sym.var("data")
    bn = mx.sym.BatchNorm(data, moving_mean=mx.sym.var("mm", init="custom"), name="bn")
    bn2 = mx.sym.BatchNorm(bn, moving_mean=bn.get_internals()["mm"], name="bn2")
    attrs = bn2.attr_dict()
    assert attrs["mm"]["__init__"] == "custom"                 # an existing __init__ is kept
    assert attrs["bn_moving_var"]["__init__"] == '["one", {}]'
    assert attrs["bn2_moving_var"]["__init__"] == '["one", {}]'
    nodes = json.loads(bn2.tojson())["nodes"]
    assert nodes[5]["inputs"][3] == [3, 0, 1] and nodes[9]["inputs"][3] == [3, 0, 2]
    prelu = mx.sym.LeakyReLU(data, act_type="prelu", name="act")
    assert prelu.attr_dict()["act_gamma"]["__init__"] == '["Constant", {"value": 0.25}]'
    assert mx.sym.LeakyReLU(data, name="lk").list_arguments() == ["data"]
    with pytest.raises(MXNetError, match="Variable"):
        mx.sym.BatchNorm(data, moving_mean=data + 1)


# ---------------------------------------------------------------------------------------------
# generated functions
# ---------------------------------------------------------------------------------------------
def test_generated_function_arguments():
    data = mx.sym.var("data")
    drop = mx.sym.Dropout(data, 0.3)                     # positional parameter after inputs
    assert drop.list_attr() == {"p": "0.3"}
    fc = mx.sym.FullyConnected(data, None, None, 7, name="fc")
    assert fc.list_attr() == {"num_hidden": "7"}
    assert mx.sym.FullyConnected(data=data, num_hidden=4, no_bias=True, name="f") \
        .list_arguments() == ["data", "f_weight"]
    assert mx.sym.Cast(data, dtype=np.float16).list_attr() == {"dtype": "float16"}
    assert mx.sym.Pooling(data, kernel=(2, 2), p_value=None).list_attr() == \
        {"kernel": "(2, 2)", "p_value": "None"}
    assert mx.sym.Convolution(data, kernel=[3, 3], num_filter=2, no_bias=1).attr("kernel") \
        == "[3, 3]"
    assert mx.sym.Activation(data, act_type="relu", __layout__="NC").attr("__layout__") == "NC"
    w = mx.sym.var("w")
    with pytest.raises(AssertionError, match="weight must be Symbol"):
        mx.sym.FullyConnected(data, 10)
    with pytest.raises(MXNetError, match="bias not found"):
        mx.sym.FullyConnected(data, w, mx.sym.var("b"), num_hidden=4, no_bias=True)
    with pytest.raises(MXNetError, match="num_hidden"):
        mx.sym.FullyConnected(data)                       # required parameter missing
    with pytest.raises(MXNetError, match="act_type"):
        mx.sym.Activation(data, act_type="nope")
    with pytest.raises(MXNetError, match="unknown attribute 'bogus'"):
        mx.sym.Activation(data, act_type="relu", bogus=1)
    with pytest.raises(TypeError, match="multiple values"):
        mx.sym.Dropout(data, 0.3, p=0.4)
    sl = mx.sym.SliceChannel(data, num_outputs=2)
    with pytest.raises(MXNetError, match="single value"):
        mx.sym.Activation(sl, act_type="relu")


def test_variadic_and_namespaces():
    xs = [mx.sym.var("x%d" % i) for i in range(3)]
    cat = mx.sym.Concat(*xs, dim=0, name="cat")
    assert cat.list_attr() == {"dim": "0", "num_args": "3"}
    assert cat.list_arguments() == ["x0", "x1", "x2"]
    assert mx.sym.add_n(*xs).attr("num_args") == "3"
    with pytest.raises(AssertionError):
        mx.sym.Concat(xs[0], 3)
    assert mx.sym._internal._plus_scalar(xs[0], scalar=1).name.startswith("_plus_scalar")
    assert mx.sym._internal._PlusScalar(xs[0], scalar=1).name.startswith("_plusscalar")
    assert mx.sym.op.Activation is mx.sym.Activation
    with pytest.raises(AttributeError):
        mx.sym._plus_scalar
    with pytest.raises(AttributeError):
        mx.sym.no_such_operator
    assert "FullyConnected" in dir(mx.sym)
    z = mx.sym.zeros((2, 3))
    assert z.attr("op_name") == "_zeros" and z.list_attr() == {"shape": "(2, 3)",
                                                               "dtype": "float32"}
    assert mx.sym.ones((0, 3), dtype="float16").attr("dtype") == "float16"
    assert mx.sym.full((2,), 3).attr("value") == "3.0"


def test_fluent_methods():
    x = mx.sym.var("x")
    assert x.reshape(shape=(2, 3)).attr("op_name") == "Reshape"
    assert x.sum(axis=1).attr("op_name") == "sum"
    assert x.astype("float16").attr("dtype") == "float16"
    assert x.flatten().attr("op_name") == "Flatten"
    assert x.expand_dims(1).attr("axis") == "1"
    assert abs(x).attr("op_name") == "abs"
    assert x.exp().attr("op_name") == "exp"


# ---------------------------------------------------------------------------------------------
# structure: composition, outputs, internals, children, copy, pickle
# ---------------------------------------------------------------------------------------------
def _mlp2():
    data = mx.sym.var("data")
    net1 = mx.sym.FullyConnected(data, name="fc1", num_hidden=10)
    net1 = mx.sym.FullyConnected(net1, name="fc2", num_hidden=100)
    net2 = mx.sym.FullyConnected(mx.sym.var("fc3_data"), name="fc3", num_hidden=10)
    net2 = mx.sym.Activation(net2, act_type="relu")
    net2 = mx.sym.FullyConnected(net2, name="fc4", num_hidden=20)
    return net1, net2


def test_compose():
    net1, net2 = _mlp2()
    composed = net2(fc3_data=net1, name="composed")
    assert composed.name == "composed"
    assert net2.name == "fc4"                                   # the original is untouched
    assert composed.list_arguments() == net1.list_arguments() + net2.list_arguments()[1:]
    assert net2.list_arguments()[0] == "fc3_data"
    multi = mx.sym.Group([composed, net1])
    assert len(multi) == 2 and multi.list_outputs() == ["composed_output", "fc2_output"]
    with pytest.raises(MXNetError, match="foo not found"):
        net2(foo=net1)
    with pytest.raises(TypeError):
        net2(fc3_data=3)
    with pytest.raises(TypeError):
        net2(net1, fc3_data=net1)
    with pytest.raises(MXNetError, match="Variable"):
        mx.sym.var("v")(v=net1)
    with pytest.raises(TypeError):
        mx.sym.Group([net1, 3])


def test_outputs_internals_children():
    data = mx.sym.var("data")
    sl = mx.sym.SliceChannel(data, num_outputs=3, name="slice")
    assert len(sl) == 3 and sl.name == "slice" and repr(sl) == "<Symbol slice>"
    assert sl.list_outputs() == ["slice_output0", "slice_output1", "slice_output2"]
    assert sl[1].list_outputs() == ["slice_output1"]
    assert sl["slice_output2"].list_outputs() == ["slice_output2"]
    assert sl[-1].list_outputs() == ["slice_output2"]
    assert sl[0:2].list_outputs() == ["slice_output0", "slice_output1"]
    assert [s.list_outputs()[0] for s in sl] == sl.list_outputs()
    with pytest.raises(IndexError):
        sl[3]
    with pytest.raises(ValueError):
        sl["nope"]
    with pytest.raises(TypeError):
        sl[1.5]
    cat = mx.sym.Concat(*sl, name="cat")
    assert cat.get_children().list_outputs() == sl.list_outputs()
    assert data.get_children() is None
    assert sl.get_children().list_outputs() == ["data"]
    fc = mx.sym.FullyConnected(cat, num_hidden=3, name="fc1")
    internals = fc.get_internals()
    assert internals.list_outputs() == ["data", "slice_output0", "slice_output1",
                                        "slice_output2", "cat_output", "fc1_weight", "fc1_bias",
                                        "fc1_output"]
    assert internals["fc1_output"].tojson() == fc.tojson()
    group = mx.sym.Group([fc, data])
    assert group.name is None and repr(group) == "<Symbol group [fc1, data]>"
    bn = mx.sym.BatchNorm(data, output_mean_var=True, name="bn")
    assert bn.list_outputs() == ["bn_output", "bn_mean", "bn_var"]
    assert mx.sym.BatchNorm(data, name="b").list_outputs() == ["b_output"]
    assert mx.sym.MakeLoss(data, name="ml").list_outputs() == ["ml_output"]
    assert mx.sym.make_loss(data, name="ml").list_outputs() == ["ml_loss"]
    assert bn.list_auxiliary_states() == ["bn_moving_mean", "bn_moving_var"]
    assert bn.list_inputs() == ["data", "bn_gamma", "bn_beta", "bn_moving_mean",
                                "bn_moving_var"]


def test_copy_pickle_and_shared_nodes(tmp_path):
    net1, net2 = _mlp2()
    composed = net2(fc3_data=net1, name="composed")
    for clone in (composed.copy(), copy.copy(composed), copy.deepcopy(composed),
                  pickle.loads(pickle.dumps(composed))):
        assert clone.tojson() == composed.tojson()
    path = str(tmp_path / "net.json")
    composed.save(path)
    assert mx.sym.load(path).tojson() == composed.tojson()
    # _set_attr changes the shared node for every symbol containing it, not for copies
    clone = composed.copy()
    internals = composed.get_internals()
    internals["fc1_output"]._set_attr(__mood__="happy")
    assert composed.attr_dict()["fc1"]["__mood__"] == "happy"
    assert "__mood__" not in clone.attr_dict()["fc1"]
    with pytest.raises(TypeError):
        composed.save(3)


# ---------------------------------------------------------------------------------------------
# inference
# ---------------------------------------------------------------------------------------------
def test_infer_shape_partial_and_unknown():
    data = mx.sym.var("data")
    conv = mx.sym.Convolution(data, kernel=(7, 7), num_filter=64, name="conv")
    fc = mx.sym.FullyConnected(mx.sym.Flatten(conv), num_hidden=10, name="fc")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fc.infer_shape() == (None, None, None)
    assert "Cannot decide shape" in str(caught[-1].message)
    arg_shapes, out_shapes, _ = fc.infer_shape_partial(data=(1, 0, 0, 0))
    names = fc.list_arguments()
    assert dict(zip(names, arg_shapes))["conv_weight"] == (64, 0, 7, 7)
    fc_weight = dict(zip(names, arg_shapes))["fc_weight"]
    assert fc_weight == () or 0 in fc_weight                  # unknown (MXNet says ())
    arg_shapes, out_shapes, aux_shapes = fc.infer_shape(data=(2, 3, 9, 9))
    assert dict(zip(names, arg_shapes))["fc_weight"] == (10, 64 * 3 * 3)
    assert out_shapes == [(2, 10)] and aux_shapes == []
    assert fc.infer_shape((2, 3, 9, 9)) == fc.infer_shape(data=(2, 3, 9, 9))
    with pytest.raises(MXNetError, match="foo not found"):
        fc.infer_shape(data=(2, 3, 9, 9), foo=(3,))
    with pytest.raises(TypeError):
        fc.infer_shape(data=[2, 3, 9, 9])
    with pytest.raises(ValueError):
        fc.infer_shape((2, 3, 9, 9), conv_weight=(64, 3, 7, 7))


def test_infer_shape_error_names_node_argument_and_shapes():
    data = mx.sym.var("data")
    fc = mx.sym.FullyConnected(data, num_hidden=3, name="fc1")
    with pytest.raises(MXNetError) as err:
        fc.infer_shape(data=(2, 4), fc1_weight=(3, 5))
    text = str(err.value)
    assert "fc1" in text and "FullyConnected" in text and "weight" in text
    assert "(3, 5)" in text and "(3, 4)" in text


def test_infer_shape_var_defaults_and_both_directions():
    a = mx.sym.var("a", shape=(0, 3))
    b = mx.sym.var("b", shape=(2, 0))
    c = a + b
    arg_shapes, out_shapes, _ = c.infer_shape()
    assert arg_shapes == [(2, 3), (2, 3)] and out_shapes == [(2, 3)]
    arg_shapes, _, _ = c.infer_shape(a=(5, 3), b=(5, 3))     # explicit shapes override
    assert arg_shapes == [(5, 3), (5, 3)]
    # the output shape flows back into an unknown input through FullyConnected and zeros
    x = mx.sym.var("x")
    z = mx.sym.zeros((0, 4))
    s = mx.sym.FullyConnected(x, num_hidden=4, name="fc") + z
    arg_shapes, out_shapes, _ = s.infer_shape(x=(6, 2))
    assert out_shapes == [(6, 4)]
    w = mx.sym.var("weight", shape=(128, 0))
    loaded = mx.sym.load_json(w.tojson())
    assert loaded.attr("__shape__") == "(128, 0)"


def test_infer_type():
    data = mx.sym.var("data")
    cast = mx.sym.Cast(data, dtype="float32")
    fc = mx.sym.FullyConnected(cast, num_hidden=3, name="fc")
    arg_types, out_types, aux_types = fc.infer_type(data="float16")
    assert arg_types == [np.float16, np.float32, np.float32]
    assert out_types == [np.float32] and aux_types == []
    plain = mx.sym.FullyConnected(data, num_hidden=3, name="fc")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert plain.infer_type() == (None, None, None)
    assert "Cannot decide type" in str(caught[-1].message)
    assert plain.infer_type_partial() == ([None, None, None], [None], [])
    assert mx.sym.var("v", dtype="float16").infer_type() == ([np.float16], [np.float16], [])
    with pytest.raises(MXNetError, match="float16"):
        (mx.sym.var("p") + mx.sym.var("q")).infer_type(p="float16", q="float32")


@settings(max_examples=15, deadline=None)
@given(batch=st.integers(1, 6), features=st.integers(1, 7), hidden=st.integers(1, 9))
def test_infer_shape_mlp_property(batch, features, hidden):
    data = mx.sym.var("data")
    fc = mx.sym.FullyConnected(data, num_hidden=hidden, name="fc")
    out = mx.sym.SoftmaxOutput(mx.sym.Activation(fc, act_type="relu"), name="sm")
    arg_shapes, out_shapes, _ = out.infer_shape(data=(batch, features))
    assert dict(zip(out.list_arguments(), arg_shapes)) == {
        "data": (batch, features), "fc_weight": (hidden, features), "fc_bias": (hidden,),
        "sm_label": (batch,)}
    assert out_shapes == [(batch, hidden)]


def test_debug_str():
    data = mx.sym.var("data")
    fc = mx.sym.FullyConnected(data * 2, num_hidden=10, name="fc")
    text = fc.debug_str()
    assert "Op:FullyConnected, Name=fc" in text and "num_hidden=10" in text
    assert "Variable:fc_weight" in text and "output[0]=fc(0)" in text


def test_set_attr_on_group_and_rename():
    a, b = mx.sym.var("a"), mx.sym.var("b")
    with pytest.raises(MXNetError, match="non-grouped"):
        mx.sym.Group([a, b])._set_attr(__x__="1")
    sl = mx.sym.SliceChannel(a, num_outputs=2, name="sl")
    sl._set_attr(__x__="1")                       # several outputs of one node are fine
    assert sl[1].attr("__x__") == "1"
    c = a + b
    c._set_attr(name="renamed")
    assert c.name == "renamed" and c.list_outputs() == ["renamed_output"]


def test_eval():
    a, b = mx.sym.var("a"), mx.sym.var("b")
    out = (a * b + 1).eval(ctx=mx.cpu(), a=mx.nd.array([1, 2]), b=mx.nd.array([3, 4]))
    np.testing.assert_allclose(out[0].asnumpy(), [4, 9])


def test_variable_int_shape_is_one_dimensional():
    """``shape=(1)`` is the int 1: MXNet reads it as a 1-D shape, and so does lightmod."""
    w = mx.sym.var("w", shape=(1))
    assert w.attr("__shape__") == "1"
    arg_shapes, out_shapes, _ = mx.sym.broadcast_add(mx.sym.var("x"), w).infer_shape(x=(2, 1))
    assert arg_shapes == [(2, 1), (1,)] and out_shapes == [(2, 1)]
