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
