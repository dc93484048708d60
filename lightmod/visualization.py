"""Network drawing and summaries (``mx.viz``): ``print_summary`` and ``plot_network``.

Both read the graph through the symbol's MXNet JSON, so they work on any symbol, including
one loaded from a ``-symbol.json`` file. ``plot_network`` returns a ``graphviz.Digraph`` whose
DOT source (``.source``) is available without the ``dot`` program; rendering needs it.
"""
import collections
import json
import warnings

import numpy as np

from .base import MXNetError

__all__ = ["print_summary", "plot_network", "summary_rows"]


def _graph(symbol):
    conf = json.loads(symbol.tojson())
    return conf["nodes"], conf["heads"]


def _is_label(name):
    return name.endswith("label")


def _output_shapes(symbol, shape):
    """{entry name: shape} for every internal output, or {} without input shapes."""
    if not shape:
        return {}
    internals = symbol.get_internals()
    _, out_shapes, _ = internals.infer_shape_partial(**shape)
    if out_shapes is None:
        return {}
    return dict(zip(internals.list_outputs(), out_shapes))


def _entry_name(nodes, entry):
    node = nodes[entry[0]]
    if node["op"] == "null":
        return node["name"]
    return "%s_output" % node["name"]


def summary_rows(symbol, shape=None):
    """One row per operator node: (name, op, output shape, #params, previous layers).

    Parameters are the variable inputs of the node other than the given input names and
    labels; an auxiliary state (BatchNorm moving statistics) counts too, as MXNet's summary does.
    """
    nodes, _ = _graph(symbol)
    shape = dict(shape or {})
    shapes = _output_shapes(symbol, shape)
    var_shapes = {}
    if shape:
        arg_shapes, _, aux_shapes = symbol.infer_shape_partial(**shape)
        if arg_shapes is not None:
            var_shapes.update(zip(symbol.list_arguments(), arg_shapes))
            var_shapes.update(zip(symbol.list_auxiliary_states(), aux_shapes))
    rows = []
    for node in nodes:
        if node["op"] == "null":
            continue
        params = 0
        previous = []
        for entry in node["inputs"]:
            src = nodes[entry[0]]
            if src["op"] == "null":
                name = src["name"]
                if name in shape or _is_label(name):
                    previous.append(name)
                elif var_shapes.get(name):
                    params += int(np.prod(var_shapes[name]))
            else:
                previous.append(src["name"])
        out = shapes.get("%s_output" % node["name"])
        if out is None:
            out = next((v for k, v in shapes.items() if k.startswith(node["name"] + "_output")),
                       None)
        rows.append((node["name"], node["op"], tuple(out) if out else (), params, previous))
    return rows


def print_summary(symbol, shape=None, line_length=120, positions=(.44, .64, .74, 1.)):
    """Print the layers of ``symbol``: name (type), output shape, parameter count, inputs.

    ``shape`` maps input names to shapes (``{'data': (1, 3, 28, 28)}``); without it the shape
    and parameter columns stay empty.
    """
    if shape is not None and not isinstance(shape, dict):
        raise MXNetError("print_summary: shape must be a dict of input name -> shape, got %r"
                         % (shape,))
    rows = summary_rows(symbol, shape)
    cols = [int(line_length * p) for p in positions]
    header = ("Layer (type)", "Output Shape", "Param #", "Previous Layer")

    def line(fields):
        text = ""
        for i, field in enumerate(fields):
            text += str(field)
            text = text[:cols[i]].ljust(cols[i])
        print(text.rstrip())

    print("_" * line_length)
    line(header)
    print("=" * line_length)
    total = 0
    for i, (name, op, out, params, previous) in enumerate(rows):
        total += params
        line(("%s(%s)" % (name, op), "x".join(str(d) for d in out), params,
              previous[0] if previous else ""))
        for prev in previous[1:]:
            line(("", "", "", prev))
        print(("=" if i == len(rows) - 1 else "_") * line_length)
    print("Total params: %d" % total)
    print("_" * line_length)
    return total


_COLORS = {"FullyConnected": "#fb8072", "Convolution": "#fb8072", "Deconvolution": "#fb8072",
           "Activation": "#ffffb3", "LeakyReLU": "#ffffb3", "BatchNorm": "#bebada",
           "Pooling": "#80b1d3", "Concat": "#fdb462", "Flatten": "#fdb462", "Reshape": "#fdb462",
           "SoftmaxOutput": "#b3de69", "Softmax": "#b3de69"}


def plot_network(symbol, title="plot", save_format="pdf", shape=None, dtype=None, node_attrs=None,
                 hide_weights=True):
    """A graphviz.Digraph of the network, drawn like MXNet's ``mx.viz.plot_network``.

    Needs the ``graphviz`` Python package (``pip install 'lightmod[viz]'``); ``.source`` gives the
    DOT text without the ``dot`` program, ``.render()`` needs it installed.
    """
    try:
        from graphviz import Digraph
    except ImportError:
        raise MXNetError("plot_network needs the graphviz package: "
                         "pip install 'lightmod[viz]' (rendering also needs the 'dot' program)") \
            from None
    nodes, _ = _graph(symbol)
    counts = collections.Counter(node["name"] for node in nodes)
    repeated = sorted(name for name, n in counts.items() if n > 1)
    if repeated:
        # nodes are drawn by name, so two nodes of one name merge into one box (and may draw a
        # cycle); MXNet warns with this text
        warnings.warn("There are multiple variables with the same name in your graph, this may "
                      "result in cyclic graph. Repeated names: " + ",".join(repeated),
                      RuntimeWarning, stacklevel=2)
    shapes = _output_shapes(symbol, shape)
    attrs = {"shape": "box", "fixedsize": "true", "width": "1.3", "height": "0.8034",
             "style": "filled"}
    attrs.update(node_attrs or {})
    dot = Digraph(name=title, format=save_format)
    hidden = set()
    for i, node in enumerate(nodes):
        name, op = node["name"], node["op"]
        params = node.get("attrs", node.get("attr", node.get("param", {}))) or {}
        if op == "null":
            if hide_weights and i > 0 and (name.endswith(("_weight", "_bias", "_gamma", "_beta",
                                                          "_moving_mean", "_moving_var"))
                                           or _is_label(name)):
                hidden.add(i)
                continue
            label, color = name, "#8dd3c7"
        else:
            label = op
            if op in ("FullyConnected",):
                label = "FullyConnected\n%s" % params.get("num_hidden", "")
            elif op in ("Convolution", "Deconvolution"):
                label = "%s\n%s/%s, %s" % (op, params.get("kernel", ""), params.get("stride", "1"),
                                           params.get("num_filter", ""))
            elif op == "Activation" or op == "LeakyReLU":
                label = "%s\n%s" % (op, params.get("act_type", ""))
            elif op == "Pooling":
                label = "Pooling\n%s, %s/%s" % (params.get("pool_type", "max"),
                                                params.get("kernel", ""), params.get("stride", "1"))
            color = _COLORS.get(op, "#fccde5")
        dot.node(name=str(i), label=label, fillcolor=color, **attrs)
    for i, node in enumerate(nodes):
        if node["op"] == "null":
            continue
        for entry in node["inputs"]:
            src = entry[0]
            if src in hidden:
                continue
            label = ""
            if shapes:
                out = shapes.get(_entry_name(nodes, entry))
                if out:
                    label = "x".join(str(d) for d in out[1:]) or "x".join(str(d) for d in out)
            dot.edge(tail_name=str(i), head_name=str(src), label=label, dir="back",
                     arrowtail="open")
    return dot
