"""MXNet's .params format: golden files written by MXNet 1.9.1, files lightmod writes that
MXNet verified byte for byte (tests/fixtures/make_params.py), round trips, corrupt and
truncated files, atomic saves, pickling."""
import hashlib
import importlib.util
import json
import os
import pickle
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import lightmod as mx
from lightmod.base import MXNetError
from lightmod.ndarray import utils as ndutils

FIX = os.path.join(os.path.dirname(__file__), "fixtures")
PARAMS = os.path.join(FIX, "params")
with open(os.path.join(PARAMS, "expected.json")) as _f:
    META = json.load(_f)["files"]
EXPECTED = dict(np.load(os.path.join(PARAMS, "expected.npz")))


def _make_params_module():
    spec = importlib.util.spec_from_file_location("make_params", os.path.join(FIX, "make_params.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _read(name):
    with open(os.path.join(PARAMS, name), "rb") as f:
        return f.read()


# ---------------------------------------------------------------------------------------------
# files MXNet wrote
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fname", sorted(META))
def test_load_mxnet_golden(fname):
    meta = META[fname]
    loaded = mx.nd.load(os.path.join(PARAMS, fname))
    if meta["kind"] == "dict":
        assert isinstance(loaded, dict)
        assert list(loaded) == [it["key"] for it in meta["items"]]     # file order kept
        items = list(loaded.items())
    else:
        assert isinstance(loaded, list) and len(loaded) == len(meta["items"])
        items = [(str(i), a) for i, a in enumerate(loaded)]
    for (key, arr), info in zip(items, meta["items"]):
        want = EXPECTED["%s|%s" % (fname, key)]
        assert arr.context == mx.cpu(0)                # CPU dev_id is ignored
        if "stype" in info:
            assert arr.stype == info["stype"]
        assert arr.shape == tuple(info["shape"]) == want.shape
        got = arr.asnumpy()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fname", ["mx_dtypes_list.params", "mx_checkpoint.params",
                                   "mx_single.params", "mx_empty_list.params",
                                   "mx_empty_dict.params", "mx_sparse.params"])
def test_resave_is_byte_identical(fname, tmp_path):
    loaded = mx.nd.load(os.path.join(PARAMS, fname))
    if fname == "mx_sparse.params":
        # a row_sparse row stored as explicit zeros cannot survive dense emulation
        loaded.pop("rsp_explicit_zero_row")
        raw = ndutils.encode_list(list(loaded.values()), list(loaded.keys()))
        ref = mx.nd.load(os.path.join(PARAMS, fname))
        assert raw != _read(fname)
        np.testing.assert_array_equal(ref["rsp_explicit_zero_row"].data.asnumpy(), [[1, 2]])
        return
    out = str(tmp_path / "x.params")
    mx.nd.save(out, loaded)
    with open(out, "rb") as f:
        assert f.read() == _read(fname)


def test_cpu1_file_records_dev_id_and_loads_on_cpu0():
    raw = _read("mx_cpu1.params")
    # the record's context (dev_type 1, dev_id 1) follows magic, stype and the shape (1 dim)
    assert struct.unpack_from("<ii", raw, 24 + 8 + 4 + 8) == (1, 1)
    assert mx.nd.load(os.path.join(PARAMS, "mx_cpu1.params"))["x"].context == mx.cpu(0)


def test_gpu_record_falls_back_to_cpu_without_cuda(tmp_path):
    raw = bytearray(_read("mx_single.params"))
    off = 24 + 8 + 4 + 3 * 8
    assert struct.unpack_from("<ii", raw, off) == (1, 0)
    struct.pack_into("<ii", raw, off, 2, 0)
    path = tmp_path / "gpu.params"
    path.write_bytes(bytes(raw))
    (arr,) = mx.nd.load(str(path))
    if mx.num_gpus() == 0:
        assert arr.context == mx.cpu(0)
    np.testing.assert_array_equal(arr.asnumpy(), EXPECTED["mx_single.params|0"])


def test_getstate_matches_mxnet_raw_bytes():
    raw = _read("mx_getstate.bin")
    a = mx.nd.array(EXPECTED["mx_getstate.bin|0"])
    assert bytes(a.__getstate__()["handle"]) == raw
    b = mx.nd.NDArray.__new__(mx.nd.NDArray)
    b.__setstate__({"handle": bytearray(raw)})
    np.testing.assert_array_equal(b.asnumpy(), EXPECTED["mx_getstate.bin|0"])
    c = pickle.loads(pickle.dumps(a, protocol=2))
    np.testing.assert_array_equal(c.asnumpy(), a.asnumpy())


# ---------------------------------------------------------------------------------------------
# files lightmod writes, verified by MXNet
# ---------------------------------------------------------------------------------------------
def test_lightmod_writes_the_bytes_mxnet_verified(tmp_path):
    with open(os.path.join(PARAMS, "lightmod_verified.json")) as f:
        verified = json.load(f)["files"]
    paths = _make_params_module().write_lightmod(str(tmp_path))
    assert len(paths) == len(verified)
    for name, path in paths.items():
        rec = verified[name + ".params"]
        assert rec["mxnet_loads"] and rec["bytes_equal_mxnet_save"], rec["problems"]
        with open(path, "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == rec["sha256"], name


# ---------------------------------------------------------------------------------------------
# round trips
# ---------------------------------------------------------------------------------------------
_DTYPES = ["float16", "float32", "float64", "uint8", "int8", "int32", "int64", "bool"]


@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_roundtrip_property(data, tmp_path_factory):
    n = data.draw(st.integers(0, 4))
    arrays = []
    for _ in range(n):
        dtype = data.draw(st.sampled_from(_DTYPES))
        shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=4))
        arr = data.draw(hnp.arrays(np.dtype(dtype), shape))
        arrays.append(mx.nd.array(arr, dtype=dtype))
    as_dict = data.draw(st.booleans())
    path = str(tmp_path_factory.mktemp("rt") / "x.params")
    if as_dict:
        keys = data.draw(st.lists(st.text(min_size=1, max_size=8), min_size=n, max_size=n,
                                  unique=True))
        mx.nd.save(path, dict(zip(keys, arrays)))
    else:
        mx.nd.save(path, arrays)
    loaded = mx.nd.load(path)
    if as_dict and n:
        assert list(loaded) == keys
        loaded = list(loaded.values())
    assert isinstance(loaded, list) and len(loaded) == n
    for a, b in zip(arrays, loaded):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


def test_sparse_roundtrip(tmp_path):
    dense = np.array([[0, 1, 0, 2], [0, 0, 0, 0], [3, 0, 0, 0]], dtype=np.float32)
    data = {"c": mx.nd.array(dense).tostype("csr"),
            "r": mx.nd.array(dense).tostype("row_sparse"),
            "d": mx.nd.array(dense)}
    mx.nd.save(str(tmp_path / "s.params"), data)
    back = mx.nd.load(str(tmp_path / "s.params"))
    assert [back[k].stype for k in "crd"] == ["csr", "row_sparse", "default"]
    assert isinstance(back["c"], mx.nd.sparse.CSRNDArray)
    for k in "crd":
        np.testing.assert_array_equal(back[k].asnumpy(), dense)


def test_single_and_load_frombuffer(tmp_path):
    a = mx.nd.array([[1, 2]])
    mx.nd.save(str(tmp_path / "one"), a)
    (b,) = mx.nd.load(str(tmp_path / "one"))
    np.testing.assert_array_equal(b.asnumpy(), a.asnumpy())
    buf = (tmp_path / "one").read_bytes()
    (c,) = mx.nd.load_frombuffer(buf)
    np.testing.assert_array_equal(c.asnumpy(), a.asnumpy())


def test_save_argument_errors(tmp_path):
    with pytest.raises(TypeError):
        mx.nd.save(str(tmp_path / "x"), {1: mx.nd.zeros(1)})
    with pytest.raises(TypeError):
        mx.nd.save(str(tmp_path / "x"), [np.zeros(1)])
    with pytest.raises(ValueError):
        mx.nd.save(str(tmp_path / "x"), "nope")
    with pytest.raises(MXNetError, match="cannot open"):
        mx.nd.load(str(tmp_path / "missing.params"))


# ---------------------------------------------------------------------------------------------
# corrupt files
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fname", ["mx_sparse.params", "mx_dtypes_list.params",
                                   "hand_prev1.params", "mx_np_shape_v3.params"])
def test_every_truncation_raises(fname, tmp_path):
    raw = _read(fname)
    path = tmp_path / fname
    for cut in range(len(raw)):
        path.write_bytes(raw[:cut])
        with pytest.raises(MXNetError) as err:
            mx.nd.load(str(path))
        assert fname in str(err.value) and "byte" in str(err.value)


@pytest.mark.parametrize("offset,value,what", [
    (0, b"\x13", "bad list magic"),
    (16, b"\xff\xff\xff\xff\xff\xff\xff\x7f", "array count"),
    (24 + 4, b"\x07\x00\x00\x00", "storage type"),
    (24 + 8, b"\x50\x00\x00\x00", "ndim"),
    (24 + 12, b"\xff\xff\xff\xff\xff\xff\x00\x00", "bytes of values"),
    (24 + 8 + 4 + 3 * 8 + 8, b"\x63\x00\x00\x00", "type flag"),
    (24 + 8 + 4 + 3 * 8, b"\x09\x00\x00\x00", "device type"),
])
def test_corrupt_fields_raise(offset, value, what, tmp_path):
    raw = bytearray(_read("mx_single.params"))
    raw[offset:offset + len(value)] = value
    path = tmp_path / "bad.params"
    path.write_bytes(bytes(raw))
    with pytest.raises(MXNetError, match=what):
        mx.nd.load(str(path))


def test_name_count_must_match(tmp_path):
    raw = bytearray(_read("mx_checkpoint.params"))
    names_at = raw.index(b"arg:fc1_weight") - 8 - 8
    struct.pack_into("<Q", raw, names_at, 2)
    path = tmp_path / "bad.params"
    path.write_bytes(bytes(raw))
    with pytest.raises(MXNetError, match="names for"):
        mx.nd.load(str(path))


@settings(max_examples=60, deadline=None)
@given(pos=st.integers(0, 1164), byte=st.integers(0, 255))
def test_random_corruption_never_crashes(pos, byte):
    raw = bytearray(_read("mx_sparse.params"))
    raw[pos] = byte
    try:
        mx.nd.load_frombuffer(bytes(raw))
    except MXNetError:
        pass


# ---------------------------------------------------------------------------------------------
# atomic writes
# ---------------------------------------------------------------------------------------------
def test_save_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.params"
    mx.nd.save(str(path), {"a": mx.nd.ones(3)})
    before = path.read_bytes()

    def boom(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        mx.nd.save(str(path), {"a": mx.nd.zeros(1000)})
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.params"]   # no temp left
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask    # like open(): not forced 0600


def test_zero_dim_arrays_survive_a_resave(tmp_path):
    loaded = mx.nd.load(os.path.join(PARAMS, "mx_np_shape_v3.params"))
    assert loaded[1].shape == ()
    path = str(tmp_path / "v3.params")
    mx.nd.save(path, loaded)
    again = mx.nd.load(path)
    assert again[1].shape == () and again[1].asnumpy() == 1
    np.testing.assert_array_equal(again[0].asnumpy(), loaded[0].asnumpy())
