"""contrib.SyncBatchNorm: BatchNorm over axis 1 whose third output is the batch's biased
variance, moving statistics updated in backward, gradients equal to BatchNorm's; ``ndev`` above
1 refuses batch statistics (lightmod cannot pool them across devices) and works in inference."""
import numpy as np
import ophelpers as oh
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lightmod as mx
from lightmod.base import MXNetError
from lightmod.kernels import cpu


@st.composite
def cases(draw):
    ndim = draw(st.integers(2, 4))
    shape = (draw(st.integers(2, 4)),) + tuple(draw(st.integers(1, 4)) for _ in range(ndim - 1))
    return dict(shape=shape, fix_gamma=draw(st.booleans()),
                use_global_stats=draw(st.booleans()), eps=draw(st.sampled_from([1e-3, 0.1])),
                seed=draw(st.integers(0, 999)))


def _inputs(case):
    rng = np.random.default_rng(case["seed"])
    c = case["shape"][1]
    return [rng.standard_normal(case["shape"]) * 2 + 0.5, rng.standard_normal(c) + 1,
            rng.standard_normal(c), rng.standard_normal(c), rng.random(c) + 0.5]


def _attrs(case, **extra):
    return dict(key="bn", fix_gamma=case["fix_gamma"], eps=case["eps"],
                use_global_stats=case["use_global_stats"], **extra)


@settings(max_examples=40, deadline=None)
@given(case=cases(), train=st.booleans())
def test_forward_outputs_normalised_data_mean_and_variance(case, train):
    x, gamma, beta, mm, mv = _inputs(case)
    outs = oh.forward("_contrib_SyncBatchNorm", _attrs(case, output_mean_var=True),
                      [x, gamma, beta, mm, mv], is_train=train)[0]
    red = (0,) + tuple(range(2, x.ndim))
    batch = train and not case["use_global_stats"]
    mean, var = (x.mean(axis=red), x.var(axis=red)) if batch else (mm, mv)
    shape = [1, -1] + [1] * (x.ndim - 2)
    g = np.ones_like(gamma) if case["fix_gamma"] else gamma
    ref = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + case["eps"]) * \
        g.reshape(shape) + beta.reshape(shape)
    np.testing.assert_allclose(outs[0], ref, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(outs[1], mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(outs[2], var, rtol=1e-9, atol=1e-12)


@settings(max_examples=15, deadline=None)
@given(case=cases())
def test_gradients_match_numeric_and_batchnorm(case):
    inputs = _inputs(case)
    oh.check_grad("_contrib_SyncBatchNorm", _attrs(case), inputs, wrt=[0, 1, 2], rtol=1e-5,
                  atol=1e-7)
    heads = [np.random.default_rng(case["seed"]).standard_normal(case["shape"])]
    ours = oh.backward("_contrib_SyncBatchNorm", _attrs(case), inputs, heads)
    bn = {k: v for k, v in _attrs(case).items() if k != "key"}
    theirs = oh.backward("BatchNorm", dict(bn, axis=1), inputs, heads)
    for a, b in zip(ours[:3], theirs[:3]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def _run(attrs, inputs, is_train, backward):
    op, p = oh.prepare("_contrib_SyncBatchNorm", attrs)
    x, c = inputs[0], inputs[1].shape[0]
    outs = [np.zeros_like(x), np.zeros(c), np.zeros(c)]
    state = {}
    op.forward(p, cpu, inputs, outs, is_train, state)
    if backward:
        grads = [np.zeros_like(x), np.zeros(c), np.zeros(c), None, None]
        op.backward(p, cpu, [np.ones_like(x), None, None], inputs, outs, grads,
                    ["write", "write", "write", "null", "null"], state)
    return outs


def test_moving_statistics_follow_the_biased_variance_in_backward():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 3, 4)) * 2 + 1
    mm, mv = np.full(3, 0.2), np.full(3, 1.5)
    attrs = dict(key="k", momentum=0.7)
    _run(attrs, [x, np.ones(3), np.zeros(3), mm, mv], True, backward=False)
    assert np.all(mm == 0.2) and np.all(mv == 1.5)
    _run(attrs, [x, np.ones(3), np.zeros(3), mm, mv], True, backward=True)
    np.testing.assert_allclose(mm, 0.2 * 0.7 + x.mean(axis=(0, 2)) * 0.3, rtol=1e-12)
    np.testing.assert_allclose(mv, 1.5 * 0.7 + x.var(axis=(0, 2)) * 0.3, rtol=1e-12)


def test_several_devices_refuse_batch_statistics_but_infer():
    rng = np.random.default_rng(4)
    inputs = [rng.standard_normal((4, 2, 3)), np.ones(2), np.zeros(2), np.zeros(2), np.ones(2)]
    with pytest.raises(MXNetError, match=r"ndev=2.*use ndev=1"):
        _run(dict(key="pair", ndev=2), inputs, True, backward=False)
    out = _run(dict(key="pair", ndev=2), inputs, False, backward=False)[0]
    np.testing.assert_allclose(out, inputs[0] / np.sqrt(1 + 1e-3), rtol=1e-12)
    out = _run(dict(key="pair", ndev=2, use_global_stats=True), inputs, True, backward=True)[0]
    np.testing.assert_allclose(out, inputs[0] / np.sqrt(1 + 1e-3), rtol=1e-12)


def test_declaration_and_bad_attributes():
    sym = mx.sym.contrib.SyncBatchNorm(mx.sym.var("data"), key="a", name="sbn")
    assert sym.list_arguments() == ["data", "sbn_gamma", "sbn_beta"]
    assert sym.list_auxiliary_states() == ["sbn_moving_mean", "sbn_moving_var"]
    shown = mx.sym.contrib.SyncBatchNorm(mx.sym.var("data"), key="a", output_mean_var=True,
                                         name="s2")
    assert shown.list_outputs() == ["s2_output", "s2_mean", "s2_var"]
    args, outs, aux = shown.infer_shape(data=(2, 5, 3))
    assert args == [(2, 5, 3), (5,), (5,)] and outs == [(2, 5, 3), (5,), (5,)]
    assert aux == [(5,), (5,)]
    with pytest.raises(MXNetError, match="key"):
        mx.sym.contrib.SyncBatchNorm(mx.sym.var("data"))
    with pytest.raises(MXNetError, match="axis"):
        mx.sym.contrib.SyncBatchNorm(mx.sym.var("data"), key="a", axis=2)
    with pytest.raises(MXNetError, match="ndev"):
        mx.sym.contrib.SyncBatchNorm(mx.sym.var("data"), key="a", ndev=0)


def test_trains_in_a_module_like_batchnorm():
    """A Module with SyncBatchNorm (ndev=1) follows the same parameters as with BatchNorm."""
    def net(norm):
        data = mx.sym.var("data")
        body = mx.sym.FullyConnected(data, num_hidden=6, name="fc")
        body = norm(body)
        body = mx.sym.FullyConnected(mx.sym.relu(body), num_hidden=3, name="out")
        return mx.sym.SoftmaxOutput(body, name="softmax")

    rng = np.random.RandomState(0)
    x = rng.uniform(-1, 1, (24, 4)).astype(np.float32)
    y = rng.randint(0, 3, 24).astype(np.float32)
    results = []
    for norm in (lambda b: mx.sym.contrib.SyncBatchNorm(b, key="k", fix_gamma=False, name="bn"),
                 lambda b: mx.sym.BatchNorm(b, fix_gamma=False, name="bn")):
        mod = mx.mod.Module(net(norm), context=mx.cpu())
        mx.random.seed(1)
        mod.fit(mx.io.NDArrayIter(x, y, batch_size=8), num_epoch=2,
                initializer=mx.init.Xavier(), optimizer_params={"learning_rate": 0.1})
        args, aux = mod.get_params()
        results.append(({k: v.asnumpy() for k, v in args.items()},
                        {k: v.asnumpy() for k, v in aux.items()}))
    for got, want in zip(results[0], results[1]):
        assert got.keys() == want.keys()
        for name in got:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6,
                                       err_msg=name)
