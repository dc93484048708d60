"""mx.optimizer: base-class semantics, the registry, the Updater, sparse (lazy) updates,
multi-precision, aggregation, and the update operators (nd.sgd_update ...).

Numbers are checked against numpy references of MXNet 1.9.1's formulas (the golden
trajectories in test_optimizer_golden.py pin them to MXNet itself).
"""
import pickle
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lightmod as mx
from lightmod.base import MXNetError

f32 = np.float32


def nd(x, dtype="float32", stype="default"):
    a = mx.nd.array(np.asarray(x), dtype=dtype)
    return a.tostype(stype) if stype != "default" else a


class FakeSymbol:
    """What Optimizer reads from a symbol: attr_dict() and list_arguments()."""

    def __init__(self, attrs, args):
        self._attrs, self._args = attrs, args

    def attr_dict(self):
        return self._attrs

    def list_arguments(self):
        return self._args


# ---------------------------------------------------------------------------------------------
# learning rate, multipliers, counters (test_learning_rate, test_lr_wd_mult)
# ---------------------------------------------------------------------------------------------
def test_learning_rate_defaults_and_setter():
    o = mx.optimizer.Optimizer(learning_rate=0.02)
    assert o.learning_rate == 0.02
    o.set_learning_rate(0.04)
    assert o.learning_rate == 0.04 and o.lr == 0.04
    assert mx.optimizer.Optimizer().learning_rate == 0.01


def test_learning_rate_with_scheduler():
    sched = mx.lr_scheduler.FactorScheduler(step=1, factor=0.5, base_lr=1.0)
    o = mx.optimizer.Optimizer(lr_scheduler=sched)
    assert o.lr is None and o.learning_rate == 1.0
    o.num_update = 3
    assert o.learning_rate == 0.25
    # a given learning_rate overwrites the scheduler's base_lr
    sched2 = mx.lr_scheduler.FactorScheduler(step=1, factor=0.5, base_lr=1.0)
    mx.optimizer.Optimizer(learning_rate=0.3, lr_scheduler=sched2)
    assert sched2.base_lr == 0.3


def test_set_learning_rate_with_scheduler_raises_user_warning():
    o = mx.optimizer.SGD(lr_scheduler=mx.lr_scheduler.FactorScheduler(step=1))
    with pytest.raises(UserWarning):
        o.set_learning_rate(0.5)


def test_lr_wd_mult_from_symbol_names_and_user_dicts():
    sym = FakeSymbol({"fc1_weight": {"__lr_mult__": "0.0"}, "fc1_bias": {"__lr_mult__": "1.0"},
                      "fc2_weight": {"__wd_mult__": "0.5"}, "fc2_bias": {"__wd_mult__": "0.5"}},
                     ["data", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"])
    idx2name = {0: "fc1_weight", 1: "fc1_bias", 2: "fc2_weight", 3: "fc2_bias"}
    o = mx.optimizer.create("sgd", sym=sym, param_idx2name=idx2name, learning_rate=1.0, wd=0.1)
    assert o.lr_mult == {"fc1_weight": 0.0, "fc1_bias": 1.0}
    assert o.wd_mult == {"fc1_bias": 0.0, "fc2_weight": 0.5, "fc2_bias": 0.5}
    assert o._get_lrs([0, 1, 2]) == [0.0, 1.0, 1.0]
    assert o._get_wds([0, 1, 2, 3]) == pytest.approx([0.1, 0.0, 0.05, 0.05])
    # user dicts win, by name or by index; lookups by name work for kvstore keys
    o.set_lr_mult({"fc2_weight": 3.0, 1: 0.5})
    assert o._get_lr(2) == 3.0 and o._get_lr(1) == 0.5 and o._get_lr("fc2_weight") == 3.0
    assert o.lr_mult["fc1_weight"] == 0.0      # symbol attributes are re-read
    # LARS: only *_weight gets decay by default (gamma included)
    lars = mx.optimizer.LARS(param_idx2name={0: "bn_gamma", 1: "fc_weight"}, wd=0.1)
    assert lars.wd_mult == {"bn_gamma": 0.0}


def test_lr_wd_mult_from_a_real_symbol():
    """MXNet's test_lr_wd_mult expectations: op attributes reach the auto-created weights."""
    data = mx.sym.Variable("data")
    bias = mx.sym.Variable("fc1_bias", lr_mult=1.0)
    fc1 = mx.sym.FullyConnected(data=data, bias=bias, name="fc1", num_hidden=10, lr_mult=0)
    fc2 = mx.sym.FullyConnected(data=fc1, name="fc2", num_hidden=10, wd_mult=0.5)
    names = ["fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]
    opt = mx.optimizer.create("sgd", sym=fc2, param_idx2name=dict(enumerate(names)))
    assert opt.lr_mult == {"fc1_bias": 1.0, "fc1_weight": 0.0}
    assert opt.wd_mult == {"fc2_bias": 0.5, "fc2_weight": 0.5, "fc1_bias": 0.0}


def test_param_dict_wins():
    class P:
        lr_mult, wd_mult = 2.0, 3.0
    o = mx.optimizer.SGD(learning_rate=0.1, wd=0.1, param_dict={0: P()})
    o.set_lr_mult({0: 10.0})
    assert o._get_lr(0) == pytest.approx(0.2) and o._get_wd(0) == pytest.approx(0.3)
    state = pickle.loads(pickle.dumps(o))
    assert state.param_dict == {} and "param_dict" not in o.__getstate__()


def test_update_counts_per_index_and_device():
    o = mx.optimizer.Adam(begin_num_update=5)
    o._update_count(0)
    o._update_count([0, 1])
    assert o._index_update_count == {0: 7, 1: 6} and o.num_update == 7
    o._set_current_context(1)
    o._update_count(0)
    assert o._index_update_count == {0: 6} and o.num_update == 7
    assert o._all_index_update_counts[0] == {0: 7, 1: 6}


def test_registry():
    @mx.optimizer.register
    class MyOpt(mx.optimizer.Optimizer):
        def update(self, index, weight, grad, state):
            weight[:] -= grad

    try:
        assert isinstance(mx.optimizer.create("MYOPT"), MyOpt)
        assert isinstance(mx.optimizer.Optimizer.create_optimizer("myopt"), MyOpt)
        with pytest.warns(UserWarning):
            mx.optimizer.register(MyOpt)
    finally:
        del mx.optimizer.Optimizer.opt_registry["myopt"]
    with pytest.raises(ValueError):
        mx.optimizer.create("no_such_optimizer")
    assert isinstance(mx.optimizer.create("ccsgd"), mx.optimizer.SGD)
    for name in ("sgd", "nag", "signum", "ftml", "lars", "lbsgd", "lamb", "dcasgd", "sgld",
                 "adam", "adagrad", "rmsprop", "adadelta", "ftrl", "adamax", "nadam", "test"):
        assert name in mx.optimizer.Optimizer.opt_registry


def test_ftrl_has_its_own_default_rate():
    assert mx.optimizer.Ftrl().lr == 0.1
    assert mx.optimizer.Signum().lr == 0.01 and mx.optimizer.Adam().lr == 0.001


# ---------------------------------------------------------------------------------------------
# A Python optimizer on top of the base class (MXNet's test_optimizer.py pattern)
# ---------------------------------------------------------------------------------------------
class PySGD(mx.optimizer.Optimizer):
    """MXNet's reference SGD written with nd operations and the base-class helpers."""

    def __init__(self, momentum=0.0, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum

    def create_state(self, index, weight):
        return None if self.momentum == 0.0 else mx.nd.zeros(weight.shape, weight.context,
                                                              dtype=weight.dtype)

    def update(self, index, weight, grad, state):
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        self._update_count(index)
        g = grad * self.rescale_grad
        if self.clip_gradient is not None:
            g = mx.nd.clip(g, -self.clip_gradient, self.clip_gradient)
        if state is None:
            weight[:] = (1 - lr * wd) * weight - lr * g
        else:
            state[:] = self.momentum * state - lr * wd * weight - lr * g
            weight[:] += state


@settings(max_examples=15, deadline=None)
@given(momentum=st.sampled_from([0.0, 0.9]), clip=st.sampled_from([None, 0.3]),
       rescale=st.sampled_from([1.0, 0.14]), wd=st.sampled_from([0.0, 0.05]),
       shape=st.sampled_from([(3,), (4, 5), (2, 3, 2)]), seed=st.integers(0, 100))
def test_sgd_matches_python_reference(momentum, clip, rescale, wd, shape, seed):
    rng = np.random.default_rng(seed)
    w0, g = rng.uniform(-1, 1, shape), rng.uniform(-1, 1, shape)
    kw = dict(momentum=momentum, clip_gradient=clip, rescale_grad=rescale, wd=wd,
              learning_rate=0.1)
    ref, fused = PySGD(**kw), mx.optimizer.SGD(**kw)
    wr, wf = nd(w0), nd(w0)
    sr, sf = ref.create_state(0, wr), fused.create_state(0, wf)
    for _ in range(2):
        ref.update(0, wr, nd(g), sr)
        fused.update(0, wf, nd(g), sf)
    np.testing.assert_allclose(wf.asnumpy(), wr.asnumpy(), rtol=1e-5, atol=1e-6)
    if sr is not None:
        np.testing.assert_allclose(sf.asnumpy(), sr.asnumpy(), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# numpy references of the fused formulas, random shapes and hyper-parameters
# ---------------------------------------------------------------------------------------------
def _clip(x, c):
    return np.clip(x, -c, c) if c is not None and c >= 0 else x


def _r(x):
    """A hyper-parameter as the kernel sees it (MXNet's operator parameters are float32)."""
    return float(np.float32(x))


def ref_adam(w, g, m, v, lr, wd, b1, b2, eps, rs, clip, t):
    lr_t = _r(lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t))   # computed in Python, then cast
    b1, b2, eps, wd, rs = _r(b1), _r(b2), _r(eps), _r(wd), _r(rs)
    gr = _clip(rs * g + wd * w, clip)
    m[:] = b1 * m + (1 - b1) * gr
    v[:] = b2 * v + (1 - b2) * gr * gr
    return w - lr_t * m / (np.sqrt(v) + eps)


def ref_rmsprop(w, g, n, lr, wd, g1, eps, rs, clip, clip_w):
    lr, wd, g1, eps = _r(lr), _r(wd), _r(g1), _r(eps)
    gr = _clip(rs * g + wd * w, clip)
    n[:] = (1 - g1) * gr * gr + g1 * n
    return _clip(w - lr * gr / np.sqrt(n + eps), clip_w)


@settings(max_examples=12, deadline=None)
@given(shape=st.sampled_from([(5,), (3, 4), (2, 2, 3)]), seed=st.integers(0, 1000),
       clip=st.sampled_from([None, 0.2]), wd=st.sampled_from([0.0, 0.03]),
       dtype=st.sampled_from(["float32", "float64"]))
def test_adam_and_rmsprop_match_numpy(shape, seed, clip, wd, dtype):
    rng = np.random.default_rng(seed)
    w0 = rng.uniform(-1, 1, shape)
    grads = [rng.uniform(-1, 1, shape) for _ in range(3)]
    # float64 weights still get float32 hyper-parameters (MXNet's operator parameters)
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == "float32" else dict(rtol=1e-7, atol=1e-10)

    adam = mx.optimizer.Adam(learning_rate=0.01, wd=wd, clip_gradient=clip, rescale_grad=0.5)
    w = nd(w0, dtype)
    state = adam.create_state(0, w)
    rw, rm, rv = w0.copy(), np.zeros(shape), np.zeros(shape)
    for t, g in enumerate(grads, 1):
        adam.update(0, w, nd(g, dtype), state)
        rw = ref_adam(rw, g, rm, rv, 0.01, wd, 0.9, 0.999, 1e-8, 0.5, clip, t)
    np.testing.assert_allclose(w.asnumpy(), rw, **tol)
    np.testing.assert_allclose(state[1].asnumpy(), rv, **tol)

    rms = mx.optimizer.RMSProp(learning_rate=0.01, wd=wd, clip_gradient=clip, clip_weights=0.8)
    w = nd(w0, dtype)
    state = rms.create_state(0, w)
    rw, rn = w0.copy(), np.zeros(shape)
    for g in grads:
        rms.update(0, w, nd(g, dtype), state)
        rw = ref_rmsprop(rw, g, rn, 0.01, wd, 0.9, 1e-8, 1.0, clip, 0.8)
    np.testing.assert_allclose(w.asnumpy(), rw, rtol=1e-4, atol=1e-5)
    assert np.abs(w.asnumpy()).max() <= 0.8 + 1e-6


def test_python_style_optimizers_match_numpy():
    rng = np.random.default_rng(3)
    w0, g = rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (3, 4))
    # AdaGrad (dense)
    o = mx.optimizer.AdaGrad(learning_rate=0.1, wd=0.01, clip_gradient=0.3)
    w, h = nd(w0), None
    h = o.create_state(0, w)
    o.update(0, w, nd(g), h)
    gc = np.clip(g, -0.3, 0.3)
    np.testing.assert_allclose(w.asnumpy(), w0 - 0.1 * (gc / np.sqrt(gc * gc + 1e-7) + 0.01 * w0),
                               rtol=1e-5)
    # AdaDelta rescales the caller's gradient in place, as MXNet does
    o = mx.optimizer.AdaDelta(rescale_grad=0.5, wd=0.01)
    w, grad = nd(w0), nd(g)
    s = o.create_state(0, w)
    o.update(0, w, grad, s)
    np.testing.assert_allclose(grad.asnumpy(), 0.5 * g, rtol=1e-6)
    gr = 0.5 * g
    acc_g = 0.1 * gr * gr
    delta = np.sqrt(1e-5) / np.sqrt(acc_g + 1e-5) * gr
    np.testing.assert_allclose(w.asnumpy(), w0 - (delta + 0.01 * w0), rtol=1e-5)
    np.testing.assert_allclose(s[1].asnumpy(), 0.1 * delta * delta, rtol=1e-5)
    # Adamax
    o = mx.optimizer.Adamax(learning_rate=0.002, wd=0.01)
    w = nd(w0)
    s = o.create_state(0, w)
    o.update(0, w, nd(g), s)
    gr = g + 0.01 * w0
    np.testing.assert_allclose(w.asnumpy(), w0 - 0.002 / 0.1 * (0.1 * gr) / np.abs(gr),
                               rtol=1e-5)


def test_dcasgd_with_momentum_keeps_previous_weight():
    rng = np.random.default_rng(4)
    w0, g = rng.uniform(-1, 1, (4,)), rng.uniform(-1, 1, (4,))
    o = mx.optimizer.DCASGD(momentum=0.5, lamda=0.1, learning_rate=0.1, wd=0.01)
    w = nd(w0)
    mom, prev = o.create_state(0, w)
    np.testing.assert_array_equal(prev.asnumpy(), w.asnumpy())
    o.update(0, w, nd(g), (mom, prev))
    step = -0.1 * (g + 0.01 * w0)
    np.testing.assert_allclose(w.asnumpy(), w0 + step, rtol=1e-5)
    np.testing.assert_allclose(prev.asnumpy(), w0, rtol=1e-6)
    o.update(0, w, nd(g), (mom, prev))
    w1 = w0 + step
    step2 = 0.5 * step - 0.1 * (g + 0.01 * w1 + 0.1 * g * g * (w1 - w0))
    np.testing.assert_allclose(w.asnumpy(), w1 + step2, rtol=1e-5)


def test_sgld_noise_is_reproducible_from_the_seed():
    rng = np.random.default_rng(5)
    w0, g = rng.uniform(-1, 1, (3, 3)), rng.uniform(-1, 1, (3, 3))
    o = mx.optimizer.SGLD(learning_rate=0.01, wd=0.1, rescale_grad=0.5)
    mx.random.seed(42)
    w = nd(w0)
    o.update(0, w, nd(g), None)
    mx.random.seed(42)
    noise = mx.nd.random.normal(0, np.sqrt(0.01), shape=(3, 3)).asnumpy()
    expect = w0.astype(f32) - 0.005 * (0.5 * g + 0.1 * w0) + noise
    np.testing.assert_allclose(w.asnumpy(), expect, rtol=1e-5, atol=1e-6)
    mx.random.seed(42)
    w2 = nd(w0)
    mx.optimizer.SGLD(learning_rate=0.01, wd=0.1, rescale_grad=0.5).update(0, w2, nd(g), None)
    np.testing.assert_array_equal(w.asnumpy(), w2.asnumpy())


# ---------------------------------------------------------------------------------------------
# row_sparse gradients (test_sparse_sgd, test_std_sparse_sgd, test_adam, test_ftrl ...)
# ---------------------------------------------------------------------------------------------
def _rsp_grad(rng, shape, present):
    g = rng.uniform(-1, 1, shape)
    g[~present] = 0
    return g


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 1000), rows=st.integers(2, 6), momentum=st.sampled_from([0.0, 0.9]),
       weight_stype=st.sampled_from(["default", "row_sparse"]))
def test_lazy_sgd_touches_only_present_rows(seed, rows, momentum, weight_stype):
    rng = np.random.default_rng(seed)
    shape = (rows, 3)
    present = rng.random(rows) < 0.5
    w0 = rng.uniform(-1, 1, shape)
    grads = [_rsp_grad(rng, shape, present) for _ in range(2)]
    lazy = mx.optimizer.SGD(learning_rate=0.1, momentum=momentum, wd=0.1)
    dense = mx.optimizer.SGD(learning_rate=0.1, momentum=momentum, wd=0.1)
    wl, wd_ = nd(w0, stype=weight_stype), nd(w0)
    sl, sd = lazy.create_state(0, wl), dense.create_state(0, wd_)
    if momentum:
        assert sl.stype == weight_stype
    for g in grads:
        lazy.update(0, wl, nd(g, stype="row_sparse"), sl)
        dense.update(0, wd_, nd(g), sd)
    got, full = wl.asnumpy(), wd_.asnumpy()
    np.testing.assert_array_equal(got[~present], w0.astype(f32)[~present])
    np.testing.assert_allclose(got[present], full[present], rtol=1e-6)
    # lazy_update=False: the standard update of the densified gradient
    std = mx.optimizer.SGD(learning_rate=0.1, momentum=momentum, wd=0.1, lazy_update=False)
    ws = nd(w0, stype=weight_stype)
    ss = std.create_state(0, ws)
    for g in grads:
        std.update(0, ws, nd(g, stype="row_sparse"), ss)
    np.testing.assert_allclose(ws.asnumpy(), full, rtol=1e-6)


def test_lazy_adam_and_sparse_adagrad():
    rng = np.random.default_rng(7)
    shape = (5, 2)
    present = np.array([True, False, True, False, True])
    w0, g = rng.uniform(-1, 1, shape), _rsp_grad(rng, shape, present)
    adam = mx.optimizer.Adam(learning_rate=0.1, wd=0.1)
    w = nd(w0)
    s = adam.create_state(0, w)
    adam.update(0, w, nd(g, stype="row_sparse"), s)
    np.testing.assert_array_equal(w.asnumpy()[~present], w0.astype(f32)[~present])
    assert np.all(s[0].asnumpy()[~present] == 0)
    ada = mx.optimizer.AdaGrad(learning_rate=0.1)
    w = nd(w0)
    h = ada.create_state(0, w)
    ada.update(0, w, nd(g, stype="row_sparse"), h)
    np.testing.assert_array_equal(w.asnumpy()[~present], w0.astype(f32)[~present])
    with pytest.raises(MXNetError, match="weight decay"):
        mx.optimizer.AdaGrad(wd=0.1).update(0, w, nd(g, stype="row_sparse"), h)


# ---------------------------------------------------------------------------------------------
# multi-precision and aggregation
# ---------------------------------------------------------------------------------------------
def test_multi_precision_state_layouts():
    w = nd(np.ones((2, 3)), dtype="float16")
    sgd = mx.optimizer.SGD(momentum=0.9, multi_precision=True)
    mom, master = sgd.create_state_multi_precision(0, w)
    assert mom.dtype == np.float32 and master.dtype == np.float32
    assert mx.optimizer.SGD(multi_precision=True).create_state_multi_precision(0, w)[0] is None
    adam = mx.optimizer.Adam(multi_precision=True)
    master, (mean, var) = adam.create_state_multi_precision(0, w)
    assert master.dtype == np.float32 and mean.dtype == np.float32
    with pytest.warns(UserWarning, match="multi_precision"):
        mx.optimizer.SGD().create_state_multi_precision(0, w)
    # the float16 weight follows the float32 master exactly
    state = sgd.create_state_multi_precision(0, w)
    sgd.update_multi_precision(0, w, nd(np.full((2, 3), 0.3), dtype="float16"), state)
    np.testing.assert_array_equal(w.asnumpy(), state[1].asnumpy().astype(np.float16))
    assert w.dtype == np.float16


@pytest.mark.parametrize("name, kwargs", [
    ("sgd", dict(momentum=0.9, wd=0.01)), ("sgd", {}), ("lars", dict(momentum=0.9, eta=0.1)),
    ("lamb", dict(wd=0.01)), ("adam", {})])
def test_aggregated_updates_equal_one_by_one(name, kwargs):
    rng = np.random.default_rng(11)
    shapes = [(3, 2), (4,), (2, 2), (5,), (3,), (1, 6)]
    w0 = [rng.uniform(-1, 1, s) for s in shapes]
    g = [rng.uniform(-1, 1, s) for s in shapes]
    listed = mx.optimizer.get_updater(mx.optimizer.create(name, **kwargs))
    single = mx.optimizer.get_updater(mx.optimizer.create(name, **kwargs))
    single.aggregate_updates = False
    wl, ws = [nd(w) for w in w0], [nd(w) for w in w0]
    for _ in range(2):
        listed(list(range(len(shapes))), [nd(x) for x in g], wl)
        for i in range(len(shapes)):
            single(i, nd(g[i]), ws[i])
    for a, b in zip(wl, ws):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


def test_updater_groups_by_dtype_and_converts_byte_keys():
    seen = []

    class Recorder(mx.optimizer.SGD):
        def update_multi_precision(self, index, weight, grad, state):
            seen.append((tuple(index), weight[0].dtype))
            super().update_multi_precision(index, weight, grad, state)

    upd = mx.optimizer.get_updater(Recorder(learning_rate=0.1))
    assert upd.aggregate_updates
    ws = [nd(np.ones(2)), nd(np.ones(2), "float64"), nd(np.ones(2)), nd(np.ones(2))]
    upd([b"a", "b", "c", "d"], [nd(np.ones(2), w.dtype) for w in ws], ws)
    assert seen == [(("a", "c", "d"), np.float32), (("b",), np.float64)]
    assert set(upd.states) == {"a", "b", "c", "d"}


def test_updater_syncs_loaded_states_to_the_weight_context():
    upd = mx.optimizer.get_updater(mx.optimizer.SGD(momentum=0.9))
    upd(0, nd(np.ones(3)), nd(np.ones(3)))
    other = mx.optimizer.get_updater(mx.optimizer.SGD(momentum=0.9))
    other.set_states(upd.get_states())
    w = mx.nd.ones((3,), ctx=mx.cpu(1))
    other(0, mx.nd.ones((3,), ctx=mx.cpu(1)), w)
    assert other.states[0].context == mx.cpu(1) and other.states_synced[0]


# ---------------------------------------------------------------------------------------------
# the update operators (nd.*_update)
# ---------------------------------------------------------------------------------------------
def test_nd_update_ops_match_the_optimizers():
    rng = np.random.default_rng(1)
    w0, g0 = rng.uniform(-1, 1, (4, 3)), rng.uniform(-1, 1, (4, 3))
    w, g, mom = nd(w0), nd(g0), mx.nd.zeros((4, 3))
    out = mx.nd.sgd_mom_update(w, g, mom, out=w, lr=0.1, momentum=0.9, wd=0.01,
                               clip_gradient=0.3)
    assert out is w
    ref = mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=0.01, clip_gradient=0.3)
    wr = nd(w0)
    sr = ref.create_state(0, wr)
    ref.update(0, wr, nd(g0), sr)
    np.testing.assert_array_equal(w.asnumpy(), wr.asnumpy())
    np.testing.assert_array_equal(mom.asnumpy(), sr.asnumpy())
    # a fresh output when out is not given; the weight stays
    w2 = nd(w0)
    res = mx.nd.sgd_update(w2, nd(g0), lr=0.1, wd=0.01)
    np.testing.assert_array_equal(w2.asnumpy(), w0.astype(f32))
    np.testing.assert_allclose(res.asnumpy(), (1 - 0.001) * w0 - 0.1 * g0, rtol=1e-6)
    # adam_update with positional hyper-parameters in MXNet's order
    w3, mean, var = nd(w0), mx.nd.zeros((4, 3)), mx.nd.zeros((4, 3))
    mx.nd.adam_update(w3, nd(g0), mean, var, 0.01, 0.9, 0.999, 1e-8, 0.0, out=w3)
    np.testing.assert_allclose(mean.asnumpy(), 0.1 * g0, rtol=1e-6)
    np.testing.assert_allclose(w3.asnumpy(), w0 - 0.01 * 0.1 * g0 / (np.sqrt(0.001 * g0 * g0)
                                                                      + 1e-8), rtol=1e-5)


def test_nd_lazy_update_follows_the_gradient_stype():
    w0 = np.ones((3, 2))
    g0 = np.array([[1.0, 1.0], [0.0, 0.0], [2.0, 0.0]])
    w = nd(w0)
    mx.nd.sgd_update(w, nd(g0, stype="row_sparse"), lr=0.1, wd=0.5, out=w)
    np.testing.assert_allclose(w.asnumpy(), [[0.85, 0.85], [1, 1], [0.75, 0.95]], rtol=1e-6)
    w = nd(w0)
    mx.nd.sgd_update(w, nd(g0, stype="row_sparse"), lr=0.1, wd=0.5, lazy_update=False, out=w)
    np.testing.assert_allclose(w.asnumpy()[1], [0.95, 0.95], rtol=1e-6)


def test_nd_mp_and_multi_ops():
    rng = np.random.default_rng(2)
    ws = [rng.uniform(-1, 1, s) for s in ((3,), (2, 2))]
    gs = [rng.uniform(-1, 1, s) for s in ((3,), (2, 2))]
    w16 = [nd(w, "float16") for w in ws]
    w32 = [nd(w) for w in ws]
    moms = [mx.nd.zeros(w.shape) for w in ws]
    data = []
    for a, g, m, b in zip(w16, gs, moms, w32):
        data += [a, nd(g, "float16"), m, b]
    mx.nd.multi_mp_sgd_mom_update(*data, lrs=(0.1, 0.2), wds=(0.0, 0.01), momentum=0.9,
                                  num_weights=2, out=w16)
    for i in range(2):
        single_w, single_m, single_32 = nd(ws[i], "float16"), mx.nd.zeros(ws[i].shape), nd(ws[i])
        mx.nd.mp_sgd_mom_update(single_w, nd(gs[i], "float16"), single_m, single_32,
                                lr=(0.1, 0.2)[i], wd=(0.0, 0.01)[i], momentum=0.9, out=single_w)
        np.testing.assert_array_equal(w16[i].asnumpy(), single_w.asnumpy())
        np.testing.assert_array_equal(w32[i].asnumpy(), single_32.asnumpy())
    sums = mx.nd.multi_sum_sq(*[nd(w) for w in ws], num_arrays=2)
    np.testing.assert_allclose(sums.asnumpy(), [np.sum(w * w) for w in ws], rtol=1e-5)
    lrs = mx.nd.multi_lars(mx.nd.array([0.1, 0.2]), sums, mx.nd.array([4.0, 0.0]),
                           mx.nd.array([0.0, 0.0]), eta=0.5, eps=0.0)
    np.testing.assert_allclose(lrs.asnumpy(), [0.1 * 0.5 * np.sqrt(sums.asnumpy()[0]) / 2, 0.2],
                               rtol=1e-5)


def test_nd_lamb_phases():
    rng = np.random.default_rng(3)
    w0, g0 = rng.uniform(-1, 1, (4,)), rng.uniform(-1, 1, (4,))
    w, mean, var = nd(w0), mx.nd.zeros((4,)), mx.nd.zeros((4,))
    d = mx.nd.lamb_update_phase1(w, nd(g0), mean, var, t=1, wd=0.1)
    expect = g0 / (np.abs(g0) + 1e-6) + 0.1 * w0
    np.testing.assert_allclose(d.asnumpy(), expect, rtol=1e-4)
    r1, r2 = mx.nd.array([np.linalg.norm(w0)]), mx.nd.array([np.linalg.norm(expect)])
    mx.nd.lamb_update_phase2(w, d, r1, r2, lr=0.01, out=w)
    np.testing.assert_allclose(w.asnumpy(), w0 - 0.01 * np.linalg.norm(w0)
                               / np.linalg.norm(expect) * expect, rtol=1e-4)


def test_nd_update_op_errors():
    w = mx.nd.ones((2, 3))
    with pytest.raises(MXNetError, match="sgd_mom_update"):
        mx.nd.sgd_mom_update(w, mx.nd.ones((3, 2)), mx.nd.zeros((2, 3)), lr=0.1, out=w)
    with pytest.raises(MXNetError, match="lr"):
        mx.nd.sgd_update(w, mx.nd.ones((2, 3)), out=w)
    with pytest.raises(MXNetError, match="num_weights"):
        mx.nd.multi_sgd_update(w, mx.nd.ones((2, 3)), w, lrs=(0.1,), wds=(0.0,), num_weights=1)
    with pytest.raises(MXNetError, match="wds"):
        mx.nd.multi_sgd_update(w, mx.nd.ones((2, 3)), lrs=(0.1,), wds=(0.0, 0.1), num_weights=1)
    with pytest.raises(MXNetError, match="wd"):
        mx.nd._sparse_adagrad_update(w, mx.nd.ones((2, 3)), mx.nd.zeros((2, 3)), lr=0.1, wd=0.1)


def test_update_rejects_non_ndarrays():
    with pytest.raises(AssertionError, match="grad"):
        mx.optimizer.SGD().update(0, mx.nd.ones(2), np.ones(2), None)


def test_test_optimizer_and_pickling_every_optimizer():
    o = mx.optimizer.Test(rescale_grad=2.0)
    w = mx.nd.ones((2,))
    s = o.create_state(0, w)
    o.update(0, w, mx.nd.ones((2,)), s)
    np.testing.assert_array_equal(w.asnumpy(), [3, 3])
    np.testing.assert_array_equal(s.asnumpy(), [3, 3])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _name, klass in mx.optimizer.Optimizer.opt_registry.items():
            clone = pickle.loads(pickle.dumps(klass()))
            assert type(clone) is klass and clone.param_dict == {}
