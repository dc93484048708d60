"""The cheaper bind passes give the plans the straightforward passes gave.

* ``fusion.find_groups`` (group sets as bit masks) against a reference written with Python
  sets and a depth-first reachability search, on hypothesis-drawn DAGs of element-wise
  operators with FullyConnected nodes in between (the nodes fusion must keep apart);
* ``graph.infer_shapes`` (settled nodes skip later sweeps) against running every node in every
  sweep, on graphs that need backward inference, and an inconsistency found only by a later
  sweep is still reported;
* the executor plans no gradient buffer for entries whose gradient stays inside one fused
  group, keeps one where something outside the group writes it, and computes the same
  gradients as the unfused plan;
* ``import lightmod`` leaves ``mx.test_utils`` for its first use.
"""
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lightmod as mx
from lightmod import executor as _executor
from lightmod import fusion
from lightmod.base import MXNetError
from lightmod.symbol import graph as _graph


def _indexed(sym, shapes):
    g = _graph.IndexedGraph(_graph.bind_outputs(sym._outputs))
    by_name = {g.nodes[n].name: n for n in g.var_nids}
    known = {by_name[k]: v for k, v in shapes.items() if k in by_name}
    types = {n: "float32" for n in g.var_nids}
    entry_shapes, entry_types = _executor._infer_all(g, known, types, "test")
    return g, entry_shapes, entry_types


# --- fusion grouping ------------------------------------------------------------------------
def _reference_groups(g, shapes, types):
    """find_groups' rule with explicit sets: a node joins a producer's group unless that group
    is reachable upstream from the node's other inputs (through groups and nodes)."""
    group_of, deps, groups, group_deps = {}, {}, [], []
    for nid in g.op_nids:
        ins = g.node_inputs[nid]
        upstream = set()
        for e in ins:
            src = g.entry_node[e]
            upstream |= deps.get(src, set())
            if src in group_of:
                upstream.add(group_of[src])
        deps[nid] = upstream
        desc = fusion._fusible(g, nid, shapes, types)
        if desc is None:
            continue
        shape, dtype = shapes[g.entry_start[nid]], types[g.entry_start[nid]]
        joined = None
        if desc[0] != "slice":
            for e in ins:
                cand = group_of.get(g.entry_node[e])
                if cand is None or groups[cand]["shape"] != shape or \
                        groups[cand]["dtype"] != dtype:
                    continue
                outside = set()
                for o in ins:
                    src = g.entry_node[o]
                    if group_of.get(src) != cand:
                        outside |= deps.get(src, set())
                        if src in group_of:
                            outside.add(group_of[src])
                seen, todo = set(), list(outside)
                while todo:
                    gid = todo.pop()
                    if gid not in seen:
                        seen.add(gid)
                        todo.extend(group_deps[gid])
                if cand not in seen:
                    joined = cand
                    group_deps[cand] |= outside
                    break
        if joined is None:
            joined = len(groups)
            groups.append({"shape": shape, "dtype": dtype, "members": []})
            group_deps.append(set(upstream))
        groups[joined]["members"].append(nid)
        group_of[nid] = joined
    return [grp["members"] for grp in groups
            if len(grp["members"]) >= 2 and any(
                g.nodes[n].op.pointwise(g.params[n])[0] != "slice" for n in grp["members"])]


@st.composite
def _dags(draw):
    """Element-wise DAGs over (4, 6) values: unary, binary and scalar steps on any earlier
    value, FullyConnected steps (not fusible) between them, and a 2-way split."""
    values = [mx.sym.var("x"), mx.sym.var("y")]
    for k in range(draw(st.integers(3, 24))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "scalar", "fc", "split"]))
        a = values[draw(st.integers(0, len(values) - 1))]
        if kind == "unary":
            values.append(draw(st.sampled_from([mx.sym.tanh, mx.sym.sigmoid, mx.sym.relu]))(a))
        elif kind == "binary":
            b = values[draw(st.integers(0, len(values) - 1))]
            values.append(draw(st.sampled_from([lambda p, q: p + q, lambda p, q: p * q,
                                                lambda p, q: p - q]))(a, b))
        elif kind == "scalar":
            values.append(a * 0.5 + 1.0)
        elif kind == "fc":
            values.append(mx.sym.FullyConnected(a, num_hidden=6, name="fc%d" % k))
        else:
            parts = mx.sym.split(mx.sym.concat(a, a, dim=1), num_outputs=2, axis=1)
            values.extend([parts[0], parts[1]])
    return mx.sym.Group(values[2:])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_dags())
def test_find_groups_matches_the_set_reference(sym):
    g, shapes, types = _indexed(sym, {"x": (4, 6), "y": (4, 6)})
    groups = fusion.find_groups(g, shapes, types)
    assert groups == _reference_groups(g, shapes, types)
    fusion.unit_order(g, groups)        # the contracted graph is acyclic


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_find_groups_matches_the_set_reference_on_unrolled_cells(cell):
    make = mx.rnn.LSTMCell if cell == "lstm" else mx.rnn.GRUCell
    stack = mx.rnn.SequentialRNNCell()
    stack.add(make(8, prefix="l0_"))
    stack.add(make(8, prefix="l1_"))
    out = stack.unroll(12, inputs=mx.sym.var("data"), merge_outputs=True)[0]
    g, shapes, types = _indexed(mx.sym.MakeLoss(mx.sym.sum(out)), {"data": (3, 12, 5)})
    groups = fusion.find_groups(g, shapes, types)
    assert len(groups) >= 24
    assert groups == _reference_groups(g, shapes, types)


# --- shape inference ------------------------------------------------------------------------
def _every_node_every_sweep(monkeypatch):
    """infer_shapes as before settling: every node runs in every sweep."""
    step = _graph._shape_step

    def never_settled(g, shapes, nid):
        step(g, shapes, nid)
        return False
    monkeypatch.setattr(_graph, "_shape_step", never_settled)


def _backward_inferred():
    """Shapes that only backward inference completes: the begin states of an unrolled LSTM
    (zeros with an unknown batch) and a weight known only from its consumer."""
    cell = mx.rnn.LSTMCell(7, prefix="c_")
    out = cell.unroll(5, inputs=mx.sym.var("data"), merge_outputs=True)[0]
    w = mx.sym.var("w")
    return mx.sym.Group([out, mx.sym.FullyConnected(mx.sym.var("z") + w, num_hidden=3)])


def test_settled_nodes_give_the_same_shapes(monkeypatch):
    sym = _backward_inferred()
    g = _graph.IndexedGraph(_graph.bind_outputs(sym._outputs))
    by_name = {g.nodes[n].name: n for n in g.var_nids}
    known = {by_name["data"]: (2, 5, 4), by_name["z"]: (6, 9)}
    fast = _graph.infer_shapes(g, known)
    with monkeypatch.context() as m:
        _every_node_every_sweep(m)
        full = _graph.infer_shapes(g, known)
    assert fast == full
    assert all(_graph.shape_known(s) for s in fast)
    partial = {by_name["data"]: (2, 5, 4)}          # z unknown: some shapes stay open
    fast = _graph.infer_shapes(g, partial)
    with monkeypatch.context() as m:
        _every_node_every_sweep(m)
        assert _graph.infer_shapes(g, partial) == fast


def test_an_inconsistency_a_later_sweep_finds_is_still_reported():
    # x + b runs first with neither shape known; b * c then learns b from c and x + d learns x
    # from d, so only the backward sweep, running x + b again, sees that they disagree
    x, b, c, d = (mx.sym.var(n) for n in "xbcd")
    sym = mx.sym.Group([x + b, b * c, x + d])
    with pytest.raises(MXNetError, match=r"expected \(4, 3\)|expected \(2, 3\)"):
        sym.simple_bind(mx.cpu(), c=(2, 3), d=(4, 3))


# --- gradients inside fused groups -----------------------------------------------------------
def _bind_pair(sym, shapes, monkeypatch):
    monkeypatch.setenv("LIGHTMOD_FUSION", "0")
    plain = sym.simple_bind(mx.cpu(), **shapes)
    monkeypatch.setenv("LIGHTMOD_FUSION", "1")
    fused = sym.simple_bind(mx.cpu(), **shapes)
    return plain, fused


def _gradients(exe, seed):
    rng = np.random.RandomState(seed)
    for name in sorted(exe.arg_dict):
        exe.arg_dict[name][:] = rng.uniform(-1, 1, exe.arg_dict[name].shape)
    exe.forward(is_train=True)
    exe.backward([mx.nd.array(rng.uniform(-1, 1, o.shape)) for o in exe.outputs])
    return {n: g.asnumpy() for n, g in exe.grad_dict.items() if g is not None}


def _grad_keys(exe):
    return {key[1] for key in list(exe._pool) + list(exe._recycled) if key[0] == "grad"}


def test_gradients_inside_a_group_get_no_buffer(monkeypatch):
    x, y = mx.sym.var("x"), mx.sym.var("y")
    a = x * y
    b = mx.sym.tanh(a) + mx.sym.sigmoid(a)      # a's gradient: only written inside the group
    plain, fused = _bind_pair(b * 2.0, {"x": (5, 7), "y": (5, 7)}, monkeypatch)
    a_eid = next(e for e in range(fused._g.num_entries)
                 if fused._g.entry_label(e).startswith(a.name))
    assert a_eid in _grad_keys(plain) and a_eid not in _grad_keys(fused)
    assert fused._total_exec_bytes < plain._total_exec_bytes
    want, got = _gradients(plain, 1), _gradients(fused, 1)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


def test_a_gradient_written_from_outside_the_group_keeps_its_buffer(monkeypatch):
    x, y = mx.sym.var("x"), mx.sym.var("y")
    a = x * y
    inside = mx.sym.tanh(a) * 3.0
    outside = mx.sym.FullyConnected(a, num_hidden=4, name="fc")   # not fusible: writes a's grad
    plain, fused = _bind_pair(mx.sym.Group([inside, outside]), {"x": (5, 7), "y": (5, 7)},
                              monkeypatch)
    assert any(isinstance(s.op, fusion.FusedGroup) for s in fused._bwd)
    a_eid = next(e for e in range(fused._g.num_entries)
                 if fused._g.entry_label(e).startswith(a.name))
    assert a_eid in _grad_keys(fused)
    want, got = _gradients(plain, 2), _gradients(fused, 2)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


# --- import ---------------------------------------------------------------------------------
def test_test_utils_is_imported_on_first_use():
    code = ("import sys, lightmod as mx; first = 'lightmod.test_utils' in sys.modules; "
            "f = mx.test_utils.assert_almost_equal; from lightmod import test_utils; "
            "print(first, test_utils is mx.test_utils, callable(f))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd="/").stdout.split()
    assert out == ["False", "True", "True"]
