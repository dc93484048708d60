"""lightmod symbol + parameters -> ONNX model (``mx.onnx.export_model``)."""
import dataclasses
import json
import logging

import numpy as np

from ..base import MXNetError
from ..operator import registry
from ._deps import require_onnx
from ._table import lookup, supported_operators

__all__ = ["export_model", "build_model", "OPSETS"]

OPSETS = (12, 13)


@dataclasses.dataclass(eq=False)
class NodeInfo:
    """One lightmod node as a translation sees it.

    ``inputs`` are ONNX tensor names ("" for an input the translation does not read), and
    ``in_shapes`` / ``in_dtypes`` / ``out_shapes`` / ``out_dtypes`` come from lightmod's shape and
    type inference on the example shapes given to the exporter (with ``dynamic=True`` only the
    ranks and the parameter shapes may be relied on).
    """

    name: str
    op: object
    p: object
    inputs: list
    in_shapes: list
    in_dtypes: list
    out_shapes: list
    out_dtypes: list

    def rank(self, i=0):
        shape = self.in_shapes[i]
        if shape is None:
            raise self.error("the shape of input %d is unknown", i)
        return len(shape)

    def error(self, message, *args):
        return MXNetError("ONNX export of operator %s (node '%s'): %s"
                          % (self.op.name, self.name, message % args if args else message))


class OnnxGraph:
    """The ONNX graph under construction: nodes, initializers and unique names."""

    def __init__(self, onnx, opset, dynamic=False):
        self.onnx = onnx
        self.opset = opset
        self.dynamic = dynamic
        self.zero_tensors = set()   # constants known to be all zeros (omitted RNN begin states)
        self.sized_by_example = {}  # constant -> node, where a dim came from the example shapes
        self.nodes = []
        self.initializers = {}      # tensor name -> numpy array
        self._tensor_names = set()
        self._node_names = set()

    @staticmethod
    def _unique(hint, taken):
        name, i = hint, 1
        while name in taken:
            name = "%s_%d" % (hint, i)
            i += 1
        taken.add(name)
        return name

    def reserve(self, name):
        """Claim a tensor name that must stay as it is (graph inputs, parameters)."""
        self._tensor_names.add(name)
        return name

    def add(self, op_type, inputs, name, num_outputs=1, **attrs):
        """Append a node; returns its output tensor name (a list when num_outputs > 1)."""
        node_name = self._unique(name, self._node_names)
        outs = [self._unique(name if num_outputs == 1 else "%s_%d" % (name, i), self._tensor_names)
                for i in range(num_outputs)]
        self.nodes.append(self.onnx.helper.make_node(op_type, list(inputs), outs, name=node_name,
                                                     **attrs))
        return outs[0] if num_outputs == 1 else outs

    def const(self, value, name, dtype=None):
        """An initializer holding ``value``; returns its tensor name."""
        array = np.asarray(value, dtype=dtype)
        tensor = self._unique(name, self._tensor_names)
        self.initializers[tensor] = array
        return tensor

    def ints(self, values, name):
        return self.const(np.asarray(values, dtype=np.int64).reshape(-1), name)

    def param_value(self, tensor):
        """The numpy value of an initializer, or None for a computed tensor or graph input."""
        return self.initializers.get(tensor)

    # --- the operators whose form differs between opset 12 and 13 -----------------------------
    def unsqueeze(self, x, axes, name):
        if self.opset >= 13:
            return self.add("Unsqueeze", [x, self.ints(axes, name + "_axes")], name)
        return self.add("Unsqueeze", [x], name, axes=list(axes))

    def squeeze(self, x, axes, name):
        if axes is None:
            return self.add("Squeeze", [x], name)
        if self.opset >= 13:
            return self.add("Squeeze", [x, self.ints(axes, name + "_axes")], name)
        return self.add("Squeeze", [x], name, axes=list(axes))

    def reduce(self, op_type, x, axes, keepdims, name):
        """ReduceSum/Mean/Max/Min/Prod over ``axes`` (None: every axis)."""
        if axes is None:
            return self.add(op_type, [x], name, keepdims=int(keepdims))
        if op_type == "ReduceSum" and self.opset >= 13:
            return self.add(op_type, [x, self.ints(axes, name + "_axes")], name,
                            keepdims=int(keepdims))
        return self.add(op_type, [x], name, axes=list(axes), keepdims=int(keepdims))

    def softmax(self, x, axis, rank, name, log=False):
        """Softmax over one axis; opset 12's Softmax flattens from ``axis`` on, so it is only
        used there on the last axis, with transposes around it otherwise."""
        op_type = "LogSoftmax" if log else "Softmax"
        axis = axis % rank
        if axis == rank - 1:
            return self.add(op_type, [x], name, axis=-1)
        if self.opset >= 13:
            return self.add(op_type, [x], name, axis=axis)
        perm = list(range(rank))
        perm[axis], perm[-1] = perm[-1], perm[axis]
        moved = self.add("Transpose", [x], name + "_to_last", perm=perm)
        y = self.add(op_type, [moved], name + "_last", axis=-1)
        return self.add("Transpose", [y], name, perm=perm)

    def dtype_of(self, np_dtype):
        return self.onnx.helper.np_dtype_to_tensor_dtype(np.dtype(np_dtype))


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------
def _load_inputs(sym, params):
    """(Symbol, {name: numpy}) from objects or from '-symbol.json' / '.params' paths."""
    from .. import ndarray as nd
    from .. import symbol as symbol_mod
    if isinstance(sym, str):
        sym = symbol_mod.load(sym)
    if not isinstance(sym, symbol_mod.Symbol):
        raise MXNetError("export_model: sym must be a Symbol or the path of a -symbol.json file, "
                         "got %s" % type(sym).__name__)
    if isinstance(params, str):
        params = nd.load(params)
        if not isinstance(params, dict):
            raise MXNetError("export_model: the params file holds a list, expected named arrays")
    elif isinstance(params, (list, tuple)):
        if len(params) != 2 or not all(isinstance(d, dict) for d in params):
            raise MXNetError("export_model: params given as a list must be [arg_params, "
                             "aux_params], got %d items" % len(params))
        merged = dict(params[0])
        merged.update(params[1])
        params = merged
    elif not isinstance(params, dict):
        raise MXNetError("export_model: params must be a dict, [arg_params, aux_params] or the "
                         "path of a .params file, got %s" % type(params).__name__)
    values = {}
    for key, value in params.items():
        name = key.split(":", 1)[1] if key.startswith(("arg:", "aux:")) else key
        values[name] = value.asnumpy() if hasattr(value, "asnumpy") else np.asarray(value)
    return sym, values


def _live_nodes(nodes, heads):
    """Ids of the nodes the heads need, following only the inputs each translation reads."""
    live = set()
    stack = [h[0] for h in heads]
    while stack:
        nid = stack.pop()
        if nid in live:
            continue
        live.add(nid)
        node = nodes[nid]
        if node["op"] == "null":
            continue
        entry = lookup(node["op"])
        for pos, item in enumerate(node["inputs"]):
            if entry is None or entry.reads is None or pos in entry.reads:
                stack.append(item[0])
    return live


def _entry_name(node, index):
    """The name ``get_internals().list_outputs()`` gives output ``index`` of a JSON node."""
    if node["op"] == "null":
        return node["name"]
    op = registry.get(node["op"])
    return "%s_%s" % (node["name"], op.list_outputs(op.parse(node.get("attrs", {})))[index])


def _normalise_types(in_types, count):
    if isinstance(in_types, (list, tuple)):
        types = list(in_types)
    else:
        types = [in_types] * count
    if len(types) != count:
        raise MXNetError("export_model: %d in_types given for %d inputs" % (len(types), count))
    return [np.dtype(t) for t in types]


def build_model(sym, params, in_shapes, in_types=np.float32, dynamic=False,
                dynamic_input_shapes=None, opset_version=13, verbose=False):
    """The ONNX ModelProto of ``sym`` with ``params`` (see :func:`export_model`)."""
    onnx = require_onnx()
    if opset_version not in OPSETS:
        raise MXNetError("export_model: opset_version must be one of %s, got %r"
                         % (OPSETS, opset_version))
    sym, values = _load_inputs(sym, params)
    if in_shapes is None:
        raise MXNetError("export_model: in_shapes is required (one shape per data input)")
    graph_json = json.loads(sym.tojson())
    nodes, heads = graph_json["nodes"], graph_json["heads"]
    live = _live_nodes(nodes, heads)
    live_vars = {nodes[i]["name"] for i in live if nodes[i]["op"] == "null"}
    all_inputs = [n for n in sym.list_inputs() if n not in values]
    data_inputs = [n for n in all_inputs if n in live_vars]
    try:
        in_shapes = [tuple(int(d) for d in s) for s in in_shapes]
    except (TypeError, ValueError):
        raise MXNetError("export_model: in_shapes must be a list of tuples of ints (example "
                         "sizes, also with dynamic=True), got %r" % (in_shapes,)) from None
    if len(in_shapes) == len(all_inputs) and len(all_inputs) != len(data_inputs):
        # shapes were given for the labels too: keep those of the exported inputs
        in_shapes = [s for n, s in zip(all_inputs, in_shapes) if n in live_vars]
    if len(in_shapes) != len(data_inputs):
        raise MXNetError("export_model: in_shapes has %d shapes, but the model has %d data "
                         "inputs %s" % (len(in_shapes), len(data_inputs), data_inputs))
    in_types = _normalise_types(in_types, len(data_inputs))
    if dynamic_input_shapes is not None:
        if not dynamic:
            raise MXNetError("export_model: dynamic_input_shapes needs dynamic=True")
        if len(dynamic_input_shapes) != len(data_inputs):
            raise MXNetError("export_model: dynamic_input_shapes has %d shapes for %d inputs"
                             % (len(dynamic_input_shapes), len(data_inputs)))

    # shapes and dtypes of every node output, from lightmod's own inference
    internals = sym.get_internals()
    known_shapes = {n: v.shape for n, v in values.items()}
    known_shapes.update(zip(data_inputs, in_shapes))
    known_types = {n: v.dtype for n, v in values.items()}
    known_types.update(zip(data_inputs, in_types))
    names = internals.list_outputs()
    wanted = set(sym.list_inputs())
    _, out_shapes, _ = internals.infer_shape_partial(
        **{k: v for k, v in known_shapes.items() if k in wanted})
    _, out_types, _ = internals.infer_type_partial(
        **{k: v for k, v in known_types.items() if k in wanted})
    shape_of = dict(zip(names, out_shapes))
    type_of = dict(zip(names, out_types))

    g = OnnxGraph(onnx, opset_version, dynamic)
    tensors = {}            # (node id, output index) -> ONNX tensor name
    graph_inputs = []
    for nid, node in enumerate(nodes):
        if nid not in live:
            continue
        name = node["name"]
        if node["op"] == "null":
            if name in values:
                g.reserve(name)
                g.initializers[name] = values[name]
            elif name in data_inputs:
                graph_inputs.append(g.reserve(name))
            tensors[(nid, 0)] = name
            continue
        entry = lookup(node["op"])
        if entry is None:
            raise MXNetError("ONNX export: operator '%s' (node '%s') has no ONNX translation; "
                             "the exporter covers: %s"
                             % (node["op"], name, ", ".join(supported_operators())))
        op = registry.get(node["op"])
        p = op.parse(node.get("attrs", {}))
        out_names = ["%s_%s" % (name, o) for o in op.list_outputs(p)]
        ins, in_s, in_t = [], [], []
        for pos, (src, idx, _) in enumerate(node["inputs"]):
            reads = entry.reads is None or pos in entry.reads
            ins.append(tensors[(src, idx)] if reads else "")
            key = _entry_name(nodes[src], idx)
            in_s.append(shape_of.get(key, known_shapes.get(key)))
            in_t.append(type_of.get(key, known_types.get(key)))
        info = NodeInfo(name, op, p, ins, in_s, in_t,
                        [shape_of.get(n) for n in out_names], [type_of.get(n) for n in out_names])
        outs = entry.fn(g, info)
        if verbose:
            logging.info("ONNX export: %s %s -> %s", op.name, name, outs)
        for i, tensor in enumerate(outs):
            tensors[(nid, i)] = tensor

    helper = onnx.helper
    value_infos = []
    for name, shape, dtype, i in zip(data_inputs, in_shapes, in_types, range(len(data_inputs))):
        dims = list(shape)
        if dynamic:
            dims = ([None] * len(shape) if dynamic_input_shapes is None
                    else list(dynamic_input_shapes[i]))
        value_infos.append(helper.make_tensor_value_info(name, g.dtype_of(dtype), dims))
    outputs = []
    for nid, idx, _ in heads:
        tensor = tensors[(nid, idx)]
        key = _entry_name(nodes[nid], idx)
        shape, dtype = shape_of.get(key), type_of.get(key) or np.float32
        if shape is None:
            raise MXNetError("export_model: the shape of output '%s' could not be inferred" % key)
        dims = [None] * len(shape) if dynamic else list(shape)
        if tensor in graph_inputs or tensor in g.initializers or \
                any(tensor == o.name for o in outputs):
            tensor = g.add("Identity", [tensor], key)
        outputs.append(helper.make_tensor_value_info(tensor, g.dtype_of(dtype), dims))
    # parameters a translation folded into new constants (the packed RNN vector) are left out
    used = {name for n in g.nodes for name in n.input} | {o.name for o in outputs}
    for tensor, node_name in g.sized_by_example.items():
        if tensor in used:
            raise MXNetError("ONNX export: node '%s' creates an array whose shape has dims "
                             "inferred from the example input shapes; with dynamic=True it can "
                             "only be exported as the begin state of a fused RNN, which ONNX "
                             "starts from zeros" % node_name)
    initializers = [onnx.numpy_helper.from_array(np.ascontiguousarray(v), k)
                    for k, v in g.initializers.items() if k in used]
    graph = helper.make_graph(g.nodes, "lightmod_model", value_infos, outputs, initializers)
    model = helper.make_model(graph, producer_name="lightmod",
                              opset_imports=[helper.make_opsetid("", opset_version)])
    # the oldest IR version that carries this opset, so that older runtimes load the file
    model.ir_version = 7
    return model


def export_model(sym, params, in_shapes=None, in_types=np.float32, onnx_file_path="model.onnx",
                 verbose=False, dynamic=False, dynamic_input_shapes=None,
                 run_shape_inference=False, input_type=None, input_shape=None, opset_version=13):
    """Export a symbol and its parameters to an ONNX file; returns ``onnx_file_path``.

    Parameters
    ----------
    sym : Symbol or str
        The network, or the path of its ``-symbol.json`` file.
    params : dict, [arg_params, aux_params] or str
        Parameter arrays by name (``arg:``/``aux:`` prefixes are accepted), or a ``.params`` path.
    in_shapes : list of tuple
        One shape per data input, in the order of ``sym.list_inputs()`` without the parameters.
        The labels of loss heads (SoftmaxOutput, LinearRegressionOutput, ...) are not exported:
        those heads become their inference form (softmax, identity, sigmoid).
    in_types : dtype or list of dtype
        The data inputs' element types.
    onnx_file_path : str
        Where the model is written.
    verbose : bool
        Log every translated node.
    dynamic : bool
        Leave the input dimensions open in the ONNX file (any batch size).
    dynamic_input_shapes : list of tuple
        With ``dynamic``, the declared input shapes (None entries stay open); default all open.
    run_shape_inference : bool
        Annotate the file with ONNX's shape inference (kept unannotated if that fails).
    input_type, input_shape :
        Older names of ``in_types`` and ``in_shapes``.
    opset_version : int
        ONNX opset of the file, 12 or 13.
    """
    onnx = require_onnx()
    if input_type is not None:
        in_types = input_type
    if input_shape is not None:
        in_shapes = input_shape
    model = build_model(sym, params, in_shapes, in_types, dynamic, dynamic_input_shapes,
                        opset_version, verbose)
    if run_shape_inference:
        try:
            model = onnx.shape_inference.infer_shapes(model)
        except Exception as err:  # noqa: BLE001  (the annotation is optional)
            logging.info("ONNX shape inference failed (%s); the model is saved without it", err)
    with open(onnx_file_path, "wb") as handle:
        handle.write(model.SerializeToString())
    return onnx_file_path
