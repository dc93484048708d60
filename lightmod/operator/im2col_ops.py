"""``im2col`` and ``col2im``: the column matrix of a convolution as operators of their own.

``im2col`` turns data (N, C, *spatial) into (N, C * prod(kernel), L): column ``l`` of sample
``n`` holds the C * prod(kernel) values under the ``l``-th position of the sliding window
(``L`` positions, row-major over the output grid). ``col2im`` is its adjoint: it sums every
column entry back onto the pixel it came from, giving (N, C, *output_size). Each is the
gradient of the other. Both run the convolution's own kernels (``k.im2col`` / ``k.col2im``)
one sample at a time: a sample's (C*K, L) block is exactly the kernels' column layout.
"""
import numpy as np

from .conv import float16_via_float32, geometry3, scratch, shape5, spatial_tuple
from .registry import REQUIRED, Operator, Shape, register

__all__ = ["Im2col", "Col2im"]


def _window_params(**extra):
    params = dict(extra)
    params.update({
        "kernel": Shape(REQUIRED, "Sliding window size: (w,), (h, w) or (d, h, w)"),
        "stride": Shape((), "Window step; () means 1 in every dimension"),
        "dilate": Shape((), "Window dilation; () means 1 in every dimension"),
        "pad": Shape((), "Zero padding on both sides; () means 0 in every dimension"),
    })
    return params


class _Window(Operator):
    """The window geometry both operators share."""

    def check_params(self, p):
        nd = len(p.kernel)
        if not 1 <= nd <= 3 or any(k is None or k <= 0 for k in p.kernel):
            raise self.error("kernel %s must be 1 to 3 positive sizes", tuple(p.kernel))
        p._stride = spatial_tuple(self, p, "stride", p.stride, nd, 1)
        p._dilate = spatial_tuple(self, p, "dilate", p.dilate, nd, 1)
        p._pad = spatial_tuple(self, p, "pad", p.pad, nd, 0)
        if min(p._stride) <= 0 or min(p._dilate) <= 0 or min(p._pad) < 0:
            raise self.error("stride %s and dilate %s must be positive and pad %s not negative",
                             p._stride, p._dilate, p._pad)

    def grid(self, p, spatial):
        """The window positions along each spatial axis of an image of size ``spatial``."""
        out = []
        for size, k, s, d, pad in zip(spatial, p.kernel, p._stride, p._dilate, p._pad):
            reach = d * (k - 1) + 1
            if size + 2 * pad < reach:
                raise self.error("kernel %s (dilate %s) does not fit the padded image %s",
                                 tuple(p.kernel), p._dilate, tuple(spatial))
            out.append((size + 2 * pad - reach) // s + 1)
        return tuple(out)

    def geometry(self, p, spatial):
        return geometry3(p.kernel, p._stride, p._pad, p._dilate, self.grid(p, spatial))


@register
class Im2col(_Window):
    name = "im2col"
    params = _window_params()

    def infer_shape(self, p, in_shapes):
        data = in_shapes[0]
        if data is None or not all(data):
            return list(in_shapes), [None]
        nd = len(p.kernel)
        if len(data) != nd + 2:
            raise self.error("data has shape %s; a %d-D kernel %s needs (N, C) and %d spatial "
                             "axes", tuple(data), nd, tuple(p.kernel), nd)
        positions = int(np.prod(self.grid(p, data[2:])))
        return list(in_shapes), [(data[0], data[1] * int(np.prod(p.kernel)), positions)]

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        x, col = inputs[0], outputs[0]
        g = self.geometry(p, tuple(x.shape[2:]))
        x5 = x.reshape(shape5(tuple(x.shape)))
        for n in range(x.shape[0]):
            k.im2col(x5[n:n + 1], col[n], g)

    @float16_via_float32
    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[0] == "null":
            return
        dx = in_grads[0]
        g = self.geometry(p, tuple(dx.shape[2:]))
        dx5 = dx.reshape(shape5(tuple(dx.shape)))
        for n in range(dx.shape[0]):
            k.col2im(out_grads[0][n], dx5[n:n + 1], g, accumulate=(req[0] == "add"))


@register
class Col2im(_Window):
    name = "col2im"
    params = _window_params(output_size=Shape(REQUIRED, "Spatial size of the image built"))

    def check_params(self, p):
        super().check_params(p)
        if len(p.output_size) != len(p.kernel) or min(p.output_size) <= 0:
            raise self.error("output_size %s must be %d positive sizes, one per kernel axis",
                             tuple(p.output_size), len(p.kernel))

    def infer_shape(self, p, in_shapes):
        data = in_shapes[0]
        window = int(np.prod(p.kernel))
        positions = int(np.prod(self.grid(p, p.output_size)))
        if data is None:
            return list(in_shapes), [None]
        if len(data) != 3:
            raise self.error("data has shape %s, expected (N, C * %d, %d)", tuple(data), window,
                             positions)
        if (data[1] and data[1] % window) or (data[2] and data[2] != positions):
            raise self.error("data has shape %s, expected (N, C * %d, %d) for kernel %s and "
                             "output_size %s", tuple(data), window, positions, tuple(p.kernel),
                             tuple(p.output_size))
        channels = data[1] // window if data[1] else 0
        return [(data[0], data[1], positions)], [(data[0], channels) + tuple(p.output_size)]

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        col, x = inputs[0], outputs[0]
        g = self.geometry(p, p.output_size)
        x5 = x.reshape(shape5(tuple(x.shape)))
        for n in range(x.shape[0]):
            k.col2im(col[n], x5[n:n + 1], g, accumulate=False)

    @float16_via_float32
    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[0] == "null":
            return
        dcol = in_grads[0]
        target = dcol if req[0] == "write" else scratch(k, state, "dcol", tuple(dcol.shape),
                                                        dcol.dtype)
        g = self.geometry(p, p.output_size)
        dy = out_grads[0]
        dy5 = dy.reshape(shape5(tuple(dy.shape)))
        for n in range(dy.shape[0]):
            k.im2col(dy5[n:n + 1], target[n], g)
        if target is not dcol:
            k.assign(dcol, target, "add")
