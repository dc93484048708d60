"""lightmod im2rec against MXNet 1.9.1's tools/im2rec.py output on the same image tree
(tests/fixtures/make_recordio_golden.py), plus its options and bad inputs."""
import os
import subprocess
import sys

import numpy as np
import pytest

import lightmod as mx
from lightmod import cli
from lightmod.tools import im2rec

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "fixtures", "recordio")
sys.path.insert(0, os.path.join(HERE, "fixtures"))
import make_recordio_golden as recipe  # noqa: E402

cv2 = pytest.importorskip("cv2")


@pytest.fixture()
def tree(tmp_path):
    root = str(tmp_path / "images")
    recipe.write_image_tree(root)
    return tmp_path, root


def _same(path_a, path_b):
    with open(path_a, "rb") as a, open(path_b, "rb") as b:
        return a.read() == b.read()


@pytest.mark.parametrize("threads", [1, 2])
def test_lists_and_records_match_mxnet_im2rec(tree, threads, capsys):
    tmp, root = tree
    prefix = str(tmp / "tree")
    assert cli.main(["im2rec", "--list", "--recursive", "--train-ratio", "0.75", prefix,
                     root]) == 0
    assert "class_c 2" in capsys.readouterr().out
    assert cli.main(["im2rec", "--resize", "24", "--quality", "80", "--center-crop",
                     "--num-thread", str(threads), prefix, root]) == 0
    for name in ("tree_train.lst", "tree_val.lst", "tree_train.rec", "tree_train.idx",
                 "tree_val.rec", "tree_val.idx"):
        assert _same(tmp / name, os.path.join(GOLDEN, name)), name


def test_no_shuffle_chunks_test_split_and_iterating(tree):
    tmp, root = tree
    prefix = str(tmp / "c")
    im2rec.main(["--list", "--recursive", "--no-shuffle", "--chunks", "2", "--train-ratio",
                 "0.5", "--test-ratio", "0.25", prefix, root])
    names = sorted(f for f in os.listdir(tmp) if f.endswith(".lst"))
    assert names == ["c_0_test.lst", "c_0_train.lst", "c_0_val.lst", "c_1_test.lst",
                     "c_1_train.lst", "c_1_val.lst"]
    items = [it for n in names for it in im2rec.read_list(str(tmp / n))]
    assert sorted(it[0] for it in items) == list(range(12))
    first = list(im2rec.read_list(str(tmp / "c_0_test.lst")))
    assert first == [[0, os.path.join("class_a", "img_00.png"), 0.0]]
    im2rec.main(["--encoding", ".png", str(tmp / "c_0_train"), root])
    it = mx.io.ImageRecordIter(path_imgrec=str(tmp / "c_0_train.rec"), data_shape=(3, 24, 24),
                               batch_size=3)
    batch = it.next()
    # PNG keeps pixels: the centre crop of the image each record names
    reader = list(im2rec.read_list(str(tmp / "c_0_train.lst")))
    for k, item in enumerate(reader):
        img = cv2.imread(os.path.join(root, item[1]))[:, :, ::-1]
        h, w = img.shape[:2]
        y, x = (h - 24) // 2, (w - 24) // 2
        np.testing.assert_array_equal(batch.data[0].asnumpy()[k].transpose(1, 2, 0),
                                      img[y:y + 24, x:x + 24])
        assert batch.label[0].asnumpy()[k] == item[2]


def test_pass_through_pack_label_and_skipped_images(tree, capsys):
    tmp, root = tree
    with open(os.path.join(root, "class_b", "broken.png"), "wb") as f:
        f.write(b"not a png")
    lst = tmp / "m.lst"
    lst.write_text("0\t1.5\t2.5\tclass_a/img_00.png\n1\t3\t4\tclass_b/broken.png\n")
    im2rec.main(["--pack-label", str(tmp / "m"), root])
    out = capsys.readouterr().out
    assert "broken.png" in out and "1 images packed" in out and "1 skipped" in out
    rec = mx.recordio.MXIndexedRecordIO(str(tmp / "m.idx"), str(tmp / "m.rec"), "r")
    assert rec.keys == [0]
    header, _ = mx.recordio.unpack(rec.read_idx(0))
    np.testing.assert_array_equal(header.label, [1.5, 2.5])
    im2rec.main(["--pass-through", str(tmp / "m"), root])
    rec = mx.recordio.MXIndexedRecordIO(str(tmp / "m.idx"), str(tmp / "m.rec"), "r")
    header, body = mx.recordio.unpack(rec.read_idx(1))
    assert body == b"not a png" and header.label == 3.0
    with open(os.path.join(root, "class_a", "img_00.png"), "rb") as f:
        assert mx.recordio.unpack(rec.read_idx(0))[1] == f.read()


def test_bad_list_and_missing_inputs(tree, capsys):
    tmp, root = tree
    (tmp / "bad.lst").write_text("0\t1\tclass_a/img_00.png\nxx\tclass_a/img_00.png\n")
    assert im2rec.main([str(tmp / "bad"), root]) == 2
    assert "bad.lst line 2" in capsys.readouterr().err
    assert im2rec.main([str(tmp / "none"), root]) == 2
    assert im2rec.main([str(tmp / "bad"), str(tmp / "nofolder")]) == 2


def test_module_entry_point(tree):
    tmp, root = tree
    out = subprocess.run([sys.executable, "-m", "lightmod.tools.im2rec", "--list", "--no-shuffle",
                          str(tmp / "flat"), os.path.join(root, "class_a")],
                         capture_output=True, text=True, cwd=str(tmp), timeout=120)
    assert out.returncode == 0, out.stderr
    lines = (tmp / "flat.lst").read_text().splitlines()
    assert lines[0] == "0\t0.000000\timg_00.png" and len(lines) == 4
