"""Spatial operators on NCHW images: resizing and adaptive pooling to a target size, sampling
grids (GridGenerator), bilinear sampling at a grid (BilinearSampler), the spatial transformer
built from both, and the Correlation of two feature maps.

* ``contrib.BilinearResize2D``: bilinear resize to a size given by ``height``/``width``,
  ``scale_height``/``scale_width``, a second ``like`` input, or a parity rule (the
  ``to_even_down`` ... modes); ``align_corners`` (default True) maps the corner pixels onto each
  other, otherwise pixel centres are mapped.
* ``contrib.AdaptiveAvgPooling2D``: output cell (i, j) averages input rows
  floor(i*H/h) .. ceil((i+1)*H/h) and the same for columns.
* ``GridGenerator``: normalised sampling positions (x then y, -1 .. 1 across the image) from an
  affine matrix (N, 6) over a ``target_shape`` grid, or from a pixel flow field (N, 2, H, W).
* ``BilinearSampler``: samples data at such a grid; pixels outside the image read as 0.
* ``SpatialTransformer``: GridGenerator (affine) followed by BilinearSampler.
* ``Correlation``: for every displacement (dy, dx) of a (2r+1)^2 neighbourhood
  (r = max_displacement // stride2, steps of stride2), the mean over a kernel_size^2 window and
  the channels of data1 * data2 (or |data1 - data2|), on a grid of stride1 over data padded by
  pad_size.
"""
import math

from .conv import float16_via_float32
from .nn import OptBool
from .registry import REQUIRED, Bool, Enum, Int, Operator, OptFloat, Shape, merge_shape, register

__all__ = ["BilinearResize2D", "AdaptiveAvgPooling2D", "GridGenerator", "BilinearSampler",
           "SpatialTransformer", "Correlation"]


def _merge(op, name, given, expected):
    try:
        return merge_shape(given, expected)
    except ValueError:
        raise op.error("input '%s' has shape %s, expected %s", name, tuple(given),
                       tuple(expected)) from None


def _need_4d(op, name, shape):
    if len(shape) != 4:
        raise op.error("input '%s' has shape %s: expected 4-D (batch, channel, height, width)",
                       name, tuple(shape))


def _planes(shape):
    return (shape[0] * shape[1], shape[2], shape[3])


def _grad_of_constant_input(k, grad, req):
    if req == "write":
        k.fill(grad, 0.0)


@register
class BilinearResize2D(Operator):
    """Resize the two spatial axes of NCHW data bilinearly."""
    name = "_contrib_BilinearResize2D"
    hint = "bilinearresize2d"
    inputs = ("data",)
    optional_inputs = ("like",)       # an input only with mode='like'
    params = {
        "height": Int(1, "output height (mode 'size' without scale_height)"),
        "width": Int(1, "output width (mode 'size' without scale_width)"),
        "scale_height": OptFloat(None, "output height = int(input height * scale_height)"),
        "scale_width": OptFloat(None, "output width = int(input width * scale_width)"),
        "mode": Enum("size", "odd_scale", "like", "to_even_down", "to_even_up", "to_odd_down",
                     "to_odd_up", default="size", doc="how the output size is chosen"),
        "align_corners": Bool(True, "map corner pixels onto each other (else pixel centres)"),
    }

    def check_params(self, p):
        if p.mode == "odd_scale" and (p.scale_height is None or p.scale_width is None):
            raise self.error("mode 'odd_scale' needs scale_height and scale_width")

    def list_inputs(self, p):
        return ["data", "like"] if p.mode == "like" else ["data"]

    def _size(self, p, data, like):
        h, w = data[2], data[3]
        mode = p.mode
        if mode == "size":
            oh = int(p.scale_height * h) if p.scale_height is not None else p.height
            ow = int(p.scale_width * w) if p.scale_width is not None else p.width
        elif mode == "odd_scale":
            oh = int(h * p.scale_height) if h % 2 == 0 else int((h - 1) * p.scale_height) + 1
            ow = int(w * p.scale_width) if w % 2 == 0 else int((w - 1) * p.scale_width) + 1
        elif mode == "like":
            oh, ow = like[2], like[3]
        else:
            want_even = mode.startswith("to_even")
            step = -1 if mode.endswith("down") else 1
            oh, ow = [v if (v % 2 == 0) == want_even else v + step for v in (h, w)]
        if oh <= 0 or ow <= 0:
            raise self.error("the output size (%d, %d) for data %s must be positive", oh, ow,
                             tuple(data))
        return oh, ow

    def infer_shape(self, p, in_shapes):
        in_shapes = list(in_shapes)
        data = in_shapes[0]
        like = in_shapes[1] if p.mode == "like" else None
        if data is None or (p.mode == "like" and like is None):
            return in_shapes, [None]
        _need_4d(self, "data", data)
        if like is not None:
            _need_4d(self, "like", like)
        oh, ow = self._size(p, tuple(data), like and tuple(like))
        return in_shapes, [tuple(data[:2]) + (oh, ow)]

    def infer_type(self, p, in_types):
        dtype = in_types[0]
        return [dtype] * len(in_types), [dtype]

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        x, y = inputs[0], outputs[0]
        k.bilinear_resize(x.reshape(_planes(x.shape)), y.reshape(_planes(y.shape)),
                          p.align_corners)

    @float16_via_float32
    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        x, dy = inputs[0], out_grads[0]
        if req[0] != "null":
            k.bilinear_resize_backward(dy.reshape(_planes(dy.shape)),
                                       in_grads[0].reshape(_planes(x.shape)), p.align_corners,
                                       accumulate=(req[0] == "add"))
        if p.mode == "like":
            _grad_of_constant_input(k, in_grads[1], req[1])


@register
class AdaptiveAvgPooling2D(Operator):
    """Average NCHW data over windows that tile it into an output_size grid."""
    name = "_contrib_AdaptiveAvgPooling2D"
    hint = "adaptiveavgpooling2d"
    params = {"output_size": Shape((), "(height, width), one int for a square, () for 1 x 1")}

    def check_params(self, p):
        size = tuple(p.output_size or ())
        if len(size) > 2 or any(v <= 0 for v in size):
            raise self.error("output_size %s must be () or 1 or 2 positive ints", size)
        p._size = {0: (1, 1), 1: size * 2, 2: size}[len(size)]

    def infer_shape(self, p, in_shapes):
        data = in_shapes[0]
        if data is None:
            return list(in_shapes), [None]
        _need_4d(self, "data", data)
        return [tuple(data)], [tuple(data[:2]) + p._size]

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        x, y = inputs[0], outputs[0]
        k.adaptive_avg_pool(x.reshape(_planes(x.shape)), y.reshape(_planes(y.shape)))

    @float16_via_float32
    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[0] != "null":
            x, dy = inputs[0], out_grads[0]
            k.adaptive_avg_pool_backward(dy.reshape(_planes(dy.shape)),
                                         in_grads[0].reshape(_planes(x.shape)),
                                         accumulate=(req[0] == "add"))


@register
class GridGenerator(Operator):
    """Sampling grids for BilinearSampler from affine matrices or flow fields."""
    name = "GridGenerator"
    params = {
        "transform_type": Enum("affine", "warp", default=REQUIRED,
                               doc="affine: data is (N, 6); warp: data is a flow (N, 2, H, W)"),
        "target_shape": Shape((0, 0), "(height, width) of the affine grid"),
    }

    def check_params(self, p):
        if p.transform_type == "affine":
            shape = tuple(p.target_shape or ())
            if len(shape) != 2 or any(v <= 0 for v in shape):
                raise self.error("transform_type 'affine' needs target_shape (height, width) "
                                 "of positive sizes, got %s", shape)

    def infer_shape(self, p, in_shapes):
        data = in_shapes[0]
        if data is None:
            return list(in_shapes), [None]
        data = tuple(data)
        if p.transform_type == "affine":
            if len(data) != 2 or data[1] not in (0, 6):
                raise self.error("data has shape %s: an affine transform takes (batch, 6)", data)
            return [data], [(data[0], 2) + tuple(p.target_shape)]
        if len(data) != 4 or data[1] not in (0, 2):
            raise self.error("data has shape %s: a warp takes a flow field (batch, 2, height, "
                             "width)", data)
        return [data], [data]

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        if p.transform_type == "affine":
            k.grid_affine(inputs[0], outputs[0])
        else:
            k.grid_warp(inputs[0], outputs[0])

    @float16_via_float32
    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[0] == "null":
            return
        if p.transform_type == "affine":
            k.grid_affine_backward(out_grads[0], in_grads[0], accumulate=(req[0] == "add"))
        else:
            k.grid_warp_backward(out_grads[0], in_grads[0], accumulate=(req[0] == "add"))


@register
class BilinearSampler(Operator):
    """Sample NCHW data bilinearly at a grid of normalised positions (N, 2, h, w)."""
    name = "BilinearSampler"
    inputs = ("data", "grid")
    params = {"cudnn_off": OptBool(None, "accepted for compatibility; ignored")}

    def infer_shape(self, p, in_shapes):
        data, grid = in_shapes
        if data is None or grid is None:
            return list(in_shapes), [None]
        _need_4d(self, "data", data)
        _need_4d(self, "grid", grid)
        if grid[1] != 2 or grid[0] != data[0]:
            raise self.error("grid has shape %s, expected (%d, 2, height, width) for data %s",
                             tuple(grid), data[0], tuple(data))
        return [tuple(data), tuple(grid)], [tuple(data[:2]) + tuple(grid[2:])]

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        k.bilinear_sample(inputs[0], inputs[1], outputs[0])

    @float16_via_float32
    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        k.bilinear_sample_backward(inputs[0], inputs[1], out_grads[0], in_grads[0],
                                   in_grads[1], req[0], req[1])


@register
class SpatialTransformer(Operator):
    """Sample data on the affine grid ``loc`` (N, 6) maps the target_shape grid to."""
    name = "SpatialTransformer"
    inputs = ("data", "loc")
    params = {
        "target_shape": Shape((0, 0), "(height, width) of the output"),
        "transform_type": Enum("affine", default=REQUIRED, doc="only 'affine'"),
        "sampler_type": Enum("bilinear", default=REQUIRED, doc="only 'bilinear'"),
        "cudnn_off": OptBool(None, "accepted for compatibility; ignored"),
    }

    def check_params(self, p):
        shape = tuple(p.target_shape or ())
        if len(shape) != 2 or any(v <= 0 for v in shape):
            raise self.error("target_shape must be (height, width) of positive sizes, got %s",
                             shape)

    def num_outputs(self, p):
        return 2            # the output and the (hidden) sampling grid, kept for backward

    def num_visible_outputs(self, p):
        return 1

    def infer_shape(self, p, in_shapes):
        data, loc = in_shapes
        if data is None:
            return list(in_shapes), [None, None]
        _need_4d(self, "data", data)
        loc = _merge(self, "loc", loc, (data[0], 6))
        target = tuple(p.target_shape)
        return [tuple(data), loc], [tuple(data[:2]) + target, (data[0], 2) + target]

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        k.grid_affine(inputs[1], outputs[1])
        k.bilinear_sample(inputs[0], outputs[1], outputs[0])

    @float16_via_float32
    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        grid = outputs[1]
        want_loc = req[1] != "null"
        dgrid = state.get("dgrid")
        if want_loc and (dgrid is None or tuple(dgrid.shape) != tuple(grid.shape)):
            dgrid = state["dgrid"] = k.empty(grid.shape, grid.dtype)
        k.bilinear_sample_backward(inputs[0], grid, out_grads[0], in_grads[0], dgrid,
                                   req[0], "write" if want_loc else "null")
        if want_loc:
            k.grid_affine_backward(dgrid, in_grads[1], accumulate=(req[1] == "add"))


@register
class Correlation(Operator):
    """Correlation of two NCHW feature maps over a neighbourhood of displacements."""
    name = "Correlation"
    inputs = ("data1", "data2")
    params = {
        "kernel_size": Int(1, "side of the (odd) window compared at each position"),
        "max_displacement": Int(1, "largest displacement"),
        "stride1": Int(1, "stride of the positions in data1"),
        "stride2": Int(1, "stride of the displacements"),
        "pad_size": Int(0, "zero padding of both inputs"),
        "is_multiply": Bool(True, "multiply (True) or take absolute differences (False)"),
    }

    def check_params(self, p):
        if p.kernel_size <= 0 or p.kernel_size % 2 == 0:
            raise self.error("kernel_size must be a positive odd number, got %d", p.kernel_size)
        if p.stride1 <= 0 or p.stride2 <= 0:
            raise self.error("stride1 (%d) and stride2 (%d) must be positive", p.stride1,
                             p.stride2)
        if p.max_displacement < 0 or p.pad_size < 0:
            raise self.error("max_displacement (%d) and pad_size (%d) must not be negative",
                             p.max_displacement, p.pad_size)

    def _out_shape(self, p, data):
        border = p.max_displacement + (p.kernel_size - 1) // 2
        sizes = []
        for v in data[2:]:
            room = v + 2 * p.pad_size - 2 * border
            sizes.append(int(math.ceil(room / p.stride1)) if room > 0 else 0)
        if min(sizes) < 1:
            raise self.error("data %s with pad_size %d is too small for kernel_size %d and "
                             "max_displacement %d: the output would be empty", tuple(data),
                             p.pad_size, p.kernel_size, p.max_displacement)
        width = 2 * (p.max_displacement // p.stride2) + 1
        return (data[0], width * width) + tuple(sizes)

    def infer_shape(self, p, in_shapes):
        data1, data2 = in_shapes
        try:
            data = merge_shape(data1, data2)
        except ValueError:
            raise self.error("data1 has shape %s and data2 %s: they must be equal",
                             tuple(data1), tuple(data2)) from None
        if data is None:
            return list(in_shapes), [None]
        _need_4d(self, "data1", data)
        return [tuple(data)] * 2, [self._out_shape(p, data)]

    def _args(self, p):
        return (p.kernel_size, p.max_displacement, p.stride1, p.stride2, p.pad_size,
                p.is_multiply)

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        k.correlation(inputs[0], inputs[1], outputs[0], *self._args(p))

    @float16_via_float32
    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        k.correlation_backward(inputs[0], inputs[1], out_grads[0], in_grads[0], in_grads[1],
                               *self._args(p), req[0], req[1])
