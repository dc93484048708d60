"""mx.recordio against files written by MXNet 1.9.1 (tests/fixtures/make_recordio_golden.py):
reading them, writing the same bytes, pack/unpack, and bad files."""
import os
import pickle
import struct
import sys

import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "fixtures", "recordio")
sys.path.insert(0, os.path.join(HERE, "fixtures"))
import make_recordio_golden as recipe  # noqa: E402

cv2 = pytest.importorskip("cv2")


def _golden(name):
    return os.path.join(GOLDEN, name)


def _read_all(reader):
    out = []
    while True:
        rec = reader.read()
        if rec is None:
            return out
        out.append(rec)


def test_reads_mxnet_plain_file():
    reader = mx.recordio.MXRecordIO(_golden("plain.rec"), "r")
    assert _read_all(reader) == recipe.plain_payloads()
    reader.reset()
    assert reader.read() == recipe.plain_payloads()[0]
    reader.close()


def test_writes_mxnet_plain_bytes(tmp_path):
    path = str(tmp_path / "p.rec")
    writer = mx.recordio.MXRecordIO(path, "w")
    for payload in recipe.plain_payloads():
        writer.write(payload)
    writer.close()
    with open(path, "rb") as mine, open(_golden("plain.rec"), "rb") as theirs:
        assert mine.read() == theirs.read()


def test_indexed_read_and_write_match_mxnet(tmp_path):
    reader = mx.recordio.MXIndexedRecordIO(_golden("indexed.idx"), _golden("indexed.rec"), "r")
    items = recipe.indexed_items()
    assert reader.keys == [k for k, _, _ in items]
    for key, header, payload in reversed(items):
        got_header, got_payload = mx.recordio.unpack(reader.read_idx(key))
        assert got_payload == payload
        assert (got_header.id, got_header.id2) == (header[2], header[3])
        np.testing.assert_array_equal(np.atleast_1d(got_header.label),
                                      np.atleast_1d(np.float32(header[1])))
        if isinstance(header[1], list):
            assert got_header.flag == len(header[1])
    idx, rec = str(tmp_path / "i.idx"), str(tmp_path / "i.rec")
    writer = mx.recordio.MXIndexedRecordIO(idx, rec, "w")
    for key, header, payload in items:
        writer.write_idx(key, mx.recordio.pack(mx.recordio.IRHeader(*header), payload))
    writer.close()
    for mine, theirs in ((rec, "indexed.rec"), (idx, "indexed.idx")):
        with open(mine, "rb") as a, open(_golden(theirs), "rb") as b:
            assert a.read() == b.read()


def test_pack_img_bytes_match_mxnet(tmp_path):
    png, jpg = str(tmp_path / "png.rec"), str(tmp_path / "jpg.rec")
    w_png, w_jpg = mx.recordio.MXRecordIO(png, "w"), mx.recordio.MXRecordIO(jpg, "w")
    for k, img in enumerate(recipe.test_images()):
        header = mx.recordio.IRHeader(0, [float(k), 2.0 * k + 1], k, 0)
        w_png.write(mx.recordio.pack_img(header, img, quality=3, img_fmt=".png"))
        w_jpg.write(mx.recordio.pack_img(mx.recordio.IRHeader(0, float(k), k, 0), img,
                                         quality=90, img_fmt=".jpg"))
    w_png.close()
    w_jpg.close()
    for mine, theirs in ((png, "images_png.rec"), (jpg, "images_jpg.rec")):
        with open(mine, "rb") as a, open(_golden(theirs), "rb") as b:
            assert a.read() == b.read()


def test_unpack_img_roundtrip_png_exact():
    reader = mx.recordio.MXIndexedRecordIO(_golden("images_png.idx"),
                                           _golden("images_png.rec"), "r")
    for k, img in enumerate(recipe.test_images()):
        header, decoded = mx.recordio.unpack_img(reader.read_idx(k))
        np.testing.assert_array_equal(decoded, img)  # BGR, as MXNet returns it
        np.testing.assert_array_equal(header.label, [k, 2 * k + 1])
        _, gray = mx.recordio.unpack_img(reader.read_idx(k), iscolor=0)
        assert gray.shape == img.shape[:2]


def test_magic_word_inside_records_roundtrip(tmp_path):
    magic = struct.pack("<I", 0xCED7230A)
    payloads = [magic * 5, b"a" + magic * 3, magic + b"abc", bytes(range(256)) * 3 + magic]
    path = str(tmp_path / "m.rec")
    writer = mx.recordio.MXRecordIO(path, "w")
    for p in payloads:
        writer.write(p)
    writer.close()
    assert _read_all(mx.recordio.MXRecordIO(path, "r")) == payloads
    spans = mx.recordio.scan_records(path)
    assert len(spans) == len(payloads)
    assert sum(s for _, s in spans) == os.path.getsize(path)


def test_pack_unpack_labels():
    rng = np.random.RandomState(3)
    for n in (1, 2, 7):
        label = rng.uniform(size=n).astype(np.float32)
        header, body = mx.recordio.unpack(mx.recordio.pack((0, label, 5, 0), b"xyz"))
        np.testing.assert_array_equal(header.label, label)
        assert (header.flag, header.id, body) == (n, 5, b"xyz")
    header, body = mx.recordio.unpack(mx.recordio.pack((9, 3.5, 1, 2), b""))
    assert header == (0, 3.5, 1, 2) and body == b""


def test_tell_offsets_and_pickle(tmp_path):
    idx, rec = str(tmp_path / "t.idx"), str(tmp_path / "t.rec")
    writer = mx.recordio.MXIndexedRecordIO(idx, rec, "w")
    assert writer.tell() == 0
    for i in range(5):
        writer.write_idx(i, b"record_%d" % i)
        assert writer.tell() == 16 * (i + 1)
    writer.close()
    reader = mx.recordio.MXIndexedRecordIO(idx, rec, "r")
    clone = pickle.loads(pickle.dumps(reader))
    assert clone.read_idx(3) == b"record_3"
    assert reader.read_idx(4) == b"record_4"


def test_bad_flag_and_missing_files(tmp_path):
    with pytest.raises(ValueError):
        mx.recordio.MXRecordIO(str(tmp_path / "x.rec"), "a")
    with pytest.raises(MXNetError, match="nope.rec"):
        mx.recordio.MXRecordIO(str(tmp_path / "nope.rec"), "r")
    open(tmp_path / "r.rec", "wb").close()
    with pytest.raises(MXNetError, match="nope.idx"):
        mx.recordio.MXIndexedRecordIO(str(tmp_path / "nope.idx"), str(tmp_path / "r.rec"), "r")


def _write(path, payloads):
    writer = mx.recordio.MXRecordIO(str(path), "w")
    for p in payloads:
        writer.write(p)
    writer.close()
    with open(path, "rb") as f:
        return f.read()


def test_truncated_and_corrupt_records_name_file_and_offset(tmp_path):
    raw = _write(tmp_path / "ok.rec", [b"a" * 10, b"b" * 20])
    cut = tmp_path / "cut.rec"
    cut.write_bytes(raw[:-5])
    reader = mx.recordio.MXRecordIO(str(cut), "r")
    assert reader.read() == b"a" * 10
    with pytest.raises(MXNetError, match=r"cut.rec.*byte 20.*truncated"):
        reader.read()
    with pytest.raises(MXNetError, match=r"cut.rec.*record 1 at byte 20 is truncated"):
        mx.recordio.scan_records(str(cut))
    bad = tmp_path / "bad.rec"
    bad.write_bytes(raw[:20] + b"\0\0\0\0" + raw[24:])
    reader = mx.recordio.MXRecordIO(str(bad), "r")
    reader.read()
    with pytest.raises(MXNetError, match=r"bad.rec.*no magic word at byte 20"):
        reader.read()
    with pytest.raises(MXNetError, match="record 1"):
        mx.recordio.scan_records(str(bad))
    with pytest.raises(MXNetError, match="shorter than its 24-byte header"):
        mx.recordio.unpack(b"short")
    with pytest.raises(MXNetError, match="announces 4 labels"):
        mx.recordio.unpack(struct.pack("<IfQQ", 4, 0, 0, 0) + b"abc")


def test_bad_index_lines_and_keys(tmp_path):
    rec = tmp_path / "k.rec"
    _write(rec, [b"abc"])
    idx = tmp_path / "k.idx"
    idx.write_text("0\t0\nbroken line\n")
    with pytest.raises(MXNetError, match=r"k.idx line 2"):
        mx.recordio.MXIndexedRecordIO(str(idx), str(rec), "r")
    idx.write_text("0\t0\n1\t400\n")
    reader = mx.recordio.MXIndexedRecordIO(str(idx), str(rec), "r")
    with pytest.raises(KeyError):
        reader.read_idx(7)
    with pytest.raises(MXNetError, match="past the last record"):
        reader.read_idx(1)


def test_writer_refuses_other_process_and_huge_records(tmp_path):
    writer = mx.recordio.MXRecordIO(str(tmp_path / "w.rec"), "w")
    writer.pid = -1
    with pytest.raises(RuntimeError, match="multiple processes"):
        writer.write(b"x")
    with pytest.raises(MXNetError, match="2\\*\\*29"):
        mx.recordio._encode_record(memoryview(bytearray(1 << 29)))
