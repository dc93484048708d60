"""Sparse training on the Module path against MXNet 1.9.1
(tests/fixtures/make_sparse_module_golden.py): Embedding(sparse_grad=True) and
contrib.SparseEmbedding give row_sparse weight gradients, and SGD (momentum), Adam, AdaGrad and
FTRL update only the rows those gradients hold, through the kvstore or without one."""
import json
import os

import numpy as np
import pytest

import lightmod as mx

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
with open(os.path.join(HERE, "sparse_module_golden.json")) as _f:
    GOLDEN = json.load(_f)
ARRAYS = dict(np.load(os.path.join(HERE, "sparse_module_golden.npz")))


def initial_params():
    return {"embed_weight": (np.arange(24, dtype=np.float32).reshape(8, 3) * 0.05 - 0.4),
            "fc_weight": (np.arange(12, dtype=np.float32).reshape(2, 6) * 0.03 - 0.1),
            "fc_bias": np.array([0.1, -0.1], np.float32)}


def net(variant):
    data = mx.sym.var("data")
    if variant == "sparse_grad":
        embed = mx.sym.Embedding(data, input_dim=8, output_dim=3, sparse_grad=True, name="embed")
    else:
        stype = "row_sparse" if variant == "sparse_embedding_rsp_weight" else "default"
        weight = mx.sym.var("embed_weight", stype=stype)
        embed = mx.sym.contrib.SparseEmbedding(data, weight=weight, input_dim=8, output_dim=3,
                                               name="embed")
    fc = mx.sym.FullyConnected(mx.sym.flatten(embed), num_hidden=2, name="fc")
    return mx.sym.LinearRegressionOutput(fc, mx.sym.var("label"), name="out")


def train(case):
    n = case["contexts"]
    mod = mx.mod.Module(net(case["variant"]), data_names=["data"], label_names=["label"],
                        context=[mx.cpu(i) for i in range(n)])
    mod.bind(data_shapes=[("data", (4, 2))], label_shapes=[("label", (4, 2))])
    arg = {k: mx.nd.array(v) for k, v in initial_params().items()}
    if case["variant"] == "sparse_embedding_rsp_weight":
        arg["embed_weight"] = arg["embed_weight"].tostype("row_sparse")
    mod.init_params(arg_params=arg)
    mod.init_optimizer(kvstore=case["kvstore"], optimizer=case["optimizer"],
                       optimizer_params=dict(case["optimizer_params"], rescale_grad=0.25))
    stypes = []
    for data, label in zip(GOLDEN["batches"], GOLDEN["labels"]):
        mod.forward_backward(mx.io.DataBatch([mx.nd.array(data)], [mx.nd.array(label)]))
        group = mod._exec_group
        stypes.append(group.grad_arrays[group.param_names.index("embed_weight")][0].stype)
        mod.update()
    if case["variant"] == "sparse_embedding_rsp_weight" and mod._kvstore is not None:
        mod._kvstore.row_sparse_pull("embed_weight", mod._exec_group.param_arrays[0],
                                     row_ids=[mx.nd.arange(8, dtype="int64")] * n)
    arg_params, _ = mod.get_params()
    return {k: v.asnumpy() for k, v in arg_params.items()}, stypes


@pytest.mark.parametrize("case", GOLDEN["cases"],
                         ids=["%(optimizer)s-%(variant)s-%(contexts)d-%(kvstore)s" % c
                              for c in GOLDEN["cases"]])
def test_sparse_module_training_matches_mxnet(case):
    params, stypes = train(case)
    assert stypes == [case["grad_stype"]] * 3
    for name, value in params.items():
        np.testing.assert_allclose(value, ARRAYS["%d/%s" % (case["id"], name)], rtol=1e-5, atol=1e-6,
                                   err_msg="%s of case %s" % (name, case))


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "adagrad"])
def test_rows_without_gradient_stay_untouched(optimizer):
    """Rows 5..7 never occur in the batches: lazy updates leave them as initialised even with
    weight decay and momentum (a dense update would move them)."""
    case = next(c for c in GOLDEN["cases"] if c["optimizer"] == optimizer)
    params, _ = train(case)
    np.testing.assert_array_equal(params["embed_weight"][5:], initial_params()["embed_weight"][5:])


def test_dense_consumer_makes_the_gradient_dense():
    data = mx.sym.var("data")
    weight = mx.sym.var("embed_weight")
    embed = mx.sym.Embedding(data, weight=weight, input_dim=8, output_dim=3, sparse_grad=True)
    out = mx.sym.Group([embed, mx.sym.sum(weight)])
    ex = out.simple_bind(mx.cpu(), data=(4,), grad_req={"data": "null", "embed_weight": "write"})
    assert ex.grad_dict["embed_weight"].stype == "default"
    ex = embed.simple_bind(mx.cpu(), data=(4,), grad_req={"data": "null", "embed_weight": "write"})
    assert ex.grad_dict["embed_weight"].stype == "row_sparse"


@pytest.mark.parametrize("sparse", [True, False])
def test_sparse_embedding_executor_against_numpy(sparse):
    """MXNet's test_sparse_embedding shapes: in_dim 50, out_dim 3, batch 8."""
    rng = np.random.RandomState(0)
    data = mx.sym.var("data")
    if sparse:
        embed = mx.sym.contrib.SparseEmbedding(data, input_dim=50, output_dim=3, deterministic=True,
                                               name="embed")
    else:
        embed = mx.sym.Embedding(data, input_dim=50, output_dim=3, sparse_grad=True, name="embed")
    ex = embed.simple_bind(mx.cpu(), grad_req={"data": "null", "embed_weight": "write"}, data=(8,))
    ids = rng.randint(0, 50, size=8)
    onehot = np.zeros((8, 50), np.float32)
    onehot[np.arange(8), ids] = 1
    ex.arg_dict["data"][:] = ids
    weight = rng.uniform(-1, 1, (50, 3)).astype(np.float32)
    ex.arg_dict["embed_weight"][:] = weight
    head = rng.uniform(-1, 1, (8, 3)).astype(np.float32)
    ex.forward(is_train=True)
    np.testing.assert_allclose(ex.outputs[0].asnumpy(), onehot @ weight, atol=1e-6)
    ex.backward([mx.nd.array(head)])
    grad = ex.grad_dict["embed_weight"]
    assert grad.stype == "row_sparse"
    np.testing.assert_allclose(grad.asnumpy(), onehot.T @ head, atol=1e-6)
    assert sorted(grad.indices.asnumpy().tolist()) == sorted(set(ids.tolist()))
