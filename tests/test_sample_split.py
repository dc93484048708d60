"""Sample-parallel execution (lightmod/sample_split.py): an executor whose graph computes each
sample from that sample alone runs T slices of the batch on T threads. It must give the
unsplit executor's outputs and gradients (within float32 rounding: parameter gradients are
summed per slice), the same bits twice, and keep the unsplit path where a graph does not split.

The thread count is forced (``threads.cap``), so these tests split whatever the machine."""
import contextlib
import os
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lightmod as mx
from lightmod import inference_plan, sample_split
from lightmod.kernels import threads

RTOL, ATOL = 2e-4, 2e-5


@contextlib.contextmanager
def splitting(on=True, count=2):
    """Bind executors with the sample split on (``count`` threads) or off."""
    saved_env = os.environ.get("LIGHTMOD_SAMPLE_SPLIT")
    saved_cap, saved_worth = threads.cap, sample_split._worth_splitting
    os.environ["LIGHTMOD_SAMPLE_SPLIT"] = "1" if on else "0"
    threads.cap = lambda: count
    sample_split._worth_splitting = lambda g: True     # fully connected graphs too
    try:
        yield
    finally:
        threads.cap, sample_split._worth_splitting = saved_cap, saved_worth
        if saved_env is None:
            del os.environ["LIGHTMOD_SAMPLE_SPLIT"]
        else:
            os.environ["LIGHTMOD_SAMPLE_SPLIT"] = saved_env


def _bind(sym, shapes, grad_req, on, count=2):
    with splitting(on, count):
        exe = sym.simple_bind(mx.cpu(), grad_req=grad_req, **shapes)
    assert on or exe._split is None
    return exe


def _fill(exe, seed, label_classes=None):
    rng = np.random.RandomState(seed)
    for name, arr in exe.arg_dict.items():
        if name.endswith("label") and label_classes:
            arr[:] = rng.randint(0, label_classes, arr.shape)
        else:
            arr[:] = rng.uniform(-1, 1, arr.shape)
    for arr in exe.aux_dict.values():
        arr[:] = rng.uniform(0.5, 1.5, arr.shape)
    for arr in exe.grad_arrays:
        if arr is not None:
            arr[:] = rng.uniform(-1, 1, arr.shape)     # seen by grad_req 'add'


def _state(exe):
    outs = [o.asnumpy().copy() for o in exe.outputs]
    grads = {k: v.asnumpy().copy() for k, v in exe.grad_dict.items() if v is not None}
    return outs, grads


def _assert_same(a, b, exact=False):
    def close(x, y, err_msg=""):
        # absolute tolerance relative to the array's scale: an element that cancels to near
        # zero keeps the rounding of its large terms
        scale = max(1.0, float(np.abs(y).max())) if y.size else 1.0
        np.testing.assert_allclose(x, y, RTOL, ATOL * scale, err_msg=err_msg)

    check = np.testing.assert_array_equal if exact else close
    for x, y in zip(a[0], b[0]):
        check(x, y)
    assert set(a[1]) == set(b[1])
    for name in a[1]:
        check(a[1][name], b[1][name], err_msg=name)


# ---------------------------------------------------------------------------------------------
# drawn conv / FC / activation / pooling stacks
# ---------------------------------------------------------------------------------------------
@st.composite
def stacks(draw):
    layers = draw(st.lists(st.fixed_dictionaries({
        "filters": st.integers(1, 4), "kernel": st.integers(1, 3), "pad": st.integers(0, 1),
        "act": st.sampled_from([None, "relu", "tanh", "sigmoid"]),
        "pool": st.sampled_from([None, "max", "avg"])}), min_size=0, max_size=2))
    fc = draw(st.lists(st.tuples(st.integers(1, 6), st.sampled_from([None, "relu", "tanh"])),
                       min_size=1, max_size=2))
    head = draw(st.sampled_from(["softmax", "regression", "out_grad"]))
    batch = draw(st.integers(1, 7))
    chans = draw(st.integers(1, 3))
    size = draw(st.integers(8, 9))      # two conv 3x3 + pool 2x2 stride 1 layers leave 2
    req = draw(st.sampled_from(["write", "add", "null", "mixed"]))
    count = draw(st.sampled_from([2, 3]))
    return layers, fc, head, (batch, chans, size, size), req, count


def _build(layers, fc, head):
    net = mx.sym.var("data")
    for i, layer in enumerate(layers):
        net = mx.sym.Convolution(net, kernel=(layer["kernel"],) * 2, pad=(layer["pad"],) * 2,
                                 num_filter=layer["filters"], name="conv%d" % i)
        if layer["act"]:
            net = mx.sym.Activation(net, act_type=layer["act"])
        if layer["pool"]:
            net = mx.sym.Pooling(net, kernel=(2, 2), stride=(1, 1), pool_type=layer["pool"])
    net = mx.sym.Flatten(net)
    for i, (hidden, act) in enumerate(fc):
        net = mx.sym.FullyConnected(net, num_hidden=hidden, name="fc%d" % i)
        if act:
            net = mx.sym.Activation(net, act_type=act)
    if head == "softmax":
        return mx.sym.SoftmaxOutput(net, name="softmax"), fc[-1][0]
    if head == "regression":
        return mx.sym.LinearRegressionOutput(net, name="lro", grad_scale=1.5), None
    return net * 2 + 1, None


def _req_for(sym, req):
    if req != "mixed":
        return req
    kinds = ("write", "add", "null")
    return {name: kinds[i % 3] for i, name in enumerate(sym.list_arguments())}


def _step(exe, head, batch_shape, is_train=True, seed=0):
    exe.forward(is_train=is_train)
    if is_train:
        if head == "out_grad":
            rng = np.random.RandomState(seed)
            exe.backward(mx.nd.array(rng.uniform(-1, 1, exe.outputs[0].shape)))
        else:
            exe.backward()
    return _state(exe)


@settings(max_examples=30, deadline=None)
@given(case=stacks(), seed=st.integers(0, 2 ** 16))
def test_split_matches_unsplit(case, seed):
    layers, fc, head, shape, req, count = case
    sym, classes = _build(layers, fc, head)
    grad_req = _req_for(sym, req)
    results = []
    for on in (True, False):
        exe = _bind(sym, {"data": shape}, grad_req, on, count)
        if on:
            # a batch of one does not split; fewer samples than threads use fewer threads
            assert (exe._split is not None) == (shape[0] >= 2)
            if exe._split is not None:
                assert len(exe._split.children) == min(count, shape[0])
        _fill(exe, seed, classes)
        inference = [o.asnumpy().copy() for o in exe.forward(is_train=False)]
        results.append((inference, _step(exe, head, shape, seed=seed)))
    np.testing.assert_allclose(results[0][0][0], results[1][0][0], RTOL, ATOL)
    _assert_same(results[0][1], results[1][1])


def _lenet_like():
    net = mx.sym.var("data")
    net = mx.sym.Convolution(net, kernel=(3, 3), num_filter=6, name="conv1")
    net = mx.sym.Activation(net, act_type="tanh")
    net = mx.sym.Pooling(net, kernel=(2, 2), stride=(2, 2), pool_type="max")
    net = mx.sym.Convolution(net, kernel=(3, 3), num_filter=8, name="conv2")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.Flatten(net)
    net = mx.sym.FullyConnected(net, num_hidden=12, name="fc1")
    net = mx.sym.Activation(net, act_type="tanh")
    net = mx.sym.FullyConnected(net, num_hidden=4, name="fc2")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def test_same_bits_twice():
    sym = _lenet_like()
    shapes = {"data": (9, 2, 12, 12)}
    runs = []
    for _ in range(2):
        exe = _bind(sym, shapes, "write", True)
        _fill(exe, 4, 4)
        first = _step(exe, "softmax", None)
        runs.append(first)
        _assert_same(first, _step(exe, "softmax", None), exact=True)
    _assert_same(runs[0], runs[1], exact=True)


def test_add_accumulates_over_steps():
    sym = _lenet_like()
    shapes = {"data": (7, 2, 12, 12)}
    results = []
    for on in (True, False):
        exe = _bind(sym, shapes, "add", on)
        _fill(exe, 5, 4)
        for _ in range(3):
            state = _step(exe, "softmax", None)
        results.append(state)
    _assert_same(results[0], results[1])


@pytest.mark.parametrize("req", ["write", "add"])
def test_large_gradients_fold_in_parts(req):
    """Parameter gradients large enough to be added in parts on several threads."""
    net = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=300, name="fc1")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.LinearRegressionOutput(mx.sym.FullyConnected(net, num_hidden=3, name="fc2"),
                                        name="lro")
    shapes = {"data": (5, 301)}
    results = []
    for on in (True, False):
        exe = _bind(net, shapes, req, on, 3)
        if on:
            assert [len(t) for t in [exe._split._tasks_fold]] == [3]
        _fill(exe, 17)
        for _ in range(2):
            state = _step(exe, "regression", None)
        results.append(state)
    _assert_same(results[0], results[1])


# ---------------------------------------------------------------------------------------------
# BatchNorm: inference splits (folded into the convolution), training does not
# ---------------------------------------------------------------------------------------------
def _conv_bn(global_stats=False):
    net = mx.sym.var("data")
    net = mx.sym.Convolution(net, kernel=(3, 3), pad=(1, 1), num_filter=5, name="conv")
    net = mx.sym.BatchNorm(net, fix_gamma=False, use_global_stats=global_stats, name="bn")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.Pooling(net, global_pool=True, kernel=(1, 1), pool_type="avg")
    net = mx.sym.FullyConnected(mx.sym.Flatten(net), num_hidden=3, name="fc")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def test_batchnorm_inference_splits_training_does_not():
    sym = _conv_bn()
    shapes = {"data": (5, 3, 6, 6)}
    results = []
    for on in (True, False):
        exe = _bind(sym, shapes, "write", on)
        _fill(exe, 6, 3)
        if on:
            assert exe._split is not None and not exe._split.trains
        inference = exe.forward(is_train=False)[0].asnumpy().copy()
        if on:
            # the children ran their inference plans, BatchNorm folded into the convolution
            assert all(c._inference_plan.fused_count >= 1 for c in exe._split.children)
        # backward after an inference forward replays the plain walk (unsplit)
        exe.backward()
        after_inference = _state(exe)
        train = _step(exe, "softmax", None)
        aux = {k: v.asnumpy().copy() for k, v in exe.aux_dict.items()}
        results.append((inference, after_inference, train, aux))
    np.testing.assert_allclose(results[0][0], results[1][0], RTOL, ATOL)
    _assert_same(results[0][1], results[1][1])
    _assert_same(results[0][2], results[1][2], exact=True)     # one path: the parent's
    for name in results[0][3]:
        np.testing.assert_array_equal(results[0][3][name], results[1][3][name])


def test_batchnorm_global_stats_trains_split():
    sym = _conv_bn(global_stats=True)
    shapes = {"data": (6, 3, 6, 6)}
    results = []
    for on in (True, False):
        exe = _bind(sym, shapes, "write", on)
        if on:
            assert exe._split.trains
        _fill(exe, 7, 3)
        results.append(_step(exe, "softmax", None))
    _assert_same(results[0], results[1])


def test_backward_after_split_inference_forward():
    sym = _lenet_like()
    shapes = {"data": (6, 2, 12, 12)}
    results = []
    for on in (True, False):
        exe = _bind(sym, shapes, "write", on)
        _fill(exe, 8, 4)
        exe.forward(is_train=False)
        exe.backward()
        results.append(_state(exe))
    _assert_same(results[0], results[1])


# ---------------------------------------------------------------------------------------------
# graphs that keep the unsplit path
# ---------------------------------------------------------------------------------------------
def _not_separable():
    data = mx.sym.var("data")
    centred = mx.sym.broadcast_sub(data, mx.sym.mean(data, axis=0, keepdims=True))
    yield mx.sym.FullyConnected(centred, num_hidden=3)
    yield mx.sym.SoftmaxOutput(mx.sym.FullyConnected(data, num_hidden=3), normalization="batch")
    yield mx.sym.Reshape(mx.sym.FullyConnected(data, num_hidden=4), shape=(-1, 2))
    yield mx.sym.FullyConnected(data, num_hidden=3) + mx.sym.ones((4, 3))


@pytest.mark.parametrize("index", range(4))
def test_not_separable_graph_keeps_the_unsplit_path(index):
    sym = list(_not_separable())[index]
    with splitting(True):
        exe = sym.simple_bind(mx.cpu(), data=(4, 5))
    assert exe._split is None
    with splitting(False):
        ref = sym.simple_bind(mx.cpu(), data=(4, 5))
    for e in (exe, ref):
        _fill(e, 9, 3)
        e.forward(is_train=True)
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), ref.outputs[0].asnumpy())


def test_dropout_training_does_not_split():
    net = mx.sym.Dropout(mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=6), p=0.5)
    net = mx.sym.LinearRegressionOutput(mx.sym.FullyConnected(net, num_hidden=2), name="lro")
    exe = _bind(net, {"data": (4, 5)}, "write", True)
    assert exe._split is not None and not exe._split.trains


def test_fully_connected_graphs_keep_blas_threads():
    net = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=6)
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(net, num_hidden=3), name="softmax")
    assert not sample_split._worth_splitting(net.simple_bind(mx.cpu(), data=(4, 5))._g)
    assert sample_split._worth_splitting(_lenet_like().simple_bind(
        mx.cpu(), data=(4, 2, 12, 12))._g)


def test_switch_off():
    with splitting(False):
        exe = _lenet_like().simple_bind(mx.cpu(), data=(6, 2, 12, 12))
    assert exe._split is None
    assert not sample_split.enabled() or os.environ.get("LIGHTMOD_SAMPLE_SPLIT") != "0"


# ---------------------------------------------------------------------------------------------
# what must keep working: monitor, reshape, copy_params_from, shared executors
# ---------------------------------------------------------------------------------------------
def test_monitor_runs_unsplit_and_split_resumes():
    sym = _lenet_like()
    shapes = {"data": (6, 2, 12, 12)}
    exe = _bind(sym, shapes, "write", True)
    ref = _bind(sym, shapes, "write", False)
    _fill(exe, 10, 4)
    _fill(ref, 10, 4)
    seen = []
    exe.set_monitor_callback(lambda name, arr: seen.append(name))
    _assert_same(_step(exe, "softmax", None), _step(ref, "softmax", None))
    assert not exe._split_ran and any(name.startswith("conv1") for name in seen)
    exe.set_monitor_callback(None)
    _assert_same(_step(exe, "softmax", None), _step(ref, "softmax", None))
    assert exe._split_ran


def test_reshape_and_copy_params_from():
    sym = _lenet_like()
    exe = _bind(sym, {"data": (8, 2, 12, 12)}, "write", True)
    ref = _bind(sym, {"data": (8, 2, 12, 12)}, "write", False)
    _fill(exe, 11, 4)
    _fill(ref, 11, 4)
    with splitting(True):
        small = exe.reshape(data=(5, 2, 12, 12), softmax_label=(5,))
    assert small._split is not None and len(small._split.children) == 2
    with splitting(False):
        small_ref = ref.reshape(data=(5, 2, 12, 12), softmax_label=(5,))
    rng = np.random.RandomState(12)
    new = {"conv1_weight": mx.nd.array(rng.uniform(-1, 1, (6, 2, 3, 3)))}
    for e in (small, small_ref):
        e.copy_params_from(new)
    _assert_same(_step(small, "softmax", None), _step(small_ref, "softmax", None))
    _assert_same(_step(exe, "softmax", None), _step(ref, "softmax", None))


def test_shared_exec_bind():
    sym = _lenet_like()
    with splitting(True):
        base = sym.simple_bind(mx.cpu(), data=(8, 2, 12, 12))
        other = sym.simple_bind(mx.cpu(), data=(4, 2, 12, 12), shared_exec=base,
                                shared_arg_names=[n for n in sym.list_arguments()
                                                  if n not in ("data", "softmax_label")])
    with splitting(False):
        ref = sym.simple_bind(mx.cpu(), data=(4, 2, 12, 12))
    _fill(base, 13, 4)
    _fill(ref, 13, 4)
    for name in sym.list_arguments():
        other.arg_dict[name][:] = ref.arg_dict[name]
    _step(base, "softmax", None)
    got, want = _step(other, "softmax", None), _step(ref, "softmax", None)
    np.testing.assert_allclose(got[0][0], want[0][0], RTOL, ATOL)


def test_split_children_share_the_parents_buffers():
    """The children's internal buffers are row slices of the parent's: splitting allocates
    only the per-child parameter gradients (and per-child statistics)."""
    sym = _lenet_like()
    exe = _bind(sym, {"data": (8, 2, 12, 12)}, "write", True)
    params = sum(g.size * 4 for name, g in exe.grad_dict.items()
                 if g is not None and name not in ("data", "softmax_label"))
    extra = sum(c._total_exec_bytes for c in exe._split.children)
    assert extra <= params * (len(exe._split.children) - 1) + 4096


# ---------------------------------------------------------------------------------------------
# Module.fit, and no allocation per step
# ---------------------------------------------------------------------------------------------
def _fit(on):
    rng = np.random.RandomState(14)
    x = rng.uniform(-1, 1, (45, 2, 12, 12)).astype(np.float32)
    y = rng.randint(0, 4, 45).astype(np.float32)
    with splitting(on):
        mod = mx.mod.Module(_lenet_like(), context=mx.cpu())
        it = mx.io.NDArrayIter(x, y, batch_size=9)
        mx.random.seed(3)
        mod.fit(it, num_epoch=2, optimizer="sgd",
                optimizer_params={"learning_rate": 0.1, "momentum": 0.9},
                initializer=mx.init.Xavier(), eval_metric="acc")
    assert (mod._exec_group.execs[0]._split is not None) == on
    args, _ = mod.get_params()
    return {k: v.asnumpy() for k, v in args.items()}, mod.predict(it).asnumpy()


def test_module_fit_trains_like_unsplit():
    (split_args, split_pred), (args, pred) = _fit(True), _fit(False)
    for name in args:
        np.testing.assert_allclose(split_args[name], args[name], rtol=1e-3, atol=1e-4,
                                   err_msg=name)
    np.testing.assert_allclose(split_pred, pred, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("is_train", [True, False])
def test_no_allocation_per_step(is_train):
    exe = _bind(_lenet_like(), {"data": (16, 2, 12, 12)}, "write", True)
    _fill(exe, 15, 4)

    def step():
        exe.forward(is_train=is_train)
        if is_train:
            exe.backward()

    for _ in range(3):
        step()
    smallest = min(c.outputs[0].size for c in exe._split.children) * 4
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        for _ in range(3):
            step()
        grew = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    # a buffer of the step (the smallest: a child's 4-float-per-sample output is 128 bytes;
    # the intermediate ones are kilobytes) would show; Python bookkeeping stays well below
    assert exe._split_ran     # (the children also back-propagate after an inference pass)
    assert grew < 16384, (grew, smallest)


def test_inference_plan_state_after_split_forward():
    exe = _bind(_lenet_like(), {"data": (6, 2, 12, 12)}, "null", True)
    _fill(exe, 16, 4)
    exe.forward(is_train=False)
    assert exe._forward_done in (True, inference_plan.PLANNED)
