"""mx.io.ImageRecordIter: MXNet 1.9.1's batches on golden files, augmentation properties,
determinism across worker counts, reset, parts and bad data."""
import gc
import os
import sys
import threading

import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "fixtures", "recordio")
sys.path.insert(0, os.path.join(HERE, "fixtures"))
import make_recordio_golden as recipe  # noqa: E402

cv2 = pytest.importorskip("cv2")
PNG = os.path.join(GOLDEN, "images_png.rec")


@pytest.fixture(scope="module")
def golden():
    return np.load(os.path.join(GOLDEN, "golden.npz"))


@pytest.mark.parametrize("case", sorted(recipe.ITER_CASES))
def test_matches_mxnet_batches(golden, case):
    it = mx.io.ImageRecordIter(path_imgrec=PNG, **recipe.ITER_CASES[case])
    for epoch in range(2):
        count = 0
        for b, batch in enumerate(it):
            key = "%s/e%d/b%d/" % (case, epoch, b)
            want = golden[key + "data"]
            keep = want.shape[0] - (batch.pad if case == "noround" else 0)
            np.testing.assert_array_equal(batch.data[0].asnumpy()[:keep], want[:keep])
            np.testing.assert_array_equal(batch.label[0].asnumpy()[:keep],
                                          golden[key + "label"][:keep])
            if case != "noround":  # MXNet reports pad 0 there; lightmod counts the zeros
                assert batch.pad == int(golden[key + "pad"])
            else:
                assert not batch.data[0].asnumpy()[keep:].any()
            count += 1
        assert count == len([k for k in golden.files
                             if k.startswith("%s/e%d/" % (case, epoch)) and k.endswith("data")])
        it.reset()


def test_jpeg_decode_matches_mxnet(golden):
    it = mx.io.ImageRecordIter(path_imgrec=os.path.join(GOLDEN, "images_jpg.rec"),
                               **recipe.JPG_CASES["jpg_center"])
    batch = it.next()
    np.testing.assert_allclose(batch.data[0].asnumpy(), golden["jpg_center/e0/b0/data"], atol=2)
    np.testing.assert_array_equal(batch.label[0].asnumpy(), np.arange(6))


def _epoch(it):
    return [(b.data[0].asnumpy(), b.label[0].asnumpy()) for b in it]


AUG = dict(data_shape=(3, 20, 20), batch_size=4, rand_crop=True, rand_mirror=True,
           max_rotate_angle=10, max_shear_ratio=0.1, max_random_scale=1.2, min_random_scale=0.9,
           max_aspect_ratio=0.2, brightness=0.2, contrast=0.2, saturation=0.2, pca_noise=0.1,
           random_h=10, random_s=20, random_l=20, pad=2, shuffle=True, label_width=2)


def test_same_seed_same_batches_whatever_the_threads():
    runs = []
    for threads in (1, 2, 3):
        it = mx.io.ImageRecordIter(path_imgrec=PNG, seed=5, preprocess_threads=threads,
                                   prefetch_buffer=threads, **AUG)
        runs.append(_epoch(it) + (it.reset() or _epoch(it)))
    for other in runs[1:]:
        for (d0, l0), (d1, l1) in zip(runs[0], other):
            np.testing.assert_array_equal(d0, d1)
            np.testing.assert_array_equal(l0, l1)
    other_seed = _epoch(mx.io.ImageRecordIter(path_imgrec=PNG, seed=6, **AUG))
    assert any(not np.array_equal(a[0], b[0]) for a, b in zip(runs[0], other_seed))
    # the second epoch draws new augmentations
    assert any(not np.array_equal(runs[0][i][0], runs[0][i + 2][0]) for i in range(2))


def test_seed_aug_overrides_seed():
    kw = dict(AUG, shuffle=False)
    a = _epoch(mx.io.ImageRecordIter(path_imgrec=PNG, seed=1, seed_aug=3, **kw))
    b = _epoch(mx.io.ImageRecordIter(path_imgrec=PNG, seed=2, seed_aug=3, **kw))
    for (d0, _), (d1, _) in zip(a, b):
        np.testing.assert_array_equal(d0, d1)


def test_rand_crop_and_mirror_are_windows_of_the_image():
    images = [img[:, :, ::-1] for img in recipe.test_images()]  # RGB
    it = mx.io.ImageRecordIter(path_imgrec=PNG, data_shape=(3, 16, 16), batch_size=6,
                               rand_crop=True, rand_mirror=True, label_width=2, seed=11)
    mirrored = 0
    for _ in range(3):
        batch = it.next()
        data = batch.data[0].asnumpy().transpose(0, 2, 3, 1)
        for k in range(6):
            img = images[int(batch.label[0].asnumpy()[k, 0])]
            found = None
            for y in range(img.shape[0] - 15):
                for x in range(img.shape[1] - 15):
                    win = img[y:y + 16, x:x + 16]
                    if np.array_equal(win, data[k]):
                        found = "plain"
                    elif np.array_equal(win[:, ::-1], data[k]):
                        found = "mirror"
            assert found is not None
            mirrored += found == "mirror"
        it.reset()
    assert 0 < mirrored < 18


def test_mirror_and_dtype_uint8():
    plain = mx.io.ImageRecordIter(path_imgrec=PNG, data_shape=(3, 24, 24), batch_size=6,
                                  label_width=2).next().data[0].asnumpy()
    flip = mx.io.ImageRecordIter(path_imgrec=PNG, data_shape=(3, 24, 24), batch_size=6,
                                 label_width=2, mirror=True).next().data[0].asnumpy()
    np.testing.assert_array_equal(flip, plain[:, :, :, ::-1])
    raw = mx.io.ImageRecordIter(path_imgrec=PNG, data_shape=(3, 24, 24), batch_size=6,
                                label_width=2, dtype="uint8", mean_r=50).next().data[0]
    assert raw.dtype == np.uint8
    np.testing.assert_array_equal(raw.asnumpy(), plain.astype(np.uint8))
    gray = mx.io.ImageRecordIter(path_imgrec=PNG, data_shape=(1, 24, 24), batch_size=6,
                                 label_width=2).next().data[0].asnumpy()
    want = [cv2.cvtColor(img, cv2.COLOR_BGR2GRAY) for img in recipe.test_images()]
    for k in range(6):
        h, w = want[k].shape
        y, x = (h - 24) // 2, (w - 24) // 2
        np.testing.assert_allclose(gray[k, 0], want[k][y:y + 24, x:x + 24], atol=1)


def test_random_resized_crop_and_crop_size_range_shapes():
    it = mx.io.ImageRecordIter(path_imgrec=PNG, data_shape=(3, 18, 18), batch_size=6,
                               random_resized_crop=True, min_random_area=0.3,
                               max_aspect_ratio=0.3, label_width=2)
    assert it.next().data[0].shape == (6, 3, 18, 18)
    it = mx.io.ImageRecordIter(path_imgrec=PNG, data_shape=(3, 12, 12), batch_size=6,
                               min_crop_size=20, max_crop_size=28, rand_crop=True,
                               label_width=2)
    data = it.next().data[0].asnumpy()
    assert data.shape == (6, 3, 12, 12) and data.max() <= 255 and data.min() >= 0
    with pytest.raises(MXNetError, match="conflicts"):
        mx.io.ImageRecordIter(path_imgrec=PNG, data_shape=(3, 18, 18), batch_size=2,
                              random_resized_crop=True, rand_crop=True)


def test_reset_mid_epoch_and_parts():
    kw = dict(data_shape=(3, 20, 20), batch_size=2, label_width=2)
    it = mx.io.ImageRecordIter(path_imgrec=PNG, **kw)
    first = it.next().label[0].asnumpy()
    it.next()
    it.reset()
    np.testing.assert_array_equal(it.next().label[0].asnumpy(), first)
    assert len(list(it)) == 2
    seen = []
    for part in range(3):
        part_it = mx.io.ImageRecordIter(path_imgrec=PNG, num_parts=3, part_index=part, **kw)
        seen += [lab[0] for b in part_it for lab in b.label[0].asnumpy()]
    assert sorted(seen) == list(range(6))


def _worker_threads(it):
    return [t for t in threading.enumerate() if t in it._pool._threads]


def test_workers_exit_on_delete_and_errors(tmp_path):
    it = mx.io.ImageRecordIter(path_imgrec=PNG, data_shape=(3, 20, 20), batch_size=2,
                               label_width=2, preprocess_threads=3)
    it.next()
    workers = _worker_threads(it)
    assert len(workers) >= 1
    del it
    gc.collect()
    for t in workers:
        t.join(10)
    assert not any(t.is_alive() for t in workers)
    # a record whose image does not decode: error names the file and record, then stops cleanly
    path = str(tmp_path / "bad.rec")
    writer = mx.recordio.MXRecordIO(path, "w")
    writer.write(mx.recordio.pack_img((0, 1.0, 0, 0), recipe.test_images()[0]))
    writer.write(mx.recordio.pack((0, 2.0, 1, 0), b"not a jpeg at all"))
    writer.close()
    it = mx.io.ImageRecordIter(path_imgrec=path, data_shape=(3, 20, 20), batch_size=1,
                               preprocess_threads=2)
    it.next()
    workers = _worker_threads(it)
    with pytest.raises(MXNetError, match=r"bad.rec record 1 .*cannot decode|cannot decode.*"
                                         r"bad.rec record 1"):
        it.next()
    it.reset()
    assert it.next().label[0].asnumpy()[0] == 1.0
    it.close()
    assert not any(t.is_alive() for t in workers)


def test_bad_files_and_parameters(tmp_path):
    raw = open(PNG, "rb").read()
    cut = tmp_path / "cut.rec"
    cut.write_bytes(raw[:-9])
    with pytest.raises(MXNetError, match=r"cut.rec: RecordIO record 5 at byte 1032 is truncated"):
        mx.io.ImageRecordIter(path_imgrec=str(cut), data_shape=(3, 20, 20), batch_size=2)
    idx = tmp_path / "wrong.idx"
    idx.write_text("0\t0\n1\t177\n")
    with pytest.raises(MXNetError, match=r"wrong.idx line 2: offset 177 is not the start"):
        mx.io.ImageRecordIter(path_imgrec=PNG, path_imgidx=str(idx), data_shape=(3, 20, 20),
                              batch_size=2)
    with pytest.raises(MXNetError, match="does not exist"):
        mx.io.ImageRecordIter(path_imgrec=str(tmp_path / "none.rec"), data_shape=(3, 2, 2),
                              batch_size=2)
    with pytest.raises(MXNetError, match="Cannot find argument 'rand_crops'"):
        mx.io.ImageRecordIter(path_imgrec=PNG, data_shape=(3, 2, 2), batch_size=2,
                              rand_crops=True)
    with pytest.raises(MXNetError, match="shuffle_chunk_size=100"):
        mx.io.ImageRecordIter(path_imgrec=PNG, data_shape=(3, 2, 2), batch_size=2,
                              shuffle_chunk_size=100)
    with pytest.raises(MXNetError, match="data_shape"):
        mx.io.ImageRecordIter(path_imgrec=PNG, data_shape=(5, 28, 28), batch_size=2)
    with pytest.raises(MXNetError, match="part_index"):
        mx.io.ImageRecordIter(path_imgrec=PNG, data_shape=(3, 8, 8), batch_size=2,
                              num_parts=2, part_index=2)
    with pytest.raises(MXNetError, match="label_width is 3"):
        mx.io.ImageRecordIter(path_imgrec=PNG, data_shape=(3, 8, 8), batch_size=2,
                              label_width=3).next()
    with pytest.raises(MXNetError, match="smaller than data_shape"):
        mx.io.ImageRecordIter(path_imgrec=PNG, data_shape=(3, 60, 60), batch_size=2).next()


def test_mean_img_is_computed_saved_and_subtracted(tmp_path):
    mean_path = str(tmp_path / "mean.bin")
    kw = dict(path_imgrec=PNG, data_shape=(3, 24, 24), batch_size=6, label_width=2)
    plain = mx.io.ImageRecordIter(**kw).next().data[0].asnumpy()
    it = mx.io.ImageRecordIter(mean_img=mean_path, **kw)
    saved = mx.nd.load(mean_path)["mean_img"].asnumpy()
    np.testing.assert_allclose(saved, plain.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(it.next().data[0].asnumpy(), plain - saved, atol=1e-4)
    again = mx.io.ImageRecordIter(mean_img=mean_path, std_r=2.0, **kw).next().data[0].asnumpy()
    np.testing.assert_allclose(again[:, 0], (plain - saved)[:, 0] / 2, atol=1e-4)


def test_random_contrast_and_illumination_are_affine_per_image():
    kw = dict(path_imgrec=PNG, data_shape=(3, 24, 24), batch_size=6, label_width=2, mean_r=100,
              std_g=2.0, scale=0.5)
    plain = mx.io.ImageRecordIter(**kw).next().data[0].asnumpy()
    jit = mx.io.ImageRecordIter(max_random_contrast=0.3, max_random_illumination=20,
                                **kw).next().data[0].asnumpy()
    mult = np.array([0.5, 0.25, 0.5])[:, None, None]
    for k in range(6):
        # jit = plain * contrast + illumination * scale / std, with one (contrast, light) per image
        contrast = np.polyfit(plain[k, 0].ravel(), jit[k, 0].ravel(), 1)[0]
        light = (jit[k] - plain[k] * contrast) / mult
        assert 0.7 <= contrast <= 1.3 and abs(contrast - 1) > 1e-6
        np.testing.assert_allclose(light, light[0, 0, 0], atol=1e-3)
        assert abs(light[0, 0, 0]) <= 20


def test_cifar_like_label_counts_with_threads_and_mean_img(tmp_path):
    """MXNet's test_Cifar10Rec on a generated file: every label seen equally often with
    4 threads and a prefetch buffer of 1, mean_img computed on the way."""
    path = str(tmp_path / "c.rec")
    writer = mx.recordio.MXRecordIO(path, "w")
    rng = np.random.RandomState(0)
    for k in range(200):
        img = rng.randint(0, 256, size=(32, 32, 3)).astype(np.uint8)
        writer.write(mx.recordio.pack_img((0, float(k % 10), k, 0), img, quality=90))
    writer.close()
    it = mx.io.ImageRecordIter(path_imgrec=path, mean_img=str(tmp_path / "mean.bin"),
                               rand_crop=False, rand_mirror=False, shuffle=False,
                               data_shape=(3, 28, 28), batch_size=20, preprocess_threads=4,
                               prefetch_buffer=1)
    counts = np.zeros(10, int)
    for batch in it:
        assert np.isfinite(batch.data[0].asnumpy()).all()
        counts += np.bincount(batch.label[0].asnumpy().astype(int), minlength=10)
    assert (counts == 20).all()
