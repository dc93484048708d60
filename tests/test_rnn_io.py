"""mx.rnn.encode_sentences and BucketSentenceIter against MXNet 1.9.1 (golden batches made with
the same python/numpy seeds by tests/fixtures/make_rnn_golden.py) and their documented rules."""
import json
import os
import random

import numpy as np
import pytest

import lightmod as mx

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = json.load(open(os.path.join(HERE, "fixtures", "rnn_golden.json")))
ARRAYS = np.load(os.path.join(HERE, "fixtures", "rnn_golden.npz"))

CORPUS = [["the", "cat", "sat"], ["a", "dog"], ["the", "dog", "ran", "far"], ["cat"],
          ["a", "cat", "ran"], ["the", "end"]]


def test_encode_sentences_builds_vocab_like_mxnet():
    coded, vocab = mx.rnn.encode_sentences(CORPUS)
    assert coded == GOLDEN["encode"]["default"]["coded"]
    assert vocab == GOLDEN["encode"]["default"]["vocab"]
    assert vocab["\n"] == -1 and vocab["the"] == 0
    # the invalid label is skipped when numbering reaches it
    coded, vocab = mx.rnn.encode_sentences(CORPUS, invalid_label=2, start_label=1)
    assert coded == GOLDEN["encode"]["invalid_inside"]["coded"]
    assert vocab == GOLDEN["encode"]["invalid_inside"]["vocab"]
    assert 2 not in [v for k, v in vocab.items() if k != "\n"]


def test_encode_sentences_with_vocab_and_unknown_token():
    _, vocab = mx.rnn.encode_sentences(CORPUS)
    coded, new_vocab = mx.rnn.encode_sentences([["the", "zebra"], ["cat", "cat"]],
                                               vocab=dict(vocab), unknown_token="<unk>")
    assert coded == GOLDEN["encode"]["unknown_token"]["coded"]
    assert new_vocab == GOLDEN["encode"]["unknown_token"]["vocab"]
    with pytest.raises(AssertionError, match="Unknown token zebra"):
        mx.rnn.encode_sentences([["zebra"]], vocab=dict(vocab))


def _run_epochs(entry, epochs):
    random.seed(11)
    np.random.seed(11)
    it = mx.rnn.BucketSentenceIter(entry["sentences"], entry["batch_size"], **entry["kwargs"])
    batches = []
    for epoch in range(epochs):
        if epoch:
            it.reset()
        batches.append(list(it))
    return it, batches


@pytest.mark.parametrize("case", sorted(GOLDEN["iter"]))
def test_bucket_iterator_matches_mxnet(case, capsys):
    entry = GOLDEN["iter"][case]
    it, epochs = _run_epochs(entry, len(entry["epochs"]))
    assert "WARNING: discarded" in capsys.readouterr().out
    assert it.buckets == entry["buckets"]
    assert it.default_bucket_key == entry["default_bucket_key"]
    assert [[d.name, list(d.shape), d.layout] for d in it.provide_data] == entry["provide_data"]
    assert [[d.name, list(d.shape), d.layout] for d in it.provide_label] == \
        entry["provide_label"]
    for e, (batches, keys) in enumerate(zip(epochs, entry["epochs"])):
        assert len(batches) == len(keys)
        for b, (batch, key) in enumerate(zip(batches, keys)):
            assert [batch.bucket_key, batch.pad, list(batch.provide_data[0].shape),
                    batch.provide_data[0].layout, list(batch.provide_label[0].shape),
                    str(batch.data[0].dtype.__name__)] == key
            np.testing.assert_array_equal(batch.data[0].asnumpy(),
                                          ARRAYS["iter/%s/%d/%d/data" % (case, e, b)])
            np.testing.assert_array_equal(batch.label[0].asnumpy(),
                                          ARRAYS["iter/%s/%d/%d/label" % (case, e, b)])


def test_bucket_iterator_rules():
    sentences = [[1, 2], [3, 4, 5], [6], [7, 8, 9, 10, 11, 12], [13, 14, 15], [16, 17],
                 [18, 19, 20, 21, 22, 23, 24, 25, 26]]
    it = mx.rnn.BucketSentenceIter(sentences, 2, buckets=[2, 3, 5, 8], invalid_label=-1)
    # bucket 5 got nothing and is dropped; the 9-token sentence is discarded
    assert it.buckets == [2, 3, 8] and it.default_bucket_key == 8
    assert [len(d) for d in it.data] == [3, 2, 1]
    # only full batches: bucket 2 gives one batch of 2, bucket 3 one, bucket 8 none
    batches = list(it)
    assert sorted(b.bucket_key for b in batches) == [2, 3]
    for batch in batches:
        data, label = batch.data[0].asnumpy(), batch.label[0].asnumpy()
        assert data.shape == (2, batch.bucket_key) and batch.pad == 0
        np.testing.assert_array_equal(label[:, :-1], data[:, 1:])
        assert np.all(label[:, -1] == -1)
        for row in data:
            tokens = [int(v) for v in row if v != -1]
            assert tokens in sentences
            assert np.all(row[len(tokens):] == -1)
        assert batch.provide_data[0].name == "data"
        assert batch.provide_label[0].name == "softmax_label"
    with pytest.raises(StopIteration):
        it.next()
    it.reset()
    assert len(list(it)) == 2


def test_bucket_iterator_layout_tn_and_errors():
    sentences = [[1, 2, 3]] * 4 + [[4, 5]] * 2
    it = mx.rnn.BucketSentenceIter(sentences, 2, layout="TN", dtype="int32")
    assert it.buckets == [2, 3]                  # automatic: lengths with >= batch_size
    assert it.provide_data[0].shape == (3, 2)
    for batch in it:
        assert batch.data[0].shape == (batch.bucket_key, 2)
        assert batch.data[0].dtype == np.int32
        np.testing.assert_array_equal(batch.label[0].asnumpy()[:-1],
                                      batch.data[0].asnumpy()[1:])
    with pytest.raises(ValueError, match="Invalid layout"):
        mx.rnn.BucketSentenceIter(sentences, 2, layout="TC")
