"""mx.io.MNISTIter against MXNet 1.9.1's batches (tests/fixtures/make_mnist_golden.py)."""
import gzip
import json
import os
import shutil
import struct

import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "mnist")
with open(os.path.join(HERE, "mnist_golden.json")) as _f:
    GOLDEN = json.load(_f)


def _paths(prefix, gz=False):
    ext = ".gz" if gz else ""
    return (os.path.join(HERE, prefix + "-images-idx3-ubyte" + ext),
            os.path.join(HERE, prefix + "-labels-idx1-ubyte" + ext))


def _run(it):
    epochs, first, shapes = [], None, None
    for _ in range(2):
        it.reset()
        labels, pads = [], []
        for batch in it:
            labels.append(batch.label[0].asnumpy().tolist())
            pads.append(batch.pad)
            if first is None:
                first = batch.data[0].asnumpy()
                shapes = [list(batch.data[0].shape), list(batch.label[0].shape), str(first.dtype)]
        epochs.append({"labels": labels, "pads": pads})
    return epochs, first, shapes


@pytest.mark.parametrize("case", sorted(GOLDEN["cases"]))
@pytest.mark.parametrize("gz", [False, True])
def test_mnistiter_matches_mxnet(case, gz):
    want = GOLDEN["cases"][case]
    image, label = _paths("small", gz)
    it = mx.io.MNISTIter(image=image, label=label, silent=True, **want["kwargs"])
    epochs, first, shapes = _run(it)
    assert epochs == want["epochs"]
    assert shapes == want["shapes"]
    np.testing.assert_array_equal(first.ravel(), np.asarray(want["first_data"], np.float32))
    assert [[d.name, list(d.shape)] for d in it.provide_data] == want["provide_data"]
    assert [[d.name, list(d.shape)] for d in it.provide_label] == want["provide_label"]


@pytest.mark.parametrize("seed", ["0", "7", "123456"])
def test_mnistiter_shuffle_order_matches_mxnet(seed):
    image, label = _paths("order")
    it = mx.io.MNISTIter(image=image, label=label, batch_size=1000, shuffle=True, seed=int(seed),
                         silent=True, flat=True)
    pixels = np.round(next(iter(it)).data[0].asnumpy() * 256).astype(int)
    assert (pixels[:, 0] * 256 + pixels[:, 1]).tolist() == GOLDEN["orders"][seed]


def test_mnistiter_trains_a_module():
    image, label = _paths("small")
    it = mx.io.MNISTIter(image=image, label=label, batch_size=5, flat=True, silent=True)
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=10), name="softmax")
    mod = mx.mod.Module(net)
    mod.fit(it, num_epoch=2, optimizer_params={"learning_rate": 0.1})
    assert mod.score(it, "acc")[0][0] == "accuracy"


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def test_mnistiter_bad_inputs(tmp_path):
    image, label = _paths("small")
    with pytest.raises(MXNetError, match="does not exist"):
        mx.io.MNISTIter(image=str(tmp_path / "nope"), label=label)
    with pytest.raises(MXNetError, match="magic number 2049, expected 2051"):
        mx.io.MNISTIter(image=label, label=label)
    _write(tmp_path / "short", struct.pack(">iiii", 2051, 10, 5, 4) + b"\0" * 7)
    with pytest.raises(MXNetError, match="truncated"):
        mx.io.MNISTIter(image=str(tmp_path / "short"), label=label)
    _write(tmp_path / "head", b"\0\0")
    with pytest.raises(MXNetError, match="too short"):
        mx.io.MNISTIter(image=str(tmp_path / "head"), label=label)
    _write(tmp_path / "lab3", struct.pack(">ii", 2049, 3) + b"\1\2\3")
    with pytest.raises(MXNetError, match="23 images but label file .* 3 labels"):
        mx.io.MNISTIter(image=image, label=str(tmp_path / "lab3"))
    _write(tmp_path / "badgz", b"\x1f\x8b" + b"junk")
    with pytest.raises(MXNetError, match="gzip"):
        mx.io.MNISTIter(image=str(tmp_path / "badgz"), label=label)
    with pytest.raises(MXNetError, match="batch_size"):
        mx.io.MNISTIter(image=image, label=label, batch_size=0)
    with pytest.raises(MXNetError, match="part_index"):
        mx.io.MNISTIter(image=image, label=label, num_parts=2, part_index=2)
    with pytest.raises(MXNetError, match="float32"):
        mx.io.MNISTIter(image=image, label=label, dtype="float64")
    it = mx.io.MNISTIter(image=image, label=label, batch_size=30, silent=True)
    assert list(it) == []
    with pytest.raises(MXNetError, match="no current batch"):
        it.getdata()


def test_mnistiter_reads_gzip_written_here(tmp_path):
    image, label = _paths("small")
    for src in (image, label):
        with open(src, "rb") as f, gzip.open(str(tmp_path / os.path.basename(src)), "wb") as g:
            shutil.copyfileobj(f, g)
    a = mx.io.MNISTIter(image=image, label=label, batch_size=23, shuffle=False, silent=True)
    b = mx.io.MNISTIter(image=str(tmp_path / os.path.basename(image)),
                        label=str(tmp_path / os.path.basename(label)), batch_size=23, shuffle=False,
                        silent=True)
    np.testing.assert_array_equal(next(a).data[0].asnumpy(), next(b).data[0].asnumpy())
