"""``mx.io.MNISTIter``: batches from MNIST idx files, as MXNet 1.9.1 gives them.

The whole (partitioned) data set is read into memory at construction: pixels are scaled by
1/256, labels become float32. With ``shuffle`` the samples are permuted once, at load time, in
the order MXNet's C++ iterator produces for the same ``seed`` (a Fisher-Yates pass driven by a
Mersenne twister seeded with ``seed``), so a program sees the same batches under lightmod as under
MXNet. Every epoch yields the same batches; an incomplete last batch is dropped.
"""
import gzip
import logging
import os

import numpy as np

from ..base import MXNetError, dtype_np
from .io import DataBatch, DataDesc, DataIter
from .utils import _wrap_host

# a module logger: logging.info() on the root logger would configure logging before
# the program's own basicConfig() and silence it
_LOG = logging.getLogger(__name__)

__all__ = ["MNISTIter"]

_IMAGE_MAGIC = 2051
_LABEL_MAGIC = 2049
_GZIP_MAGIC = b"\x1f\x8b"


def _read_idx(path, magic, what):
    """The header's dimensions and the uint8 payload of a raw or gzipped idx file."""
    if not os.path.isfile(path):
        raise MXNetError("MNISTIter: %s file %r does not exist" % (what, path))
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise MXNetError("MNISTIter: %s file %r is not a readable gzip file: %s"
                             % (what, path, exc)) from None
    ndim = 3 if magic == _IMAGE_MAGIC else 1
    header_len = 4 * (1 + ndim)
    if len(raw) < header_len:
        raise MXNetError("MNISTIter: %s file %r is too short for an idx header (%d bytes)"
                         % (what, path, len(raw)))
    header = np.frombuffer(raw, dtype=">i4", count=1 + ndim)
    if int(header[0]) != magic:
        raise MXNetError("MNISTIter: %s file %r is not an MNIST %s file: magic number %d, expected %d"
                         % (what, path, what, int(header[0]), magic))
    dims = tuple(int(d) for d in header[1:])
    if min(dims) < 0:
        raise MXNetError("MNISTIter: %s file %r has negative dimensions %s" % (what, path, dims))
    count = int(np.prod(dims, dtype=np.int64))
    if len(raw) - header_len < count:
        raise MXNetError("MNISTIter: %s file %r is truncated: header says %s (%d bytes), file holds %d"
                         % (what, path, dims, count, len(raw) - header_len))
    payload = np.frombuffer(raw, dtype=np.uint8, count=count, offset=header_len)
    return payload.reshape(dims)


def _mt19937_words(seed):
    """An endless stream of the 32-bit outputs of a Mersenne twister seeded with ``seed``.

    numpy's legacy RandomState seeds its MT19937 exactly as C++'s ``std::mt19937(seed)`` does,
    and a full-range uint32 draw hands out the raw words in order.
    """
    state = np.random.RandomState(seed % (1 << 32))
    while True:
        yield from state.randint(0, 1 << 32, size=256, dtype=np.uint32).tolist()


def _mxnet_shuffle_order(count, seed):
    """The permutation MXNet's MNISTIter applies to ``count`` samples for ``seed``.

    A forward Fisher-Yates pass: position i swaps with a uniform j in [0, i], each j drawn by
    rejection from one 32-bit word (the word is divided by the largest bucket size that splits
    the 2**32 - 1 range evenly into i + 1 buckets; words past the last full bucket are redrawn).
    """
    order = list(range(count))
    words = _mt19937_words(seed)
    for i in range(1, count):
        buckets = i + 1
        scale = 0xFFFFFFFF // buckets
        limit = buckets * scale
        word = next(words)
        while word >= limit:
            word = next(words)
        j = word // scale
        order[i], order[j] = order[j], order[i]
    return np.asarray(order, dtype=np.int64)


class MNISTIter(DataIter):
    """Batches of MNIST images and labels read from idx files (raw or gzipped).

    ``data`` has shape ``(batch_size, 1, rows, cols)``, or ``(batch_size, rows * cols)`` with
    ``flat=True``; values are ``pixel / 256``. ``softmax_label`` has shape ``(batch_size,)``.
    ``num_parts``/``part_index`` keep the part ``[n * part_index // num_parts,
    n * (part_index + 1) // num_parts)`` of the ``n`` samples (distributed training reads one
    part per worker); shuffling happens within the part. ``prefetch_buffer``, ``ctx`` and any
    other keyword (``input_shape``, for instance, which MXNet's iterator ignores as well) are
    accepted and have no effect; ``dtype`` may only be None or float32, the one type MXNet's
    MNISTIter produces.
    """

    def __init__(self, image="./train-images-idx3-ubyte", label="./train-labels-idx1-ubyte",
                 batch_size=128, shuffle=True, flat=False, seed=0, silent=False, num_parts=1,
                 part_index=0, prefetch_buffer=4, ctx="gpu", dtype=None, data_name="data",
                 label_name="softmax_label", **kwargs):
        super().__init__(int(batch_size))
        if self.batch_size <= 0:
            raise MXNetError("MNISTIter: batch_size must be positive, got %r" % (batch_size,))
        num_parts, part_index = int(num_parts), int(part_index)
        if num_parts < 1 or not 0 <= part_index < num_parts:
            raise MXNetError("MNISTIter: part_index must lie in [0, num_parts) and num_parts be at "
                             "least 1, got part_index=%d, num_parts=%d" % (part_index, num_parts))
        if dtype is not None and dtype != "None" and dtype_np(dtype) != np.float32:
            raise MXNetError("MNISTIter: dtype %r is not supported: MNISTIter produces float32 data "
                             "(dtype None or 'float32')" % (dtype,))
        images = _read_idx(image, _IMAGE_MAGIC, "image")
        labels = _read_idx(label, _LABEL_MAGIC, "label")
        if images.shape[0] != labels.shape[0]:
            raise MXNetError("MNISTIter: image file %r holds %d images but label file %r holds %d labels"
                             % (image, images.shape[0], label, labels.shape[0]))
        total = images.shape[0]
        start, end = total * part_index // num_parts, total * (part_index + 1) // num_parts
        images, labels = images[start:end], labels[start:end]
        if shuffle:
            order = _mxnet_shuffle_order(len(labels), int(seed))
            images, labels = images[order], labels[order]
        rows, cols = images.shape[1:]
        sample_shape = (rows * cols,) if flat else (1, rows, cols)
        self._data = (images.astype(np.float32) / np.float32(256.0)).reshape((-1,) + sample_shape)
        self._label = labels.astype(np.float32)
        self._num_batches = len(self._label) // self.batch_size
        self._cursor = -1
        self.provide_data = [DataDesc(data_name, (self.batch_size,) + sample_shape, np.float32)]
        self.provide_label = [DataDesc(label_name, (self.batch_size,), np.float32)]
        if not silent:
            _LOG.info("MNISTIter: load %d images, shuffle=%d, shape=%s", len(self._label),
                         int(bool(shuffle)), self.provide_data[0].shape)

    def reset(self):
        self._cursor = -1

    def iter_next(self):
        if self._cursor + 1 >= self._num_batches:
            self._cursor = self._num_batches
            return False
        self._cursor += 1
        return True

    def _rows(self, source):
        if not 0 <= self._cursor < self._num_batches:
            raise MXNetError("MNISTIter: no current batch (call iter_next() or next() first)")
        begin = self._cursor * self.batch_size
        return _wrap_host(source[begin:begin + self.batch_size].copy())

    def getdata(self):
        return self._rows(self._data)

    def getlabel(self):
        return self._rows(self._label)

    def getindex(self):
        # MXNet's MNISTIter fills no sample indices: its batches carry zeros
        return np.zeros(self.batch_size, dtype=np.uint64)

    def getpad(self):
        return 0

    def next(self):
        if self.iter_next():
            return DataBatch(data=[self.getdata()], label=[self.getlabel()], pad=0, index=self.getindex(),
                             provide_data=self.provide_data, provide_label=self.provide_label)
        raise StopIteration
