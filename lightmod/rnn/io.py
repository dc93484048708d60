"""Text input for ``mx.rnn``: ``encode_sentences`` turns tokens into integer codes and
``BucketSentenceIter`` serves them in length buckets for language models.

The iterator draws on the same random streams as MXNet 1.9.1 (python's ``random`` orders the
batches, numpy's global generator orders the rows of each bucket), so with the same seeds it
yields the batches MXNet yields."""
import bisect
import random

import numpy as np

from .. import ndarray
from ..io import DataBatch, DataDesc, DataIter

__all__ = ["encode_sentences", "BucketSentenceIter"]


def encode_sentences(sentences, vocab=None, invalid_label=-1, invalid_key="\n", start_label=0,
                     unknown_token=None):
    """Replace every token of every sentence by an integer code; returns ``(codes, vocab)``.

    Tokens already in ``vocab`` keep their code. Any other token takes the next code of a
    counter that starts at ``start_label`` and steps over ``invalid_label``. When ``vocab`` is
    None the counter fills a fresh vocabulary seeded with ``{invalid_key: invalid_label}``.
    When a ``vocab`` is passed, a token missing from it raises ``AssertionError`` unless
    ``unknown_token`` is set; then the new code is recorded under ``unknown_token`` instead of
    the token itself (each such token moves ``unknown_token`` to a fresh code).
    """
    building = vocab is None
    if building:
        vocab = {invalid_key: invalid_label}
    next_code = start_label

    def code_of(token):
        nonlocal next_code
        if token in vocab:
            return vocab[token]
        if not (building or unknown_token):
            raise AssertionError("Unknown token %s" % token)
        if next_code == invalid_label:
            next_code += 1
        key = unknown_token or token
        vocab[key] = next_code
        next_code += 1
        return vocab[key]

    return [[code_of(token) for token in sentence] for sentence in sentences], vocab


def _padded_buckets(sentences, lengths, fill, dtype):
    """Sort each sentence into the shortest bucket length that holds it, padded with ``fill``.
    Returns ``(bucket lengths that got rows, row matrices, number of sentences too long)``."""
    rows = [[] for _ in lengths]
    too_long = 0
    for sentence in sentences:
        slot = bisect.bisect_left(lengths, len(sentence))
        if slot == len(lengths):
            too_long += 1
            continue
        padded = np.full((lengths[slot],), fill, dtype=dtype)
        padded[:len(sentence)] = sentence
        rows[slot].append(padded)
    kept = [(length, np.asarray(group, dtype=dtype)) for length, group in zip(lengths, rows) if group]
    return [length for length, _ in kept], [matrix for _, matrix in kept], too_long


class BucketSentenceIter(DataIter):
    """Bucketing iterator for language models, whose label at each time step is the token of
    the following step (``invalid_label`` after the last one).

    A sentence (a list of ints) lands in the shortest bucket that can hold it and is padded
    with ``invalid_label`` up to that bucket's length. Sentences longer than every bucket are
    left out, and a printed warning counts them; buckets that catch no sentence disappear.
    Without ``buckets``, each sentence length shared by at least ``batch_size`` sentences
    becomes a bucket. Every batch is full (leftover rows of a bucket are not served). Each
    ``reset()`` reshuffles the order of the batches and the rows inside each bucket.
    ``layout`` is 'NT' (rows are sentences) or 'TN' (rows are time steps); the largest bucket
    is ``default_bucket_key``.
    """

    def __init__(self, sentences, batch_size, buckets=None, invalid_label=-1, data_name="data",
                 label_name="softmax_label", dtype="float32", layout="NT"):
        super().__init__()
        if not buckets:
            per_length = np.bincount([len(s) for s in sentences])
            buckets = [length for length in range(len(per_length)) if per_length[length] >= batch_size]
        buckets, self.data, too_long = _padded_buckets(sentences, sorted(buckets), invalid_label, dtype)
        print("WARNING: discarded %d sentences longer than the largest bucket." % too_long)

        self.batch_size = batch_size
        self.buckets = buckets
        self.data_name, self.label_name = data_name, label_name
        self.dtype = dtype
        self.invalid_label = invalid_label
        self.layout = layout
        self.major_axis = layout.find("N")
        if self.major_axis not in (0, 1):
            raise ValueError("Invalid layout %s: Must by NT (batch major) or TN (time major)"
                             % layout)
        self.default_bucket_key = max(buckets)
        full_shape = self._oriented_shape(batch_size, self.default_bucket_key)
        self.provide_data = [DataDesc(name=data_name, shape=full_shape, layout=layout)]
        self.provide_label = [DataDesc(name=label_name, shape=full_shape, layout=layout)]

        # one (bucket number, first row) entry per full batch
        self.idx = [(b, start) for b, matrix in enumerate(self.data)
                    for start in range(0, len(matrix) - batch_size + 1, batch_size)]
        self.curr_idx = 0
        self.nddata, self.ndlabel = [], []
        self.reset()

    def _oriented_shape(self, rows, steps):
        return (rows, steps) if self.major_axis == 0 else (steps, rows)

    def reset(self):
        """Rewind to the first batch after reshuffling batches and rows."""
        self.curr_idx = 0
        random.shuffle(self.idx)
        for matrix in self.data:
            np.random.shuffle(matrix)
        self.nddata, self.ndlabel = [], []
        for matrix in self.data:
            shifted = np.full_like(matrix, self.invalid_label)
            shifted[:, :-1] = matrix[:, 1:]
            self.nddata.append(ndarray.array(matrix, dtype=self.dtype))
            self.ndlabel.append(ndarray.array(shifted, dtype=self.dtype))

    def next(self):
        """Serve the next batch; ``StopIteration`` once every batch of the epoch is out."""
        if self.curr_idx >= len(self.idx):
            raise StopIteration
        bucket, start = self.idx[self.curr_idx]
        self.curr_idx += 1
        rows = slice(start, start + self.batch_size)
        data, label = self.nddata[bucket][rows], self.ndlabel[bucket][rows]
        if self.major_axis == 1:
            data, label = data.T, label.T
        return DataBatch([data], [label], pad=0, bucket_key=self.buckets[bucket],
                         provide_data=[DataDesc(self.data_name, data.shape, layout=self.layout)],
                         provide_label=[DataDesc(self.label_name, label.shape, layout=self.layout)])
