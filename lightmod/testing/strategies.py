"""hypothesis strategies for lightmod objects.

Shapes and arrays
    ``shapes``, ``broadcastable_shapes``, ``dtypes``, ``contexts``, ``ndarrays``.
Symbols
    ``symbols`` -- small DAGs of registered operators whose shapes infer (operators and their
    attributes come from the registry, see :mod:`lightmod.testing.operators`);
    ``module_nets`` -- networks of per-sample layers with a regression head, ready for a
    Module (the batch can be split over devices).
Data
    ``data_batches``, ``ndarray_iters``.
Training
    ``optimizers`` -- an optimizer name with hyper-parameters drawn from its constructor's
    signature (so every registered optimizer is covered); ``module_configs`` -- contexts,
    work_load_list, batch size, grad_req; ``bucket_keys``.

Every strategy draws small sizes by default: properties run the code many times, and lightmod
compiles a kernel the first time it meets a dtype.
"""
import dataclasses
import inspect
import warnings

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from .. import context as _context
from .. import io as _io
from .. import ndarray as _nd
from .. import optimizer as _opt
from .. import symbol as _sym
from ..base import MXNetError
from ..module.executor_group import _split_input_slice
from ..name import NameManager
from ..symbol import register as _sym_register
from . import _profile  # noqa: F401  (registers the hypothesis profiles)
from .operators import op_cases, operator_names

__all__ = ["shapes", "broadcastable_shapes", "dtypes", "contexts", "ndarrays", "symbols",
           "graph_operators", "module_nets", "ModuleNet", "data_batches", "ndarray_iters",
           "optimizers", "optimizer_params", "work_load_lists", "module_configs",
           "ModuleConfig", "bucket_keys", "PER_SAMPLE_OPS"]

FLOAT_DTYPES = ("float32", "float64")


# ---------------------------------------------------------------------------------------------
# shapes, dtypes, contexts, arrays
# ---------------------------------------------------------------------------------------------
def shapes(min_dims=1, max_dims=4, min_side=1, max_side=5):
    """Array shapes (tuples). MXNet 1.x has no 0-d arrays, so ``min_dims`` is at least 1."""
    return hnp.array_shapes(min_dims=max(min_dims, 1), max_dims=max_dims, min_side=min_side,
                            max_side=max_side)


@st.composite
def broadcastable_shapes(draw, num_shapes=2, min_dims=1, max_dims=4, max_side=4,
                         same_ndim=False):
    """``(input_shapes, result_shape)``: ``num_shapes`` shapes that broadcast together.

    With ``same_ndim`` every input has the result's rank (some dims 1), as MXNet's
    ``broadcast_*`` operators are most often used.
    """
    if same_ndim:
        result = draw(shapes(min_dims, max_dims, 1, max_side))
        inputs = [tuple(1 if draw(st.booleans()) else d for d in result)
                  for _ in range(num_shapes)]
        result = tuple(max(dims) for dims in zip(*inputs))
        return inputs, result
    drawn = draw(hnp.mutually_broadcastable_shapes(num_shapes=num_shapes,
                                                   min_dims=max(min_dims, 1),
                                                   max_dims=max_dims, max_side=max_side))
    assume(all(len(s) >= 1 for s in drawn.input_shapes) and len(drawn.result_shape) >= 1)
    return list(drawn.input_shapes), drawn.result_shape


def dtypes(floats_only=True):
    """dtype names lightmod computes in: float32/float64 (plus float16 and ints when not
    ``floats_only``)."""
    if floats_only:
        return st.sampled_from(FLOAT_DTYPES)
    return st.sampled_from(FLOAT_DTYPES + ("float16", "int32", "int64", "uint8"))


def contexts(min_devices=1, max_devices=3, gpu=False):
    """A list of distinct contexts: ``cpu(0)``, ``cpu(1)``, ... (data-parallel replicas on the
    host), or ``gpu(i)`` for the GPUs present when ``gpu`` is True."""
    if gpu:
        count = _context.num_gpus()
        if count == 0:
            raise MXNetError("contexts(gpu=True): no GPU is visible")
        max_devices = min(max_devices, count)
        make = _context.gpu
    else:
        make = _context.cpu
    return st.integers(min_devices, max_devices).map(lambda n: [make(i) for i in range(n)])


@st.composite
def ndarrays(draw, shape=None, dtype="float32", ctx=None, elements=None, unique=False):
    """An NDArray of ``dtype`` on ``ctx`` (cpu(0) default); ``shape`` and ``dtype`` may be
    strategies. Float elements default to [-10, 10] without NaN/inf; ``unique`` avoids ties
    (argmax, max pooling)."""
    shape = draw(shape) if isinstance(shape, st.SearchStrategy) else shape
    shape = draw(shapes()) if shape is None else tuple(shape)
    dtype = draw(dtype) if isinstance(dtype, st.SearchStrategy) else dtype
    np_dtype = np.dtype(dtype)
    if elements is None:
        if np_dtype.kind == "f":
            elements = st.floats(-10, 10, allow_nan=False, allow_infinity=False,
                                 width=min(np_dtype.itemsize * 8, 64))
        elif np_dtype.kind == "b":
            elements = st.booleans()
        else:
            info = np.iinfo(np_dtype)
            elements = st.integers(max(info.min, -100), min(info.max, 100))
    values = draw(hnp.arrays(np_dtype, shape, elements=elements, unique=unique))
    return _nd.array(values, ctx=ctx or _context.cpu(), dtype=np_dtype)


# ---------------------------------------------------------------------------------------------
# symbols
# ---------------------------------------------------------------------------------------------
_GRAPH_OPS = None


def _value_free(name):
    """True when the op's first input takes any real values (no index/positive domain)."""
    from .op_hints import HINTS
    hint = HINTS.get(name)
    return hint is None or not hint.values


def graph_operators():
    """Operators usable anywhere in a random graph: they take one data input first (not
    variadic), have no value domain, and are not loss heads or update operators. Whether a
    drawn use is differentiable and deterministic is decided per case."""
    global _GRAPH_OPS
    if _GRAPH_OPS is None:
        from ..operator import registry
        ops = []
        for name in operator_names():
            op = registry.get(name)
            if (op.inputs and op.variadic is None and not op.is_loss and _value_free(name)
                    and not name.endswith("_update") and "update_phase" not in name
                    and name not in ("multi_lars", "multi_sum_sq")):
                ops.append(name)
        _GRAPH_OPS = tuple(ops)
    return _GRAPH_OPS


class RandomGraph:
    """A symbol drawn by :func:`symbols` with the shapes its data inputs were drawn for."""

    def __init__(self, symbol, data_shapes, op_names):
        self.symbol = symbol
        self.data_shapes = data_shapes     # {variable name: shape} for the data inputs
        self.op_names = op_names           # the operators, in the order they were added

    def __repr__(self):
        return "RandomGraph(ops=%s, data_shapes=%s)" % (self.op_names, self.data_shapes)

    def arg_shapes(self):
        """{argument name: shape} with every parameter's shape inferred."""
        arg_shapes, _, _ = self.symbol.infer_shape(**self.data_shapes)
        return dict(zip(self.symbol.list_arguments(), arg_shapes))


@st.composite
def symbols(draw, num_ops=(1, 4), data_shape=None, ops=None, max_size=48,
            differentiable=True):
    """A :class:`RandomGraph`: a small DAG of registered operators whose shapes infer.

    Starting from ``Variable('data')`` (shape ``data_shape`` or drawn), each step applies an
    operator from ``ops`` (default :func:`graph_operators`) to an existing node, with
    attributes drawn from the operator's declaration for that node's shape. Its other inputs
    either reuse an existing node of the required shape (making a DAG) or become parameters
    (auto-created variables such as ``n1_weight``). With ``differentiable`` only uses with a
    deterministic, differentiable backward are kept. The last node is the output.
    """
    ops = tuple(ops) if ops is not None else graph_operators()
    shape = tuple(data_shape) if data_shape is not None else draw(shapes(1, 3, 1, 4))
    data = _sym.Variable("data")
    nodes = [(data, shape)]
    used = []
    count = draw(st.integers(*num_ops)) if isinstance(num_ops, tuple) else num_ops
    with NameManager():
        for step in range(count):
            index = draw(st.integers(0, len(nodes) - 1))
            node, node_shape = nodes[-1 if draw(st.booleans()) else index]
            name = draw(st.sampled_from(ops))
            case = draw(op_cases(name, dtype="float32", max_input_size=max_size,
                                 data_shape=node_shape))
            if differentiable:
                assume(case.numeric_check_reason() is None)
            inputs = {case.input_names[0]: node}
            for arg in case.input_names[1:]:
                if arg in case.aux_names:
                    continue
                matching = [n for n, s in nodes if s == case.shapes[arg]]
                if matching and draw(st.booleans()):
                    inputs[arg] = draw(st.sampled_from(matching))
            fn = _sym_register.op_function(case.op_name)
            try:
                out = fn(name="n%d" % step, **inputs, **case.attrs)
            except MXNetError:
                assume(False)
            out = out[0] if len(out.list_outputs()) > 1 else out
            out_shape = tuple(case.out_shapes[0])
            nodes.append((out, out_shape))
            used.append(case.op_name)
    result = nodes[-1][0]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # "cannot decide shape" for rejected graphs
            arg_shapes, _, _ = result.infer_shape(data=shape)
    except MXNetError:
        assume(False)
    assume(arg_shapes is not None and all(s and all(d > 0 for d in s) for s in arg_shapes))
    return RandomGraph(result, {"data": shape}, used)


# Layers that treat every sample of a batch on its own, so a batch may be split over devices.
PER_SAMPLE_OPS = ("FullyConnected", "Activation", "tanh", "sigmoid", "relu", "softsign",
                  "square", "sin", "cos", "elemwise_add", "elemwise_mul", "_plus_scalar",
                  "_mul_scalar", "LeakyReLU", "Flatten")


class ModuleNet:
    """A network for a Module: data ``(batch, features)`` named ``data``, a regression head
    whose label ``(batch, outputs)`` is named ``lro_label`` (``LinearRegressionOutput(...,
    name='lro')``); every layer must treat samples independently. Wrap your own symbol in
    one to run the lightmod.testing Module properties on it."""

    def __init__(self, symbol, features, outputs, op_names=()):
        self.symbol = symbol
        self.features = features            # data is (batch, features)
        self.outputs = outputs              # label / output is (batch, outputs)
        self.op_names = op_names
        self.data_names = ["data"]
        self.label_names = ["lro_label"]

    def __repr__(self):
        return "ModuleNet(ops=%s, features=%d, outputs=%d)" % (self.op_names, self.features,
                                                              self.outputs)

    def data_shapes(self, batch_size):
        return [("data", (batch_size, self.features))]

    def label_shapes(self, batch_size):
        return [("lro_label", (batch_size, self.outputs))]

    def param_shapes(self, batch_size=2):
        arg_shapes, _, aux_shapes = self.symbol.infer_shape(
            data=(batch_size, self.features), lro_label=(batch_size, self.outputs))
        names = self.symbol.list_arguments()
        return {n: s for n, s in zip(names, arg_shapes) if n not in ("data", "lro_label")}


@st.composite
def module_nets(draw, num_layers=(1, 3), max_features=4, ops=PER_SAMPLE_OPS):
    """A :class:`ModuleNet`: per-sample layers (``ops``) drawn by :func:`symbols`, then a
    ``FullyConnected`` and a ``LinearRegressionOutput`` head named ``lro``.

    The graph is built for a batch of 2 (>1, so no layer may collapse the batch axis), and
    every layer keeps samples apart, so the net gives the same per-sample results for any
    batch split.
    """
    features = draw(st.integers(1, max_features))
    graph = draw(symbols(num_ops=num_layers, data_shape=(2, features), ops=ops, max_size=24))
    outputs = draw(st.integers(1, 3))
    with NameManager():
        net = _sym.FullyConnected(graph.symbol, num_hidden=outputs, name="head")
        net = _sym.LinearRegressionOutput(net, name="lro")
    result = ModuleNet(net, features, outputs, graph.op_names)
    # parameters must not depend on the batch (an element-wise op with a new variable as
    # its second operand would make a batch-shaped "parameter")
    try:
        assume(result.param_shapes(2) == result.param_shapes(3))
    except MXNetError:
        assume(False)
    return result


# ---------------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------------
def _seeded_values(seed, shape, dtype):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


@st.composite
def data_batches(draw, data_shapes, label_shapes=None, dtype="float32", bucket_key=None,
                 ctx=None):
    """A DataBatch for ``data_shapes``/``label_shapes`` (lists of ``(name, shape)`` or
    DataDesc) with uniform [-1, 1] values, ``provide_data``/``provide_label`` and
    ``bucket_key`` set (BucketingModule needs all three)."""
    seed = draw(st.integers(0, 2 ** 32 - 1))
    descs = [d if isinstance(d, _io.DataDesc) else _io.DataDesc(*d) for d in data_shapes]
    labels = [d if isinstance(d, _io.DataDesc) else _io.DataDesc(*d)
              for d in (label_shapes or [])]
    data = [_nd.array(_seeded_values(seed + i, d.shape, dtype), ctx=ctx, dtype=dtype)
            for i, d in enumerate(descs)]
    label = [_nd.array(_seeded_values(seed + 100 + i, d.shape, dtype), ctx=ctx, dtype=dtype)
             for i, d in enumerate(labels)]
    return _io.DataBatch(data, label or None, pad=0, bucket_key=bucket_key,
                         provide_data=descs, provide_label=labels or None)


@st.composite
def ndarray_iters(draw, num_samples=(1, 12), batch_size=(1, 5), data_shape=(3,),
                  label_shape=(), last_batch_handle=None, shuffle=False):
    """``(iterator, data, label)``: an ``mx.io.NDArrayIter`` over random float32 data of
    per-sample shape ``data_shape`` (labels of ``label_shape``, or none when None), with the
    numpy arrays it was built from. ``last_batch_handle`` None draws one of pad / discard /
    roll_over."""
    n = draw(st.integers(*num_samples)) if isinstance(num_samples, tuple) else num_samples
    bs = draw(st.integers(*batch_size)) if isinstance(batch_size, tuple) else batch_size
    handle = last_batch_handle or draw(st.sampled_from(["pad", "discard", "roll_over"]))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    data = rng.uniform(-1, 1, (n,) + tuple(data_shape)).astype(np.float32)
    label = None if label_shape is None else \
        rng.uniform(-1, 1, (n,) + tuple(label_shape)).astype(np.float32)
    it = _io.NDArrayIter(data, label, batch_size=bs, shuffle=shuffle,
                         last_batch_handle=handle)
    return it, data, label


# ---------------------------------------------------------------------------------------------
# optimizers
# ---------------------------------------------------------------------------------------------
# Optimizers whose updates are random or need more than (weight, gradient, state).
_SPECIAL_OPTIMIZERS = ("sgld", "test", "lbsgd", "dcasgd")


def _hyper_parameter(name, default):
    """A strategy for one optimizer constructor argument, from its default."""
    if isinstance(default, bool):
        return st.sampled_from([default, not default])
    if isinstance(default, int) and default > 0:
        return st.integers(max(1, default // 2), default * 2)
    if isinstance(default, float) or isinstance(default, int):
        default = float(default)
        if 0 < default < 1:
            return st.floats(default / 2.0, default).map(lambda x: float("%.3g" % x))
        if default > 0:
            return st.floats(default / 2.0, default * 2.0).map(lambda x: float("%.3g" % x))
        if default == 0:                # momentum-like terms: off, or on
            return st.sampled_from([0.0, 0.5, 0.9])
        return st.just(default)
    return st.just(default)


@st.composite
def optimizer_params(draw, name):
    """Hyper-parameters for the registered optimizer ``name``: ``learning_rate`` (0.001-0.5),
    ``wd``, ``clip_gradient`` (None or 0.5-5) and the optimizer's own constructor arguments
    drawn around their defaults (rates stay in (0, 1))."""
    cls = _opt.Optimizer.opt_registry[name]
    params = {"learning_rate": draw(st.sampled_from([0.001, 0.01, 0.05, 0.1, 0.5])),
              "wd": draw(st.sampled_from([0.0, 0.0, 1e-4, 1e-2])),
              "clip_gradient": draw(st.sampled_from([None, 0.5, 5.0]))}
    for arg, p in inspect.signature(cls.__init__).parameters.items():
        if arg in ("self", "learning_rate", "kwargs", "args") or p.default is None or \
                p.default is inspect.Parameter.empty or isinstance(p.default, str):
            continue
        if arg in ("lazy_update", "multi_precision"):   # storage/precision, not the math
            continue
        params[arg] = draw(_hyper_parameter(arg, p.default))
    return {k: v for k, v in params.items() if v is not None}


@st.composite
def optimizers(draw, names=None):
    """``(name, params)`` for a registered optimizer (default: every deterministic one) and
    hyper-parameters from :func:`optimizer_params`; ``opt.create(name, **params)`` or
    ``Module.init_optimizer(optimizer=name, optimizer_params=params)`` takes them."""
    if names is None:
        names = sorted(n for n in _opt.Optimizer.opt_registry if n not in _SPECIAL_OPTIMIZERS)
    name = draw(st.sampled_from(list(names)))
    return name, draw(optimizer_params(name))


# ---------------------------------------------------------------------------------------------
# modules
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass(eq=False)
class ModuleConfig:
    """How to build and bind a Module: contexts, work loads, batch size, grad_req."""

    contexts: list
    work_load_list: list
    batch_size: int
    grad_req: object    # a string, or a dict of them per argument

    def module_kwargs(self):
        return {"context": self.contexts, "work_load_list": self.work_load_list}


def _splits(batch_size, work_load_list):
    try:
        _split_input_slice(batch_size, work_load_list)
        return True
    except ValueError:
        return False


@st.composite
def work_load_lists(draw, num_devices, batch_size=None):
    """Relative work loads (1-3 each) for ``num_devices``; with ``batch_size``, only loads that
    give every device a non-empty slice (MXNet raises 'Too many slices' otherwise)."""
    loads = draw(st.lists(st.integers(1, 3), min_size=num_devices, max_size=num_devices))
    if batch_size is not None:
        assume(_splits(batch_size, loads))
    return loads


@st.composite
def module_configs(draw, max_devices=3, batch_size=(1, 8), grad_reqs=("write", "add")):
    """A :class:`ModuleConfig`: 1..max_devices cpu contexts, a work_load_list (or None for
    equal loads), a batch size every device gets a share of, and a grad_req."""
    ctxs = draw(contexts(1, max_devices))
    bs = draw(st.integers(max(batch_size[0], len(ctxs)), max(batch_size[1], len(ctxs))))
    loads = draw(st.one_of(st.none(), work_load_lists(len(ctxs), bs)))
    assume(_splits(bs, loads or [1] * len(ctxs)))
    return ModuleConfig(ctxs, loads, bs, draw(st.sampled_from(list(grad_reqs))))


def bucket_keys(min_size=1, max_size=3, max_key=6):
    """Distinct bucket keys (ints 1..max_key, e.g. sequence lengths), the default (largest)
    first, as BucketingModule expects of its default bucket."""
    return st.lists(st.integers(1, max_key), min_size=min_size, max_size=max_size,
                    unique=True).map(lambda keys: sorted(keys, reverse=True))
