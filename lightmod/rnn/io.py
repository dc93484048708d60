"""Text helpers of ``mx.rnn``: ``encode_sentences`` and the bucketing ``BucketSentenceIter``
(MXNet 1.9.1's behaviour, including its random streams: batch order from python's ``random``,
rows within a bucket from numpy's global generator, so seeded runs give MXNet's batches)."""
import bisect
import random

import numpy as np

from ..io import DataIter, DataBatch, DataDesc
from .. import ndarray

__all__ = ["encode_sentences", "BucketSentenceIter"]


def encode_sentences(sentences, vocab=None, invalid_label=-1, invalid_key="\n", start_label=0,
                     unknown_token=None):
    """Map each token of each sentence (a list of strings) to an integer.

    Without ``vocab`` a new vocabulary is built: ``invalid_key`` maps to ``invalid_label`` and
    new tokens get ``start_label``, ``start_label + 1``... (skipping ``invalid_label``). With a
    ``vocab``, an unknown token is an error unless ``unknown_token`` is given, in which case it
    is encoded as ``unknown_token`` (added to the vocabulary on first use).

    Returns ``(encoded sentences, vocab)``.
    """
    next_index = start_label
    new_vocab = vocab is None
    if new_vocab:
        vocab = {invalid_key: invalid_label}
    result = []
    for sentence in sentences:
        coded = []
        for word in sentence:
            if word not in vocab:
                if not (new_vocab or unknown_token):
                    raise AssertionError("Unknown token %s" % word)
                if next_index == invalid_label:
                    next_index += 1
                if unknown_token:
                    word = unknown_token
                vocab[word] = next_index
                next_index += 1
            coded.append(vocab[word])
        result.append(coded)
    return result, vocab


class BucketSentenceIter(DataIter):
    """Bucketing iterator for language models: the label of each step is the next token.

    Each sentence (a list of ints) goes to the smallest bucket at least as long as it, padded
    with ``invalid_label``; longer sentences are dropped (with a printed warning) and so are
    buckets that stay empty. ``buckets=None`` makes one bucket per sentence length that has
    at least ``batch_size`` sentences. Only full batches are produced; ``reset()`` shuffles the
    batch order and the sentences inside each bucket. ``layout``: 'NT' (batch, time) or 'TN'.
    The default bucket key is the largest bucket.
    """

    def __init__(self, sentences, batch_size, buckets=None, invalid_label=-1, data_name="data",
                 label_name="softmax_label", dtype="float32", layout="NT"):
        super().__init__()
        if not buckets:
            counts = np.bincount([len(s) for s in sentences])
            buckets = [length for length, count in enumerate(counts) if count >= batch_size]
        buckets = sorted(buckets)

        discarded = 0
        rows = [[] for _ in buckets]
        for sentence in sentences:
            slot = bisect.bisect_left(buckets, len(sentence))
            if slot == len(buckets):
                discarded += 1
                continue
            row = np.full((buckets[slot],), invalid_label, dtype=dtype)
            row[:len(sentence)] = sentence
            rows[slot].append(row)
        # buckets that received no sentence are dropped
        buckets = [b for b, r in zip(buckets, rows) if r]
        self.data = [np.asarray(r, dtype=dtype) for r in rows if r]
        print("WARNING: discarded %d sentences longer than the largest bucket." % discarded)

        self.batch_size = batch_size
        self.buckets = buckets
        self.data_name = data_name
        self.label_name = label_name
        self.dtype = dtype
        self.invalid_label = invalid_label
        self.nddata = []
        self.ndlabel = []
        self.major_axis = layout.find("N")
        self.layout = layout
        self.default_bucket_key = max(buckets)

        if self.major_axis == 0:
            shape = (batch_size, self.default_bucket_key)
        elif self.major_axis == 1:
            shape = (self.default_bucket_key, batch_size)
        else:
            raise ValueError("Invalid layout %s: Must by NT (batch major) or TN (time major)"
                             % layout)
        self.provide_data = [DataDesc(name=self.data_name, shape=shape, layout=self.layout)]
        self.provide_label = [DataDesc(name=self.label_name, shape=shape, layout=self.layout)]

        # (bucket, first row) of every full batch
        self.idx = []
        for i, bucket in enumerate(self.data):
            self.idx.extend((i, j) for j in range(0, len(bucket) - batch_size + 1, batch_size))
        self.curr_idx = 0
        self.reset()

    def reset(self):
        """Back to the first batch, with a new batch order and new rows in each batch."""
        self.curr_idx = 0
        random.shuffle(self.idx)
        for bucket in self.data:
            np.random.shuffle(bucket)
        self.nddata = []
        self.ndlabel = []
        for bucket in self.data:
            label = np.empty_like(bucket)
            label[:, :-1] = bucket[:, 1:]
            label[:, -1] = self.invalid_label
            self.nddata.append(ndarray.array(bucket, dtype=self.dtype))
            self.ndlabel.append(ndarray.array(label, dtype=self.dtype))

    def next(self):
        """The next batch (StopIteration at the end of the epoch)."""
        if self.curr_idx == len(self.idx):
            raise StopIteration
        i, j = self.idx[self.curr_idx]
        self.curr_idx += 1
        data = self.nddata[i][j:j + self.batch_size]
        label = self.ndlabel[i][j:j + self.batch_size]
        if self.major_axis == 1:
            data = data.T
            label = label.T
        return DataBatch([data], [label], pad=0, bucket_key=self.buckets[i],
                         provide_data=[DataDesc(name=self.data_name, shape=data.shape,
                                                layout=self.layout)],
                         provide_label=[DataDesc(name=self.label_name, shape=label.shape,
                                                 layout=self.layout)])
