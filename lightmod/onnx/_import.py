"""ONNX model -> lightmod symbol and parameters (``mx.contrib.onnx.import_model``).

The importer reads the operator set the exporter writes (and the same operators from other
producers): each ONNX node becomes one lightmod operator, or a few. Initializers become
``arg_params`` (``aux_params`` for BatchNormalization's running statistics); small constants that
only parametrise a node (shapes, axes, clip bounds, scalar operands) become its attributes.
"""
import numpy as np

from ..base import MXNetError
from ._deps import require_onnx

__all__ = ["import_model", "get_model_metadata"]

_ACTIVATION = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Softplus": "softrelu",
               "Softsign": "softsign"}
_UNARY = {"Exp": "exp", "Log": "log", "Sqrt": "sqrt", "Abs": "abs", "Neg": "negative",
          "Reciprocal": "reciprocal", "Floor": "floor", "Ceil": "ceil", "Sin": "sin",
          "Cos": "cos", "Tan": "tan", "Sign": "sign", "Round": "rint"}
# ONNX binary op -> (broadcast op, scalar op with the scalar on the right, ... on the left)
_BINARY = {"Add": ("broadcast_add", "_plus_scalar", "_plus_scalar"),
           "Sub": ("broadcast_sub", "_minus_scalar", "_rminus_scalar"),
           "Mul": ("broadcast_mul", "_mul_scalar", "_mul_scalar"),
           "Div": ("broadcast_div", "_div_scalar", "_rdiv_scalar"),
           "Pow": ("broadcast_power", "_power_scalar", "_rpower_scalar"),
           "Max": ("broadcast_maximum", "_maximum_scalar", "_maximum_scalar"),
           "Min": ("broadcast_minimum", "_minimum_scalar", "_minimum_scalar")}
_COMPARE = {"Equal": "broadcast_equal", "Greater": "broadcast_greater",
            "GreaterOrEqual": "broadcast_greater_equal", "Less": "broadcast_lesser",
            "LessOrEqual": "broadcast_lesser_equal"}
_REDUCE = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min",
           "ReduceProd": "prod"}
_POOL = {"MaxPool": "max", "AveragePool": "avg", "LpPool": "lp"}
_GLOBAL_POOL = {"GlobalMaxPool": "max", "GlobalAveragePool": "avg", "GlobalLpPool": "lp"}
# lightmod's gate-block positions, as read from ONNX's order (inverse of the exporter's)
_GATES_FROM_ONNX = {"LSTM": [0, 2, 3, 1], "GRU": [1, 0, 2], "RNN": [0]}

_HANDLERS = {}


def _handles(*op_types):
    def declare(fn):
        for op_type in op_types:
            _HANDLERS[op_type] = fn
        return fn
    return declare


class _Importer:
    def __init__(self, onnx, model):
        from .. import ndarray as nd
        from .. import symbol as sym
        self.onnx = onnx
        self.nd = nd
        self.sym = sym
        self.graph = model.graph
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                          13)
        self.consts = {init.name: onnx.numpy_helper.to_array(init)
                       for init in self.graph.initializer}
        self.tensors = {}
        self.dims = {}          # tensor -> _Dims: run-time shape values, kept symbolic
        self.arg_params = {}
        self.aux_params = {}

    # --- values ----------------------------------------------------------------------------------
    def value(self, name, aux=False):
        """The symbol of a tensor; a constant becomes a parameter variable."""
        if name in self.tensors:
            return self.tensors[name]
        if name not in self.consts:
            raise MXNetError("ONNX import: tensor '%s' is used before it is produced" % name)
        var = self.sym.Variable(name)
        (self.aux_params if aux else self.arg_params)[name] = self.nd.array(
            self.consts[name], dtype=self.consts[name].dtype)
        self.tensors[name] = var
        return var

    def const(self, node, name, what):
        if name not in self.consts:
            raise MXNetError("ONNX import of %s node '%s': %s ('%s') must be a constant"
                             % (node.op_type, node.name, what, name))
        return self.consts[name]

    def param(self, name, array):
        """A parameter variable holding ``array`` (a folded or re-laid-out constant)."""
        key = name
        while key in self.tensors or key in self.arg_params:
            key += "_"
        self.arg_params[key] = self.nd.array(array, dtype=array.dtype)
        var = self.sym.Variable(key)
        self.tensors[key] = var
        return var

    def run(self):
        for inp in self.graph.input:
            if inp.name not in self.consts:
                self.tensors[inp.name] = self.sym.Variable(inp.name)
        for node in self.graph.node:
            attrs = {a.name: self.onnx.helper.get_attribute_value(a) for a in node.attribute}
            attrs = {k: _text(v) for k, v in attrs.items()}
            if node.op_type == "Constant":
                self.consts[node.output[0]] = self.onnx.numpy_helper.to_array(attrs["value"])
                continue
            handler = _HANDLERS.get(node.op_type)
            if handler is None:
                raise MXNetError("ONNX import: operator %s (node '%s') is not supported; the "
                                 "importer reads: %s" % (node.op_type, node.name,
                                                         ", ".join(sorted(_HANDLERS))))
            outs = handler(self, node, attrs)
            for name, out in zip(node.output, outs):
                if out is None:
                    continue
                if isinstance(out, np.ndarray):
                    self.consts[name] = out
                elif isinstance(out, _Dims):
                    self.dims[name] = out
                else:
                    self.tensors[name] = out
        heads = [self.value(o.name) for o in self.graph.output]
        result = heads[0] if len(heads) == 1 else self.sym.Group(heads)
        return result, self.arg_params, self.aux_params


class _Dims:
    """A 1-D int64 tensor of run-time sizes, as (kind, ...) items: ('dim', tensor, axis),
    ('prod', tensor, axis, axis) or ('const', n); ('shape', tensor) is a whole Shape."""

    def __init__(self, items):
        self.items = items


def _reshape_codes(node, data, dims):
    """MXNet Reshape codes for a run-time target built from ``data``'s own dims, or None."""
    codes, src = [], 0
    for item in dims.items:
        if item[0] == "const":
            codes.append(item[1])
            src += 1
        elif item[1] != data:
            return None
        elif item[0] == "dim" and item[2] == src:
            codes.append(0)
            src += 1
        elif item[0] == "prod" and item[2] == src and item[3] == src + 1:
            codes.append(-3)
            src += 2
        else:
            return None
    return tuple(codes)


def _text(value):
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode() for v in value]
    return value


def _node_name(node):
    return node.name or None


def _symmetric_pads(node, pads, count):
    if not pads:
        return (0,) * count
    begin, end = tuple(pads[:count]), tuple(pads[count:])
    if begin != end:
        raise MXNetError("ONNX import of %s node '%s': asymmetric pads %s are not supported"
                         % (node.op_type, node.name, list(pads)))
    return begin


def _no_auto_pad(node, attrs):
    if attrs.get("auto_pad", "NOTSET") != "NOTSET":
        raise MXNetError("ONNX import of %s node '%s': auto_pad=%s is not supported (explicit "
                         "pads only)" % (node.op_type, node.name, attrs["auto_pad"]))


# ---------------------------------------------------------------------------------------------
# Layers
# ---------------------------------------------------------------------------------------------
@_handles("Conv", "ConvTranspose")
def _conv(imp, node, attrs):
    _no_auto_pad(node, attrs)
    weight = imp.const(node, node.input[1], "the weight")
    kernel = tuple(attrs.get("kernel_shape", weight.shape[2:]))
    nd = len(kernel)
    group = attrs.get("group", 1)
    kwargs = dict(kernel=kernel, stride=tuple(attrs.get("strides", (1,) * nd)),
                  dilate=tuple(attrs.get("dilations", (1,) * nd)),
                  pad=_symmetric_pads(node, attrs.get("pads"), nd), num_group=group,
                  no_bias=len(node.input) < 3 or not node.input[2], name=_node_name(node))
    ins = [imp.value(node.input[0]), imp.value(node.input[1])]
    if not kwargs["no_bias"]:
        ins.append(imp.value(node.input[2]))
    if node.op_type == "Conv":
        return [imp.sym.Convolution(*ins, num_filter=weight.shape[0], **kwargs)]
    if "output_shape" in attrs:
        raise MXNetError("ONNX import of ConvTranspose node '%s': output_shape is not supported"
                         % node.name)
    return [imp.sym.Deconvolution(*ins, num_filter=weight.shape[1] * group,
                                  adj=tuple(attrs.get("output_padding", (0,) * nd)), **kwargs)]


@_handles("Gemm")
def _gemm(imp, node, attrs):
    if attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0 or attrs.get("transA", 0):
        raise MXNetError("ONNX import of Gemm node '%s': only alpha=1, beta=1, transA=0 are "
                         "supported" % node.name)
    weight = imp.const(node, node.input[1], "the weight")
    if attrs.get("transB", 0):
        w = imp.value(node.input[1])
        hidden = weight.shape[0]
    else:
        w = imp.param(node.input[1] + "_t", np.ascontiguousarray(weight.T))
        hidden = weight.shape[1]
    has_bias = len(node.input) > 2 and node.input[2]
    if has_bias and imp.const(node, node.input[2], "the bias").shape != (hidden,):
        raise MXNetError("ONNX import of Gemm node '%s': the bias must have shape (%d,)"
                         % (node.name, hidden))
    ins = [imp.value(node.input[0]), w] + ([imp.value(node.input[2])] if has_bias else [])
    return [imp.sym.FullyConnected(*ins, num_hidden=hidden, no_bias=not has_bias,
                                   name=_node_name(node))]


@_handles("MatMul")
def _matmul(imp, node, attrs):
    rhs = imp.consts.get(node.input[1])
    if rhs is not None and rhs.ndim == 2:
        w = imp.param(node.input[1] + "_t", np.ascontiguousarray(rhs.T))
        return [imp.sym.FullyConnected(imp.value(node.input[0]), w, num_hidden=rhs.shape[1],
                                       no_bias=True, flatten=False, name=_node_name(node))]
    return [imp.sym.batch_dot(imp.value(node.input[0]), imp.value(node.input[1]),
                              name=_node_name(node))]


@_handles("BatchNormalization")
def _batch_norm(imp, node, attrs):
    ins = [imp.value(n) for n in node.input[:3]] + [imp.value(n, aux=True)
                                                    for n in node.input[3:5]]
    return [imp.sym.BatchNorm(*ins, eps=attrs.get("epsilon", 1e-5), fix_gamma=False,
                              use_global_stats=True, name=_node_name(node))]


@_handles("InstanceNormalization")
def _instance_norm(imp, node, attrs):
    ins = [imp.value(n) for n in node.input]
    return [imp.sym.InstanceNorm(*ins, eps=attrs.get("epsilon", 1e-5), name=_node_name(node))]


@_handles("LRN")
def _lrn(imp, node, attrs):
    return [imp.sym.LRN(imp.value(node.input[0]), alpha=attrs.get("alpha", 1e-4),
                        beta=attrs.get("beta", 0.75), knorm=attrs.get("bias", 1.0),
                        nsize=attrs["size"], name=_node_name(node))]


@_handles(*_POOL)
def _pool(imp, node, attrs):
    _no_auto_pad(node, attrs)
    kernel = tuple(attrs["kernel_shape"])
    nd = len(kernel)
    if any(d != 1 for d in attrs.get("dilations", ())):
        raise MXNetError("ONNX import of %s node '%s': dilations are not supported"
                         % (node.op_type, node.name))
    kwargs = dict(kernel=kernel, stride=tuple(attrs.get("strides", (1,) * nd)),
                  pad=_symmetric_pads(node, attrs.get("pads"), nd), pool_type=_POOL[node.op_type],
                  pooling_convention="full" if attrs.get("ceil_mode", 0) else "valid",
                  name=_node_name(node))
    if node.op_type == "AveragePool":
        kwargs["count_include_pad"] = bool(attrs.get("count_include_pad", 0))
    if node.op_type == "LpPool":
        kwargs["p_value"] = attrs.get("p", 2)
    return [imp.sym.Pooling(imp.value(node.input[0]), **kwargs)]


@_handles(*_GLOBAL_POOL)
def _global_pool(imp, node, attrs):
    kwargs = {"p_value": attrs.get("p", 2)} if node.op_type == "GlobalLpPool" else {}
    return [imp.sym.Pooling(imp.value(node.input[0]), global_pool=True,
                            pool_type=_GLOBAL_POOL[node.op_type], name=_node_name(node), **kwargs)]


# ---------------------------------------------------------------------------------------------
# Activations
# ---------------------------------------------------------------------------------------------
@_handles(*_ACTIVATION)
def _activation(imp, node, attrs):
    return [imp.sym.Activation(imp.value(node.input[0]), act_type=_ACTIVATION[node.op_type],
                               name=_node_name(node))]


@_handles(*_UNARY)
def _unary(imp, node, attrs):
    fn = getattr(imp.sym._internal, _UNARY[node.op_type])
    return [fn(imp.value(node.input[0]), name=_node_name(node))]


@_handles("LeakyRelu", "Elu", "Selu", "PRelu")
def _leaky(imp, node, attrs):
    x = imp.value(node.input[0])
    name = _node_name(node)
    if node.op_type == "LeakyRelu":
        return [imp.sym.LeakyReLU(x, act_type="leaky", slope=attrs.get("alpha", 0.01), name=name)]
    if node.op_type == "Elu":
        return [imp.sym.LeakyReLU(x, act_type="elu", slope=attrs.get("alpha", 1.0), name=name)]
    if node.op_type == "Selu":
        if abs(attrs.get("alpha", 1.6732632) - 1.6732632) > 1e-6 or \
                abs(attrs.get("gamma", 1.0507010) - 1.0507010) > 1e-6:
            raise MXNetError("ONNX import of Selu node '%s': only the standard alpha and gamma "
                             "are supported" % node.name)
        return [imp.sym.LeakyReLU(x, act_type="selu", name=name)]
    slopes = imp.const(node, node.input[1], "the slopes")
    gamma = imp.param(node.input[1], slopes.reshape(-1))
    return [imp.sym.LeakyReLU(x, gamma, act_type="prelu", name=name)]


@_handles("Softmax", "LogSoftmax")
def _softmax(imp, node, attrs):
    axis = attrs.get("axis", -1 if imp.opset >= 13 else 1)
    if imp.opset < 13 and axis != -1:
        raise MXNetError("ONNX import of %s node '%s': before opset 13 a softmax over axis %d "
                         "spans every later axis; only axis=-1 is supported there"
                         % (node.op_type, node.name, axis))
    fn = imp.sym.softmax if node.op_type == "Softmax" else imp.sym.log_softmax
    return [fn(imp.value(node.input[0]), axis=axis, name=_node_name(node))]


@_handles("Identity", "Dropout")
def _identity(imp, node, attrs):
    if node.input[0] in imp.consts:
        return [imp.consts[node.input[0]], None]
    return [imp.value(node.input[0]), None]


@_handles("Clip")
def _clip(imp, node, attrs):
    low, high = attrs.get("min"), attrs.get("max")
    if len(node.input) > 1 and node.input[1]:
        low = imp.const(node, node.input[1], "min").item()
    if len(node.input) > 2 and node.input[2]:
        high = imp.const(node, node.input[2], "max").item()
    big = float(np.finfo(np.float32).max)
    return [imp.sym.clip(imp.value(node.input[0]), a_min=-big if low is None else low,
                         a_max=big if high is None else high, name=_node_name(node))]


# ---------------------------------------------------------------------------------------------
# Arithmetic
# ---------------------------------------------------------------------------------------------
def _as_scalar(imp, name):
    value = imp.consts.get(name)
    if value is not None and value.size == 1 and name not in imp.tensors:
        return float(value.reshape(-1)[0])
    return None


@_handles(*_BINARY)
def _binary(imp, node, attrs):
    if node.op_type == "Mul" and node.input[0] in imp.dims and node.input[1] in imp.dims:
        a, b = imp.dims[node.input[0]].items, imp.dims[node.input[1]].items
        if len(a) == len(b) == 1 and a[0][0] == b[0][0] == "dim" and a[0][1] == b[0][1]:
            return [_Dims([("prod", a[0][1], a[0][2], b[0][2])])]
        raise MXNetError("ONNX import of Mul node '%s': this product of run-time sizes is not "
                         "supported" % node.name)
    if node.input[0] in imp.consts and node.input[1] in imp.consts:
        raise MXNetError("ONNX import of %s node '%s': both operands are constants"
                         % (node.op_type, node.name))
    full, right, left = _BINARY[node.op_type]
    name = _node_name(node)
    scalar = _as_scalar(imp, node.input[1])
    if scalar is not None:
        return [getattr(imp.sym._internal, right)(imp.value(node.input[0]), scalar=scalar, name=name)]
    scalar = _as_scalar(imp, node.input[0])
    if scalar is not None:
        return [getattr(imp.sym._internal, left)(imp.value(node.input[1]), scalar=scalar, name=name)]
    return [getattr(imp.sym._internal, full)(imp.value(node.input[0]), imp.value(node.input[1]),
                                   name=name)]


@_handles(*_COMPARE)
def _compare(imp, node, attrs):
    return [getattr(imp.sym._internal, _COMPARE[node.op_type])(imp.value(node.input[0]),
                                                     imp.value(node.input[1]),
                                                     name=_node_name(node))]


@_handles("Not")
def _not(imp, node, attrs):
    # the comparisons above give 0/1 numbers
    return [imp.sym._internal._rminus_scalar(imp.value(node.input[0]), scalar=1.0, name=_node_name(node))]


@_handles("Sum")
def _sum(imp, node, attrs):
    ins = [imp.value(n) for n in node.input]
    return [imp.sym.add_n(*ins, name=_node_name(node))]


@_handles(*_REDUCE)
def _reduce(imp, node, attrs):
    axes = attrs.get("axes")
    if len(node.input) > 1 and node.input[1]:
        axes = imp.const(node, node.input[1], "axes").tolist()
    fn = getattr(imp.sym._internal, _REDUCE[node.op_type])
    return [fn(imp.value(node.input[0]), axis=None if not axes else tuple(axes),
               keepdims=bool(attrs.get("keepdims", 1)), name=_node_name(node))]


# ---------------------------------------------------------------------------------------------
# Shapes and layout
# ---------------------------------------------------------------------------------------------
@_handles("Flatten")
def _flatten(imp, node, attrs):
    axis = attrs.get("axis", 1)
    if axis == 1:
        return [imp.sym.Flatten(imp.value(node.input[0]), name=_node_name(node))]
    if axis == 0:
        return [imp.sym.Reshape(imp.value(node.input[0]), shape=(1, -1), name=_node_name(node))]
    raise MXNetError("ONNX import of Flatten node '%s': axis=%d is not supported (0 or 1)"
                     % (node.name, axis))


@_handles("Shape")
def _shape(imp, node, attrs):
    if attrs.get("start") is not None or attrs.get("end") is not None:
        raise MXNetError("ONNX import of Shape node '%s': start/end are not supported" % node.name)
    return [_Dims([("shape", node.input[0])])]


@_handles("Reshape")
def _reshape(imp, node, attrs):
    if node.input[1] in imp.dims:
        codes = _reshape_codes(node, node.input[0], imp.dims[node.input[1]])
        if codes is None:
            raise MXNetError("ONNX import of Reshape node '%s': its target shape is computed at "
                             "run time in a form MXNet's reshape codes cannot express" % node.name)
        return [imp.sym.Reshape(imp.value(node.input[0]), shape=codes, name=_node_name(node))]
    shape = imp.const(node, node.input[1], "the target shape")
    if attrs.get("allowzero", 0):
        raise MXNetError("ONNX import of Reshape node '%s': allowzero=1 is not supported"
                         % node.name)
    if node.input[0] in imp.consts:
        return [imp.consts[node.input[0]].reshape(shape)]
    return [imp.sym.Reshape(imp.value(node.input[0]), shape=tuple(int(d) for d in shape),
                            name=_node_name(node))]


@_handles("Transpose")
def _transpose(imp, node, attrs):
    perm = attrs.get("perm")
    if node.input[0] in imp.consts:
        return [np.ascontiguousarray(np.transpose(imp.consts[node.input[0]], perm))]
    kwargs = {"axes": tuple(perm)} if perm else {}
    return [imp.sym.transpose(imp.value(node.input[0]), name=_node_name(node), **kwargs)]


def _axes(imp, node, attrs):
    if len(node.input) > 1 and node.input[1]:
        return [int(a) for a in imp.const(node, node.input[1], "axes")]
    return None if attrs.get("axes") is None else list(attrs["axes"])


@_handles("Unsqueeze")
def _unsqueeze(imp, node, attrs):
    axes = sorted(_axes(imp, node, attrs))
    if node.input[0] in imp.consts:
        value = imp.consts[node.input[0]]
        for axis in axes:
            value = np.expand_dims(value, axis)
        return [value]
    out = imp.value(node.input[0])
    if any(a < 0 for a in axes):
        raise MXNetError("ONNX import of Unsqueeze node '%s': negative axes %s are not supported"
                         % (node.name, axes))
    for axis in axes:
        out = imp.sym.expand_dims(out, axis=axis)
    return [out]


@_handles("Squeeze")
def _squeeze(imp, node, attrs):
    axes = _axes(imp, node, attrs)
    return [imp.sym.squeeze(imp.value(node.input[0]), axis=None if axes is None else tuple(axes),
                            name=_node_name(node))]


@_handles("Concat")
def _concat(imp, node, attrs):
    if any(n in imp.dims for n in node.input):
        items = []
        for n in node.input:
            if n in imp.dims and imp.dims[n].items[0][0] != "shape":
                items.extend(imp.dims[n].items)
            else:
                items.extend(("const", int(v)) for v in imp.const(node, n, "a size").reshape(-1))
        return [_Dims(items)]
    ins = [imp.value(n) for n in node.input]
    return [imp.sym.Concat(*ins, dim=attrs["axis"], num_args=len(ins), name=_node_name(node))]


@_handles("Split")
def _split(imp, node, attrs):
    split = attrs.get("split")
    if len(node.input) > 1 and node.input[1]:
        split = imp.const(node, node.input[1], "split").tolist()
    if split and len(set(split)) > 1:
        raise MXNetError("ONNX import of Split node '%s': unequal parts %s are not supported"
                         % (node.name, split))
    count = len(node.output)
    out = imp.sym.SliceChannel(imp.value(node.input[0]), num_outputs=count,
                               axis=attrs.get("axis", 0), name=_node_name(node))
    return [out] if count == 1 else [out[i] for i in range(count)]


@_handles("Slice")
def _slice(imp, node, attrs):
    starts = imp.const(node, node.input[1], "starts").tolist()
    ends = imp.const(node, node.input[2], "ends").tolist()
    axes = (imp.const(node, node.input[3], "axes").tolist()
            if len(node.input) > 3 and node.input[3] else list(range(len(starts))))
    steps = (imp.const(node, node.input[4], "steps").tolist()
             if len(node.input) > 4 and node.input[4] else [1] * len(starts))
    if any(s != 1 for s in steps):
        raise MXNetError("ONNX import of Slice node '%s': steps %s are not supported (1 only)"
                         % (node.name, steps))
    out = imp.value(node.input[0])
    for start, end, axis in zip(starts, ends, axes):
        end = None if end >= 2 ** 62 else end
        out = imp.sym.slice_axis(out, axis=axis, begin=start, end=end)
    return [out]


@_handles("Gather")
def _gather(imp, node, attrs):
    axis = attrs.get("axis", 0)
    if node.input[0] in imp.dims:
        whole = imp.dims[node.input[0]].items
        index = imp.const(node, node.input[1], "the indices of a run-time shape")
        if whole[0][0] != "shape" or index.ndim != 1:
            raise MXNetError("ONNX import of Gather node '%s': only 1-D picks from a Shape are "
                             "supported" % node.name)
        return [_Dims([("dim", whole[0][1], int(i)) for i in index])]
    table = imp.consts.get(node.input[0])
    indices = imp.value(node.input[1])
    if table is not None and table.ndim == 2 and axis == 0:
        return [imp.sym.Embedding(indices, imp.value(node.input[0]), input_dim=table.shape[0],
                                  output_dim=table.shape[1], dtype=table.dtype.name,
                                  name=_node_name(node))]
    return [imp.sym.take(imp.value(node.input[0]), indices, axis=axis, name=_node_name(node))]


@_handles("Cast")
def _cast(imp, node, attrs):
    dtype = imp.onnx.helper.tensor_dtype_to_np_dtype(attrs["to"])
    return [imp.sym.Cast(imp.value(node.input[0]), dtype=np.dtype(dtype).name,
                         name=_node_name(node))]


@_handles("Tile")
def _tile(imp, node, attrs):
    reps = imp.const(node, node.input[1], "repeats")
    return [imp.sym.tile(imp.value(node.input[0]), reps=tuple(int(r) for r in reps),
                         name=_node_name(node))]


@_handles("Expand")
def _expand(imp, node, attrs):
    shape = imp.const(node, node.input[1], "the shape")
    # ONNX's 1 keeps the input's dim, as MXNet's 0 does
    return [imp.sym.broadcast_to(imp.value(node.input[0]),
                                 shape=tuple(0 if d == 1 else int(d) for d in shape),
                                 name=_node_name(node))]


@_handles("Pad")
def _pad(imp, node, attrs):
    pads = (imp.const(node, node.input[1], "pads").tolist() if len(node.input) > 1
            else list(attrs["pads"]))
    half = len(pads) // 2
    width = tuple(v for pair in zip(pads[:half], pads[half:]) for v in pair)
    value = attrs.get("value", 0.0)
    if len(node.input) > 2 and node.input[2]:
        value = imp.const(node, node.input[2], "the pad value").item()
    return [imp.sym.Pad(imp.value(node.input[0]), mode=attrs.get("mode", "constant"),
                        pad_width=width, constant_value=value, name=_node_name(node))]


@_handles("Where")
def _where(imp, node, attrs):
    ins = [imp.value(n) for n in node.input]
    return [imp.sym.where(*ins, name=_node_name(node))]


# ---------------------------------------------------------------------------------------------
# Recurrent layers: one ONNX LSTM / GRU / RNN node -> one single-layer fused RNN operator
# ---------------------------------------------------------------------------------------------
@_handles("LSTM", "GRU", "RNN")
def _recurrent(imp, node, attrs):
    op_type = node.op_type
    hidden = attrs["hidden_size"]
    direction = attrs.get("direction", "forward")
    if direction == "reverse":
        raise MXNetError("ONNX import of %s node '%s': direction 'reverse' is not supported"
                         % (op_type, node.name))
    unsupported = [k for k in ("clip", "input_forget", "activation_alpha", "activation_beta")
                   if attrs.get(k)]
    if len(node.input) > 4 and node.input[4]:
        unsupported.append("sequence_lens")
    if len(node.input) > 7 and node.input[7]:
        unsupported.append("peepholes")
    if op_type == "GRU" and not attrs.get("linear_before_reset", 0):
        unsupported.append("linear_before_reset=0")
    mode = {"LSTM": "lstm", "GRU": "gru"}.get(op_type)
    if op_type == "RNN":
        acts = [a.lower() for a in attrs.get("activations", ["Tanh"])]
        if len(set(acts)) != 1 or acts[0] not in ("tanh", "relu"):
            unsupported.append("activations %s" % acts)
        else:
            mode = "rnn_" + acts[0]
    elif attrs.get("activations"):
        unsupported.append("activations")
    if unsupported:
        raise MXNetError("ONNX import of %s node '%s': %s not supported"
                         % (op_type, node.name, ", ".join(unsupported)))
    w = imp.const(node, node.input[1], "W")
    r = imp.const(node, node.input[2], "R")
    dirs = w.shape[0]
    gh = w.shape[1]
    b = (imp.const(node, node.input[3], "B") if len(node.input) > 3 and node.input[3]
         else np.zeros((dirs, 2 * gh), dtype=w.dtype))
    order = _GATES_FROM_ONNX[op_type]
    gates = len(order)

    def blocks(array):
        split = array.reshape((gates, hidden) + array.shape[1:])
        return split[order].reshape(-1)

    weights = [np.concatenate([blocks(w[d]), blocks(r[d])]) for d in range(dirs)]
    biases = [np.concatenate([blocks(b[d][:gh]), blocks(b[d][gh:])]) for d in range(dirs)]
    flat = imp.param(node.name + "_parameters" if node.name else node.input[1] + "_packed",
                     np.concatenate(weights + biases).astype(w.dtype))
    states = []
    for pos in (5, 6):
        if pos == 6 and mode != "lstm":
            break
        if len(node.input) <= pos or not node.input[pos]:
            # ONNX starts from zeros; the batch dim (0) is inferred from the data
            states.append(imp.sym.zeros(shape=(dirs, 0, hidden), dtype=w.dtype.name))
        else:
            states.append(imp.value(node.input[pos]))
    out = imp.sym.RNN(imp.value(node.input[0]), flat, *states, state_size=hidden, num_layers=1,
                      bidirectional=dirs == 2, mode=mode, state_outputs=True,
                      name=_node_name(node))
    y = out[0]                                           # (T, N, D*H)
    if dirs == 1:
        y = imp.sym.expand_dims(y, axis=1)               # ONNX's (T, D, N, H)
    else:
        y = imp.sym.transpose(imp.sym.Reshape(y, shape=(0, 0, dirs, -1)), axes=(0, 2, 1, 3))
    return [y, out[1]] + ([out[2]] if mode == "lstm" else [])


def import_model(model_file):
    """Read an ONNX file; returns ``(sym, arg_params, aux_params)`` for lightmod (MXNet's
    ``mx.contrib.onnx.import_model``)."""
    onnx = require_onnx()
    try:
        model = onnx.load(model_file)
    except (OSError, ValueError) as err:
        raise MXNetError("ONNX import: cannot read '%s': %s" % (model_file, err)) from None
    return _Importer(onnx, model).run()


def get_model_metadata(model_file):
    """The inputs and outputs of an ONNX file: ``{'input_tensor_data': [(name, shape)],
    'output_tensor_data': [(name, shape)]}``; unknown dims are None."""
    onnx = require_onnx()
    model = onnx.load(model_file)
    consts = {init.name for init in model.graph.initializer}

    def describe(infos):
        out = []
        for info in infos:
            if info.name in consts:
                continue
            dims = tuple(d.dim_value if d.HasField("dim_value") else None
                         for d in info.type.tensor_type.shape.dim)
            out.append((info.name, dims))
        return out

    return {"input_tensor_data": describe(model.graph.input),
            "output_tensor_data": describe(model.graph.output)}
