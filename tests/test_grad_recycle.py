"""A training plan recycles the buffers of dead intermediate gradients (lightmod/executor.py,
``Executor._gradient_buffers``): a gradient takes the memory of one whose last access came in an
earlier backward step. The results must be bit for bit those of a plan that gives every
gradient its own buffer, on hand-made graphs, on drawn ones, across steps, buckets, reshapes
and gradient requests, while the gradient memory shrinks to what is alive at once."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lightmod as mx
from lightmod import executor as executor_mod
from lightmod import fusion


def _bind(sym, shapes, recycle, monkeypatch, grad_req="write"):
    """Bind with gradients for every argument but the data and labels."""
    monkeypatch.setattr(executor_mod, "recycle_gradients", recycle)
    reqs = {name: "null" if name in ("data", "softmax_label") else grad_req
            for name in sym.list_arguments()}
    return sym.simple_bind(mx.cpu(), grad_req=reqs, **shapes)


def _fill(exe, seed):
    rng = np.random.RandomState(seed)
    for name in sorted(exe.arg_dict):
        arr = exe.arg_dict[name]
        if name.endswith("label"):
            arr[:] = rng.randint(0, arr.shape[-1] if arr.ndim > 1 else 3, arr.shape)
        else:
            arr[:] = rng.uniform(-1, 1, arr.shape)


def _step(exe, seed, head_grads=False):
    """One forward/backward pass on inputs drawn from ``seed``: (outputs, gradients)."""
    _fill(exe, seed)
    exe.forward(is_train=True)
    if head_grads:
        rng = np.random.RandomState(seed + 100)
        exe.backward([mx.nd.array(rng.uniform(-1, 1, o.shape)) for o in exe.outputs])
    else:
        exe.backward()
    return ([o.asnumpy() for o in exe.outputs],
            {n: g.asnumpy() for n, g in exe.grad_dict.items() if g is not None})


def _assert_same(a, b):
    outs_a, grads_a = a
    outs_b, grads_b = b
    for x, y in zip(outs_a, outs_b):
        np.testing.assert_array_equal(x, y)
    assert sorted(grads_a) == sorted(grads_b)
    for name in grads_a:
        np.testing.assert_array_equal(grads_a[name], grads_b[name], err_msg=name)


def _grad_roots(exe):
    """The distinct memories of the planned gradient buffers (not the bound gradients)."""
    roots = {}
    for key, arr in list(exe._pool.items()) + list(exe._recycled.items()):
        if key[0] != "grad":
            continue
        root = arr._data
        while isinstance(root.base, np.ndarray):
            root = root.base
        roots[id(root)] = root
    return list(roots.values())


def _grad_bytes(exe):
    return sum(r.nbytes for r in _grad_roots(exe))


def _chain(depth):
    """A chain of FullyConnected layers and element-wise math, whose every link is read
    twice (its gradient is written by two consumers)."""
    x = mx.sym.var("x")
    h = x
    for i in range(depth):
        a = mx.sym.tanh(mx.sym.FullyConnected(h, num_hidden=5, name="fc%d" % i))
        h = mx.sym.broadcast_mul(a, mx.sym.sigmoid(a), name="m%d" % i) + a
    return mx.sym.MakeLoss(mx.sym.sum(h * h))


def _mlp():
    data = mx.sym.var("data")
    net = mx.sym.FullyConnected(data, num_hidden=16, name="fc1")
    net = mx.sym.Activation(net, act_type="relu")
    skip = net
    net = mx.sym.FullyConnected(net, num_hidden=16, name="fc2")
    net = mx.sym.Activation(net + skip, act_type="tanh")
    net = mx.sym.FullyConnected(net, num_hidden=5, name="fc3")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def _lstm(length):
    cell = mx.rnn.LSTMCell(num_hidden=8, prefix="l0_")
    data = mx.sym.var("data")
    embed = mx.sym.Embedding(data, input_dim=11, output_dim=6, name="embed")
    out, _ = cell.unroll(length, inputs=embed, merge_outputs=True)
    pred = mx.sym.FullyConnected(mx.sym.Reshape(out, shape=(-1, 8)), num_hidden=11, name="pred")
    label = mx.sym.Reshape(mx.sym.var("softmax_label"), shape=(-1,))
    return mx.sym.SoftmaxOutput(pred, label, name="softmax")


NETS = {
    "chain": (lambda: _chain(6), {"x": (3, 5)}),
    "mlp": (_mlp, {"data": (4, 7), "softmax_label": (4,)}),
    "lstm": (lambda: _lstm(5), {"data": (3, 5), "softmax_label": (3, 5)}),
}


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("name", sorted(NETS))
def test_recycled_plan_computes_the_same_bits(name, fused, monkeypatch):
    build, shapes = NETS[name]
    monkeypatch.setenv("LIGHTMOD_FUSION", "1" if fused else "0")
    own = _bind(build(), shapes, False, monkeypatch)
    recycled = _bind(build(), shapes, True, monkeypatch)
    assert recycled._recycled, "nothing was recycled"
    assert _grad_bytes(recycled) < _grad_bytes(own)
    for seed in (0, 1, 2):      # later steps find the last step's values in the memory
        _assert_same(_step(own, seed), _step(recycled, seed))


def test_gradient_memory_is_what_is_alive_at_once(monkeypatch):
    """A chain's gradients die one link after they are made: the recycled plan's gradient
    memory does not grow with the chain's length."""
    shapes = {"x": (8, 5)}
    sizes = {}
    for depth in (4, 16):
        own = _bind(_chain(depth), shapes, False, monkeypatch)
        recycled = _bind(_chain(depth), shapes, True, monkeypatch)
        sizes[depth] = (len(_grad_roots(own)), len(_grad_roots(recycled)))
    assert sizes[16][0] > sizes[4][0]           # one buffer per gradient without recycling
    assert sizes[16][1] == sizes[4][1] <= 6     # a few, whatever the depth


def test_head_gradients_and_add_requests(monkeypatch):
    """Heads that are read inside the graph too, head gradients given to backward, and
    arguments accumulating ('add') over two passes."""
    x, w = mx.sym.var("x"), mx.sym.var("w")
    a = mx.sym.tanh(x * w)
    b = mx.sym.sigmoid(a) * a
    heads = mx.sym.Group([a, b + 1.0, mx.sym.relu(b - a)])
    shapes = {"x": (4, 6), "w": (4, 6)}
    own = _bind(heads, shapes, False, monkeypatch, grad_req="add")
    recycled = _bind(heads, shapes, True, monkeypatch, grad_req="add")
    for seed in (3, 4):
        _assert_same(_step(own, seed, head_grads=True), _step(recycled, seed, head_grads=True))


def test_monitor_sees_every_gradient_in_its_own_memory(monkeypatch):
    """A monitored executor gives each gradient its own buffer (a monitor may keep what it
    was shown)."""
    exe = _bind(_chain(4), {"x": (3, 5)}, True, monkeypatch)
    assert any(key[0] == "grad" for key in exe._recycled)
    seen = []
    exe.set_monitor_callback(lambda name, arr: seen.append(name), monitor_all=True)
    _step(exe, 0)
    assert seen
    assert not any(key[0] == "grad" for key in exe._recycled)


def test_reshaped_executor_of_a_recycled_plan(monkeypatch):
    """A reshaped executor takes the old one's buffers by key: values the old plan put in one
    memory must not come back as two buffers alive at once."""
    build, _ = NETS["lstm"]
    big = _bind(build(), {"data": (6, 5), "softmax_label": (6, 5)}, True, monkeypatch)
    _step(big, 0)
    small = big.reshape(data=(2, 5), softmax_label=(2, 5))
    fresh = _bind(build(), {"data": (2, 5), "softmax_label": (2, 5)}, True, monkeypatch)
    _assert_same(_step(fresh, 5), _step(small, 5))
    wide = big.reshape(allow_up_sizing=True, data=(6, 5), softmax_label=(6, 5))
    again = _bind(build(), {"data": (6, 5), "softmax_label": (6, 5)}, False, monkeypatch)
    _assert_same(_step(again, 6), _step(wide, 6))


def _bucketing(recycle, monkeypatch):
    monkeypatch.setattr(executor_mod, "recycle_gradients", recycle)
    cell = mx.rnn.LSTMCell(num_hidden=8, prefix="l0_")

    def sym_gen(length):
        cell.reset()
        data = mx.sym.var("data")
        embed = mx.sym.Embedding(data, input_dim=11, output_dim=6, name="embed")
        out, _ = cell.unroll(length, inputs=embed, merge_outputs=True)
        pred = mx.sym.FullyConnected(mx.sym.Reshape(out, shape=(-1, 8)), num_hidden=11,
                                     name="pred")
        label = mx.sym.Reshape(mx.sym.var("softmax_label"), shape=(-1,))
        return mx.sym.SoftmaxOutput(pred, label, name="softmax"), ("data",), ("softmax_label",)

    mod = mx.mod.BucketingModule(sym_gen, default_bucket_key=6, context=mx.cpu())
    mod.bind(data_shapes=[("data", (3, 6))], label_shapes=[("softmax_label", (3, 6))])
    mx.random.seed(7)
    mod.init_params(initializer=mx.init.Xavier())
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.5,
                                                          "momentum": 0.9})
    rng = np.random.RandomState(0)
    outputs = []
    for length in (6, 2, 4, 6, 2):
        batch = mx.io.DataBatch(
            [mx.nd.array(rng.randint(0, 11, (3, length)))],
            [mx.nd.array(rng.randint(0, 11, (3, length)))], bucket_key=length,
            provide_data=[mx.io.DataDesc("data", (3, length))],
            provide_label=[mx.io.DataDesc("softmax_label", (3, length))])
        mod.forward_backward(batch)
        mod.update()
        outputs.append(mod.get_outputs()[0].asnumpy())
    return outputs, mod.get_params()[0]


def test_bucketing_module_trains_the_same(monkeypatch):
    """Buckets bound in the default bucket's memory, each recycling its gradients there."""
    outs_own, params_own = _bucketing(False, monkeypatch)
    outs_recycled, params_recycled = _bucketing(True, monkeypatch)
    for a, b in zip(outs_own, outs_recycled):
        np.testing.assert_array_equal(a, b)
    for name in params_own:
        np.testing.assert_array_equal(params_own[name].asnumpy(),
                                      params_recycled[name].asnumpy(), err_msg=name)


_UNARY = ["tanh", "sigmoid", "relu", "square", "negative"]
_BINARY = ["elemwise_add", "elemwise_mul", "elemwise_sub", "broadcast_add"]


@st.composite
def _graphs(draw):
    """A random graph over two inputs of one shape: each node an element-wise unary or binary
    operator, or a shape-keeping FullyConnected, of earlier nodes; the loss sums a few."""
    steps = []
    count = draw(st.integers(3, 12))
    for i in range(count):
        kind = draw(st.sampled_from(["unary", "binary", "fc"]))
        first = draw(st.integers(0, i + 1))
        second = draw(st.integers(0, i + 1))
        op = draw(st.sampled_from(_UNARY if kind == "unary" else _BINARY if kind == "binary"
                                  else ["fc"]))
        steps.append((op, first, second))
    heads = draw(st.lists(st.integers(0, count + 1), min_size=1, max_size=3, unique=True))
    return steps, heads


def _build(steps, heads):
    nodes = [mx.sym.var("x"), mx.sym.var("y")]
    for i, (op, first, second) in enumerate(steps):
        a, b = nodes[first], nodes[second]
        if op == "fc":
            node = mx.sym.FullyConnected(a, num_hidden=6, name="fc%d" % i)
        elif op in _UNARY:
            node = getattr(mx.sym, op)(a)
        else:
            node = getattr(mx.sym, op)(a, b)
        nodes.append(node)
    total = None
    for h in heads:
        term = mx.sym.sum(nodes[h] * nodes[h])
        total = term if total is None else total + term
    return mx.sym.MakeLoss(total)


@settings(max_examples=40, deadline=None)
@given(graph=_graphs(), fused=st.booleans())
def test_drawn_graphs_compute_the_same_bits(graph, fused):
    steps, heads = graph
    shapes = {"x": (4, 6), "y": (4, 6)}
    results = []
    for recycle in (False, True):
        old = executor_mod.recycle_gradients
        executor_mod.recycle_gradients = recycle
        try:
            with (fusion.disabled() if not fused else _nothing()):
                exe = _build(steps, heads).simple_bind(mx.cpu(), **shapes)
        finally:
            executor_mod.recycle_gradients = old
        results.append([_step(exe, seed) for seed in (0, 1)])
    for own, recycled in zip(*results):
        _assert_same(own, recycled)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
