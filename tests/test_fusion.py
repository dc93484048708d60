"""Element-wise fusion (lightmod/fusion.py, kernels/fused.py): fused equals unfused.

Every check binds the same symbol twice, with ``LIGHTMOD_FUSION=0`` and with fusion on, runs
forward and backward with the same inputs and head gradients, and compares outputs and every
gradient within float32 tolerance; it also checks that the fused plan really fused something,
so a silent fallback cannot pass. Chains of element-wise operators are drawn by hypothesis; the
RNN cells (LSTM, GRU) are unrolled through mx.rnn.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lightmod as mx
from lightmod import fusion
from lightmod.kernels.cpu import fused as cpu_fused

RTOL, ATOL = 1e-4, 1e-5

UNARY = [lambda v: mx.sym.tanh(v), lambda v: mx.sym.sigmoid(v), lambda v: mx.sym.relu(v),
         lambda v: mx.sym.sin(v), lambda v: mx.sym.abs(v), lambda v: mx.sym.negative(v),
         lambda v: mx.sym.square(v), lambda v: mx.sym.softsign(v), lambda v: mx.sym.sign(v),
         lambda v: mx.sym.Activation(v, act_type="tanh"),
         lambda v: mx.sym.Activation(v, act_type="sigmoid"),
         lambda v: mx.sym.Activation(v, act_type="softrelu"),
         lambda v: mx.sym.Activation(v, act_type="relu")]
BINARY = [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b,
          lambda a, b: mx.sym.maximum(a, b), lambda a, b: mx.sym.minimum(a, b),
          lambda a, b: mx.sym.broadcast_mul(a, b), lambda a, b: a > b]
SCALAR = [lambda v: v * 0.5, lambda v: v + 0.25, lambda v: 1.0 - v, lambda v: v / 2.0,
          lambda v: mx.sym.maximum(v, 0.1)]


def _bind(sym, shapes, fused, monkeypatch, grad_req="write", ctx=None):
    monkeypatch.setenv("LIGHTMOD_FUSION", "1" if fused else "0")
    return sym.simple_bind(ctx or mx.cpu(), grad_req=grad_req, **shapes)


def _fused_steps(ex):
    return sum(isinstance(s.op, fusion.FusedGroup) for s in ex._fwd + ex._bwd)


def _run(ex, args, heads, backward_twice=False):
    for name, value in args.items():
        ex.arg_dict[name][:] = value
    ex.forward(is_train=True)
    outs = [o.asnumpy().copy() for o in ex.outputs]
    for g in ex.grad_arrays:
        if g is not None:
            g[:] = 0.5          # 'add' must add to what is there; 'write' must overwrite it
    ex.backward([mx.nd.array(h) for h in heads])
    if backward_twice:
        ex.backward([mx.nd.array(h) for h in heads])
    grads = {n: g.asnumpy().copy() for n, g in ex.grad_dict.items() if g is not None}
    return outs, grads


def check_fused_matches(sym, shapes, monkeypatch, seed=0, grad_req="write", low=-1.5,
                        high=1.5, expect_fused=True, ctx=None):
    rng = np.random.RandomState(seed)
    plain = _bind(sym, shapes, False, monkeypatch, grad_req, ctx)
    fused = _bind(sym, shapes, True, monkeypatch, grad_req, ctx)
    assert _fused_steps(plain) == 0
    if expect_fused:
        assert _fused_steps(fused) > 0, "nothing was fused"
    args = {n: rng.uniform(low, high, a.shape).astype(np.float32)
            for n, a in plain.arg_dict.items()}
    heads = [rng.uniform(-1, 1, o.shape).astype(np.float32) for o in plain.outputs]
    twice = grad_req == "add"
    want_out, want_grad = _run(plain, args, heads, twice)
    got_out, got_grad = _run(fused, args, heads, twice)
    for w, g in zip(want_out, got_out):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)
    assert want_grad.keys() == got_grad.keys()
    for name in want_grad:
        np.testing.assert_allclose(got_grad[name], want_grad[name], rtol=RTOL, atol=ATOL,
                                   err_msg=name)
    return fused


# ---------------------------------------------------------------------------------------------
# drawn chains
# ---------------------------------------------------------------------------------------------
@st.composite
def chains(draw):
    """A symbol of 2-9 element-wise operators over 1-3 inputs (one or two heads), its input
    shape and the grad_req."""
    n_inputs = draw(st.integers(1, 3))
    values = [mx.sym.Variable("in%d" % i) for i in range(n_inputs)]
    for _ in range(draw(st.integers(2, 9))):
        kind = draw(st.sampled_from(["unary", "binary", "scalar"]))
        pick = st.integers(0, len(values) - 1)
        # mostly extend the newest value, so that chains (what fusion groups) are common
        first = values[draw(st.one_of(st.just(len(values) - 1), pick))]
        if kind == "unary":
            values.append(draw(st.sampled_from(UNARY))(first))
        elif kind == "scalar":
            values.append(draw(st.sampled_from(SCALAR))(first))
        else:
            values.append(draw(st.sampled_from(BINARY))(first, values[draw(pick)]))
    heads = [values[-1]]
    if draw(st.booleans()) and len(values) > n_inputs + 1:
        heads.append(values[draw(st.integers(n_inputs, len(values) - 2))])
    shape = draw(st.sampled_from([(5,), (3, 4), (2, 3, 4), (7, 33)]))
    grad_req = draw(st.sampled_from(["write", "add"]))
    return mx.sym.Group(heads), {"in%d" % i: shape for i in range(n_inputs)}, grad_req


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(chains(), st.integers(0, 2 ** 31 - 1))
def test_drawn_chains_fused_equal_unfused(monkeypatch, case, seed):
    sym, shapes, grad_req = case
    # a drawn graph may offer nothing to fuse (e.g. every operator reads only the inputs)
    check_fused_matches(sym, shapes, monkeypatch, seed, grad_req, expect_fused=False)


def test_chain_is_one_kernel_each_way(monkeypatch):
    x, o = mx.sym.Variable("x"), mx.sym.Variable("o")
    y = mx.sym.sigmoid(mx.sym.tanh(x) * 0.9 + o) * o - x
    ex = check_fused_matches(mx.sym.MakeLoss(y), {"x": (4, 6), "o": (4, 6)}, monkeypatch)
    kinds = [type(s.op).__name__ for s in ex._fwd], [type(s.op).__name__ for s in ex._bwd]
    assert kinds == (["FusedGroup", "MakeLoss"], ["MakeLoss", "FusedGroup"])


def test_large_transcendental_group_keeps_per_operator_forward(monkeypatch):
    """On the CPU a big group of exp/tanh-like math keeps numpy's vectorised forward; its
    backward is still one kernel."""
    x, o = mx.sym.Variable("x"), mx.sym.Variable("o")
    y = mx.sym.tanh(mx.sym.sigmoid(x) * o) * mx.sym.tanh(o)
    ex = check_fused_matches(mx.sym.MakeLoss(y), {"x": (64, 512), "o": (64, 512)}, monkeypatch)
    assert not any(isinstance(s.op, fusion.FusedGroup) for s in ex._fwd)
    assert sum(isinstance(s.op, fusion.FusedGroup) for s in ex._bwd) == 1


def test_gradient_shared_with_outside_consumer(monkeypatch):
    """A value read inside the group and by a non-fusible operator gets both gradients."""
    x = mx.sym.Variable("x")
    a = mx.sym.tanh(x) * 2.0
    b = mx.sym.sigmoid(a) + a
    outside = mx.sym.sum(a, axis=1, keepdims=True)
    y = mx.sym.broadcast_add(b, outside)
    check_fused_matches(mx.sym.MakeLoss(y), {"x": (3, 5)}, monkeypatch)


def test_grad_req_null_and_fixed_inputs(monkeypatch):
    x, w = mx.sym.Variable("x"), mx.sym.Variable("w")
    sym = mx.sym.MakeLoss(mx.sym.tanh(x * w) * 3.0 + w)
    for grad_req in ({"x": "null", "w": "write"}, {"x": "add", "w": "null"}):
        monkeypatch.setenv("LIGHTMOD_FUSION", "0")
        plain = sym.simple_bind(mx.cpu(), grad_req=grad_req, x=(2, 3), w=(2, 3))
        monkeypatch.setenv("LIGHTMOD_FUSION", "1")
        fused = sym.simple_bind(mx.cpu(), grad_req=grad_req, x=(2, 3), w=(2, 3))
        assert _fused_steps(fused) > 0
        args = {"x": np.arange(6.).reshape(2, 3) / 7, "w": np.ones((2, 3)) * 0.3}
        want, got = _run(plain, args, []), _run(fused, args, [])
        assert want[1].keys() == got[1].keys()
        for name in want[1]:
            np.testing.assert_allclose(got[1][name], want[1][name], rtol=RTOL, atol=ATOL)


def test_switch_off_and_monitor(monkeypatch):
    x = mx.sym.Variable("x")
    sym = mx.sym.MakeLoss(mx.sym.relu(x * 2.0) + 1.0)
    assert _fused_steps(_bind(sym, {"x": (2, 2)}, False, monkeypatch)) == 0
    ex = _bind(sym, {"x": (2, 2)}, True, monkeypatch)
    assert _fused_steps(ex) > 0
    seen = []
    ex.set_monitor_callback(lambda name, arr: seen.append(name))
    assert _fused_steps(ex) == 0
    ex.forward(is_train=True)
    assert len([n for n in seen if n.endswith("_output")]) == 4


# ---------------------------------------------------------------------------------------------
# RNN cells
# ---------------------------------------------------------------------------------------------
def rnn_stack_symbol(cell_type, steps, hidden):
    """Two unrolled layers of LSTM, GRU or Elman cells, and a sum of squares as the loss."""
    make = {"lstm": lambda p: mx.rnn.LSTMCell(hidden, prefix=p),
            "gru": lambda p: mx.rnn.GRUCell(hidden, prefix=p),
            "rnn": lambda p: mx.rnn.RNNCell(hidden, prefix=p)}[cell_type]
    stack = mx.rnn.SequentialRNNCell()
    stack.add(make("l0_"))
    stack.add(make("l1_"))
    outputs, _ = stack.unroll(steps, inputs=mx.sym.Variable("data"), merge_outputs=True)
    return mx.sym.MakeLoss(mx.sym.sum(outputs * outputs))


@pytest.mark.parametrize("cell_type", ["lstm", "gru", "rnn"])
def test_rnn_cells_fused_equal_unfused(monkeypatch, cell_type):
    steps, batch, width, hidden = 3, 4, 5, 6
    sym = rnn_stack_symbol(cell_type, steps, hidden)
    ex = check_fused_matches(sym, {"data": (batch, steps, width)}, monkeypatch, low=-0.5,
                             high=0.5, expect_fused=cell_type != "rnn")
    if cell_type == "lstm":
        # one group per cell and step: the gate slices, activations and state arithmetic
        assert sum(isinstance(s.op, fusion.FusedGroup) for s in ex._bwd) == 2 * steps


def test_new_bucket_length_compiles_nothing(monkeypatch):
    monkeypatch.setenv("LIGHTMOD_FUSION", "1")
    cell = mx.rnn.LSTMCell(8, prefix="lstm_")

    def bind(length):
        cell.reset()
        outputs, _ = cell.unroll(length, inputs=mx.sym.Variable("data"), merge_outputs=True)
        ex = mx.sym.MakeLoss(outputs).simple_bind(mx.cpu(), data=(2, length, 3))
        ex.forward(is_train=True)
        ex.backward()
        return ex

    # three steps hold every kind of step (the first, a middle one, the last); with two there
    # is no middle step, so its group would be new at any longer length
    bind(3)
    compiled = dict(cpu_fused._launchers)
    for length in (5, 7):
        ex = bind(length)
        assert _fused_steps(ex) > 0
        assert dict(cpu_fused._launchers) == compiled


def test_two_groups_reading_each_other_stay_acyclic(monkeypatch):
    """a and b start two chains; c = a * b extends a's, d = b + a would extend b's and make
    the two groups depend on each other: the planner must refuse one of the joins."""
    x = mx.sym.Variable("x")
    a, b = mx.sym.tanh(x), mx.sym.sigmoid(x)
    c, d = a * b, b + a
    groups = fusion.find_groups(*_graph_shapes(mx.sym.Group([c, d]), x=(3, 4)))
    assert len(groups) == 1
    check_fused_matches(mx.sym.Group([c, d]), {"x": (3, 4)}, monkeypatch)


def _graph_shapes(sym, **shapes):
    from lightmod.symbol import graph as _graph
    g = _graph.IndexedGraph(sym._outputs)
    known = {nid: shapes[g.nodes[nid].name] for nid in g.var_nids}
    entry_shapes = [tuple(s) for s in _graph.infer_shapes(g, known)]
    types = _graph.infer_types(g, {nid: "float32" for nid in g.var_nids})
    return g, entry_shapes, types


def test_disabled_block_binds_unfused(monkeypatch):
    x = mx.sym.Variable("x")
    sym = mx.sym.MakeLoss(mx.sym.relu(x * 2.0) + 1.0)
    monkeypatch.setenv("LIGHTMOD_FUSION", "1")
    with fusion.disabled():
        assert not fusion.enabled()
        assert _fused_steps(sym.simple_bind(mx.cpu(), x=(2, 2))) == 0
    assert fusion.enabled()
    assert _fused_steps(sym.simple_bind(mx.cpu(), x=(2, 2))) > 0
