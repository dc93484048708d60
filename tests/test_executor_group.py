"""DataParallelExecutorGroup: shared groups, grad_req forms, slicing, merging, params."""
import numpy as np
import pytest
from fixtures.module_nets import hand_lstm, same_array

import lightmod as mx
from lightmod import nd
from lightmod.module.executor_group import DataParallelExecutorGroup, _prepare_group2ctxs, _split_input_slice


def lstm_net(num_layers, num_words=20, num_hidden=6, num_embed=5, seq_len=4):
    data = mx.sym.Variable("data")
    label = mx.sym.Variable("softmax_label")
    layer_in = mx.sym.Embedding(data=data, input_dim=num_words, output_dim=num_embed,
                                name="embed")
    for i in range(num_layers):
        outputs, _, _ = hand_lstm(num_hidden, seq_len, "lstm_l%d_" % i, layer_in)
        layer_in = mx.sym.Concat(*[mx.sym.expand_dims(o, axis=1) for o in outputs], dim=1)
    pred = mx.sym.Reshape(layer_in, shape=(-1, num_hidden))
    pred = mx.sym.FullyConnected(data=pred, num_hidden=num_words, name="pred")
    label = mx.sym.Reshape(label, shape=(-1,))
    return mx.sym.SoftmaxOutput(data=pred, label=label, name="softmax")


def test_executor_group_shared_group():
    contexts = [mx.cpu(0), mx.cpu(1)]
    data_shapes = [("data", (6, 4))]
    label_shapes = [("softmax_label", (6, 4))]
    sym1 = lstm_net(num_layers=2)
    input_names = ["data", "softmax_label"]
    shared_arg_names = [n for n in sym1.list_arguments() if n not in input_names]
    group1 = DataParallelExecutorGroup(symbol=sym1, contexts=contexts, workload=[1, 1],
                                       data_shapes=data_shapes, label_shapes=label_shapes,
                                       param_names=shared_arg_names, for_training=True,
                                       inputs_need_grad=False)
    # the pools hold only the non-parameter inputs
    for i in range(len(contexts)):
        assert sorted(group1.shared_data_arrays[i]) == sorted(input_names)

    sym2 = lstm_net(num_layers=3)
    group2 = DataParallelExecutorGroup(symbol=sym2, contexts=contexts, workload=[1, 1],
                                       data_shapes=data_shapes, label_shapes=label_shapes,
                                       param_names=shared_arg_names, for_training=True,
                                       inputs_need_grad=False, shared_group=group1)
    extra_args = [n for n in sym2.list_arguments() if n not in shared_arg_names]
    for i in range(len(contexts)):
        pool1, pool2 = group1.shared_data_arrays[i], group2.shared_data_arrays[i]
        assert pool1 is pool2
        assert sorted(pool1) == sorted(extra_args)
        e1, e2 = group1.execs[i], group2.execs[i]
        for name in shared_arg_names:
            assert same_array(e1.arg_dict[name], e2.arg_dict[name]), name
            assert same_array(e1.grad_dict[name], e2.grad_dict[name]), name
        for name in input_names:
            assert same_array(pool1[name], e2.arg_dict[name])
    for name, req in group1.grad_req.items():
        assert group2.grad_req[name] == req


def small_net():
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=3, name="fc")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def make_group(grad_req="write", for_training=True, inputs_need_grad=False, fixed=None,
               contexts=(mx.cpu(0),), batch=4, workload=None):
    contexts = list(contexts)
    return DataParallelExecutorGroup(
        small_net(), contexts, workload or [1] * len(contexts), [("data", (batch, 2))],
        [("softmax_label", (batch,))], ["fc_weight", "fc_bias"], for_training,
        inputs_need_grad, fixed_param_names=fixed, grad_req=grad_req)


def test_grad_req_forms():
    g = make_group("add")
    assert g.grad_req == {"data": "null", "fc_weight": "add", "fc_bias": "add",
                          "softmax_label": "null"}
    g = make_group("write", inputs_need_grad=True, fixed=["fc_bias"])
    assert g.grad_req == {"data": "write", "fc_weight": "write", "fc_bias": "null",
                          "softmax_label": "null"}
    assert g.grad_arrays[1][0] is None       # fixed params have no gradient array
    g = make_group({"fc_bias": "add"})
    assert g.grad_req == {"data": "null", "fc_weight": "write", "fc_bias": "add",
                          "softmax_label": "null"}
    g = make_group(["null", "add", "write", "null"])
    assert g.grad_req == {"data": "null", "fc_weight": "add", "fc_bias": "write",
                          "softmax_label": "null"}
    g = make_group("write", for_training=False)
    assert set(g.grad_req.values()) == {"null"} and g.grad_arrays is None
    with pytest.raises(ValueError):
        make_group(["write"])
    with pytest.raises(ValueError):
        make_group(3)


def test_slices_layouts_and_output_shapes():
    g = make_group(contexts=[mx.cpu(0), mx.cpu(1), mx.cpu(2)], batch=5)
    assert [(s.start, s.stop) for s in g.slices] == [(0, 2), (2, 4), (4, 5)]
    assert g.batch_size == 5
    assert [e.arg_dict["data"].shape for e in g.execs] == [(2, 2), (2, 2), (1, 2)]
    assert g.get_output_shapes() == [("softmax_output", (5, 3))]
    assert g.data_layouts == [0] and g.label_layouts == [0] and g.output_layouts == [0]
    with pytest.raises(ValueError, match="Too many slices"):
        make_group(contexts=[mx.cpu(0), mx.cpu(1)], batch=1)


def test_forward_merge_and_params_average():
    ctxs = [mx.cpu(0), mx.cpu(1)]
    g = make_group(contexts=ctxs, batch=4)
    w = np.arange(6, dtype=np.float32).reshape(3, 2) / 10
    g.set_params({"fc_weight": nd.array(w), "fc_bias": nd.zeros((3,))}, {})
    x = np.random.RandomState(0).uniform(-1, 1, (4, 2)).astype(np.float32)
    g.forward(mx.io.DataBatch([nd.array(x)], [nd.array([0, 1, 2, 0])]), is_train=False)
    logits = x @ w.T
    expected = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    np.testing.assert_allclose(g.get_outputs()[0].asnumpy(), expected, rtol=1e-5)
    per_dev = g.get_outputs(merge_multi_context=False)
    assert [o.shape for o in per_dev[0]] == [(2, 3), (2, 3)]

    # get_params writes the average over devices into the given dicts, in place
    g.param_arrays[0][0][:] = 1.0
    g.param_arrays[0][1][:] = 3.0
    dest = {"fc_weight": nd.zeros((3, 2)), "fc_bias": nd.zeros((3,))}
    target = dest["fc_weight"]
    g.get_params(dest, {})
    assert dest["fc_weight"] is target
    np.testing.assert_array_equal(target.asnumpy(), np.full((3, 2), 2.0))


def test_update_metric_per_device_and_states_errors():
    g = make_group(contexts=[mx.cpu(0), mx.cpu(1)], batch=4)
    g.forward(mx.io.DataBatch([nd.ones((4, 2))], [nd.array([0, 1, 2, 0])]), is_train=False)
    metric = mx.metric.Accuracy()
    g.update_metric(metric, [nd.array([0, 1, 2, 0])], pre_sliced=False)
    assert metric.num_inst == 4
    with pytest.raises(mx.base.MXNetError):
        g.get_states(merge_multi_context=True)
    assert g.get_states(merge_multi_context=False) == []


def test_backward_needs_training_binding():
    g = make_group(for_training=False)
    g.forward(mx.io.DataBatch([nd.ones((4, 2))], [nd.ones((4,))]))
    with pytest.raises(mx.base.MXNetError):
        g.backward()


def test_reshape_reuses_parameter_arrays():
    g = make_group(contexts=[mx.cpu(0), mx.cpu(1)], batch=4)
    params_before = [list(p) for p in g.param_arrays]
    grads_before = [list(p) for p in g.grad_arrays]
    g.reshape([mx.io.DataDesc("data", (6, 2))], [mx.io.DataDesc("softmax_label", (6,))])
    assert g.batch_size == 6 and [e.arg_dict["data"].shape for e in g.execs] == [(3, 2)] * 2
    for old, new in zip(params_before + grads_before, g.param_arrays + g.grad_arrays):
        assert all(same_array(a, b) for a, b in zip(old, new))
    same = g.execs
    g.reshape(g.data_shapes, g.label_shapes)        # identical shapes: nothing happens
    assert g.execs is same


def test_prepare_group2ctxs():
    c = [mx.cpu(i) for i in range(6)]
    assert _prepare_group2ctxs(None, 2) == [None, None]
    assert _prepare_group2ctxs({"a": c[1]}, 2) == [{"a": c[1]}, {"a": c[1]}]
    assert _prepare_group2ctxs({"a": [c[1]]}, 2) == [{"a": c[1]}, {"a": c[1]}]
    assert _prepare_group2ctxs({"a": [c[1], c[2]]}, 2) == [{"a": c[1]}, {"a": c[2]}]
    assert _prepare_group2ctxs([{"a": c[3]}, {"a": c[4]}], 2) == [{"a": c[3]}, {"a": c[4]}]
    with pytest.raises(ValueError):
        _prepare_group2ctxs({"a": [c[1], c[2], c[3]]}, 2)
    with pytest.raises(ValueError):
        _prepare_group2ctxs([{"a": c[3]}], 2)
    with pytest.raises(TypeError):
        _prepare_group2ctxs("a", 2)


def test_mismatched_batch_sizes_rejected():
    with pytest.raises(mx.base.MXNetError, match="same batch size"):
        DataParallelExecutorGroup(small_net(), [mx.cpu(0)], [1], [("data", (4, 2))],
                                  [("softmax_label", (5,))], ["fc_weight", "fc_bias"], True,
                                  False)


def test_split_is_banker_rounding():
    assert [(s.start, s.stop) for s in _split_input_slice(5, [1, 1])] == [(0, 2), (2, 5)]
