"""The random operators (operator/random_ops.py) and the seeded streams (lightmod/rng.py).

Random streams are not MXNet's (different generators), so the samplers are checked through
their distributions: sample moments against the law's moments within a few standard errors,
at fixed seeds; then reproducibility from ``mx.random.seed``, the per-device seeding rules,
the symbol path and its JSON, and bad inputs.
"""
import json
import math

import numpy as np
import pytest

import lightmod as mx
from lightmod import rng
from lightmod.base import MXNetError

N = 200000


def _moments_match(x, mean, var, sigmas=5.0):
    """Sample mean and variance of ``x`` within ``sigmas`` standard errors of the law's."""
    x = np.asarray(x, dtype=np.float64).ravel()
    n = x.size
    assert abs(x.mean() - mean) <= sigmas * math.sqrt(var / n) + 1e-12, (x.mean(), mean)
    # the variance of the sample variance is at most a few var**2 / n for these laws
    assert abs(x.var() - var) <= sigmas * 3 * var / math.sqrt(n) + 1e-12, (x.var(), var)


# (function, parameters, law mean, law variance)
LAWS = [
    ("uniform", dict(low=-1.5, high=3.0), 0.75, 4.5 ** 2 / 12),
    ("normal", dict(loc=2.0, scale=0.5), 2.0, 0.25),
    ("gamma", dict(alpha=2.5, beta=0.8), 2.0, 2.5 * 0.64),
    ("exponential", dict(scale=2.0), 2.0, 4.0),
    ("poisson", dict(lam=3.5), 3.5, 3.5),
    ("negative_binomial", dict(k=4, p=0.4), 4 * 0.6 / 0.4, 4 * 0.6 / 0.16),
    ("generalized_negative_binomial", dict(mu=2.0, alpha=0.3), 2.0, 2.0 + 0.3 * 4.0),
]


@pytest.mark.parametrize("name,params,mean,var", LAWS, ids=[law[0] for law in LAWS])
def test_imperative_samples_follow_the_law(name, params, mean, var):
    mx.random.seed(11)
    x = getattr(mx.nd.random, name)(shape=(N,), **params)
    assert x.shape == (N,) and x.dtype == np.float32
    _moments_match(x.asnumpy(), mean, var)


@pytest.mark.parametrize("name,params,mean,var", LAWS, ids=[law[0] for law in LAWS])
def test_symbolic_samples_follow_the_law(name, params, mean, var):
    out = getattr(mx.sym.random, name)(shape=(N,), dtype="float64", **params)
    exe = out.bind(mx.cpu(), {})
    mx.random.seed(12)
    first = exe.forward()[0].asnumpy()
    assert first.dtype == np.float64
    _moments_match(first, mean, var)
    # the same seed replays the same draws; the next forward draws new ones
    mx.random.seed(12)
    np.testing.assert_array_equal(exe.forward()[0].asnumpy(), first)
    assert not np.array_equal(exe.forward()[0].asnumpy(), first)


def test_uniform_stays_in_its_interval_and_discrete_laws_give_integers():
    mx.random.seed(0)
    u = mx.nd.random.uniform(-2, -1, shape=(1000,)).asnumpy()
    assert u.min() >= -2 and u.max() < -1
    for name in ("poisson", "negative_binomial", "generalized_negative_binomial"):
        x = getattr(mx.nd.random, name)(shape=(500,)).asnumpy()
        np.testing.assert_array_equal(x, np.round(x))
        assert x.min() >= 0


def test_randint_is_uniform_on_its_range():
    mx.random.seed(3)
    r = mx.nd.random.randint(-3, 5, shape=(N,))
    assert r.dtype == np.int32
    values = r.asnumpy()
    assert set(np.unique(values)) == set(range(-3, 5))
    _moments_match(values, 0.5, (8 ** 2 - 1) / 12.0)
    big = mx.nd.random.randint(50000000, 50000010, shape=(100,), dtype="int64").asnumpy()
    assert big.dtype == np.int64 and big.min() >= 50000000 and big.max() < 50000010


def test_array_parameters_draw_one_block_per_element():
    mu = mx.nd.array([[0.0, 10.0], [-5.0, 3.0]])
    sigma = mx.nd.array([[1.0, 0.5], [2.0, 0.1]])
    mx.random.seed(4)
    s = mx.nd.random.normal(mu, sigma, shape=(50000,))
    assert s.shape == (2, 2, 50000)
    host = s.asnumpy()
    for i in range(2):
        for j in range(2):
            m, sd = mu.asnumpy()[i, j], sigma.asnumpy()[i, j]
            _moments_match(host[i, j], m, sd * sd)
    # one sample per element when no shape is given; the nd.sample_* names are the same ops
    assert mx.nd.sample_normal(mu=mx.nd.array([10.0]), sigma=mx.nd.array([0.5])).shape == (1,)
    assert mx.nd.sample_normal(mu=mx.nd.array([10.0]), sigma=mx.nd.array([0.5]),
                               shape=1).shape == (1, 1)
    lam = mx.nd.array([1.0, 4.0])
    e = mx.nd.random.exponential(1.0 / lam, shape=(N // 2,)).asnumpy()
    _moments_match(e[0], 1.0, 1.0)
    _moments_match(e[1], 0.25, 0.0625)


def test_like_operators_take_shape_and_dtype_of_their_input():
    data = mx.nd.zeros((300, 400), dtype="float64")
    mx.random.seed(5)
    x = mx.nd.random.normal_like(data, loc=1.0, scale=2.0)
    assert x.shape == (300, 400) and x.dtype == np.float64
    _moments_match(x.asnumpy(), 1.0, 4.0)
    y = mx.nd.random.uniform_like(data, low=2.0, high=3.0).asnumpy()
    assert y.min() >= 2.0 and y.max() < 3.0


def test_aliases_name_the_same_operators():
    for alias, name in (("random_uniform", "_random_uniform"), ("uniform", "_random_uniform"),
                        ("normal", "_random_normal"), ("sample_gamma", "_sample_gamma"),
                        ("shuffle", "_shuffle"), ("sample_multinomial", "_sample_multinomial")):
        assert mx.operator.registry.get(alias).name == name
    mx.random.seed(9)
    a = mx.nd.random_normal(0, 1, shape=(4,)).asnumpy()
    mx.random.seed(9)
    b = mx.nd.normal(shape=(4,)).asnumpy()
    np.testing.assert_array_equal(a, b)


def test_dtypes_and_out():
    for dtype in ("float16", "float32", "float64"):
        x = mx.nd.random.uniform(shape=(3,), dtype=dtype)
        assert x.dtype == np.dtype(dtype)
    assert mx.nd.random.uniform(shape=(2,), dtype=np.float64).dtype == np.float64
    out = mx.nd.zeros((2, 3), dtype="float64")
    mx.random.seed(1)
    res = mx.nd.random.gamma(2.0, 1.0, out=out)
    assert res is out and (out.asnumpy() > 0).all()
    assert mx.nd.random.uniform().shape == (1,)


# ---------------------------------------------------------------------------------------------
# seeding
# ---------------------------------------------------------------------------------------------
def test_the_same_seed_replays_every_sampler():
    def draw():
        return [mx.nd.random.uniform(shape=(5,)).asnumpy(),
                mx.nd.random.multinomial(mx.nd.array([0.2, 0.3, 0.5]), shape=20).asnumpy(),
                mx.nd.random.shuffle(mx.nd.arange(10)).asnumpy(),
                mx.nd.random.randint(0, 100, shape=(5,)).asnumpy()]
    mx.random.seed(1234)
    first = draw()
    mx.random.seed(1234)
    for a, b in zip(first, draw()):
        np.testing.assert_array_equal(a, b)
    mx.random.seed(1235)
    assert not np.array_equal(first[0], draw()[0])


def test_seed_takes_any_32_bit_pattern_like_mxnet():
    mx.random.seed(-1)
    a = mx.nd.random.uniform(shape=(4,)).asnumpy()
    mx.random.seed(2 ** 32 - 1)
    np.testing.assert_array_equal(a, mx.nd.random.uniform(shape=(4,)).asnumpy())
    mx.random.seed(np.int64(2 ** 31))          # numpy integers are integers too
    for bad in (1.5, "3", None, True):
        with pytest.raises(ValueError, match="seed_state must be int"):
            mx.random.seed(bad)


def test_each_device_has_its_own_stream():
    gpu0, gpu1 = mx.Context("gpu", 0), mx.Context("gpu", 1)
    # seed(s): the host and GPU i start from s + i
    mx.random.seed(40)
    assert rng.get_rng(gpu1).random() == np.random.default_rng(41).random()
    assert rng.get_rng(gpu0).random() == np.random.default_rng(40).random()
    assert rng.get_rng(mx.cpu(3)).random() == np.random.default_rng(40).random()
    # seed(s, ctx): that device alone, from s itself
    mx.random.seed(40)
    host_next = np.random.default_rng(40).random()
    mx.random.seed(7, ctx=gpu1)
    assert rng.get_rng(gpu1).random() == np.random.default_rng(7).random()
    assert rng.get_rng().random() == host_next      # the host stream was left alone
    mx.random.seed(7, ctx=mx.cpu(1))                 # every cpu(i) shares the host stream
    assert rng.get_rng(mx.cpu(0)).random() == np.random.default_rng(7).random()
    with pytest.raises(ValueError):
        mx.random.seed(1, ctx="tpu(0)")


def test_seed_for_a_context_replays_imperative_and_symbolic_draws():
    probs = mx.nd.array([0.125, 0.25, 0.25, 0.0625, 0.125, 0.1875])
    mx.random.seed(5, ctx=mx.cpu())
    a = mx.nd.random.multinomial(probs, shape=1000).asnumpy()
    p = mx.sym.Variable("p")
    exe = mx.sym.random.multinomial(p, shape=1000, get_prob=False).bind(mx.cpu(), {"p": probs})
    mx.random.seed(5, ctx=mx.cpu())
    np.testing.assert_array_equal(exe.forward()[0].asnumpy(), a)


# ---------------------------------------------------------------------------------------------
# multinomial, shuffle, Zipfian
# ---------------------------------------------------------------------------------------------
def test_multinomial_frequencies_and_log_probabilities():
    probs = np.array([[0.1, 0.6, 0.3], [0.5, 0.0, 0.5]])
    mx.random.seed(8)
    idx, logp = mx.nd.random.multinomial(mx.nd.array(probs), shape=N, get_prob=True)
    assert idx.shape == (2, N) and idx.dtype == np.int32 and logp.dtype == np.float32
    host = idx.asnumpy()
    for row in range(2):
        freq = np.bincount(host[row], minlength=3) / N
        np.testing.assert_allclose(freq, probs[row], atol=5 * math.sqrt(0.25 / N))
    np.testing.assert_allclose(logp.asnumpy(), np.log(probs[np.arange(2)[:, None], host]),
                               rtol=1e-6)
    assert isinstance(mx.nd.random.multinomial(mx.nd.array(probs), get_prob=True), list)
    one = mx.nd.random.multinomial(mx.nd.array(probs))
    assert one.shape == (2,) and set(one.asnumpy()[1:]) <= {0, 2}
    assert mx.nd.random.multinomial(mx.nd.array(probs), dtype="float64").dtype == np.float64


def test_multinomial_log_probability_gradient():
    """d/dp of sum(head * log p[drawn]) is head / p at every drawn index, summed."""
    probs = np.array([[0.2, 0.5, 0.3]])
    data = mx.sym.Variable("data")
    out = mx.sym.random.multinomial(data, shape=6, get_prob=True)
    grad = mx.nd.zeros((1, 3))
    exe = out.bind(mx.cpu(), {"data": mx.nd.array(probs)}, args_grad={"data": grad})
    mx.random.seed(2)
    idx, _ = exe.forward(is_train=True)
    heads = np.arange(1.0, 7.0).reshape(1, 6)
    exe.backward([mx.nd.zeros((1, 6)), mx.nd.array(heads)])
    expected = np.zeros(3)
    np.add.at(expected, idx.asnumpy()[0].astype(int), heads[0] / probs[0][idx.asnumpy()[0]])
    np.testing.assert_allclose(grad.asnumpy()[0], expected, rtol=1e-5)


def test_shuffle_permutes_rows_uniformly():
    data = mx.nd.arange(0, 12).reshape((3, 4))
    counts = {}
    mx.random.seed(6)
    for _ in range(6000):
        out = mx.nd.random.shuffle(data).asnumpy()
        # rows move whole
        np.testing.assert_array_equal(out - out[:, :1], np.tile(np.arange(4.0), (3, 1)))
        key = tuple(out[:, 0].astype(int))
        counts[key] = counts.get(key, 0) + 1
    assert sorted(counts) == sorted(__import__("itertools").permutations((0, 4, 8)))
    for c in counts.values():
        assert abs(c / 6000.0 - 1 / 6.0) < 5 * math.sqrt((1 / 6.0) * (5 / 6.0) / 6000)
    a = mx.sym.Variable("a")
    d = mx.sym.sort(mx.sym.random.shuffle(mx.sym.random.shuffle(a)), axis=0)
    np.testing.assert_array_equal(d.eval(a=data, ctx=mx.cpu())[0].asnumpy(), data.asnumpy())


def _zipf_probabilities(range_max):
    c = np.arange(range_max)
    return np.log((c + 2.0) / (c + 1.0)) / np.log(range_max + 1.0)


def test_unique_zipfian_draws_distinct_classes_and_counts_trials():
    mx.random.seed(7)
    classes, trials = mx.nd._internal._sample_unique_zipfian(1000, shape=(3, 200))
    assert classes.dtype == np.int64 and trials.dtype == np.int64
    assert classes.shape == (3, 200) and trials.shape == (3,)
    host = classes.asnumpy()
    for row in host:
        assert np.unique(row).size == 200 and row.min() >= 0 and row.max() < 1000
    assert (trials.asnumpy() >= 200).all()
    # the expected number of draws until 200 distinct classes, from the law itself
    p = _zipf_probabilities(1000)
    mx.random.seed(8)
    many = mx.nd._internal._sample_unique_zipfian(1000, shape=(40, 200))[1].asnumpy()
    rng_ref = np.random.default_rng(0)
    ref = []
    for _ in range(40):
        seen, n = set(), 0
        while len(seen) < 200:
            seen.add(rng_ref.choice(1000, p=p / p.sum()))
            n += 1
        ref.append(n)
    assert abs(many.mean() - np.mean(ref)) < 5 * np.std(ref) / math.sqrt(40) * math.sqrt(2)


def test_rand_zipfian_classes_and_expected_counts():
    range_max, num_sampled = 20, 50000
    expected = _zipf_probabilities(range_max) * num_sampled
    true = mx.nd.array([0, 3, 19], dtype="int32")
    mx.random.seed(3)
    sampled, count_true, count_sampled = mx.nd.contrib.rand_zipfian(true, num_sampled, range_max)
    assert sampled.dtype == np.int64 and count_true.dtype == np.float64
    s = sampled.asnumpy()
    np.testing.assert_allclose(count_true.asnumpy(), expected[[0, 3, 19]], rtol=1e-12)
    np.testing.assert_allclose(count_sampled.asnumpy(), expected[s], rtol=1e-12)
    freq = np.bincount(s, minlength=range_max) / num_sampled
    np.testing.assert_allclose(freq, expected / num_sampled, atol=0.01)
    # the symbol version gives the same three outputs
    var = mx.sym.var("true")
    group = mx.sym.Group(list(mx.sym.contrib.rand_zipfian(var, num_sampled, range_max)))
    mx.random.seed(3)
    outs = group.bind(mx.cpu(), {"true": true}).forward()
    for got, want in zip(outs, (sampled, count_true, count_sampled)):
        np.testing.assert_array_equal(got.asnumpy(), want.asnumpy())


# ---------------------------------------------------------------------------------------------
# symbols and JSON
# ---------------------------------------------------------------------------------------------
def test_symbol_json_names_the_operators_and_their_attributes():
    x = mx.sym.random.uniform(-1, 2, shape=(3, 4), name="u")
    node = json.loads(x.tojson())["nodes"][0]
    assert node["op"] == "_random_uniform" and node["name"] == "u"
    assert node["attrs"] == {"low": "-1", "high": "2", "shape": "(3, 4)"}
    mu, sigma = mx.sym.var("mu"), mx.sym.var("sigma")
    s = mx.sym.random.normal(mu, sigma, shape=(5,), name="s")
    nodes = json.loads(s.tojson())["nodes"]
    assert nodes[-1]["op"] == "_sample_normal" and nodes[-1]["attrs"] == {"shape": "(5,)"}
    loaded = mx.sym.load_json(s.tojson())
    _, out_shapes, _ = loaded.infer_shape(mu=(2,), sigma=(2,))
    assert out_shapes == [(2, 5)]
    args = {"mu": mx.nd.array([0.0, 100.0]), "sigma": mx.nd.array([1.0, 1.0])}
    mx.random.seed(2)
    a = s.bind(mx.cpu(), args).forward()[0].asnumpy()
    mx.random.seed(2)
    np.testing.assert_array_equal(loaded.bind(mx.cpu(), args).forward()[0].asnumpy(), a)
    assert (a[1] > 90).all() and (a[0] < 10).all()


def test_sym_random_exposes_every_random_operator():
    for name in ("uniform", "normal", "gamma", "exponential", "poisson", "negative_binomial",
                 "generalized_negative_binomial", "randint", "multinomial", "shuffle",
                 "normal_like", "uniform_like"):
        assert callable(getattr(mx.sym.random, name)) and callable(getattr(mx.nd.random, name))


# ---------------------------------------------------------------------------------------------
# bad inputs
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda: mx.nd.random.normal(0, -1, shape=(2,)),
    lambda: mx.nd.random.uniform(2, 1, shape=(2,)),
    lambda: mx.nd.random.gamma(-1, 1, shape=(2,)),
    lambda: mx.nd.random.exponential(-2, shape=(2,)),
    lambda: mx.nd.random.poisson(-1, shape=(2,)),
    lambda: mx.nd.random.negative_binomial(2, 1.5, shape=(2,)),
    lambda: mx.nd.random.generalized_negative_binomial(-1, 1, shape=(2,)),
    lambda: mx.nd.random.randint(5, 5, shape=(2,)),
    lambda: mx.nd.random.normal(mx.nd.zeros((2,)), mx.nd.array([1, -1])),
    lambda: mx.nd.random.multinomial(mx.nd.array([0.5, -0.5])),
], ids=["normal", "uniform", "gamma", "exponential", "poisson", "negative_binomial",
        "generalized_negative_binomial", "randint", "sample_normal", "multinomial"])
def test_parameters_outside_the_law_fail_where_the_result_is_read(call):
    result = call()                           # as in MXNet, the call itself returns
    with pytest.raises(MXNetError, match="Operator _(random|sample)_"):
        result.asnumpy()
    assert mx.nd.random.uniform(shape=(2,)).shape == (2,)     # the next call works


def test_argument_errors_are_raised_by_the_call():
    with pytest.raises(AssertionError, match="same type"):
        mx.nd.random.uniform(mx.nd.zeros((2,)), 1.0)
    with pytest.raises(ValueError, match="NDArray or numbers"):
        mx.nd.random.normal("0", 1)
    with pytest.raises(ValueError, match="Symbol or numbers"):
        mx.sym.random.normal("0", 1)
    with pytest.raises(ValueError):
        mx.nd.random.randint(mx.nd.zeros((2,)), mx.nd.ones((2,)))
    with pytest.raises(MXNetError, match="dtype"):
        mx.nd.random.uniform(shape=(2,), dtype="int8")
    with pytest.raises(MXNetError, match="mu.*sigma|sigma.*shape"):
        mx.nd.random.normal(mx.nd.zeros((2,)), mx.nd.ones((3,)))
    with pytest.raises(MXNetError, match="at least one axis"):
        mx.sym.random.multinomial(mx.sym.var("d")).infer_shape(d=(0,))
    with pytest.raises(MXNetError, match="distinct classes"):
        mx.nd._internal._sample_unique_zipfian(5, shape=(1, 6))
    with pytest.raises(MXNetError, match="shape must be"):
        mx.nd._internal._sample_unique_zipfian(5, shape=(4,))
