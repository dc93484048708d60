"""The symbol graph: nodes, depth-first order, and shape / type inference over a whole graph.

A node is a variable (``op is None``) or an operator application. Edges are *entries*
``(node, output_index, version)``; ``version`` counts how often an operator mutated a variable
(BatchNorm's moving statistics), as MXNet records it in JSON.

``IndexedGraph`` numbers the nodes in MXNet's order (depth-first post-order from the outputs,
inputs visited in order) and gives every output of every node, hidden ones included, an entry
id. Shape and type inference run over it to a fixed point, forward and backward, the way
MXNet's InferShape pass does.
"""
import ast
import os

import numpy as np

from ..base import DTYPE_MX_TO_NP, MXNetError
from ..operator import registry
from ..operator.registry import merge_shape

__all__ = ["Node", "topo_order", "IndexedGraph", "infer_shapes", "infer_types",
           "shape_known", "parse_shape_attr", "dtype_attr_name", "eliminate_common_expr",
           "bind_outputs"]


class Node:
    """One vertex of a symbol graph.

    ``attrs`` holds every attribute as a string (operator parameters and ``__dunder__``
    attributes alike); ``params()`` parses them once through the operator declaration.
    """
    __slots__ = ("op", "name", "attrs", "inputs", "control_deps", "version", "_p")

    def __init__(self, op, name, attrs=None):
        self.op = op
        self.name = name
        self.attrs = {} if attrs is None else attrs
        self.inputs = []            # entries (node, index, version)
        self.control_deps = []      # nodes (only kept for JSON round trips)
        self.version = 0            # variables: how many operators mutate them so far
        self._p = None

    @property
    def is_variable(self):
        return self.op is None

    def params(self):
        """The parsed operator parameters (an MXNetError names the node when they are bad)."""
        p = self._p
        if p is None:
            try:
                p = self.op.parse(self.attrs)
            except MXNetError as err:
                raise MXNetError("%s, in operator %s(name=\"%s\")"
                                 % (err, self.op.name, self.name)) from None
            self._p = p
        return p

    def reset_params(self):
        self._p = None

    def num_outputs(self):
        return 1 if self.op is None else self.op.num_outputs(self.params())

    def num_visible_outputs(self):
        return 1 if self.op is None else self.op.num_visible_outputs(self.params())

    def input_names(self):
        return self.op.list_inputs(self.params())

    def aux_slots(self):
        """Positions of the inputs this operator mutates (its auxiliary states)."""
        if self.op is None:
            return ()
        p = self.params()
        op = self.op
        if not op.aux and type(op).list_aux is registry.Operator.list_aux:
            return ()           # the declared list is empty, so the default list_aux is too
        aux = op.list_aux(p)
        if not aux:
            return ()
        return tuple(i for i, n in enumerate(self.input_names()) if n in aux)

    def output_name(self, index):
        if self.op is None:
            return self.name
        return "%s_%s" % (self.name, self.op.list_outputs(self.params())[index])

    def __repr__(self):
        return "<Node %s %s>" % (self.op.name if self.op is not None else "null", self.name)


def topo_order(entries):
    """Nodes reachable from ``entries`` in depth-first post-order (inputs before users)."""
    order = []
    seen = set()
    for head in entries:
        root = head[0]
        if id(root) in seen:
            continue
        seen.add(id(root))
        # one frame per node on the path: the node and iterators over what it still has to
        # visit (inputs, then control dependencies), resumed where they stopped
        stack = [(root, iter(root.inputs), iter(root.control_deps))]
        while stack:
            node, inputs, deps = stack[-1]
            for src, _, _ in inputs:
                if id(src) not in seen:
                    seen.add(id(src))
                    stack.append((src, iter(src.inputs), iter(src.control_deps)))
                    break
            else:
                for dep in deps:
                    if id(dep) not in seen:
                        seen.add(id(dep))
                        stack.append((dep, iter(dep.inputs), iter(dep.control_deps)))
                        break
                else:
                    stack.pop()
                    order.append(node)
    return order


class IndexedGraph:
    """Nodes numbered in MXNet's order, with one entry id per node output (hidden included)."""

    def __init__(self, outputs):
        nodes = topo_order(outputs)
        self.nodes = nodes
        index = {id(n): i for i, n in enumerate(nodes)}
        self.index = index
        self.params = [None if n.op is None else n.params() for n in nodes]
        starts = []
        total = 0
        counts = []
        for n in nodes:
            starts.append(total)
            c = n.num_outputs()
            counts.append(c)
            total += c
        self.entry_start = starts
        self.num_outputs = counts
        self.num_entries = total
        self.entry_node = [0] * total
        for nid, (s, c) in enumerate(zip(starts, counts)):
            for j in range(c):
                self.entry_node[s + j] = nid
        self.node_inputs = []
        for n in nodes:
            if n.op is not None and not n.inputs and n.input_names():
                raise MXNetError("operator %s (node '%s') has not been given its inputs (%s): "
                                 "call the symbol with them first"
                                 % (n.op.name, n.name, ", ".join(n.input_names())))
            eids = []
            for src, idx, _ in n.inputs:
                sid = index[id(src)]
                if idx >= counts[sid]:
                    raise MXNetError("node %s uses output %d of %s, which has only %d output(s)"
                                     % (n.name, idx, src.name, counts[sid]))
                eids.append(starts[sid] + idx)
            self.node_inputs.append(eids)
        self.outputs = list(outputs)
        self.heads = [starts[index[id(n)]] + i for n, i, _ in outputs]
        mutable = set()
        for n in nodes:
            for slot in n.aux_slots():
                mutable.add(index[id(n.inputs[slot][0])])
        self.mutable = mutable
        self.var_nids = [i for i, n in enumerate(nodes) if n.op is None]
        self.arg_nids = [i for i in self.var_nids if i not in mutable]
        self.aux_nids = [i for i in self.var_nids if i in mutable]
        self.op_nids = [i for i, n in enumerate(nodes) if n.op is not None]

    def entry_label(self, eid):
        """How an entry reads in messages: a variable's name or '<node>_<output>'."""
        nid = self.entry_node[eid]
        node = self.nodes[nid]
        if node.op is None:
            return node.name
        k = eid - self.entry_start[nid]
        names = node.op.list_outputs(self.params[nid])
        return "%s_%s" % (node.name, names[k] if k < len(names) else "output%d" % k)


# ---------------------------------------------------------------------------------------------
# common-subexpression elimination
# ---------------------------------------------------------------------------------------------
def _mergeable(node):
    """Whether a node is one computation of its inputs, so an identical node (same operator,
    attributes and inputs) computes the same values: not a variable, not an operator that
    mutates an input (auxiliary states) or keeps state or draws random numbers."""
    return node.op is not None and not node.op.stateful and not node.aux_slots()


def eliminate_common_expr(outputs):
    """The output entries of a copy of the graph under ``outputs`` in which every operator
    node identical to an earlier one (same operator, same attributes, same inputs after
    merging) is replaced by that one, so it is computed once.

    The nodes are visited inputs first, so chains of duplicates collapse from the bottom up.
    When merging makes one entry appear several times among the outputs, each repetition is
    read through a new ``_copy`` node ('<node>_<n>_copy'), so every output keeps its own
    array. The given graph is left as it is.
    """
    copies = {}          # id(original node) -> node of the new graph
    first_seen = {}      # (op, attributes, inputs) -> node of the new graph
    for node in topo_order(outputs):
        inputs = [(copies[id(src)], i, v) for src, i, v in node.inputs]
        if _mergeable(node):
            key = (node.op.name, tuple(sorted(node.attrs.items())),
                   tuple((id(src), i, v) for src, i, v in inputs))
            same = first_seen.get(key)
            if same is not None:
                copies[id(node)] = same
                continue
        new = Node(node.op, node.name, dict(node.attrs))
        new.version = node.version
        new._p = node._p
        new.inputs = inputs
        new.control_deps = [copies[id(d)] for d in node.control_deps]
        copies[id(node)] = new
        if _mergeable(node):
            first_seen[key] = new
    result, repeats = [], {}
    for node, i, v in outputs:
        entry = (copies[id(node)], i, v)
        key = (id(entry[0]), i)
        count = repeats.get(key)
        if count is None:
            repeats[key] = 0
        else:
            repeats[key] = count + 1
            copy = Node(registry.get("_copy"), "%s_%d_copy" % (entry[0].name, count))
            copy.inputs = [entry]
            entry = (copy, 0, 0)
        result.append(entry)
    return result


def bind_outputs(outputs):
    """The output entries an executor plans for a symbol with ``outputs``: the graph after
    common-subexpression elimination, unless the environment variable
    MXNET_ELIMINATE_COMMON_EXPR is 0 (as in MXNet, where it is on by default)."""
    if os.environ.get("MXNET_ELIMINATE_COMMON_EXPR", "1").strip() in ("0", "false", "False"):
        return list(outputs)
    return eliminate_common_expr(outputs)


# ---------------------------------------------------------------------------------------------
# shapes
# ---------------------------------------------------------------------------------------------
def shape_known(shape):
    return shape is not None and len(shape) > 0 and all(d > 0 for d in shape)


def parse_shape_attr(text):
    """The shape a ``__shape__`` attribute holds; () (unknown rank) gives None."""
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        raise MXNetError("invalid __shape__ attribute %r" % (text,)) from None
    if isinstance(value, int):
        value = (value,)
    shape = tuple(int(d) for d in value)
    return shape if shape else None


def _norm_shape(shape):
    """A shape with every unknown dim (None, 0 or a negative number, as -1 in ``ones(shape=
    (-1, 3))``) written as 0; an empty shape (unknown rank) as None."""
    if shape is None:
        return None
    shape = tuple(int(d) if d is not None and d > 0 else 0 for d in shape)
    return shape if shape else None


def _score(shapes):
    """How much is known: grows whenever inference learns something."""
    total = 0
    for s in shapes:
        if s is not None:
            total += 1 + sum(1 for d in s if d > 0)
    return total


def _input_desc(g, nid, slot):
    node = g.nodes[nid]
    names = node.op.list_inputs(g.params[nid])
    arg = names[slot] if slot < len(names) else "input%d" % slot
    src = g.entry_label(g.node_inputs[nid][slot])
    return "input '%s' (%s)" % (arg, src) if src != "%s_%s" % (node.name, arg) else \
        "input '%s'" % arg


def _what(g, nid, slot, out_index):
    return _input_desc(g, nid, slot) if slot is not None else "output %d" % out_index


def _merge_entry(g, shapes, eid, new, nid, slot=None, out_index=None):
    old = shapes[eid]
    if type(new) is tuple and new == old:   # the common case once known: nothing to learn
        return
    new = _norm_shape(new)
    if new is None:
        return
    try:
        shapes[eid] = merge_shape(old, new)
    except ValueError:
        node = g.nodes[nid]
        raise MXNetError("Error in operator %s (%s): Shape inconsistent for %s, provided %s, "
                         "inferred shape %s" % (node.name, node.op.name,
                                                _what(g, nid, slot, out_index), old, new)) \
            from None


def infer_shapes(g, known):
    """Shapes of every entry (None / 0 dims where unknown) given {variable nid: shape}."""
    shapes = [None] * g.num_entries
    for nid in g.var_nids:
        node = g.nodes[nid]
        eid = g.entry_start[nid]
        if nid in known:
            shapes[eid] = _norm_shape(known[nid])
        else:
            text = node.attrs.get("__shape__")
            if text is not None:
                shapes[eid] = _norm_shape(parse_shape_attr(text))
    # a node that has run with every input shape known and ends with every output shape known
    # is settled: running it again computes the same shapes, and merging them changes nothing
    # (a known shape never changes), so later sweeps skip it
    pending = g.op_nids
    score = _score(shapes)
    while True:
        pending = [nid for nid in pending if not _shape_step(g, shapes, nid)]
        pending.reverse()
        pending = [nid for nid in pending if not _shape_step(g, shapes, nid)]
        pending.reverse()
        # as MXNet's pass: stop once every shape is complete, or when a pass learnt nothing
        if all(shape_known(s) for s in shapes):
            return shapes
        new_score = _score(shapes)
        if new_score == score:
            return shapes
        score = new_score


def _shape_step(g, shapes, nid):
    """Infer node ``nid``'s shapes forward and backward, merging what it learns; True when the
    node is settled (it ran with every input shape known, and every output shape is known)."""
    node = g.nodes[nid]
    op, p = node.op, g.params[nid]
    in_eids = g.node_inputs[nid]
    start, count = g.entry_start[nid], g.num_outputs[nid]
    in_shapes = [shapes[e] for e in in_eids]
    inputs_known = all(shape_known(s) for s in in_shapes)
    try:
        new_in, new_out = op.infer_shape(p, in_shapes)
    except MXNetError as err:
        raise MXNetError("Error in operator %s: %s" % (node.name, err)) from None
    for slot, (eid, s) in enumerate(zip(in_eids, new_in)):
        if s is not None:
            _merge_entry(g, shapes, eid, s, nid, slot=slot)
    for k, s in enumerate(new_out[:count]):
        if s is not None:
            _merge_entry(g, shapes, start + k, s, nid, out_index=k)
    outs = shapes[start:start + count]
    if any(s is not None for s in outs):
        try:
            back = op.infer_shape_backward(p, [shapes[e] for e in in_eids], outs)
        except MXNetError as err:
            raise MXNetError("Error in operator %s: %s" % (node.name, err)) from None
        for slot, (eid, s) in enumerate(zip(in_eids, back)):
            if s is not None:
                _merge_entry(g, shapes, eid, s, nid, slot=slot)
    return inputs_known and all(shape_known(s) for s in shapes[start:start + count])


# ---------------------------------------------------------------------------------------------
# types (numpy dtype names)
# ---------------------------------------------------------------------------------------------
def dtype_attr_name(text):
    """The dtype name a ``__dtype__`` attribute (an MXNet type number) stands for."""
    try:
        return np.dtype(DTYPE_MX_TO_NP[int(text)]).name
    except (KeyError, ValueError):
        raise MXNetError("invalid __dtype__ attribute %r" % (text,)) from None


def infer_types(g, known):
    """Dtype names of every entry (None where unknown) given {variable nid: dtype name}."""
    types = [None] * g.num_entries
    for nid in g.var_nids:
        eid = g.entry_start[nid]
        if nid in known:
            types[eid] = known[nid]
        else:
            text = g.nodes[nid].attrs.get("__dtype__")
            if text is not None and int(text) >= 0:
                types[eid] = dtype_attr_name(text)
    op_nids = g.op_nids
    count = sum(t is not None for t in types)
    while True:
        for nid in op_nids:
            _type_step(g, types, nid)
        new_count = sum(t is not None for t in types)
        # stop once every dtype is known (as MXNet's pass), or when a pass learnt nothing
        if new_count == count or new_count == len(types):
            return types
        count = new_count


def _type_step(g, types, nid):
    node = g.nodes[nid]
    in_eids = g.node_inputs[nid]
    start, count = g.entry_start[nid], g.num_outputs[nid]
    try:
        new_in, new_out = node.op.infer_type(g.params[nid], [types[e] for e in in_eids])
    except MXNetError as err:
        raise MXNetError("Error in operator %s: %s" % (node.name, err)) from None
    for slot, (eid, t) in enumerate(zip(in_eids, new_in)):
        _merge_type(g, types, eid, t, nid, slot=slot)
    for k, t in enumerate(new_out[:count]):
        _merge_type(g, types, start + k, t, nid, out_index=k)


def _merge_type(g, types, eid, new, nid, slot=None, out_index=None):
    old = types[eid]
    if new is None or (new == old and isinstance(new, str)):    # nothing to learn
        return
    new = np.dtype(new).name
    if old is None:
        types[eid] = new
    elif old != new:
        node = g.nodes[nid]
        raise MXNetError("Error in operator %s (%s): Type inconsistent for %s, provided %s, "
                         "inferred type %s" % (node.name, node.op.name,
                                               _what(g, nid, slot, out_index), old, new))
