"""A word-level LSTM language model with BucketingModule, on the shipped Declaration text.

    python examples/lstm_bucketing.py [--epochs 10]

Sentences (here: clauses) of different lengths go to buckets; every bucket unrolls the same
LSTM to its own length, and all buckets share one set of parameters. Written exactly as for
MXNet 1.x (mx.rnn.BucketSentenceIter, mx.rnn.LSTMCell, mx.mod.BucketingModule).
"""
import argparse
import logging
import random

import numpy as np

import lightmod as mx
from lightmod.data import load_text


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--num-hidden", type=int, default=64)
    parser.add_argument("--num-embed", type=int, default=32)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    random.seed(0)
    np.random.seed(0)
    mx.random.seed(0)

    sentences, vocab = mx.rnn.encode_sentences(load_text("declaration"), invalid_label=0,
                                               start_label=1)
    vocab_size = len(vocab) + 1
    buckets = [5, 10, 15, 20, 30]
    train = mx.rnn.BucketSentenceIter(sentences, args.batch_size, buckets=buckets,
                                      invalid_label=0)
    cell = mx.rnn.LSTMCell(num_hidden=args.num_hidden, prefix="lstm_")

    def sym_gen(seq_len):
        data = mx.sym.Variable("data")
        label = mx.sym.Variable("softmax_label")
        embed = mx.sym.Embedding(data, input_dim=vocab_size, output_dim=args.num_embed,
                                 name="embed")
        cell.reset()
        outputs, _ = cell.unroll(seq_len, inputs=embed, merge_outputs=True)
        pred = mx.sym.Reshape(outputs, shape=(-1, args.num_hidden))
        pred = mx.sym.FullyConnected(pred, num_hidden=vocab_size, name="pred")
        label = mx.sym.Reshape(label, shape=(-1,))
        pred = mx.sym.SoftmaxOutput(pred, label, name="softmax", use_ignore=True,
                                    ignore_label=0)
        return pred, ("data",), ("softmax_label",)

    mod = mx.mod.BucketingModule(sym_gen, default_bucket_key=train.default_bucket_key,
                                 context=mx.cpu())
    perplexity = mx.metric.Perplexity(ignore_label=0)
    first = []

    def record_first_epoch(param):
        if param.epoch == 0:
            first[:] = [param.eval_metric.get_global()[1]]

    mod.fit(train, eval_metric=perplexity, num_epoch=args.epochs,
            optimizer="adam", optimizer_params={"learning_rate": 0.01},
            initializer=mx.init.Xavier(factor_type="in", magnitude=2.34),
            batch_end_callback=record_first_epoch)
    final = mod.score(train, perplexity)[0][1]
    print("train perplexity: epoch 0 %.1f -> after %d epochs %.1f (vocabulary %d)"
          % (first[0], args.epochs, final, vocab_size))
    assert final < first[0] / 3, "perplexity did not fall"


if __name__ == "__main__":
    main()
