"""``mx.image``: decoding, resizing, cropping and colour functions on HWC images, the
augmenter classes, ``CreateAugmenter`` and ``ImageIter``.

Images are HWC NDArrays; decoded images are uint8 in RGB order. The work happens on numpy
arrays (OpenCV for decoding, resizing and borders) and results come back as NDArrays on the
CPU. Random choices use Python's ``random`` and numpy's global generator, as MXNet's do.
"""
import json
import logging
import math
import os
import random
import warnings
from numbers import Number

import numpy as np

from .. import recordio
from ..base import MXNetError
from ..io.io import DataBatch, DataDesc, DataIter
from ..io.utils import _auto_interp
from ..ndarray.ndarray import NDArray
from ..ndarray.ndarray import array as nd_array
from . import codec

__all__ = ["imread", "imdecode", "imresize", "scale_down", "copyMakeBorder", "resize_short",
           "fixed_crop", "random_crop", "center_crop", "color_normalize", "random_size_crop",
           "imrotate", "random_rotate", "Augmenter", "SequentialAug", "ResizeAug",
           "ForceResizeAug", "RandomCropAug", "RandomSizedCropAug", "CenterCropAug",
           "RandomOrderAug", "BrightnessJitterAug", "ContrastJitterAug", "SaturationJitterAug",
           "HueJitterAug", "ColorJitterAug", "LightingAug", "ColorNormalizeAug", "RandomGrayAug",
           "HorizontalFlipAug", "CastAug", "CreateAugmenter", "ImageIter"]

_LUMA = np.array([0.299, 0.587, 0.114])


def _host(x):
    """numpy view of an NDArray / array-like."""
    return x.asnumpy() if isinstance(x, NDArray) else np.asarray(x)


def _wrap(host, like=None):
    ctx = like.context if isinstance(like, NDArray) else None
    return NDArray(np.ascontiguousarray(host), ctx)


def _store(result, out):
    """Return ``result`` as an NDArray, written into ``out`` when one is given."""
    if out is None:
        return _wrap(result)
    if tuple(out.shape) != result.shape:
        raise MXNetError("out has shape %s, the result has shape %s"
                         % (tuple(out.shape), result.shape))
    out[:] = result.astype(out.dtype)
    return out


def imread(filename, flag=1, to_rgb=True, out=None):
    """Read and decode an image file to an HWC uint8 NDArray (``flag`` 1: colour, 0: gray,
    -1: as stored; ``to_rgb``: RGB rather than OpenCV's BGR order)."""
    try:
        with open(filename, "rb") as f:
            buf = f.read()
    except OSError as err:
        raise MXNetError("imread: cannot open %s: %s" % (filename, err.strerror)) from None
    return _store(codec.decode(buf, flag, to_rgb, what=filename), out)


def imdecode(buf, flag=1, to_rgb=True, out=None):
    """Decode an encoded image held in bytes, a bytearray, a numpy or an NDArray of uint8
    to an HWC uint8 NDArray (``flag`` and ``to_rgb`` as in ``imread``)."""
    if isinstance(buf, NDArray):
        buf = buf.asnumpy().astype(np.uint8, copy=False)
    elif not isinstance(buf, (bytes, bytearray, np.ndarray)):
        raise ValueError("buf must be of type bytes, bytearray or numpy.ndarray, if you would "
                         "like to input type str, please convert to bytes")
    return _store(codec.decode(bytes(buf) if not isinstance(buf, np.ndarray) else buf, flag,
                               to_rgb), out)


def imresize(src, w, h, interp=1, out=None):
    """``src`` (HWC) resized to width ``w`` and height ``h`` (interp: 0 nearest, 1 bilinear,
    2 bicubic, 3 area, 4 lanczos)."""
    img = _host(src)
    dtype = img.dtype
    if dtype not in (np.uint8, np.float32, np.float64, np.uint16, np.int16):
        img = img.astype(np.float32)
    result = codec.resize(img, w, h, interp).astype(dtype, copy=False)
    return _store(result, out) if out is not None else _wrap(result, src)


def scale_down(src_size, size):
    """Shrink the crop ``size`` = (w, h) so it fits ``src_size`` = (w, h), keeping its
    aspect ratio; returns integer (w, h)."""
    w, h = size
    src_w, src_h = src_size
    if src_h < h:
        w, h = float(w * src_h) / h, src_h
    if src_w < w:
        w, h = src_w, float(h * src_w) / w
    return int(w), int(h)


def copyMakeBorder(src, top, bot, left, right, type=0, values=0.0, out=None):  # noqa: A002
    """Pad an HWC image with OpenCV border ``type`` (0 constant with ``values``, 1 replicate,
    2 reflect, 3 wrap, 4 reflect-101)."""
    cv2 = codec.cv2_module()
    if type not in (0, 1, 2, 3, 4):
        raise MXNetError("copyMakeBorder: type must be 0-4, got %r" % (type,))
    img = _host(src)
    fill = list(values) if isinstance(values, (list, tuple)) else [values] * 4
    result = cv2.copyMakeBorder(img, int(top), int(bot), int(left), int(right), type,
                                value=[float(v) for v in fill] + [0.0] * (4 - len(fill)))
    if result.ndim == 2:
        result = result[:, :, None]
    return _store(result, out) if out is not None else _wrap(result, src)


def _get_interp_method(interp, sizes=()):
    """Resolve the auto modes: 9 picks by direction (cubic up, area down, else bilinear;
    ``sizes`` = (old h, old w, new h, new w)), 10 picks at random."""
    if interp == 9:
        if not sizes:
            return 2
        old_h, old_w, new_h, new_w = sizes
        return _auto_interp(old_h, old_w, new_h, new_w)
    if interp == 10:
        return random.randint(0, 4)
    if interp not in (0, 1, 2, 3, 4):
        raise ValueError("Unknown interp method %d" % interp)
    return interp


def resize_short(src, size, interp=2):
    """Resize so the shorter side is ``size``, keeping the aspect ratio."""
    h, w = src.shape[:2]
    new_h, new_w = (size * h // w, size) if h > w else (size, size * w // h)
    return imresize(src, new_w, new_h, interp=_get_interp_method(interp, (h, w, new_h, new_w)))


def fixed_crop(src, x0, y0, w, h, size=None, interp=2):
    """The ``w`` x ``h`` window at (x0, y0), resized to ``size`` = (w, h) when given."""
    window = _wrap(_host(src)[y0:y0 + h, x0:x0 + w], src)
    if size is not None and (w, h) != tuple(size):
        method = _get_interp_method(interp, (h, w, size[1], size[0]))
        window = imresize(window, size[0], size[1], interp=method)
    return window


def random_crop(src, size, interp=2):
    """A random crop of ``size`` = (w, h) (shrunk to fit, then resized back to ``size``);
    returns ``(image, (x0, y0, w, h))``."""
    h, w = src.shape[:2]
    crop_w, crop_h = scale_down((w, h), size)
    x0 = random.randint(0, w - crop_w)
    y0 = random.randint(0, h - crop_h)
    return fixed_crop(src, x0, y0, crop_w, crop_h, size, interp), (x0, y0, crop_w, crop_h)


def center_crop(src, size, interp=2):
    """The centred crop of ``size`` = (w, h) (shrunk to fit, then resized back to ``size``);
    returns ``(image, (x0, y0, w, h))``."""
    h, w = src.shape[:2]
    crop_w, crop_h = scale_down((w, h), size)
    x0, y0 = int((w - crop_w) / 2), int((h - crop_h) / 2)
    return fixed_crop(src, x0, y0, crop_w, crop_h, size, interp), (x0, y0, crop_w, crop_h)


def color_normalize(src, mean, std=None):
    """``(src - mean) / std`` in place on ``src`` (either may be None)."""
    if mean is not None:
        src -= mean
    if std is not None:
        src /= std
    return src


def random_size_crop(src, size, area, ratio, interp=2, **kwargs):
    """A crop of random area (a fraction in ``area``, or in ``(area, 1)`` for a number) and
    aspect ratio (log-uniform in ``ratio``), resized to ``size``; 10 attempts, then the centre
    crop. Returns ``(image, (x0, y0, w, h))``."""
    if "min_area" in kwargs:
        warnings.warn("`min_area` is deprecated. Please use `area` instead.", DeprecationWarning,
                      stacklevel=2)
        area = kwargs.pop("min_area")
    if kwargs:
        raise AssertionError("unexpected keyword arguments for `random_size_crop`.")
    h, w = src.shape[:2]
    if isinstance(area, Number):
        area = (area, 1.0)
    log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
    for _ in range(10):
        target = random.uniform(area[0], area[1]) * h * w
        aspect = math.exp(random.uniform(log_lo, log_hi))
        crop_w = int(round(math.sqrt(target * aspect)))
        crop_h = int(round(math.sqrt(target / aspect)))
        if crop_w <= w and crop_h <= h:
            x0 = random.randint(0, w - crop_w)
            y0 = random.randint(0, h - crop_h)
            return fixed_crop(src, x0, y0, crop_w, crop_h, size, interp), (x0, y0, crop_w,
                                                                           crop_h)
    return center_crop(src, size, interp)


def _bilinear_rotate(img, angles, zoom):
    """Rotate a float32 NCHW batch by ``angles`` (radians) about the centre with bilinear
    sampling, zero outside the image; ``zoom`` scales the sampling grid per image."""
    n, _, h, w = img.shape
    half_h, half_w = (h - 1) / 2.0, (w - 1) / 2.0
    ys, xs = np.meshgrid(np.arange(h, dtype=np.float64) - half_h,
                         np.arange(w, dtype=np.float64) - half_w, indexing="ij")
    out = np.empty_like(img)
    for k in range(n):
        cos_a, sin_a = math.cos(angles[k]), math.sin(angles[k])
        # normalised grid in [-1, 1], scaled, then back to pixel coordinates
        gx = (xs * cos_a - ys * sin_a) / half_w * zoom[k]
        gy = (xs * sin_a + ys * cos_a) / half_h * zoom[k]
        px = (gx + 1.0) * (w - 1) / 2.0
        py = (gy + 1.0) * (h - 1) / 2.0
        x0, y0 = np.floor(px).astype(np.int64), np.floor(py).astype(np.int64)
        fx, fy = px - x0, py - y0
        acc = np.zeros((img.shape[1], h, w))
        for dy, wy in ((0, 1.0 - fy), (1, fy)):
            for dx, wx in ((0, 1.0 - fx), (1, fx)):
                yy, xx = y0 + dy, x0 + dx
                inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
                vals = img[k][:, np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)]
                acc += np.where(inside, vals * (wy * wx), 0.0)
        out[k] = acc
    return out


def imrotate(src, rotation_degrees, zoom_in=False, zoom_out=False):
    """Rotate float32 CHW images (one, or an NCHW batch) anticlockwise by
    ``rotation_degrees`` (a number, or one angle per image of a batch) with bilinear sampling;
    ``zoom_in`` scales so no empty corner shows, ``zoom_out`` so the whole image stays."""
    if zoom_in and zoom_out:
        raise ValueError("`zoom_in` and `zoom_out` cannot be both True")
    if src.dtype != np.float32:
        raise TypeError("Only `float32` images are supported by this function")
    img = _host(src)
    single = img.ndim == 3
    if single:
        if not isinstance(rotation_degrees, Number):
            raise TypeError("When a single image is passed the rotation angle is required to "
                            "be a scalar.")
        img = img[None]
    elif img.ndim != 4:
        raise ValueError("Only 3D and 4D are supported by this function")
    if isinstance(rotation_degrees, Number):
        degrees = np.full(img.shape[0], float(rotation_degrees))
    else:
        degrees = _host(rotation_degrees).astype(np.float64).ravel()
    if degrees.size != img.shape[0]:
        raise ValueError("The number of images must be equal to the number of rotation angles")
    radians = np.pi * degrees / 180.0
    h, w = img.shape[2:]
    zoom = np.ones(img.shape[0])
    if zoom_in or zoom_out:
        rho, corner = math.hypot(h, w), math.atan(h / w)
        turn = np.abs(radians)
        max_x = np.maximum(np.abs(rho * np.cos(corner + turn)), np.abs(rho * np.cos(corner - turn)))
        max_y = np.maximum(np.abs(rho * np.sin(corner + turn)), np.abs(rho * np.sin(corner - turn)))
        if zoom_out:
            zoom = np.maximum(max_x / w, max_y / h)
        else:
            zoom = np.minimum(w / max_x, h / max_y)
    rotated = _bilinear_rotate(img.astype(np.float64), radians, zoom).astype(np.float32)
    return _wrap(rotated[0] if single else rotated, src)


def random_rotate(src, angle_limits, zoom_in=False, zoom_out=False):
    """``imrotate`` by angles drawn uniformly in ``angle_limits`` (one per image)."""
    if src.ndim == 3:
        degrees = np.random.uniform(*angle_limits)
    else:
        degrees = nd_array(np.random.uniform(*angle_limits, size=src.shape[0]))
    return imrotate(src, degrees, zoom_in=zoom_in, zoom_out=zoom_out)


# ---------------------------------------------------------------------------- augmenters
class Augmenter:
    """Base class of image augmenters: ``aug(src)`` returns the augmented HWC image;
    ``dumps()`` describes the augmenter as JSON."""

    def __init__(self, **kwargs):
        self._kwargs = {}
        for key, value in kwargs.items():
            if isinstance(value, NDArray):
                value = value.asnumpy()
            self._kwargs[key] = value.tolist() if isinstance(value, np.ndarray) else value

    def dumps(self):
        """``[class name in lower case, parameters]`` as a JSON string."""
        return json.dumps([type(self).__name__.lower(), self._kwargs])

    def __call__(self, src):
        raise NotImplementedError("Must override implementation.")


class _KeepsParams(Augmenter):
    """An augmenter that also keeps each of its parameters as the attribute of that name."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        for key, value in kwargs.items():
            setattr(self, key, value)


class _AugmenterList(Augmenter):
    """An augmenter made of the augmenters ``ts``; ``dumps`` lists theirs."""

    def __init__(self, ts):
        super().__init__()
        self.ts = ts

    def dumps(self):
        return [type(self).__name__.lower(), [t.dumps() for t in self.ts]]


class SequentialAug(_AugmenterList):
    """Apply the augmenters ``ts`` one after the other."""

    def __call__(self, src):
        for aug in self.ts:
            src = aug(src)
        return src


class _SizeAndInterp(_KeepsParams):
    """An augmenter taking a target ``size`` and an ``interp`` method (2: cubic by default)."""

    def __init__(self, size, interp=2):
        super().__init__(size=size, interp=interp)


class ResizeAug(_SizeAndInterp):
    """Resize the shorter side to ``size``."""

    def __call__(self, src):
        return resize_short(src, self.size, self.interp)


class ForceResizeAug(_SizeAndInterp):
    """Resize to exactly ``size`` = (w, h)."""

    def __call__(self, src):
        sizes = (src.shape[0], src.shape[1], self.size[1], self.size[0])
        return imresize(src, self.size[0], self.size[1],
                        interp=_get_interp_method(self.interp, sizes))


class RandomCropAug(_SizeAndInterp):
    """``random_crop`` to ``size`` = (w, h)."""

    def __call__(self, src):
        return random_crop(src, self.size, self.interp)[0]


class RandomSizedCropAug(Augmenter):
    """``random_size_crop`` with an ``area`` fraction range and aspect ``ratio`` range."""

    def __init__(self, size, area, ratio, interp=2, **kwargs):
        super().__init__(size=size, area=area, ratio=ratio, interp=interp)
        if "min_area" in kwargs:
            warnings.warn("`min_area` is deprecated. Please use `area` instead.",
                          DeprecationWarning, stacklevel=2)
            area = kwargs.pop("min_area")
        if kwargs:
            raise AssertionError("unexpected keyword arguments for `RandomSizedCropAug`.")
        self.size, self.area, self.ratio, self.interp = size, area, ratio, interp

    def __call__(self, src):
        return random_size_crop(src, self.size, self.area, self.ratio, self.interp)[0]


class CenterCropAug(_SizeAndInterp):
    """``center_crop`` to ``size`` = (w, h)."""

    def __call__(self, src):
        return center_crop(src, self.size, self.interp)[0]


class RandomOrderAug(_AugmenterList):
    """Apply the augmenters ``ts`` in a random order."""

    def __call__(self, src):
        random.shuffle(self.ts)
        for aug in self.ts:
            src = aug(src)
        return src


class BrightnessJitterAug(_KeepsParams):
    """Scale by ``1 + U(-brightness, brightness)``."""

    def __init__(self, brightness):
        super().__init__(brightness=brightness)

    def __call__(self, src):
        src *= 1.0 + random.uniform(-self.brightness, self.brightness)
        return src


def _blend_with_gray(src, strength, weighted_gray):
    """``alpha * src + (1 - alpha) * gray`` in place, ``alpha = 1 + U(-strength, strength)``;
    ``weighted_gray(alpha)`` gives the second term (a number, or an NDArray like ``src``),
    computed before ``src`` changes."""
    alpha = 1.0 + random.uniform(-strength, strength)
    gray_term = weighted_gray(alpha)
    src *= alpha
    src += gray_term
    return src


class ContrastJitterAug(_KeepsParams):
    """Blend with the image's mean luma: ``alpha * src + (1 - alpha) * mean gray``."""

    def __init__(self, contrast):
        super().__init__(contrast=contrast)

    def __call__(self, src):
        mean_gray = float((_host(src) * _LUMA).sum()) * 3.0 / src.size
        return _blend_with_gray(src, self.contrast, lambda alpha: (1.0 - alpha) * mean_gray)


class SaturationJitterAug(_KeepsParams):
    """Blend each pixel with its own luma: ``alpha * src + (1 - alpha) * gray``."""

    def __init__(self, saturation):
        super().__init__(saturation=saturation)

    def __call__(self, src):
        def weighted_gray(alpha):
            gray = (_host(src) * _LUMA).sum(axis=2, keepdims=True) * (1.0 - alpha)
            return _wrap(gray.astype(src.dtype), src)
        return _blend_with_gray(src, self.saturation, weighted_gray)


class HueJitterAug(_KeepsParams):
    """Rotate the hue by ``U(-hue, hue)`` half-turns in YIQ space."""

    _RGB2YIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321],
                         [0.211, -0.523, 0.311]])
    _YIQ2RGB = np.array([[1.0, 0.956, 0.621], [1.0, -0.272, -0.647], [1.0, -1.107, 1.705]])

    def __init__(self, hue):
        super().__init__(hue=hue)

    def __call__(self, src):
        turn = random.uniform(-self.hue, self.hue) * np.pi
        rot = np.array([[1.0, 0.0, 0.0], [0.0, math.cos(turn), -math.sin(turn)],
                        [0.0, math.sin(turn), math.cos(turn)]])
        mat = (self._YIQ2RGB @ rot @ self._RGB2YIQ).T
        return _wrap((_host(src) @ mat).astype(src.dtype), src)


class ColorJitterAug(RandomOrderAug):
    """Brightness, contrast and saturation jitter in a random order (zero ones left out)."""

    def __init__(self, brightness, contrast, saturation):
        strengths = ((BrightnessJitterAug, brightness), (ContrastJitterAug, contrast),
                     (SaturationJitterAug, saturation))
        super().__init__([cls(amount) for cls, amount in strengths if amount > 0])


class LightingAug(_KeepsParams):
    """AlexNet-style PCA lighting noise: add ``eigvec @ (alpha * eigval)``, alpha normal with
    standard deviation ``alphastd``."""

    def __init__(self, alphastd, eigval, eigvec):
        super().__init__(alphastd=alphastd, eigval=eigval, eigvec=eigvec)

    def __call__(self, src):
        alpha = np.random.normal(0, self.alphastd, size=(3,))
        src += _wrap(np.dot(self.eigvec * alpha, self.eigval).astype(np.float32), src)
        return src


class ColorNormalizeAug(Augmenter):
    """``color_normalize`` with ``mean`` and ``std``."""

    def __init__(self, mean, std):
        super().__init__(mean=mean, std=std)
        self.mean = mean if mean is None or isinstance(mean, NDArray) else nd_array(mean)
        self.std = std if std is None or isinstance(std, NDArray) else nd_array(std)

    def __call__(self, src):
        return color_normalize(src, self.mean, self.std)


class RandomGrayAug(_KeepsParams):
    """With probability ``p``, replace the image by its gray version (3 equal channels)."""

    _MAT = np.array([[0.21, 0.21, 0.21], [0.72, 0.72, 0.72], [0.07, 0.07, 0.07]])

    def __init__(self, p):
        super().__init__(p=p)

    def __call__(self, src):
        if random.random() < self.p:
            src = _wrap((_host(src) @ self._MAT).astype(src.dtype), src)
        return src


class HorizontalFlipAug(_KeepsParams):
    """With probability ``p``, mirror the image left to right."""

    def __init__(self, p):
        super().__init__(p=p)

    def __call__(self, src):
        if random.random() < self.p:
            src = _wrap(_host(src)[:, ::-1], src)
        return src


class CastAug(Augmenter):
    """Cast to ``typ``."""

    def __init__(self, typ="float32"):
        super().__init__(type=typ)
        self.typ = typ

    def __call__(self, src):
        return src.astype(self.typ)


_DEFAULT_MEAN = [123.68, 116.28, 103.53]
_DEFAULT_STD = [58.395, 57.12, 57.375]
_PCA_EIGVAL = np.array([55.46, 4.794, 1.148])
_PCA_EIGVEC = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140],
                        [-0.5836, -0.6948, 0.4203]])


def CreateAugmenter(data_shape, resize=0, rand_crop=False, rand_resize=False, rand_mirror=False,
                    mean=None, std=None, brightness=0, contrast=0, saturation=0, hue=0,
                    pca_noise=0, rand_gray=0, inter_method=2):
    """The standard augmenter list for ``data_shape`` = (C, H, W): optional shorter-side
    resize, a crop (random-sized, random or centred), mirror, cast to float32, colour jitter,
    hue, PCA lighting, random gray and normalisation (``mean``/``std`` True means the ImageNet
    values)."""
    width, height = data_shape[2], data_shape[1]
    if rand_resize and not rand_crop:
        raise AssertionError("rand_resize needs rand_crop")
    if rand_resize:
        cropper = RandomSizedCropAug((width, height), 0.08, (3.0 / 4.0, 4.0 / 3.0), inter_method)
    else:
        cropper = (RandomCropAug if rand_crop else CenterCropAug)((width, height), inter_method)
    mean = _default_stat(mean, _DEFAULT_MEAN, "mean")
    std = _default_stat(std, _DEFAULT_STD, "std")
    # (wanted?, augmenter factory) in the order they apply
    plan = [
        (resize > 0, lambda: ResizeAug(resize, inter_method)),
        (True, lambda: cropper),
        (rand_mirror, lambda: HorizontalFlipAug(0.5)),
        (True, CastAug),
        (brightness or contrast or saturation,
         lambda: ColorJitterAug(brightness, contrast, saturation)),
        (hue, lambda: HueJitterAug(hue)),
        (pca_noise > 0, lambda: LightingAug(pca_noise, _PCA_EIGVAL, _PCA_EIGVEC)),
        (rand_gray > 0, lambda: RandomGrayAug(rand_gray)),
        (mean is not None or std is not None, lambda: ColorNormalizeAug(mean, std)),
    ]
    return [make() for wanted, make in plan if wanted]


def _default_stat(value, default, name):
    """``True`` -> the ImageNet statistic; arrays must hold 1 or 3 values."""
    if value is True:
        return nd_array(default)
    if value is not None and not (isinstance(value, (np.ndarray, NDArray))
                                  and value.shape[0] in (1, 3)):
        raise AssertionError("%s must be True, None or an array of 1 or 3 values" % name)
    return value


class ImageIter(DataIter):
    """Batches of images from a RecordIO file (``path_imgrec``, with ``path_imgidx`` for
    shuffling or parts), an image list file (``path_imglist``: ``index<TAB>labels<TAB>path``)
    or a Python list ``imglist`` of ``[label(s)..., path]``, images under ``path_root``.

    Each image is decoded, passed through ``aug_list`` (default: ``CreateAugmenter(data_shape,
    **kwargs)``) and stored CHW. ``last_batch_handle``: 'pad' fills the last batch from the
    start, 'discard' drops it, 'roll_over' carries it into the next epoch. Images that decode
    to nothing are skipped; an undecodable one raises RuntimeError naming it.
    """

    def __init__(self, batch_size, data_shape, label_width=1, path_imgrec=None,
                 path_imglist=None, path_root=None, path_imgidx=None, shuffle=False,
                 part_index=0, num_parts=1, aug_list=None, imglist=None, data_name="data",
                 label_name="softmax_label", dtype="float32", last_batch_handle="pad", **kwargs):
        super().__init__()
        assert path_imgrec or path_imglist or isinstance(imglist, list)
        assert dtype in ("int32", "float32", "int64", "float64"), dtype + " label not supported"
        if last_batch_handle not in ("pad", "discard", "roll_over"):
            raise ValueError("last_batch_handle must be 'pad', 'discard' or 'roll_over', got %r"
                             % (last_batch_handle,))
        self.imgrec = None
        self.imgidx = None
        if path_imgrec:
            logging.info("%s: loading recordio %s...", type(self).__name__, path_imgrec)
            if path_imgidx:
                self.imgrec = recordio.MXIndexedRecordIO(path_imgidx, path_imgrec, "r")
                self.imgidx = list(self.imgrec.keys)
            else:
                self.imgrec = recordio.MXRecordIO(path_imgrec, "r")
        keys = None
        self.imglist = None
        if path_imglist:
            self.imglist, keys = {}, []
            with open(path_imglist) as fin:
                for lineno, line in enumerate(fin, 1):
                    fields = line.strip().split("\t")
                    if len(fields) < 3:
                        raise MXNetError("%s line %d: expected 'index<TAB>label(s)<TAB>path', "
                                         "got %r" % (path_imglist, lineno, line.rstrip("\n")))
                    key = int(fields[0])
                    self.imglist[key] = (np.array(fields[1:-1], dtype=dtype), fields[-1])
                    keys.append(key)
        elif isinstance(imglist, list):
            self.imglist, keys = {}, []
            for number, entry in enumerate(imglist, 1):
                if len(entry) > 2:
                    label = np.array(entry[:-1], dtype=dtype)
                elif isinstance(entry[0], Number):
                    label = np.array([entry[0]], dtype=dtype)
                else:
                    label = np.array(entry[0], dtype=dtype)
                self.imglist[str(number)] = (label, entry[-1])
                keys.append(str(number))
        self.check_data_shape(data_shape)
        self.data_shape = tuple(data_shape)
        self.batch_size, self.label_width, self.label_dtype = batch_size, label_width, dtype
        self.path_root, self.shuffle = path_root, shuffle
        self.last_batch_handle = last_batch_handle
        self.provide_data = [DataDesc(data_name, (batch_size,) + self.data_shape)]
        self.provide_label = [DataDesc(label_name, (batch_size, label_width) if label_width > 1
                                       else (batch_size,))]
        self.seq = self._visit_order(keys, shuffle or num_parts > 1 or bool(path_imgidx),
                                     num_parts, part_index)
        self.num_image = None if self.seq is None else len(self.seq)
        self.auglist = aug_list if aug_list is not None else CreateAugmenter(data_shape, **kwargs)
        self._cache = None      # the short batch 'roll_over' carries into the next epoch
        self.cur = 0
        self._allow_read = True
        self.reset()

    def _visit_order(self, keys, need_keys, num_parts, part_index):
        """The keys an epoch visits, this part's share only; None means reading the record
        file front to back."""
        if self.imgrec is not None and not need_keys:
            return None
        order = keys if self.imgrec is None else self.imgidx
        if order is None:
            raise AssertionError("shuffle, num_parts > 1 and path_imgidx need an indexed .rec "
                                 "(path_imgidx)")
        if num_parts > 1:
            if part_index >= num_parts:
                raise AssertionError("part_index %d must be < num_parts %d"
                                     % (part_index, num_parts))
            share = len(order) // num_parts
            order = order[part_index * share:(part_index + 1) * share]
        return order

    def _start_epoch(self, rewind):
        if self.shuffle and self.seq is not None:
            random.shuffle(self.seq)
        if rewind:
            self.cur = 0
            self._allow_read = True
            if self.imgrec is not None:
                self.imgrec.reset()

    def reset(self):
        """Start a new epoch (reshuffling); a rolled-over batch stays for the next one."""
        self._start_epoch(rewind=self.last_batch_handle != "roll_over" or self._cache is None)

    def hard_reset(self):
        """Start a new epoch and drop any rolled-over batch."""
        self._cache = None
        self._start_epoch(rewind=True)

    def next_sample(self):
        """``(label, encoded image bytes)`` of the next image; StopIteration at the end."""
        if not self._allow_read:
            raise StopIteration
        if self.seq is None:
            record = self.imgrec.read()
            if record is None:
                if self.last_batch_handle != "discard":
                    self.imgrec.reset()
                raise StopIteration
            header, img = recordio.unpack(record)
            return header.label, img
        if self.cur >= self.num_image:
            if self.last_batch_handle != "discard":
                self.cur = 0
            raise StopIteration
        key = self.seq[self.cur]
        self.cur += 1
        if self.imgrec is not None:
            header, img = recordio.unpack(self.imgrec.read_idx(key))
            return (header.label if self.imglist is None else self.imglist[key][0]), img
        label, fname = self.imglist[key]
        return label, self.read_image(fname)

    def _fill(self, data, label, start):
        """Fill slots ``start``... of the batch; returns the number of filled slots."""
        slot = start
        try:
            while slot < self.batch_size:
                lab, raw = self.next_sample()
                img = self.imdecode(raw)
                try:
                    self.check_valid_image(img)
                except RuntimeError as err:
                    logging.debug("Invalid image, skipping:  %s", err)
                    continue
                img = self.augmentation_transform(img)
                assert slot < self.batch_size, \
                    "Batch size must be multiples of augmenter output length"
                data[slot] = _host(self.postprocess_data(img))
                label[slot] = _host(lab).reshape(label[slot].shape) if np.ndim(lab) else lab
                slot += 1
        except StopIteration:
            if not slot:
                raise
        return slot

    def next(self):
        if self._cache is not None:
            data, label, filled = self._cache
        else:
            data = np.zeros((self.batch_size,) + self.data_shape, np.float32)
            label = np.zeros(self.provide_label[0].shape, self.label_dtype)
            filled = self._fill(data, label, 0)
        pad = self.batch_size - filled
        if pad:
            if self.last_batch_handle == "discard":
                raise StopIteration
            if self.last_batch_handle == "roll_over" and self._cache is None:
                self._cache = (data, label, filled)
                raise StopIteration
            self._fill(data, label, filled)
            if self.last_batch_handle == "pad":
                self._allow_read = False
            else:
                self._cache = None
        return DataBatch([_wrap(data)], [_wrap(label)], pad=pad)

    def check_data_shape(self, data_shape):
        """``data_shape`` must be (3, H, W)."""
        if len(data_shape) != 3:
            raise ValueError("data_shape should have length 3, with dimensions CxHxW")
        if data_shape[0] != 3:
            raise ValueError("This iterator expects inputs to have 3 channels.")

    def check_valid_image(self, data):
        """RuntimeError for an image without pixels."""
        if len(data[0].shape) == 0:
            raise RuntimeError("Data shape is wrong")

    def imdecode(self, s):
        """Decode ``s``; a failure raises RuntimeError naming the image."""
        try:
            return imdecode(s)
        except Exception as err:  # noqa: BLE001 - reported with the image's name
            if self.seq is not None:
                key = self.seq[(self.cur % self.num_image) - 1]
            else:
                key = self.cur - 1
            where = ("filename: %s" % self.imglist[key][1] if self.imglist is not None
                     else "index: %s" % key)
            raise RuntimeError("Broken image %s, %s" % (where, err)) from None

    def read_image(self, fname):
        """Bytes of image file ``fname`` under ``path_root``."""
        with open(os.path.join(self.path_root or "", fname), "rb") as fin:
            return fin.read()

    def augmentation_transform(self, data):
        """Apply every augmenter of ``auglist``."""
        for aug in self.auglist:
            data = aug(data)
        return data

    def postprocess_data(self, datum):
        """HWC -> CHW."""
        return _wrap(_host(datum).transpose(2, 0, 1), datum)
