"""mx.contrib.amp: graph conversion against MXNet 1.9.1 (tests/fixtures/make_amp_golden.py),
float16 numbers against a numpy reference, and clear errors for what lightmod does not do."""
import json
import os

import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError
from lightmod.contrib import amp

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "amp_golden.json")) as _f:
    GOLDEN = json.load(_f)


def mlp():
    data = mx.sym.var("data")
    fc1 = mx.sym.FullyConnected(data, num_hidden=4, name="fc1")
    act = mx.sym.Activation(fc1, act_type="relu", name="relu1")
    fc2 = mx.sym.FullyConnected(act, num_hidden=3, name="fc2")
    add = mx.sym.elemwise_add(fc2, mx.sym.var("bias2"), name="add")
    return mx.sym.SoftmaxOutput(add, name="softmax"), {"data": (2, 5), "softmax_label": (2,)}


def convnet():
    data = mx.sym.var("data")
    conv = mx.sym.Convolution(data, kernel=(3, 3), num_filter=4, name="conv")
    bn = mx.sym.BatchNorm(conv, fix_gamma=False, name="bn")
    act = mx.sym.Activation(bn, act_type="relu", name="relu")
    pool = mx.sym.Pooling(act, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool")
    fc1 = mx.sym.FullyConnected(mx.sym.flatten(pool, name="flat"), num_hidden=6, name="fc1")
    soft = mx.sym.Activation(fc1, act_type="softrelu", name="softrelu")
    fc2 = mx.sym.FullyConnected(soft, num_hidden=3, name="fc2")
    return mx.sym.SoftmaxOutput(fc2, name="softmax"), {"data": (2, 2, 6, 6), "softmax_label": (2,)}


MODELS = {"mlp": mlp, "convnet": convnet}


def _params(name, sym):
    g = GOLDEN[name]
    shapes = dict(zip(sym.list_arguments(), sym.infer_shape(**MODELS[name]()[1])[0]))
    aux_shapes = dict(zip(sym.list_auxiliary_states(), sym.infer_shape(**MODELS[name]()[1])[2]))
    arg = {k: mx.nd.array(np.asarray(v, np.float32).reshape(shapes[k])) for k, v in g["arg"].items()}
    aux = {k: mx.nd.array(np.asarray(v, np.float32).reshape(aux_shapes[k])) for k, v in g["aux"].items()}
    return arg, aux


def _run(sym, shapes, arg, aux):
    ex = sym.simple_bind(mx.cpu(), grad_req="null", **shapes)
    for k, v in arg.items():
        ex.arg_dict[k][:] = v.astype(ex.arg_dict[k].dtype)
    for k, v in aux.items():
        ex.aux_dict[k][:] = v.astype(ex.aux_dict[k].dtype)
    ex.arg_dict["data"][:] = np.linspace(-1, 1, int(np.prod(shapes["data"]))).reshape(shapes["data"])
    ex.forward(is_train=False)
    return ex.outputs[0].asnumpy()


@pytest.mark.parametrize("cop", [False, True])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_convert_model_graph_matches_mxnet(name, cop):
    sym, shapes = MODELS[name]()
    arg, aux = _params(name, sym)
    new_sym, new_arg, new_aux = amp.convert_model(sym, arg, aux, cast_optional_params=cop)
    want = GOLDEN[name]["cast_optional_params=%s" % cop]
    plain = json.loads(new_sym.tojson())
    plain_names = [n["name"] for n in plain["nodes"]]
    assert [[n["op"], n["name"], [plain_names[i[0]] for i in n["inputs"]]] for n in plain["nodes"]] == \
        want["nodes_amp_cast_removed"]
    graph = json.loads(new_sym.tojson(remove_amp_cast=False))
    names = [n["name"] for n in graph["nodes"]]
    got = [[n["op"], n["name"], [names[i[0]] for i in n["inputs"]]] for n in graph["nodes"]]
    assert got == [[n[0], n[1], n[3]] for n in want["nodes"]]
    for node, wnode in zip(graph["nodes"], want["nodes"]):
        if node["op"] in ("null", "amp_cast"):
            assert node.get("attrs", {}).get("__dtype__") == wnode[2].get("__dtype__")
            assert node.get("attrs", {}).get("dtype") == wnode[2].get("dtype")
    assert {k: np.dtype(v.dtype).name for k, v in new_arg.items()} == want["arg_dtypes"]
    assert {k: np.dtype(v.dtype).name for k, v in new_aux.items()} == want["aux_dtypes"]
    out = _run(new_sym, shapes, new_arg, new_aux)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.ravel(), GOLDEN[name]["fp32_output"], atol=5e-3)


def test_converted_mlp_against_numpy_float16_reference():
    sym, shapes = mlp()
    arg, aux = _params("mlp", sym)
    a = {k: v.asnumpy() for k, v in arg.items()}
    new_sym, new_arg, _ = amp.convert_model(sym, dict(arg), {})
    out = _run(new_sym, shapes, new_arg, {})
    f16 = np.float16
    x = np.linspace(-1, 1, 10).reshape(2, 5).astype(np.float32)

    def fc(x16, w, b):      # float16 inputs, float32 arithmetic, result rounded to float16
        return (x16.astype(np.float32) @ w.astype(f16).astype(np.float32).T
                + b.astype(f16).astype(np.float32)).astype(f16)
    h = np.maximum(fc(x.astype(f16), a["fc1_weight"], a["fc1_bias"]), 0)
    z = fc(h, a["fc2_weight"], a["fc2_bias"]).astype(np.float32) + a["bias2"]
    want = np.exp(z - z.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    # within one float16 rounding of a logit (the bias may be added before or after rounding)
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-4)
    assert np.abs(out.ravel() - GOLDEN["mlp"]["fp32_output"]).max() > 1e-6   # float16 really used


def test_init_inserts_casts_and_nd_runs_float16(monkeypatch):
    monkeypatch.setattr(amp, "_initialized", False)
    for module in (mx.sym, mx.nd):
        for name in amp.list_lp16_ops("float16") + amp.list_fp32_ops("float16") + \
                amp.list_widest_type_cast("float16") + ["Activation", "LeakyReLU"]:
            fn = getattr(module, name, None)     # generated now, so monkeypatch restores it
            if fn is not None:
                monkeypatch.setattr(module, name, fn)
    amp.init()
    fc = mx.sym.FullyConnected(mx.sym.var("d"), num_hidden=2, name="fcx")
    sm = mx.sym.softmax(fc)
    nodes = json.loads(sm.tojson(remove_amp_cast=False))["nodes"]
    assert [(n["op"], n.get("attrs", {}).get("dtype")) for n in nodes] == [
        ("null", None), ("amp_cast", "float16"), ("null", None), ("amp_cast", "float16"),
        ("null", None), ("amp_cast", "float16"), ("FullyConnected", None), ("amp_cast", "float32"),
        ("softmax", None)]
    assert sm.infer_type(d="float32", fcx_weight="float32", fcx_bias="float32")[1] == [np.float32]
    ex = sm.simple_bind(mx.cpu(), d=(2, 3))
    assert ex.arg_dict["fcx_weight"].dtype == np.float32 and ex.outputs[0].dtype == np.float32
    y = mx.nd.FullyConnected(mx.nd.ones((2, 3)), mx.nd.ones((2, 3)), mx.nd.ones(2), num_hidden=2)
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y.asnumpy(), np.full((2, 2), 4, np.float16))
    assert mx.nd.softmax(y).dtype == np.float32


def test_unsupported_parts_raise_clear_errors():
    sym, _ = mlp()
    with pytest.raises(MXNetError, match="bfloat16 is not supported"):
        amp.convert_symbol(sym, target_dtype="bfloat16")
    with pytest.raises(MXNetError, match="bfloat16 is not supported"):
        amp.init(target_dtype="bfloat16")
    with pytest.raises(MXNetError, match="one list only"):
        amp.convert_symbol(sym, target_dtype_ops=["FullyConnected"], fp32_ops=["FullyConnected"])
    with pytest.raises(MXNetError, match="unknown operators"):
        amp.convert_symbol(sym, target_dtype_ops=["NoSuchOp"])
    with pytest.raises(MXNetError, match="must be a Symbol"):
        amp.convert_symbol("net")
    for fn, args in ((amp.init_trainer, (None,)), (amp.scale_loss, (None, None)), (amp.unscale, (None,)),
                     (amp.convert_hybrid_block, (None,)), (amp.convert_bucketing_module, (None,))):
        with pytest.raises(MXNetError, match="not supported by lightmod"):
            fn(*args)
    assert mx.contrib.amp is amp
