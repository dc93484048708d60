"""Symbol JSON in MXNet 1.9.1's format: the writer (byte-compatible with dmlc's JSONWriter as
nnvm's SaveJSON drives it) and the reader with the legacy upgrades MXNet applies on load.

Writer rules (what makes the bytes equal): 2-space indentation per open scope; items are
separated by ``", "`` followed, in multi-line scopes, by a newline and the indentation; a
node object is always multi-line; an attribute map is multi-line only with more than one key
(keys sorted); an array of numbers or of ``[node, index, version]`` entries is multi-line only
with more than 10 items; the list of nodes is always multi-line.
"""
import json
import logging

from ..base import MXNetError
from ..operator import registry
from .graph import Node, topo_order

__all__ = ["MXNET_VERSION", "dumps", "loads", "HIDDEN_KEYS"]

MXNET_VERSION = 10901
HIDDEN_KEYS = ("ctx_group", "lr_mult", "wd_mult", "force_mirroring", "mirror_stage",
               "profiler_scope")
_log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
# writer
# ---------------------------------------------------------------------------------------------
def _escape(text):
    return '"%s"' % (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
                     .replace("\r", "\\r").replace("\t", "\\t"))


class _Writer:
    """The subset of dmlc::JSONWriter the graph format needs."""

    def __init__(self):
        self.parts = []
        self.scopes = []            # [multi_line, item_count] per open array/object

    def _separator(self):
        if not self.scopes or self.scopes[-1][0]:
            self.parts.append("\n" + "  " * len(self.scopes))

    def _item(self):
        scope = self.scopes[-1]
        if scope[1]:
            self.parts.append(", ")
        scope[1] += 1
        self._separator()

    def begin(self, bracket, multi_line):
        self.parts.append(bracket)
        self.scopes.append([multi_line, 0])

    def end(self, bracket):
        multi_line, count = self.scopes.pop()
        if multi_line and count:
            self._separator()
        self.parts.append(bracket)

    def key(self, name):
        self._item()
        self.parts.append(_escape(name) + ": ")

    def array_item(self):
        self._item()

    def raw(self, text):
        self.parts.append(text)

    def int_array(self, values):
        self.begin("[", len(values) > 10)
        for v in values:
            self.array_item()
            self.raw(str(int(v)))
        self.end("]")

    def entry_array(self, entries):
        self.begin("[", len(entries) > 10)
        for e in entries:
            self.array_item()
            self.raw("[%d, %d, %d]" % tuple(e))
        self.end("]")

    def str_map(self, mapping):
        self.begin("{", len(mapping) > 1)
        for k in sorted(mapping):
            self.key(k)
            self.raw(_escape(mapping[k]))
        self.end("}")

    def text(self):
        return "".join(self.parts)


def dumps(outputs):
    """The JSON text MXNet 1.9.1 writes for a symbol with these output entries."""
    nodes = topo_order(outputs)
    index = {id(n): i for i, n in enumerate(nodes)}
    w = _Writer()
    w.begin("{", True)
    w.key("nodes")
    w.begin("[", True)
    row_ptr = [0]
    for n in nodes:
        w.array_item()
        w.begin("{", True)
        w.key("op")
        w.raw(_escape("null" if n.op is None else n.op.name))
        w.key("name")
        w.raw(_escape(n.name))
        if n.attrs:
            w.key("attrs")
            w.str_map(n.attrs)
        w.key("inputs")
        w.entry_array([(index[id(src)], i, v) for src, i, v in n.inputs])
        if n.control_deps:
            w.key("control_deps")
            w.int_array([index[id(d)] for d in n.control_deps])
        w.end("}")
        row_ptr.append(row_ptr[-1] + n.num_outputs())
    w.end("]")
    w.key("arg_nodes")
    w.int_array([i for i, n in enumerate(nodes) if n.op is None])
    w.key("node_row_ptr")
    w.int_array(row_ptr)
    w.key("heads")
    w.entry_array([(index[id(n)], i, v) for n, i, v in outputs])
    w.key("attrs")
    w.begin("{", False)
    w.key("mxnet_version")
    w.raw('["int", %d]' % MXNET_VERSION)
    w.end("}")
    w.end("}")
    return w.text()


# ---------------------------------------------------------------------------------------------
# reader
# ---------------------------------------------------------------------------------------------
def _entry(item, nodes, where):
    if not isinstance(item, (list, tuple)) or len(item) not in (2, 3):
        raise MXNetError("invalid symbol JSON: bad entry %r in %s" % (item, where))
    nid = int(item[0])
    if not 0 <= nid < len(nodes) or nodes[nid] is None:
        raise MXNetError("invalid symbol JSON: entry %r in %s refers to a node that is not "
                         "defined before it" % (item, where))
    version = int(item[2]) if len(item) == 3 else 0
    return (nodes[nid], int(item[1]), version)


def loads(text):
    """Parse symbol JSON (any MXNet version) into a list of output entries."""
    try:
        doc = json.loads(text)
    except ValueError as err:
        raise MXNetError("invalid symbol JSON: %s" % err) from None
    if not isinstance(doc, dict) or "nodes" not in doc or "heads" not in doc:
        raise MXNetError("invalid symbol JSON: 'nodes' and 'heads' are required")
    version = 800
    attrs = doc.get("attrs") or {}
    if "mxnet_version" in attrs:
        value = attrs["mxnet_version"]
        version = int(value[1] if isinstance(value, list) else value)
    nodes = [None] * len(doc["nodes"])
    for i, item in enumerate(doc["nodes"]):
        op_name = item.get("op", "null")
        name = item.get("name", "")
        node_attrs = {}
        for key in ("param", "attr", "attrs"):
            node_attrs.update({str(k): str(v) for k, v in (item.get(key) or {}).items()})
        op = None if op_name == "null" else registry.get(op_name)
        node = Node(op, name, node_attrs)
        # inputs resolve before the node itself is listed: an entry naming this node or a
        # later one (a cycle, which no graph MXNet writes has) is refused
        node.inputs = [_entry(e, nodes, "node '%s'" % name) for e in item.get("inputs", [])]
        node.control_deps = [_entry((d, 0), nodes, "control_deps of node '%s'" % name)[0]
                             for d in item.get("control_deps", [])]
        nodes[i] = node
        for src, _, v in node.inputs:
            if src.op is None and v > src.version:
                src.version = v
    outputs = [_entry(e, nodes, "heads") for e in doc["heads"]]
    if version != MXNET_VERSION:
        if version > MXNET_VERSION:
            _log.info("Warning: loading symbol saved by MXNet version %d with lower version of "
                      "MXNet v%d. May cause undefined behavior.", version, MXNET_VERSION)
        else:
            _log.info("Loading symbol saved by previous version v%d.%d.%d. Attempting to "
                      "upgrade...", version // 10000, (version // 100) % 100, version % 100)
        _upgrade(outputs, version)
    for node in topo_order(outputs):
        if node.op is not None:
            node.params()          # MXNet parses every operator's attributes on load
    return outputs


def _upgrade(outputs, version):
    """MXNet's legacy_json_util upgrades, applied when the file predates each change."""
    order = topo_order(outputs)
    if version < MXNET_VERSION:
        for node in order:
            _fix_hidden_keys(node)
    if version < 900:
        # aux variables were not stored before 0.9: add the missing trailing inputs
        for node in order:
            if node.op is None:
                continue
            names = node.input_names()
            for arg in names[len(node.inputs):]:
                var = Node(None, "%s_%s" % (node.name, arg) if node.name else arg,
                           dict(node.attrs))
                node.inputs.append((var, 0, 0))
    if version < 904:
        for node in topo_order(outputs):
            if node.op is not None and node.op.input_init:
                names = node.input_names()
                for slot, (src, _, _) in enumerate(node.inputs):
                    init = node.op.input_init.get(names[slot]) if slot < len(names) else None
                    if init is not None and src.op is None and "__init__" not in src.attrs:
                        src.attrs["__init__"] = init
    if version < 905:
        for node in order:
            if node.op is not None and node.op.name in ("argmax", "argmin") \
                    and node.attrs.get("axis") == "-1":
                del node.attrs["axis"]
                node.reset_params()
    _log.info("Symbol successfully upgraded!")


def _fix_hidden_keys(node):
    """Hidden keys written plainly ('ctx_group') become '__ctx_group__'; an op attribute
    '<input>_lr_mult' moves to that input variable as '__lr_mult__'."""
    def is_hidden(key):
        return any(key.endswith(h) or key.startswith(h) for h in HIDDEN_KEYS)

    names = None
    for key in list(node.attrs):
        for hidden in HIDDEN_KEYS:
            pos = key.rfind(hidden)
            if pos == 0 and len(key) == len(hidden):
                node.attrs["__%s__" % hidden] = node.attrs.pop(key)
                break
            if pos > 1 and pos == len(key) - len(hidden):
                if node.op is None:
                    break
                arg = key[:pos - 1]
                if names is None:
                    names = node.op.list_inputs(node.op.parse(
                        {k: v for k, v in node.attrs.items() if not is_hidden(k)}))
                if arg in names:
                    slot = names.index(arg)
                    if slot < len(node.inputs) and node.inputs[slot][0].op is None:
                        node.inputs[slot][0].attrs["__%s__" % hidden] = node.attrs.pop(key)
                break
    node.reset_params()
