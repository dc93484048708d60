"""mx.rnn with the Module layer: a BucketingModule over BucketSentenceIter batches and
stacked LSTM cells, the way MXNet's test_bucketing_save_load uses them."""
import random

import numpy as np

import lightmod as mx


def test_bucketing_module_trains_on_the_iterator():
    """The test_bucketing_save_load shape of use: Embedding + stacked LSTM unroll per bucket."""
    random.seed(1)
    np.random.seed(1)
    mx.random.seed(1)
    vocab, hidden = 20, 8
    rng = np.random.RandomState(0)
    # learnable sentences: consecutive tokens, so each next token is predictable
    sentences = []
    for _ in range(40):
        start, length = rng.randint(0, vocab), rng.randint(2, 9)
        sentences.append([(start + j) % vocab for j in range(length)])
    it = mx.rnn.BucketSentenceIter(sentences, 4, buckets=[4, 8, 12], invalid_label=-1)
    assert it.buckets == [4, 8] and it.default_bucket_key == 8

    def sym_gen(seq_len):
        data = mx.sym.Variable("data")
        label = mx.sym.Variable("softmax_label")
        embed = mx.sym.Embedding(data=data, input_dim=vocab, output_dim=hidden, name="embed")
        stack = mx.rnn.SequentialRNNCell()
        for i in range(2):
            stack.add(mx.rnn.LSTMCell(num_hidden=hidden, prefix="lstm_l%d_" % i))
        outputs, _ = stack.unroll(seq_len, inputs=embed, merge_outputs=True)
        pred = mx.sym.Reshape(outputs, shape=(-1, hidden))
        pred = mx.sym.FullyConnected(data=pred, num_hidden=vocab, name="pred")
        label = mx.sym.Reshape(label, shape=(-1,))
        pred = mx.sym.SoftmaxOutput(data=pred, label=label, name="softmax")
        return pred, ("data",), ("softmax_label",)

    mod = mx.mod.BucketingModule(sym_gen=sym_gen, default_bucket_key=it.default_bucket_key,
                                 context=mx.cpu())
    metric = mx.metric.Perplexity(-1)
    mod.bind(it.provide_data, it.provide_label)
    mod.init_params(initializer=mx.init.Xavier())
    mod.score(it, metric)
    before = metric.get()[1]
    it.reset()
    metric.reset()
    mod.fit(it, num_epoch=10, eval_metric=metric, optimizer="adam",
            optimizer_params={"learning_rate": 0.02})
    first = dict(mod.get_params()[0])
    assert set(first) >= {"embed_weight", "lstm_l0_i2h_weight", "lstm_l1_h2h_bias",
                          "pred_weight"}
    it.reset()
    metric.reset()
    mod.score(it, metric)
    after = metric.get()[1]
    assert np.isfinite(after) and after < 0.7 * before


def _lstm_sym_gen(vocab, hidden, layers=2, ctx_groups=False, embed_name=None):
    def sym_gen(seq_len):
        with mx.AttrScope(ctx_group="stage1") if ctx_groups else _nothing():
            data = mx.sym.Variable("data")
            label = mx.sym.Variable("softmax_label")
            embed = mx.sym.Embedding(data=data, input_dim=vocab, output_dim=hidden,
                                     name=embed_name)
            stack = mx.rnn.SequentialRNNCell()
            for i in range(layers):
                stack.add(mx.rnn.LSTMCell(num_hidden=hidden, prefix="lstm_l%d_" % i))
            outputs, _ = stack.unroll(seq_len, inputs=embed, merge_outputs=True)
        with mx.AttrScope(ctx_group="stage2") if ctx_groups else _nothing():
            pred = mx.sym.Reshape(outputs, shape=(-1, hidden))
            pred = mx.sym.FullyConnected(data=pred, num_hidden=vocab, name="pred")
            label = mx.sym.Reshape(label, shape=(-1,))
            pred = mx.sym.SoftmaxOutput(data=pred, label=label, name="softmax")
        return pred, ("data",), ("softmax_label",)
    return sym_gen


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _lstm_state_module(steps, contexts):
    """A Module whose outputs are the final states of a 2-layer LSTM unrolled ``steps`` times;
    its begin states are inputs set with set_states."""
    cells = mx.rnn.SequentialRNNCell()
    for layer in range(2):
        cells.add(mx.rnn.LSTMCell(num_hidden=6, prefix="lstm_l%d_" % layer))
    begin = cells.begin_state(func=mx.sym.Variable)
    _, final = cells.unroll(steps, begin_state=begin, inputs=mx.sym.Variable("data"))
    return mx.mod.Module(mx.sym.Group(final), context=contexts, label_names=None,
                         state_names=[state.name for state in begin])


def test_states_fed_back_continue_the_sequence():
    """Two 4-step passes, the first pass's final states set as the second pass's begin
    states, end in the same states as one 8-step pass from zero states."""
    x = np.random.RandomState(3).uniform(-1, 1, (4, 8, 3)).astype(np.float32)
    whole = _lstm_state_module(8, [mx.cpu(0)])
    whole.bind(data_shapes=[("data", (4, 8, 3))], for_training=False)
    whole.init_params(initializer=mx.init.Uniform(0.5))
    whole.set_states(value=0)
    whole.forward(mx.io.DataBatch(data=[mx.nd.array(x)], label=[]))
    expected = [out.asnumpy() for out in whole.get_outputs()]

    halves = _lstm_state_module(4, [mx.cpu(0), mx.cpu(1)])
    halves.bind(data_shapes=[("data", (4, 4, 3))], for_training=False)
    halves.set_params(*whole.get_params())
    halves.set_states(value=0)
    halves.forward(mx.io.DataBatch(data=[mx.nd.array(x[:, :4])], label=[]))
    halves.set_states(states=halves.get_outputs(merge_multi_context=False))
    for state, device_outputs in zip(halves.get_states(merge_multi_context=False),
                                     halves.get_outputs(merge_multi_context=False)):
        for on_device, output in zip(state, device_outputs):
            np.testing.assert_array_equal(on_device.asnumpy(), output.asnumpy())
    halves.forward(mx.io.DataBatch(data=[mx.nd.array(x[:, 4:])], label=[]))
    got = [out.asnumpy() for out in halves.get_outputs()]
    assert [g.shape for g in got] == [(4, 6)] * 4
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_module_switch_bucket_shares_memory():
    """test_module_switch_bucket: auto names restart per bucket; re-binding a bucket with the
    shared module does not grow the default bucket's executor memory."""
    sym_gen = _lstm_sym_gen(vocab=300, hidden=16, ctx_groups=True)
    batch, default_key, test_key = 8, 10, 5
    model = mx.mod.BucketingModule(sym_gen=sym_gen, default_bucket_key=default_key,
                                   context=[mx.cpu(0)])
    model.bind([("data", (batch, default_key))], [("softmax_label", (batch, default_key))],
               True, False)
    model.init_params(initializer=mx.init.Xavier(factor_type="in", magnitude=2.34))
    assert model._buckets[default_key]._symbol.list_arguments()[1] == "embedding0_weight"
    model.switch_bucket(test_key, [("data", (batch, test_key))],
                        [("softmax_label", (batch, test_key))])
    assert model._buckets[test_key]._symbol.list_arguments()[1] == "embedding0_weight"
    before = model._buckets[default_key]._total_exec_bytes
    del model._buckets[test_key]
    model.switch_bucket(test_key, [("data", (batch, test_key))],
                        [("softmax_label", (batch, test_key))])
    assert model._buckets[default_key]._total_exec_bytes == before


def test_bucketing_save_load(tmp_path):
    """test_bucketing_save_load: fit, save_checkpoint, BucketingModule.load, same params."""
    random.seed(2)
    np.random.seed(2)
    mx.random.seed(2)
    vocab, hidden = 50, 8
    rng = np.random.RandomState(3)
    sentences = [list(rng.randint(0, vocab + 1, size=rng.randint(1, 12))) for _ in range(80)]
    it = mx.rnn.BucketSentenceIter(sentences, 4, buckets=[5, 10, 15], invalid_label=-1)
    # the embedding is named: save_checkpoint calls sym_gen outside a fresh NameManager, so
    # auto names would differ between the saved symbols and the loaded buckets (as in MXNet)
    sym_gen = _lstm_sym_gen(vocab, hidden, embed_name="embed")
    mod = mx.mod.BucketingModule(sym_gen=sym_gen, default_bucket_key=it.default_bucket_key,
                                 context=[mx.cpu(0)])
    mod.fit(it, num_epoch=1, eval_metric=mx.metric.Perplexity(-1), kvstore="device",
            optimizer="sgd", optimizer_params={"learning_rate": 0.01, "momentum": 0.0},
            initializer=mx.init.Xavier(factor_type="in", magnitude=2.34))
    prefix = str(tmp_path / "bucket")
    mod.save_checkpoint(prefix, 1)
    for key in it.buckets:
        assert (tmp_path / ("bucket-%d-symbol.json" % key)).exists()
    loaded = mx.mod.BucketingModule.load(prefix, 1, sym_gen=sym_gen,
                                         default_bucket_key=it.default_bucket_key)
    loaded.bind(data_shapes=it.provide_data, label_shapes=it.provide_label,
                for_training=True)
    saved, _ = mod.get_params()
    restored, _ = loaded.get_params()
    assert sorted(saved) == sorted(restored)
    for name in saved:
        np.testing.assert_array_equal(saved[name].asnumpy(), restored[name].asnumpy())
    it.reset()
    loaded.fit(it, num_epoch=1, eval_metric=mx.metric.Perplexity(-1), optimizer="sgd",
               optimizer_params={"learning_rate": 0.01})
