"""SVMOutput and argmax_channel against MXNet 1.9.1 (tests/fixtures/make_compat_ops_golden.py)
and a numpy reference."""
import json
import os

import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures",
                       "compat_ops_golden.json")) as _f:
    GOLDEN = json.load(_f)


def _numpy_svm_grad(x, label, margin, reg, linear):
    rows = x.reshape(-1, x.shape[-1]).astype(np.float64)
    onehot = np.eye(rows.shape[1], dtype=bool)[label.reshape(-1).astype(int)]
    if linear:
        g = np.where(onehot, -1.0 * (margin > rows) * reg, 1.0 * (margin > -rows) * reg)
    else:
        g = np.where(onehot, -2 * reg * np.maximum(margin - rows, 0),
                     2 * reg * np.maximum(margin + rows, 0))
    return g.reshape(x.shape)


def _bind(case, req, grad_init):
    shape = tuple(case["shape"])
    data = mx.nd.array(np.asarray(case["data"], np.float32).reshape(shape))
    label = mx.nd.array(np.asarray(case["label"], np.float32).reshape(shape[:-1]))
    sym = mx.sym.SVMOutput(mx.sym.var("data"), mx.sym.var("label"), margin=case["margin"],
                           regularization_coefficient=case["reg"], use_linear=case["linear"])
    grad = mx.nd.array(grad_init)
    ex = sym.bind(mx.cpu(), {"data": data, "label": label}, args_grad={"data": grad},
                  grad_req={"data": req, "label": "null"})
    ex.forward(is_train=True)
    ex.backward()
    return ex, grad


@pytest.mark.parametrize("i", range(len(GOLDEN["svm"])))
def test_svm_output_matches_mxnet(i):
    case = GOLDEN["svm"][i]
    shape = tuple(case["shape"])
    ex, grad = _bind(case, "write", np.ones(shape))
    np.testing.assert_array_equal(ex.outputs[0].asnumpy().ravel(), np.asarray(case["output"], np.float32))
    np.testing.assert_allclose(grad.asnumpy().ravel(), case["grad_write"], rtol=1e-6, atol=1e-6)
    x = np.asarray(case["data"], np.float32).reshape(shape)
    want = _numpy_svm_grad(x, np.asarray(case["label"]), case["margin"], case["reg"], case["linear"])
    np.testing.assert_allclose(grad.asnumpy(), want, rtol=1e-6, atol=1e-6)
    # 'add' accumulates in lightmod (MXNet 1.9.1 overwrites: see the operator's docstring)
    start = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    _, added = _bind(case, "add", start)
    np.testing.assert_allclose(added.asnumpy().ravel(), start.ravel() + np.asarray(case["grad_write"]),
                               rtol=1e-6, atol=1e-5)


def test_svm_output_shapes_and_errors():
    sym = mx.sym.SVMOutput(mx.sym.var("data"), name="svm")
    assert sym.list_arguments() == ["data", "svm_label"]
    assert sym.infer_shape(data=(5, 4))[0] == [(5, 4), (5,)]
    assert sym.infer_shape(data=(3, 2, 6))[0] == [(3, 2, 6), (3, 2)]
    with pytest.raises(MXNetError, match="SVMOutput.*label has shape \\(4,\\), expected \\(5,\\)"):
        sym.infer_shape(data=(5, 4), svm_label=(4,))
    with pytest.raises(MXNetError, match="SVMOutput.*at least 2 dimensions"):
        sym.infer_shape(data=(5,))
    with pytest.raises(MXNetError, match="margin"):
        mx.sym.SVMOutput(mx.sym.var("data"), margin="wide")


def test_svm_output_trains_a_module():
    rng = np.random.RandomState(0)
    x = rng.randn(200, 4).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.float32)
    net = mx.sym.SVMOutput(mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=2), name="svm")
    it = mx.io.NDArrayIter(x, y, batch_size=20, label_name="svm_label")
    mod = mx.mod.Module(net, label_names=["svm_label"])
    mod.fit(it, num_epoch=10, optimizer_params={"learning_rate": 0.01})
    assert mod.score(it, "acc")[0][1] > 0.9


@pytest.mark.parametrize("i", range(len(GOLDEN["argmax_channel"])))
def test_argmax_channel_matches_mxnet(i):
    case = GOLDEN["argmax_channel"][i]
    x = mx.nd.array(np.asarray(case["x"], np.float32).reshape(case["shape"]))
    if case["out"] == "error":
        with pytest.raises(MXNetError, match="argmax_channel.*at least 2 dimensions"):
            mx.nd.argmax_channel(x)
        return
    y = mx.nd.argmax_channel(x)
    assert list(y.shape) == case["out_shape"] and y.dtype == np.float32
    np.testing.assert_array_equal(y.asnumpy().ravel(), case["out"])
    np.testing.assert_array_equal(y.asnumpy(), np.argmax(x.asnumpy(), axis=1))
    _, out_shapes, _ = mx.sym.argmax_channel(mx.sym.var("x")).infer_shape(x=tuple(case["shape"]))
    assert list(out_shapes[0]) == case["sym_shape"]


@pytest.mark.parametrize("i", range(len(GOLDEN["sparse_adagrad"])))
def test_sparse_adagrad_update_matches_mxnet(i):
    """epsilon inside the square root: with a zero history and tiny gradients the two placements
    differ by orders of magnitude."""
    case = GOLDEN["sparse_adagrad"][i]
    arr = {k: np.asarray(case[k], np.float32).reshape(5, 3) for k in ("w", "g", "h", "w_out", "h_out")}
    weight, history = mx.nd.array(arr["w"]), mx.nd.array(arr["h"])
    mx.nd.sparse.adagrad_update(weight, mx.nd.array(arr["g"]).tostype("row_sparse"), history, out=weight,
                                lr=0.1, epsilon=1e-7, rescale_grad=0.5, wd=0.0)
    np.testing.assert_allclose(weight.asnumpy(), arr["w_out"], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(history.asnumpy(), arr["h_out"], rtol=1e-6, atol=1e-12)
    opt = mx.optimizer.AdaGrad(learning_rate=0.1, rescale_grad=0.5)
    weight, history = mx.nd.array(arr["w"]), mx.nd.array(arr["h"])
    opt.update(0, weight, mx.nd.array(arr["g"]).tostype("row_sparse"), history)
    np.testing.assert_allclose(weight.asnumpy(), arr["w_out"], rtol=1e-6, atol=1e-7)
