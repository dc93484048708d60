"""``mx.io.LibSVMIter``: CSR batches from LibSVM text files."""
import numpy as np

from ..base import MXNetError
from .io import DataDesc, _RowBatchIter
from .utils import _wrap_host

__all__ = ["LibSVMIter"]


def _read_libsvm(path, width, what):
    """(labels, CSR indptr, indices, values) of a LibSVM file, parsed by the numba kernel;
    MXNetError names the file and line of anything that does not parse."""
    from ..kernels.dataio import LIBSVM_ERRORS, parse_libsvm_bytes
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as err:
        raise MXNetError("LibSVMIter: cannot read %s %s: %s" % (what, path, err.strerror)) from None
    status, line, labels, indptr, indices, values = parse_libsvm_bytes(raw)
    if status:
        raise MXNetError("LibSVMIter: %s line %d: %s" % (path, line, LIBSVM_ERRORS[status]))
    if indices.size and int(indices.max()) >= width:
        row = int(np.searchsorted(indptr, int(np.argmax(indices >= width)), side="right"))
        raise MXNetError("LibSVMIter: %s: feature index %d in row %d (non-blank lines counted "
                         "from 1) is out of range for %s shape (%d,)"
                         % (path, int(indices.max()), row, what, width))
    return labels, indptr, indices, values


class LibSVMIter(_RowBatchIter):
    """Batches from LibSVM files (``label index:value ...`` per line, zero-based indices),
    MXNet's ``mx.io.LibSVMIter``.

    ``data`` batches are CSR arrays of shape ``(batch_size,) + data_shape``. Labels are the
    first number of each ``data_libsvm`` line (shape ``(batch_size,)``), or, with
    ``label_libsvm``, the features of that file's lines as CSR rows of ``label_shape``.
    ``round_batch`` completes the last batch from the start and the next epoch starts after
    those rows (``pad`` counts them); without it the last batch's tail is zeros. ``num_parts``
    / ``part_index`` give a worker a contiguous share of the rows. The files are parsed once,
    at construction. As with MXNet's C++ iterators, a batch's arrays are the iterator's own
    buffers, valid until the next batch is read (copy them to keep them).
    """

    def __init__(self, data_libsvm, data_shape, label_libsvm=None, label_shape=(1,),
                 batch_size=None, round_batch=True, num_parts=1, part_index=0,
                 prefetch_buffer=4, ctx="gpu", dtype=None, data_name="data",
                 label_name="softmax_label"):
        super().__init__()
        if batch_size is None or int(batch_size) <= 0:
            raise MXNetError("LibSVMIter: batch_size is required and must be positive, got %r"
                             % (batch_size,))
        data_shape = tuple(int(d) for d in data_shape)
        label_shape = tuple(int(d) for d in label_shape)
        if len(data_shape) != 1 or len(label_shape) != 1:
            raise MXNetError("LibSVMIter: data_shape and label_shape must be 1-D, got %s and %s"
                             % (data_shape, label_shape))
        if dtype is not None and np.dtype(dtype) != np.float32:
            raise MXNetError("LibSVMIter: only float32 data is supported, got dtype %r" % (dtype,))
        if int(num_parts) < 1 or not 0 <= int(part_index) < int(num_parts):
            raise MXNetError("LibSVMIter: need 0 <= part_index < num_parts, got part_index=%s, "
                             "num_parts=%s" % (part_index, num_parts))
        self.batch_size = int(batch_size)
        self.round_batch = bool(round_batch)
        labels, self._indptr, self._indices, self._values = _read_libsvm(
            data_libsvm, data_shape[0], "data")
        rows = labels.size
        self._label_csr = None
        if label_libsvm is not None and label_libsvm != "NULL":
            _, l_indptr, l_indices, l_values = _read_libsvm(label_libsvm, label_shape[0],
                                                            "label")
            if l_indptr.size - 1 != rows:
                raise MXNetError("LibSVMIter: %s has %d rows but %s has %d"
                                 % (data_libsvm, rows, label_libsvm, l_indptr.size - 1))
            self._label_csr = (l_indptr, l_indices, l_values)
        self._labels = labels
        parts, index = int(num_parts), int(part_index)
        self._first, self._stop = rows * index // parts, rows * (index + 1) // parts
        if self._stop <= self._first:
            raise MXNetError("LibSVMIter: part %d of %d of %s holds no rows"
                             % (index, parts, data_libsvm))
        self._num = self._stop - self._first
        self._data_shape, self._label_shape = data_shape, label_shape
        self.provide_data = [DataDesc(data_name, (self.batch_size,) + data_shape)]
        lshape = (self.batch_size,) if self._label_csr is None else (self.batch_size,) + label_shape
        self.provide_label = [DataDesc(label_name, lshape)]
        self._batch = None
        self._buffers = {}

    @staticmethod
    def _scatter(rows, indptr, indices, values, out):
        """Write CSR rows ``rows`` into the dense ``out`` (one vectorised scatter); returns
        the (row, column) positions written, for clearing them before the next batch."""
        starts, stops = indptr[rows], indptr[rows + 1]
        counts = stops - starts
        total = int(counts.sum())
        if not total:
            return None
        owner = np.repeat(np.arange(rows.size), counts)
        offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        pick = np.repeat(starts, counts) + offsets
        # flat positions: one 1-D fancy index is ~20x faster than a (row, column) pair
        where = owner * out.shape[1] + indices[pick]
        out.reshape(-1)[where] = values[pick]
        return where

    def _dense_batch(self, key, shape, rows, csr):
        """The reused dense buffer ``key`` holding CSR rows ``rows``: only the entries the
        previous batch wrote are cleared, so a batch costs its non-zeros, not its size."""
        buf, written = self._buffers.get(key, (None, None))
        if buf is None:
            # touch every page now: scattered first writes would page-fault batch after batch
            buf = np.empty(shape, np.float32)
            buf.fill(0.0)
        elif written is not None:
            buf.reshape(-1)[written] = 0
        self._buffers[key] = (buf, self._scatter(rows, *csr, buf))
        return buf

    def _drop_batch(self):
        self._batch = None

    def _load_batch(self, rows, pad):
        rows = rows + self._first
        data = self._dense_batch("data", (self.batch_size,) + self._data_shape, rows,
                                 (self._indptr, self._indices, self._values))
        if self._label_csr is None:
            label = np.zeros(self.batch_size, np.float32)
            label[:rows.size] = self._labels[rows]
        else:
            label = self._dense_batch("label", (self.batch_size,) + self._label_shape, rows,
                                      self._label_csr)
        self._batch = (data, label, pad, rows)

    def _current(self):
        if self._batch is None:
            raise MXNetError("LibSVMIter: no current batch (call iter_next() or next() first)")
        return self._batch

    def getdata(self):
        return _wrap_host(self._current()[0], stype="csr")

    def getlabel(self):
        data = self._current()[1]
        return _wrap_host(data, stype="csr" if self._label_csr is not None else "default")

    def getpad(self):
        return self._batch[2] if self._batch is not None else 0

    def getindex(self):
        return None if self._batch is None else self._batch[3].astype(np.uint64)
