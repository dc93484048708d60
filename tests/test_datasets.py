"""mx.test_utils' download helpers: local files first, urllib otherwise, clear offline errors."""
import gzip
import http.server
import os
import shutil
import struct
import threading
import urllib.error
import urllib.request
import zipfile

import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError

MNIST_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "mnist")
NAMES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
         "t10k-labels-idx1-ubyte")


@pytest.fixture
def offline(monkeypatch):
    """Any attempt to reach the network fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("the network was used")
    monkeypatch.setattr(urllib.request, "urlopen", refuse)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LIGHTMOD_DATA", raising=False)
    return tmp_path


def _mnist_store(folder, gz):
    """A LIGHTMOD_DATA folder holding the small 23-image set under MNIST's four names."""
    folder.mkdir(exist_ok=True)
    for name in NAMES:
        kind = "images-idx3-ubyte" if "images" in name else "labels-idx1-ubyte"
        src = os.path.join(MNIST_DIR, "small-" + kind)
        if gz:
            with open(src, "rb") as f, gzip.open(str(folder / (name + ".gz")), "wb") as g:
                shutil.copyfileobj(f, g)
        else:
            shutil.copyfile(src, str(folder / name))
    return folder


def test_existing_file_is_used_without_network(workdir, offline):
    (workdir / "d").mkdir()
    (workdir / "d" / "x.bin").write_bytes(b"abc")
    assert mx.test_utils.download("http://example.invalid/a/x.bin", dirname="d") == os.path.join("d", "x.bin")
    assert mx.test_utils.download("http://example.invalid/a/x.bin", fname="d/x.bin") == "d/x.bin"
    (workdir / "y.bin").write_bytes(b"y")
    assert mx.test_utils.download("http://example.invalid/y.bin") == "y.bin"


def test_file_from_data_folder_is_copied(workdir, offline, monkeypatch):
    store = workdir / "store"
    store.mkdir()
    (store / "x.bin").write_bytes(b"stored")
    monkeypatch.setenv("LIGHTMOD_DATA", os.pathsep.join([str(workdir / "missing"), str(store)]))
    path = mx.test_utils.download("http://example.invalid/x.bin", dirname="new/sub")
    assert path == os.path.join("new/sub", "x.bin")
    assert (workdir / "new" / "sub" / "x.bin").read_bytes() == b"stored"


def test_offline_error_names_file_and_folder(workdir, monkeypatch):
    def unreachable(*args, **kwargs):
        raise urllib.error.URLError("Network is unreachable")
    monkeypatch.setattr(urllib.request, "urlopen", unreachable)
    with pytest.raises(MXNetError) as info:
        mx.test_utils.download("http://example.invalid/x.bin", dirname="data", retries=0)
    msg = str(info.value)
    assert "'x.bin'" in msg and str(workdir / "data") in msg and "LIGHTMOD_DATA" in msg
    assert not (workdir / "data" / "x.bin").exists()
    with pytest.raises(MXNetError, match="retries"):
        mx.test_utils.download("http://example.invalid/x.bin", retries=-1)


@pytest.fixture
def http_root(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, "http://127.0.0.1:%d/" % server.server_address[1]
    server.shutdown()
    server.server_close()


def test_download_fetches_over_http_with_urllib(workdir, http_root):
    root, url = http_root
    payload = bytes(range(256)) * 300
    (root / "blob.bin").write_bytes(payload)
    path = mx.test_utils.download(url + "blob.bin", dirname="out")
    assert open(path, "rb").read() == payload
    (root / "blob.bin").write_bytes(b"new")
    assert open(mx.test_utils.download(url + "blob.bin", dirname="out"), "rb").read() == payload
    path = mx.test_utils.download(url + "blob.bin", dirname="out", overwrite=True)
    assert open(path, "rb").read() == b"new"
    with pytest.raises(MXNetError, match="missing.bin"):
        mx.test_utils.download(url + "missing.bin", retries=1)
    assert not os.path.exists("missing.bin")


def test_get_mnist_from_local_gz_matches_numpy(workdir, offline, monkeypatch):
    monkeypatch.setenv("LIGHTMOD_DATA", str(_mnist_store(workdir / "store", gz=True)))
    got = mx.test_utils.get_mnist()
    raw = np.fromfile(os.path.join(MNIST_DIR, "small-images-idx3-ubyte"), np.uint8)[16:]
    labels = np.fromfile(os.path.join(MNIST_DIR, "small-labels-idx1-ubyte"), np.uint8)[8:]
    for split in ("train", "test"):
        np.testing.assert_array_equal(got[split + "_data"], raw.reshape(23, 1, 5, 4).astype(np.float32) / 255)
        assert got[split + "_data"].dtype == np.float32
        np.testing.assert_array_equal(got[split + "_label"], labels.astype(np.int8))
        assert got[split + "_label"].dtype == np.int8
    assert sorted(os.listdir(".")) == sorted(["store"] + [n + ".gz" for n in NAMES])


@pytest.mark.parametrize("gz", [False, True])
def test_get_mnist_ubyte_and_iterator_offline(workdir, offline, monkeypatch, gz):
    monkeypatch.setenv("LIGHTMOD_DATA", str(_mnist_store(workdir / "store", gz=gz)))
    train, val = mx.test_utils.get_mnist_iterator(batch_size=5, input_shape=(20,))
    assert sorted(os.listdir("data")) == sorted(NAMES)
    assert train.provide_data[0].shape == (5, 20) and len(list(train)) == 4
    train, val = mx.test_utils.get_mnist_iterator(batch_size=4, input_shape=(1, 5, 4), num_parts=2,
                                                  part_index=1)
    assert val.provide_data[0].shape == (4, 1, 5, 4) and len(list(val)) == 3


def test_get_mnist_ubyte_unpacks_zip_from_data_folder(workdir, offline, monkeypatch):
    store = workdir / "store"
    store.mkdir()
    with zipfile.ZipFile(str(store / "mnist.zip"), "w") as zf:
        for name in NAMES:
            zf.writestr(name, struct.pack(">ii", 2049, 0))
    monkeypatch.setenv("LIGHTMOD_DATA", str(store))
    mx.test_utils.get_mnist_ubyte()
    assert sorted(os.listdir("data")) == sorted(NAMES + ("mnist.zip",))


def test_get_cifar10_and_pkl_offline(workdir, offline, monkeypatch):
    store = workdir / "store"
    store.mkdir()
    for name in ("train.rec", "test.rec", "train.lst", "test.lst", "mnist.pkl.gz"):
        (store / name).write_bytes(name.encode())
    monkeypatch.setenv("LIGHTMOD_DATA", str(store))
    mx.test_utils.get_cifar10()
    assert (workdir / "data" / "cifar" / "test.lst").read_bytes() == b"test.lst"
    mx.test_utils.get_mnist_pkl()
    assert (workdir / "data" / "mnist.pkl.gz").read_bytes() == b"mnist.pkl.gz"


def test_get_mnist_ubyte_offline_error(workdir, monkeypatch):
    def unreachable(*args, **kwargs):
        raise urllib.error.URLError("no network")
    monkeypatch.setattr(urllib.request, "urlopen", unreachable)
    monkeypatch.setattr("time.sleep", lambda s: None)
    with pytest.raises(MXNetError, match="mnist.zip"):
        mx.test_utils.get_mnist_ubyte()
