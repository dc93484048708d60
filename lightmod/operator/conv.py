"""Convolution and Deconvolution (1-D, 2-D, 3-D; groups, dilation, MXNet 1.9.1 attributes).

Both are computed as large matrix products over a column matrix (``k.im2col``/``k.col2im``, see
``kernels/cpu/conv.py`` for the layout): a chunk of the batch at a time, so the column buffer
stays under ``COL_BUDGET`` elements. Scratch buffers live in the node's ``state`` and are
allocated once per input shape. When the whole batch fits in one chunk, the column matrix built
by the forward pass is kept for the weight gradient; otherwise backward rebuilds each chunk's
columns. On GPUs Convolution runs as implicit GEMMs instead (no column matrix at all:
``kernels/cuda/conv_implicit.py``), whenever the kernel set's ``implicit_conv_fits`` says so.

This module also holds the helpers my other image operators share (pooling, normalisation,
image_ops): ``scratch`` buffers in ``state`` and ``float16_via_float32`` (numba's CPU target
has no float16 arithmetic, so half-precision arrays are staged through float32 copies).
"""
import functools

import numpy as np

from .common import prod as _prod
from .registry import REQUIRED, Bool, Enum, Int, Operator, Shape, merge_shape, register

__all__ = ["Convolution", "Deconvolution", "scratch", "float16_via_float32", "spatial_tuple"]

# Column-matrix elements per chunk of the batch (4 MB in float32). Measured on 2 cores: with
# one BLAS thread the chunk size barely matters; with two, each product pays the threads'
# hand-over, so chunks far smaller than this lose up to 2x; far larger ones only cost memory.
COL_BUDGET = 1 << 20
# The same when the products run on one thread (a sample-split child, one-thread policy):
# 128 KB in float32, so the column chunk and its product stay in the core's L2 cache between
# im2col, the product and the output pass. LeNet's conv1 (1 channel, 5x5, 32 images on one
# thread) took 0.88 ms for its three products in chunks of 2 images against 1.98 ms in one
# chunk of 32; the per-chunk calls cost less than that.
SERIAL_COL_BUDGET = 1 << 15
# Patch-row elements per chunk of the row layout (2 MB in float32): a chunk's patches and its
# product stay in the caches between im2row, the product and the output pass.
ROW_BUDGET = 1 << 19
# At most this many patch-row elements of a whole batch (16 MB in float32) are kept from a
# training forward for the weight gradient (LeNet's conv2 at batch 64: 2M); larger layers
# build them again in backward rather than hold that much memory.
KEEP_ROWS_BUDGET = 1 << 22
# Fewer input channels than this: the column layout (a patch row would be runs of a few
# elements, measured 5-10x slower to build than the column matrix's image-row runs).
ROW_MIN_CHANNELS = 8
# Patch-row elements per chunk of a channel-last output (4 MB in float32), per thread; measured
# on the ResNet block (32 channels, 32x32, one thread): 10.1 ms per batch of 32 at chunks of 4
# images, 12.7 ms at 1 image, 13.1 ms at 11 images (the patches leave the caches).
LAST_BUDGET = 1 << 20
# Fewer input or output channels than this: no Winograd (its products (tiles, C) @ (C, F) get
# too thin for BLAS to gain over the patch rows)
WINOGRAD_MIN_CHANNELS = 16
# Fewer output positions per image than this: the weight gradient stays a product on the
# column or patch matrix (the direct reduction's loops run over one image's positions, and
# each ends in a horizontal sum). Measured through an executor on 2 cores, GFLOP/s direct
# against product: LeNet's conv2 (8x8 outputs) 77 / 128; 5x5 20 -> 50 at 12x12 115 / 115;
# 3x3 64 -> 64 at 14x14 104 / 135, at 16x16 125 / 130, at 24x24 152 / 134; 3x3 32 -> 32 at
# 16x16 111 / 101, ResNet block (32x32) 150 / 100; LeNet's conv1 (24x24) 92 / 48.
WGRAD_MIN_POSITIONS = 256

_NC_LAYOUTS = {1: "NCW", 2: "NCHW", 3: "NCDHW"}
_LAYOUT_CHOICES = ("NCW", "NCHW", "NCDHW", "NWC", "NHWC", "NDHWC")


# ---------------------------------------------------------------------------------------------
# Helpers shared by the image operators
# ---------------------------------------------------------------------------------------------
def scratch(k, state, key, shape, dtype):
    """A work array kept in the node's state; reallocated only when shape or dtype change."""
    shape = tuple(int(s) for s in shape)
    buf = state.get(key)
    if buf is None or tuple(buf.shape) != shape or np.dtype(buf.dtype) != np.dtype(dtype):
        buf = state[key] = k.empty(shape, dtype)
    return buf


def _is_half(arr):
    return arr is not None and np.dtype(arr.dtype) == np.float16


def _stage(k, staged, key, arr, load):
    buf = scratch(k, staged, key, arr.shape, np.float32)
    if load:
        k.copy(buf, arr)
    return buf


def float16_via_float32(method):
    """Decorate an operator's forward/backward so float16 arrays are computed in float32.

    Float16 inputs are copied into float32 buffers kept in the node's state, the method runs on
    those, and every array the method may write (outputs, gradients, auxiliary states) is copied
    back. Arrays of other dtypes are passed through untouched (BatchNorm keeps float32 gamma).
    """
    if method.__name__ == "forward":
        @functools.wraps(method)
        def forward(self, p, k, inputs, outputs, is_train, state):
            if not any(_is_half(a) for a in list(inputs) + list(outputs)):
                return method(self, p, k, inputs, outputs, is_train, state)
            staged = state.setdefault("float32_staging", {})
            ins = _staged(k, staged, "in", inputs, True)
            outs = _staged(k, staged, "out", outputs, False)
            method(self, p, k, ins, outs, is_train, state)
            _copy_back(self, p, k, outputs, outs, inputs, ins)
        return forward

    @functools.wraps(method)
    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        arrays = list(out_grads) + list(inputs) + list(outputs) + list(in_grads)
        if not any(_is_half(a) for a in arrays):
            return method(self, p, k, out_grads, inputs, outputs, in_grads, req, state)
        staged = state.setdefault("float32_staging", {})
        ogs = _staged(k, staged, "og", out_grads, True)
        ins = _staged(k, staged, "in", inputs, True)
        outs = _staged(k, staged, "out", outputs, True)
        grads = _staged(k, staged, "grad", in_grads, [r == "add" for r in req])
        method(self, p, k, ogs, ins, outs, grads, req, state)
        _copy_back(self, p, k, in_grads, grads, inputs, ins)
    return backward


def _staged(k, staged, tag, arrays, copy_in):
    """``arrays`` with each float16 one replaced by its float32 staging buffer; ``copy_in``
    (one flag, or one per array) says whether the buffer needs the array's values."""
    flags = copy_in if isinstance(copy_in, list) else [copy_in] * len(arrays)
    return [_stage(k, staged, (tag, i), a, c) if _is_half(a) else a
            for i, (a, c) in enumerate(zip(arrays, flags))]


def _copy_back(op, p, k, written, staged_written, inputs, staged_inputs):
    """Copy the float32 buffers back into the float16 arrays the method writes: ``written``
    (outputs or gradients) and the auxiliary states among the inputs."""
    aux = set(op.list_aux(p))
    pairs = list(zip(written, staged_written)) + [
        (dst, src) for name, dst, src in zip(op.list_inputs(p), inputs, staged_inputs)
        if name in aux]
    for dst, src in pairs:
        if dst is not None and src is not dst:
            k.copy(dst, src)


def spatial_tuple(op, p, name, value, nd, fill):
    """An attribute tuple with nd entries: () means `fill` everywhere; other lengths are errors."""
    if value is None or len(value) == 0:
        return (fill,) * nd
    if len(value) != nd:
        raise op.error("%s %s must have as many dimensions as kernel %s",
                       name, tuple(value), tuple(p.kernel))
    return tuple(int(v) for v in value)


def _lead3(values, fill):
    """Pad a spatial tuple to 3 entries on the left (1-D and 2-D run as 3-D)."""
    return (fill,) * (3 - len(values)) + tuple(values)


def geometry3(kernel, stride, pad, dilate, out_spatial):
    """The 15-int geometry tuple the im2col/col2im kernels take."""
    return (_lead3(kernel, 1) + _lead3(stride, 1) + _lead3(pad, 0) + _lead3(dilate, 1)
            + _lead3(out_spatial, 1))


def shape5(shape):
    """(N, C, *spatial) -> (N, C, D, H, W) with leading spatial ones."""
    return tuple(shape[:2]) + _lead3(shape[2:], 1)


def _merge_input(op, name, given, expected):
    try:
        return merge_shape(given, expected)
    except ValueError:
        raise op.error("input '%s' has shape %s but %s is expected", name, given,
                       expected) from None


# ---------------------------------------------------------------------------------------------
# Common declaration of the two convolutions
# ---------------------------------------------------------------------------------------------
class _ConvBase(Operator):
    def list_inputs(self, p):
        return ["data", "weight"] if p.no_bias else ["data", "weight", "bias"]

    def check_params(self, p):
        nd = len(p.kernel)
        if nd == 0 or nd > 3:
            raise self.error("kernel %s: only 1-D, 2-D and 3-D kernels are supported (NCW, "
                             "NCHW, NCDHW)", tuple(p.kernel))
        if any(k is None or k <= 0 for k in p.kernel):
            raise self.error("kernel %s must be positive", tuple(p.kernel))
        p._stride = spatial_tuple(self, p, "stride", p.stride, nd, 1)
        p._dilate = spatial_tuple(self, p, "dilate", p.dilate, nd, 1)
        p._pad = spatial_tuple(self, p, "pad", p.pad, nd, 0)
        if any(s <= 0 for s in p._stride):
            raise self.error("stride %s must be positive", p._stride)
        if any(d <= 0 for d in p._dilate):
            raise self.error("dilate %s must be positive", p._dilate)
        if any(v < 0 for v in p._pad):
            raise self.error("pad %s must not be negative", p._pad)
        if p.num_filter <= 0:
            raise self.error("num_filter must be positive, got %d", p.num_filter)
        if p.num_group <= 0:
            raise self.error("num_group must be positive, got %d", p.num_group)

    def _check_data(self, p, data):
        nd = len(p.kernel)
        layout = p.layout
        if layout is not None and layout != _NC_LAYOUTS[nd]:
            if layout in ("NWC", "NHWC", "NDHWC"):
                raise self.error("layout %s is not supported for data %s: only the channel-first "
                                 "layouts NCW, NCHW and NCDHW are", layout, data)
            raise self.error("layout %s does not fit the %d-D kernel %s (expected %s) for data "
                             "%s", layout, nd, tuple(p.kernel), _NC_LAYOUTS[nd], data)
        if len(data) != nd + 2:
            raise self.error("data has shape %s but a %d-D kernel %s needs %d-D data (%s)",
                             data, nd, tuple(p.kernel), nd + 2, _NC_LAYOUTS[nd])
        if p.num_filter % p.num_group:
            raise self.error("num_filter %d is not divisible by num_group %d (data %s)",
                             p.num_filter, p.num_group, data)

    def infer_type(self, p, in_types):
        dtype = next((t for t in in_types if t is not None), None)
        return [dtype] * len(in_types), [dtype]

    def infer_shape(self, p, in_shapes):
        """Convolution and Deconvolution: the data's shape gives the weight's
        (``weight_shape``), the bias's and the output's (``out_spatial_shape``)."""
        in_shapes = list(in_shapes)
        names = self.list_inputs(p)
        data = self._known_data(p, in_shapes[0])
        if data is None:
            return in_shapes, [None]
        self._check_groups(data, "num_group", p.num_group)
        self._merge_params(p, in_shapes, self.weight_shape(p, data[1]))
        spatial = tuple(self.out_spatial_shape(p, data))
        in_shapes[0] = data
        return in_shapes[:len(names)], [(data[0], p.num_filter) + spatial]

    def weight_shape(self, p, channels):
        raise NotImplementedError

    def out_spatial_shape(self, p, data):
        raise NotImplementedError

    def _known_data(self, p, data):
        """The data shape as a tuple, checked; None while it is unknown."""
        if data is None:
            return None
        data = tuple(data)
        self._check_data(p, data)
        return data

    def _check_groups(self, data, what, count):
        if data[1] % count:
            raise self.error("data channels %d (data %s) are not divisible by %s %d", data[1],
                             data, what, count)

    def _merge_params(self, p, in_shapes, wshape):
        """Merge the weight's shape ``wshape`` and the bias's (num_filter,) into in_shapes."""
        w = self.list_inputs(p).index("weight")
        in_shapes[w] = _merge_input(self, "weight", in_shapes[w], wshape)
        if not p.no_bias:
            in_shapes[w + 1] = _merge_input(self, "bias", in_shapes[w + 1], (p.num_filter,))

    def _out_size(self, p, data, i):
        """The output size along spatial axis i of data (whose size there is known)."""
        span = p._dilate[i] * (p.kernel[i] - 1) + 1
        if span > data[2 + i] + 2 * p._pad[i]:
            raise self.error("kernel %s (dilate %s) exceeds the padded input: data %s "
                             "with pad %s", tuple(p.kernel), p._dilate, data, p._pad)
        return (data[2 + i] + 2 * p._pad[i] - span) // p._stride[i] + 1


def _conv_params(workspace, no_bias):
    return {
        "kernel": Shape(REQUIRED, "convolution kernel size (w,), (h, w) or (d, h, w)"),
        "stride": Shape((), "stride; () means 1 in every dimension"),
        "dilate": Shape((), "dilation; () means 1 in every dimension"),
        "pad": Shape((), "zero padding on both sides; () means 0"),
        "num_filter": Int(REQUIRED, "number of output channels"),
        "num_group": Int(1, "number of groups the channels are split into"),
        "workspace": Int(workspace, "accepted for compatibility; ignored"),
        "no_bias": Bool(no_bias, "leave out the bias input"),
        "cudnn_tune": Enum("fastest", "limited_workspace", "off", default=None, none_ok=True,
                           doc="accepted for compatibility; ignored"),
        "cudnn_off": Bool(False, "accepted for compatibility; ignored"),
        "layout": Enum(*_LAYOUT_CHOICES, default=None, none_ok=True,
                       doc="NCW, NCHW or NCDHW (channel-last layouts are rejected)"),
    }


class _Plan:
    """Shapes and chunking of one convolution call, derived once per input shape."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def _chunks(pl, per_sample):
    """(first sample, number of samples, columns) of each chunk of at most pl.chunk samples,
    a sample having ``per_sample`` columns."""
    for n0 in range(0, pl.n, pl.chunk):
        m = min(pl.chunk, pl.n - n0)
        yield n0, m, m * per_sample


def _grouped_gemm(k, groups, a, a_rows, b, b_rows, out, out_rows, trans_a=False,
                  trans_b=False, accumulate=False):
    """k.conv_gemm group by group: group g's rows of out = op(group g's rows of a) times
    op(group g's rows of b), a group having a_rows, b_rows and out_rows rows; ``accumulate``
    (kernel sets with ``conv_gemm_add``) adds the products into out."""
    gemm = k.conv_gemm_add if accumulate else k.conv_gemm
    for gi in range(groups):
        gemm(a[gi * a_rows:(gi + 1) * a_rows], b[gi * b_rows:(gi + 1) * b_rows],
             out[gi * out_rows:(gi + 1) * out_rows], trans_a=trans_a, trans_b=trans_b)


class _ChunkSum:
    """A weight gradient summed over the chunks of a batch: the first chunk's product goes
    straight into the gradient when it is written; the others (and every one for 'add') are
    added into it by the product itself where the kernel set has ``conv_gemm_add``, else go
    into a separate product buffer that is then added in."""

    def __init__(self, k, state, dw, req, pl, dtype):
        self.k, self.dw, self.req = k, dw, req
        self.buf = None
        self.adds = hasattr(k, "conv_gemm_add")
        if not self.adds and (req == "add" or pl.chunk < pl.n):
            self.buf = scratch(k, state, "dw_sum", dw.shape, dtype)

    def target(self, n0):
        """(the array chunk n0's product goes to, whether the product adds into it)"""
        if n0 == 0 and self.req == "write":
            return self.dw, False
        return (self.dw, True) if self.adds else (self.buf, False)

    def add(self, n0):
        if self.target(n0)[0] is self.buf:
            self.k.assign(self.dw, self.buf, "add")


@register
class Convolution(_ConvBase):
    """Compute N-D convolution on (N+2)-D input: out = weight * data + bias per group."""
    name = "Convolution"
    inputs = ("data", "weight", "bias")
    params = _conv_params(1024, False)

    # --- shapes -----------------------------------------------------------------------------
    def weight_shape(self, p, channels):
        return (p.num_filter, channels // p.num_group if channels else 0) + tuple(p.kernel)

    def out_spatial_shape(self, p, data):
        return (self._out_size(p, data, i) if data[2 + i] else 0    # 0: unknown
                for i in range(len(p.kernel)))

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        # like MXNet: an unknown batch size of the data is taken from the output (ConvRNN
        # cells' begin states are (0, C, H, W) and meet the data only after this convolution),
        # and so is an unknown spatial size where the stride is 1 (the only stride for which
        # the output size names one input size)
        in_shapes = list(in_shapes)
        data, out = in_shapes[0], out_shapes[0] if out_shapes else None
        nd = len(p.kernel)
        if data is None or len(data) != nd + 2 or not out or len(out) != nd + 2:
            return in_shapes
        filled = list(data)
        if not filled[0]:
            filled[0] = out[0]
        for i in range(nd):
            if not filled[2 + i] and out[2 + i] and p._stride[i] == 1:
                span = p._dilate[i] * (p.kernel[i] - 1) + 1
                filled[2 + i] = max(0, out[2 + i] + span - 1 - 2 * p._pad[i])
        in_shapes[0] = tuple(filled)
        return in_shapes

    # --- computation -------------------------------------------------------------------------
    @staticmethod
    def _serial(k, n, work):
        """Whether the products of a column-layout call of ``work`` column elements over ``n``
        images run on one thread (kernel sets without ``conv_rows_workers`` say no)."""
        workers = getattr(k, "conv_rows_workers", None)
        return workers is not None and workers(n, work) == 1

    def _plan(self, p, xshape, state, k=None):
        plan = state.get("plan")
        if plan is not None and plan.xshape == tuple(xshape) and (
                plan.serial == self._serial(k, plan.n, plan.work)):
            return plan
        nd = len(p.kernel)
        n, c = xshape[0], xshape[1]
        f, groups = p.num_filter, p.num_group
        out_sp = []
        for i in range(nd):
            span = p._dilate[i] * (p.kernel[i] - 1) + 1
            out_sp.append((xshape[2 + i] + 2 * p._pad[i] - span) // p._stride[i] + 1)
        ksize = _prod(p.kernel)
        osize = _prod(out_sp)
        rows = c * ksize
        # the patch-row layout (channel-last patches, see kernels/cpu/conv.py) for ungrouped
        # convolutions with enough channels to give long runs; grouped ones multiply per
        # group, and few-channel inputs (1-3 channel images) copy long image rows, in the
        # column layout
        by_rows = groups == 1 and c >= ROW_MIN_CHANNELS
        # Winograd F(2x2, 3x3) (kernels/cpu/winograd.py) for 2-D 3x3 kernels at stride 1
        # with enough channels on both sides that its 16 small products still run near the
        # BLAS peak (the ResNet block's 32 -> 32 layers: 2x the patch-row product's speed)
        winograd = (by_rows and nd == 2 and tuple(p.kernel) == (3, 3) and p._stride == (1, 1)
                    and p._dilate == (1, 1) and c >= WINOGRAD_MIN_CHANNELS
                    and f >= WINOGRAD_MIN_CHANNELS)
        work = n * rows * osize
        serial = self._serial(k, n, work)
        if by_rows:
            budget = ROW_BUDGET
        else:
            budget = min(COL_BUDGET, SERIAL_COL_BUDGET) if serial else COL_BUDGET
        chunk = max(1, min(n, budget // max(1, rows * osize)))
        plan = _Plan(xshape=tuple(xshape), n=n, c=c, f=f, groups=groups, cg=c // groups,
                     fg=f // groups, ck=(c // groups) * ksize, rows=rows, osize=osize,
                     ksize=ksize, isize=_prod(xshape[2:]), chunk=chunk,
                     x5=shape5(xshape),
                     by_rows=by_rows, winograd=winograd, pad=tuple(p._pad),
                     work=work, serial=serial,
                     g=geometry3(p.kernel, p._stride, p._pad, p._dilate, out_sp))
        state["plan"] = plan
        state["col_ready"] = False
        return plan

    def supports_epilogue(self, p):
        """Whether ``forward_epilogue`` takes a scale, shift and activation (the inference
        plan folds BatchNorm and Activation into such convolutions)."""
        return p.num_group == 1

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        b = None if p.no_bias else inputs[2]
        self._forward(p, k, inputs[0], inputs[1], None, b, -1, outputs[0], state,
                      keep_rows=is_train)

    def forward_epilogue(self, p, k, x, w, scale, shift, act, y, state, x_last=False,
                         y_last=False, keep_rows=False):
        """y = act(conv(x, w) * scale[f] + shift[f]) in one output pass (scale / shift may be
        None; act is an activation code, -1 for none); float32 and float64 only.

        ``x_last`` / ``y_last`` (CPU kernels, ungrouped convolutions): x holds, or y is to
        hold, its data channel-last, ``(N, *spatial, C)`` in the memory of the channel-first
        array. The inference plan chains convolutions this way: the row layout reads and
        writes channel-last data anyway, so the transposes between them fall away and the
        product is written straight into y. ``keep_rows``: a training forward (the weight
        gradient may reuse the patch rows, as after ``forward(is_train=True)``)."""
        if x_last or y_last:
            pl = self._plan(p, x.shape, state, k)
            return self._forward_rows(k, pl, x, w, scale, shift, act, y, state, x_last, y_last)
        self._forward(p, k, x, w, scale, shift, act, y, state, keep_rows=keep_rows)

    def supports_channel_last(self, p, k):
        """Whether ``forward_epilogue`` takes x_last / y_last for this convolution."""
        return p.num_group == 1 and getattr(k, "device_kind", None) == "cpu"

    def _channel_last(self, k, state, key, src, channels, count):
        """src (count, channels, inner) as (count, inner, channels): a scratch copy, or src
        itself when channels or inner is 1 (the same memory order)."""
        inner = src.size // (count * channels)
        if channels == 1 or inner == 1:
            return src.reshape(count, inner, channels)
        out = scratch(k, state, key, (count, inner, channels), src.dtype)
        k.transpose_planes(src.reshape(count, channels, inner), out)
        return out

    def _implicit(self, k, pl, dtype):
        """Whether the kernel set runs this convolution as an implicit GEMM (CUDA: the rule,
        and why, is kernels/cuda/conv_implicit.py's implicit_conv_fits)."""
        fits = getattr(k, "implicit_conv_fits", None)
        return fits is not None and fits(pl.x5, pl.g, pl.groups, pl.f, dtype)

    def _forward(self, p, k, x, w, scale, shift, act, y, state, keep_rows=False):
        pl = self._plan(p, x.shape, state, k)
        if self._implicit(k, pl, x.dtype):
            k.implicit_conv_forward(x, w, y, pl.x5, pl.g, pl.groups, scale, shift, act)
            return
        if not pl.by_rows:
            return self._forward_cols(k, pl, x, w, scale, shift, act, y, state)
        # the kept patch rows serve a weight gradient computed as a product over them, not
        # the direct reduction
        keep_rows = keep_rows and not self._weight_direct_fits(k, pl)
        self._forward_rows(k, pl, x, w, scale, shift, act, y, state, False, False, keep_rows)

    def _forward_rows(self, k, pl, x, w, scale, shift, act, y, state, x_last, y_last,
                      keep_rows=False):
        """``keep_rows`` (a training forward): the patch rows of the whole batch are kept for
        the weight gradient, which then skips its own im2row pass (one product over them),
        when they are at most KEEP_ROWS_BUDGET elements."""
        state["rows_ready"] = False
        keep_rows = keep_rows and pl.n * pl.osize * pl.rows <= KEEP_ROWS_BUDGET
        if x_last:
            xt = x.reshape(pl.n, pl.isize, pl.c)
            state["x_last_ready"] = False
        else:
            xt = self._channel_last(k, state, "x_last", x, pl.c, pl.n)
            # backward reads the channel-last data of this forward (as the column layout
            # keeps its column matrix): the executor never changes an input between the two
            state["x_last_ready"] = True
        if pl.winograd and hasattr(k, "winograd_conv_last"):
            return self._forward_winograd(k, pl, xt, w, scale, shift, act, y, state, y_last)
        wt = self._channel_last(k, state, "w_last", w, pl.c, pl.f).reshape(pl.f, pl.rows)
        if y_last:
            # the product's rows (n*O, F) are the channel-last output itself: one call splits
            # the images between threads (see kernels/cpu/conv.py), each multiplying chunks of
            # equal size with the epilogue applied in place while a chunk is in the caches
            image = pl.rows * pl.osize
            parts = k.conv_rows_workers(pl.n, pl.n * image)
            per_part = -(-pl.n // parts)
            chunk = -(-per_part // -(-per_part * image // LAST_BUDGET))
            rows = scratch(k, state, "rows_last", (parts, chunk * pl.osize, pl.rows), x.dtype)
            k.conv_rows_last(xt, wt, y.reshape(pl.n * pl.osize, pl.f), rows, pl.x5, pl.g, chunk,
                             scale, shift, act)
            return
        y3 = y.reshape(pl.n, pl.f, pl.osize)
        if keep_rows:
            # chunk by chunk as below (each chunk's rows still in the caches for its product)
            rows_flat = scratch(k, state, "rows_all", (pl.n * pl.osize * pl.rows,), x.dtype)
        else:
            rows_flat = scratch(k, state, "rows", (pl.rows * pl.chunk * pl.osize,), x.dtype)
        res_flat = scratch(k, state, "res", (pl.f * pl.chunk * pl.osize,), x.dtype)
        # backward reads the kept rows with the forward's x (the executor never changes an
        # input between the two)
        state["rows_ready"] = keep_rows
        if (pl.serial and hasattr(k, "rows_forward")
                and k.rows_forward(xt, wt, rows_flat, res_flat, y3, pl.x5, pl.g, pl.chunk,
                                   keep_rows, scale, shift, act)):
            return
        for n0 in range(0, pl.n, pl.chunk):
            m = min(pl.chunk, pl.n - n0)
            height = m * pl.osize
            start = n0 * pl.osize * pl.rows if keep_rows else 0
            rows = rows_flat[start:start + height * pl.rows].reshape(height, pl.rows)
            res = res_flat[:height * pl.f].reshape(height, pl.f)
            k.im2row(xt[n0:n0 + m], rows, (m,) + pl.x5[1:], pl.g)
            k.conv_gemm(rows, wt, res, trans_b=True)
            k.rows_to_nchw(res, y3[n0:n0 + m], scale, shift, act)

    def _forward_winograd(self, k, pl, xt, w, scale, shift, act, y, state, y_last):
        """The Winograd forward of channel-last xt into y (channel-last or not), the epilogue
        in its output pass; the images are split between threads like conv_rows_last's."""
        dims = (pl.n, pl.c) + pl.x5[3:]
        u = scratch(k, state, "winograd_u", (16, pl.c, pl.f), w.dtype)
        k.winograd_weights(w, u)
        parts = k.conv_rows_workers(pl.n, pl.n * pl.rows * pl.osize)
        chunk = k.winograd_chunk(dims, pl.pad, parts)
        v_shape, m_shape = k.winograd_scratch_shapes(dims, pl.f, pl.pad, parts, chunk)
        v = scratch(k, state, "winograd_v", v_shape, xt.dtype)
        mm = scratch(k, state, "winograd_m", m_shape, xt.dtype)
        if y_last:
            k.winograd_conv_last(xt, u, y.reshape(pl.n * pl.osize, pl.f), v, mm, dims, pl.pad,
                                 chunk, scale, shift, act)
            return
        res = scratch(k, state, "winograd_res", (pl.n * pl.osize, pl.f), y.dtype)
        k.winograd_conv_last(xt, u, res, v, mm, dims, pl.pad, chunk, scale, shift, act)
        k.rows_to_nchw(res, y.reshape(pl.n, pl.f, pl.osize))

    def _backward_data_direct(self, k, pl, out_grads, inputs, in_grads, req, state):
        """The data gradient by the kernel set's direct kernels where they fit (CPU,
        kernels/cpu/conv_direct.py: 2-4 channel images at stride 1): the requests then left
        for the column layout (the data's 'null'), or None when it did nothing."""
        fits = getattr(k, "direct_conv_fits", None)
        if req[0] == "null" or fits is None or not fits(pl.x5, pl.g, pl.groups,
                                                        inputs[0].dtype):
            return None
        if not k.direct_conv_backward_data(out_grads[0], inputs[1], in_grads[0], pl.x5, pl.g,
                                           req[0] == "add", state):
            return None
        return ["null"] + list(req[1:])

    def _forward_cols(self, k, pl, x, w, scale, shift, act, y, state):
        x5 = x.reshape(pl.x5)
        y3 = y.reshape(pl.n, pl.f, pl.osize)
        w2 = w.reshape(pl.f, pl.ck)
        col_flat = scratch(k, state, "col", (pl.rows * pl.chunk * pl.osize,), x.dtype)
        rows_flat = scratch(k, state, "res", (pl.f * pl.chunk * pl.osize,), x.dtype)
        # the column matrix of the whole batch stays in place for the weight gradient when
        # the batch is one chunk
        state["col_ready"] = pl.chunk >= pl.n
        if (pl.serial and pl.groups == 1 and hasattr(k, "cols_forward")
                and k.cols_forward(x5, w2, col_flat, rows_flat, y3, pl.g, pl.chunk, scale,
                                   shift, act)):
            return
        for n0 in range(0, pl.n, pl.chunk):
            m = min(pl.chunk, pl.n - n0)
            width = m * pl.osize
            col = col_flat[:pl.rows * width].reshape(pl.rows, width)
            res = rows_flat[:pl.f * width].reshape(pl.f, width)
            k.im2col(x5[n0:n0 + m], col, pl.g)
            for gi in range(pl.groups):
                k.conv_gemm(w2[gi * pl.fg:(gi + 1) * pl.fg], col[gi * pl.ck:(gi + 1) * pl.ck],
                            res[gi * pl.fg:(gi + 1) * pl.fg])
            k.rows_to_batch(res, y3[n0:n0 + m], shift, scale=scale, act=act)

    @float16_via_float32
    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        x, w = inputs[0], inputs[1]
        pl = self._plan(p, x.shape, state, k)
        if self._implicit(k, pl, x.dtype):
            return self._backward_implicit(p, k, pl, out_grads, inputs, in_grads, req, state)
        if self._backward_weight_direct(p, k, pl, out_grads[0], x, in_grads, req, state):
            if req[0] == "null":
                return
            req = [req[0]] + ["null"] * (len(req) - 1)     # the data gradient is left to do
        if not pl.by_rows:
            left = self._backward_data_direct(k, pl, out_grads, inputs, in_grads, req, state)
            if left is not None and all(r == "null" for r in left):
                return      # the data gradient was the only one asked for
            return self._backward_cols(p, k, pl, out_grads, inputs, in_grads, left or req,
                                       state)
        req_x, req_w = req[0], req[1]
        req_b = "null" if p.no_bias else req[2]
        dy3 = out_grads[0].reshape(pl.n, pl.f, pl.osize)
        if req_b != "null":
            k.channel_sum(dy3, in_grads[2], accumulate=(req_b == "add"))
        if req_x == "null" and req_w == "null":
            return
        # dy as rows (n*O, F): the output gradient in the layout of the forward's result
        dyt = self._channel_last(k, state, "dy_last", dy3, pl.f, pl.n)
        dyt = dyt.reshape(pl.n * pl.osize, pl.f)
        rows_flat = scratch(k, state, "rows", (pl.rows * pl.chunk * pl.osize,), x.dtype)
        if req_w != "null":
            # the weight gradient in channel-last order (F, K*C), summed over chunks
            dwt = scratch(k, state, "dw_last", (pl.f, pl.rows), w.dtype)
            kept = state.get("rows_all") if state.get("rows_ready") else None
            if kept is not None and kept.size == pl.n * pl.osize * pl.rows:
                # the training forward's patch rows of the whole batch: one product
                k.conv_gemm(dyt, kept.reshape(pl.n * pl.osize, pl.rows), dwt, trans_a=True)
                chunks = ()
            else:
                chunks = range(0, pl.n, pl.chunk)
                xt = state.get("x_last") if state.get("x_last_ready") else None
                if xt is None or xt.shape != (pl.n, pl.isize, pl.c):
                    xt = self._channel_last(k, state, "x_last", x, pl.c, pl.n)
            part = scratch(k, state, "dw_part", (pl.f, pl.rows), w.dtype) \
                if pl.chunk < pl.n and chunks else dwt
            for n0 in chunks:
                m = min(pl.chunk, pl.n - n0)
                height = m * pl.osize
                rows = rows_flat[:height * pl.rows].reshape(height, pl.rows)
                k.im2row(xt[n0:n0 + m], rows, (m,) + pl.x5[1:], pl.g)
                target = dwt if n0 == 0 else part
                k.conv_gemm(dyt[n0 * pl.osize:n0 * pl.osize + height], rows, target,
                            trans_a=True)
                if n0 > 0:
                    k.assign(dwt, part, "add")
            dw3 = in_grads[1].reshape(pl.f, pl.c, pl.ksize)
            if pl.c == 1 or pl.ksize == 1:
                k.assign(dw3, dwt.reshape(dw3.shape), req_w)
            else:
                if req_w == "write":
                    k.transpose_planes(dwt.reshape(pl.f, pl.ksize, pl.c), dw3)
                else:
                    k.transpose_planes(dwt.reshape(pl.f, pl.ksize, pl.c), dw3, accumulate=True)
        if req_x != "null":
            dx = in_grads[0]
            # channel-last data is the same memory as dx when C or the image size is 1
            in_place = pl.c == 1 or pl.isize == 1
            if (pl.winograd and hasattr(k, "winograd_conv_last") and max(pl.pad) <= 2
                    and not (in_place and req_x == "add")):
                return self._backward_data_winograd(k, pl, dyt, w, dx, req_x, in_place, state)
            wt = self._channel_last(k, state, "w_last", w, pl.c, pl.f).reshape(pl.f, pl.rows)
            if in_place:
                dxt = dx.reshape(pl.n, pl.isize, pl.c)
            else:
                dxt = scratch(k, state, "dx_last", (pl.n, pl.isize, pl.c), dx.dtype)
            if not (in_place and req_x == "add"):
                k.fill(dxt, 0.0)
            if pl.serial and hasattr(k, "rows_backward_data") and k.rows_backward_data(
                    dyt, wt, rows_flat, dxt, pl.x5, pl.g, pl.chunk):
                chunks = ()
            else:
                chunks = range(0, pl.n, pl.chunk)
            for n0 in chunks:
                m = min(pl.chunk, pl.n - n0)
                height = m * pl.osize
                rows = rows_flat[:height * pl.rows].reshape(height, pl.rows)
                k.conv_gemm(dyt[n0 * pl.osize:n0 * pl.osize + height], wt, rows)
                k.row2im(rows, dxt[n0:n0 + m], (m,) + pl.x5[1:], pl.g)
            if not in_place:
                k.transpose_planes(dxt, dx.reshape(pl.n, pl.c, pl.isize),
                                   accumulate=(req_x == "add"))

    @staticmethod
    def _weight_direct_fits(k, pl):
        """Whether the weight gradient of plan ``pl`` goes to the direct reduction (see
        _backward_weight_direct)."""
        fits = getattr(k, "conv_wgrad_fits", None)
        return (fits is not None and pl.osize >= WGRAD_MIN_POSITIONS and pl.g[2] >= 3
                and fits(pl.x5, pl.g, pl.groups, pl.f))

    def _backward_weight_direct(self, p, k, pl, dy, x, in_grads, req, state):
        """The weight and bias gradients by the kernel set's direct reduction
        (kernels/cpu/conv_wgrad.py), where it takes the shape and beats the product on the
        column or patch matrix: kernel rows of 3 or more taps (fewer taps load almost as many
        inputs as they multiply) and at least WGRAD_MIN_POSITIONS output positions per image
        (each of its loops runs over one image's positions). True when done."""
        req_w = req[1]
        req_b = "null" if p.no_bias else req[2]
        if req_w == "null":
            return False
        # the choice and the scratch, once per plan and dtype
        kept = state.get("wgrad")
        if kept is None or kept[0] is not pl or kept[1] != x.dtype:
            scratches = None
            if self._weight_direct_fits(k, pl):
                blocks, xs_size, dw_size, db_size = k.conv_wgrad_scratch(pl.x5, pl.g, pl.f)
                scratches = (k.empty((xs_size,), x.dtype), k.empty((blocks, dw_size), x.dtype),
                             k.empty((blocks, db_size), x.dtype))
            kept = state["wgrad"] = (pl, x.dtype, scratches)
        if kept[2] is None:
            return False
        db = None if req_b == "null" else in_grads[2]
        return k.conv_wgrad_direct(x, dy, in_grads[1], db, pl.x5, pl.g, pl.groups, *kept[2],
                                   req_w, req_b)

    def _backward_data_winograd(self, k, pl, dyt, w, dx, req_x, in_place, state):
        """The data gradient of a Winograd-eligible convolution is itself a 3x3 stride-1
        convolution, of the output gradient (channel-last dyt (n*O, F)) with the kernels
        turned by 180 degrees at padding 2 - pad: Winograd too, channel-last into dxt."""
        out_sp = tuple(pl.g[13:15])
        dims = (pl.n, pl.f) + out_sp
        pad = (2 - pl.pad[0], 2 - pl.pad[1])
        u = scratch(k, state, "winograd_du", (16, pl.f, pl.c), w.dtype)
        k.winograd_weights(w, u, flip=True)
        parts = k.conv_rows_workers(pl.n, pl.n * pl.rows * pl.osize)
        chunk = k.winograd_chunk(dims, pad, parts)
        v_shape, m_shape = k.winograd_scratch_shapes(dims, pl.c, pad, parts, chunk)
        v = scratch(k, state, "winograd_dv", v_shape, dyt.dtype)
        mm = scratch(k, state, "winograd_dm", m_shape, dyt.dtype)
        if in_place:
            dxt = dx.reshape(pl.n * pl.isize, pl.c)
        else:
            dxt = scratch(k, state, "dx_last", (pl.n, pl.isize, pl.c), dx.dtype)
        k.winograd_conv_last(dyt, u, dxt.reshape(pl.n * pl.isize, pl.c), v, mm, dims, pad,
                             chunk)
        if not in_place:
            k.transpose_planes(dxt, dx.reshape(pl.n, pl.c, pl.isize),
                               accumulate=(req_x == "add"))

    def _backward_implicit(self, p, k, pl, out_grads, inputs, in_grads, req, state):
        """Both gradients as implicit GEMMs straight from x, w and dy (no patch matrix)."""
        x, w = inputs[0], inputs[1]
        req_x, req_w = req[0], req[1]
        req_b = "null" if p.no_bias else req[2]
        dy = out_grads[0]
        if req_b != "null":
            k.channel_sum(dy.reshape(pl.n, pl.f, pl.osize), in_grads[2],
                          accumulate=(req_b == "add"))
        if req_w != "null":
            partial = scratch(k, state, "dw_partial",
                              (k.implicit_weight_scratch(pl.x5, pl.g, pl.groups, pl.f),),
                              w.dtype)
            k.implicit_conv_backward_weight(x, dy, in_grads[1], pl.x5, pl.g, pl.groups, partial,
                                            accumulate=(req_w == "add"))
        if req_x != "null":
            k.implicit_conv_backward_data(dy, w, in_grads[0], pl.x5, pl.g, pl.groups,
                                          accumulate=(req_x == "add"))

    def _backward_cols(self, p, k, pl, out_grads, inputs, in_grads, req, state):
        x, w = inputs[0], inputs[1]
        req_x, req_w = req[0], req[1]
        req_b = "null" if p.no_bias else req[2]
        x5 = x.reshape(pl.x5)
        w2 = w.reshape(pl.f, pl.ck)
        dy3 = out_grads[0].reshape(pl.n, pl.f, pl.osize)
        dx5 = in_grads[0].reshape(pl.x5) if req_x != "null" else None
        dw = None if req_w == "null" else \
            _ChunkSum(k, state, in_grads[1].reshape(pl.f, pl.ck), req_w, pl, w.dtype)
        db = in_grads[2] if req_b != "null" else None
        col_flat = scratch(k, state, "col", (pl.rows * pl.chunk * pl.osize,), x.dtype)
        rows_flat = scratch(k, state, "res", (pl.f * pl.chunk * pl.osize,), x.dtype)
        if (pl.serial and pl.groups == 1 and hasattr(k, "cols_backward")
                and k.cols_backward(x5, w2, dy3, dx5, None if dw is None else dw.dw, db, pl.g,
                                    pl.chunk, col_flat, rows_flat, req_x, req_w, req_b)):
            state["col_ready"] = False
            return
        for n0, m, width in _chunks(pl, pl.osize):
            col = col_flat[:pl.rows * width].reshape(pl.rows, width)
            dyt = rows_flat[:pl.f * width].reshape(pl.f, width)
            k.batch_to_rows(dy3[n0:n0 + m], dyt, db, db_accumulate=(n0 > 0 or req_b == "add"))
            if dw is not None:
                if not (state.get("col_ready") and pl.chunk >= pl.n):
                    k.im2col(x5[n0:n0 + m], col, pl.g)
                target, adds = dw.target(n0)
                _grouped_gemm(k, pl.groups, dyt, pl.fg, col, pl.ck, target, pl.fg,
                              trans_b=True, accumulate=adds)
                dw.add(n0)
            if dx5 is not None:
                dcol = col  # the column buffer is free once the weight gradient is done
                state["col_ready"] = False
                _grouped_gemm(k, pl.groups, w2, pl.fg, dyt, pl.fg, dcol, pl.ck, trans_a=True)
                k.col2im(dcol, dx5[n0:n0 + m], pl.g, accumulate=(req_x == "add"))


@register
class Deconvolution(_ConvBase):
    """Transposed convolution: the gradient of Convolution with respect to its data."""
    name = "Deconvolution"
    inputs = ("data", "weight", "bias")
    params = dict(list(_conv_params(512, True).items())[:4]
                  + [("adj", Shape((), "extra size added on one side of the output")),
                     ("target_shape", Shape((), "output spatial shape; sets pad and adj"))]
                  + list(_conv_params(512, True).items())[4:])

    def check_params(self, p):
        super().check_params(p)
        nd = len(p.kernel)
        p._adj = spatial_tuple(self, p, "adj", p.adj, nd, 0)
        target = tuple(p.target_shape or ())
        p._use_target = len(target) > 0 and all(t for t in target)
        if p._use_target and len(target) != nd:
            raise self.error("target_shape %s must have as many dimensions as kernel %s",
                             target, tuple(p.kernel))
        for i in range(nd):
            if p._adj[i] >= p._stride[i] and not p._use_target:
                raise self.error("adj %s must be smaller than stride %s", p._adj, p._stride)

    def _pad_adj(self, p, spatial):
        """(pad, adj) per dim: from target_shape when given (MXNet's rule), else the params."""
        if not p._use_target:
            return p._pad, p._adj
        pads, adjs = [], []
        for i, x in enumerate(spatial):
            full = p._stride[i] * (x - 1) + p._dilate[i] * (p.kernel[i] - 1) + 1
            if full < p.target_shape[i]:
                raise self.error("target_shape %s is larger than the largest output %d of data "
                                 "size %d in dimension %d", tuple(p.target_shape), full, x, i)
            total = full - p.target_shape[i]
            adjs.append(total % 2)
            pads.append((total + 1) // 2)
        return tuple(pads), tuple(adjs)

    def _out_spatial(self, p, spatial):
        pads, adjs = self._pad_adj(p, spatial)
        out = []
        for i, x in enumerate(spatial):
            if not x:
                out.append(0)
                continue
            o = (p._stride[i] * (x - 1) + p._dilate[i] * (p.kernel[i] - 1) + 1 - 2 * pads[i]
                 + adjs[i])
            if o <= 0:
                raise self.error("output size %d is not positive for data size %d with kernel "
                                 "%s, stride %s, pad %s", o, x, tuple(p.kernel), p._stride, pads)
            out.append(o)
        return tuple(out), pads

    def weight_shape(self, p, channels):
        return (channels, p.num_filter // p.num_group) + tuple(p.kernel)

    def out_spatial_shape(self, p, data):
        if not p._use_target:
            return self._out_spatial(p, data[2:])[0]
        if all(data[2:]):
            self._out_spatial(p, data[2:])  # validates the target
            return tuple(p.target_shape)
        return (0,) * len(p.kernel)

    def _plan(self, p, xshape, state):
        plan = state.get("plan")
        if plan is not None and plan.xshape == tuple(xshape):
            return plan
        n, c = xshape[0], xshape[1]
        f, groups = p.num_filter, p.num_group
        out_sp, pads = self._out_spatial(p, tuple(xshape[2:]))
        ksize = _prod(p.kernel)
        isize = _prod(xshape[2:])
        rows = f * ksize
        chunk = max(1, min(n, COL_BUDGET // max(1, rows * isize)))
        plan = _Plan(xshape=tuple(xshape), n=n, c=c, f=f, groups=groups, cg=c // groups,
                     fk=(f // groups) * ksize, rows=rows, isize=isize, chunk=chunk,
                     y5=shape5((n, f) + out_sp), yshape3=(n, f, _prod(out_sp)),
                     g=geometry3(p.kernel, p._stride, pads, p._dilate, tuple(xshape[2:])))
        state["plan"] = plan
        return plan

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        x, w = inputs[0], inputs[1]
        b = None if p.no_bias else inputs[2]
        y = outputs[0]
        pl = self._plan(p, x.shape, state)
        x3 = x.reshape(pl.n, pl.c, pl.isize)
        w2 = w.reshape(pl.c, pl.fk)
        y5 = y.reshape(pl.y5)
        y3 = y.reshape(pl.yshape3)
        col_flat = scratch(k, state, "col", (pl.rows * pl.chunk * pl.isize,), x.dtype)
        rows_flat = scratch(k, state, "rows", (pl.c * pl.chunk * pl.isize,), x.dtype)
        for n0, m, width in _chunks(pl, pl.isize):
            col = col_flat[:pl.rows * width].reshape(pl.rows, width)
            xt = rows_flat[:pl.c * width].reshape(pl.c, width)
            k.batch_to_rows(x3[n0:n0 + m], xt)
            _grouped_gemm(k, pl.groups, w2, pl.cg, xt, pl.cg, col, pl.fk, trans_a=True)
            k.col2im(col, y5[n0:n0 + m], pl.g, accumulate=False)
        if b is not None:
            k.add_channel_bias(y3, b)

    @float16_via_float32
    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        x, w = inputs[0], inputs[1]
        pl = self._plan(p, x.shape, state)
        req_x, req_w = req[0], req[1]
        req_b = "null" if p.no_bias else req[2]
        x3 = x.reshape(pl.n, pl.c, pl.isize)
        w2 = w.reshape(pl.c, pl.fk)
        dy5 = out_grads[0].reshape(pl.y5)
        dx3 = in_grads[0].reshape(pl.n, pl.c, pl.isize) if req_x != "null" else None
        dw = None if req_w == "null" else \
            _ChunkSum(k, state, in_grads[1].reshape(pl.c, pl.fk), req_w, pl, w.dtype)
        if req_b != "null":
            k.channel_sum(out_grads[0].reshape(pl.yshape3), in_grads[2],
                          accumulate=(req_b == "add"))
        if dx3 is None and dw is None:
            return
        col_flat = scratch(k, state, "col", (pl.rows * pl.chunk * pl.isize,), x.dtype)
        rows_flat = scratch(k, state, "rows", (pl.c * pl.chunk * pl.isize,), x.dtype)
        for n0, m, width in _chunks(pl, pl.isize):
            col = col_flat[:pl.rows * width].reshape(pl.rows, width)
            buf = rows_flat[:pl.c * width].reshape(pl.c, width)
            k.im2col(dy5[n0:n0 + m], col, pl.g)
            if dw is not None:
                k.batch_to_rows(x3[n0:n0 + m], buf)
                target, adds = dw.target(n0)
                _grouped_gemm(k, pl.groups, buf, pl.cg, col, pl.fk, target, pl.cg,
                              trans_b=True, accumulate=adds)
                dw.add(n0)
            if dx3 is not None:
                _grouped_gemm(k, pl.groups, w2, pl.cg, col, pl.fk, buf, pl.cg)
                k.rows_to_batch(buf, dx3[n0:n0 + m], None, accumulate=(req_x == "add"))
