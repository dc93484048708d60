"""mx.image on generated image files: the checks MXNet's test_image.py runs on its downloaded
images (decoding and resizing against OpenCV, borders, crops, rotation, augmenters, ImageIter
batch handling), plus bad inputs."""
import json
import random

import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError

cv2 = pytest.importorskip("cv2")


@pytest.fixture(scope="module")
def image_files(tmp_path_factory):
    """16 JPEG/PNG files of different sizes (MXNet's test set also has 16)."""
    root = tmp_path_factory.mktemp("images")
    rng = np.random.RandomState(0)
    paths = []
    for k in range(16):
        h, w = int(rng.randint(40, 90)), int(rng.randint(40, 90))
        small = rng.randint(0, 256, size=(4, 4, 3)).astype(np.uint8)
        img = cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)
        path = str(root / ("img%02d.%s" % (k, "jpg" if k % 2 else "png")))
        cv2.imwrite(path, img)
        paths.append(path)
    return paths


def test_imread_imdecode_match_opencv(image_files):
    for path in image_files:
        with open(path, "rb") as f:
            raw = f.read()
        bgr = cv2.imread(path)
        np.testing.assert_array_equal(mx.image.imdecode(raw, to_rgb=0).asnumpy(), bgr)
        np.testing.assert_array_equal(mx.image.imdecode(bytearray(raw), to_rgb=0).asnumpy(), bgr)
        as_nd = mx.nd.array(np.frombuffer(raw, np.uint8), dtype=np.uint8)
        np.testing.assert_array_equal(mx.image.imdecode(as_nd).asnumpy(), bgr[:, :, ::-1])
        rgb = mx.img.imread(path)
        assert rgb.dtype == np.uint8 and rgb.shape == bgr.shape
        np.testing.assert_array_equal(rgb.asnumpy(), bgr[:, :, ::-1])
        gray = mx.image.imdecode(raw, flag=0)
        assert gray.shape == bgr.shape[:2] + (1,)
        out = mx.nd.zeros(bgr.shape, dtype=np.uint8)
        mx.image.imread(path, out=out)
        np.testing.assert_array_equal(out.asnumpy(), bgr[:, :, ::-1])


def test_decode_errors(tmp_path):
    with pytest.raises(MXNetError, match="blah.jpg"):
        mx.img.image.imread(str(tmp_path / "blah.jpg"))
    with pytest.raises(MXNetError, match="empty"):
        mx.image.imdecode(b"", to_rgb=0)
    with pytest.raises(MXNetError, match="not a valid image"):
        mx.image.imdecode(b"clearly not image content")
    with pytest.raises(ValueError, match="convert to bytes"):
        mx.image.imdecode("a string")


def test_scale_down():
    assert mx.image.scale_down((640, 480), (720, 120)) == (640, 106)
    assert mx.image.scale_down((360, 1000), (480, 500)) == (360, 375)
    assert mx.image.scale_down((300, 400), (0, 0)) == (0, 0)


def test_resize_short_and_imresize_match_opencv(image_files):
    rng = np.random.RandomState(1)
    for path in image_files[:6]:
        bgr = cv2.imread(path)
        img = mx.nd.array(bgr[:, :, ::-1], dtype=np.uint8)
        h, w = bgr.shape[:2]
        for interp in (0, 1):
            size = int(rng.randint(1, 120))
            new_h, new_w = (size * h // w, size) if h > w else (size, size * w // h)
            want = cv2.resize(bgr, (new_w, new_h), interpolation=interp)
            got = mx.image.resize_short(img, size, interp).asnumpy()[:, :, ::-1]
            np.testing.assert_array_equal(got, want)
            nw, nh = int(rng.randint(1, 120)), int(rng.randint(1, 120))
            want = cv2.resize(bgr, (nw, nh), interpolation=interp)
            np.testing.assert_array_equal(mx.image.imresize(img, nw, nh, interp=interp)
                                          .asnumpy()[:, :, ::-1], want)
            out = mx.nd.zeros((nh, nw, 3), dtype=np.uint8)
            mx.image.imresize(img, nw, nh, interp=interp, out=out)
            np.testing.assert_array_equal(out.asnumpy()[:, :, ::-1], want)
    float_img = mx.nd.array(np.random.RandomState(0).rand(10, 12, 3) * 255)
    assert mx.image.imresize(float_img, 6, 5).dtype == np.float32


def test_copy_make_border_matches_opencv(image_files):
    bgr = cv2.imread(image_files[3])
    img = mx.nd.array(bgr, dtype=np.uint8)
    for border in range(5):
        want = cv2.copyMakeBorder(bgr, 3, 4, 5, 6, borderType=border, value=[9, 9, 9])
        got = mx.image.copyMakeBorder(img, 3, 4, 5, 6, type=border, values=[9, 9, 9])
        np.testing.assert_array_equal(got.asnumpy(), want)
        out = mx.nd.zeros(want.shape, dtype=np.uint8)
        mx.image.copyMakeBorder(img, 3, 4, 5, 6, type=border, values=[9, 9, 9], out=out)
        np.testing.assert_array_equal(out.asnumpy(), want)
    with pytest.raises(MXNetError, match="type must be 0-4"):
        mx.image.copyMakeBorder(img, 1, 1, 1, 1, type=7)


def test_color_normalize_and_aug():
    rng = np.random.RandomState(2)
    src = rng.rand(30, 40, 3) * 255.
    mean, std = rng.rand(3) * 255, rng.rand(3) + 1
    got = mx.image.color_normalize(mx.nd.array(src), mx.nd.array(mean), mx.nd.array(std))
    np.testing.assert_allclose(got.asnumpy(), (src - mean) / std, rtol=1e-4, atol=1e-3)
    aug = mx.image.ColorNormalizeAug(mean=mx.nd.array(mean), std=std)
    np.testing.assert_allclose(aug(mx.nd.array(src)).asnumpy(), (src - mean) / std, atol=1e-3)
    name, params = json.loads(aug.dumps())
    assert name == "colornormalizeaug" and np.allclose(params["std"], std)


def test_crops():
    src = mx.nd.array(np.arange(20 * 30 * 3).reshape(20, 30, 3) % 251, dtype=np.uint8)
    host = src.asnumpy()
    out, (x0, y0, w, h) = mx.image.center_crop(src, (10, 8))
    assert (x0, y0, w, h) == (10, 6, 10, 8)
    np.testing.assert_array_equal(out.asnumpy(), host[6:14, 10:20])
    random.seed(4)
    for _ in range(5):
        out, (x0, y0, w, h) = mx.image.random_crop(src, (12, 9))
        np.testing.assert_array_equal(out.asnumpy(), host[y0:y0 + 9, x0:x0 + 12])
    out, (x0, y0, w, h) = mx.image.center_crop(src, (60, 20))  # larger: shrunk, resized back
    assert (w, h) == (30, 10) and out.shape == (20, 60, 3)
    np.testing.assert_array_equal(mx.image.fixed_crop(src, 2, 3, 4, 5).asnumpy(),
                                  host[3:8, 2:6])
    for _ in range(20):
        out, (x0, y0, w, h) = mx.image.random_size_crop(src, (16, 16), 0.08, (0.75, 1.33))
        assert out.shape == (16, 16, 3)
        assert 0.7 <= w / h <= 1.4 or (x0, y0, w, h) == mx.image.center_crop(src, (16, 16))[1]
    with pytest.raises(ValueError, match="Unknown interp"):
        mx.image.resize_short(src, 10, interp=7)


def test_imrotate_quarter_turn_and_errors():
    rng = np.random.RandomState(3)
    img = rng.rand(2, 9, 9).astype(np.float32)
    got = mx.image.imrotate(mx.nd.array(img), 90).asnumpy()
    # sampling a quarter turn hits grid points exactly: a pure permutation of the pixels
    np.testing.assert_allclose(got, np.rot90(img, k=1, axes=(1, 2)), atol=1e-5)
    batch = mx.nd.array(np.stack([img, img]))
    got = mx.image.imrotate(batch, mx.nd.array([90, 0])).asnumpy()
    np.testing.assert_allclose(got[1], img, atol=1e-5)
    small = mx.image.imrotate(mx.nd.array(img), 45, zoom_out=True).asnumpy()
    assert small[:, 0, 0].max() == 0 and small[:, 4, 4].min() > 0  # whole image kept, smaller
    with pytest.raises(ValueError):
        mx.image.imrotate(mx.nd.array(img), 5, zoom_in=True, zoom_out=True)
    with pytest.raises(TypeError):
        mx.image.imrotate(mx.nd.array(img), mx.nd.array([1, 2]))
    with pytest.raises(TypeError):
        mx.image.imrotate(mx.nd.array(img, dtype=np.float64), 5)
    assert mx.image.random_rotate(batch, [-5, 5]).shape == (2, 2, 9, 9)
    assert mx.image.random_rotate(mx.nd.array(img), [-5, 5]).shape == (2, 9, 9)


def test_augmenters_follow_their_formulas():
    rng = np.random.RandomState(5)
    src = rng.rand(6, 7, 3).astype(np.float32) * 255
    luma = np.array([0.299, 0.587, 0.114])
    for cls, blend in ((mx.image.BrightnessJitterAug, lambda x, a: x * a),
                       (mx.image.ContrastJitterAug,
                        lambda x, a: x * a + (1 - a) * 3.0 * (x * luma).sum() / x.size),
                       (mx.image.SaturationJitterAug,
                        lambda x, a: x * a + (1 - a) * (x * luma).sum(axis=2, keepdims=True))):
        random.seed(8)
        alpha = 1.0 + random.uniform(-0.3, 0.3)
        random.seed(8)
        got = cls(0.3)(mx.nd.array(src)).asnumpy()
        np.testing.assert_allclose(got, blend(src.astype(np.float64), alpha), rtol=1e-4)
    flipped = mx.image.HorizontalFlipAug(1.0)(mx.nd.array(src)).asnumpy()
    np.testing.assert_array_equal(flipped, src[:, ::-1])
    gray = mx.image.RandomGrayAug(1.0)(mx.nd.array(src)).asnumpy()
    np.testing.assert_allclose(gray[:, :, 0], src @ np.array([0.21, 0.72, 0.07]), rtol=1e-5)
    assert mx.image.CastAug("float64")(mx.nd.array(src)).dtype == np.float64
    hue = mx.image.HueJitterAug(0.0)(mx.nd.array(src)).asnumpy()  # zero turn: near identity
    np.testing.assert_allclose(hue, src, atol=1.5)
    np.random.seed(0)
    lit = mx.image.LightingAug(0.1, np.array([55.46, 4.794, 1.148]), np.eye(3))
    np.random.seed(0)
    alpha = np.random.normal(0, 0.1, size=(3,))
    np.random.seed(0)
    np.testing.assert_allclose(lit(mx.nd.array(src)).asnumpy(),
                               src + alpha * np.array([55.46, 4.794, 1.148]), rtol=1e-5)
    names = [type(a).__name__ for a in mx.image.CreateAugmenter(
        (3, 20, 20), resize=30, rand_crop=True, rand_resize=True, rand_mirror=True, mean=True,
        std=True, brightness=0.1, hue=0.1, pca_noise=0.1, rand_gray=0.2)]
    assert names == ["ResizeAug", "RandomSizedCropAug", "HorizontalFlipAug", "CastAug",
                     "ColorJitterAug", "HueJitterAug", "LightingAug", "RandomGrayAug",
                     "ColorNormalizeAug"]


def _last_batch_checks(make):
    it = make(2, "pad")
    for _ in range(3):
        for batch in it:
            assert batch.data[0].shape == (2, 3, 24, 24)
        it.reset()
    assert sum(1 for _ in make(3, "discard")) == 5
    batches = [b.data[0].asnumpy() for b in make(3, "pad")]
    assert len(batches) == 6
    np.testing.assert_array_equal(batches[0][:2], batches[5][1:])
    it = make(3, "roll_over")
    first = [b.data[0].asnumpy() for b in it][0][0]
    it.reset()
    batch = it.next()
    assert batch.pad == 2
    np.testing.assert_array_equal(batch.data[0].asnumpy()[1], first)
    for _ in it:
        pass
    it.reset()
    batch = it.next()
    assert batch.pad == 1
    np.testing.assert_array_equal(batch.data[0].asnumpy()[2], first)
    assert 1 + sum(1 for _ in it) == 6


@pytest.mark.parametrize("source", ["imglist", "path_imglist", "path_imgrec"])
def test_image_iter_last_batch_handles(image_files, tmp_path, source):
    labels = [k % 5 for k in range(16)]
    kwargs = {}
    if source == "imglist":
        kwargs["imglist"] = [[labels[k], p] for k, p in enumerate(image_files)]
    elif source == "path_imglist":
        lst = tmp_path / "images.lst"
        lst.write_text("".join("%d\t%d\t%s\n" % (k, labels[k], p)
                               for k, p in enumerate(image_files)))
        kwargs["path_imglist"] = str(lst)
    else:
        rec = mx.recordio.MXIndexedRecordIO(str(tmp_path / "i.idx"), str(tmp_path / "i.rec"), "w")
        for k, p in enumerate(image_files):
            rec.write_idx(k, mx.recordio.pack_img((0, labels[k], k, 0), cv2.imread(p),
                                                  img_fmt=".png"))
        rec.close()
        kwargs.update(path_imgrec=str(tmp_path / "i.rec"), path_imgidx=str(tmp_path / "i.idx"))

    def make(batch, handle):
        return mx.image.ImageIter(batch, (3, 24, 24), path_root="", last_batch_handle=handle,
                                  dtype="int32", **kwargs)
    _last_batch_checks(make)
    first = make(4, "pad").next()
    np.testing.assert_array_equal(first.label[0].asnumpy(), labels[:4])
    assert first.label[0].dtype == np.int32
    bgr = cv2.imread(image_files[0])
    h, w = bgr.shape[:2]
    y, x = (h - 24) // 2, (w - 24) // 2
    np.testing.assert_array_equal(first.data[0].asnumpy()[0].transpose(1, 2, 0),
                                  bgr[y:y + 24, x:x + 24, ::-1])
    shuffled = mx.image.ImageIter(4, (3, 24, 24), path_root="", shuffle=True, rand_crop=True,
                                  rand_mirror=True, mean=True, std=True, brightness=0.1,
                                  contrast=0.1, saturation=0.1, hue=0.1, pca_noise=0.1,
                                  rand_gray=0.2, inter_method=10, resize=40, **kwargs)
    seen = sorted(lab for b in shuffled for lab in b.label[0].asnumpy()[:4 - b.pad])
    assert seen == sorted(labels)


def test_image_iter_bad_inputs(tmp_path):
    with pytest.raises(ValueError, match="3 channels"):
        mx.image.ImageIter(2, (1, 24, 24), imglist=[[0, "x.png"]])
    with pytest.raises(ValueError, match="length 3"):
        mx.image.ImageIter(2, (24, 24), imglist=[[0, "x.png"]])
    (tmp_path / "broken.jpg").write_bytes(b"garbage")
    it = mx.image.ImageIter(1, (3, 8, 8), imglist=[[0, "broken.jpg"]], path_root=str(tmp_path))
    with pytest.raises(RuntimeError, match="Broken image filename: broken.jpg"):
        it.next()
    lst = tmp_path / "bad.lst"
    lst.write_text("0\tbroken.jpg\n")
    with pytest.raises(MXNetError, match="bad.lst line 1"):
        mx.image.ImageIter(1, (3, 8, 8), path_imglist=str(lst))


def test_missing_opencv_names_the_extra(monkeypatch):
    from lightmod.image import codec
    monkeypatch.setattr(codec, "_CV2", None)
    monkeypatch.setitem(__import__("sys").modules, "cv2", None)
    with pytest.raises(MXNetError, match=r"lightmod\[image\]"):
        mx.image.imdecode(b"\xff\xd8")
    with pytest.raises(MXNetError, match=r"lightmod\[image\]"):
        mx.recordio.unpack_img(mx.recordio.pack((0, 1.0, 0, 0), b"x"))
