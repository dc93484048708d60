"""The Module tests MXNet writes with ``mx.rnn`` cells: states, bucket switching, bucketing
checkpoints with BucketSentenceIter, executor-group sharing (smaller sizes than upstream)."""
import random

import numpy as np
import pytest
from fixtures.module_nets import same_array

import lightmod as mx
from lightmod.module.executor_group import DataParallelExecutorGroup


@pytest.fixture(autouse=True)
def _seed():
    mx.random.seed(0)
    np.random.seed(0)
    random.seed(0)


def lstm_stack(num_layers, num_hidden):
    stack = mx.rnn.SequentialRNNCell()
    for i in range(num_layers):
        stack.add(mx.rnn.LSTMCell(num_hidden=num_hidden, prefix="lstm_l%d_" % i))
    return stack


def lm_sym_gen(stack, vocab, num_embed, num_hidden, embed_name="embed"):
    def sym_gen(seq_len):
        data = mx.sym.Variable("data")
        label = mx.sym.Variable("softmax_label")
        if embed_name:
            embed = mx.sym.Embedding(data=data, input_dim=vocab, output_dim=num_embed,
                                     name=embed_name)
        else:
            embed = mx.sym.Embedding(data=data, input_dim=vocab, output_dim=num_embed)
        stack.reset()
        outputs, _ = stack.unroll(seq_len, inputs=embed, merge_outputs=True)
        pred = mx.sym.Reshape(outputs, shape=(-1, num_hidden))
        pred = mx.sym.FullyConnected(data=pred, num_hidden=vocab, name="pred")
        label = mx.sym.Reshape(label, shape=(-1,))
        pred = mx.sym.SoftmaxOutput(data=pred, label=label, name="softmax")
        return pred, ("data",), ("softmax_label",)
    return sym_gen


def test_set_states_reaches_every_device_and_changes_the_outputs():
    """States split over two devices: a constant fills each device's part, the state outputs
    can be set back as states, and the next pass then gives other outputs."""
    cells = lstm_stack(2, 20)
    begin = cells.begin_state(func=mx.sym.Variable)
    _, final = cells.unroll(10, begin_state=begin, inputs=mx.sym.Variable("data"))
    mod = mx.mod.Module(mx.sym.Group(final), context=[mx.cpu(0), mx.cpu(1)],
                        label_names=None, state_names=[state.name for state in begin])
    mod.bind(data_shapes=[("data", (5, 10))], label_shapes=None, for_training=False)
    mod.init_params()
    zeros = mx.io.DataBatch(data=[mx.nd.zeros((5, 10))], label=[])

    mod.set_states(value=1)
    states = mod.get_states(merge_multi_context=False)
    assert len(states) == 4
    # five samples over two equal work loads: two on the first device, three on the second
    assert all([s.shape for s in per_device] == [(2, 20), (3, 20)] for per_device in states)
    assert all(np.all(s.asnumpy() == 1) for per_device in states for s in per_device)

    mod.forward(zeros)
    before = [out.asnumpy() for out in mod.get_outputs()]
    mod.set_states(states=mod.get_outputs(merge_multi_context=False))
    mod.forward(zeros)
    after = [out.asnumpy() for out in mod.get_outputs()]
    assert all(not np.allclose(a, b, rtol=1e-3) for a, b in zip(before, after))


def test_module_switch_bucket_with_rnn_cells():
    vocab, batch_size, default_key, test_key = 50, 4, 10, 5
    stack = lstm_stack(2, 10)
    sym_gen = lm_sym_gen(stack, vocab, 10, 10, embed_name=None)
    model = mx.mod.BucketingModule(sym_gen=sym_gen, default_bucket_key=default_key,
                                   context=[mx.cpu(0)])
    model.bind([("data", (batch_size, default_key))],
               [("softmax_label", (batch_size, default_key))], True, False)
    model.init_params(initializer=mx.init.Xavier(factor_type="in", magnitude=2.34))
    assert model.symbol.list_arguments()[1] == "embedding0_weight"
    model.switch_bucket(test_key, [("data", (batch_size, test_key))],
                        [("softmax_label", (batch_size, test_key))])
    total_before = model._buckets[default_key]._total_exec_bytes
    del model._buckets[test_key]
    model.switch_bucket(test_key, [("data", (batch_size, test_key))],
                        [("softmax_label", (batch_size, test_key))])
    assert model._buckets[default_key]._total_exec_bytes == total_before


def bucketing_data(buckets, vocab, batch_size, invalid_label, num_sentence):
    def sentences():
        return [[random.randint(1, vocab) for _ in range(random.randint(6, max(buckets) - 1))]
                for _ in range(num_sentence)]
    train = mx.rnn.BucketSentenceIter(sentences(), batch_size, buckets=buckets,
                                      invalid_label=invalid_label)
    val = mx.rnn.BucketSentenceIter(sentences(), batch_size, buckets=buckets,
                                    invalid_label=invalid_label)
    return train, val


def test_bucketing_save_load_with_bucket_sentence_iter(tmp_path, monkeypatch):
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", "1")
    prefix = str(tmp_path / "test")
    batch_size, num_hidden, num_embed, vocab = 16, 8, 8, 50
    buckets, invalid_label = [5, 10, 20], -1
    train, val = bucketing_data(buckets, vocab, batch_size, invalid_label, 120)
    assert train.default_bucket_key == 20 and 5 not in train.buckets   # empty bucket dropped
    stack = lstm_stack(2, num_hidden)
    sym_gen = lm_sym_gen(stack, vocab, num_embed, num_hidden)
    fit_args = dict(eval_metric=mx.metric.Perplexity(invalid_label), kvstore="device",
                    optimizer="sgd",
                    optimizer_params={"learning_rate": 0.01, "momentum": 0, "wd": 0.00001},
                    initializer=mx.init.Xavier(factor_type="in", magnitude=2.34),
                    num_epoch=2, batch_end_callback=mx.callback.Speedometer(batch_size, 50))
    model = mx.mod.BucketingModule(sym_gen=sym_gen, default_bucket_key=train.default_bucket_key,
                                   context=mx.cpu())
    model.fit(train_data=train, eval_data=val, **fit_args)
    model.save_checkpoint(prefix, 0)

    mod2 = mx.mod.BucketingModule.load(prefix, 0, sym_gen=sym_gen,
                                       default_bucket_key=train.default_bucket_key)
    mod2.bind(data_shapes=train.provide_data, label_shapes=train.provide_label)
    a = model._buckets[model._default_bucket_key].get_params()[0]
    b = mod2._buckets[mod2._default_bucket_key].get_params()[0]
    assert set(a) == set(b)
    for k in a:
        np.testing.assert_array_equal(a[k].asnumpy(), b[k].asnumpy())
    mod2.fit(train_data=train, eval_data=val, **fit_args)


def test_executor_group_with_rnn_cells():
    def rnn_sym(num_layers, num_words=30, num_hidden=8, num_embed=6, seq_len=5):
        stack = lstm_stack(num_layers, num_hidden)
        data = mx.sym.Variable("data")
        label = mx.sym.Variable("softmax_label")
        embed = mx.sym.Embedding(data=data, input_dim=num_words, output_dim=num_embed,
                                 name="embed")
        stack.reset()
        outputs, _ = stack.unroll(seq_len, inputs=embed, merge_outputs=True)
        pred = mx.sym.Reshape(outputs, shape=(-1, num_hidden))
        pred = mx.sym.FullyConnected(data=pred, num_hidden=num_words, name="pred")
        label = mx.sym.Reshape(label, shape=(-1,))
        return mx.sym.SoftmaxOutput(data=pred, label=label, name="softmax")

    contexts = [mx.cpu(0), mx.cpu(1)]
    data_shapes = [("data", (8, 5))]
    label_shapes = [("softmax_label", (8, 5))]
    sym = rnn_sym(num_layers=2)
    input_names = ["data", "softmax_label"]
    shared_arg_names = [n for n in sym.list_arguments() if n not in input_names]
    group1 = DataParallelExecutorGroup(symbol=sym, contexts=contexts, workload=[1, 1],
                                       data_shapes=data_shapes, label_shapes=label_shapes,
                                       param_names=shared_arg_names, for_training=True,
                                       inputs_need_grad=False)
    for i in range(len(contexts)):
        assert sorted(group1.shared_data_arrays[i]) == sorted(input_names)
    sym = rnn_sym(num_layers=3)
    group2 = DataParallelExecutorGroup(symbol=sym, contexts=contexts, workload=[1, 1],
                                       data_shapes=data_shapes, label_shapes=label_shapes,
                                       param_names=shared_arg_names, for_training=True,
                                       inputs_need_grad=False, shared_group=group1)
    extra_args = [n for n in sym.list_arguments() if n not in shared_arg_names]
    for i in range(len(contexts)):
        assert sorted(group1.shared_data_arrays[i]) == sorted(extra_args)
        for name in shared_arg_names:
            assert same_array(group1.execs[i].arg_dict[name], group2.execs[i].arg_dict[name])
            assert same_array(group1.execs[i].grad_dict[name], group2.execs[i].grad_dict[name])
    assert all(group2.grad_req[k] == v for k, v in group1.grad_req.items())
