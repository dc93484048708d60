"""mx.executor_manager against MXNet 1.9.1 (tests/fixtures/make_executor_manager_golden.py)."""
import json
import os

import numpy as np
import pytest

import lightmod as mx
from lightmod import executor_manager as em
from lightmod.base import MXNetError

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures",
                       "executor_manager_golden.json")) as _f:
    GOLDEN = json.load(_f)


@pytest.mark.parametrize("case", GOLDEN["slices"], ids=lambda c: "%d-%s" % (c["batch"], c["loads"]))
def test_split_input_slice_matches_mxnet(case):
    if case["result"] == "ValueError":
        with pytest.raises(ValueError, match="Too many slices"):
            em._split_input_slice(case["batch"], case["loads"])
        return
    got = em._split_input_slice(case["batch"], case["loads"])
    assert [[s.start, s.stop] for s in got] == case["result"]


def _manager(**kwargs):
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=3, name="fc"),
                               name="softmax")
    it = mx.io.NDArrayIter(np.asarray(GOLDEN["x"], np.float32), np.asarray(GOLDEN["y"], np.float32),
                           batch_size=6)
    args = net.list_arguments()
    params = [a for a in args if a not in ("data", "softmax_label")]
    mgr = em.DataParallelExecutorManager(net, [mx.cpu(0), mx.cpu(1)], it, args, params,
                                         net.list_auxiliary_states(), **kwargs)
    return mgr, it


def test_manager_matches_mxnet():
    mgr, it = _manager(work_load_list=[1, 2])
    assert [[s.start, s.stop] for s in mgr.slices] == GOLDEN["slices_attr"]
    mgr.set_params({"fc_weight": mx.nd.array(GOLDEN["weight"]), "fc_bias": mx.nd.array([0.1, 0.0, -0.1])}, {})
    batch = next(iter(it))
    mgr.load_data_batch(batch)
    mgr.forward(is_train=True)
    mgr.backward()
    metric = mx.metric.Accuracy()
    mgr.update_metric(metric, batch.label)
    assert list(metric.get()) == GOLDEN["metric"]
    for ex, want in zip(mgr.curr_execgrp.execs, GOLDEN["outputs"]):
        np.testing.assert_allclose(ex.outputs[0].asnumpy(), want, rtol=1e-6, atol=1e-7)
    for block, want in zip(mgr.grad_arrays, GOLDEN["grads"]):
        for g, w in zip(block, want):
            np.testing.assert_allclose(g.asnumpy(), w, rtol=1e-5, atol=1e-7)
    mgr.param_arrays[0][1][:] = mgr.param_arrays[0][1] + 1.0
    out = {"fc_weight": mx.nd.zeros((3, 4)), "fc_bias": mx.nd.zeros(3)}
    mgr.copy_to(out, {})
    for k, v in out.items():
        np.testing.assert_allclose(v.asnumpy(), GOLDEN["copy_to"][k], rtol=1e-6)


def test_manager_errors():
    with pytest.raises(MXNetError, match="work_load_list"):
        _manager(work_load_list=[1])
    mgr, _ = _manager()
    with pytest.raises(MXNetError, match="load_data_batch"):
        mgr.forward()
    data, w = mx.sym.var("data"), mx.sym.var("w")
    shared = mx.sym.Group([mx.sym.FullyConnected(data, weight=w, num_hidden=2, no_bias=True, name="a"),
                           mx.sym.FullyConnected(data, weight=w, num_hidden=2, no_bias=True, name="b")])
    em._check_arguments(shared)      # one variable used twice is one argument
    with pytest.raises(ValueError, match="duplicated argument name"):
        em._check_arguments(mx.sym.Group([mx.sym.var("a") + mx.sym.var("b"), mx.sym.var("a", shape=(2,))]))


def test_load_general_checks_batch_size():
    src = [mx.nd.array(np.arange(6).reshape(3, 2))]
    dst = [[(slice(0, 1), mx.nd.zeros((1, 2))), (slice(1, 3), mx.nd.zeros((2, 2)))]]
    em._load_general(src, dst)
    np.testing.assert_array_equal(dst[0][1][1].asnumpy(), [[2, 3], [4, 5]])
    with pytest.raises(MXNetError, match="Batch size miss match"):
        em._load_general([mx.nd.zeros((4, 2))], dst)
    whole = mx.nd.zeros((3, 2))
    em._load_data(mx.io.DataBatch(src, []), [whole])
    np.testing.assert_array_equal(whole.asnumpy(), src[0].asnumpy())


def test_manager_buckets_share_parameters():
    def sym_gen(key):
        return mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=3, name="fc"),
                                    name="softmax")
    net = sym_gen(6)
    it = mx.io.NDArrayIter(np.asarray(GOLDEN["x"], np.float32), np.asarray(GOLDEN["y"], np.float32),
                           batch_size=6)
    it.default_bucket_key = 6
    args = net.list_arguments()
    mgr = em.DataParallelExecutorManager(net, [mx.cpu(0), mx.cpu(1)], it, args, ["fc_weight", "fc_bias"],
                                         [], sym_gen=sym_gen)
    mgr.set_params({"fc_weight": mx.nd.array(GOLDEN["weight"]), "fc_bias": mx.nd.array([0.1, 0.0, -0.1])}, {})
    batch = next(iter(it))
    outputs = []
    for key in (6, 7):
        batch.bucket_key = key
        mgr.load_data_batch(batch)
        mgr.forward(is_train=False)
        outputs.append([ex.outputs[0].asnumpy() for ex in mgr.curr_execgrp.execs])
    assert set(mgr.execgrp_bucket) == {6, 7}
    assert mgr.execgrp_bucket[7].execs[0].arg_dict["fc_weight"] is mgr.execgrp.execs[0].arg_dict["fc_weight"]
    for a, b in zip(*outputs):
        np.testing.assert_array_equal(a, b)
