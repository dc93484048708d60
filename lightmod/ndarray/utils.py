"""MXNet's NDArray list files (``nd.save`` / ``nd.load``, ``.params``) and the single-array
record that ``NDArray.__getstate__`` pickles; the byte layout itself is ``_format.py``.

``save`` writes the file through a temporary file moved into place; ``load`` refuses truncated
or corrupt bytes with an MXNetError naming the file and the byte offset.
"""
import os
import struct

import numpy as np

from ..base import MXNetError, atomic_write
from ..context import Context
from ._format import LIST_MAGIC, Reader, decode_record, encode_record
from .ndarray import NDArray, _to_ctx_buffer

__all__ = ["save", "load", "load_frombuffer", "save_raw_bytes", "load_raw_bytes",
           "encode_list", "decode_list"]



# ---------------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------------
def _record(arr):
    if not isinstance(arr, NDArray):
        raise TypeError("save only accepts NDArrays, got %s" % type(arr).__name__)
    return encode_record(arr)


def encode_list(arrays, names=None):
    """The bytes of a list file holding ``arrays`` (and ``names`` for a dict save)."""
    names = list(names) if names else []
    parts = [struct.pack("<QQQ", LIST_MAGIC, 0, len(arrays))]
    parts.extend(_record(a) for a in arrays)
    parts.append(struct.pack("<Q", len(names)))
    for n in names:
        raw = n.encode("utf-8")
        parts.append(struct.pack("<Q", len(raw)) + raw)
    return b"".join(parts)


def save(fname, data):
    """Save an NDArray, a list of NDArrays or a dict str -> NDArray in MXNet's format.

    The file is written to a temporary file in the same directory and moved into place, so a
    crash never leaves a half-written file under ``fname``.
    """
    if isinstance(data, NDArray):
        arrays, names = [data], None
    elif isinstance(data, dict):
        if any(not isinstance(k, str) for k in data) or \
                any(not isinstance(v, NDArray) for v in data.values()):
            raise TypeError("save only accept dict str->NDArray or list of NDArray")
        arrays, names = list(data.values()), list(data.keys())
    elif isinstance(data, (list, tuple)):
        if any(not isinstance(v, NDArray) for v in data):
            raise TypeError("save only accept dict str->NDArray or list of NDArray")
        arrays, names = list(data), None
    else:
        raise ValueError("data needs to either be a NDArray, dict of str, NDArray pairs "
                         "or a list of NDarrays.")
    atomic_write(fname, encode_list(arrays, names))


def save_raw_bytes(arr):
    """The single-array record (what MXNDArraySaveRawBytes gives; used for pickling)."""
    return _record(arr)


# ---------------------------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------------------------
def _read_record(r):
    decoded = decode_record(r)
    if decoded is None:
        return NDArray(np.empty((0,), dtype=np.float32), Context("cpu", 0))
    host, ctx, stype = decoded
    return NDArray(_to_ctx_buffer(host, ctx), ctx, stype)


def decode_list(buf, source="<buffer>"):
    """Parse list-file bytes into a list (no names) or a dict (names present)."""
    r = Reader(buf, source)
    magic, _reserved = r.unpack("<QQ", "file header")
    if magic != LIST_MAGIC:
        raise r.fail("bad list magic %#x" % magic, 0)
    (count,) = r.unpack("<Q", "array count")
    if count > r.remaining():
        raise r.fail("array count %d exceeds the file size" % count, r.pos - 8)
    arrays = [_read_record(r) for _ in range(count)]
    (nnames,) = r.unpack("<Q", "name count")
    if nnames not in (0, count):
        raise r.fail("%d names for %d arrays" % (nnames, count), r.pos - 8)
    names = []
    for _ in range(nnames):
        (length,) = r.unpack("<Q", "name length")
        raw = r.take(length, "name")
        try:
            names.append(bytes(raw).decode("utf-8"))
        except UnicodeDecodeError:
            raise r.fail("a name is not UTF-8", r.pos - length) from None
    if names:
        return dict(zip(names, arrays))
    return arrays


def load(fname):
    """Load a list file: a dict if names were saved, else a list (``save({})`` loads as [])."""
    fname = os.fspath(fname)
    try:
        with open(fname, "rb") as f:
            buf = f.read()
    except OSError as err:
        raise MXNetError("nd.load: cannot open %s: %s" % (fname, err)) from None
    return decode_list(buf, fname)


def load_frombuffer(buf):
    """Like ``load`` but from the bytes of a file."""
    if not isinstance(buf, (bytes, bytearray, memoryview)):
        raise TypeError("buf must be bytes, got %s" % type(buf).__name__)
    return decode_list(buf)


def load_raw_bytes(buf):
    """The NDArray of one record (the inverse of ``save_raw_bytes``)."""
    r = Reader(buf, "<pickled NDArray>")
    return _read_record(r)
