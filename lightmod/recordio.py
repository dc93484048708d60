"""RecordIO files (``mx.recordio``): sequential and indexed readers/writers plus the image
record header, byte for byte compatible with the files MXNet and ``im2rec`` write.

A file is a sequence of records. Each record part starts with the 32-bit little-endian magic
word ``0xced7230a`` and a 32-bit word whose top 3 bits are a continuation flag and whose low
29 bits are the part's length; the payload follows, zero-padded to a multiple of 4 bytes. A
payload that itself contains the magic word at a 4-byte aligned offset is stored as several
parts (flag 1 = first, 2 = middle, 3 = last; 0 = a whole record), the magic word between
two parts being implied, so that a reader can always resynchronise on the magic word.

An index file (``.idx``) has one ``key<TAB>byte offset`` line per record.
"""
import numbers
import os
import struct
from collections import namedtuple

import numpy as np

from .base import MXNetError

__all__ = ["MXRecordIO", "MXIndexedRecordIO", "IRHeader", "pack", "unpack", "pack_img",
           "unpack_img"]

_MAGIC = 0xCED7230A
_MAGIC_BYTES = struct.pack("<I", _MAGIC)
_PART_HEAD = struct.Struct("<II")
_LEN_MASK = (1 << 29) - 1


def _encode_record(buf):
    """The bytes one record occupies in a file (its parts, headers and padding)."""
    raw = bytes(buf)
    size = len(raw)
    if size >= 1 << 29:
        raise MXNetError("RecordIO records must be shorter than 2**29 bytes, got %d" % size)
    out = []
    start = 0
    # the aligned occurrences of the magic word split the record into parts
    pos = raw.find(_MAGIC_BYTES)
    while pos != -1 and pos + 4 <= size:
        if pos % 4 == 0:
            out.append(_PART_HEAD.pack(_MAGIC, ((1 if start == 0 else 2) << 29) | (pos - start)))
            out.append(raw[start:pos])
            start = pos + 4
            pos = raw.find(_MAGIC_BYTES, start)
        else:
            pos = raw.find(_MAGIC_BYTES, pos + 1)
    out.append(_PART_HEAD.pack(_MAGIC, ((3 if start else 0) << 29) | (size - start)))
    out.append(raw[start:])
    out.append(b"\0" * (-size % 4))
    return b"".join(out)


def read_record_at(fileobj, path, offset=None):
    """Read one record from ``fileobj`` (at ``offset`` when given, else where it stands).

    Returns the payload bytes, or None at a clean end of file. A wrong magic word or a record
    cut short raises MXNetError naming ``path`` and the byte offset of the record.
    """
    if offset is not None:
        fileobj.seek(offset)
    start = fileobj.tell() if offset is None else offset
    parts = []
    while True:
        head = fileobj.read(8)
        if not head and not parts:
            return None
        if len(head) < 8:
            raise MXNetError("%s: RecordIO record at byte %d is truncated (header cut short)"
                             % (path, start))
        magic, lrec = _PART_HEAD.unpack(head)
        if magic != _MAGIC:
            raise MXNetError("%s: invalid RecordIO file: no magic word at byte %d (record "
                             "starting at byte %d)" % (path, fileobj.tell() - 8, start))
        flag, length = lrec >> 29, lrec & _LEN_MASK
        padded = length + (-length % 4)
        data = fileobj.read(padded)
        if len(data) < padded:
            raise MXNetError("%s: RecordIO record at byte %d is truncated (%d of %d bytes)"
                             % (path, start, len(data), padded))
        if flag == 0:
            if parts:
                raise MXNetError("%s: corrupt RecordIO record at byte %d (a whole record inside "
                                 "a multi-part one)" % (path, start))
            return data[:length]
        if (flag == 1) != (not parts) or flag > 3:
            raise MXNetError("%s: corrupt RecordIO record at byte %d (part flag %d out of "
                             "order)" % (path, start, flag))
        parts.append(data[:length])
        if flag == 3:
            return _MAGIC_BYTES.join(parts)


def parse_record_bytes(raw, path, offset):
    """The payload of the record whose file bytes (parts, headers, padding) are ``raw``."""
    parts = []
    pos = 0
    while True:
        if pos + 8 > len(raw):
            raise MXNetError("%s: RecordIO record at byte %d is truncated" % (path, offset))
        magic, lrec = _PART_HEAD.unpack_from(raw, pos)
        if magic != _MAGIC:
            raise MXNetError("%s: invalid RecordIO file: no magic word at byte %d (record "
                             "starting at byte %d)" % (path, offset + pos, offset))
        flag, length = lrec >> 29, lrec & _LEN_MASK
        body = raw[pos + 8:pos + 8 + length]
        if len(body) < length:
            raise MXNetError("%s: RecordIO record at byte %d is truncated (%d of %d bytes)"
                             % (path, offset, len(body), length))
        if flag == 0:
            return body
        parts.append(body)
        if flag == 3:
            return _MAGIC_BYTES.join(parts)
        pos += 8 + length + (-length % 4)


def scan_records(path):
    """``[(byte offset, byte span)]`` of every record of a RecordIO file, found by walking
    the part headers (payloads are skipped, not read). Raises MXNetError naming the file and
    byte offset on a missing magic word or a record cut short."""
    spans = []
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        pos = 0
        while pos < size:
            start = pos
            while True:
                f.seek(pos)
                head = f.read(8)
                if len(head) < 8:
                    raise MXNetError("%s: RecordIO record %d at byte %d is truncated (header cut "
                                     "short)" % (path, len(spans), start))
                magic, lrec = _PART_HEAD.unpack(head)
                if magic != _MAGIC:
                    raise MXNetError("%s: invalid RecordIO file: no magic word at byte %d "
                                     "(record %d)" % (path, pos, len(spans)))
                flag, length = lrec >> 29, lrec & _LEN_MASK
                pos += 8 + length + (-length % 4)
                if pos > size:
                    raise MXNetError("%s: RecordIO record %d at byte %d is truncated (file "
                                     "ends at byte %d)" % (path, len(spans), start, size))
                if flag in (0, 3):
                    break
            spans.append((start, pos - start))
    return spans


class MXRecordIO:
    """Sequential reader (``flag='r'``) or writer (``flag='w'``) of a RecordIO file.

    The handle belongs to the process that opened it: writing from a forked child raises
    RuntimeError, while readers reopen themselves on ``reset``. Pickling closes the file and
    unpickling reopens it if it was open.
    """

    def __init__(self, uri, flag):
        self.uri = str(uri)
        self.flag = flag
        self.pid = None
        self.is_open = False
        self.handle = None
        self.writable = None
        self.open()

    def open(self):
        """Open the file: truncate it for writing, or rewind it for reading."""
        if self.flag == "w":
            mode, self.writable = "wb", True
        elif self.flag == "r":
            mode, self.writable = "rb", False
        else:
            raise ValueError("Invalid flag %s" % self.flag)
        try:
            self.handle = open(self.uri, mode)
        except OSError as err:
            raise MXNetError("cannot open RecordIO file %s for %s: %s"
                             % (self.uri, "writing" if self.writable else "reading",
                                err.strerror)) from None
        self.pid = os.getpid()
        self.is_open = True

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown may have torn modules down
            pass

    def __getstate__(self):
        was_open = self.is_open
        self.close()
        state = dict(self.__dict__)
        state["is_open"] = was_open
        state["handle"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        reopen = state["is_open"]
        self.is_open = False
        self.handle = None
        if reopen:
            self.open()

    def _check_pid(self, allow_reset=False):
        if self.pid != os.getpid():
            if not allow_reset:
                raise RuntimeError("Forbidden operation in multiple processes")
            self.reset()

    def close(self):
        """Close the file (flushing what was written); closing twice does nothing."""
        if not self.is_open:
            return
        self.handle.close()
        self.handle = None
        self.is_open = False
        self.pid = None

    def reset(self):
        """Reopen the file: readers start again at the first record, writers truncate it."""
        self.close()
        self.open()

    def write(self, buf):
        """Append one record (bytes-like)."""
        assert self.writable
        self._check_pid(allow_reset=False)
        self.handle.write(_encode_record(buf))

    def read(self):
        """The next record's bytes, or None after the last one."""
        assert not self.writable
        self._check_pid(allow_reset=False)
        return read_record_at(self.handle, self.uri)


class MXIndexedRecordIO(MXRecordIO):
    """A RecordIO file with a ``key<TAB>offset`` index file for random access by key.

    ``keys`` lists the keys in file order and ``idx`` maps them to byte offsets; ``key_type``
    converts the keys read from the index file.
    """

    def __init__(self, idx_path, uri, flag, key_type=int):
        self.idx_path = idx_path
        self.idx = {}
        self.keys = []
        self.key_type = key_type
        self.fidx = None
        super().__init__(uri, flag)

    def open(self):
        super().open()
        self.idx = {}
        self.keys = []
        try:
            self.fidx = open(self.idx_path, self.flag)
        except OSError as err:
            super().close()
            raise MXNetError("cannot open RecordIO index file %s: %s"
                             % (self.idx_path, err.strerror)) from None
        if not self.writable:
            for lineno, line in enumerate(self.fidx, 1):
                if not line.strip():
                    continue
                fields = line.strip().split("\t")
                try:
                    key, offset = self.key_type(fields[0]), int(fields[1])
                except (IndexError, ValueError):
                    raise MXNetError("%s line %d: expected 'key<TAB>offset', got %r"
                                     % (self.idx_path, lineno, line.rstrip("\n"))) from None
                self.idx[key] = offset
                self.keys.append(key)

    def close(self):
        if not self.is_open:
            return
        super().close()
        self.fidx.close()

    def __getstate__(self):
        state = super().__getstate__()
        state["fidx"] = None
        return state

    def seek(self, idx):
        """Move the reader to the record of key ``idx``."""
        assert not self.writable
        self._check_pid(allow_reset=True)
        try:
            offset = self.idx[idx]
        except KeyError:
            raise KeyError(idx) from None
        self.handle.seek(offset)

    def tell(self):
        """Byte offset where the next record will be written."""
        assert self.writable
        return self.handle.tell()

    def read_idx(self, idx):
        """The record of key ``idx``."""
        self.seek(idx)
        record = self.read()
        if record is None:
            raise MXNetError("%s: index %s points at byte %d, past the last record of %s"
                             % (self.idx_path, idx, self.idx[idx], self.uri))
        return record

    def write_idx(self, idx, buf):
        """Append a record under key ``idx`` and add it to the index."""
        key = self.key_type(idx)
        offset = self.tell()
        self.write(buf)
        self.fidx.write("%s\t%d\n" % (key, offset))
        self.idx[key] = offset
        self.keys.append(key)


IRHeader = namedtuple("HEADER", ["flag", "label", "id", "id2"])
IRHeader.__doc__ = """Header of an image record: ``flag`` (the number of float labels stored
after the header, 0 for a single label held in ``label``), ``label`` (float or float array),
``id`` and ``id2`` (the record's id, low and high 64 bits)."""

_IR_HEADER = struct.Struct("<IfQQ")


def pack(header, s):
    """Bytes of an image record: the header (and its float32 labels when ``header.label`` is an
    array, which sets ``flag`` to their count) followed by the payload ``s``."""
    header = IRHeader(*header)
    if isinstance(header.label, numbers.Number):
        return _IR_HEADER.pack(0, header.label, header.id, header.id2) + bytes(s)
    labels = np.asarray(header.label, dtype=np.float32).ravel()
    return (_IR_HEADER.pack(labels.size, 0.0, header.id, header.id2) + labels.tobytes()
            + bytes(s))


def unpack(s):
    """``(IRHeader, payload bytes)`` of an image record; a multi-label header's ``label`` is
    a float32 array."""
    if len(s) < _IR_HEADER.size:
        raise MXNetError("image record is %d bytes, shorter than its %d-byte header"
                         % (len(s), _IR_HEADER.size))
    header = IRHeader(*_IR_HEADER.unpack_from(s))
    payload = s[_IR_HEADER.size:]
    if header.flag > 0:
        if len(payload) < 4 * header.flag:
            raise MXNetError("image record announces %d labels but holds only %d bytes after "
                             "its header" % (header.flag, len(payload)))
        header = header._replace(label=np.frombuffer(payload, np.float32, header.flag))
        payload = payload[4 * header.flag:]
    return header, payload


def unpack_img(s, iscolor=-1):
    """``(IRHeader, image)`` of an image record, the image decoded by OpenCV as a numpy
    array in OpenCV's BGR order (``iscolor`` is OpenCV's imread flag: -1 unchanged, 0 gray,
    1 colour)."""
    from .image.codec import cv2_module
    cv2 = cv2_module()
    header, payload = unpack(s)
    img = cv2.imdecode(np.frombuffer(payload, dtype=np.uint8), iscolor)
    if img is None:
        raise MXNetError("unpack_img: the record's payload is not a decodable image")
    return header, img


def pack_img(header, img, quality=95, img_fmt=".jpg"):
    """Encode a numpy image (OpenCV's BGR order) as JPEG (``quality`` 1-100) or PNG
    (``quality`` = compression 0-9) and pack it with ``header``."""
    from .image.codec import cv2_module
    cv2 = cv2_module()
    fmt = img_fmt.upper()
    if fmt in (".JPG", ".JPEG"):
        params = [cv2.IMWRITE_JPEG_QUALITY, quality]
    elif fmt == ".PNG":
        params = [cv2.IMWRITE_PNG_COMPRESSION, quality]
    else:
        params = []
    ok, buf = cv2.imencode(img_fmt, np.asarray(img), params)
    assert ok, "failed to encode image"
    return pack(header, buf.tobytes())
