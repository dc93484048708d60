"""Stacking the FullyConnected nodes that share one weight into one product (a bind-time rewrite).

An unrolled RNN applies its input projection (``i2h``) once per time step, with the same weight
and bias, to inputs that do not depend on each other's projections. Computed one step at a time
that is T products with M = batch rows (32 in the bucketing LSTM bench), which OpenBLAS runs at
about half the rate of one product with T x batch rows, in the forward pass and twice more in
the backward pass (data and weight gradients). The rewrite replaces such a group of nodes by

    Concat(data_1 .. data_T, dim=0) -> FullyConnected -> SliceChannel(num_outputs=T, axis=0)

whose k-th output takes the place of the k-th node's output. The values are the same products
of the same rows (each row of the stacked product is the row of one step's product); the weight
and bias gradients are one sum over all rows instead of T sums added up, so they may differ in
the last bits.

A group is stacked when its nodes have the same attributes, read the same weight (and bias)
variables, and no node's data depends on another node of the group (otherwise the contracted
graph would have a cycle). The binder checks after shape inference that every node's data has
the same shape (:func:`stacks_fit`) and binds the plain graph otherwise. ``LIGHTMOD_STACK_FC=0``
turns the rewrite off.
"""
import os

from ..operator import registry
from .graph import Node, topo_order

__all__ = ["enabled", "stack_shared_fc", "stacks_fit", "STACK_SPLIT"]

# marks the SliceChannel of a stack: element-wise fusion leaves it out (lightmod/fusion.py), so
# every step's gate math still fuses with that step's other operators, as without stacking
STACK_SPLIT = "__stack_split__"


def enabled():
    return os.environ.get("LIGHTMOD_STACK_FC", "1").strip() not in ("0", "false", "False")


def _variable_names(outputs):
    return [n.name for n in topo_order(outputs) if n.op is None]


def _groups(order):
    """Candidate groups (lists of FullyConnected nodes in topological order), two or more."""
    by_key = {}
    for node in order:
        if node.op is None or node.op.name != "FullyConnected" or len(node.inputs) < 2:
            continue
        params = node.inputs[1:]
        if any(src.op is not None for src, _, _ in params):
            continue
        key = (tuple(sorted(node.attrs.items())),
               tuple((id(src), i, v) for src, i, v in params))
        by_key.setdefault(key, []).append(node)
    return [members for members in by_key.values() if len(members) >= 2]


def _independent(order, members):
    """Whether no member's data depends on another member (the members' own bits upstream)."""
    bit = {id(m): 1 << k for k, m in enumerate(members)}
    upstream = {}
    for node in order:
        mask = 0
        for src, _, _ in node.inputs:
            mask |= upstream[id(src)]
        for dep in node.control_deps:
            mask |= upstream[id(dep)]
        own = bit.get(id(node), 0)
        if own and mask & ~own:
            return False
        upstream[id(node)] = mask | own
    return True


def _stack(order, outputs, members):
    """Rewrite one group in place (the nodes of ``order`` belong to the caller's graph copy);
    the new output list and the Concat node."""
    first = members[0]
    base = "_stacked_" + first.name
    concat = Node(registry.get("Concat"), base + "_data",
                  {"num_args": str(len(members)), "dim": "0"})
    concat.inputs = [m.inputs[0] for m in members]
    product = Node(first.op, base, dict(first.attrs))
    product.inputs = [(concat, 0, 0)] + list(first.inputs[1:])
    split = Node(registry.get("SliceChannel"), base + "_split",
                 {"num_outputs": str(len(members)), "axis": "0", STACK_SPLIT: "1"})
    split.inputs = [(product, 0, 0)]
    if "__ctx_group__" in first.attrs:      # the stack runs where its first member would
        concat.attrs["__ctx_group__"] = split.attrs["__ctx_group__"] = first.attrs["__ctx_group__"]
    replaced = {id(m): (split, k, 0) for k, m in enumerate(members)}

    def swap(entry):
        return replaced.get(id(entry[0]), entry) if entry[1] == 0 else entry

    for node in order:
        if id(node) not in replaced:
            node.inputs = [swap(e) for e in node.inputs]
    return [swap(e) for e in outputs], concat


def _copy_graph(outputs):
    """A copy of the graph under ``outputs`` (new operator nodes, the same variables)."""
    copies = {}
    for node in topo_order(outputs):
        if node.op is None:
            copies[id(node)] = node
            continue
        new = Node(node.op, node.name, dict(node.attrs))
        new.version = node.version
        new._p = node._p
        new.inputs = [(copies[id(src)], i, v) for src, i, v in node.inputs]
        new.control_deps = [copies[id(d)] for d in node.control_deps]
        copies[id(node)] = new
    return [(copies[id(n)], i, v) for n, i, v in outputs]


def stack_shared_fc(outputs, owned=False):
    """(new output entries, the Concat node of each stack) with every stackable group
    rewritten, or None when there is none. ``owned``: the caller's graph is a copy it may
    change (else a copy is made first). Groups are stacked one at a time, so stacking one
    group never hides a cycle through another; a rewrite that would change the order of the
    variables (which names the executor's arguments) is not made."""
    order = topo_order(outputs)
    if not _groups(order):
        return None
    if not owned:
        outputs = _copy_graph(outputs)
        order = topo_order(outputs)
    names = [n.name for n in order if n.op is None]
    concats = []
    while True:
        for members in _groups(order):
            if _independent(order, members):
                outputs, concat = _stack(order, outputs, members)
                concats.append(concat)
                order = topo_order(outputs)
                break
        else:
            break
    if not concats or _variable_names(outputs) != names:
        return None
    return outputs, concats


def stacks_fit(g, shapes, concats):
    """Whether every stack's inputs have one shape (so each output slice is one node's
    product), given the inferred entry shapes of the graph ``g``."""
    for concat in concats:
        nid = g.index[id(concat)]
        ins = [shapes[e] for e in g.node_inputs[nid]]
        if any(s != ins[0] for s in ins) or not ins[0]:
            return False
    return True
