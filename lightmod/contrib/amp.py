"""``mx.contrib.amp``: automatic mixed precision for symbolic (Module) programs, in float16.

* ``convert_symbol`` / ``convert_model`` rewrite an FP32 graph the way MXNet 1.9.1 does: the
  inputs of the matrix-product operators (``list_lp16_ops``) are cast to float16 with
  ``amp_cast`` nodes, float16 inputs of precision-sensitive operators (``list_fp32_ops``, and
  ``list_conditional_fp32_ops`` for the listed parameter values) are cast back to float32, and
  operators mixing float types (``list_widest_type_cast``) get an ``amp_multicast`` to the
  widest one. Every other operator runs in the type it receives. ``cast_optional_params``
  stores parameters that only feed float16 casts in float16 instead.
* ``init()`` makes ``mx.sym.X`` / ``mx.nd.X`` of those operators insert the same casts as they
  are called, so a model built afterwards computes its products in float16.

lightmod computes float16 on the CPU by rounding float32 math (see the kernels), so the numbers
follow MXNet's. Not supported (each raises an MXNetError saying so): bfloat16, dynamic loss
scaling (``init_trainer``, ``scale_loss``, ``unscale``: they serve Gluon trainers) and Gluon
blocks (``convert_hybrid_block``).
"""
import json
import logging

import numpy as np

from ..base import MXNetError
from ..operator import registry as _registry

# a module logger: logging.info() on the root logger would configure logging before
# the program's own basicConfig() and silence it
_LOG = logging.getLogger(__name__)

__all__ = ["init", "convert_symbol", "convert_model", "convert_bucketing_module",
           "init_trainer", "scale_loss", "unscale", "convert_hybrid_block", "list_lp16_ops",
           "list_fp32_ops", "list_lp16_fp32_ops", "list_conditional_fp32_ops",
           "list_widest_type_cast", "list_loss_output_functions", "list_lp16_use_fp32_params"]

# operators whose work is a matrix product: they gain most from float16
_LP16_OPS = ["Convolution", "Deconvolution", "FullyConnected", "RNN"]
# operators whose results need float32 range or accuracy (exponentials, sums, norms, losses)
_FP32_OPS = ["softmax", "log_softmax", "SoftmaxActivation", "SoftmaxOutput", "Softmax",
             "softmax_cross_entropy", "LinearRegressionOutput", "LogisticRegressionOutput",
             "MAERegressionOutput", "SVMOutput", "MakeLoss", "make_loss", "smooth_l1",
             "exp", "expm1", "log", "log10", "log2", "log1p", "sqrt", "rsqrt", "cbrt", "rcbrt",
             "square", "reciprocal", "_power", "broadcast_power", "_power_scalar",
             "_rpower_scalar", "gamma", "gammaln", "erf", "erfinv", "arccos", "arcsin", "cosh",
             "sinh", "tan", "arctan", "arccosh", "arcsinh", "arctanh", "degrees", "radians",
             "sum", "nansum", "mean", "prod", "nanprod", "norm", "L2Normalization", "LRN",
             "InstanceNorm", "LayerNorm", "topk", "sort", "argsort", "_linalg_gemm",
             "_linalg_gemm2", "_linalg_potrf", "_linalg_potri", "_linalg_trmm", "_linalg_trsm",
             "_linalg_sumlogdiag", "_linalg_syrk", "_linalg_gelqf", "_div_scalar",
             "_rdiv_scalar", "_mod_scalar", "_rmod_scalar"]
# (operator, parameter, values): float32 only for these parameter values
_CONDITIONAL_FP32_OPS = [("Activation", "act_type", ["softrelu"]),
                         ("LeakyReLU", "act_type", ["elu", "selu"])]
# operators combining several inputs: all are brought to the widest float type among them
_WIDEST_OPS = ["elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div", "_plus", "_Plus",
               "_add", "_sub", "_minus", "_Minus", "_mul", "_Mul", "_div", "_Div", "_grad_add",
               "broadcast_add", "broadcast_plus", "broadcast_sub", "broadcast_minus",
               "broadcast_mul", "broadcast_div", "broadcast_maximum", "broadcast_minimum",
               "broadcast_hypot", "broadcast_equal", "broadcast_not_equal", "broadcast_greater",
               "broadcast_greater_equal", "broadcast_lesser", "broadcast_lesser_equal",
               "_maximum", "_minimum", "_hypot", "_equal", "_not_equal", "_greater",
               "_greater_equal", "_lesser", "_lesser_equal", "Concat", "concat", "add_n",
               "ElementWiseSum", "stack", "where", "dot", "batch_dot"]
# operators MXNet treats as losses: the loss-scaling hooks of Gluon training wrap them
_LOSS_OUTPUTS = ["SoftmaxOutput", "LinearRegressionOutput", "LogisticRegressionOutput",
                 "MAERegressionOutput"]
_FP16_FLOAT_TYPES = ("float16", "float32", "float64")

_initialized = False


def _registered(names):
    return [n for n in names if _registry.find(n) is not None]


def _registered_for(target_dtype, names):
    """The operators of ``names`` that are registered, once ``target_dtype`` is checked."""
    _check_target(target_dtype)
    return _registered(names)


def _check_target(target_dtype):
    name = getattr(target_dtype, "__name__", target_dtype)
    if str(name) in ("bfloat16",):
        raise MXNetError("amp: target_dtype bfloat16 is not supported by lightmod (it has no "
                         "bfloat16 arithmetic); use float16")
    try:
        dtype = np.dtype(target_dtype)
    except TypeError:
        raise MXNetError("amp: target_dtype must be 'float16', got %r" % (target_dtype,)) from None
    if dtype != np.float16:
        raise MXNetError("amp: target_dtype must be 'float16', got %r" % (target_dtype,))
    return "float16"


def list_lp16_ops(target_dtype):
    """Operators whose inputs are cast to float16."""
    return _registered_for(target_dtype, _LP16_OPS)


def list_fp32_ops(target_dtype):
    """Operators whose float16 inputs are cast back to float32."""
    return _registered_for(target_dtype, _FP32_OPS)


def list_lp16_fp32_ops(target_dtype):
    """Operators that run in whatever float type they receive (all the others)."""
    _check_target(target_dtype)
    special = set(_LP16_OPS) | set(_FP32_OPS) | set(_WIDEST_OPS) | {c[0] for c in _CONDITIONAL_FP32_OPS}
    return sorted(n for n in _registry.all_ops() if n not in special and not n.startswith("amp_"))


def list_conditional_fp32_ops(target_dtype):
    """(operator, parameter, values): float32 when the parameter takes one of the values."""
    _check_target(target_dtype)
    return [c for c in _CONDITIONAL_FP32_OPS if _registry.find(c[0]) is not None]


def list_widest_type_cast(target_dtype):
    """Operators whose inputs are brought to their widest float type (amp_multicast)."""
    return _registered_for(target_dtype, _WIDEST_OPS)


def list_loss_output_functions(target_dtype):
    return _registered_for(target_dtype, _LOSS_OUTPUTS)


def list_lp16_use_fp32_params(target_dtype):
    """Float16 operators whose parameters stay float32: none in lightmod."""
    _check_target(target_dtype)
    return {}


# ---------------------------------------------------------------------------------------------
# convert_symbol / convert_model: a rewrite of the symbol's JSON graph
# ---------------------------------------------------------------------------------------------
def _check_list(value, what):
    if value is not None and not isinstance(value, list):
        raise MXNetError("amp: %s must be a list, got %s" % (what, type(value).__name__))


class _Rewriter:
    """Walks the JSON nodes in order, copying them into a new node list with casts inserted,
    and tracks the dtype of every entry (node, output) of the new graph."""

    def __init__(self, graph, lp16, fp32, conditional, widest, excluded, var_types,
                 only_last=False):
        self.old = graph["nodes"]
        self.nodes = []
        self.types = {}            # (new node id, output) -> dtype name or None
        self.remap = {}            # old node id -> new node id
        self.casts = {}            # (new entry, dtype) -> new node id of its amp_cast
        self.lp16, self.fp32, self.widest = set(lp16), set(fp32), set(widest)
        self.conditional = {op: (param, set(values)) for op, param, values in conditional}
        self.excluded = set(excluded)
        self.var_types = var_types
        # amp.init: only the newest node is rewritten, and types are unknown: cast every input
        self.only_last = only_last

    def _entry_name(self, entry):
        node = self.nodes[entry[0]]
        if node["op"] == "null":
            return node["name"]
        return "%s_output%s" % (node["name"], entry[1] if self._num_outputs(entry[0]) > 1 else "")

    def _num_outputs(self, nid):
        node = self.nodes[nid]
        if node["op"] == "null":
            return 1
        op = _registry.get(node["op"])
        return op.num_visible_outputs(op.parse(node.get("attrs", {})))

    def _add(self, node, out_types):
        nid = len(self.nodes)
        self.nodes.append(node)
        for i, t in enumerate(out_types):
            self.types[(nid, i)] = t
        return nid

    def _cast(self, entry, dtype):
        known = self.types.get(entry)
        if not (self.only_last and known is None) and (known not in _FP16_FLOAT_TYPES or known == dtype):
            return entry
        key = (entry, dtype)
        if key not in self.casts:
            node = {"op": "amp_cast", "name": "%s_amp_cast_%s" % (self._entry_name(entry), dtype),
                    "attrs": {"dtype": dtype}, "inputs": [[entry[0], entry[1], 0]]}
            self.casts[key] = self._add(node, [dtype])
        return (self.casts[key], 0)

    def _cast_to_fp32(self, entry):
        node = self.nodes[entry[0]]
        sure = node["op"] == "null" or (node["op"] == "amp_cast" and node["attrs"]["dtype"] == "float32")
        if sure or self.types.get(entry) not in _FP16_FLOAT_TYPES + (None,):
            return self._cast(entry, "float32")
        key = (entry, "float32")
        if key not in self.casts:
            cast = {"op": "amp_cast", "name": "%s_amp_cast_float32" % self._entry_name(entry),
                    "attrs": {"dtype": "float32"}, "inputs": [[entry[0], entry[1], 0]]}
            self.casts[key] = self._add(cast, ["float32"])
        return (self.casts[key], 0)

    def _category(self, node, last):
        if self.only_last and not last:
            return "any"
        if node["name"] in self.excluded:
            return "fp32"
        op = node["op"]
        if op in self.lp16:
            return "lp16"
        if op in self.fp32:
            return "fp32"
        if op in self.conditional:
            param, values = self.conditional[op]
            if str(node.get("attrs", {}).get(param)) in values:
                return "fp32"
        if op in self.widest:
            return "widest"
        return "any"

    def run(self):
        for old_id, node in enumerate(self.old):
            node = dict(node)
            if node["op"] == "null":
                nid = self._add(node, [self.var_types.get(node["name"])])
                self.remap[old_id] = nid
                continue
            inputs = [(self.remap[i[0]], i[1]) for i in node["inputs"]]
            kind = self._category(node, old_id == len(self.old) - 1)
            if kind == "lp16":
                inputs = [self._cast(e, "float16") for e in inputs]
            elif kind == "fp32":
                # like MXNet, an operator's output is cast even when it may be float32 already
                # (only variables and float32 casts are known float32 for sure)
                inputs = [self._cast_to_fp32(e) for e in inputs]
            elif kind == "widest":
                floats = {self.types.get(e) for e in inputs} & set(_FP16_FLOAT_TYPES)
                if len(floats) > 1:
                    widest = max(floats, key=_FP16_FLOAT_TYPES.index)
                    mc = {"op": "amp_multicast", "name": "%s_amp_multicast" % self._entry_name(inputs[0]),
                          "attrs": {"num_outputs": str(len(inputs))},
                          "inputs": [[e[0], e[1], 0] for e in inputs]}
                    mc_id = self._add(mc, [widest if self.types.get(e) in _FP16_FLOAT_TYPES
                                           else self.types.get(e) for e in inputs])
                    inputs = [(mc_id, i) for i in range(len(inputs))]
            op = _registry.get(node["op"])
            params = op.parse(node.get("attrs", {}))
            in_types = [self.types.get(e) for e in inputs]
            out_types = [None] * op.num_outputs(params)
            if all(t is not None for t in in_types):
                _, out_types = op.infer_type(params, in_types)
            node["inputs"] = [[e[0], e[1], 0] for e in inputs]
            self.remap[old_id] = self._add(node, list(out_types))
        return self.nodes


def _variable_types(sym, data_names):
    """dtype of every input: its __dtype__ attribute, else float32 (an FP32 model)."""
    from ..symbol.graph import dtype_attr_name
    attrs = sym.attr_dict()
    types = {}
    for name in sym.list_inputs():
        text = attrs.get(name, {}).get("__dtype__")
        types[name] = dtype_attr_name(text) if text not in (None, "-1") and name not in data_names \
            else "float32"
    return types


def convert_symbol(sym, target_dtype="float16", target_dtype_ops=None, fp32_ops=None,
                   conditional_fp32_ops=None, excluded_sym_names=None, data_names=None,
                   cast_optional_params=False):
    """A copy of the FP32 symbol ``sym`` with the casts of mixed-precision float16 inserted (see
    the module docstring). The op lists default to ``list_lp16_ops`` etc.; an op may appear in
    one list only. ``excluded_sym_names`` names operators kept in float32. Parameters (inputs not
    in ``data_names``) get a ``__dtype__`` attribute: float16 where ``cast_optional_params`` lets
    a parameter feeding only float16 casts be stored in float16, float32 otherwise."""
    from ..symbol import Symbol
    if not isinstance(sym, Symbol):
        raise MXNetError("amp.convert_symbol: the first argument must be a Symbol, got %s"
                         % type(sym).__name__)
    target = _check_target(target_dtype)
    for value, what in ((target_dtype_ops, "target_dtype_ops"), (fp32_ops, "fp32_ops"),
                        (conditional_fp32_ops, "conditional_fp32_ops"),
                        (excluded_sym_names, "excluded_sym_names"), (data_names, "data_names")):
        _check_list(value, what)
    lp16 = list_lp16_ops(target) if target_dtype_ops is None else target_dtype_ops
    fp32 = list_fp32_ops(target) if fp32_ops is None else fp32_ops
    conditional = list_conditional_fp32_ops(target) if conditional_fp32_ops is None else conditional_fp32_ops
    for entry in conditional:
        if not (isinstance(entry, (tuple, list)) and len(entry) == 3 and isinstance(entry[0], str)
                and isinstance(entry[1], str) and isinstance(entry[2], list)):
            raise MXNetError("amp: conditional_fp32_ops entries must be (op name, parameter name, "
                             "list of values), got %r" % (entry,))
    cond_names = [c[0] for c in conditional]
    for a, b, what in ((lp16, fp32, "target_dtype_ops and fp32_ops"),
                       (lp16, cond_names, "target_dtype_ops and conditional_fp32_ops"),
                       (fp32, cond_names, "fp32_ops and conditional_fp32_ops")):
        common = set(a) & set(b)
        if common:
            raise MXNetError("amp: an operator may be in one list only; %s share %s"
                             % (what, sorted(common)))
    unknown = sorted(n for n in set(lp16) | set(fp32) | set(cond_names) if _registry.find(n) is None)
    if unknown:
        raise MXNetError("amp: unknown operators in the op lists: %s" % unknown)
    attrs = sym.attr_dict()
    if data_names is None:
        data_names = [n for n in sym.list_inputs() if "__dtype__" not in attrs.get(n, {})]
    graph = json.loads(sym.tojson(remove_amp_cast=False))
    rewriter = _Rewriter(graph, lp16, fp32, conditional, list_widest_type_cast(target),
                         excluded_sym_names or [], _variable_types(sym, data_names))
    nodes = rewriter.run()
    params = set(sym.list_inputs()) - set(data_names)
    consumers = {}
    for nid, node in enumerate(nodes):
        for i in node.get("inputs", []):
            consumers.setdefault(i[0], []).append(nid)
    keep = [True] * len(nodes)
    for nid, node in enumerate(nodes):
        if node["op"] != "null" or node["name"] not in params:
            continue
        node_attrs = dict(node.get("attrs", {}))
        users = consumers.get(nid, [])
        only_fp16_casts = users and all(nodes[u]["op"] == "amp_cast" and nodes[u]["attrs"]["dtype"] == target
                                        for u in users)
        if cast_optional_params and only_fp16_casts:
            node_attrs["__dtype__"] = "2"
            for u in users:          # the cast becomes a no-op: drop it, read the variable
                keep[u] = False
                for other in nodes:
                    for i in other.get("inputs", []):
                        if i[0] == u:
                            i[0] = nid
        else:
            node_attrs["__dtype__"] = "0"
        node["attrs"] = node_attrs
    new_ids, kept = {}, []
    for nid, node in enumerate(nodes):
        if keep[nid]:
            new_ids[nid] = len(kept)
            kept.append(node)
    for node in kept:
        for i in node.get("inputs", []):
            i[0] = new_ids[i[0]]
    return _load({"nodes": kept, "arg_nodes": [i for i, n in enumerate(kept) if n["op"] == "null"],
                  "heads": [[new_ids[rewriter.remap[h[0]]], h[1], 0] for h in graph["heads"]],
                  "attrs": graph.get("attrs", {})})


def convert_model(sym, arg_params, aux_params, target_dtype="float16", target_dtype_ops=None,
                  fp32_ops=None, conditional_fp32_ops=None, excluded_sym_names=None,
                  cast_optional_params=False):
    """``convert_symbol`` for a model, and its parameters cast to the types the new symbol
    records: returns ``(symbol, arg_params, aux_params)`` (the dicts are updated in place)."""
    from ..symbol import Symbol
    if not isinstance(sym, Symbol):
        raise MXNetError("amp.convert_model: the first argument must be a Symbol, got %s"
                         % type(sym).__name__)
    if not isinstance(arg_params, dict) or not isinstance(aux_params, dict):
        raise MXNetError("amp.convert_model: arg_params and aux_params must be dicts of name to "
                         "NDArray")
    _check_list(excluded_sym_names, "excluded_sym_names")
    data_names = sorted(set(sym.list_inputs()) - set(arg_params) - set(aux_params))
    new_sym = convert_symbol(sym, target_dtype, target_dtype_ops, fp32_ops, conditional_fp32_ops,
                             excluded_sym_names, data_names, cast_optional_params)
    from ..symbol.graph import dtype_attr_name
    attrs = new_sym.attr_dict()
    for params, names in ((arg_params, new_sym.list_arguments()),
                          (aux_params, new_sym.list_auxiliary_states())):
        for name in names:
            text = attrs.get(name, {}).get("__dtype__")
            if name in params and text not in (None, "-1"):
                params[name] = params[name].astype(dtype_attr_name(text))
    return new_sym, arg_params, aux_params


def convert_bucketing_module(bucketing_mod, target_dtype="float16", target_dtype_ops=None,
                             fp32_ops=None, conditional_fp32_ops=None, excluded_sym_names=None,
                             cast_optional_params=False):
    raise MXNetError("amp.convert_bucketing_module is not supported by lightmod: convert the "
                     "symbols of your sym_gen with amp.convert_symbol instead")


# ---------------------------------------------------------------------------------------------
# init: the op functions insert the casts themselves
# ---------------------------------------------------------------------------------------------
def _load(graph):
    from ..symbol import load_json
    return load_json(json.dumps(graph))


def _wrap(fn, kind, is_symbol, target, cond=None, fn_name=None):
    from .. import ndarray as nd_mod
    from .. import symbol as sym_mod
    from ..ndarray.ndarray import NDArray
    from ..symbol import Symbol
    mod = sym_mod if is_symbol else nd_mod

    def cast(x, dtype):
        if is_symbol and isinstance(x, Symbol):
            return mod.amp_cast(x, dtype=dtype)
        if not is_symbol and isinstance(x, NDArray) and x.dtype != np.dtype(dtype) and \
                np.dtype(x.dtype).name in _FP16_FLOAT_TYPES:
            return mod.amp_cast(x, dtype=dtype)
        return x

    def wrapped_symbol(*args, **kwargs):
        out = fn(*args, **kwargs)
        if kind == "conditional" and str(kwargs.get(cond[0])) not in cond[1]:
            return out
        category = {"lp16": ([fn_name], [], []), "fp32": ([], [fn_name], []),
                    "conditional": ([], [fn_name], []), "widest": ([], [], [fn_name])}[kind]
        graph = json.loads(out.tojson(remove_amp_cast=False))
        if len(graph["heads"]) != 1 or graph["nodes"][-1]["op"] == "null":
            return out
        category = tuple([graph["nodes"][-1]["op"]] if c else [] for c in category)
        rewriter = _Rewriter(graph, category[0], category[1], [], category[2], [], {},
                             only_last=True)
        nodes = rewriter.run()
        head = graph["heads"][0]
        return _load({"nodes": nodes, "arg_nodes": [i for i, n in enumerate(nodes) if n["op"] == "null"],
                      "heads": [[rewriter.remap[head[0]], head[1], 0]], "attrs": graph.get("attrs", {})})

    def wrapped(*args, **kwargs):
        if kind == "conditional" and str(kwargs.get(cond[0])) not in cond[1]:
            return fn(*args, **kwargs)
        arrays = [k for k, v in kwargs.items() if isinstance(v, (Symbol, NDArray))]
        if kind == "widest":
            pos = [a for a in args if isinstance(a, (Symbol, NDArray))]
            items = pos + [kwargs[k] for k in arrays]
            if is_symbol and len(items) > 1:
                multi = mod.amp_multicast(*items, num_outputs=len(items))
                items = [multi[i] for i in range(len(items))]
            elif not is_symbol and len({np.dtype(x.dtype).name for x in items}) > 1:
                items = list(mod.amp_multicast(*items, num_outputs=len(items)))
            it = iter(items)
            args = [next(it) if isinstance(a, (Symbol, NDArray)) else a for a in args]
            kwargs.update({k: next(it) for k in arrays})
            return fn(*args, **kwargs)
        dtype = target if kind == "lp16" else "float32"
        args = [cast(a, dtype) for a in args]
        kwargs.update({k: cast(kwargs[k], dtype) for k in arrays})
        return fn(*args, **kwargs)

    result = wrapped_symbol if is_symbol else wrapped
    result.__name__ = getattr(fn, "__name__", "amp_wrapped")
    result.__doc__ = getattr(fn, "__doc__", None)
    return result


def init(target_dtype="float16", target_precision_ops=None, conditional_fp32_ops=None,
         fp32_ops=None):
    """Make ``mx.sym.X`` and ``mx.nd.X`` insert mixed-precision casts from now on: inputs of the
    float16 operators are cast to float16, float16 inputs of the float32 operators back to
    float32, mixed inputs of combining operators to their widest type. Call it before building
    the model; a second call does nothing."""
    global _initialized
    target = _check_target(target_dtype)
    if _initialized:
        return
    for value, what in ((target_precision_ops, "target_precision_ops"), (fp32_ops, "fp32_ops"),
                        (conditional_fp32_ops, "conditional_fp32_ops")):
        _check_list(value, what)
    lp16 = list_lp16_ops(target) if target_precision_ops is None else target_precision_ops
    fp32 = list_fp32_ops(target) if fp32_ops is None else fp32_ops
    conditional = list_conditional_fp32_ops(target) if conditional_fp32_ops is None else conditional_fp32_ops
    from .. import ndarray as nd_mod
    from .. import symbol as sym_mod
    plan = [(n, "lp16", None) for n in lp16] + [(n, "fp32", None) for n in fp32] + \
        [(n, "widest", None) for n in list_widest_type_cast(target)] + \
        [(op, "conditional", (param, set(values))) for op, param, values in conditional]
    for module, is_symbol in ((sym_mod, True), (nd_mod, False)):
        for name, kind, cond in plan:
            fn = getattr(module, name, None)
            if fn is None:
                continue
            setattr(module, name, _wrap(fn, kind, is_symbol, target, cond, name))
    _initialized = True
    _LOG.info("Using AMP")


def _gluon_only(name):
    raise MXNetError("amp.%s is not supported by lightmod: dynamic loss scaling serves Gluon "
                     "trainers, and lightmod implements MXNet's Module API only" % name)


def init_trainer(optimizer_or_trainer):
    _gluon_only("init_trainer")


def scale_loss(loss, optimizer_or_trainer):
    _gluon_only("scale_loss")


def unscale(optimizer_or_trainer):
    _gluon_only("unscale")


def convert_hybrid_block(block, target_dtype="float16", target_dtype_ops=None, fp32_ops=None,
                         conditional_fp32_ops=None, excluded_sym_names=None, ctx=None,
                         cast_optional_params=False):
    raise MXNetError("amp.convert_hybrid_block is not supported by lightmod: it converts Gluon "
                     "blocks, and lightmod implements MXNet's Module API only")
