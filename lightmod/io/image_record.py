"""``mx.io.ImageRecordIter``: batches of decoded and augmented images from a RecordIO file.

Records are decoded (OpenCV, GIL released) and augmented in ``preprocess_threads`` worker
threads, one batch per task, with at most ``prefetch_buffer`` batches in flight, so memory
stays bounded by the queue. Every random choice of a record comes from a generator seeded by
``(seed_aug or seed, epoch, batch number)``, never by the worker, so a seed gives the same
batches whatever the number of threads.
"""
import collections
import concurrent.futures
import math
import os

import numpy as np

from ..base import MXNetError, dtype_np
from ..operator.registry import Bool
from ..recordio import parse_record_bytes, scan_records, unpack
from .io import DataBatch, DataDesc, DataIter
from .utils import _auto_interp, _wrap_host

__all__ = ["ImageRecordIter", "ImageRecordUInt8Iter", "ImageRecordInt8Iter"]

# parameter name -> default (MXNet's ImageRecordIter parameters)
_DEFAULTS = dict(
    path_imglist="", path_imgrec="", path_imgidx="", aug_seq="aug_default", label_width=1,
    data_shape=None, preprocess_threads=4, verbose=True, num_parts=1, part_index=0,
    device_id=0, shuffle_chunk_size=0, shuffle_chunk_seed=0, seed_aug=None, shuffle=False,
    seed=0, batch_size=None, round_batch=True, prefetch_buffer=4, ctx="gpu", dtype=None,
    resize=-1, rand_crop=False, random_resized_crop=False, max_rotate_angle=0,
    max_aspect_ratio=0.0, min_aspect_ratio=None, max_shear_ratio=0.0, max_crop_size=-1,
    min_crop_size=-1, max_random_scale=1.0, min_random_scale=1.0, max_random_area=1.0,
    min_random_area=1.0, max_img_size=1e10, min_img_size=0.0, brightness=0.0, contrast=0.0,
    saturation=0.0, pca_noise=0.0, random_h=0, random_s=0, random_l=0, rotate=-1,
    fill_value=255, inter_method=1, pad=0, mean_img="", mean_r=0.0, mean_g=0.0, mean_b=0.0,
    mean_a=0.0, std_r=1.0, std_g=1.0, std_b=1.0, std_a=1.0, scale=1.0, rand_mirror=False,
    mirror=False, max_random_contrast=0.0, max_random_illumination=0.0,
    data_name="data", label_name="softmax_label")

_BOOL = Bool()
_BOOL_PARAMS = {"verbose", "shuffle", "round_batch", "rand_crop", "random_resized_crop",
                "rand_mirror", "mirror"}
_PCA_EIGVAL = np.array([55.46, 4.794, 1.148])
_PCA_EIGVEC = np.array([[-0.5675, 0.7192, 0.4009],
                        [-0.5808, -0.0045, -0.8140],
                        [-0.5836, -0.6948, 0.4203]])
# uniform draws per record (columns of the per-batch random matrix)
_U_CROP_X, _U_CROP_Y, _U_MIRROR, _U_ANGLE, _U_SHEAR, _U_SCALE, _U_ASPECT, _U_CROP_SIZE = range(8)
_U_H, _U_S, _U_L, _U_BRIGHT, _U_CONTRAST, _U_SAT, _U_ORDER, _U_INTERP = range(8, 16)
_U_RRC = 16            # 4 attempts x (area, ratio, x, y)
_U_NORM_CONTRAST, _U_NORM_ILLUMINATION = 32, 33
_NUM_UNIFORMS = 34


def _as_bool(name, value):
    """A flag read as an operator's boolean parameter is (True/False/1/0, given as values or
    strings); anything else is an error naming the argument."""
    try:
        return _BOOL.parse(value)
    except ValueError:
        raise MXNetError("ImageRecordIter: %s must be a boolean, got %r" % (name, value)) from None


def _as_shape(value):
    if isinstance(value, str):
        value = [int(v) for v in value.strip("()[] ").split(",") if v.strip()]
    return tuple(int(v) for v in value)


class _Augmenter:
    """MXNet's default image augmenter: resize, affine (rotate / shear / scale / aspect),
    random resized crop, pad, crop, HLS and brightness/contrast/saturation jitter, PCA
    lighting noise; mirror and normalisation happen in the final copy kernel."""

    def __init__(self, p, data_shape):
        self.p = p
        self.channels, self.height, self.width = data_shape
        self.affine = (p["max_rotate_angle"] > 0 or p["max_shear_ratio"] > 0 or p["rotate"] > 0
                       or p["max_random_scale"] != 1.0 or p["min_random_scale"] != 1.0
                       or p["max_aspect_ratio"] != 0.0 or p["max_img_size"] != 1e10
                       or p["min_img_size"] != 0.0)
        self.crop_range = p["max_crop_size"] != -1 or p["min_crop_size"] != -1
        self.hls = p["random_h"] != 0 or p["random_s"] != 0 or p["random_l"] != 0
        self.jitter = p["brightness"] > 0 or p["contrast"] > 0 or p["saturation"] > 0
        self.color = self.hls or self.jitter or p["pca_noise"] > 0
        min_aspect = p["min_aspect_ratio"]
        self.aspect_range = (1.0 - p["max_aspect_ratio"] if min_aspect is None else min_aspect,
                             1.0 + p["max_aspect_ratio"])
        if p["random_resized_crop"]:
            if (p["min_random_scale"] != 1.0 or p["max_random_scale"] != 1.0
                    or self.crop_range or p["rand_crop"]):
                raise MXNetError("ImageRecordIter: random_resized_crop conflicts with "
                                 "min/max_random_scale, min/max_crop_size and rand_crop")
            self.affine = p["max_rotate_angle"] > 0 or p["max_shear_ratio"] > 0 or p["rotate"] > 0
        if self.crop_range and not (0 < p["min_crop_size"] <= p["max_crop_size"]):
            raise MXNetError("ImageRecordIter: need 0 < min_crop_size <= max_crop_size, got %s "
                             "and %s" % (p["min_crop_size"], p["max_crop_size"]))

    def _interp(self, u, src_w, src_h, dst_w, dst_h):
        method = self.p["inter_method"]
        if method == 9:
            return _auto_interp(src_h, src_w, dst_h, dst_w)
        if method == 10:
            return min(int(u[_U_INTERP] * 5), 4)
        return method

    def __call__(self, cv2, img, u, normals, what):
        """The augmented HWC uint8 image and the (y0, x0) of the data_shape window."""
        p = self.p
        if p["resize"] > 0:
            h, w = img.shape[:2]
            if h > w:
                nh, nw = p["resize"] * h // w, p["resize"]
            else:
                nh, nw = p["resize"], p["resize"] * w // h
            img = cv2.resize(img, (nw, nh), interpolation=self._interp(u, w, h, nw, nh))
        if self.affine:
            img = self._warp(cv2, img, u)
        if p["random_resized_crop"]:
            img = self._resized_crop(cv2, img, u)
        if p["pad"] > 0:
            fill = (p["fill_value"],) * 4
            img = cv2.copyMakeBorder(img, p["pad"], p["pad"], p["pad"], p["pad"],
                                     cv2.BORDER_CONSTANT, value=fill)
        if img.ndim == 2:
            img = img[:, :, None]
        h, w = img.shape[:2]
        if self.crop_range and not p["random_resized_crop"]:
            lo, hi = p["min_crop_size"], p["max_crop_size"]
            if h < hi or w < hi:
                raise MXNetError("ImageRecordIter: %s is %dx%d, smaller than max_crop_size %d"
                                 % (what, h, w, hi))
            size = lo + min(int(u[_U_CROP_SIZE] * (hi - lo + 1)), hi - lo)
            y0, x0 = self._corner(u, h - size, w - size)
            img = cv2.resize(img[y0:y0 + size, x0:x0 + size], (self.width, self.height),
                             interpolation=self._interp(u, size, size, self.width, self.height))
            if img.ndim == 2:
                img = img[:, :, None]
            y0 = x0 = 0
        else:
            if h < self.height or w < self.width:
                raise MXNetError("ImageRecordIter: %s is %dx%d after augmentation, smaller than "
                                 "data_shape %dx%d" % (what, h, w, self.height, self.width))
            y0, x0 = self._corner(u, h - self.height, w - self.width)
        if self.color:
            img = np.ascontiguousarray(img[y0:y0 + self.height, x0:x0 + self.width])
            img = self._color(cv2, img, u, normals)
            y0 = x0 = 0
        return img, y0, x0

    def _corner(self, u, dy, dx):
        if self.p["rand_crop"]:
            return min(int(u[_U_CROP_Y] * (dy + 1)), dy), min(int(u[_U_CROP_X] * (dx + 1)), dx)
        return dy // 2, dx // 2

    def _warp(self, cv2, img, u):
        p = self.p
        h, w = img.shape[:2]
        shear = p["max_shear_ratio"] * (2 * u[_U_SHEAR] - 1)
        max_angle = int(p["max_rotate_angle"])
        angle = -max_angle + min(int(u[_U_ANGLE] * (2 * max_angle + 1)), 2 * max_angle)
        if p["rotate"] > 0:
            angle = p["rotate"]
        cos_a, sin_a = math.cos(math.radians(angle)), math.sin(math.radians(angle))
        scale = p["min_random_scale"] + u[_U_SCALE] * (p["max_random_scale"]
                                                       - p["min_random_scale"])
        ratio = 1.0 + p["max_aspect_ratio"] * (2 * u[_U_ASPECT] - 1)
        hs = 2 * scale / (1 + ratio)
        ws = ratio * hs
        new_w = max(p["min_img_size"], min(p["max_img_size"], scale * w))
        new_h = max(p["min_img_size"], min(p["max_img_size"], scale * h))
        mat = np.array([[hs * cos_a - shear * sin_a * ws, hs * sin_a + shear * cos_a * ws, 0.0],
                        [-sin_a * ws, cos_a * ws, 0.0]], dtype=np.float32)
        mat[0, 2] = (new_w - (mat[0, 0] * w + mat[0, 1] * h)) / 2
        mat[1, 2] = (new_h - (mat[1, 0] * w + mat[1, 1] * h)) / 2
        size = (max(int(new_w), 1), max(int(new_h), 1))
        return cv2.warpAffine(img, mat, size, flags=self._interp(u, w, h, size[0], size[1]),
                              borderMode=cv2.BORDER_CONSTANT, borderValue=(p["fill_value"],) * 4)

    def _resized_crop(self, cv2, img, u):
        p = self.p
        h, w = img.shape[:2]
        lo_ratio, hi_ratio = self.aspect_range
        for attempt in range(4):
            base = _U_RRC + 4 * attempt
            area = h * w * (p["min_random_area"] + u[base] * (p["max_random_area"]
                                                              - p["min_random_area"]))
            ratio = math.exp(math.log(lo_ratio) + u[base + 1] * (math.log(hi_ratio)
                                                                 - math.log(lo_ratio)))
            cw = int(round(math.sqrt(area * ratio)))
            ch = int(round(math.sqrt(area / ratio)))
            if 0 < cw <= w and 0 < ch <= h:
                x0 = min(int(u[base + 2] * (w - cw + 1)), w - cw)
                y0 = min(int(u[base + 3] * (h - ch + 1)), h - ch)
                break
        else:
            # no attempt fitted: the largest centred square
            cw = ch = min(h, w)
            x0, y0 = (w - cw) // 2, (h - ch) // 2
        return cv2.resize(img[y0:y0 + ch, x0:x0 + cw], (self.width, self.height),
                          interpolation=self._interp(u, cw, ch, self.width, self.height))

    def _color(self, cv2, img, u, normals):
        p = self.p
        if self.hls and img.shape[2] == 3:
            hls = cv2.cvtColor(img, cv2.COLOR_BGR2HLS).astype(np.int16)
            shift = (int(p["random_h"] * (2 * u[_U_H] - 1)), int(p["random_l"] * (2 * u[_U_L] - 1)),
                     int(p["random_s"] * (2 * u[_U_S] - 1)))
            for k, limit in enumerate((180, 255, 255)):
                hls[:, :, k] = np.clip(hls[:, :, k] + shift[k], 0, limit)
            img = cv2.cvtColor(hls.astype(np.uint8), cv2.COLOR_HLS2BGR)
        if not (self.jitter or p["pca_noise"] > 0):
            return img
        work = img.astype(np.float32)
        if self.jitter:
            steps = []
            if p["brightness"] > 0:
                steps.append(("b", 1.0 + p["brightness"] * (2 * u[_U_BRIGHT] - 1)))
            if p["contrast"] > 0:
                steps.append(("c", 1.0 + p["contrast"] * (2 * u[_U_CONTRAST] - 1)))
            if p["saturation"] > 0:
                steps.append(("s", 1.0 + p["saturation"] * (2 * u[_U_SAT] - 1)))
            # a random order, picked from the record's own draws
            start = min(int(u[_U_ORDER] * len(steps)), len(steps) - 1)
            for kind, alpha in steps[start:] + steps[:start]:
                if kind == "b":
                    work *= alpha
                    continue
                # luma with BGR weights (the image is still in OpenCV's order)
                gray = work @ np.array([0.114, 0.587, 0.299], np.float32) if work.shape[2] == 3 \
                    else work[:, :, 0]
                if kind == "c":
                    work = work * alpha + (1.0 - alpha) * float(gray.mean())
                else:
                    work = work * alpha + (1.0 - alpha) * gray[:, :, None]
        if p["pca_noise"] > 0 and work.shape[2] == 3:
            rgb = _PCA_EIGVEC @ (normals * p["pca_noise"] * _PCA_EIGVAL)
            work += rgb[::-1].astype(np.float32)
        return np.clip(np.rint(work), 0, 255).astype(np.uint8)


class ImageRecordIter(DataIter):
    """Batches of images from a RecordIO file made by ``im2rec``, MXNet's
    ``mx.io.ImageRecordIter`` (all parameters are keyword arguments with MXNet's names and
    defaults; unknown names raise MXNetError).

    Each image is decoded, resized (``resize``: shorter side), warped (rotate / shear /
    scale / aspect ratio), padded, cropped to ``data_shape`` (randomly with ``rand_crop``),
    colour-jittered, mirrored (``rand_mirror``), and written in CHW RGB order as
    ``((pixel - mean) * contrast + illumination) * scale / std`` (contrast and illumination
    random within ``max_random_contrast`` / ``max_random_illumination``, else 1 and 0).
    Labels are the record header's first ``label_width`` floats. ``round_batch`` completes
    the last batch from the start of the data (``pad`` counts the filler) and the next epoch
    starts after them; without it the tail of the last batch is zeros (``pad`` still counts
    it, where MXNet reports 0). ``num_parts`` / ``part_index`` give a worker its contiguous
    share of the records.
    """

    def __init__(self, **kwargs):
        super().__init__()
        unknown = sorted(set(kwargs) - set(_DEFAULTS))
        if unknown:
            raise MXNetError("ImageRecordIter: Cannot find argument '%s' (valid arguments: %s)"
                             % (unknown[0], ", ".join(sorted(_DEFAULTS))))
        p = dict(_DEFAULTS)
        p.update(kwargs)
        for name in _BOOL_PARAMS:
            p[name] = _as_bool(name, p[name])
        self._check_params(p)
        self._p = p
        self.batch_size = int(p["batch_size"])
        self.data_shape = _as_shape(p["data_shape"])
        self.label_width = int(p["label_width"])
        self._dtype = np.dtype(np.float32) if p["dtype"] is None else np.dtype(dtype_np(p["dtype"]))
        self._path = str(p["path_imgrec"])
        self._spans = self._load_spans(p)
        total = len(self._spans)
        parts, index = int(p["num_parts"]), int(p["part_index"])
        self._records = np.arange(total * index // parts, total * (index + 1) // parts)
        if self._records.size == 0:
            raise MXNetError("ImageRecordIter: part %d of %d of %s holds no records"
                             % (index, parts, self._path))
        self._aug = _Augmenter(p, self.data_shape)
        channels = self.data_shape[0]
        self._decode_flag = 0 if channels == 1 else (-1 if channels == 4 else 1)
        means = [p["mean_r"], p["mean_g"], p["mean_b"], p["mean_a"]][:channels]
        stds = [p["std_r"], p["std_g"], p["std_b"], p["std_a"]][:channels]
        self._mean = np.array(means, np.float32)
        self._mult = np.array([float(p["scale"]) / s for s in stds], np.float32)
        self._mean_img = None
        if p["mean_img"]:
            # a mean image replaces the per-channel means
            self._mean_img = self._load_mean_img(p)
            self._mean[:] = 0
        self._seed = int(p["seed_aug"] if p["seed_aug"] is not None else p["seed"])
        label_shape = (self.batch_size,) if self.label_width == 1 else (self.batch_size,
                                                                         self.label_width)
        self.provide_data = [DataDesc(p["data_name"], (self.batch_size,) + self.data_shape,
                                      self._dtype.type)]
        self.provide_label = [DataDesc(p["label_name"], label_shape, np.float32)]
        self._threads = max(1, int(p["preprocess_threads"]))
        self._depth = max(1, int(p["prefetch_buffer"]))
        self._pool = None
        self._fd = None
        self._epoch = -1
        self._next_start = 0
        self._current = None
        self._plan = collections.deque()
        self._inflight = collections.deque()
        self.reset()

    # ------------------------------------------------------------------ set-up
    @staticmethod
    def _check_params(p):
        if not p["path_imgrec"]:
            raise MXNetError("ImageRecordIter: path_imgrec is required")
        if p["path_imglist"]:
            raise MXNetError("ImageRecordIter: path_imglist is not supported by lightmod; labels "
                             "come from the record headers (repack with im2rec)")
        if p["aug_seq"] != "aug_default" or int(p["shuffle_chunk_size"]) > 0:
            raise MXNetError("ImageRecordIter: only aug_seq='aug_default' and record-level "
                             "shuffling (shuffle_chunk_size=0) are supported, got aug_seq=%r, "
                             "shuffle_chunk_size=%r" % (p["aug_seq"], p["shuffle_chunk_size"]))
        if p["batch_size"] is None or int(p["batch_size"]) <= 0:
            raise MXNetError("ImageRecordIter: batch_size is required and must be positive, got "
                             "%r" % (p["batch_size"],))
        if p["data_shape"] is None:
            raise MXNetError("ImageRecordIter: data_shape is required")
        shape = _as_shape(p["data_shape"])
        if len(shape) != 3 or shape[0] not in (1, 3, 4) or min(shape) <= 0:
            raise MXNetError("ImageRecordIter: data_shape must be (channels, height, width) with "
                             "1, 3 or 4 channels, got %s" % (shape,))
        if int(p["label_width"]) < 1:
            raise MXNetError("ImageRecordIter: label_width must be >= 1, got %r"
                             % (p["label_width"],))
        parts, index = int(p["num_parts"]), int(p["part_index"])
        if parts < 1 or not 0 <= index < parts:
            raise MXNetError("ImageRecordIter: need 0 <= part_index < num_parts, got part_index=%d,"
                             " num_parts=%d" % (index, parts))
        if int(p["inter_method"]) not in (0, 1, 2, 3, 4, 9, 10):
            raise MXNetError("ImageRecordIter: inter_method must be 0-4, 9 or 10, got %r"
                             % (p["inter_method"],))
        if p["dtype"] is not None and np.dtype(dtype_np(p["dtype"])).name not in (
                "float32", "float16", "float64", "uint8", "int8"):
            raise MXNetError("ImageRecordIter: unsupported dtype %r" % (p["dtype"],))

    def _load_spans(self, p):
        path = self._path
        if not os.path.isfile(path):
            raise MXNetError("ImageRecordIter: path_imgrec %r does not exist" % path)
        spans = scan_records(path)
        if p["path_imgidx"]:
            _check_index(p["path_imgidx"], spans, path)
        if not spans:
            raise MXNetError("ImageRecordIter: %s holds no records" % path)
        return spans

    def _load_mean_img(self, p):
        from .. import ndarray as nd
        path = p["mean_img"]
        if not os.path.isfile(path):
            mean = self._compute_mean_img()
            nd.save(path, {"mean_img": _wrap_host(mean)})
            return mean
        loaded = nd.load(path)
        arr = (loaded["mean_img"] if isinstance(loaded, dict) and "mean_img" in loaded
               else (list(loaded.values()) if isinstance(loaded, dict) else loaded)[0])
        mean = arr.asnumpy().astype(np.float32)
        if mean.shape != self.data_shape:
            raise MXNetError("ImageRecordIter: mean_img %s has shape %s, data_shape is %s"
                             % (path, mean.shape, self.data_shape))
        return mean

    def _compute_mean_img(self):
        """The mean of all records after the deterministic part of augmentation."""
        from ..image.codec import cv2_module
        from ..kernels import dataio as kimg
        cv2 = cv2_module()
        total = np.zeros(self.data_shape, np.float64)
        out = np.empty(self.data_shape, np.float32)
        u = np.full(_NUM_UNIFORMS, 0.5)
        zero, one = np.zeros(self.data_shape[0], np.float32), np.ones(self.data_shape[0],
                                                                      np.float32)
        with open(self._path, "rb") as f:
            fd = f.fileno()
            for rec in range(len(self._spans)):
                img, _ = self._decode(cv2, fd, rec)
                img, y0, x0 = self._aug(cv2, img, u, np.zeros(3), "record %d" % rec)
                kimg.crop_normalize_chw(img, y0, x0, False, img.shape[2] >= 3, zero, one, out)
                total += out
        return (total / len(self._spans)).astype(np.float32)

    # ------------------------------------------------------------------ epochs
    def _plan_epoch(self):
        """The batches of this epoch: (batch number, record ids, pad)."""
        order = self._records
        if self._p["shuffle"]:
            order = np.random.default_rng([self._seed, 1, self._epoch]).permutation(order)
        num, size = order.size, self.batch_size
        start = self._next_start if self._p["round_batch"] else 0
        self._next_start = 0
        plan = collections.deque()
        number = 0
        for begin in range(start, num, size):
            ids = order[begin:begin + size]
            pad = size - ids.size
            if pad and self._p["round_batch"]:
                extra = np.arange(pad) % num
                ids = np.concatenate([ids, order[extra]])
                plan.append((number, ids, pad, int(extra[-1] + 1) % num))
            else:
                plan.append((number, ids, pad, 0))
            number += 1
        return plan

    def reset(self):
        self._drain()
        self._epoch += 1
        self._plan = self._plan_epoch()
        self._current = None

    def _drain(self):
        while self._inflight:
            self._inflight.popleft()[0].cancel()
        self._plan = collections.deque()

    def _ensure_started(self):
        if self._pool is None:
            from ..image.codec import cv2_module
            cv2_module()  # fail here, in the caller, when OpenCV is missing
            self._pool = concurrent.futures.ThreadPoolExecutor(
                self._threads, thread_name_prefix="lightmod-imagerecord")
            self._file = open(self._path, "rb")
            self._fd = self._file.fileno()

    def _fill_queue(self):
        while self._plan and len(self._inflight) < self._depth:
            number, ids, pad, carry = self._plan.popleft()
            rng_key = (self._seed, self._epoch, number)
            future = self._pool.submit(self._make_batch, ids, pad, rng_key)
            self._inflight.append((future, pad, carry, ids))

    def iter_next(self):
        self._ensure_started()
        self._fill_queue()
        if not self._inflight:
            self._current = None
            return False
        future, pad, carry, ids = self._inflight.popleft()
        data, label = future.result()
        self._next_start = carry
        self._fill_queue()
        self._current = (data, label, pad, ids)
        return True

    def next(self):
        if not self.iter_next():
            raise StopIteration
        return DataBatch(data=[self.getdata()], label=[self.getlabel()], pad=self.getpad(),
                         index=self.getindex(), provide_data=self.provide_data,
                         provide_label=self.provide_label)

    def _need_current(self):
        if self._current is None:
            raise MXNetError("ImageRecordIter: no current batch (call iter_next() or next() "
                             "first)")
        return self._current

    def getdata(self):
        return _wrap_host(self._need_current()[0])

    def getlabel(self):
        return _wrap_host(self._need_current()[1])

    def getpad(self):
        return self._current[2] if self._current is not None else 0

    def getindex(self):
        return None if self._current is None else self._current[3].astype(np.uint64)

    def __del__(self):
        # the last reference may go away inside a worker thread, which cannot join itself
        self.close(wait=False)

    def close(self, wait=True):
        """Stop the worker threads (waiting for them unless ``wait=False``) and close the
        file; a later ``reset()`` or ``next()`` starts new workers."""
        inflight = getattr(self, "_inflight", None)
        while inflight:
            inflight.popleft()[0].cancel()
        pool = getattr(self, "_pool", None)
        if pool is not None:
            self._pool = None
            pool.shutdown(wait=wait, cancel_futures=True)
            if wait:
                self._file.close()

    # ------------------------------------------------------------------ workers
    def _decode(self, cv2, fd, rec):
        """(HWC uint8 image in OpenCV channel order, label vector) of record ``rec``."""
        offset, span = self._spans[rec]
        raw = os.pread(fd, span, offset)
        payload = parse_record_bytes(raw, self._path, offset)
        what = "%s record %d (byte %d)" % (self._path, rec, offset)
        header, body = unpack(payload)
        if header.flag > 0:
            labels = np.asarray(header.label, np.float32)
        else:
            labels = np.array([header.label], np.float32)
        if labels.size < self.label_width:
            raise MXNetError("ImageRecordIter: %s has %d label(s), label_width is %d"
                             % (what, labels.size, self.label_width))
        img = cv2.imdecode(np.frombuffer(body, np.uint8), self._decode_flag) if body else None
        if img is None:
            raise MXNetError("ImageRecordIter: cannot decode the image of %s (%d bytes)"
                             % (what, len(body)))
        if img.ndim == 2:
            img = img[:, :, None]
        return img, labels[:self.label_width]

    def _make_batch(self, ids, pad, rng_key):
        from ..image.codec import cv2_module
        from ..kernels import dataio as kimg
        cv2 = cv2_module()
        count = ids.size
        rng = np.random.default_rng(list(rng_key))
        uniforms = rng.random((count, _NUM_UNIFORMS))
        normals = rng.standard_normal((count, 3))
        data = np.zeros((self.batch_size,) + self.data_shape,
                        np.float32 if self._dtype.kind == "f" else self._dtype)
        label = np.zeros((self.batch_size, self.label_width), np.float32)
        rand_mirror, always_mirror = self._p["rand_mirror"], self._p["mirror"]
        normalise = self._dtype.kind == "f"
        jitter_contrast = float(self._p["max_random_contrast"])
        jitter_light = float(self._p["max_random_illumination"])
        for slot in range(count):
            rec = int(ids[slot])
            img, labels = self._decode(cv2, self._fd, rec)
            u = uniforms[slot]
            img, y0, x0 = self._aug(cv2, img, u, normals[slot],
                                    "%s record %d" % (self._path, rec))
            mirror = always_mirror or (rand_mirror and u[_U_MIRROR] < 0.5)
            reverse = img.shape[2] >= 3
            if normalise:
                kimg.crop_normalize_chw(img, y0, x0, mirror, reverse, self._mean, self._mult,
                                        data[slot])
                if self._mean_img is not None:
                    data[slot] -= self._mean_img * self._mult[:, None, None]
                if jitter_contrast or jitter_light:
                    # ((pixel - mean) * contrast + illumination) * scale / std
                    contrast = 1.0 + jitter_contrast * (2 * u[_U_NORM_CONTRAST] - 1)
                    light = jitter_light * (2 * u[_U_NORM_ILLUMINATION] - 1)
                    data[slot] *= np.float32(contrast)
                    data[slot] += (light * self._mult)[:, None, None]
            else:
                kimg.crop_copy_chw(img, y0, x0, mirror, reverse, data[slot])
            label[slot] = labels
        if normalise and self._dtype != np.float32:
            data = data.astype(self._dtype)
        return data, (label[:, 0] if self.label_width == 1 else label)


def _check_index(idx_path, spans, rec_path):
    """An .idx file must list offsets that are record starts of the .rec file."""
    starts = {offset for offset, _ in spans}
    try:
        f = open(idx_path)
    except OSError as err:
        raise MXNetError("ImageRecordIter: cannot open path_imgidx %s: %s"
                         % (idx_path, err.strerror)) from None
    with f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            fields = line.split("\t")
            try:
                offset = int(fields[1])
            except (IndexError, ValueError):
                raise MXNetError("%s line %d: expected 'key<TAB>offset', got %r"
                                 % (idx_path, lineno, line.rstrip("\n"))) from None
            if offset not in starts:
                raise MXNetError("%s line %d: offset %d is not the start of a record of %s "
                                 "(index and record file do not match)"
                                 % (idx_path, lineno, offset, rec_path))


def ImageRecordUInt8Iter(**kwargs):
    """ImageRecordIter giving uint8 pixels (no normalisation)."""
    kwargs["dtype"] = "uint8"
    return ImageRecordIter(**kwargs)


def ImageRecordInt8Iter(**kwargs):
    """ImageRecordIter giving int8 pixels (no normalisation)."""
    kwargs["dtype"] = "int8"
    return ImageRecordIter(**kwargs)
