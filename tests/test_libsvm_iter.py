"""mx.io.LibSVMIter against MXNet 1.9.1's batches (golden), a Python reference parser on a
generated news20-like file, and bad lines."""
import os
import sys

import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "fixtures", "recordio")
sys.path.insert(0, os.path.join(HERE, "fixtures"))
import make_recordio_golden as recipe  # noqa: E402


@pytest.mark.parametrize("case", sorted(recipe.LIBSVM_CASES))
def test_matches_mxnet_batches(case):
    golden = np.load(os.path.join(GOLDEN, "golden.npz"))
    kwargs = dict(recipe.LIBSVM_CASES[case])
    if "label_shape" in kwargs:
        kwargs["label_libsvm"] = os.path.join(GOLDEN, "sample_label.libsvm")
    it = mx.io.LibSVMIter(data_libsvm=os.path.join(GOLDEN, "sample.libsvm"), **kwargs)
    for epoch in range(2):
        seen = 0
        for b, batch in enumerate(it):
            key = "%s/e%d/b%d/" % (case, epoch, b)
            assert batch.data[0].stype == "csr"
            np.testing.assert_array_equal(batch.data[0].asnumpy(), golden[key + "data"])
            np.testing.assert_array_equal(batch.label[0].asnumpy(), golden[key + "label"])
            assert batch.pad == int(golden[key + "pad"])
            seen += 1
        assert "%s/e%d/b%d/data" % (case, epoch, seen) not in golden.files
        it.reset()


def test_mxnet_synthetic_case(tmp_path):
    data, label = tmp_path / "data.t", tmp_path / "label.t"
    data.write_text("1.0 0:0.5 2:1.2\n-2.0\n-3.0 0:0.6 1:2.4 2:1.2\n4 2:-1.2\n")
    label.write_text("1.0\n-2.0 0:0.125\n-3.0 2:1.2\n4 1:1.0 2:-1.2\n")
    it = mx.io.LibSVMIter(data_libsvm=str(data), label_libsvm=str(label), data_shape=(3,),
                          label_shape=(3,), batch_size=3)
    first = [[0.5, 0., 1.2], [0., 0., 0.], [0.6, 2.4, 1.2]]
    second = [[0., 0., -1.2], [0.5, 0., 1.2], [0., 0., 0.]]
    batches = [it.getdata().asnumpy() for _ in iter(it.iter_next, False)]
    np.testing.assert_allclose(batches, np.array([first, second], np.float32))
    it.reset()
    assert it.iter_next()
    it.getdata().check_format(True)


def _reference_rows(lines, width):
    labels, dense = [], []
    for line in lines:
        fields = line.split()
        labels.append(float(fields[0]))
        row = np.zeros(width, np.float32)
        for feat in fields[1:]:
            idx, val = feat.split(":")
            row[int(idx)] = float(val)
        dense.append(row)
    return np.array(labels, np.float32), np.array(dense)


def test_news20_like_file_against_reference(tmp_path):
    rng = np.random.RandomState(0)
    width, rows, batch = 62061, 3993, 33
    lines = []
    for _ in range(rows):
        cols = np.sort(rng.choice(width, size=rng.randint(0, 40), replace=False))
        vals = rng.uniform(-3, 3, size=cols.size)
        feats = " ".join("%d:%s" % (c, fmt % v) for c, v, fmt in
                         zip(cols, vals, rng.choice(["%.6g", "%.3e", "%.2f"], size=cols.size)))
        lines.append(("%d %s" % (rng.randint(1, 21), feats)).rstrip())
    path = tmp_path / "news.t"
    path.write_text("\n".join(lines) + "\n")
    want_labels, want_data = _reference_rows(lines, width)
    it = mx.io.LibSVMIter(data_libsvm=str(path), data_shape=(width,), batch_size=batch)
    for _ in range(2):
        count = 0
        for b in it:
            lo = count * batch
            np.testing.assert_allclose(b.data[0].asnumpy(), want_data[lo:lo + batch], rtol=1e-6)
            np.testing.assert_array_equal(b.label[0].asnumpy(), want_labels[lo:lo + batch])
            count += 1
        assert count == rows // batch
        it.reset()


def test_parts_round_batch_and_blank_lines(tmp_path):
    path = tmp_path / "d.t"
    path.write_text("\n".join("%d %d:1" % (k, k % 4) for k in range(7)) + "\n\n")
    seen = []
    for part in range(2):
        it = mx.io.LibSVMIter(data_libsvm=str(path), data_shape=(4,), batch_size=2,
                              num_parts=2, part_index=part, round_batch=False)
        for b in it:
            seen += list(b.label[0].asnumpy()[:2 - b.pad])
            if b.pad:
                assert not b.data[0].asnumpy()[2 - b.pad:].any()
    assert sorted(seen) == list(range(7))


@pytest.mark.parametrize("line,message", [
    ("-3.0 -1:0.6 1:2.4", "line 3: a feature index is not a non-negative integer"),
    ("2 1:abc", "line 3: a feature value is not a number"),
    ("2 1 2:3", "line 3: a feature has no ':'"),
    ("x 1:2", "line 3: the label is not a number"),
    ("2 1:2e", "line 3: a feature value is not a number"),
])
def test_bad_lines_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.t"
    path.write_text("1 0:1\n-2.0\n%s\n4 2:-1.2\n" % line)
    with pytest.raises(MXNetError, match="bad.t line 3"):
        mx.io.LibSVMIter(data_libsvm=str(path), data_shape=(3,), batch_size=3)
    with pytest.raises(MXNetError, match=message):
        mx.io.LibSVMIter(data_libsvm=str(path), data_shape=(3,), batch_size=3)


def test_other_bad_inputs(tmp_path):
    path = tmp_path / "d.t"
    path.write_text("1 0:1\n2 5:1\n")
    with pytest.raises(MXNetError, match=r"feature index 5 in row 2 \(non-blank lines counted "
                                         r"from 1\) is out of range"):
        mx.io.LibSVMIter(data_libsvm=str(path), data_shape=(3,), batch_size=1)
    with pytest.raises(MXNetError, match="cannot read"):
        mx.io.LibSVMIter(data_libsvm=str(tmp_path / "none"), data_shape=(3,), batch_size=1)
    label = tmp_path / "l.t"
    label.write_text("1 0:1\n")
    with pytest.raises(MXNetError, match="has 2 rows but"):
        mx.io.LibSVMIter(data_libsvm=str(path), data_shape=(6,), label_libsvm=str(label),
                         label_shape=(2,), batch_size=1)
    with pytest.raises(MXNetError, match="batch_size"):
        mx.io.LibSVMIter(data_libsvm=str(path), data_shape=(6,))
    it = mx.io.LibSVMIter(data_libsvm=str(path), data_shape=(6,), batch_size=1)
    with pytest.raises(MXNetError, match="no current batch"):
        it.getdata()
