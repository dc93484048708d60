"""Files other processes may read while this one writes them appear whole or not at all.

The dataset helpers (``mx.test_utils.download``, ``get_mnist_ubyte``, ``get_cifar10``) place
files in folders that test workers and jobs share (``data/`` of the working folder, a download
folder): a process that finds the file there uses it at once, so a file must never be visible
while it is still being written, and two processes writing it must not write into one file.
"""
import os
import shutil
import zipfile

import pytest

from lightmod import _datasets


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LIGHTMOD_DATA", raising=False)
    return tmp_path


def _watch_copies(monkeypatch, target):
    """Record, for every chunked copy, whether ``target`` existed while it ran."""
    seen = []
    copy = shutil.copyfileobj

    def watched(src, dst, *args):
        seen.append(os.path.exists(target))
        return copy(src, dst, *args)
    monkeypatch.setattr(shutil, "copyfileobj", watched)
    return seen


@pytest.mark.parametrize("gz", [False, True])
def test_a_file_copied_from_the_data_folder_appears_whole(workdir, monkeypatch, gz):
    import gzip
    store = workdir / "store"
    store.mkdir()
    payload = bytes(range(256)) * 64
    if gz:
        with gzip.open(str(store / "blob.gz"), "wb") as f:
            f.write(payload)
    else:
        (store / "blob").write_bytes(payload)
    monkeypatch.setenv("LIGHTMOD_DATA", str(store))
    (workdir / "data").mkdir()
    target = str(workdir / "data" / "blob")
    seen = _watch_copies(monkeypatch, target)
    assert _datasets._place_from_local("blob", "data")
    assert seen == [False]                      # not there while being written
    with open(target, "rb") as f:
        assert f.read() == payload
    assert os.listdir(workdir / "data") == ["blob"]


def test_a_download_is_written_under_a_name_of_its_own(workdir, monkeypatch):
    import io

    class Response(io.BytesIO):
        status = 200

    partials = []
    copy = shutil.copyfileobj

    def watched(src, dst, *args):
        partials.append(dst.name)
        assert not os.path.exists("x.bin")
        return copy(src, dst, *args)
    monkeypatch.setattr(shutil, "copyfileobj", watched)
    monkeypatch.setattr(_datasets.urllib.request, "urlopen", lambda url, timeout: Response(b"xyz"))
    for _ in range(2):
        os.makedirs("d", exist_ok=True)
        _datasets._fetch("http://example.invalid/x.bin", "x.bin")
        assert open("x.bin", "rb").read() == b"xyz"
        os.remove("x.bin")
    assert len(set(partials)) == 2 and all(p != "x.bin.part" for p in partials)
    assert sorted(os.listdir(".")) == ["d"]


def test_an_archive_is_unpacked_aside_then_renamed_into_place(workdir, monkeypatch):
    os.makedirs("data")
    with zipfile.ZipFile("data/pack.zip", "w") as zf:
        zf.writestr("cifar/train.rec", b"t" * 1000)
        zf.writestr("cifar/test.rec", b"s" * 10)
    monkeypatch.setattr(_datasets, "download", lambda url, dirname: "data/pack.zip")
    extracted_into = []
    extract = zipfile.ZipFile.extractall

    def watched(self, path=None, *args, **kwargs):
        extracted_into.append(path)
        return extract(self, path, *args, **kwargs)
    monkeypatch.setattr(zipfile.ZipFile, "extractall", watched)
    _datasets._place_archive(os.path.join("data", "cifar"), ["train.rec", "test.rec"], "unused")
    assert len(extracted_into) == 1 and extracted_into[0] != "data"
    assert open("data/cifar/train.rec", "rb").read() == b"t" * 1000
    assert sorted(os.listdir("data")) == ["cifar", "pack.zip"]
