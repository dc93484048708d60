"""Storage-type inference against MXNet 1.9.1: for each operator and combination of input
storage types in tests/fixtures/sparse_stype_golden.json (written by
make_sparse_stype_golden.py with MXNet itself), lightmod's result has the storage type and the
values MXNet's has, or lightmod raises MXNetError where MXNet refuses the combination; both
through ``nd`` calls and through a bound executor."""
import json
import os

import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError
from lightmod.operator import registry, storage

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "fixtures", "sparse_stype_golden.json")) as _fh:
    GOLDEN = json.load(_fh)
ARRAYS = {k: np.array(v, dtype=np.float32) for k, v in GOLDEN["arrays"].items()}


def _deviation(case):
    """Why lightmod deliberately differs from MXNet on this case (None: it must not)."""
    stypes = [s for _, s in case["inputs"]]
    if case["op"] == "_square_sum" and stypes[0] != "row_sparse":
        return "lightmod sums dense and csr input too (MXNet has no kernel for them)"
    if case["op"] == "retain" and stypes[0] == "default":
        return "lightmod retains rows of a dense array too (MXNet refuses it)"
    return None


def _case_id(case):
    args = ",".join(s for _, s in case["inputs"])
    kwargs = ",".join("%s=%s" % kv for kv in sorted(case["kwargs"].items()))
    return "%s-%s(%s)%s" % (case["kind"], case["op"], args, "[%s]" % kwargs if kwargs else "")


# MXNet's nd namespace has no _copy (an AttributeError there says nothing about storage)
CASES = [c for c in GOLDEN["cases"] if c.get("error") != "AttributeError"]


def _input(name, stype):
    arr = mx.nd.array(ARRAYS[name])
    return arr.tostype(stype) if stype != "default" else arr


def _resolve(ns):
    obj = mx
    for part in ns.split("."):
        obj = getattr(obj, part)
    return obj


def _run(case):
    fn = getattr(_resolve(case["ns"]), case["op"])
    if case["kind"] == "nd":
        out = fn(*[_input(n, s) for n, s in case["inputs"]], **case["kwargs"])
        return out[0] if isinstance(out, (list, tuple)) else out
    names = ["in%d" % i for i in range(len(case["inputs"]))]
    values = {n: _input(a, s) for n, (a, s) in zip(names, case["inputs"])}
    sym = fn(*[mx.sym.var(n, stype=s) for n, (_, s) in zip(names, case["inputs"])],
             **case["kwargs"])
    exe = sym.bind(mx.cpu(), args={n: values[n] for n in sym.list_arguments()},
                   aux_states={n: values[n] for n in sym.list_auxiliary_states()})
    exe.forward(is_train=False)
    return exe.outputs[0]


def test_golden_file_covers_the_rules():
    assert GOLDEN["mxnet"] == "1.9.1"
    ops = {c["op"] for c in CASES}
    assert len(CASES) > 400
    assert {"_equal_scalar", "elemwise_mul", "dot", "_square_sum", "BatchNorm",
            "_scatter_elemwise_div", "retain", "take", "slice"} <= ops
    assert {c["stype"] for c in CASES if "stype" in c} == {"default", "row_sparse", "csr"}


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_output_stype_and_values_match_mxnet(case):
    reason = _deviation(case)
    if "error" in case and reason is None:
        with pytest.raises(MXNetError):
            _run(case)
        return
    out = _run(case)
    if reason is not None:
        # the documented extension: a result, computed as for a sparse input
        assert "error" in case, reason
        return
    assert out.stype == case["stype"], (out.stype, case["stype"])
    assert type(out).__name__ == {"default": "NDArray", "csr": "CSRNDArray",
                                  "row_sparse": "RowSparseNDArray"}[out.stype]
    np.testing.assert_allclose(out.asnumpy(), np.array(case["value"]), rtol=1e-5, atol=1e-6,
                               equal_nan=True)


def test_deviations_compute_the_dense_answer():
    a = ARRAYS["A"]
    out = mx.nd._internal._square_sum(mx.nd.array(a), axis=1, keepdims=True)
    assert out.stype == "default"
    np.testing.assert_allclose(out.asnumpy(), np.sum(a * a, axis=1, keepdims=True), rtol=1e-6)
    kept = mx.nd.sparse.retain(mx.nd.array(a), mx.nd.array([2, 0]))
    assert kept.stype == "row_sparse"
    expected = np.zeros_like(a)
    expected[[0, 2]] = a[[0, 2]]
    np.testing.assert_array_equal(kept.asnumpy(), expected)


def test_an_unlisted_operator_gives_default_outputs():
    exp = registry.get("exp")
    assert storage.output_stypes(exp, exp.parse({}), ["csr"]) == ["default"]
    topk = registry.get("topk")
    p = topk.parse({"ret_typ": "both"})
    assert storage.output_stypes(topk, p, ["row_sparse"]) == ["default", "default"]


def test_refusals_name_the_operator_and_the_reason():
    clip = registry.get("clip")
    with pytest.raises(MXNetError, match="a_min <= 0 <= a_max"):
        storage.output_stypes(clip, clip.parse({"a_min": 0.5, "a_max": 1}), ["csr"])
    div = registry.get("broadcast_div")
    with pytest.raises(MXNetError, match="use elemwise_div"):
        storage.output_stypes(div, div.parse({}), ["csr", "default"], [(2, 3), (2, 3)])
    assert storage.output_stypes(div, div.parse({}), ["csr", "default"],
                                 [(2, 3), (1, 3)]) == ["csr"]
    data = mx.sym.var("data", stype="row_sparse")
    net = mx.sym.BatchNorm(mx.sym.relu(data), fix_gamma=True, name="bn7")
    values = [mx.nd.ones((2, 3)).tostype("row_sparse")] + [mx.nd.ones((3,))] * 2
    with pytest.raises(MXNetError, match="Error in operator bn7: .*fix_gamma=True"):
        net.bind(mx.cpu(), args=values, aux_states=[mx.nd.zeros((3,)), mx.nd.ones((3,))])


def test_executor_labels_intermediate_results_and_gradients_stay_dense_backed():
    # square of csr stays csr, times a dense array stays csr, a sum makes it dense
    x = mx.sym.var("x", stype="csr")
    w = mx.sym.var("w")
    prod = mx.sym.elemwise_mul(mx.sym.square(x), w)
    net = mx.sym.Group([prod, mx.sym.sum(prod, axis=1)])
    xv = ARRAYS["A"]
    wv = ARRAYS["P"]
    exe = net.bind(mx.cpu(), args={"x": mx.nd.array(xv).tostype("csr"), "w": mx.nd.array(wv)},
                   args_grad={"w": mx.nd.zeros(wv.shape)})
    exe.forward(is_train=True)
    assert [o.stype for o in exe.outputs] == ["csr", "default"]
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), xv * xv * wv, rtol=1e-6)
    np.testing.assert_array_equal(exe.outputs[0].indices.asnumpy(), np.nonzero(xv)[1])
    exe.backward([mx.nd.ones(xv.shape), mx.nd.ones((4,))])
    np.testing.assert_allclose(exe.grad_dict["w"].asnumpy(), 2 * xv * xv, rtol=1e-6)
