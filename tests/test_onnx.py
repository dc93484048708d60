"""mx.onnx / mx.contrib.onnx on whole networks: LeNet, an MLP, a ResNet block and LSTM / GRU
language models checked against ONNX Runtime at two batch sizes with dynamic=True, MXNet
1.9.1's own export of the same checkpoints (tests/fixtures/make_onnx_golden.py), loss heads,
the importer, the CLI, and the errors."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from onnx_helpers import assert_close, check_export, onnx, ort_run, random_params

import lightmod as mx
from lightmod.base import MXNetError

S = mx.sym
GOLDEN = os.path.join(os.path.dirname(__file__), "fixtures", "onnx_golden")


def lenet():
    data = S.Variable("data")
    x = S.Convolution(data, kernel=(5, 5), num_filter=20, name="conv1")
    x = S.Activation(x, act_type="tanh")
    x = S.Pooling(x, pool_type="max", kernel=(2, 2), stride=(2, 2))
    x = S.Convolution(x, kernel=(5, 5), num_filter=50, name="conv2")
    x = S.Activation(x, act_type="tanh")
    x = S.Pooling(x, pool_type="max", kernel=(2, 2), stride=(2, 2))
    x = S.Flatten(x)
    x = S.FullyConnected(x, num_hidden=500, name="fc1")
    x = S.Activation(x, act_type="tanh")
    x = S.FullyConnected(x, num_hidden=10, name="fc2")
    return S.SoftmaxOutput(x, name="softmax"), (1, 28, 28)


def mlp():
    data = S.Variable("data")
    x = S.FullyConnected(data, num_hidden=128, name="fc1")
    x = S.Activation(x, act_type="relu")
    x = S.Dropout(x, p=0.2)
    x = S.FullyConnected(x, num_hidden=64, name="fc2")
    x = S.Activation(x, act_type="relu")
    x = S.FullyConnected(x, num_hidden=10, name="fc3")
    return S.SoftmaxOutput(x, name="softmax"), (64,)


def resnet_block():
    data = S.Variable("data")
    x = S.Convolution(data, kernel=(3, 3), stride=(2, 2), pad=(1, 1), num_filter=16,
                      no_bias=True, name="conv1")
    x = S.BatchNorm(x, fix_gamma=False, eps=2e-5, name="bn1")
    x = S.Activation(x, act_type="relu")
    x = S.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=16, no_bias=True, name="conv2")
    x = S.BatchNorm(x, fix_gamma=False, eps=2e-5, name="bn2")
    shortcut = S.Convolution(data, kernel=(1, 1), stride=(2, 2), num_filter=16, no_bias=True,
                             name="proj")
    shortcut = S.BatchNorm(shortcut, fix_gamma=False, eps=2e-5, name="bn_proj")
    x = S.Activation(x + shortcut, act_type="relu")
    x = S.Pooling(x, global_pool=True, kernel=(7, 7), pool_type="avg")
    x = S.Flatten(x)
    x = S.FullyConnected(x, num_hidden=10, name="fc")
    return S.SoftmaxOutput(x, name="softmax"), (8, 12, 12)


def rnn_lm(mode, vocab=30, embed=8, hidden=12, layers=2):
    data = S.Variable("data")
    x = S.Embedding(data, input_dim=vocab, output_dim=embed, name="embed")
    x = S.RNN(x, state_size=hidden, num_layers=layers, mode=mode, name="rnn")
    x = S.Reshape(x, shape=(-1, hidden))
    x = S.FullyConnected(x, num_hidden=vocab, name="pred")
    label = S.Reshape(S.Variable("softmax_label"), shape=(-1,))
    return S.SoftmaxOutput(x, label, name="softmax")


@pytest.mark.parametrize("opset", [12, 13])
@pytest.mark.parametrize("net", [lenet, mlp, resnet_block])
def test_feedforward_networks_match_onnx_runtime(net, opset, tmp_path):
    sym, sample = net()
    rng = np.random.RandomState(0)
    feeds = [{"data": rng.uniform(-1, 1, (n,) + sample).astype(np.float32)} for n in (2, 5)]
    path = check_export(sym, feeds, tmp_path, opset=opset, name=net.__name__)
    graph = onnx.load(str(path)).graph
    # the SoftmaxOutput label is not an input of the exported model, and the batch is open
    assert [i.name for i in graph.input] == ["data"]
    assert not graph.input[0].type.tensor_type.shape.dim[0].HasField("dim_value")


@pytest.mark.parametrize("opset", [12, 13])
@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_rnn_language_model_matches_onnx_runtime(mode, opset, tmp_path):
    sym = rnn_lm(mode)
    rng = np.random.RandomState(1)

    def feeds(batch, seq=6):
        f = {"data": rng.randint(0, 30, (seq, batch)).astype(np.float32),
             "rnn_state": rng.uniform(-1, 1, (2, batch, 12)).astype(np.float32)}
        if mode == "lstm":
            f["rnn_state_cell"] = rng.uniform(-1, 1, (2, batch, 12)).astype(np.float32)
        return f

    path = check_export(sym, [feeds(3), feeds(7, seq=4)], tmp_path, opset=opset, name=mode,
                        label_shapes=lambda f: {"softmax_label": f["data"].shape})
    ops = [n.op_type for n in onnx.load(str(path)).graph.node]
    assert ops.count(mode.upper()) == 2          # one ONNX LSTM / GRU node per layer


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_fused_rnn_cell_language_model(mode, tmp_path):
    """The Module-era form: mx.rnn.FusedRNNCell unrolled over batch-major (NTC) data, whose
    begin states are zeros of an inferred batch size (exported as ONNX's default zero state)."""
    cell = mx.rnn.FusedRNNCell(10, num_layers=2, mode=mode, prefix="rnn_")
    data = S.Variable("data")
    embed = S.Embedding(data, input_dim=25, output_dim=7, name="embed")
    with pytest.warns(UserWarning, match="NTC"):
        out, _ = cell.unroll(6, inputs=embed, merge_outputs=True, layout="NTC")
    pred = S.FullyConnected(S.Reshape(out, shape=(-1, 10)), num_hidden=25, name="pred")
    sym = S.SoftmaxOutput(pred, name="softmax")
    rng = np.random.RandomState(8)
    feeds = [{"data": rng.randint(0, 25, (n, 6)).astype(np.float32)} for n in (2, 5)]
    path = check_export(sym, feeds, tmp_path, name="fused_" + mode)
    graph = onnx.load(str(path)).graph
    assert [i.name for i in graph.input] == ["data"]
    assert all(len(n.input) <= 5 or not any(n.input[5:]) for n in graph.node
               if n.op_type == mode.upper())


def test_constant_with_inferred_dims_is_refused_when_dynamic(tmp_path):
    data = S.Variable("data")
    sym = data + S.zeros(shape=(0, 3))          # the 0 dim is inferred from data's batch
    path = str(tmp_path / "z.onnx")
    x = np.ones((2, 3), np.float32)
    mx.onnx.export_model(sym, {}, [(2, 3)], onnx_file_path=path)
    assert_close(ort_run(path, {"data": x})[0], x, "static export")
    with pytest.raises(MXNetError, match="begin state of a fused RNN"):
        mx.onnx.export_model(sym, {}, [(2, 3)], onnx_file_path=path, dynamic=True)


def _golden(name):
    with np.load(os.path.join(GOLDEN, name + ".npz")) as f:
        return {k: f[k] for k in f.files}


@pytest.mark.parametrize("name", ["convnet", "lstm_lm", "gru_lm"])
def test_mxnet_checkpoint_exports_like_mxnet(name, tmp_path):
    """lightmod's export of an MXNet 1.9.1 checkpoint and MXNet 1.9.1's own export of it give
    the same ONNX Runtime outputs (and both equal MXNet's forward)."""
    arrays = _golden(name)
    feeds = {k[3:]: v for k, v in arrays.items() if k.startswith("in/")}
    with open(os.path.join(GOLDEN, "meta.json")) as handle:
        order = list(json.load(handle)["models"][name]["inputs"])
    prefix = os.path.join(GOLDEN, name)
    path = mx.onnx.export_model(prefix + "-symbol.json", prefix + "-0000.params",
                                [feeds[n].shape for n in order], np.float32,
                                str(tmp_path / "lightmod.onnx"), dynamic=True)
    onnx.checker.check_model(onnx.load(path), full_check=True)
    ours = ort_run(path, feeds)
    theirs = ort_run(os.path.join(GOLDEN, name + ".mxnet.onnx"), feeds)
    assert len(ours) == len(theirs) == 1
    assert_close(ours[0], theirs[0], "lightmod's file vs MXNet's file, same runtime")
    assert_close(ours[0], arrays["ort/0"], "lightmod's file vs MXNet's file in onnxruntime 1.19")
    assert_close(ours[0], arrays["mxnet/0"], "lightmod's file vs MXNet's forward")


def test_softmax_output_checkpoint_exports_its_inference_form(tmp_path):
    """MXNet's exporter fails on a SoftmaxOutput head; lightmod exports the probabilities."""
    arrays = _golden("mlp_head")
    prefix = os.path.join(GOLDEN, "mlp_head")
    path = mx.onnx.export_model(prefix + "-symbol.json", prefix + "-0000.params",
                                [arrays["in/data"].shape], onnx_file_path=str(tmp_path / "m.onnx"))
    graph = onnx.load(path).graph
    assert [i.name for i in graph.input] == ["data"]
    assert_close(ort_run(path, {"data": arrays["in/data"]})[0], arrays["mxnet/0"],
                 "SoftmaxOutput head vs MXNet's forward")


@pytest.mark.parametrize("head,expected", [
    (S.LinearRegressionOutput, lambda z: z),
    (S.LogisticRegressionOutput, lambda z: 1 / (1 + np.exp(-z))),
    (S.SoftmaxOutput, lambda z: np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)),
])
def test_loss_heads_export_without_their_label(head, expected, tmp_path):
    data = S.Variable("data")
    fc = S.FullyConnected(data, num_hidden=3, name="fc")
    sym = head(fc, name="out")
    args, aux = random_params(sym, {"data": (4, 5)}, seed=3)
    prefix = str(tmp_path / "ckpt")
    mx.model.save_checkpoint(prefix, 7, sym, args, aux)
    # in_shapes may also give the label's shape, as the checkpoint's inputs list it
    path = mx.onnx.export_model(prefix + "-symbol.json", prefix + "-0007.params",
                                [(4, 5), (4, 3) if head is not S.SoftmaxOutput else (4,)],
                                onnx_file_path=str(tmp_path / "m.onnx"))
    assert [i.name for i in onnx.load(path).graph.input] == ["data"]
    x = np.random.RandomState(4).uniform(-1, 1, (4, 5)).astype(np.float32)
    z = x @ args["fc_weight"].asnumpy().T + args["fc_bias"].asnumpy()
    assert_close(ort_run(path, {"data": x})[0], expected(z), "%s head" % head.__name__)


def test_parameter_forms_and_static_shapes(tmp_path):
    sym, sample = mlp()
    args, aux = random_params(sym, {"data": (2,) + sample})
    x = np.random.RandomState(5).uniform(-1, 1, (2,) + sample).astype(np.float32)
    prefixed = {"arg:" + k: v for k, v in args.items()}
    outputs = []
    for params in (prefixed, [args, aux], dict(args)):
        path = mx.onnx.export_model(sym, params, [x.shape], onnx_file_path=str(tmp_path / "s.onnx"))
        outputs.append(ort_run(path, {"data": x})[0])
    assert_close(outputs[0], outputs[1], "arg: prefixed dict vs [arg, aux]")
    assert_close(outputs[0], outputs[2], "plain dict vs [arg, aux]")
    # without dynamic=True the batch size is fixed in the file
    dims = onnx.load(path).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in dims] == [2, 64]
    with pytest.raises(Exception):  # noqa: B017 - ONNX Runtime's own error class, any version
        ort_run(path, {"data": np.zeros((3, 64), np.float32)})


def test_dynamic_input_shapes_and_shape_inference(tmp_path):
    sym, sample = resnet_block()
    args, aux = random_params(sym, {"data": (2,) + sample})
    path = mx.onnx.export_model(sym, [args, aux], in_shapes=[(2,) + sample],
                                onnx_file_path=str(tmp_path / "d.onnx"), dynamic=True,
                                dynamic_input_shapes=[(None,) + sample],
                                run_shape_inference=True)
    model = onnx.load(path)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert not dims[0].HasField("dim_value") and [d.dim_value for d in dims[1:]] == list(sample)
    assert len(model.graph.value_info) > 0            # ONNX shape inference annotated it
    # the old keyword names input_shape / input_type still work
    path2 = mx.onnx.export_model(sym, [args, aux], input_shape=[(2,) + sample],
                                 input_type=np.float32, onnx_file_path=str(tmp_path / "o.onnx"))
    x = np.ones((2,) + sample, np.float32)
    assert_close(ort_run(path, {"data": x})[0], ort_run(path2, {"data": x})[0], "old names")


def test_import_model_and_metadata(tmp_path):
    sym, sample = lenet()
    args, aux = random_params(sym, {"data": (2,) + sample})
    path = mx.onnx.export_model(sym, [args, aux], [(2,) + sample],
                                onnx_file_path=str(tmp_path / "l.onnx"), dynamic=True,
                                dynamic_input_shapes=[(None,) + sample])
    meta = mx.contrib.onnx.get_model_metadata(path)
    assert meta["input_tensor_data"] == [("data", (None, 1, 28, 28))]
    assert [n for n, _ in meta["output_tensor_data"]] == ["softmax"]
    sym2, args2, aux2 = mx.contrib.onnx.import_model(path)
    assert sorted(args2) == sorted(args) and aux2 == {}
    # the imported model trains and predicts in a Module like any lightmod model
    mod = mx.mod.Module(sym2, data_names=["data"], label_names=None)
    mod.bind(data_shapes=[("data", (3,) + sample)], for_training=False)
    mod.set_params(args2, aux2)
    x = np.random.RandomState(6).uniform(-1, 1, (3,) + sample).astype(np.float32)
    mod.forward(mx.io.DataBatch([mx.nd.array(x)]), is_train=False)
    assert_close(mod.get_outputs()[0].asnumpy(), ort_run(path, {"data": x})[0], "Module")


def test_contrib_names_are_the_same_functions():
    import lightmod.contrib.onnx as contrib_onnx
    assert contrib_onnx.export_model is mx.onnx.export_model
    assert mx.contrib.onnx.import_model is mx.onnx.import_model
    assert "RNN" in mx.onnx.get_operator_support()


def test_import_lightmod_does_not_import_onnx():
    code = "import sys, lightmod; print('onnx' in sys.modules, 'lightmod.onnx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_missing_onnx_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)
    sym, _ = mlp()
    with pytest.raises(MXNetError, match=r"lightmod\[onnx\]"):
        mx.onnx.export_model(sym, {}, [(1, 64)])
    with pytest.raises(MXNetError, match=r"lightmod\[onnx\]"):
        mx.contrib.onnx.import_model("model.onnx")
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    from lightmod.onnx._deps import require_onnxruntime
    with pytest.raises(MXNetError, match=r"onnxruntime.*lightmod\[onnx\]"):
        require_onnxruntime()


def test_untranslated_operator_names_itself_and_the_supported_list(tmp_path):
    data = S.Variable("data")
    sym = S.topk(S.FullyConnected(data, num_hidden=4, name="fc"), k=2, name="best")
    args, aux = random_params(sym, {"data": (2, 3)})
    with pytest.raises(MXNetError) as err:
        mx.onnx.export_model(sym, args, [(2, 3)], onnx_file_path=str(tmp_path / "x.onnx"))
    message = str(err.value)
    assert "'topk'" in message and "'best'" in message and "FullyConnected" in message


@pytest.mark.parametrize("call,match", [
    (lambda s, a, p: mx.onnx.export_model(s, a, None, onnx_file_path=p), "in_shapes is required"),
    (lambda s, a, p: mx.onnx.export_model(s, a, [(1, 64), (1,), (1, 3)], onnx_file_path=p),
     "in_shapes has 3 shapes"),
    (lambda s, a, p: mx.onnx.export_model(s, a, [(None, 64)], onnx_file_path=p),
     "tuples of ints"),
    (lambda s, a, p: mx.onnx.export_model(s, a, [(1, 64)], onnx_file_path=p, opset_version=11),
     "opset_version must be one of"),
    (lambda s, a, p: mx.onnx.export_model(s, 42, [(1, 64)], onnx_file_path=p),
     "params must be a dict"),
    (lambda s, a, p: mx.onnx.export_model(42, a, [(1, 64)], onnx_file_path=p),
     "sym must be a Symbol"),
    (lambda s, a, p: mx.onnx.export_model(s, a, [(1, 64)], [np.float32] * 2, onnx_file_path=p),
     "2 in_types given for 1 inputs"),
    (lambda s, a, p: mx.onnx.export_model(s, a, [(1, 64)], onnx_file_path=p,
                                          dynamic_input_shapes=[(None, 64)]),
     "dynamic_input_shapes needs dynamic=True"),
])
def test_bad_arguments(call, match, tmp_path):
    sym, sample = mlp()
    args, _ = random_params(sym, {"data": (1,) + sample})
    with pytest.raises(MXNetError, match=match):
        call(sym, args, str(tmp_path / "x.onnx"))


def test_untranslatable_attributes_name_the_node(tmp_path):
    data = S.Variable("data")
    cases = [S.Reshape(data, shape=(-1, 2), reverse=True, name="rev"),
             S.Pooling(data, kernel=(2,), pool_type="max", pooling_convention="same", name="same"),
             S.Deconvolution(data, kernel=(2,), num_filter=2, target_shape=(5,), name="target"),
             S.Dropout(data, mode="always", name="always"),
             S.BatchNorm(data, output_mean_var=True, name="stats")[0]]
    for sym, name in zip(cases, ["rev", "same", "target", "always", "stats"]):
        args, aux = random_params(sym, {"data": (2, 4, 4)})
        with pytest.raises(MXNetError, match="node '%s'" % name):
            mx.onnx.export_model(sym, [args, aux], [(2, 4, 4)],
                                 onnx_file_path=str(tmp_path / "x.onnx"))


def test_translation_table_is_checked_against_the_registry():
    from lightmod.onnx._table import TRANSLATIONS, translates
    from lightmod.operator import registry
    for name in TRANSLATIONS:
        assert registry.get(name).name == name        # canonical registry names only
    before = dict(TRANSLATIONS)
    with pytest.raises(MXNetError, match="no operator named 'FullyConected'"):
        translates("FullyConected")(lambda g, node: [])
    with pytest.raises(MXNetError, match="'flatten' is an alias of 'Flatten'"):
        translates("flatten")(lambda g, node: [])
    with pytest.raises(MXNetError, match="declared twice"):
        translates("Flatten")(lambda g, node: [])
    assert TRANSLATIONS == before
    # aliases reach the canonical entry through the registry
    from lightmod.onnx._table import lookup
    assert lookup("flatten") is TRANSLATIONS["Flatten"] and lookup("_Plus") is not None


def _onnx_model(nodes, inputs, outputs, initializers=()):
    helper = onnx.helper
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_import_errors_name_the_node(tmp_path):
    helper, F = onnx.helper, onnx.TensorProto.FLOAT
    x = helper.make_tensor_value_info("x", F, [2, 3])
    y = helper.make_tensor_value_info("y", F, [2, 3])
    path = str(tmp_path / "erf.onnx")
    onnx.save(_onnx_model([helper.make_node("Erf", ["x"], ["y"], name="my_erf")], [x], [y]), path)
    with pytest.raises(MXNetError, match="Erf.*'my_erf'.*Conv"):
        mx.contrib.onnx.import_model(path)
    # a Reshape whose target shape is computed at run time
    shape = helper.make_tensor_value_info("s", onnx.TensorProto.INT64, [2])
    onnx.save(_onnx_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="dyn")],
                          [x, shape], [y]), path)
    with pytest.raises(MXNetError, match="Reshape node 'dyn'.*must be a constant"):
        mx.contrib.onnx.import_model(path)
    # MXNet's -4 code splits one dim in two: the exporter builds that target at run time, and
    # the importer cannot map it back onto reshape codes
    sym = S.Reshape(S.Variable("data"), shape=(0, -4, 2, -1, 0), name="split")
    mx.onnx.export_model(sym, {}, [(2, 6, 2)], onnx_file_path=path, dynamic=True)
    with pytest.raises(MXNetError, match="Reshape node 'split'.*cannot express"):
        mx.contrib.onnx.import_model(path)
    with pytest.raises(MXNetError, match="cannot read"):
        mx.contrib.onnx.import_model(str(tmp_path / "missing.onnx"))


def test_cli_export_onnx(tmp_path):
    prefix = os.path.join(GOLDEN, "convnet")
    out = tmp_path / "cli.onnx"
    proc = subprocess.run([sys.executable, "-m", "lightmod.cli", "export-onnx", prefix, "0",
                           "--shape", "data=3,3,8,8", "-o", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "largest difference" in proc.stdout
    diff = float(proc.stdout.split("largest difference ONNX Runtime vs lightmod ")[1].split()[0])
    assert diff < 1e-5
    onnx.checker.check_model(onnx.load(str(out)))
    bad = subprocess.run([sys.executable, "-m", "lightmod.cli", "export-onnx", prefix, "0",
                          "--shape", "image=3,3,8,8", "-o", str(out)],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "image" in bad.stderr
