"""The byte layout of MXNet's NDArray records and list files, on numpy arrays.

The codec under ``nd.save``/``nd.load`` (``utils.py``) and NDArray pickling: it builds no
NDArray itself, so the array class and the file functions can both use it. Layout (all
integers little-endian)::

    file   = u64 0x112, u64 0, u64 N, record * N, u64 K, (u64 len, bytes) * K
    record = u32 magic (V2 0xF993FAC9 | V3 0xF993FACA), i32 stype,
             [sparse: storage shape], shape, i32 dev_type, i32 dev_id, i32 type_flag,
             [sparse: (i32 aux type, aux shape) * n_aux], values, [sparse: aux values]
    shape  = i32 ndim, i64 * ndim
    V1     = u32 0xF993FAC8, shape, ctx, type_flag, values
    pre-V1 = u32 ndim, u32 * ndim, ctx, type_flag, values

Records are written as V2 (what MXNet 1.9.1 writes outside np-shape mode), byte for byte as
MXNet does for dense arrays; V1, V2, V3 and pre-V1 records are read. Every read is
bounds-checked, so truncated or corrupt bytes raise MXNetError naming the source and the byte
offset instead of giving a partial result.
"""
import struct

import numpy as np

from ..base import DTYPE_MX_TO_NP, DTYPE_NP_TO_MX, MXNetError
from ..context import Context

LIST_MAGIC = 0x112
V1_MAGIC = 0xF993FAC8
V2_MAGIC = 0xF993FAC9
V3_MAGIC = 0xF993FACA
BFLOAT16_FLAG = 12
_STYPE_CODE = {"default": 0, "row_sparse": 1, "csr": 2}
_STYPE_NAME = {v: k for k, v in _STYPE_CODE.items()}
_NUM_AUX = {0: 0, 1: 1, 2: 2}
_MAX_NDIM = 64
# sparse records are stored densely: refuse logical shapes beyond this many elements
_MAX_DENSE_SPARSE = 1 << 32


def _shape_bytes(shape):
    return struct.pack("<i", len(shape)) + struct.pack("<%dq" % len(shape), *shape)


def _type_flag(dtype):
    name = np.dtype(dtype).name
    if name not in DTYPE_NP_TO_MX:
        raise MXNetError("nd.save: dtype %s cannot be stored in an MXNet file" % name)
    return DTYPE_NP_TO_MX[name]


def encode_record(arr):
    """The bytes of one NDArray record (V2) of ``arr`` (an NDArray: read through its host
    view, ``stype``, ``context`` and, for sparse arrays, ``_parts()``)."""
    host = np.asarray(arr._host_view(), order="C")
    stype = _STYPE_CODE[arr.stype]
    ctx = arr.context
    flag = _type_flag(host.dtype)
    if stype == 0:
        values, aux = host, []
    elif stype == 1:
        values, rows = arr._parts()
        aux = [rows.astype(np.int64)]
    else:
        values, cols, indptr = arr._parts()
        aux = [indptr.astype(np.int64), cols.astype(np.int64)]
    # A 0-d array (only loaded from np-shape files) needs V3: in V2, ndim 0 means "no array".
    parts = [struct.pack("<Ii", V3_MAGIC if host.ndim == 0 else V2_MAGIC, stype)]
    if stype != 0:
        parts.append(_shape_bytes(values.shape))
    parts.append(_shape_bytes(host.shape))
    parts.append(struct.pack("<iii", ctx.device_typeid, ctx.device_id, flag))
    for a in aux:
        parts.append(struct.pack("<i", _type_flag(a.dtype)) + _shape_bytes(a.shape))
    parts.append(np.asarray(values, dtype=host.dtype, order="C").tobytes())
    for a in aux:
        parts.append(a.tobytes())
    return b"".join(parts)


class Reader:
    """Bounds-checked little-endian reads; errors name the source and the byte offset."""

    def __init__(self, buf, source):
        self.buf = memoryview(buf)
        self.pos = 0
        self.source = source

    def fail(self, what, at=None):
        return MXNetError("Invalid NDArray file format: %s is truncated or corrupt at byte %d "
                          "(%s)" % (self.source, self.pos if at is None else at, what))

    def take(self, n, what):
        if n < 0 or self.pos + n > len(self.buf):
            raise self.fail("expected %d bytes of %s, %d left"
                            % (n, what, len(self.buf) - self.pos))
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt, what):
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size, what))

    def remaining(self):
        return len(self.buf) - self.pos

    def shape(self, what):
        at = self.pos
        (ndim,) = self.unpack("<i", what + " ndim")
        if ndim == -1:
            return None
        if ndim < 0 or ndim > _MAX_NDIM:
            raise self.fail("%s has an invalid ndim %d" % (what, ndim), at)
        dims = self.unpack("<%dq" % ndim, what)
        if any(d < 0 for d in dims):
            raise self.fail("%s has a negative dim %s" % (what, dims), at)
        return tuple(dims)

    def legacy_shape(self, ndim, what):
        if ndim > _MAX_NDIM:
            raise self.fail("not an NDArray record (leading value %#x)" % ndim, self.pos - 4)
        return tuple(self.unpack("<%dI" % ndim, what))

    def dtype(self, what):
        at = self.pos
        (flag,) = self.unpack("<i", what)
        if flag == BFLOAT16_FLAG:
            return "bfloat16"
        if flag not in DTYPE_MX_TO_NP:
            raise self.fail("unknown %s %d" % (what, flag), at)
        return np.dtype(DTYPE_MX_TO_NP[flag])

    def values(self, dtype, shape, what):
        count, span = 1, 1
        for d in shape:
            count *= d
            span *= max(d, 1)
        if span >= 1 << 62:
            # an empty shape like (0, 2**62) still cannot be represented
            raise self.fail("%s shape %s is too large" % (what, shape))
        itemsize = 2 if dtype == "bfloat16" else dtype.itemsize
        raw = self.take(count * itemsize, what)
        if dtype == "bfloat16":
            # bfloat16 is the upper half of a float32: widen it (numpy has no bfloat16)
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            return bits.view(np.float32).reshape(shape)
        return np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype).reshape(shape)


def _target_context(dev_type, dev_id):
    """CPU records load on cpu(0); GPU records on their GPU when CUDA is usable, else cpu(0)."""
    if dev_type == 2:
        from ..context import num_gpus
        if 0 <= dev_id < num_gpus():
            return Context("gpu", dev_id)
    return Context("cpu", 0)


def decode_record(r):
    """One record read from the Reader ``r``: ``(dense numpy array, Context, stype)``, or
    None for MXNet's "no array" record."""
    at = r.pos
    (magic,) = r.unpack("<I", "record magic")
    if magic in (V2_MAGIC, V3_MAGIC):
        (stype,) = r.unpack("<i", "storage type")
        if stype not in _STYPE_NAME:
            raise r.fail("unknown storage type %d" % stype, r.pos - 4)
        nad = _NUM_AUX[stype]
        storage_shape = r.shape("storage shape") if nad else None
        shape = r.shape("shape")
        if shape is None or (magic == V2_MAGIC and len(shape) == 0):
            return None
    elif magic == V1_MAGIC:
        stype, nad, storage_shape = 0, 0, None
        shape = r.shape("shape")
        if shape is None or len(shape) == 0:
            return None
    else:
        # pre-V1: the first word is ndim, dims are u32
        stype, nad, storage_shape = 0, 0, None
        r.pos = at + 4
        shape = r.legacy_shape(magic, "legacy shape")
        if len(shape) == 0:
            return None
    dev_type, dev_id = r.unpack("<ii", "context")
    if dev_type not in Context.devtype2str:
        raise r.fail("unknown device type %d" % dev_type, r.pos - 8)
    dtype = r.dtype("type flag")
    aux = []
    for _i in range(nad):
        aux_dtype = r.dtype("aux type flag")
        aux_shape = r.shape("aux shape")
        if aux_shape is None or len(aux_shape) != 1:
            raise r.fail("aux shape %s is not 1-d" % (aux_shape,))
        aux.append((aux_dtype, aux_shape))
    ctx = _target_context(dev_type, dev_id)
    if stype == 0:
        return r.values(dtype, shape, "values"), ctx, "default"
    if storage_shape is None:
        raise r.fail("sparse record without a storage shape")
    if int(np.prod(storage_shape)) == 0 and nad:
        # MXNet may write (0,) before the array is ready: derive it from the aux shapes
        storage_shape = ((aux[0][1][0],) + tuple(shape[1:]) if stype == 1
                         else (aux[1][1][0],))
    values = r.values(dtype, storage_shape, "sparse values")
    aux_values = [r.values(t, s, "aux data") for t, s in aux]
    dense_size = 1
    for d in shape:
        dense_size *= d
    if dense_size > _MAX_DENSE_SPARSE:
        raise r.fail("a %s array of shape %s is too large for lightmod's dense storage of "
                     "sparse arrays" % (_STYPE_NAME[stype], shape))
    try:
        dense = np.zeros(shape, dtype=values.dtype)
    except (MemoryError, ValueError):
        raise r.fail("no memory for a dense %s array of shape %s"
                     % (_STYPE_NAME[stype], shape)) from None
    try:
        if stype == 1:
            rows = aux_values[0].astype(np.int64)
            if rows.size and (rows.min() < 0 or rows.max() >= shape[0]):
                raise ValueError("row index out of range")
            dense[rows] = values.reshape((len(rows),) + tuple(shape[1:]))
        else:
            indptr, cols = (a.astype(np.int64) for a in aux_values)
            if (len(shape) != 2 or len(indptr) != shape[0] + 1 or indptr[0] != 0
                    or indptr[-1] != len(cols) or np.any(np.diff(indptr) < 0)
                    or (cols.size and (cols.min() < 0 or cols.max() >= shape[1]))):
                raise ValueError("inconsistent csr parts")
            rowids = np.repeat(np.arange(shape[0]), np.diff(indptr))
            dense[rowids, cols] = values.reshape(-1)
    except (ValueError, IndexError, TypeError) as err:
        raise r.fail("inconsistent sparse record (%s)" % err) from None
    return dense, ctx, _STYPE_NAME[stype]
