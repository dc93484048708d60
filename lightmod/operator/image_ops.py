"""Spatial resampling operators on NCHW(-like) data: UpSampling, Pad and Crop.

UpSampling 'nearest' repeats pixels (several inputs are upsampled to the first one's output
size and concatenated along channels or summed); 'bilinear' is MXNet's grouped Deconvolution
with a (2s - s % 2) kernel, stride s and pad ceil((s - 1) / 2), run through the Deconvolution
declared in conv.py. Pad pads the spatial axes of 4-D / 5-D data (constant, edge, reflect).
Crop cuts an (h, w) window out of 4-D data, sized by ``h_w`` or by a second ``crop_like``
input; its kernels are Pad's, since cropping is the adjoint of constant padding.
"""
from . import registry
from .conv import float16_via_float32
from .registry import REQUIRED, Bool, Enum, Float, Int, Operator, Shape, register

__all__ = ["UpSampling", "Pad", "Crop"]


def _planes5(shape):
    """(N * C, D, H, W) view shape of 4-D / 5-D data."""
    spatial = tuple(shape[2:])
    return (shape[0] * shape[1],) + (1,) * (3 - len(spatial)) + spatial


@register
class UpSampling(Operator):
    """Upsample 4-D inputs by an integer factor (nearest neighbour or bilinear)."""
    name = "UpSampling"
    variadic = "num_args"
    params = {
        "scale": Int(REQUIRED, "upsampling factor"),
        "num_filter": Int(0, "channels; used by bilinear only"),
        "sample_type": Enum("bilinear", "nearest", default=REQUIRED),
        "multi_input_mode": Enum("concat", "sum", default="concat"),
        "num_args": Int(REQUIRED, "number of inputs (set by the symbol function)"),
        "workspace": Int(512, "accepted for compatibility; ignored"),
    }

    def check_params(self, p):
        if p.scale <= 0:
            raise self.error("scale must be positive, got %d", p.scale)
        if p.num_args <= 0:
            raise self.error("num_args must be positive, got %d", p.num_args)
        if p.sample_type == "bilinear":
            if p.num_filter <= 0:
                raise self.error("sample_type 'bilinear' needs num_filter (the channel count)")
            s = p.scale
            kernel = 2 * s - s % 2
            deconv = registry.get("Deconvolution")
            p._deconv = deconv.parse({
                "kernel": (kernel, kernel), "stride": (s, s),
                "pad": (s // 2, s // 2),  # ceil((s - 1) / 2)
                "num_filter": p.num_filter, "num_group": p.num_filter, "no_bias": True})

    def list_inputs(self, p):
        if p.sample_type == "bilinear":
            return ["data", "weight"]
        return ["arg%d" % i for i in range(p.num_args)]

    def infer_shape(self, p, in_shapes):
        in_shapes = list(in_shapes)
        if p.sample_type == "bilinear":
            return registry.get("Deconvolution").infer_shape(p._deconv, in_shapes)
        first = in_shapes[0]
        if first is None or any(s is None for s in in_shapes):
            return in_shapes, [None]
        for name, s in zip(self.list_inputs(p), in_shapes):
            if len(s) != 4:
                raise self.error("input '%s' has shape %s: expected 4-D (N, C, H, W)", name,
                                 tuple(s))
        oh, ow = first[2] * p.scale, first[3] * p.scale
        channels = 0
        for name, s in zip(self.list_inputs(p), in_shapes):
            if not s[2] or not s[3] or oh % s[2] or ow % s[3]:
                raise self.error("input '%s' of shape %s does not divide the output size "
                                 "(%d, %d)", name, tuple(s), oh, ow)
            if p.multi_input_mode == "concat":
                channels += s[1]
            elif s[1] != first[1]:
                raise self.error("multi_input_mode 'sum' needs equal channels: input '%s' has "
                                 "shape %s, arg0 %s", name, tuple(s), tuple(first))
            else:
                channels = s[1]
        return [tuple(s) for s in in_shapes], [(first[0], channels, oh, ow)]

    def infer_type(self, p, in_types):
        dtype = next((t for t in in_types if t is not None), None)
        return [dtype] * len(in_types), [dtype]

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        if p.sample_type == "bilinear":
            registry.get("Deconvolution").forward(p._deconv, k, inputs, outputs, is_train,
                                                  state)
            return
        y = outputs[0]
        c0 = 0
        for i, x in enumerate(inputs):
            scale = y.shape[2] // x.shape[2]
            if p.multi_input_mode == "concat":
                k.upsample_nearest(x, y, c0, scale)
                c0 += x.shape[1]
            else:
                k.upsample_nearest(x, y, 0, scale, accumulate=(i > 0))

    @float16_via_float32
    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if p.sample_type == "bilinear":
            registry.get("Deconvolution").backward(p._deconv, k, out_grads, inputs, outputs,
                                                   in_grads, req, state)
            return
        dy = out_grads[0]
        c0 = 0
        for x, dx, r in zip(inputs, in_grads, req):
            scale = dy.shape[2] // x.shape[2]
            if r != "null":
                k.upsample_nearest_backward(dy, dx, c0, scale, accumulate=(r == "add"))
            if p.multi_input_mode == "concat":
                c0 += x.shape[1]


@register
class Pad(Operator):
    """Pad the spatial axes of 4-D or 5-D data."""
    name = "Pad"
    aliases = ("pad",)
    params = {
        "mode": Enum("constant", "edge", "reflect", default=REQUIRED),
        "pad_width": Shape(REQUIRED, "(before_1, after_1, ..., before_N, after_N)"),
        "constant_value": Float(0.0, "value of constant padding"),
    }

    def _pads(self, p, data):
        if len(data) not in (4, 5):
            raise self.error("data has shape %s: only 4-D or 5-D data can be padded", data)
        width = tuple(p.pad_width)
        if len(width) != 2 * len(data):
            raise self.error("pad_width %s must have 2 entries per axis of data %s (%d)", width,
                             data, 2 * len(data))
        if any(width[:4]):
            raise self.error("pad_width %s: padding of the first two axes (batch, channel) "
                             "must be zero", width)
        if any(v < 0 for v in width):
            raise self.error("pad_width %s must not be negative", width)
        before = width[4::2]
        after = width[5::2]
        if p.mode == "reflect":
            for x, b, a in zip(data[2:], before, after):
                if x and (b >= x or a >= x):
                    raise self.error("reflect padding %s must be smaller than the input size "
                                     "(data %s)", width, data)
        return before, after

    def infer_shape(self, p, in_shapes):
        data = in_shapes[0]
        if data is None:
            return list(in_shapes), [None]
        data = tuple(data)
        before, after = self._pads(p, data)
        out = data[:2] + tuple(x + b + a if x else 0 for x, b, a in zip(data[2:], before, after))
        return [data], [out]

    def _before3(self, p, shape):
        before, _ = self._pads(p, tuple(shape))
        return (0,) * (3 - len(before)) + tuple(before)

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        x, y = inputs[0], outputs[0]
        k.pad_forward(x.reshape(_planes5(x.shape)), y.reshape(_planes5(y.shape)),
                      self._before3(p, x.shape), k.PAD_MODES[p.mode], p.constant_value)

    @float16_via_float32
    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[0] == "null":
            return
        x, dy = inputs[0], out_grads[0]
        k.pad_backward(dy.reshape(_planes5(dy.shape)), in_grads[0].reshape(_planes5(x.shape)),
                       self._before3(p, x.shape), k.PAD_MODES[p.mode],
                       accumulate=(req[0] == "add"))


@register
class Crop(Operator):
    """Crop an (h, w) window of 4-D data, at `offset` or centred."""
    name = "Crop"
    variadic = "num_args"
    params = {
        "num_args": Int(REQUIRED, "1 (data) or 2 (data, crop_like)"),
        "offset": Shape((0, 0), "crop offset (y, x)"),
        "h_w": Shape((0, 0), "crop height and width (used without crop_like)"),
        "center_crop": Bool(False, "centre the window instead of using offset"),
    }

    def check_params(self, p):
        if p.num_args not in (1, 2):
            raise self.error("num_args must be 1 or 2, got %d", p.num_args)
        if len(p.offset) != 2 or len(p.h_w) != 2:
            raise self.error("offset %s and h_w %s must have 2 entries (y, x)", tuple(p.offset),
                             tuple(p.h_w))

    def list_inputs(self, p):
        return ["data", "crop_like"][:p.num_args]

    def _window(self, p, data, like):
        """(h, w, oy, ox) of the crop."""
        if len(data) != 4:
            raise self.error("data has shape %s: expected 4-D (N, C, H, W)", data)
        if p.num_args == 2:
            if len(like) != 4:
                raise self.error("crop_like has shape %s: expected 4-D (N, C, H, W)", like)
            h, w = like[2], like[3]
        else:
            h, w = p.h_w
        if h > data[2] or w > data[3]:
            raise self.error("crop size (%d, %d) exceeds the data %s", h, w, data)
        if p.center_crop:
            oy, ox = (data[2] - h) // 2, (data[3] - w) // 2
        else:
            oy, ox = p.offset
        if oy < 0 or ox < 0 or oy + h > data[2] or ox + w > data[3]:
            raise self.error("crop window offset (%d, %d) size (%d, %d) does not fit the data %s",
                             oy, ox, h, w, data)
        return h, w, oy, ox

    def infer_shape(self, p, in_shapes):
        in_shapes = list(in_shapes)
        data = in_shapes[0]
        like = in_shapes[1] if p.num_args == 2 else None
        if data is None or (p.num_args == 2 and like is None):
            return in_shapes, [None]
        data = tuple(data)
        h, w, _, _ = self._window(p, data, like and tuple(like))
        return in_shapes, [data[:2] + (h, w)]

    def infer_type(self, p, in_types):
        dtype = in_types[0]
        return [dtype] * len(in_types), [dtype]

    def _before3(self, p, inputs):
        like = tuple(inputs[1].shape) if p.num_args == 2 else None
        _, _, oy, ox = self._window(p, tuple(inputs[0].shape), like)
        return (0, oy, ox)

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        x, y = inputs[0], outputs[0]
        # cropping reads the window; that is the adjoint of constant padding
        k.pad_backward(x.reshape(_planes5(x.shape)), y.reshape(_planes5(y.shape)),
                       self._before3(p, inputs), k.PAD_MODES["constant"])

    @float16_via_float32
    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        x, dy = inputs[0], out_grads[0]
        if req[0] != "null":
            k.pad_forward(dy.reshape(_planes5(dy.shape)), in_grads[0].reshape(_planes5(x.shape)),
                          self._before3(p, inputs), k.PAD_MODES["constant"], 0.0,
                          accumulate=(req[0] == "add"))
        if p.num_args == 2 and req[1] == "write":
            k.fill(in_grads[1], 0.0)
