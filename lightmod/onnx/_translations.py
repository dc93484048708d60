"""The ONNX translations of lightmod's operators (entries of :mod:`lightmod.onnx._table`).

Each function turns one lightmod node into ONNX nodes on opset 12 or 13. Shapes that depend on
the data (the batch above all) are never written into the file as numbers: where a translation
needs them it reads them at run time with ``Shape``, so that ``dynamic=True`` models accept any
batch size.
"""
import math

import numpy as np

from ..operator.rnn_op import param_layout
from ._table import translates

INT64_MAX = 2 ** 63 - 1
INT64_MIN = -2 ** 63


def _spatial(values, count, fill):
    return list(values) if values else [fill] * count


def _scalar(g, node, value, name, index=0):
    """A 0-d constant with the dtype of input ``index``."""
    dtype = node.in_dtypes[index] or np.float32
    return g.const(np.asarray(value, dtype=dtype), name)


# ---------------------------------------------------------------------------------------------
# Dense layers and convolutions
# ---------------------------------------------------------------------------------------------
@translates("FullyConnected")
def _fully_connected(g, node):
    p = node.p
    x, w = node.inputs[0], node.inputs[1]
    bias = [] if p.no_bias else [node.inputs[2]]
    rank = node.rank()
    if p.flatten or rank == 2:
        if rank != 2:
            x = g.add("Flatten", [x], node.name + "_flatten", axis=1)
        return [g.add("Gemm", [x, w] + bias, node.name, transB=1)]
    w_t = g.add("Transpose", [w], node.name + "_weight_t", perm=[1, 0])
    if not bias:
        return [g.add("MatMul", [x, w_t], node.name)]
    y = g.add("MatMul", [x, w_t], node.name + "_matmul")
    return [g.add("Add", [y, bias[0]], node.name)]


def _check_nc_layout(node):
    layout = node.p.layout
    if layout is not None and not layout.startswith("NC"):
        raise node.error("layout %s is not supported (channels-first layouts only)", layout)


@translates("Convolution")
def _convolution(g, node):
    p = node.p
    _check_nc_layout(node)
    nd = len(p.kernel)
    ins = node.inputs[:2] if p.no_bias else node.inputs[:3]
    return [g.add("Conv", ins, node.name, kernel_shape=list(p.kernel),
                  strides=_spatial(p.stride, nd, 1), dilations=_spatial(p.dilate, nd, 1),
                  pads=_spatial(p.pad, nd, 0) * 2, group=p.num_group)]


@translates("Deconvolution")
def _deconvolution(g, node):
    p = node.p
    _check_nc_layout(node)
    if p.target_shape and any(p.target_shape):
        raise node.error("target_shape is not supported by the exporter; give pad and adj")
    nd = len(p.kernel)
    ins = node.inputs[:2] if p.no_bias else node.inputs[:3]
    return [g.add("ConvTranspose", ins, node.name, kernel_shape=list(p.kernel),
                  strides=_spatial(p.stride, nd, 1), dilations=_spatial(p.dilate, nd, 1),
                  pads=_spatial(p.pad, nd, 0) * 2, output_padding=_spatial(p.adj, nd, 0),
                  group=p.num_group)]


# ---------------------------------------------------------------------------------------------
# Normalisation and pooling
# ---------------------------------------------------------------------------------------------
@translates("BatchNorm")
def _batch_norm(g, node):
    p = node.p
    rank = node.rank()
    if p.axis % rank != 1:
        raise node.error("axis=%d is not supported (the channel axis must be 1)", p.axis)
    if p.output_mean_var:
        raise node.error("output_mean_var=True is not supported (the inference form has one "
                         "output)")
    data, gamma, beta, mean, var = node.inputs
    if p.fix_gamma:
        # fix_gamma: the scale is 1 whatever the stored gamma holds
        gamma_shape = node.in_shapes[1]
        gamma = g.const(np.ones(gamma_shape, dtype=node.in_dtypes[1] or np.float32),
                        node.name + "_unit_gamma")
    return [g.add("BatchNormalization", [data, gamma, beta, mean, var], node.name, epsilon=p.eps)]


@translates("InstanceNorm")
def _instance_norm(g, node):
    return [g.add("InstanceNormalization", node.inputs, node.name, epsilon=node.p.eps)]


@translates("LayerNorm")
def _layer_norm(g, node):
    """(x - mean) / sqrt(var + eps) * gamma + beta over one axis (LayerNormalization is opset 17)."""
    p = node.p
    if p.output_mean_var:
        raise node.error("output_mean_var=True is not supported")
    rank = node.rank()
    axis = p.axis % rank
    x, gamma, beta = node.inputs
    mean = g.reduce("ReduceMean", x, [axis], True, node.name + "_mean")
    centred = g.add("Sub", [x, mean], node.name + "_centred")
    var = g.reduce("ReduceMean", g.add("Mul", [centred, centred], node.name + "_sq"), [axis], True,
                   node.name + "_var")
    std = g.add("Sqrt", [g.add("Add", [var, _scalar(g, node, p.eps, node.name + "_eps")],
                               node.name + "_var_eps")], node.name + "_std")
    normed = g.add("Div", [centred, std], node.name + "_normed")
    if axis != rank - 1:
        # gamma and beta run along `axis`: give them the trailing unit axes
        trailing = list(range(1, rank - axis))
        gamma = g.unsqueeze(gamma, trailing, node.name + "_gamma")
        beta = g.unsqueeze(beta, trailing, node.name + "_beta")
    scaled = g.add("Mul", [normed, gamma], node.name + "_scaled")
    return [g.add("Add", [scaled, beta], node.name)]


@translates("L2Normalization")
def _l2_normalization(g, node):
    p = node.p
    rank = node.rank()
    axes = {"instance": list(range(1, rank)), "channel": [1],
            "spatial": list(range(2, rank))}[p.mode]
    x = node.inputs[0]
    total = g.reduce("ReduceSum", g.add("Mul", [x, x], node.name + "_sq"), axes, True,
                     node.name + "_sumsq")
    norm = g.add("Sqrt", [g.add("Add", [total, _scalar(g, node, p.eps, node.name + "_eps")],
                                node.name + "_sumsq_eps")], node.name + "_norm")
    return [g.add("Div", [x, norm], node.name)]


@translates("UpSampling")
def _upsampling(g, node):
    p = node.p
    if p.sample_type != "nearest" or p.num_args != 1:
        raise node.error("only sample_type='nearest' with one input is supported")
    rank = node.rank()
    scales = g.const(np.asarray([1.0, 1.0] + [float(p.scale)] * (rank - 2), np.float32),
                     node.name + "_scales")
    roi = g.const(np.zeros(0, np.float32), node.name + "_roi")
    return [g.add("Resize", [node.inputs[0], roi, scales], node.name, mode="nearest",
                  coordinate_transformation_mode="asymmetric", nearest_mode="floor")]


@translates("LRN")
def _lrn(g, node):
    p = node.p
    return [g.add("LRN", [node.inputs[0]], node.name, alpha=p.alpha, beta=p.beta, bias=p.knorm,
                  size=p.nsize)]


@translates("Pooling")
def _pooling(g, node):
    p = node.p
    _check_nc_layout(node)
    x = node.inputs[0]
    rank = node.rank()
    if p.global_pool:
        if p.pool_type == "max":
            return [g.add("GlobalMaxPool", [x], node.name)]
        if p.pool_type == "avg":
            return [g.add("GlobalAveragePool", [x], node.name)]
        if p.pool_type == "lp":
            return [g.add("GlobalLpPool", [x], node.name, p=p.p_value)]
        return [g.reduce("ReduceSum", x, list(range(2, rank)), True, node.name)]
    if p.pooling_convention == "same":
        raise node.error("pooling_convention 'same' has no ONNX form")
    nd = len(p.kernel)
    attrs = {"kernel_shape": list(p.kernel), "strides": _spatial(p.stride, nd, 1),
             "pads": _spatial(p.pad, nd, 0) * 2}
    ceil = int(p.pooling_convention == "full")
    if p.pool_type == "max":
        return [g.add("MaxPool", [x], node.name, ceil_mode=ceil, **attrs)]
    if p.pool_type == "avg":
        include = 0 if p.count_include_pad is False else 1
        return [g.add("AveragePool", [x], node.name, ceil_mode=ceil, count_include_pad=include,
                      **attrs)]
    if ceil:
        raise node.error("pool_type '%s' with pooling_convention 'full' has no ONNX form",
                         p.pool_type)
    if p.pool_type == "lp":
        return [g.add("LpPool", [x], node.name, p=p.p_value, **attrs)]
    # sum: the padded-window average times the window size
    avg = g.add("AveragePool", [x], node.name + "_avg", count_include_pad=1, **attrs)
    size = _scalar(g, node, float(np.prod(p.kernel)), node.name + "_window")
    return [g.add("Mul", [avg, size], node.name)]


# ---------------------------------------------------------------------------------------------
# Activations, softmax and loss heads
# ---------------------------------------------------------------------------------------------
_ACTIVATIONS = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "softrelu": "Softplus",
                "softsign": "Softsign"}


@translates("Activation")
def _activation(g, node):
    return [g.add(_ACTIVATIONS[node.p.act_type], [node.inputs[0]], node.name)]


@translates("LeakyReLU")
def _leaky_relu(g, node):
    p = node.p
    x = node.inputs[0]
    if p.act_type == "leaky":
        return [g.add("LeakyRelu", [x], node.name, alpha=p.slope)]
    if p.act_type == "rrelu":
        # outside training the slope is the middle of its random range
        return [g.add("LeakyRelu", [x], node.name, alpha=(p.lower_bound + p.upper_bound) / 2)]
    if p.act_type == "elu":
        return [g.add("Elu", [x], node.name, alpha=p.slope)]
    if p.act_type == "selu":
        return [g.add("Selu", [x], node.name)]
    if p.act_type == "prelu":
        rank = node.rank()
        gamma = node.inputs[1]
        if rank > 2:
            # gamma holds one slope per channel (axis 1): give it the trailing unit axes
            gamma = g.unsqueeze(gamma, list(range(1, rank - 1)), node.name + "_slopes")
        return [g.add("PRelu", [x, gamma], node.name)]
    # gelu, the exact form: x * (1 + erf(x / sqrt(2))) / 2
    scaled = g.add("Mul", [x, _scalar(g, node, 1 / math.sqrt(2), node.name + "_rsqrt2")],
                   node.name + "_scaled")
    erf = g.add("Erf", [scaled], node.name + "_erf")
    one_plus = g.add("Add", [erf, _scalar(g, node, 1.0, node.name + "_one")], node.name + "_1p")
    half_x = g.add("Mul", [x, _scalar(g, node, 0.5, node.name + "_half")], node.name + "_halfx")
    return [g.add("Mul", [half_x, one_plus], node.name)]


def _softmax_family(g, node, log):
    p = node.p
    if p.use_length:
        raise node.error("use_length=True is not supported by the exporter")
    x = node.inputs[0]
    if p.temperature is not None and p.temperature != 1.0:
        x = g.add("Div", [x, _scalar(g, node, p.temperature, node.name + "_temperature")],
                  node.name + "_scaled")
    rank = node.rank()
    out_dtype = p.dtype
    if out_dtype is None or np.dtype(out_dtype) == np.dtype(node.in_dtypes[0] or np.float32):
        return [g.softmax(x, p.axis, rank, node.name, log=log)]
    y = g.softmax(x, p.axis, rank, node.name + "_softmax", log=log)
    return [g.add("Cast", [y], node.name, to=g.dtype_of(out_dtype))]


@translates("softmax")
def _softmax(g, node):
    return _softmax_family(g, node, log=False)


@translates("log_softmax")
def _log_softmax(g, node):
    return _softmax_family(g, node, log=True)


@translates("SoftmaxActivation")
def _softmax_activation(g, node):
    rank = node.rank()
    axis = 1 if node.p.mode == "channel" and rank > 1 else rank - 1
    return [g.softmax(node.inputs[0], axis, rank, node.name)]


@translates("SoftmaxOutput", reads=(0,))
def _softmax_output(g, node):
    """The inference form: the probabilities, without the label."""
    p = node.p
    x = node.inputs[0]
    rank = node.rank()
    if p.multi_output:
        return [g.softmax(x, 1, rank, node.name)]
    if p.preserve_shape or rank <= 2:
        return [g.softmax(x, rank - 1, rank, node.name)]
    # one softmax over every axis but the batch axis, written out (no run-time shapes needed)
    axes = list(range(1, rank))
    peak = g.reduce("ReduceMax", x, axes, True, node.name + "_max")
    exp = g.add("Exp", [g.add("Sub", [x, peak], node.name + "_shifted")], node.name + "_exp")
    total = g.reduce("ReduceSum", exp, axes, True, node.name + "_sum")
    return [g.add("Div", [exp, total], node.name)]


@translates("LinearRegressionOutput", "MAERegressionOutput", reads=(0,))
def _regression_output(g, node):
    return [g.add("Identity", [node.inputs[0]], node.name)]


@translates("LogisticRegressionOutput", reads=(0,))
def _logistic_output(g, node):
    return [g.add("Sigmoid", [node.inputs[0]], node.name)]


@translates("Dropout", "BlockGrad", "_copy", "make_loss", reads=(0,))
def _identity(g, node):
    """Inference-time identities (Dropout only drops while training)."""
    if node.op.name == "Dropout" and node.p.mode == "always":
        raise node.error("mode='always' drops at inference too, which ONNX cannot express")
    return [g.add("Identity", [node.inputs[0]], node.name)]


# ---------------------------------------------------------------------------------------------
# Shapes and layout
# ---------------------------------------------------------------------------------------------
@translates("Flatten")
def _flatten(g, node):
    return [g.add("Flatten", [node.inputs[0]], node.name, axis=1)]


def _reshape_plan(shape, rank):
    """MXNet's reshape codes as a list of output dims, each ('const', n), ('dim', i),
    ('prod', i, j) or ('infer',); i and j index the input's axes."""
    plan = []
    src = 0
    i = 0
    while i < len(shape):
        code = shape[i]
        if code > 0:
            plan.append(("const", code))
            src += 1
        elif code == 0:
            plan.append(("dim", src))
            src += 1
        elif code == -1:
            plan.append(("infer",))
            src += 1
        elif code == -2:
            plan.extend(("dim", k) for k in range(src, rank))
            src = rank
        elif code == -3:
            plan.append(("prod", src, src + 1))
            src += 2
        elif code == -4:
            first, second = shape[i + 1], shape[i + 2]
            if first == -1:
                plan.extend([("infer",), ("const", second)])
            elif second == -1:
                plan.extend([("const", first), ("infer",)])
            else:
                plan.extend([("const", first), ("const", second)])
            src += 1
            i += 2
        else:
            raise ValueError("unknown reshape code %d" % code)
        i += 1
    return plan


@translates("Reshape")
def _reshape(g, node):
    p = node.p
    if p.reverse:
        raise node.error("reverse=True is not supported by the exporter")
    if not p.shape:
        raise node.error("the legacy target_shape form is not supported; use shape")
    x = node.inputs[0]
    rank = node.rank()
    try:
        plan = _reshape_plan(p.shape, rank)
    except (ValueError, IndexError) as err:
        raise node.error("shape %s: %s", p.shape, err) from None
    # ONNX's own 0 copies the input dim at the same position: enough for most codes
    static = []
    for pos, item in enumerate(plan):
        if item[0] == "const":
            static.append(item[1])
        elif item[0] == "infer":
            static.append(-1)
        elif item[0] == "dim" and item[1] == pos:
            static.append(0)
        else:
            static = None
            break
    if static is not None:
        return [g.add("Reshape", [x, g.ints(static, node.name + "_shape")], node.name)]
    # otherwise the target shape is assembled at run time from the input's shape
    shape = g.add("Shape", [x], node.name + "_in_shape")
    parts = []
    for k, item in enumerate(plan):
        part = "%s_dim%d" % (node.name, k)
        if item[0] == "const":
            parts.append(g.ints([item[1]], part))
        elif item[0] == "infer":
            parts.append(g.ints([-1], part))
        elif item[0] == "dim":
            parts.append(g.add("Gather", [shape, g.ints([item[1]], part + "_i")], part, axis=0))
        else:
            a = g.add("Gather", [shape, g.ints([item[1]], part + "_a")], part + "_a", axis=0)
            b = g.add("Gather", [shape, g.ints([item[2]], part + "_b")], part + "_b", axis=0)
            parts.append(g.add("Mul", [a, b], part))
    target = g.add("Concat", parts, node.name + "_shape", axis=0)
    return [g.add("Reshape", [x, target], node.name)]


@translates("Concat")
def _concat(g, node):
    return [g.add("Concat", node.inputs, node.name, axis=node.p.dim)]


@translates("stack")
def _stack(g, node):
    axis = node.p.axis % (node.rank() + 1)
    parts = [g.unsqueeze(x, [axis], "%s_in%d" % (node.name, i)) for i, x in enumerate(node.inputs)]
    return [g.add("Concat", parts, node.name, axis=axis)]


@translates("transpose")
def _transpose(g, node):
    axes = node.p.axes
    perm = list(axes) if axes else list(range(node.rank()))[::-1]
    return [g.add("Transpose", [node.inputs[0]], node.name, perm=perm)]


@translates("SwapAxis")
def _swap_axis(g, node):
    perm = list(range(node.rank()))
    perm[node.p.dim1], perm[node.p.dim2] = perm[node.p.dim2], perm[node.p.dim1]
    return [g.add("Transpose", [node.inputs[0]], node.name, perm=perm)]


@translates("expand_dims")
def _expand_dims(g, node):
    axis = node.p.axis % (node.rank() + 1)
    return [g.unsqueeze(node.inputs[0], [axis], node.name)]


@translates("squeeze")
def _squeeze(g, node):
    axis = node.p.axis
    return [g.squeeze(node.inputs[0], None if axis is None else list(axis), node.name)]


@translates("SliceChannel")
def _slice_channel(g, node):
    p = node.p
    axis = p.axis % node.rank()
    parts = g.add("Split", [node.inputs[0]], node.name + ("_split" if p.squeeze_axis else ""),
                  num_outputs=p.num_outputs, axis=axis)
    if p.num_outputs == 1:
        parts = [parts]
    if not p.squeeze_axis:
        return parts
    return [g.squeeze(part, [axis], "%s_%d" % (node.name, i)) for i, part in enumerate(parts)]


def _slice_bounds(begin, end, step):
    starts, ends = [], []
    for b, e, s in zip(begin, end, step):
        backwards = s < 0
        starts.append(b if b is not None else (INT64_MAX if backwards else 0))
        ends.append(e if e is not None else (INT64_MIN if backwards else INT64_MAX))
    return starts, ends


@translates("slice")
def _slice(g, node):
    p = node.p
    count = len(p.begin)
    step = [1 if s is None else s for s in (p.step or [1] * count)]
    starts, ends = _slice_bounds(p.begin, p.end, step)
    ins = [node.inputs[0], g.ints(starts, node.name + "_starts"), g.ints(ends, node.name + "_ends"),
           g.ints(list(range(count)), node.name + "_axes"), g.ints(step, node.name + "_steps")]
    return [g.add("Slice", ins, node.name)]


@translates("slice_axis")
def _slice_axis(g, node):
    p = node.p
    starts, ends = _slice_bounds([p.begin], [p.end], [1])
    ins = [node.inputs[0], g.ints(starts, node.name + "_starts"), g.ints(ends, node.name + "_ends"),
           g.ints([p.axis], node.name + "_axes")]
    return [g.add("Slice", ins, node.name)]


@translates("Embedding")
def _embedding(g, node):
    index = g.add("Cast", [node.inputs[0]], node.name + "_index", to=g.dtype_of(np.int64))
    return [g.add("Gather", [node.inputs[1], index], node.name, axis=0)]


@translates("Cast")
def _cast(g, node):
    return [g.add("Cast", [node.inputs[0]], node.name, to=g.dtype_of(node.p.dtype))]


@translates("tile")
def _tile(g, node):
    x = node.inputs[0]
    rank = node.rank()
    reps = list(node.p.reps)
    if len(reps) > rank:
        x = g.unsqueeze(x, list(range(len(reps) - rank)), node.name + "_lead")
    reps = [1] * (rank - len(reps)) + reps
    return [g.add("Tile", [x, g.ints(reps, node.name + "_reps")], node.name)]


@translates("broadcast_axis")
def _broadcast_axis(g, node):
    target = [1] * node.rank()
    for axis, size in zip(node.p.axis, node.p.size):
        target[axis] = size
    return [g.add("Expand", [node.inputs[0], g.ints(target, node.name + "_shape")], node.name)]


@translates("broadcast_to")
def _broadcast_to(g, node):
    # Expand keeps an input dim wherever the target says 1, which is what MXNet's 0 means
    target = [1 if d == 0 else d for d in node.p.shape]
    return [g.add("Expand", [node.inputs[0], g.ints(target, node.name + "_shape")], node.name)]


@translates("Pad")
def _pad(g, node):
    p = node.p
    width = list(p.pad_width)
    pads = width[0::2] + width[1::2]
    ins = [node.inputs[0], g.ints(pads, node.name + "_pads")]
    if p.mode == "constant":
        ins.append(_scalar(g, node, p.constant_value, node.name + "_value"))
    return [g.add("Pad", ins, node.name, mode=p.mode)]


@translates("_zeros", "_ones", "_full")
def _constant(g, node):
    """A constant of the inferred shape. Dims declared 0 take their size from the example
    shapes, so with dynamic=True such a constant may only be a fused RNN's zero begin state,
    which the RNN translation leaves out (ONNX starts from zeros)."""
    p = node.p
    value = {"_zeros": 0.0, "_ones": 1.0}.get(node.op.name, p.get("value"))
    shape = node.out_shapes[0]
    if shape is None:
        raise node.error("the shape %s could not be inferred", p.shape)
    tensor = g.const(np.full(shape, value, dtype=p.dtype or np.float32), node.name)
    if value == 0:
        g.zero_tensors.add(tensor)
    if g.dynamic and any(d == 0 for d in p.shape):
        g.sized_by_example[tensor] = node.name
    return [tensor]


@translates("where")
def _where(g, node):
    cond = g.add("Cast", [node.inputs[0]], node.name + "_cond", to=g.dtype_of(np.bool_))
    return [g.add("Where", [cond, node.inputs[1], node.inputs[2]], node.name)]


# ---------------------------------------------------------------------------------------------
# Element-wise arithmetic
# ---------------------------------------------------------------------------------------------
_UNARY = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "log": "Log",
          "sqrt": "Sqrt", "abs": "Abs", "negative": "Neg", "reciprocal": "Reciprocal",
          "floor": "Floor", "ceil": "Ceil", "sin": "Sin", "cos": "Cos", "tan": "Tan",
          "sign": "Sign", "softsign": "Softsign", "rint": "Round"}


@translates(*_UNARY)
def _unary(g, node):
    return [g.add(_UNARY[node.op.name], [node.inputs[0]], node.name)]


@translates("square")
def _square(g, node):
    x = node.inputs[0]
    return [g.add("Mul", [x, x], node.name)]


@translates("rsqrt")
def _rsqrt(g, node):
    root = g.add("Sqrt", [node.inputs[0]], node.name + "_sqrt")
    return [g.add("Reciprocal", [root], node.name)]


@translates("clip")
def _clip(g, node):
    p = node.p
    low = _scalar(g, node, p.a_min, node.name + "_min")
    high = _scalar(g, node, p.a_max, node.name + "_max")
    return [g.add("Clip", [node.inputs[0], low, high], node.name)]


_BINARY = {"Add": ("elemwise_add", "broadcast_add"), "Sub": ("elemwise_sub", "broadcast_sub"),
           "Mul": ("elemwise_mul", "broadcast_mul"), "Div": ("elemwise_div", "broadcast_div"),
           "Max": ("_maximum", "broadcast_maximum"), "Min": ("_minimum", "broadcast_minimum"),
           "Pow": ("_power", "broadcast_power")}
_BINARY_ONNX = {name: onnx_op for onnx_op, names in _BINARY.items() for name in names}


@translates(*_BINARY_ONNX)
def _binary(g, node):
    return [g.add(_BINARY_ONNX[node.op.name], node.inputs[:2], node.name)]


_COMPARE = {"Equal": ("_equal", "broadcast_equal"), "Greater": ("_greater", "broadcast_greater"),
            "GreaterOrEqual": ("_greater_equal", "broadcast_greater_equal"),
            "Less": ("_lesser", "broadcast_lesser"),
            "LessOrEqual": ("_lesser_equal", "broadcast_lesser_equal"),
            "NotEqual": ("_not_equal", "broadcast_not_equal")}
_COMPARE_ONNX = {name: onnx_op for onnx_op, names in _COMPARE.items() for name in names}


def _comparison(g, node, onnx_op, lhs, rhs):
    """MXNet's comparisons give 0/1 in the input's dtype, ONNX's give booleans."""
    if onnx_op == "NotEqual":
        same = g.add("Equal", [lhs, rhs], node.name + "_equal")
        flag = g.add("Not", [same], node.name + "_flag")
    else:
        flag = g.add(onnx_op, [lhs, rhs], node.name + "_flag")
    return g.add("Cast", [flag], node.name, to=g.dtype_of(node.in_dtypes[0] or np.float32))


@translates(*_COMPARE_ONNX)
def _compare(g, node):
    return [_comparison(g, node, _COMPARE_ONNX[node.op.name], *node.inputs[:2])]


# scalar ops: (ONNX op, whether the scalar is the left operand)
_SCALAR = {"_plus_scalar": ("Add", False), "_minus_scalar": ("Sub", False),
           "_rminus_scalar": ("Sub", True), "_mul_scalar": ("Mul", False),
           "_div_scalar": ("Div", False), "_rdiv_scalar": ("Div", True),
           "_power_scalar": ("Pow", False), "_rpower_scalar": ("Pow", True),
           "_maximum_scalar": ("Max", False), "_minimum_scalar": ("Min", False),
           "_equal_scalar": ("Equal", False), "_not_equal_scalar": ("NotEqual", False),
           "_greater_scalar": ("Greater", False), "_greater_equal_scalar": ("GreaterOrEqual", False),
           "_lesser_scalar": ("Less", False), "_lesser_equal_scalar": ("LessOrEqual", False)}


@translates(*_SCALAR)
def _scalar_op(g, node):
    onnx_op, scalar_first = _SCALAR[node.op.name]
    value = _scalar(g, node, node.p.scalar, node.name + "_scalar")
    x = node.inputs[0]
    lhs, rhs = (value, x) if scalar_first else (x, value)
    if onnx_op in _COMPARE:
        return [_comparison(g, node, onnx_op, lhs, rhs)]
    return [g.add(onnx_op, [lhs, rhs], node.name)]


@translates("add_n")
def _add_n(g, node):
    return [g.add("Sum", node.inputs, node.name)]


_REDUCE = {"sum": "ReduceSum", "mean": "ReduceMean", "max": "ReduceMax", "min": "ReduceMin",
           "prod": "ReduceProd"}


@translates(*_REDUCE)
def _reduce(g, node):
    p = node.p
    rank = node.rank()
    axes = None if p.axis is None or p.axis == () else sorted(a % rank for a in p.axis)
    if p.exclude:
        axes = [a for a in range(rank) if a not in (axes or [])]
    op_type = _REDUCE[node.op.name]
    if p.keepdims or (axes is not None and len(axes) < rank):
        return [g.reduce(op_type, node.inputs[0], axes, p.keepdims, node.name)]
    # reducing every axis gives MXNet a shape (1,) result, not a scalar
    kept = g.reduce(op_type, node.inputs[0], axes, True, node.name + "_kept")
    return [g.add("Reshape", [kept, g.ints([1], node.name + "_shape")], node.name)]


def _swap_last_two(g, x, rank, name):
    perm = list(range(rank))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return g.add("Transpose", [x], name, perm=perm)


@translates("dot")
def _dot(g, node):
    p = node.p
    a, b = node.inputs[:2]
    if node.rank(1) != 2 or (p.transpose_a and node.rank(0) != 2):
        raise node.error("only a 2-D right operand (and a 2-D left one with transpose_a) is "
                         "supported, got shapes %s and %s", node.in_shapes[0], node.in_shapes[1])
    if p.transpose_a:
        a = _swap_last_two(g, a, 2, node.name + "_a_t")
    if p.transpose_b:
        b = _swap_last_two(g, b, 2, node.name + "_b_t")
    return [g.add("MatMul", [a, b], node.name)]


@translates("batch_dot")
def _batch_dot(g, node):
    p = node.p
    a, b = node.inputs[:2]
    if p.transpose_a:
        a = _swap_last_two(g, a, node.rank(0), node.name + "_a_t")
    if p.transpose_b:
        b = _swap_last_two(g, b, node.rank(1), node.name + "_b_t")
    return [g.add("MatMul", [a, b], node.name)]


# ---------------------------------------------------------------------------------------------
# The fused RNN operator, one ONNX LSTM / GRU / RNN node per layer
# ---------------------------------------------------------------------------------------------
# ONNX's gate order, as positions of lightmod's (cuDNN's) gate blocks
_GATE_ORDER = {"lstm": [0, 3, 1, 2],   # i f g o -> i o f c
               "gru": [1, 0, 2],       # r z n -> z r h
               "rnn_tanh": [0], "rnn_relu": [0]}
_RNN_ONNX = {"lstm": "LSTM", "gru": "GRU", "rnn_tanh": "RNN", "rnn_relu": "RNN"}


@translates("RNN")
def _rnn(g, node):
    p = node.p
    flat = g.param_value(node.inputs[1])
    if flat is None:
        raise node.error("the packed parameters must be a stored parameter, not a computed "
                         "tensor")
    width = node.in_shapes[0][2]
    hidden = p.state_size
    dirs = 2 if p.bidirectional else 1
    entries, total = param_layout(p.mode, p.num_layers, p.bidirectional, width, hidden)
    if flat.size != total:
        raise node.error("parameters has %d values, expected %d", flat.size, total)
    order = _GATE_ORDER[p.mode]
    gates = len(order)

    def blocks(array):
        """Reorder the gate blocks (rows of `hidden`) into ONNX's order."""
        split = array.reshape((gates, hidden) + array.shape[1:])
        return split[order].reshape(array.shape)

    attrs = {"hidden_size": hidden, "direction": "bidirectional" if dirs == 2 else "forward"}
    if p.mode == "gru":
        attrs["linear_before_reset"] = 1     # cuDNN's GRU applies r after the recurrent product
    elif p.mode in ("rnn_tanh", "rnn_relu"):
        attrs["activations"] = ["Tanh" if p.mode == "rnn_tanh" else "Relu"] * dirs
    is_lstm = p.mode == "lstm"
    x = node.inputs[0]
    finals_h, finals_c = [], []
    for layer in range(p.num_layers):
        ws, rs, bs = [], [], []
        for d in range(dirs):
            e = entries[layer * dirs + d]
            gh = gates * hidden
            ws.append(blocks(flat[e["wx"]:e["wx"] + gh * e["c"]].reshape(gh, e["c"])))
            rs.append(blocks(flat[e["wh"]:e["wh"] + gh * hidden].reshape(gh, hidden)))
            bs.append(np.concatenate([blocks(flat[e["bx"]:e["bx"] + gh]),
                                      blocks(flat[e["bh"]:e["bh"] + gh])]))
        tag = "%s_l%d" % (node.name, layer)
        ins = [x, g.const(np.stack(ws), tag + "_W"), g.const(np.stack(rs), tag + "_R"),
               g.const(np.stack(bs), tag + "_B"), ""]
        for pos in ((2, 3) if is_lstm else (2,)):
            state = node.inputs[pos]
            if state in g.zero_tensors:
                ins.append("")              # ONNX's default initial state is zeros
                continue
            if p.num_layers > 1:
                state = g.add("Slice", [state, g.ints([layer * dirs], tag + "_s%d_start" % pos),
                                        g.ints([(layer + 1) * dirs], tag + "_s%d_end" % pos),
                                        g.ints([0], tag + "_s%d_axis" % pos)],
                              tag + "_state%d" % pos)
            ins.append(state)
        outs = g.add(_RNN_ONNX[p.mode], ins, tag, num_outputs=3 if is_lstm else 2, **attrs)
        y = outs[0]                                  # (T, D, N, H)
        finals_h.append(outs[1])
        if is_lstm:
            finals_c.append(outs[2])
        if dirs == 1:
            x = g.squeeze(y, [1], tag + "_out")
        else:
            y = g.add("Transpose", [y], tag + "_tnd", perm=[0, 2, 1, 3])
            x = g.add("Reshape", [y, g.ints([0, 0, -1], tag + "_out_shape")], tag + "_out")
    outputs = [g.add("Identity", [x], node.name)]
    if p.state_outputs:
        for finals, suffix in ((finals_h, "_state"), (finals_c, "_statecell")):
            if finals:
                outputs.append(finals[0] if len(finals) == 1 else
                               g.add("Concat", finals, node.name + suffix, axis=0))
    return outputs
