"""Normalisation operators: BatchNorm (and BatchNorm_v1, contrib.SyncBatchNorm), InstanceNorm,
LayerNorm, GroupNorm, L2Normalization, LRN, and image.normalize.

BatchNorm follows MXNet 1.9.1 exactly where numbers depend on it: batch mean and *biased*
variance over every axis but ``axis``; ``fix_gamma`` (default True) uses gamma = 1, writes 1
into the gamma array (as MXNet's CPU kernel does) and gives it a zero gradient; the hidden
outputs are the mean and 1/sqrt(var + eps) actually used; inference or ``use_global_stats``
use the moving statistics; and the moving statistics are updated in the **backward** pass
(``moving = moving * momentum + batch * (1 - momentum)``), so a training forward alone leaves
them untouched.
"""
import numpy as np

from .common import prod
from .conv import _merge_input, float16_via_float32, scratch
from .registry import REQUIRED, Bool, Enum, Float, FloatTuple, Int, Operator, OptFloat, Str, register

__all__ = ["BatchNorm", "InstanceNorm", "LayerNorm", "L2Normalization", "LRN", "BatchNormV1",
           "SyncBatchNorm", "GroupNorm", "ImageNormalize"]


def _split3(shape, axis):
    """(outer, shape[axis], inner) for viewing an array as 3-D around axis."""
    return prod(shape[:axis]), int(shape[axis]), prod(shape[axis + 1:])


def _param_dtype(dtype):
    """MXNet keeps normalisation parameters in float32 for float16 data."""
    return "float32" if dtype == "float16" else dtype


def _grad_buffers(k, in_grads, req, dy, spare):
    """(dx, dgamma, dbeta, their req codes) for a normalisation's backward kernel. A gradient
    that is not requested gets a stand-in the kernel does not write (its req code is 'null'):
    dy for dx, ``spare`` for the parameters."""
    dx = in_grads[0].reshape(dy.shape) if req[0] != "null" else dy
    dgamma = in_grads[1] if req[1] != "null" else spare
    dbeta = in_grads[2] if req[2] != "null" else spare
    return dx, dgamma, dbeta, [k.req_code(r) for r in req[:3]]


class _Normalisation(Operator):
    """A normalisation layer: the normalised data, then hidden statistics outputs named
    ``stat_names`` (visible too where the op has ``output_mean_var`` and it is set)."""
    stat_names = ("mean", "std")

    def num_outputs(self, p):
        return 1 + len(self.stat_names)

    def num_visible_outputs(self, p):
        shown = "output_mean_var" in self.params and p.output_mean_var
        return self.num_outputs(p) if shown else 1

    def list_outputs(self, p):
        return ["output", *self.stat_names][:self.num_visible_outputs(p)]

    def _axis(self, p, data):
        axis = p.axis + len(data) if p.axis < 0 else p.axis
        if axis < 0 or axis >= len(data):
            raise self.error("axis %d is out of range for data %s", p.axis, data)
        return axis


class _ScaleShift(_Normalisation):
    """Normalisation followed by a learnt scale and shift: inputs data, gamma, beta (and any
    auxiliary statistics) where every input after data has the shape ``param_shape``."""

    def param_shape(self, p, data):
        """The shape of gamma and beta for data of shape ``data`` (None while unknown);
        raises on data the op cannot take."""
        raise NotImplementedError

    def stat_shape(self, p, data):
        raise NotImplementedError

    def infer_shape(self, p, in_shapes):
        in_shapes = list(in_shapes)
        data = None if in_shapes[0] is None else tuple(in_shapes[0])
        param = self.param_shape(p, data)
        if param is not None:
            for i, name in enumerate(self.inputs[1:], 1):
                in_shapes[i] = _merge_input(self, name, in_shapes[i], param)
        if data is None:
            return in_shapes, [None] * self.num_outputs(p)
        in_shapes[0] = data
        return in_shapes, [data] + [self.stat_shape(p, data)] * len(self.stat_names)


class _DataOnly(_Normalisation):
    """A normalisation of one input with one hidden output (of ``hidden_shape``)."""
    inputs = ("data",)
    stat_names = ("hidden",)

    def hidden_shape(self, p, data):
        raise NotImplementedError

    def infer_shape(self, p, in_shapes):
        data = in_shapes[0]
        if data is None:
            return list(in_shapes), [None, None]
        data = tuple(data)
        return [data], [data, self.hidden_shape(p, data)]

    def infer_type(self, p, in_types):
        return [in_types[0]], [in_types[0]] * 2


@register
class BatchNorm(_ScaleShift):
    """Batch normalisation with moving statistics as auxiliary states."""
    name = "BatchNorm"
    inputs = ("data", "gamma", "beta", "moving_mean", "moving_var")
    aux = ("moving_mean", "moving_var")
    input_init = {"moving_mean": '["zero", {}]', "moving_var": '["one", {}]'}
    params = {
        "eps": Float(1e-3, "added to the variance before the square root"),
        "momentum": Float(0.9, "decay of the moving statistics"),
        "fix_gamma": Bool(True, "use gamma = 1 (and give gamma no gradient)"),
        "use_global_stats": Bool(False, "normalise with the moving statistics in training too"),
        "output_mean_var": Bool(False, "also output the mean and 1/sqrt(var + eps)"),
        "axis": Int(1, "the channel axis"),
        "cudnn_off": Bool(False, "accepted for compatibility; ignored"),
        "min_calib_range": OptFloat(None, "quantisation knob; ignored"),
        "max_calib_range": OptFloat(None, "quantisation knob; ignored"),
    }
    stat_names = ("mean", "var")

    def param_shape(self, p, data):
        return None if data is None else (data[self._axis(p, data)],)

    def stat_shape(self, p, data):
        return self.param_shape(p, data)

    def infer_type(self, p, in_types):
        dtype = in_types[0]
        if dtype is None:
            return list(in_types), [None, None, None]
        pt = _param_dtype(dtype)
        return [dtype] + [pt] * 4, [dtype, pt, pt]

    def _views(self, p, x):
        return _split3(x.shape, self._axis(p, tuple(x.shape)))

    def _stat_arrays(self, k, outputs, state, channels, dtype):
        """(1/sqrt(var + eps), batch variance) where the forward writes them and the backward
        reads them: the third output, and an array kept for the moving update."""
        return outputs[2], scratch(k, state, "batch_var", (channels,), dtype)

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        x, gamma, beta, moving_mean, moving_var = inputs
        shape3 = self._views(p, x)
        if p.fix_gamma:
            k.fill(gamma, 1.0)
        batch_stats = bool(is_train and not p.use_global_stats)
        invstd, var = self._stat_arrays(k, outputs, state, shape3[1], gamma.dtype)
        k.bn_forward(x.reshape(shape3), outputs[0].reshape(shape3), gamma, beta, outputs[1],
                     invstd, var, moving_mean, moving_var, p.eps, batch_stats, p.fix_gamma)
        state["batch_stats"] = batch_stats

    @float16_via_float32
    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        x, gamma, beta, moving_mean, moving_var = inputs
        shape3 = self._views(p, x)
        batch_stats = state.get("batch_stats", False)
        dy = out_grads[0].reshape(shape3)
        dx, dgamma, dbeta, codes = _grad_buffers(k, in_grads, req, dy, outputs[1])
        invstd, var = self._stat_arrays(k, outputs, state, shape3[1], gamma.dtype)
        k.bn_backward(x.reshape(shape3), dy, dx, gamma, outputs[1], invstd, dgamma, dbeta,
                      batch_stats, p.fix_gamma, *codes)
        if batch_stats:
            k.bn_update_moving(moving_mean, moving_var, outputs[1], var, p.momentum)


@register
class InstanceNorm(_ScaleShift):
    """Normalise each (sample, channel) over its spatial positions, then scale and shift."""
    name = "InstanceNorm"
    inputs = ("data", "gamma", "beta")
    params = {"eps": Float(1e-3, "added to the variance before the square root")}

    def param_shape(self, p, data):
        if data is None:
            return None
        if len(data) < 3:
            raise self.error("data has shape %s: expected (batch, channel, spatial...) with at "
                             "least 3 dims", data)
        return (data[1],)

    def stat_shape(self, p, data):
        return data[:2]

    def infer_type(self, p, in_types):
        dtype = next((t for t in in_types if t is not None), None)
        if dtype == "float16":
            raise self.error("float16 data is not supported (MXNet's InstanceNorm takes "
                             "float32)")
        return [dtype] * 3, [dtype] * 3

    def forward(self, p, k, inputs, outputs, is_train, state):
        x, gamma, beta = inputs
        shape3 = (x.shape[0], x.shape[1], prod(x.shape[2:]))
        k.instance_norm_forward(x.reshape(shape3), outputs[0].reshape(shape3), gamma, beta,
                                outputs[1], outputs[2], p.eps)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        x, gamma, beta = inputs
        shape3 = (x.shape[0], x.shape[1], prod(x.shape[2:]))
        dy = out_grads[0].reshape(shape3)
        dx, dgamma, dbeta, codes = _grad_buffers(k, in_grads, req, dy, gamma)
        k.instance_norm_backward(x.reshape(shape3), dy, dx, gamma, outputs[1], outputs[2],
                                 dgamma, dbeta, p.eps, *codes)


@register
class LayerNorm(_ScaleShift):
    """Normalise over one axis (the last by default), then scale and shift along it."""
    name = "LayerNorm"
    inputs = ("data", "gamma", "beta")
    params = {
        "axis": Int(-1, "the axis normalised over"),
        "eps": Float(1e-5, "added to the variance before the square root"),
        "output_mean_var": Bool(False, "also output the mean and the std"),
    }

    def param_shape(self, p, data):
        return None if data is None else (data[self._axis(p, data)],)

    def stat_shape(self, p, data):
        axis = self._axis(p, data)
        return data[:axis] + (1,) + data[axis + 1:]

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        x, gamma, beta = inputs
        shape3 = _split3(x.shape, self._axis(p, tuple(x.shape)))
        rows = shape3[0] * shape3[2]
        k.row_norm_forward(x.reshape(shape3), outputs[0].reshape(shape3), gamma, beta,
                           outputs[1].reshape(rows), outputs[2].reshape(rows), p.eps, 0)

    @float16_via_float32
    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        x, gamma, beta = inputs
        shape3 = _split3(x.shape, self._axis(p, tuple(x.shape)))
        rows = shape3[0] * shape3[2]
        x3, dy = x.reshape(shape3), out_grads[0].reshape(shape3)
        mean, std = outputs[1].reshape(rows), outputs[2].reshape(rows)
        if req[0] != "null":
            k.row_norm_backward(x3, outputs[0].reshape(shape3), dy, in_grads[0].reshape(shape3),
                                gamma, mean, std, 0, accumulate=(req[0] == "add"))
        if req[1] != "null" or req[2] != "null":
            _, dgamma, dbeta, codes = _grad_buffers(k, in_grads, req, dy, gamma)
            k.param_grad_columns(x3, dy, mean, std, dgamma, dbeta, *codes[1:])


@register
class L2Normalization(_DataOnly):
    """Divide by the L2 norm over each instance, each channel vector or each spatial map."""
    name = "L2Normalization"
    params = {
        "eps": Float(1e-10, "added to the sum of squares"),
        "mode": Enum("channel", "instance", "spatial", default="instance"),
    }

    def _layout(self, p, data):
        """(shape3 around the normalised axis, hidden norm shape)."""
        need = {"instance": 2, "channel": 2, "spatial": 3}[p.mode]
        if len(data) < need:
            raise self.error("mode '%s' needs data with at least %d dims, got %s", p.mode, need,
                             data)
        if p.mode == "instance":
            return (data[0], prod(data[1:]), 1), (data[0],)
        if p.mode == "channel":
            return (data[0], data[1], prod(data[2:])), (data[0],) + tuple(data[2:])
        return (data[0] * data[1], prod(data[2:]), 1), tuple(data[:2])

    def hidden_shape(self, p, data):
        return self._layout(p, data)[1]

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        x = inputs[0]
        shape3, _ = self._layout(p, tuple(x.shape))
        rows = shape3[0] * shape3[2]
        norm = outputs[1].reshape(rows)
        k.row_norm_forward(x.reshape(shape3), outputs[0].reshape(shape3), norm, norm, norm, norm,
                           p.eps, 1)

    @float16_via_float32
    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[0] == "null":
            return
        x = inputs[0]
        shape3, _ = self._layout(p, tuple(x.shape))
        rows = shape3[0] * shape3[2]
        norm = outputs[1].reshape(rows)
        k.row_norm_backward(x.reshape(shape3), outputs[0].reshape(shape3),
                            out_grads[0].reshape(shape3), in_grads[0].reshape(shape3), norm,
                            norm, norm, 1, accumulate=(req[0] == "add"))


@register
class LRN(_DataOnly):
    """Local response normalisation across channels (AlexNet)."""
    name = "LRN"
    params = {
        "alpha": Float(1e-4, "variance scaling"),
        "beta": Float(0.75, "power"),
        "knorm": Float(2.0, "additive constant"),
        "nsize": Int(REQUIRED, "normalisation window width in channels"),
    }

    def check_params(self, p):
        if p.nsize <= 0:
            raise self.error("nsize must be positive, got %d", p.nsize)

    def hidden_shape(self, p, data):
        if len(data) != 4:
            raise self.error("data has shape %s: expected 4-D data (batch, channel, y, x)",
                             data)
        return data

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        x = inputs[0]
        shape3 = (x.shape[0], x.shape[1], prod(x.shape[2:]))
        k.lrn_forward(x.reshape(shape3), outputs[0].reshape(shape3), outputs[1].reshape(shape3),
                      p.nsize, p.alpha, p.beta, p.knorm)

    @float16_via_float32
    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[0] == "null":
            return
        x = inputs[0]
        shape3 = (x.shape[0], x.shape[1], prod(x.shape[2:]))
        tmp = scratch(k, state, "lrn_tmp", shape3, x.dtype)
        k.lrn_backward(x.reshape(shape3), outputs[1].reshape(shape3),
                       out_grads[0].reshape(shape3), in_grads[0].reshape(shape3), tmp, p.nsize,
                       p.alpha, p.beta, accumulate=(req[0] == "add"))


@register
class BatchNormV1(BatchNorm):
    """MXNet's first BatchNorm: the same normalisation with the channel fixed on axis 1 and
    the older attribute set (no ``axis``, no ``cudnn_off``)."""
    name = "BatchNorm_v1"
    params = {key: BatchNorm.params[key]
              for key in ("eps", "momentum", "fix_gamma", "use_global_stats", "output_mean_var")}

    def check_params(self, p):
        p.axis = 1


@register
class SyncBatchNorm(BatchNorm):
    """BatchNorm over axis 1 whose batch statistics are meant to cover the batches of ``ndev``
    devices (the executors sharing ``key``). Differences from BatchNorm, as in MXNet 1.9.1:
    the third output is the batch's biased variance (not 1/sqrt(var + eps)), there is no
    ``axis``, and the moving statistics are updated in backward from that variance.

    lightmod runs the executors of several devices one after another, so statistics cannot
    be pooled across devices: with ``ndev`` above 1 a training forward that uses batch
    statistics raises (MXNet would wait for the other devices); inference and
    ``use_global_stats`` work for any ``ndev``."""
    name = "_contrib_SyncBatchNorm"
    hint = "syncbatchnorm"
    params = dict({key: BatchNorm.params[key]
                   for key in ("eps", "momentum", "fix_gamma", "use_global_stats",
                               "output_mean_var")},
                  ndev=Int(1, "the number of devices whose batches are normalised together"),
                  key=Str(REQUIRED, "the name the devices' layers share"))

    def check_params(self, p):
        p.axis = 1
        if p.ndev < 1:
            raise self.error("ndev must be positive, got %d", p.ndev)

    def _stat_arrays(self, k, outputs, state, channels, dtype):
        # the third output is the variance here; the inverse std is kept apart
        return scratch(k, state, "invstd", (channels,), dtype), outputs[2]

    def forward(self, p, k, inputs, outputs, is_train, state):
        batch_stats = bool(is_train and not p.use_global_stats)
        if batch_stats and p.ndev != 1:
            raise self.error("key '%s' asks for statistics pooled over ndev=%d devices, but "
                             "lightmod runs one device's executor at a time; use ndev=1 (or "
                             "use_global_stats=True)", p.key, p.ndev)
        super().forward(p, k, inputs, outputs, is_train, state)
        if not batch_stats:
            k.copy(outputs[2], inputs[4])     # the moving variance used, as the mean output is


@register
class GroupNorm(_ScaleShift):
    """Normalise each (sample, group of channels) over its channels and positions, then
    scale and shift with one gamma and beta per group."""
    name = "GroupNorm"
    inputs = ("data", "gamma", "beta")
    params = {
        "num_groups": Int(1, "number of channel groups"),
        "eps": Float(1e-5, "added to the variance before the square root"),
        "output_mean_var": Bool(False, "also output the mean and the std of every group"),
    }

    def check_params(self, p):
        if p.num_groups <= 0:
            raise self.error("num_groups must be positive, got %d", p.num_groups)

    def param_shape(self, p, data):
        return (p.num_groups,)      # known before the data is

    def stat_shape(self, p, data):
        if len(data) < 2:
            raise self.error("data has shape %s: expected (batch, channel, ...) with at least "
                             "2 dims", data)
        if data[1] and data[1] % p.num_groups:
            raise self.error("data has shape %s: its %d channels do not split into num_groups="
                             "%d groups", data, data[1], p.num_groups)
        return (data[0], p.num_groups)

    def _shape3(self, p, x):
        return (x.shape[0], p.num_groups, x.size // (x.shape[0] * p.num_groups))

    @float16_via_float32
    def forward(self, p, k, inputs, outputs, is_train, state):
        x, gamma, beta = inputs
        shape3 = self._shape3(p, x)
        var = scratch(k, state, "group_var", shape3[:2], outputs[2].dtype)
        # each group is one "instance" of InstanceNorm on the (N, G, rest) view
        k.instance_norm_forward(x.reshape(shape3), outputs[0].reshape(shape3), gamma, beta,
                                outputs[1], var, p.eps)
        k.elemwise_scalar("add", var, p.eps, outputs[2])
        k.elemwise_unary("sqrt", outputs[2], outputs[2])

    @float16_via_float32
    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        x, gamma, beta = inputs
        shape3 = self._shape3(p, x)
        var = state["group_var"]
        dy = out_grads[0].reshape(shape3)
        dx, dgamma, dbeta, codes = _grad_buffers(k, in_grads, req, dy, gamma)
        k.instance_norm_backward(x.reshape(shape3), dy, dx, gamma, outputs[1], var, dgamma,
                                 dbeta, p.eps, *codes)


@register
class ImageNormalize(Operator):
    """``image.normalize``: (x - mean[c]) / std[c] per channel of (C, H, W) or (N, C, H, W)
    images."""
    name = "_image_normalize"
    params = {
        "mean": FloatTuple((0.0, 0.0, 0.0, 0.0), "per-channel mean (one value: every channel)"),
        "std": FloatTuple((1.0, 1.0, 1.0, 1.0), "per-channel standard deviation"),
    }
    hint = "normalize"

    def _per_channel(self, p, data):
        """(mean, std) as arrays broadcasting against data."""
        if len(data) not in (3, 4):
            raise self.error("data has shape %s: expected 3 dims (C, H, W) or 4 dims "
                             "(N, C, H, W)", data)
        channels = data[-3]
        values = []
        for name in ("mean", "std"):
            v = tuple(getattr(p, name))
            if len(v) not in (1, channels) and len(set(v)) != 1:
                raise self.error("%s %s must have 1 or %d values for data %s", name, v, channels,
                                 data)
            values.append(v if len(v) == channels else v[:1] * channels)
        if any(s == 0 for s in values[1]):
            raise self.error("std %s must not contain 0", tuple(p.std))
        shape = (channels, 1, 1) if len(data) == 3 else (1, channels, 1, 1)
        return [np.array(v, dtype=np.float64).reshape(shape) for v in values]

    def infer_shape(self, p, in_shapes):
        data = in_shapes[0]
        if data is None:
            return list(in_shapes), [None]
        data = tuple(data)
        self._per_channel(p, data)
        return [data], [data]

    def _constants(self, p, k, x, state):
        shape = tuple(x.shape)
        mean = scratch(k, state, "mean", (1,) * (len(shape) - 3) + (shape[-3], 1, 1), x.dtype)
        std = scratch(k, state, "std", mean.shape, x.dtype)
        if state.get("constants_for") != tuple(x.shape):
            m, s = self._per_channel(p, tuple(x.shape))
            k.copy(mean, m.astype(x.dtype))
            k.copy(std, s.astype(x.dtype))
            state["constants_for"] = tuple(x.shape)
        return mean, std

    def forward(self, p, k, inputs, outputs, is_train, state):
        mean, std = self._constants(p, k, inputs[0], state)
        k.elemwise_binary("sub", inputs[0], mean, outputs[0])
        k.elemwise_binary("div", outputs[0], std, outputs[0])

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[0] == "null":
            return
        _, std = self._constants(p, k, inputs[0], state)
        if req[0] == "write":
            k.elemwise_binary("div", out_grads[0], std, in_grads[0])
            return
        tmp = scratch(k, state, "grad", in_grads[0].shape, in_grads[0].dtype)
        k.elemwise_binary("div", out_grads[0], std, tmp)
        k.assign(in_grads[0], tmp, req[0])
