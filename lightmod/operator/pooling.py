"""Pooling: max / avg / sum / lp over 1-D, 2-D and 3-D windows (MXNet 1.9.1 attributes).

Output size per spatial dim (x input, k kernel, p pad, s stride):
``valid`` floor((x + 2p - k) / s) + 1, ``full`` ceil((x + 2p - k) / s) + 1, ``same`` (1-D only,
pad must be 0) ceil(x / s) with the padding split as evenly as possible before/after.
``global_pool`` pools every spatial dim to 1 and ignores kernel, stride and pad. Average pooling
divides by the window clipped to the padded input (``count_include_pad``, the default) or by
the number of real elements. MXNet 1.9.1 itself fails on every 'same' call (its shape check
indexes pad[1] of a 1-D pad); lightmod implements what the attribute documents.
"""
import math

from .common import prod
from .conv import float16_via_float32, scratch, spatial_tuple
from .registry import Bool, Enum, Operator, OptInt, Shape, register

__all__ = ["Pooling"]

_NC_LAYOUTS = {1: "NCW", 2: "NCHW", 3: "NCDHW"}


def _lead3(values, fill):
    return (fill,) * (3 - len(values)) + tuple(values)


@register
class Pooling(Operator):
    """Pooling of the spatial dims of NCW / NCHW / NCDHW data."""
    name = "Pooling"
    inputs = ("data",)
    params = {
        "kernel": Shape((), "pooling window; not needed with global_pool"),
        "pool_type": Enum("avg", "lp", "max", "sum", default="max"),
        "global_pool": Bool(False, "pool every spatial dim to size 1"),
        "cudnn_off": Bool(False, "accepted for compatibility; ignored"),
        "pooling_convention": Enum("full", "same", "valid", default="valid"),
        "stride": Shape((), "stride; () means 1 in every dimension"),
        "pad": Shape((), "padding on both sides; () means 0"),
        "p_value": OptInt(None, "p of Lp pooling (pool_type 'lp')"),
        "count_include_pad": Bool(None, "average pooling counts padded cells (None = True)"),
        "layout": Enum("NCDHW", "NCHW", "NCW", "NDHWC", "NHWC", "NWC", default=None,
                       none_ok=True, doc="NCW, NCHW or NCDHW (channel-last layouts are rejected)"),
    }

    def check_params(self, p):
        nd = len(p.kernel or ())
        if not p.global_pool:
            if nd == 0 or nd > 3:
                raise self.error("kernel %s: %d-D pooling is not supported (1-D, 2-D or 3-D "
                                 "kernel needed unless global_pool=True)", tuple(p.kernel or ()),
                                 nd)
            if any(k <= 0 for k in p.kernel):
                raise self.error("kernel %s must be positive", tuple(p.kernel))
            p._stride = spatial_tuple(self, p, "stride", p.stride, nd, 1)
            if p.pooling_convention == "same" and p.pad and not any(p.pad):
                # 'same' computes its own padding; MXNet accepts an all-zero pad of any length
                p._pad = (0,) * nd
            else:
                p._pad = spatial_tuple(self, p, "pad", p.pad, nd, 0)
            if any(s <= 0 for s in p._stride):
                raise self.error("stride %s must be positive", p._stride)
            if any(v < 0 for v in p._pad):
                raise self.error("pad %s must not be negative", p._pad)
            if p.pooling_convention == "same" and any(p._pad):
                raise self.error("pooling_convention 'same' does not take pad (pad %s)", p._pad)
        if p.pool_type == "lp":
            if p.p_value is None:
                raise self.error("pool_type 'lp' needs p_value")
            if p.p_value <= 0:
                raise self.error("p_value must be positive, got %d", p.p_value)
        p._include_pad = True if p.count_include_pad is None else bool(p.count_include_pad)

    # --- shapes -------------------------------------------------------------------------------
    def _window(self, p, data):
        """(kernel, stride, pad, out_spatial) for data of this shape (validating it)."""
        if len(data) < 3 or len(data) > 5:
            raise self.error("data has shape %s: expected 3-D (N, C, W), 4-D (N, C, H, W) or "
                             "5-D (N, C, D, H, W) data", data)
        nd = len(data) - 2
        if p.layout is not None and p.layout != _NC_LAYOUTS[nd]:
            if p.layout in ("NWC", "NHWC", "NDHWC"):
                raise self.error("layout %s is not supported for data %s: only NCW, NCHW and "
                                 "NCDHW are", p.layout, data)
            raise self.error("layout %s does not fit %d-D data %s (expected %s)", p.layout,
                             len(data), data, _NC_LAYOUTS[nd])
        spatial = tuple(data[2:])
        if p.global_pool:
            return spatial, (1,) * nd, (0,) * nd, (1,) * nd
        if len(p.kernel) != nd:
            raise self.error("a %d-D kernel %s needs %d-D data, got data %s", len(p.kernel),
                             tuple(p.kernel), len(p.kernel) + 2, data)
        if p.pooling_convention == "same" and nd != 1:
            raise self.error("pooling_convention 'same' supports 1-D pooling only (3-D data "
                             "(N, C, W)), got data %s", data)
        out, pads = [], []
        for i, x in enumerate(spatial):
            k, s, pad = p.kernel[i], p._stride[i], p._pad[i]
            if not x:
                out.append(0)
                pads.append(pad)
                continue
            if k > x + 2 * pad:
                raise self.error("kernel %s exceeds the padded input: data %s with pad %s",
                                 tuple(p.kernel), data, p._pad)
            if p.pooling_convention == "valid":
                out.append((x + 2 * pad - k) // s + 1)
                pads.append(pad)
            elif p.pooling_convention == "full":
                out.append(int(math.ceil((x + 2 * pad - k) / s)) + 1)
                pads.append(pad)
            else:
                o = -(-x // s)
                out.append(o)
                pads.append(max(0, (o - 1) * s + k - x) // 2)
        return tuple(p.kernel), p._stride, tuple(pads), tuple(out)

    def infer_shape(self, p, in_shapes):
        data = in_shapes[0]
        if data is None:
            return list(in_shapes), [None]
        data = tuple(data)
        _, _, _, out = self._window(p, data)
        return [data], [data[:2] + out]

    def infer_type(self, p, in_types):
        return [in_types[0]], [in_types[0]]

    # --- computation ----------------------------------------------------------------------------
    def _plan(self, p, shape, state):
        plan = state.get("plan")
        if plan is None or plan[0] != tuple(shape):
            kernel, stride, pad, out = self._window(p, tuple(shape))
            planes = shape[0] * shape[1]
            dims = _lead3(shape[2:], 1) + _lead3(out, 1)
            geo = _lead3(kernel, 1) + _lead3(stride, 1) + _lead3(pad, 0)
            plan = state["plan"] = (tuple(shape), planes, prod(shape[2:]), prod(out), dims,
                                    geo)
            state["mask_ready"] = False
        return plan

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        x, y = inputs[0], outputs[0]
        _, planes, isize, osize, dims, geo = self._plan(p, x.shape, state)
        mask = None
        if p.pool_type == "max" and is_train:
            mask = scratch(k, state, "mask", (planes, osize), "int32")
        state["mask_ready"] = k.pool_forward(x.reshape(planes, isize), y.reshape(planes, osize),
                                             mask, dims, geo, k.POOL_TYPES[p.pool_type],
                                             p._include_pad, p.p_value or 1)

    @float16_via_float32
    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[0] == "null":
            return
        x, y = inputs[0], outputs[0]
        _, planes, isize, osize, dims, geo = self._plan(p, x.shape, state)
        mask = state.get("mask") if state.get("mask_ready") else None
        k.pool_backward(x.reshape(planes, isize), y.reshape(planes, osize),
                        out_grads[0].reshape(planes, osize), in_grads[0].reshape(planes, isize),
                        mask, dims, geo, k.POOL_TYPES[p.pool_type], p._include_pad,
                        p.p_value or 1, accumulate=(req[0] == "add"))
