"""Hints for operators whose valid inputs the registry declaration cannot express.

:func:`lightmod.testing.operators.op_cases` derives cases from each declaration; an operator
listed here adds what the declaration lacks -- the data ranks it takes, a strategy for a
parameter whose valid values depend on the data shape, shapes of inputs inference cannot
imply, values for index/label inputs, or the reason a numeric gradient does not apply.
Keep entries few and explain each; an operator without an entry must work from its
declaration alone.

Hint fields
-----------
ndims : (lo, hi)
    Rank range of the first input (default 1..4).
max_side : int
    Largest dim of the first input (default 4).
params : {name: f(ndim, data_shape) -> strategy}
    Parameter strategies that depend on the data shape.
broadcast : bool
    Inputs not implied by inference get shapes that broadcast against the first input.
values : {input name: f(rng, shape, p, shapes) -> array}
    Values for inputs with a domain (indices, labels, positive numbers); the key ``"*"`` maps
    to ``f(rng, shapes, p) -> {input name: array}`` for inputs drawn together.
no_grad_inputs : tuple
    Inputs whose gradient is not checked (indices, labels).
fix_attrs : f(draw, op, ndim, data_shape) -> {param: value}
    Parameters that must be drawn together (counts that must agree).
no_grad : str or f(p) -> str or None
    Why the numeric gradient check does not apply (for these parameters).
random : str or f(p) -> str or None
    Why the outputs are random (for these parameters): only shapes are compared then.
tol : (rtol, atol)
    Tolerances of the numeric gradient check (float64).
forward_train : bool
    Run forward with is_train=True in the gradient checks (default True).
finite : bool
    Whether outputs must be finite.
dtype : str
    The dtype of the first input when the operator takes only that one (quantize: float32).
shapes : f(data_shape, p) -> {input name: shape}
    Shapes of inputs that neither inference nor the data shape imply.
drawn_shapes : {input name: f(data_shape) -> strategy of a shape}
    Shapes drawn for inputs that inference cannot imply and that differ from the data's (the
    ROIs of region operators).
"""
import dataclasses

import numpy as np
from hypothesis import strategies as st

__all__ = ["Hint", "HINTS"]


@dataclasses.dataclass(eq=False)
class Hint:
    """What one operator needs beyond its declaration (see the module docstring)."""

    ndims: tuple = None
    max_side: int = 4
    params: dict = None
    broadcast: bool = False
    values: dict = None
    no_grad_inputs: tuple = ()
    no_grad: object = None
    random: object = None
    fix_attrs: object = None
    tol: tuple = (1e-5, 1e-8)
    forward_train: bool = True
    finite: bool = True
    dtype: str = None           # what the data shape cannot say
    shapes: object = None
    drawn_shapes: dict = None

    def __post_init__(self):
        self.params = self.params or {}
        self.values = self.values or {}
        self.drawn_shapes = self.drawn_shapes or {}
        self.no_grad_inputs = tuple(self.no_grad_inputs)

    def reason(self, field, p):
        """The ``no_grad``/``random`` reason for parsed parameters ``p`` (None: none)."""
        value = getattr(self, field)
        return value(p) if callable(value) else value


def _softsign_op_type(ndim, data_shape):
    from .custom_ops import SOFTSIGN
    return st.just(SOFTSIGN)


# --- value makers ------------------------------------------------------------------------------
def _positive(rng, shape, p, shapes):
    return rng.uniform(0.5, 2.0, shape)


def _off_integers(rng, shape, p, shapes):
    """Values at least 0.1 away from any multiple of 0.5 (rounding ops are flat there)."""
    return rng.integers(-3, 3, shape) + rng.uniform(0.1, 0.4, shape) * rng.choice([1, 2], shape)


def _above_one(rng, shape, p, shapes):
    return rng.uniform(1.0, 2.0, shape)


def _inside_unit(rng, shape, p, shapes):
    """Values in (-0.9, 0.9): inside the domain of arcsin, arccos and arctanh."""
    return rng.uniform(-0.9, 0.9, shape)


def _well_above_one(rng, shape, p, shapes):
    """Values in [1.2, 3]: arccosh is defined from 1, and infinitely steep there."""
    return rng.uniform(1.2, 3.0, shape)


def _off_zero(rng, shape, p, shapes):
    """Values with 0.3 <= |x| <= 2 (rcbrt is singular at 0)."""
    return rng.uniform(0.3, 2.0, shape) * rng.choice([-1.0, 1.0], shape)


def _indices_below(count, offset=0):
    """Integers in [offset, count(p, shapes)) (index inputs are float arrays in MXNet)."""
    def make(rng, shape, p, shapes):
        return rng.integers(offset, count(p, shapes), shape).astype(np.float64)
    return make


def _nd_indices(full_shape):
    """Index rows (m, ...) within the first m dims of ``full_shape(p, shapes)``, some of them
    negative (gather_nd and scatter_nd count those from the end)."""
    def make(rng, shape, p, shapes):
        dims = full_shape(p, shapes)
        rows = [rng.integers(-dims[m], dims[m], shape[1:]) for m in range(min(shape[0], len(dims)))]
        return np.stack(rows).astype(np.float64) if rows else np.zeros(shape)
    return make


def _class_labels(rng, shape, p, shapes):
    data = shapes["data"]
    classes = data[1] if (p.get("multi_output") or p.get("preserve_shape") is False
                          and len(data) > 2 and p.get("multi_output")) else data[-1]
    return rng.integers(0, classes, shape).astype(np.float64)


def _sequence_lengths(rng, shape, p, shapes):
    """Lengths in 1 .. the number of steps (data's axis ``p.axis``)."""
    steps = shapes["data"][p.axis]
    return rng.integers(1, steps + 1, shape).astype(np.float64)


def _rois(rng, shape, p, shapes):
    """Regions inside the image: (batch index, x1, y1, x2, y2), or (batch index, centre x,
    centre y, width, height, degrees) for six columns; the image is the feature map divided by
    spatial_scale."""
    n, _, h, w = shapes["data"]
    size = np.array([w, h]) / p.spatial_scale
    batch = rng.integers(0, n, (shape[0], 1))
    if shape[1] == 6:
        centre = rng.uniform(0.2, 0.8, (shape[0], 2)) * size
        extent = rng.uniform(0.2, 0.9, (shape[0], 2)) * size
        return np.hstack([batch, centre, extent, rng.uniform(0, 180, (shape[0], 1))])
    corners = np.sort(rng.uniform(0, 1, (shape[0], 2, 2)), axis=1) * size
    return np.hstack([batch, corners[:, 0], corners[:, 1]])


def _image_info(rng, shape, p, shapes):
    """(height, width, scale) rows of images that fill the score map at feature_stride."""
    _, _, h, w = shapes["cls_prob"]
    sizes = np.array([h, w]) * p.feature_stride * rng.uniform(0.6, 1.0, (shape[0], 2))
    return np.hstack([sizes, rng.uniform(0.5, 1.0, (shape[0], 1))])


_ONE_ANCHOR = {"scales": lambda ndim, shape: st.just((2.0,)),
               "ratios": lambda ndim, shape: st.just((1.0,))}
_NOT_DIFFERENTIABLE = ("proposals are sorted and suppressed, so MXNet defines their inputs' "
                       "gradients as zero")


def _roi_shape(width):
    return lambda data_shape: st.tuples(st.integers(1, 3), st.just(width))


def _psroi_sizes(draw, op, ndim, data_shape):
    """group_size^2 must divide the channels: output_dim = channels / group_size^2."""
    channels = data_shape[1]
    group = draw(st.sampled_from([g for g in (1, 2) if channels % (g * g) == 0]))
    return {"pooled_size": group, "output_dim": channels // (group * group)}


def _booleans(rng, shape, p, shapes):
    return rng.integers(0, 2, shape).astype(np.float64)


# --- shape-dependent parameters ----------------------------------------------------------------
def _reshape_target(ndim, data_shape):
    """A target with the data's size: its factors regrouped, maybe with one -1 or 0."""
    size = int(np.prod(data_shape))
    factors = [f for f in range(1, size + 1) if size % f == 0]

    def build(first, special):
        rest = size // first
        target = [first, rest]
        if special == "minus1":
            target[1] = -1
        elif special == "zero" and len(data_shape) >= 2 and data_shape[1] == rest:
            target[1] = 0
        return tuple(target)
    return st.builds(build, st.sampled_from(factors), st.sampled_from(["plain", "minus1", "zero"]))


def _divisor_of_axis1(ndim, data_shape):
    return st.sampled_from([n for n in range(1, data_shape[1] + 1) if data_shape[1] % n == 0])


def _broadcast_target(ndim, data_shape):
    """Where the data has a 1, any size; elsewhere the data's own size (or 0 = keep)."""
    return st.tuples(*[st.integers(1, 3) if d == 1 else st.sampled_from([d, 0])
                       for d in data_shape])


def _ratio_off_integers(rng, shape):
    """k + f with k in -3..3 and f in [0.2, 0.8]: at least 0.2 from the next integer."""
    return rng.integers(-3, 3, shape) + rng.uniform(0.2, 0.8, shape)


def _mod_operands(rng, shapes, p):
    """lhs / rhs stays off the integers, where x mod y jumps (finite differences there
    measure the jump, not the gradient)."""
    rhs = rng.uniform(0.5, 1.0, shapes["rhs"]) * rng.choice([-1.0, 1.0], shapes["rhs"])
    lhs = np.broadcast_to(rhs, shapes["lhs"]) * _ratio_off_integers(rng, shapes["lhs"])
    return {"lhs": lhs, "rhs": rhs}


def _mod_scalar_data(rng, shapes, p):
    return {"data": p.scalar * _ratio_off_integers(rng, shapes["data"])}


def _rmod_scalar_data(rng, shapes, p):
    """scalar / data off the integers (and data away from 0)."""
    return {"data": p.scalar / (rng.integers(1, 3, shapes["data"])
                                + rng.uniform(0.2, 0.8, shapes["data"]))}


def _pooling_window(draw, op, ndim, data_shape):
    """Windows that each hold at least one real element: pad smaller than the kernel, and
    the 'full'/'same' conventions (which add windows at the end) only with stride 1 and no
    padding. A max over padding alone is the lowest float, and finite differences next to
    that are meaningless (MXNet's MKLDNN build even refuses pad >= kernel)."""
    spatial = ndim - 2
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(spatial))
    pad = tuple(draw(st.integers(0, k - 1)) for k in kernel)
    stride = tuple(draw(st.integers(1, 2)) for _ in range(spatial))
    if any(pad) or max(stride) > 1:
        convention = "valid"
    else:
        convention = draw(st.sampled_from(["valid", "full", "same"]))
    return {"kernel": kernel, "pad": pad, "stride": stride, "pooling_convention": convention}


def _leaky_relu_no_grad(p):
    if p.act_type == "rrelu":
        return "rrelu draws a random slope per element in training"
    if p.act_type == "selu":
        # lightmod reproduces MXNet's values, which are not the derivative for x < 0
        return "MXNet 1.9.1's selu backward is not the derivative for negative inputs"
    return None


def _spatial_pads(ndim, data_shape):
    """No padding of batch and channel, 0..1 before and after each spatial axis."""
    return st.lists(st.integers(0, 1), min_size=2 * (ndim - 2), max_size=2 * (ndim - 2)).map(
        lambda pads: (0, 0, 0, 0) + tuple(pads))


def _multi_update_counts(draw, op, ndim, data_shape):
    """num_arrays follows from num_weights (and lrs/wds have one entry per weight)."""
    weights = draw(st.integers(1, 2))
    attrs = {"num_weights": weights,
             "num_arrays": weights * len(op.per_weight) + (2 if op.preloaded else 0)}
    if "lrs" in op.params:
        attrs["lrs"] = tuple(draw(st.lists(st.sampled_from([0.1, 0.5]), min_size=weights,
                                           max_size=weights)))
        attrs["wds"] = tuple(draw(st.lists(st.sampled_from([0.0, 0.01]), min_size=weights,
                                           max_size=weights)))
    return attrs


def _spd_matrices(rng, shape, p, shapes):
    """Symmetric positive-definite matrices on the last two axes."""
    x = rng.uniform(-1, 1, shape)
    n = shape[-1]
    return x @ np.swapaxes(x, -1, -2) + n * np.eye(n)


_ONE_TRIANGLE = ("it reads one triangle of a symmetric input while its gradient (MXNet's) is "
                 "symmetric, so single-entry finite differences do not apply; "
                 "tests/test_op_linalg.py checks it along symmetric perturbations")


def _ranges(rng, shapes, p):
    return {"min_range": -rng.uniform(0.5, 2.0, (1,)), "max_range": rng.uniform(0.5, 2.0, (1,))}


def _codes(rng, shapes, p):
    return dict(_ranges(rng, shapes, p), data=rng.integers(-128, 128, shapes["data"]))


def _ctc_shapes(data_shape, p):
    """A label at most half as long as the sequence (+1), so that every label fits."""
    return {"label": (data_shape[1], max(1, (data_shape[0] + 1) // 2))}


def _ctc_inputs(rng, shapes, p):
    """Labels (symbols other than the blank, padded) that fit their sequence lengths."""
    frames, batch, alphabet = shapes["data"]
    width = shapes["label"][1]
    first = p.blank_label == "first"
    symbols = np.arange(1, alphabet) if first else np.arange(0, alphabet - 1)
    label = np.full((batch, width), 0 if first else -1, dtype=np.float64)
    data_lengths = rng.integers(1, frames + 1, batch) if p.use_data_lengths else np.full(batch, frames)
    label_lengths = np.zeros(batch)
    for b in range(batch):
        longest = min(width, (int(data_lengths[b]) + 1) // 2) if symbols.size else 0
        n = int(rng.integers(0, longest + 1))
        label[b, :n] = rng.choice(symbols, n) if n else []
        label_lengths[b] = n
    out = {"label": label}
    if p.use_data_lengths:
        out["data_lengths"] = data_lengths.astype(np.float64)
    if p.use_label_lengths:
        out["label_lengths"] = label_lengths
    return out
def _split_points(draw, op, ndim, data_shape):
    """A split axis and increasing split points within it (split_v2 and _split_v2)."""
    axis = draw(st.integers(0, ndim - 1))
    n = data_shape[axis]
    points = tuple(sorted(draw(st.sets(st.integers(1, max(n - 1, 1)), max_size=2))))
    if n == 1:
        points = ()
    if op.name == "split_v2":
        return {"axis": axis, "indices_or_sections": points or 1}
    return {"axis": axis, "indices": (0,) + points, "sections": 0}


HINTS = {
    # Data must be NC + 1..3 spatial dims; the kernel strategy follows the rank.
    "Convolution": Hint(ndims=(3, 4)),
    "Deconvolution": Hint(ndims=(3, 4)),
    "Pooling": Hint(ndims=(3, 4), fix_attrs=_pooling_window),
    "Crop": Hint(ndims=(4, 4)),
    "UpSampling": Hint(ndims=(4, 4)),
    # 2-D data with one row per sample and channels on axis 1
    "BatchNorm": Hint(ndims=(2, 4), tol=(1e-4, 1e-7), values={"moving_var": _positive}),
    "InstanceNorm": Hint(ndims=(3, 4), tol=(1e-4, 1e-7)),
    "LRN": Hint(ndims=(4, 4)),
    # a Python custom operator registered by lightmod.testing.custom_ops
    "Custom": Hint(params={"op_type": _softsign_op_type}),
    "Reshape": Hint(ndims=(1, 3), params={"shape": _reshape_target}),
    "SliceChannel": Hint(ndims=(2, 4), params={"num_outputs": _divisor_of_axis1,
                                               "axis": lambda n, s: st.just(1)}),
    "broadcast_to": Hint(params={"shape": _broadcast_target}),
    # Dropout in training mode draws a new mask for every forward pass
    "Dropout": Hint(no_grad="the training-mode mask is random, so finite differences of two "
                            "forward passes compare different masks",
                    random=lambda p: "mode='always' drops at inference too"
                    if p.mode == "always" else None),
    # BlockGrad's whole point is a zero gradient where finite differences see the identity
    "BlockGrad": Hint(no_grad="BlockGrad stops the gradient by design"),
    # (data domains of the elementwise functions: _SHARED_HINTS below)
    "_power": Hint(values={"lhs": _positive}),
    "broadcast_power": Hint(broadcast=True, values={"lhs": _positive}),
    # Index and label inputs (and _SHARED_HINTS below)
    "one_hot": Hint(values={"indices": _indices_below(lambda p, s: p.depth)},
                    no_grad_inputs=("indices",)),
    "take": Hint(values={"indices": _indices_below(lambda p, s: s["a"][p.axis])},
                 no_grad_inputs=("indices",)),
    # distinct rows: a repeated index keeps one row, so the others' numeric gradient is 0
    "_contrib_index_copy": Hint(
        shapes=lambda s, p: {"index_vector": (min(2, s[0]),),
                             "new_tensor": (min(2, s[0]),) + tuple(s[1:])},
        values={"index_vector": lambda rng, shape, p, shapes: rng.permutation(
            shapes["old_tensor"][0])[:shape[0]].astype(np.float64)},
        no_grad_inputs=("index_vector",)),
    "_sparse_retain": Hint(values={"indices": _indices_below(lambda p, s: s["data"][0])},
                           no_grad_inputs=("indices",)),
    # pick on 1-D data infers an index/output shape of () where MXNet 1.9.1 has (1,): 1-D
    # data is left out here and pinned by an xfail test in tests/test_registry_ops_property.py
    "pick": Hint(ndims=(2, 4), values={"index": _indices_below(
        lambda p, s: s["data"][p.axis if p.axis is not None else -1])},
        no_grad_inputs=("index",)),
    # one index per row of 2-D data
    "batch_take": Hint(ndims=(2, 2), values={"indices": _indices_below(lambda p, s: s["a"][1])},
                       no_grad_inputs=("indices",)),
    "gather_nd": Hint(values={"indices": _nd_indices(lambda p, s: s["data"])},
                      no_grad_inputs=("indices",)),
    # NCHW data whose channels (depth_to_space) or sides (space_to_depth) the block divides
    "depth_to_space": Hint(ndims=(4, 4), params={"block_size": lambda n, s: st.sampled_from(
        [b for b in (1, 2) if s[1] % (b * b) == 0])}),
    "space_to_depth": Hint(ndims=(4, 4), params={"block_size": lambda n, s: st.sampled_from(
        [b for b in (1, 2) if s[2] % b == 0 and s[3] % b == 0])}),
    "SoftmaxOutput": Hint(values={"label": _class_labels}, no_grad_inputs=("label",)),
    "softmax_cross_entropy": Hint(ndims=(2, 2), values={"label": _indices_below(
        lambda p, s: s["data"][1])}, no_grad_inputs=("label",)),
    "where": Hint(values={"condition": _booleans}, no_grad_inputs=("condition",)),
    "Pad": Hint(ndims=(4, 4), params={"pad_width": _spatial_pads}),
    "LeakyReLU": Hint(no_grad=_leaky_relu_no_grad),
    "RNN": Hint(ndims=(3, 3), max_side=3, tol=(1e-4, 1e-7),
                values={"sequence_length": _indices_below(lambda p, s: s["data"][0],
                                                          offset=1)},
                no_grad_inputs=("sequence_length",),
                no_grad=lambda p: "dropout between layers is random in training"
                if p.p > 0 and p.num_layers > 1 else None),
    # optimizer states under a square root must be positive (and _SHARED_HINTS below)
    "rmspropalex_update": Hint(values={"n": _above_one}),
    "multi_lars": Hint(values={"weights_sum_sq": _positive, "grads_sum_sq": _positive}),
    # x mod y jumps where x / y is an integer: operands drawn off those points
    "_mod": Hint(values={"*": _mod_operands}),
    "broadcast_mod": Hint(broadcast=True, values={"*": _mod_operands}),
    "_mod_scalar": Hint(values={"*": _mod_scalar_data}),
    "_rmod_scalar": Hint(values={"*": _rmod_scalar_data}),
    # k at most the smallest dim, whatever the axis: MXNet rejects a larger k when inferring
    # shapes, lightmod (for ret_typ='mask') only in forward -- pinned by an xfail test
    "topk": Hint(params={"k": lambda ndim, shape: st.integers(1, min(shape))}),
    # linalg: the logarithm of the diagonal needs positive entries (Cholesky and
    # eigendecomposition: _SHARED_HINTS below)
    "_linalg_sumlogdiag": Hint(ndims=(2, 4), values={"A": _positive}),
    # quantization: float32 data (int8 codes) and a range around zero
    "_contrib_quantize": Hint(dtype="float32", values={"*": _ranges}),
    "_contrib_dequantize": Hint(dtype="int8", values={"*": _codes}),
    # the keys (another sequence length) are not implied by the queries
    "_contrib_interleaved_matmul_encdec_qk": Hint(
        ndims=(3, 3), params={"heads": lambda n, s: st.sampled_from([1, 2])},
        shapes=lambda s, p: {"keys_values": (s[0] + 1, s[1], 2 * s[2])}),
    "ctc_loss": Hint(ndims=(3, 3), shapes=_ctc_shapes, values={"*": _ctc_inputs},
                     no_grad_inputs=("label", "data_lengths", "label_lengths"), tol=(1e-4, 1e-7)),
}

# --- sequence, spatial and detection operators (operator/sequence.py, spatial.py, detection.py)
HINTS.update({
    "BatchNorm_v1": Hint(ndims=(2, 4), tol=(1e-4, 1e-7), values={"moving_var": _positive}),
    # one device: lightmod does not pool statistics across devices (ndev > 1 refuses)
    "_contrib_SyncBatchNorm": Hint(ndims=(2, 4), tol=(1e-4, 1e-7),
                                   values={"moving_var": _positive},
                                   params={"key": lambda ndim, shape: st.just("bn"),
                                           "ndev": lambda ndim, shape: st.just(1)}),
    "GroupNorm": Hint(ndims=(2, 4), tol=(1e-4, 1e-7)),
    "_image_normalize": Hint(ndims=(3, 4)),
    "_contrib_BilinearResize2D": Hint(ndims=(4, 4)),
    "_contrib_AdaptiveAvgPooling2D": Hint(ndims=(4, 4)),
    # affine takes (N, 6) matrices, warp (N, 2, H, W) flows: the drawn data shape picks
    "GridGenerator": Hint(ndims=(2, 4), max_side=6, params={
        "transform_type": lambda ndim, shape: st.just("affine" if ndim == 2 else "warp"),
        "target_shape": lambda ndim, shape: st.tuples(st.integers(2, 3), st.integers(2, 3))}),
    "BilinearSampler": Hint(ndims=(4, 4), values={"grid": _inside_unit}),
    "SpatialTransformer": Hint(ndims=(4, 4), values={"loc": _inside_unit}, params={
        "target_shape": lambda ndim, shape: st.tuples(st.integers(1, 3), st.integers(1, 3))}),
    "Correlation": Hint(ndims=(4, 4), tol=(1e-4, 1e-7)),
    "ROIPooling": Hint(ndims=(4, 4), drawn_shapes={"rois": _roi_shape(5)}, values={"rois": _rois},
                       no_grad_inputs=("rois",)),
    "_contrib_PSROIPooling": Hint(ndims=(4, 4), drawn_shapes={"rois": _roi_shape(5)},
                                  values={"rois": _rois}, no_grad_inputs=("rois",),
                                  fix_attrs=_psroi_sizes),
    "_contrib_ROIAlign": Hint(ndims=(4, 4), drawn_shapes={"rois": _roi_shape(5)},
                              values={"rois": _rois}, no_grad_inputs=("rois",),
                              params={"position_sensitive": lambda ndim, shape: st.just(False)}),
    "_contrib_RROIAlign": Hint(ndims=(4, 4), drawn_shapes={"rois": _roi_shape(6)},
                               values={"rois": _rois}, no_grad_inputs=("rois",)),
    # offsets small enough to keep most taps inside; 2-D only
    "_contrib_DeformableConvolution": Hint(ndims=(4, 4), tol=(1e-4, 1e-7),
                                           values={"offset": _inside_unit}),
})

# Operators that need the same hint: (names, Hint arguments); each gets its own Hint.
_SHARED_HINTS = [
    # Rounding and sign are flat almost everywhere; keep the data off their jumps
    (("floor", "ceil", "round", "rint", "trunc", "fix"), {"values": {"data": _off_integers}}),
    # Logarithms, roots and powers need positive data (log1p is singular at -1, gamma has
    # poles at 0, -1, -2 ...)
    (("log", "log2", "log10", "log1p", "sqrt", "rsqrt", "gamma", "gammaln", "_power_scalar"),
     {"values": {"data": _positive}}),
    (("rcbrt",), {"values": {"data": _off_zero}}),
    # inverse trigonometric and hyperbolic functions: their domains
    (("arcsin", "arccos", "arctanh"), {"values": {"data": _inside_unit}}),
    (("arccosh",), {"values": {"data": _well_above_one}}),
    # the output (and weight) dtype is the dtype parameter: float64 makes it differentiable
    (("Embedding", "_contrib_SparseEmbedding"),
     {"values": {"data": _indices_below(lambda p, s: p.input_dim)},
      "params": {"dtype": lambda n, s: st.sampled_from(["float64", "float32"])},
      "no_grad_inputs": ("data",)}),
    # one index per row of 2-D data
    (("choose_element_0index", "fill_element_0index"),
     {"ndims": (2, 2), "values": {"rhs": _indices_below(lambda p, s: s["lhs"][1])},
      "no_grad_inputs": ("rhs",)}),
    (("split_v2", "_split_v2"), {"ndims": (1, 3), "fix_attrs": _split_points}),
    # with use_length, the length input holds counts in 1..axis size; 1-D data would need a
    # length of shape (1,), which lightmod infers as () (pinned like pick's)
    (("softmax", "softmin"),
     {"ndims": (2, 4), "values": {"length": _indices_below(lambda p, s: s["data"][p.axis] + 1,
                                                           offset=1)},
      "no_grad_inputs": ("length",)}),
    # optimizer states under a square root must be positive
    (("adam_update", "lamb_update_phase1", "mp_lamb_update_phase1"),
     {"values": {"var": _positive}}),
    (("rmsprop_update", "ftrl_update"), {"values": {"n": _positive}}),
    (("ftml_update",), {"values": {"v": _positive}}),
    (("_sparse_adagrad_update",), {"values": {"history": _positive}}),
    # Cholesky and eigendecomposition need symmetric positive-definite matrices
    (("_linalg_potrf", "_linalg_syevd"),
     {"ndims": (2, 4), "values": {"A": _spd_matrices}, "no_grad": _ONE_TRIANGLE}),
    # lengths are counts of steps: 1 .. the time axis' size
    (("SequenceMask", "SequenceReverse", "SequenceLast"),
     {"ndims": (2, 4), "values": {"sequence_length": _sequence_lengths},
      "no_grad_inputs": ("sequence_length",)}),
    # one anchor per cell keeps cls_prob's channels (2 per anchor) small
    (("_contrib_Proposal", "_contrib_MultiProposal"),
     {"ndims": (4, 4), "params": _ONE_ANCHOR, "values": {"im_info": _image_info},
      "no_grad": _NOT_DIFFERENTIABLE}),
]
for _names, _arguments in _SHARED_HINTS:
    for _name in _names:
        HINTS[_name] = Hint(**_arguments)

# every broadcast_* binary op: the second operand broadcasts against the first
for _name in ("add", "sub", "mul", "div", "maximum", "minimum", "hypot", "equal",
              "not_equal", "greater", "greater_equal", "lesser", "lesser_equal", "logical_and",
              "logical_or", "logical_xor"):
    HINTS.setdefault("broadcast_" + _name, Hint(broadcast=True))

# the multi-tensor SGD family: every member takes num_weights groups of arrays
for _name in ("multi_sgd_update", "multi_sgd_mom_update", "multi_mp_sgd_update",
              "multi_mp_sgd_mom_update", "preloaded_multi_sgd_update",
              "preloaded_multi_sgd_mom_update", "preloaded_multi_mp_sgd_update",
              "preloaded_multi_mp_sgd_mom_update"):
    HINTS[_name] = Hint(fix_attrs=_multi_update_counts)

# the random family (operator/random_ops.py): outputs are random, so only shapes are compared;
# parameters and parameter arrays are drawn inside each law's domain
_SAMPLED = "the operator draws random numbers"


def _unit_probability(rng, shape, p, shapes):
    """Success probabilities in [0.2, 1]."""
    return rng.uniform(0.2, 1.0, shape)


def _nonpositive(rng, shape, p, shapes):
    return -rng.uniform(0.0, 1.0, shape)


_DOMAINS = {   # distribution -> (attribute strategies, input value makers)
    "uniform": ({"low": lambda n, s: st.floats(-1.0, 0.0), "high": lambda n, s: st.floats(0.0, 1.0)},
                {"low": _nonpositive, "high": _positive}),
    "normal": ({}, {"mu": _off_zero, "sigma": _positive}),
    "gamma": ({}, {"alpha": _positive, "beta": _positive}),
    "exponential": ({}, {"lam": _positive}),
    "poisson": ({}, {"lam": _positive}),
    "negative_binomial": ({"p": lambda n, s: st.floats(0.2, 1.0)},
                          {"k": _positive, "p": _unit_probability}),
    "generalized_negative_binomial": ({}, {"mu": _positive, "alpha": _positive}),
}
for _name, (_attrs, _values) in _DOMAINS.items():
    HINTS["_random_" + _name] = Hint(random=_SAMPLED, params=_attrs)
    HINTS["_random_%s_like" % _name] = Hint(random=_SAMPLED, params=_attrs)
    HINTS["_sample_" + _name] = Hint(random=_SAMPLED, values=_values)
HINTS["_random_randint"] = Hint(random=_SAMPLED, params={
    "low": lambda n, s: st.integers(-3, 0), "high": lambda n, s: st.integers(1, 4)})
HINTS["_sample_multinomial"] = Hint(random=_SAMPLED, values={"data": _positive})
HINTS["_shuffle"] = Hint(random=_SAMPLED)
# shape is (batch, samples per row): samples per row (at most max_side) within range_max
HINTS["_sample_unique_zipfian"] = Hint(random=_SAMPLED, ndims=(2, 2), params={
    "range_max": lambda n, s: st.integers(4, 10)})
