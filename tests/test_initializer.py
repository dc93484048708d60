"""mx.init: registry, InitDesc paths, every initializer; the behaviours of MXNet 1.9.1's
test_init.py that live in the initializer, plus golden values MXNet produced
(tests/fixtures/make_init_metric_golden.py)."""
import json
import os
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lightmod as mx
from lightmod import initializer as I

GOLDEN = json.load(open(os.path.join(os.path.dirname(__file__), "fixtures",
                                     "init_metric_golden.json")))["init"]


def desc(name, **attrs):
    return I.InitDesc(name, attrs)


# ---------------------------------------------------------------------------------------------
# registry, dumps, create
# ---------------------------------------------------------------------------------------------
def test_namespace_and_aliases():
    assert mx.init is mx.initializer is I
    assert type(I.create("zeros")) is I.Zero and type(I.create("ones")) is I.One
    assert type(I.create("Zero")) is I.Zero
    assert type(I.create("XAVIER", magnitude=2)) is I.Xavier
    assert type(I.create("lstmbias")) is I.LSTMBias
    init = I.Uniform()
    assert I.create(init) is init
    with pytest.raises(AssertionError, match="not registered"):
        I.create("nope")


def _golden_inits():
    return {"uniform": I.Uniform(), "uniform_0.5": I.Uniform(0.5), "normal": I.Normal(),
            "constant": I.Constant(0.25), "constant_arr": I.Constant(np.array([1.0, 2.0])),
            "constant_nd": I.Constant(mx.nd.array([[1.0, 2.0]])), "zero": I.Zero(),
            "one": I.One(), "xavier": I.Xavier(),
            "xavier_g": I.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2),
            "msraprelu": I.MSRAPrelu(), "msraprelu_out": I.MSRAPrelu("out", 0.5),
            "orthogonal": I.Orthogonal(), "bilinear": I.Bilinear(),
            "lstmbias": I.LSTMBias(0.5)}


def test_dumps_golden_and_roundtrip():
    inits = _golden_inits()
    dumps = {k: v.dumps() for k, v in inits.items()}
    assert dumps == GOLDEN["dumps"]
    for key, text in dumps.items():
        again = I.create(text)
        assert type(again) is type(inits[key])
        assert again.dumps() == GOLDEN["create_roundtrip"].get(key, text)
        assert again == I.create(text)
    # a second dumps() of an array Constant (MXNet fails here) gives the same text
    c = I.Constant(np.array([1.0, 2.0]))
    assert c.dumps() == c.dumps() == '["constant", {"value": [1.0, 2.0]}]'
    assert c._kwargs == {"value": [1.0, 2.0]}


def test_equality_and_register():
    assert I.Uniform(0.1) == I.Uniform(0.1)
    assert I.Uniform(0.1) != I.Uniform(0.2)
    assert I.Uniform(0.1) != I.Normal(0.1)

    @I.register
    class Twos(I.Initializer):
        def _init_weight(self, _, arr):
            arr[:] = 2

    arr = mx.nd.zeros((3,))
    I.Zero()(desc("anything", __init__='["twos", {}]'), arr)
    np.testing.assert_array_equal(arr.asnumpy(), [2, 2, 2])
    arr = mx.nd.zeros((2,))
    Twos()(desc("fc_weight"), arr)
    np.testing.assert_array_equal(arr.asnumpy(), [2, 2])
    with pytest.raises(NotImplementedError):
        I.Initializer()(desc("fc_weight"), mx.nd.zeros((2,)))


# ---------------------------------------------------------------------------------------------
# the InitDesc path and the legacy string path
# ---------------------------------------------------------------------------------------------
def test_initdesc_golden():
    cases = [("fc_weight", {"__init__": '["constant", {"value": 0.5}]'}),
             ("anything", {"__init__": '["Constant", {"value": 3.0}]'}),
             ("bn_moving_var", {"__init__": '["one", {}]'}),
             ("bn_moving_mean", {"__init__": '["zero", {}]'}),
             ("x_bias", {"__init__": "ones"}),
             ("lstm_i2h_bias", {"__init__": I.LSTMBias(2.0).dumps()}),
             ("fc_bias", {}), ("bn_gamma", {}), ("bn_beta", {}), ("q_min", {}), ("q_max", {})]
    for name, attrs in cases:
        arr = mx.nd.ones((8,)) * 9
        I.Uniform()(I.InitDesc(name, attrs), arr)
        assert arr.asnumpy().tolist() == GOLDEN["initdesc"][name], name


def test_initdesc_sets_global_init_and_unknown_pattern():
    d = I.InitDesc("fc_weight")
    assert isinstance(d, str) and d == "fc_weight" and d.attrs == {} and d.global_init is None
    init = I.Normal()
    init(d, mx.nd.zeros((2, 2)))
    assert d.global_init is init
    for name, message in zip(("bn_moving_mean", "foo"), GOLDEN["unknown_pattern"]):
        with pytest.raises(ValueError) as err:
            I.Uniform()(I.InitDesc(name), mx.nd.zeros((3,)))
        assert str(err.value) == message


def test_legacy_string_path_golden():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name, values in GOLDEN["legacy"].items():
            arr = mx.nd.ones((4,)) * 9
            I.Uniform()(name, arr)
            assert arr.asnumpy().tolist() == values, name
        arr = mx.nd.zeros((1, 1, 4, 4))
        I.Uniform()("upsampling0_weight", arr)
        np.testing.assert_array_equal(arr.asnumpy(), np.array(GOLDEN["legacy_upsampling"],
                                                               np.float32))
        arr = mx.nd.zeros((6,))
        I.Uniform()("stn_loc_bias", arr)
        np.testing.assert_array_equal(arr.asnumpy(), [1, 0, 0, 0, 1, 0])
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="arr must be NDArray"):
        I.Uniform()("fc_weight", np.zeros(3))
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="Unknown initializ"):
        I.Uniform()("mystery", mx.nd.zeros(3))


def test_set_verbosity_logs(caplog):
    init = I.One().set_verbosity(True)
    with caplog.at_level("INFO"):
        init(desc("fc_weight"), mx.nd.zeros((2, 2)))
    assert "Initialized fc_weight as weight: 1.0" in caplog.text
    seen = []
    init = I.Zero().set_verbosity(True, print_func=lambda a: seen.append(a.shape) or "ok")
    with caplog.at_level("INFO"):
        init(desc("b_bias"), mx.nd.ones((3,)))
    assert seen == [(3,)] and "Initialized b_bias as bias: ok" in caplog.text


# ---------------------------------------------------------------------------------------------
# the initializers
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", [k for k in GOLDEN if k.startswith("bilinear_")])
def test_bilinear_golden(key):
    shape = tuple(int(s) for s in key.split("_")[1].split("x"))
    arr = mx.nd.zeros(shape)
    I.Bilinear()._init_weight(None, arr)
    np.testing.assert_array_equal(arr.asnumpy(), np.array(GOLDEN[key], np.float32))


def test_bilinear_is_outer_product():
    arr = mx.nd.zeros((1, 1, 4, 4))
    I.Bilinear()._init_weight(None, arr)
    v = np.array([0.25, 0.75, 0.75, 0.25])
    np.testing.assert_allclose(arr.asnumpy()[0, 0], np.outer(v, v), rtol=0, atol=0)


def test_lstm_bias_golden():
    for key in ("lstmbias_8_1", "lstmbias_12_2.5"):
        n, fb = key.split("_")[1:]
        arr = mx.nd.ones((int(n),)) * 7
        I.LSTMBias(forget_bias=float(fb))._init_weight(None, arr)
        assert arr.asnumpy().tolist() == GOLDEN[key]


def test_constant_zero_one():
    arr = mx.nd.zeros((2, 3))
    I.Constant(0.25)(desc("w_weight"), arr)
    assert (arr.asnumpy() == 0.25).all()
    I.Constant(np.arange(3.0))(desc("w_weight"), arr)
    np.testing.assert_array_equal(arr.asnumpy(), [[0, 1, 2], [0, 1, 2]])
    I.Constant(mx.nd.array([[5.0], [6.0]]))(desc("w_weight"), arr)
    np.testing.assert_array_equal(arr.asnumpy(), [[5] * 3, [6] * 3])
    I.One()(desc("w_weight"), arr)
    assert (arr.asnumpy() == 1).all()
    I.Zero()(desc("w_weight"), arr)
    assert (arr.asnumpy() == 0).all()
    # test_rsp_const_init: a row_sparse weight is filled the same way
    rsp = mx.nd.zeros((4, 2)).tostype("row_sparse")
    I.Constant(3.0)(desc("emb_weight"), rsp)
    assert rsp.stype == "row_sparse" and (rsp.asnumpy() == 3).all()
    I.One()(desc("emb_weight"), rsp)
    assert (rsp.asnumpy() == 1).all()
    I.Zero()(desc("emb_weight"), rsp)
    assert (rsp.asnumpy() == 0).all()


def _stat(init, shape, dtype="float32"):
    arr = mx.nd.zeros(shape, dtype=dtype)
    init(desc("w_weight"), arr)
    assert arr.dtype == np.dtype(dtype)
    return arr.asnumpy().astype(np.float64)


def test_random_initializers_match_mxnet_statistics():
    mx.random.seed(0)
    for key, init in [("uniform", I.Uniform(0.3)), ("normal", I.Normal(0.2)),
                      ("xavier_avg_uniform", I.Xavier()),
                      ("xavier_in_gaussian", I.Xavier("gaussian", "in", 2)),
                      ("xavier_out_uniform", I.Xavier("uniform", "out", 1)),
                      ("msraprelu", I.MSRAPrelu()), ("msraprelu_in", I.MSRAPrelu("in", 0.0))]:
        g = GOLDEN["stats"][key]
        a = _stat(init, tuple(g["shape"]))
        assert abs(a.mean()) < 0.05 * g["std"] + 1e-4, key
        assert a.std() == pytest.approx(g["std"], rel=0.03), key
        if "uniform" in key:
            assert a.max() <= g["absmax"] * 1.001 and -a.min() <= g["absmax"] * 1.001, key
            assert np.abs(a).max() == pytest.approx(g["absmax"], rel=0.01), key


def test_xavier_scale_formula():
    mx.random.seed(1)
    shape = (40, 30, 2, 3)
    fan_in, fan_out = 30 * 6, 40 * 6
    for factor_type, factor in (("avg", (fan_in + fan_out) / 2), ("in", fan_in),
                                ("out", fan_out)):
        a = _stat(I.Xavier("uniform", factor_type, 3), shape)
        scale = np.sqrt(3 / factor)
        assert np.abs(a).max() <= scale and np.abs(a).max() > 0.99 * scale
        g = _stat(I.Xavier("gaussian", factor_type, 3), shape)
        assert g.std() == pytest.approx(scale, rel=0.05)
    m = _stat(I.MSRAPrelu("in", 0.5), shape)
    assert m.std() == pytest.approx(np.sqrt(2 / (1 + 0.25) / fan_in), rel=0.05)
    with pytest.raises(ValueError) as err:
        I.Xavier()(desc("v_weight"), mx.nd.zeros((5,)))
    assert str(err.value) == GOLDEN["xavier_1d_error"]
    with pytest.raises(ValueError, match="Incorrect factor type"):
        I.Xavier(factor_type="sideways")(desc("w_weight"), mx.nd.zeros((2, 2)))
    with pytest.raises(ValueError, match="Unknown random type"):
        I.Xavier(rnd_type="cauchy")(desc("w_weight"), mx.nd.zeros((2, 2)))


def test_orthogonal():
    mx.random.seed(2)
    for key, init in (("orthogonal_wide", I.Orthogonal()),
                      ("orthogonal_tall", I.Orthogonal(2.0, "normal"))):
        shape = tuple(GOLDEN["stats"][key]["shape"])
        a = _stat(init, shape).reshape(shape[0], -1)
        sv = np.linalg.svd(a, compute_uv=False)
        np.testing.assert_allclose(sv, GOLDEN["stats"][key]["singular_values"], rtol=1e-5)
        scale = init.scale
        if a.shape[0] <= a.shape[1]:
            np.testing.assert_allclose(a @ a.T, scale ** 2 * np.eye(a.shape[0]), atol=1e-5)
        else:
            np.testing.assert_allclose(a.T @ a, scale ** 2 * np.eye(a.shape[1]), atol=1e-5)


def test_seed_makes_initialisation_reproducible():
    outs = []
    for _ in range(2):
        mx.random.seed(123)
        outs.append([_stat(init, (5, 7)) for init in (I.Uniform(), I.Normal(), I.Xavier(),
                                                      I.Orthogonal())])
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)
    mx.random.seed(124)
    assert not np.array_equal(_stat(I.Uniform(), (5, 7)), outs[0][0])


def test_float16_and_float64_weights():
    mx.random.seed(3)
    a = _stat(I.Uniform(0.5), (50, 40), "float16")
    assert np.abs(a).max() <= 0.5
    a = _stat(I.Xavier(), (50, 40), "float64")
    assert a.std() > 0


def test_load_and_mixed(tmp_path):
    params = {"arg:fc_weight": mx.nd.ones((2, 3)) * 4, "aux:bn_moving_mean": mx.nd.ones((3,)),
              "plain": mx.nd.zeros((1,))}
    load = I.Load(params, default_init=I.Constant(7))
    assert sorted(load.param) == ["bn_moving_mean", "fc_weight", "plain"]
    w = mx.nd.zeros((2, 3))
    load("fc_weight", w)
    assert (w.asnumpy() == 4).all()
    other = mx.nd.zeros((2,))
    load(I.InitDesc("other_weight"), other)
    assert (other.asnumpy() == 7).all()
    with pytest.raises(AssertionError, match="Shape mismatch"):
        load("fc_weight", mx.nd.zeros((3, 2)))
    with pytest.raises(AssertionError, match="no default"):
        I.Load(params)("missing", mx.nd.zeros((1,)))
    path = str(tmp_path / "p.params")
    mx.nd.save(path, params)
    w = mx.nd.zeros((2, 3))
    I.Load(path)("fc_weight", w)
    assert (w.asnumpy() == 4).all()

    mixed = I.Mixed(["fc_.*", ".*"], [I.Constant(0.5), I.One()])
    b, w = mx.nd.zeros((3,)), mx.nd.zeros((3,))
    mixed(I.InitDesc("fc_weight"), b)
    mixed(I.InitDesc("conv_weight"), w)
    assert (b.asnumpy() == 0.5).all() and (w.asnumpy() == 1).all()
    with pytest.raises(ValueError, match="fc_weight did not match"):
        I.Mixed(["x"], [I.One()])("fc_weight", w)


@settings(max_examples=15, deadline=None)
@given(shape=st.lists(st.integers(1, 6), min_size=2, max_size=4),
       magnitude=st.floats(0.5, 6), factor=st.sampled_from(["avg", "in", "out"]))
def test_property_xavier_uniform_bounds(shape, magnitude, factor):
    shape = tuple(shape)
    a = _stat(I.Xavier("uniform", factor, magnitude), shape)
    hw = float(np.prod(shape[2:])) if len(shape) > 2 else 1.0
    fan = {"avg": (shape[0] + shape[1]) * hw / 2, "in": shape[1] * hw, "out": shape[0] * hw}
    bound = np.sqrt(magnitude / fan[factor])
    assert np.abs(a).max() <= bound * (1 + 1e-6)
