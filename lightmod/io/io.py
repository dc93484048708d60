"""Data iterators: DataDesc, DataBatch, DataIter, NDArrayIter, ResizeIter, PrefetchingIter,
CSVIter — MXNet 1.9.1's ``mxnet.io`` behaviour.

Batches are built with one numpy gather/slice per input array and wrapped as NDArrays on the
input's context; nothing loops over samples in Python.
"""
import glob
import os
import threading
import warnings
from collections import namedtuple

import numpy as np

from .. import arg_checks
from ..base import MXNetError, dtype_np
from .utils import _getdata_by_idx, _has_stype, _init_data, _wrap_host

__all__ = ["DataDesc", "DataBatch", "DataIter", "ResizeIter", "PrefetchingIter", "NDArrayIter",
           "CSVIter"]


class DataDesc(namedtuple("DataDesc", ["name", "shape"])):
    """Name, shape, dtype and layout of one input (data or label).

    It is a ``(name, shape)`` namedtuple, so code that unpacks ``name, shape = desc`` keeps
    working; ``dtype`` and ``layout`` are extra attributes. The layout's ``N`` marks the batch
    axis that data parallelism splits along.
    """

    def __new__(cls, name, shape, dtype=np.float32, layout="NCHW"):
        desc = super().__new__(cls, name, shape)
        desc.dtype = dtype
        desc.layout = layout
        return desc

    def __repr__(self):
        return "DataDesc[%s,%s,%s,%s]" % (self.name, self.shape, self.dtype, self.layout)

    @staticmethod
    def get_batch_axis(layout):
        """The batch axis of ``layout``: 0 when layout is None, else the position of 'N'
        (-1 when there is none, meaning "do not split")."""
        if layout is None:
            return 0
        return layout.find("N")

    @staticmethod
    def get_list(shapes, types):
        """DataDescs from ``[(name, shape)]`` and optionally ``[(name, dtype)]``."""
        if types is not None:
            type_dict = dict(types)
            return [DataDesc(name, shape, type_dict[name]) for name, shape in shapes]
        return [DataDesc(name, shape) for name, shape in shapes]


class DataBatch:
    """One batch: lists of data and label NDArrays plus bookkeeping.

    ``pad`` counts the filler samples at the end of the batch (prediction drops them),
    ``index`` the sample indices, ``bucket_key`` the bucket for BucketingModule, and
    ``provide_data``/``provide_label`` optional DataDescs describing this very batch.
    """

    def __init__(self, data, label=None, pad=None, index=None, bucket_key=None,
                 provide_data=None, provide_label=None):
        for role, arrays in (("Data", data), ("Label", label)):
            if arrays is not None and not isinstance(arrays, (list, tuple)):
                raise AssertionError("%s must be list of NDArrays (got %s)"
                                     % (role, type(arrays).__name__))
        self.data, self.label = data, label
        self.pad, self.index, self.bucket_key = pad, index, bucket_key
        self.provide_data, self.provide_label = provide_data, provide_label

    def __str__(self):
        data_shapes = [d.shape for d in self.data]
        label_shapes = [l.shape for l in self.label] if self.label else None
        return "%s: data shapes: %s label shapes: %s" % (type(self).__name__, data_shapes,
                                                         label_shapes)


class DataIter:
    """Base class of data iterators: a Python iterator of DataBatch objects.

    Subclasses implement either ``next()`` directly or the four getters together with
    ``iter_next()``; the base ``next()`` assembles a DataBatch from the latter. The getters
    return None here, which is what MXNet's base class returns for iterators that do not
    provide them.
    """

    def __init__(self, batch_size=0):
        self.batch_size = batch_size

    def __iter__(self):
        return self

    def reset(self):
        """Go back to the beginning of the data (nothing to do for the base class)."""

    def next(self):
        """The next DataBatch; raises StopIteration at the end of the data."""
        if self.iter_next():
            return DataBatch(data=self.getdata(), label=self.getlabel(), pad=self.getpad(),
                             index=self.getindex())
        raise StopIteration

    def __next__(self):
        return self.next()

    def iter_next(self):
        """Advance to the next batch; True if there is one (the base class has none)."""
        return None

    def getdata(self):
        """The data NDArrays of the current batch."""
        return None

    def getlabel(self):
        """The label NDArrays of the current batch."""
        return None

    def getindex(self):
        """The sample indices of the current batch, or None."""
        return None

    def getpad(self):
        """How many samples at the end of the current batch are padding."""
        return None


def _field_of_current_batch(field):
    def getter(self):
        return getattr(self.current_batch, field)
    getter.__name__ = "get" + field
    getter.__doc__ = "``%s`` of the DataBatch the iterator is on." % field
    return getter


class _ServesCurrentBatch:
    """The four getters of an iterator that keeps the whole batch it is on in
    ``current_batch``."""

    getdata = _field_of_current_batch("data")
    getlabel = _field_of_current_batch("label")
    getindex = _field_of_current_batch("index")
    getpad = _field_of_current_batch("pad")


class ResizeIter(_ServesCurrentBatch, DataIter):
    """Present ``data_iter`` as an epoch of exactly ``size`` batches.

    When the inner iterator runs dry before ``size`` batches it is reset and read again; when
    it has more, the epoch stops early. ``reset()`` passes through to the inner iterator only
    if ``reset_internal`` is true, so without it the next epoch goes on where this one stopped.
    """

    def __init__(self, data_iter, size, reset_internal=True):
        super().__init__(data_iter.batch_size)
        self.data_iter, self.size, self.reset_internal = data_iter, size, reset_internal
        self.cur = 0  # batches served in this epoch
        self.current_batch = None
        self.provide_data, self.provide_label = data_iter.provide_data, data_iter.provide_label
        if hasattr(data_iter, "default_bucket_key"):
            self.default_bucket_key = data_iter.default_bucket_key

    def reset(self):
        self.cur = 0
        if self.reset_internal:
            self.data_iter.reset()

    def _pull(self):
        try:
            return self.data_iter.next()
        except StopIteration:
            self.data_iter.reset()
            return self.data_iter.next()

    def iter_next(self):
        if self.cur >= self.size:
            return False
        self.current_batch = self._pull()
        self.cur += 1
        return True


class _PrefetchWorker:
    """One background thread that reads the next batch of one iterator ahead of time.

    The thread holds a reference to this worker only (not to the PrefetchingIter), so the
    PrefetchingIter can be garbage collected and stop its threads in ``__del__``.
    """

    def __init__(self, data_iter):
        self.data_iter = data_iter
        self.ready = threading.Event()     # a batch (or the end, or an error) is waiting
        self.taken = threading.Event()     # the waiting batch was consumed: fetch another
        self.taken.set()
        self.running = True
        self.batch = None
        self.error = None
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while True:
            self.taken.wait()
            if not self.running:
                return
            try:
                self.batch, self.error = self.data_iter.next(), None
            except StopIteration:
                self.batch, self.error = None, None
            except BaseException as exc:  # handed to the consumer thread, raised there
                self.batch, self.error = None, exc
            self.taken.clear()
            self.ready.set()

    def wait(self):
        self.ready.wait()

    def release(self):
        """Let the thread fetch the next batch."""
        self.ready.clear()
        self.taken.set()

    def stop(self):
        self.running = False
        self.taken.set()
        self.thread.join(timeout=5.0)


class PrefetchingIter(_ServesCurrentBatch, DataIter):
    """Read batches from one or several iterators in background threads.

    With several iterators each batch concatenates their data and labels (they must yield
    the same number of batches with the same ``pad``). ``rename_data``/``rename_label`` are
    lists with one ``{old_name: new_name}`` dict per iterator.
    """

    def __init__(self, iters, rename_data=None, rename_label=None):
        super().__init__()
        if not isinstance(iters, list):
            iters = [iters]
        self.n_iter = len(iters)
        if self.n_iter == 0:
            raise AssertionError("PrefetchingIter needs at least one iterator")
        self.iters = iters
        self.rename_data = rename_data
        self.rename_label = rename_label
        self.batch_size = self.provide_data[0][1][0]
        self.current_batch = None
        self._workers = [_PrefetchWorker(it) for it in iters]
        self.started = True

    def __del__(self):
        for worker in getattr(self, "_workers", ()):
            worker.stop()

    @staticmethod
    def _renamed(descs, renames):
        out = []
        for desc in descs:
            if not isinstance(desc, DataDesc):
                desc = DataDesc(*desc)
            name = renames[desc.name] if renames is not None else desc.name
            out.append(DataDesc(name, desc.shape, desc.dtype, desc.layout))
        return out

    def _provide(self, attr, renames):
        if renames is None:
            return sum((list(getattr(it, attr)) for it in self.iters), [])
        if len(renames) != len(self.iters):
            raise MXNetError("PrefetchingIter: %s has %d entries for %d iterators"
                             % ("rename_data" if attr == "provide_data" else "rename_label",
                                len(renames), len(self.iters)))
        return sum((self._renamed(getattr(it, attr), r) for r, it in zip(renames, self.iters)),
                   [])

    @property
    def provide_data(self):
        return self._provide("provide_data", self.rename_data)

    @property
    def provide_label(self):
        return self._provide("provide_label", self.rename_label)

    def _wait_all(self):
        for worker in self._workers:
            worker.wait()
        for worker in self._workers:
            if worker.error is not None:
                error, worker.error = worker.error, None
                worker.release()
                raise error

    def reset(self):
        for worker in self._workers:
            worker.wait()
        for it in self.iters:
            it.reset()
        for worker in self._workers:
            worker.error = None
            worker.release()

    def iter_next(self):
        self._wait_all()
        batches = [worker.batch for worker in self._workers]
        ended = [b is None for b in batches]
        if all(ended):
            return False
        if any(ended):
            raise MXNetError("PrefetchingIter: the iterators yield different numbers of "
                             "batches (ended: %s)" % ended)
        if any(b.pad != batches[0].pad for b in batches):
            raise MXNetError("PrefetchingIter: the iterators' batches disagree (pads %s)"
                             % [b.pad for b in batches])
        self.current_batch = DataBatch(sum((list(b.data) for b in batches), []),
                                       sum((list(b.label or []) for b in batches), []),
                                       batches[0].pad, batches[0].index,
                                       provide_data=self.provide_data,
                                       provide_label=self.provide_label)
        for worker in self._workers:
            worker.release()
        return True

    def next(self):
        if self.iter_next():
            return self.current_batch
        raise StopIteration


_LAST_BATCH_HANDLES = ("pad", "discard", "roll_over")


class NDArrayIter(DataIter):
    """Iterate over NDArrays / numpy arrays (one, a list, or a dict of them) in batches.

    Inputs are sorted by name (a list is named ``_0_data``, ``_1_data``, ...); anything that
    is not an NDArray is converted to a float32 NDArray. ``shuffle`` permutes the samples at
    construction and at every ``reset()``; ``idx`` is the permutation. Batches start at
    samples 0, ``batch_size``, ``2 * batch_size``...; a last batch with too few samples is
    treated according to ``last_batch_handle``:

    * ``'pad'``: it is filled up by going round to the start of the data again (as many times
      as needed when the batch is larger than the data); ``batch.pad`` counts the extra samples;
    * ``'discard'``: it is not served;
    * ``'roll_over'``: it is not served either, but its samples are carried over by the next
      ``reset()`` and open the first batch of the next epoch, which is completed with the
      first samples of the (possibly reshuffled) data and has ``pad`` equal to the number of
      carried samples. ``hard_reset()`` forgets them. When even carried plus fresh samples
      cannot fill a batch, they are carried on together to the epoch after.

    ``cursor`` is the position, in the current order of the data, of the first sample that
    the current batch takes from the data (carried samples come before it); it is None
    before the first batch of an epoch.

    csr inputs are only supported with ``'discard'``. Unlike MXNet, an unknown
    ``last_batch_handle`` raises ValueError instead of silently acting like 'discard', and
    samples are counted, shuffled and tiled along the layout's batch axis (MXNet mixes axis 0
    and the layout axis; both agree for the usual layouts with N first). Reading the
    current batch twice gives the same arrays (MXNet hands the carried labels out as data
    on a second ``getdata()``), and asking for it before ``iter_next()`` raises MXNetError.
    """

    def __init__(self, data, label=None, batch_size=1, shuffle=False, last_batch_handle="pad",
                 data_name="data", label_name="softmax_label", layout="NCHW"):
        super().__init__(batch_size)
        arg_checks.integer(batch_size, "NDArrayIter", "batch_size")
        if batch_size <= 0:     # a batch of 0 samples would never move the cursor
            raise ValueError("NDArrayIter: batch_size must be positive, got %d" % batch_size)
        if last_batch_handle not in _LAST_BATCH_HANDLES:
            raise ValueError("NDArrayIter: last_batch_handle must be one of %s, got %r"
                             % (_LAST_BATCH_HANDLES, last_batch_handle))
        self.data = _init_data(data, allow_empty=False, default_name=data_name)
        self.label = _init_data(label, allow_empty=True, default_name=label_name)
        if ((_has_stype(self.data, "csr") or _has_stype(self.label, "csr"))
                and last_batch_handle != "discard"):
            raise NotImplementedError("`NDArrayIter` only supports ``CSRNDArray`` with "
                                      "`last_batch_handle` set to `discard`.")
        self.layout = layout
        axis = self._batch_axis
        self.num_data = self.data[0][1].shape[axis]
        for sources in (self.data, self.label):
            for i, (name, arr) in enumerate(sources):
                if arr.shape[axis] < self.num_data:
                    raise MXNetError("NDArrayIter: input %r has %d samples on axis %d, "
                                     "expected %d like %r" % (name, arr.shape[axis], axis,
                                                              self.num_data, self.data[0][0]))
                if arr.shape[axis] > self.num_data:
                    # MXNet iterates over the first input's samples and never reads the rest
                    # of a longer one (its own tests pass a label longer than the data)
                    warnings.warn("NDArrayIter: input %r has %d samples on axis %d; only the "
                                  "first %d (as many as %r) are used"
                                  % (name, arr.shape[axis], axis, self.num_data,
                                     self.data[0][0]), stacklevel=2)
                    sources[i] = (name, self._slice([(name, arr)], 0, self.num_data)[0])
        self.idx = np.arange(self.num_data)
        self.shuffle = shuffle
        self.last_batch_handle = last_batch_handle
        self.batch_size = batch_size
        # A short batch that ended the epoch, as (sample count, data arrays, label arrays);
        # reset() turns it into the carry of the next epoch when rolling over.
        self._short_batch = None
        self.reset()
        self.data_list = [arr for _, arr in self.data] + [arr for _, arr in self.label]
        self.num_source = len(self.data_list)

    @property
    def _batch_axis(self):
        return self.layout.find("N")

    def _descs(self, sources):
        axis = self._batch_axis
        descs = []
        for name, arr in sources:
            shape = list(arr.shape)
            shape[axis] = self.batch_size
            descs.append(DataDesc(name, tuple(shape), arr.dtype, layout=self.layout))
        return descs

    @property
    def provide_data(self):
        """DataDescs of the data: each input's shape with ``batch_size`` on the batch axis."""
        return self._descs(self.data)

    @property
    def provide_label(self):
        """DataDescs of the labels."""
        return self._descs(self.label)

    def _rewind(self, carry):
        if self.shuffle:
            self._shuffle_data()
        self._carry = carry            # samples waiting to open the next batch, or None
        self._batch_carry = None       # the carry the current batch opens with
        self._short_batch = None
        self._next_fresh = 0           # where the next batch's own samples begin
        self.cursor = None

    def hard_reset(self):
        """Start the data again from its first sample, forgetting rolled-over samples."""
        self._rewind(None)

    def reset(self):
        """Start the data again; with 'roll_over' an unserved short last batch comes along."""
        self._rewind(self._short_batch if self.last_batch_handle == "roll_over" else None)

    def iter_next(self):
        self._short_batch = None
        self._batch_carry, self._carry = self._carry, None
        carried = self._batch_carry[0] if self._batch_carry is not None else 0
        self.cursor = self._next_fresh
        self._next_fresh = self.cursor + self.batch_size - carried
        return self.cursor < self.num_data

    def next(self):
        if not self.iter_next():
            raise StopIteration
        data, label = self.getdata(), self.getlabel()
        size = data[0].shape[self._batch_axis]
        if size != self.batch_size:
            # only 'discard' and 'roll_over' get here; reset() decides what the batch becomes
            self._short_batch = (size, data, label)
            raise StopIteration
        return DataBatch(data=data, label=label, pad=self.getpad(), index=None)

    def _take(self, sources, positions):
        """Batch arrays made of the samples at ``positions`` (one gather per source)."""
        axis = self._batch_axis
        out = []
        for _, arr in sources:
            host = arr._host_view()
            out.append(_wrap_host(np.take(host, positions, axis=axis), arr.context, arr.stype))
        return out

    def _slice(self, sources, start, end):
        axis = self._batch_axis
        out = []
        for _, arr in sources:
            host = arr._host_view()
            index = [slice(None)] * host.ndim
            index[axis] = slice(start, end)
            out.append(_wrap_host(np.array(host[tuple(index)]), arr.context, arr.stype))
        return out

    def _batchify(self, sources, carried_arrays):
        if self.cursor is None:
            raise MXNetError("NDArrayIter: there is no current batch (call iter_next() first)")
        if self.cursor >= self.num_data:
            raise MXNetError("NDArrayIter: DataIter needs reset (the cursor is past the end)")
        stop = self._next_fresh
        if self.last_batch_handle == "pad" and stop > self.num_data:
            # go round to the start as often as needed
            return self._take(sources, np.arange(self.cursor, stop) % self.num_data)
        fresh = self._slice(sources, self.cursor, min(stop, self.num_data))
        if carried_arrays is None:
            return fresh
        axis = self._batch_axis
        return [_wrap_host(np.concatenate([old._host_view(), new._host_view()], axis=axis),
                           new.context, new.stype) for old, new in zip(carried_arrays, fresh)]

    def getdata(self):
        carry = self._batch_carry
        return self._batchify(self.data, carry[1] if carry is not None else None)

    def getlabel(self):
        carry = self._batch_carry
        return self._batchify(self.label, carry[2] if carry is not None else None)

    def getpad(self):
        if self._batch_carry is not None:
            return self._batch_carry[0]
        if self.cursor is None or self.last_batch_handle != "pad":
            return 0
        return max(self._next_fresh - self.num_data, 0)

    def _shuffle_data(self):
        # numpy's global generator, as MXNet: np.random.seed(s) reproduces MXNet's permutation
        np.random.shuffle(self.idx)
        self.data = _getdata_by_idx(self.data, self.idx, self._batch_axis)
        self.label = _getdata_by_idx(self.label, self.idx, self._batch_axis)


_CSV_DTYPES = ("float16", "float32", "float64", "int32", "int64", "int8", "uint8")


def _csv_files(path):
    if os.path.isdir(path):
        files = sorted(f for f in glob.glob(os.path.join(path, "*")) if os.path.isfile(f))
        if not files:
            raise MXNetError("CSVIter: directory %r holds no files" % path)
        return files
    if not os.path.isfile(path):
        raise MXNetError("CSVIter: file %r does not exist" % path)
    return [path]


def _read_csv(path, row_shape, dtype, what):
    """All rows of a CSV file (or of every file in a directory) as an (n, *row_shape) array."""
    row_size = int(np.prod(row_shape, dtype=np.int64))
    parse_dtype = np.float64 if np.dtype(dtype).kind == "f" else np.int64
    blocks = []
    for fname in _csv_files(path):
        with open(fname) as f:
            lines = [ln for ln in f.read().splitlines() if ln.strip()]
        if not lines:
            continue
        try:
            rows = np.loadtxt(lines, delimiter=",", dtype=parse_dtype, ndmin=2)
        except ValueError as exc:
            raise MXNetError("CSVIter: cannot parse %s file %r: %s" % (what, fname, exc)) from None
        if rows.shape[1] != row_size:
            raise MXNetError("CSVIter: The data size in CSV do not match size of shape: specified "
                             "shape=%s, the csv row-length=%d (%s file %r)"
                             % (list(row_shape), rows.shape[1], what, fname))
        blocks.append(rows.astype(dtype))
    if not blocks:
        raise MXNetError("CSVIter: %s %r holds no rows" % (what, path))
    rows = np.concatenate(blocks, axis=0)
    return rows.reshape((rows.shape[0],) + tuple(row_shape))


class _RowBatchIter(DataIter):
    """An iterator over ``_num`` rows held in memory, ``batch_size`` at a time (CSVIter,
    LibSVMIter).

    With ``round_batch`` a short last batch is completed from the start of the data (wrapping
    as often as needed) and the next epoch, after ``reset()``, starts after the rows it
    borrowed; otherwise every epoch starts at row 0. Subclasses set ``batch_size``,
    ``round_batch`` and ``_num``, fill a batch in ``_load_batch(rows, pad)`` and forget it in
    ``_drop_batch()``.
    """

    def __init__(self):
        super().__init__()
        self._cursor = 0
        self._next_start = 0       # first row of the next epoch (round_batch carry-over)

    def reset(self):
        self._cursor = self._next_start
        self._drop_batch()

    def iter_next(self):
        if self._cursor >= self._num:
            self._drop_batch()
            return False
        take = min(self.batch_size, self._num - self._cursor)
        rows = np.arange(self._cursor, self._cursor + take)
        self._next_start = 0
        if take < self.batch_size and self.round_batch:
            extra = np.arange(self.batch_size - take) % self._num
            rows = np.concatenate([rows, extra])
            self._next_start = int(extra[-1] + 1) % self._num
        self._load_batch(rows, self.batch_size - take)
        self._cursor += self.batch_size
        return True

    def next(self):
        if self.iter_next():
            return DataBatch(data=[self.getdata()], label=[self.getlabel()], pad=self.getpad(),
                             index=self.getindex())
        raise StopIteration


class CSVIter(_RowBatchIter):
    """Batches from CSV files, MXNet's ``mx.io.CSVIter``.

    Each row of ``data_csv`` (a file or a directory of files) is one sample reshaped to
    ``data_shape``; ``label_csv`` likewise with ``label_shape`` (all-zero labels without it;
    a label shape of ``(1,)`` gives labels of shape ``(batch_size,)``). ``dtype`` (None means
    float32) applies to data and labels.

    The last incomplete batch, with ``round_batch=True``, wraps around to the start of the
    data and the next epoch (after ``reset()``) begins after the samples already used;
    with ``round_batch=False`` its tail keeps the previous batch's rows, and every epoch
    starts at the beginning. ``pad`` counts the filler rows either way, ``index`` holds the
    row numbers. ``prefetch_buffer`` and ``ctx`` are accepted for compatibility (the data is
    read into memory at construction).
    """

    def __init__(self, data_csv, data_shape, label_csv=None, label_shape=(1,), batch_size=None,
                 round_batch=True, prefetch_buffer=4, ctx="gpu", dtype=None,
                 data_name="data", label_name="softmax_label"):
        super().__init__()
        if batch_size is None or int(batch_size) <= 0:
            raise MXNetError("CSVIter: batch_size is required and must be positive, got %r"
                             % (batch_size,))
        if dtype is not None and str(np.dtype(dtype_np(dtype)).name) not in _CSV_DTYPES:
            raise MXNetError("CSVIter: unsupported dtype %r (expected one of %s)"
                             % (dtype, _CSV_DTYPES))
        out_dtype = np.dtype(np.float32) if dtype is None else dtype_np(dtype)
        self.batch_size = int(batch_size)
        self.round_batch = bool(round_batch)
        data_shape = tuple(int(d) for d in data_shape)
        label_shape = tuple(int(d) for d in label_shape)
        self._data = _read_csv(data_csv, data_shape, out_dtype, "data")
        num = self._data.shape[0]
        if label_csv is None or label_csv == "NULL":
            self._label = np.zeros((num,) + label_shape, dtype=out_dtype)
        else:
            self._label = _read_csv(label_csv, label_shape, out_dtype, "label")
            if self._label.shape[0] != num:
                raise MXNetError("CSVIter: data_csv has %d rows but label_csv has %d"
                                 % (num, self._label.shape[0]))
        if label_shape == (1,):
            self._label = self._label.reshape(num)
        self._num = num
        # batch buffers reused across batches: with round_batch=False the tail of a short
        # last batch shows the previous batch's rows, as MXNet's batch loader does
        self._data_buf = np.zeros((self.batch_size,) + self._data.shape[1:], out_dtype)
        self._label_buf = np.zeros((self.batch_size,) + self._label.shape[1:], out_dtype)
        self._index_buf = np.zeros(self.batch_size, np.uint64)
        self._pad = 0
        self._has_batch = False
        self.provide_data = [DataDesc(data_name, (self.batch_size,) + data_shape, out_dtype.type)]
        self.provide_label = [DataDesc(label_name, (self.batch_size,) + self._label.shape[1:],
                                       out_dtype.type)]

    def _drop_batch(self):
        self._has_batch = False

    def _load_batch(self, rows, pad):
        n = rows.shape[0]
        np.take(self._data, rows, axis=0, out=self._data_buf[:n])
        np.take(self._label, rows, axis=0, out=self._label_buf[:n])
        self._index_buf[:n] = rows
        self._pad = pad
        self._has_batch = True

    def _current(self, buf):
        if not self._has_batch:
            raise MXNetError("CSVIter: no current batch (call iter_next() or next() first)")
        return _wrap_host(buf.copy())

    def getdata(self):
        return self._current(self._data_buf)

    def getlabel(self):
        return self._current(self._label_buf)

    def getindex(self):
        if not self._has_batch:
            return None
        return self._index_buf.copy()

    def getpad(self):
        return self._pad if self._has_batch else 0
