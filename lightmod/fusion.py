"""Element-wise fusion, planned at bind: groups of element-wise operators run as one kernel.

The executor asks :func:`find_groups` for groups of operators that each compute their outputs
element by element from inputs of the same shape (``Operator.pointwise``: unary math,
Activation, same-shape binary and scalar arithmetic, and SliceChannel, whose outputs are column
blocks of its input). A group is *convex* (no path leaves it and comes back), so it can run as
one step. :func:`unit_order` orders groups and the other operators topologically, each group's
members next to each other; the executor plans buffers and gradient requests per operator in
that order, then :class:`FusedGroup` replaces each group's backward calls (and, where it pays,
its forward calls) by one call of a kernel generated from the group's per-element math
(``kernels/fused.py``).

* Backward reads the values forward stored and writes each leaf's gradient once, with the
  request of the group's first write into it in backward order (the executor's write order is
  computed with the members contiguous, so this is the request the unfused calls would start
  with); no intermediate gradient is materialised.
* Forward fusion pays on the CPU only while the transcendental functions stay cheap: numba has
  no vectorised ``exp``/``tanh`` (numpy's run 20-40x faster per element), so a group whose
  arrays are large and whose math is mostly such functions keeps its per-operator forward,
  where those run on numpy's SIMD loops.

``LIGHTMOD_FUSION=0`` turns fusion off (read at every bind). A monitor turns it off for the
executor it watches (it reports every operator's output).
"""
import contextlib
import heapq
import math
import os
import threading

import numpy as np

__all__ = ["enabled", "disabled", "find_groups", "unit_order", "FusedGroup", "NotFusible"]

_FLOAT_TYPES = ("float32", "float64")
# element-wise functions that cost about as much as an add (the rest call libm per element)
_CHEAP_UNARY = {"relu", "square", "negative", "abs", "copy", "sign", "floor", "ceil", "round",
                "trunc", "rint", "degrees", "radians", "reciprocal", "logical_not"}
_CHEAP_BINARY = {"add", "sub", "mul", "div", "maximum", "minimum", "equal", "not_equal",
                 "greater", "greater_equal", "lesser", "lesser_equal", "logical_and",
                 "logical_or", "logical_xor"}
_CHEAP_ACT = {"relu", "softsign"}
# forward fusion pays while elements x transcendental calls stay below this many per saved call
_FORWARD_ELEMENTS_PER_CALL = 300


_off = threading.local()


def enabled():
    """Whether binding fuses (``LIGHTMOD_FUSION=0`` turns it off, and so does
    :func:`disabled` in its thread)."""
    if getattr(_off, "depth", 0):
        return False
    return os.environ.get("LIGHTMOD_FUSION", "1").strip() not in ("0", "false", "False", "")


@contextlib.contextmanager
def disabled():
    """Bind without fusion inside the block (this thread): checks of one operator's declared
    backward use it, since a fused group runs the generated kernel instead."""
    _off.depth = getattr(_off, "depth", 0) + 1
    try:
        yield
    finally:
        _off.depth -= 1


def _expensive(desc):
    kind, args, _ = desc
    if kind == "unary":
        return args not in _CHEAP_UNARY
    if kind == "act":
        return args not in _CHEAP_ACT
    if kind == "binary":
        return args not in _CHEAP_BINARY
    if kind == "scalar":
        return args[0] not in _CHEAP_BINARY
    return False


def _split_axis(g, nid, shapes):
    """The axis a SliceChannel node cuts its input along (normalised)."""
    axis, _, _ = g.nodes[nid].op.pointwise(g.params[nid])[1]
    ndim = len(shapes[g.node_inputs[nid][0]])
    return axis + ndim if axis < 0 else axis


def _fusible(g, nid, shapes, types):
    """The node's pointwise descriptor when it can join a group, else None."""
    node = g.nodes[nid]
    desc = node.op.pointwise(g.params[nid])
    if desc is None or "__stack_split__" in node.attrs:     # symbol/stack_fc.py's STACK_SPLIT
        return None
    start, count = g.entry_start[nid], g.num_outputs[nid]
    outs = range(start, start + count)
    ins = g.node_inputs[nid]
    dtype = types[start]
    if dtype not in _FLOAT_TYPES or any(types[e] != dtype for e in list(ins) + list(outs)):
        return None
    shape = shapes[start]
    if any(shapes[e] != shape for e in outs) or math.prod(shape) == 0:
        return None
    if desc[0] == "slice":
        if count < 2 or len(ins) != 1:
            return None
    elif count != 1 or any(shapes[e] != shape for e in ins):
        return None
    return desc


class _Group:
    __slots__ = ("gid", "members", "shape", "dtype", "axis")

    def __init__(self, gid, shape, dtype, axis):
        self.gid, self.members, self.shape, self.dtype, self.axis = gid, [], shape, dtype, axis


def _reaches(group_deps, sources, target):
    """Whether group ``target`` is among ``sources`` or upstream of one of them through the
    group edges. Sets of groups are bit masks (bit ``gid``); ``group_deps[gid]`` is the mask of
    the groups ``gid`` reads from. Breadth first, each group expanded once."""
    bit = 1 << target
    reached = frontier = sources
    while frontier:
        if frontier & bit:
            return True
        upstream = 0
        while frontier:
            lowest = frontier & -frontier
            upstream |= group_deps[lowest.bit_length() - 1]
            frontier ^= lowest
        frontier = upstream & ~reached
        reached |= frontier
    return False


def find_groups(g, shapes, types):
    """Groups (lists of node ids in topological order, two members at least) to fuse.

    Nodes are visited in topological order; a fusible node joins the group of one of its
    producers when the graph with every group contracted to one node stays acyclic: the
    groups the node's inputs come from or depend on (``deps``: per node, the groups upstream
    of it) must not be, or depend on (``group_deps``, the contracted edges), that group.
    Sets of groups are bit masks over the group ids (unions of hundreds of them per node of an
    unrolled RNN are then single integer operations)."""
    group_of, deps, groups, group_deps = {}, {}, [], []
    entry_node = g.entry_node
    for nid in g.op_nids:
        ins = g.node_inputs[nid]
        upstream = 0
        for e in ins:
            src = entry_node[e]
            upstream |= deps.get(src, 0)
            if src in group_of:
                upstream |= 1 << group_of[src].gid
        deps[nid] = upstream
        desc = _fusible(g, nid, shapes, types)
        if desc is None:
            continue
        shape, dtype = shapes[g.entry_start[nid]], types[g.entry_start[nid]]
        joined = None
        if desc[0] != "slice":
            for e in ins:
                cand = group_of.get(entry_node[e])
                if cand is None or cand.shape != shape or cand.dtype != dtype:
                    continue
                outside = 0
                for o in ins:
                    src = entry_node[o]
                    src_group = group_of.get(src)
                    if src_group is not cand:
                        outside |= deps.get(src, 0)
                        if src_group is not None:
                            outside |= 1 << src_group.gid
                if not _reaches(group_deps, outside, cand.gid):
                    joined = cand
                    group_deps[cand.gid] |= outside
                    break
        if joined is None:
            axis = _split_axis(g, nid, shapes) if desc[0] == "slice" else \
                (1 if len(shape) >= 2 else 0)
            joined = _Group(len(groups), shape, dtype, axis)
            groups.append(joined)
            group_deps.append(upstream)
        joined.members.append(nid)
        group_of[nid] = joined
    return [grp.members for grp in groups
            if sum(1 for n in grp.members
                   if g.nodes[n].op.pointwise(g.params[n])[0] != "slice") >= 1
            and len(grp.members) >= 2]


def unit_order(g, groups):
    """The operators in a topological order that keeps every group's members adjacent: a list
    of node ids (groups contribute their members in order)."""
    unit_of = {}
    for i, members in enumerate(groups):
        for nid in members:
            unit_of[nid] = ("group", i)
    position = {nid: pos for pos, nid in enumerate(g.op_nids)}
    units, unit_deps = {}, {}
    for nid in g.op_nids:
        u = unit_of.get(nid, ("node", nid))
        units.setdefault(u, []).append(nid)
        for e in g.node_inputs[nid]:
            src = g.entry_node[e]
            if src in position:
                su = unit_of.get(src, ("node", src))
                if su != u:
                    unit_deps.setdefault(u, set()).add(su)
    waiting = {u: len(unit_deps.get(u, ())) for u in units}
    users = {}
    for u, ds in unit_deps.items():
        for d in ds:
            users.setdefault(d, []).append(u)
    ready = [(position[units[u][0]], u) for u, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, u = heapq.heappop(ready)
        order.extend(units[u])
        for v in users.get(u, ()):
            waiting[v] -= 1
            if waiting[v] == 0:
                heapq.heappush(ready, (position[units[v][0]], v))
    if len(order) != len(g.op_nids):
        raise AssertionError("fusion: the grouped graph has a cycle")
    return order


class NotFusible(Exception):
    """A group whose arrays cannot be seen as 2-d views (the executor runs it unfused)."""


def _as_2d(arr, rows):
    """A (rows, size // rows) view of a C-contiguous host or device array."""
    if isinstance(arr, np.ndarray):
        contiguous = arr.flags.c_contiguous
    else:
        contiguous = getattr(arr, "is_c_contiguous", lambda: False)()
    if not contiguous:
        raise NotFusible()
    return arr.reshape(rows, arr.size // rows)


class FusedGroup:
    """One fused group of a bound executor: its kernels and the 2-d views they run on.

    ``forward(...)``/``backward(...)`` take the executor's step arguments and ignore them: the
    arrays were prepared at bind.
    """
    name = "_fused_elemwise"

    def __init__(self, g, members, entry_nd, k):
        from .kernels.scalar import BINARY_CODES, UNARY_CODES
        from .kernels.scalar_nn import ACTIVATIONS
        self.members = list(members)
        self.k = k
        member_set = set(members)
        descs = {nid: g.nodes[nid].op.pointwise(g.params[nid]) for nid in members}
        first = members[0]
        shape = tuple(entry_nd[g.entry_start[first]].shape)
        slices = [n for n in members if descs[n][0] == "slice"]
        if slices:
            ndim = entry_nd[g.node_inputs[slices[0]][0]].ndim
            axis = descs[slices[0]][1][0]
            axis = axis + ndim if axis < 0 else axis
        else:
            axis = 1 if len(shape) >= 2 else 0
        self.rows = math.prod(shape[:axis])
        self.cols = math.prod(shape) // self.rows
        self.dtype = np.dtype(entry_nd[g.entry_start[first]].dtype).name

        # values: leaves first (an external entry, or block j of a slice's input), then nodes
        leaf_keys, value_of = [], {}
        slice_out = {}
        for nid in slices:
            x = g.node_inputs[nid][0]
            for j in range(g.num_outputs[nid]):
                key = (x, j, g.num_outputs[nid])
                slice_out[g.entry_start[nid] + j] = key
                value_of[key] = len(leaf_keys)
                leaf_keys.append(key)
        computing = [n for n in members if descs[n][0] != "slice"]
        produced = {g.entry_start[n] for n in computing}
        for nid in computing:
            for e in g.node_inputs[nid]:
                key = slice_out.get(e, (e, None, None))
                if e not in produced and key not in value_of:
                    value_of[key] = len(leaf_keys)
                    leaf_keys.append(key)
        n_leaves = len(leaf_keys)
        nodes, position = [], {nid: j for j, nid in enumerate(computing)}
        for nid in computing:
            kind, args, zero_grad = descs[nid]
            if kind == "unary":
                code = UNARY_CODES[args]
            elif kind == "act":
                code = ACTIVATIONS[args]
            elif kind == "binary":
                code = BINARY_CODES[args]
            else:
                fn, value, reverse = args
                code = (BINARY_CODES[fn], float(np.dtype(self.dtype).type(value)), bool(reverse))
            inputs = tuple(value_of[slice_out.get(e, (e, None, None))]
                           if e not in produced else n_leaves + position[g.entry_node[e]]
                           for e in g.node_inputs[nid])
            nodes.append((kind, code, inputs, bool(zero_grad)))
        self.descs = [descs[n] for n in computing]
        self.leaf_keys, self.computing, self.slices = leaf_keys, computing, slices
        self.n_leaves, self.nodes = n_leaves, tuple(nodes)
        self.member_set = member_set
        self.value_arrays = [self._leaf_view(entry_nd, key) for key in leaf_keys] + \
            [_as_2d(entry_nd[g.entry_start[n]]._data, self.rows) for n in computing]
        self.forward_fused = False
        self.forward_spec = (self.dtype, n_leaves, self.nodes, (), (0,) * n_leaves)
        self._forward = None
        self._backward = None

    def _leaf_view(self, arrays, key):
        """The 2-d view of a leaf inside ``arrays`` (entry NDArrays or gradient NDArrays)."""
        e, j, num = key
        data = arrays[e]._data
        if j is None:
            return _as_2d(data, self.rows)
        return _as_2d(data, self.rows)[:, j * self.cols:(j + 1) * self.cols]

    # --- planning ---------------------------------------------------------------------------
    def plan_forward(self, on_gpu):
        """Decide whether forward runs fused (see the module doc); compile it if so."""
        expensive = sum(1 for desc in self.descs if _expensive(desc))
        pays = on_gpu or self.rows * self.cols * expensive <= _FORWARD_ELEMENTS_PER_CALL * max(
            1, len(self.computing) - 1)
        if pays:
            self._forward = self.k.fused_elemwise(self.forward_spec)[0]
            self._forward_args = tuple(self.value_arrays)
        self.forward_fused = pays
        return pays

    def plan_backward(self, g, grad_nd, slot_reqs, external_writes):
        """Compile the backward kernel for these gradient requests and buffers; False when no
        leaf of the group needs a gradient. ``external_writes(eid)``: whether something outside
        the group writes the gradient of ``eid`` before the group's backward runs."""
        from .grad_req import GradReq
        reqs = {}
        for nid in reversed(self.members):
            node_reqs = slot_reqs.get(nid)
            if node_reqs is None:
                continue
            is_slice = nid in self.slices
            for e, r in zip(g.node_inputs[nid], node_reqs):
                if r is GradReq.NULL:
                    continue
                if is_slice:
                    for j in range(g.num_outputs[nid]):
                        reqs.setdefault((e, j, g.num_outputs[nid]), r)
                elif (e, None, None) in self.leaf_keys:
                    reqs.setdefault((e, None, None), r)
        if not reqs:
            return False
        leaf_reqs = tuple(0 if key not in reqs else (1 if reqs[key] is GradReq.WRITE else 2)
                          for key in self.leaf_keys)
        out_grads, go_arrays = [], []
        for v, nid in enumerate(self.computing):
            e = g.entry_start[nid]
            if grad_nd[e] is not None and external_writes(e):
                out_grads.append(self.n_leaves + v)
                go_arrays.append(_as_2d(grad_nd[e]._data, self.rows))
        for nid in self.slices:
            for j in range(g.num_outputs[nid]):
                e = g.entry_start[nid] + j
                if grad_nd[e] is not None and external_writes(e):
                    key = (g.node_inputs[nid][0], j, g.num_outputs[nid])
                    out_grads.append(self.leaf_keys.index(key))
                    go_arrays.append(_as_2d(grad_nd[e]._data, self.rows))
        d_arrays = [self._leaf_view(grad_nd, key) for key, r in zip(self.leaf_keys, leaf_reqs)
                    if r]
        self.backward_spec = (self.dtype, self.n_leaves, self.nodes, tuple(out_grads), leaf_reqs)
        self._backward = self.k.fused_elemwise(self.backward_spec)[1]
        self._backward_args = tuple(self.value_arrays) + tuple(go_arrays) + tuple(d_arrays)
        return True

    # --- running (the executor's step signatures) -----------------------------------------
    def forward(self, p, k, inputs, outputs, is_train, state):
        self._forward(self.rows, self.cols, *self._forward_args)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        self._backward(self.rows, self.cols, *self._backward_args)
