"""The random family: samplers as graph operators, drawn from lightmod's seeded generators.

Every sampler takes its numbers from ``lightmod.rng.get_rng(ctx)`` (the stream of the device
it runs on), so ``mx.random.seed`` makes imperative calls and bound graphs reproducible alike.
Numbers are drawn on the host with numpy and written into the output with ``k.copy``, the same
call on the CPU and on a GPU (where it is one host-to-device copy).

Families (MXNet 1.9.1's names):

* ``_random_<d>``: parameters are attributes, the shape is the ``shape`` attribute;
* ``_random_<d>_like``: the same, with the shape and dtype of the input ``data``;
* ``_sample_<d>``: parameters are input arrays of one common shape ``S``; the output has shape
  ``S + shape``, one block of ``shape`` samples per parameter element;
* ``_random_randint``, ``_sample_multinomial``, ``_shuffle`` and ``_sample_unique_zipfian``.

Invalid distribution parameters (a negative scale...) are found while sampling, so they raise
``engine.DeferredOperatorError``: as in MXNet, the failure is reported where the result is read.
The samplers have no gradient (zeros flow back), except ``_sample_multinomial``'s log-probability
output, whose gradient reaches the probabilities.
"""
import math

import numpy as np

from .. import engine
from .. import rng as _rng
from .registry import Bool, Enum, Float, Int, Operator, Shape, Str, merge_shape, register

__all__ = ["DISTRIBUTIONS", "zipfian_candidates"]

_FLOAT_DTYPES = ("None", "float16", "float32", "float64")


class _DtypeChoice(Enum):
    """One of a few dtype names; numpy dtypes and types (``np.float64``) name themselves."""

    def parse(self, value):
        if value is not None and not isinstance(value, str):
            try:
                value = np.dtype(value).name
            except TypeError:
                pass
        return super().parse(value)


class _Distribution:
    """One distribution: its attribute names and defaults (``_random_*``), its input names
    (``_sample_*``), the constraints its parameters must meet, and how to draw from it."""

    def __init__(self, name, attrs, inputs, rules, draw, integer_attrs=()):
        self.name = name
        self.attrs = attrs                  # ((attribute, default), ...)
        self.inputs = inputs                # the same parameters as input arrays
        self.rules = rules                  # ((test(*params) -> bool array, message), ...)
        self.draw = draw                    # draw(gen, *params, size) -> float64 samples
        self.integer_attrs = integer_attrs

    def check(self, op, params):
        for test, message in self.rules:
            if not np.all(test(*params)):
                raise engine.DeferredOperatorError("Operator %s: %s" % (op.name, message))


def _gamma_poisson(gen, shape_k, scale, size):
    """Poisson counts whose rate is Gamma(shape_k, scale): a negative binomial draw."""
    return gen.poisson(gen.gamma(shape_k, scale, size))


def _negative_binomial(gen, k, p, size):
    # failures before the k-th success with success probability p
    return _gamma_poisson(gen, k, (1.0 - p) / p, size)


def _generalized_negative_binomial(gen, mu, alpha, size):
    # mean mu, variance mu + alpha * mu**2; alpha = 0 is the Poisson(mu) limit
    mu, alpha = np.broadcast_to(mu, size), np.broadcast_to(alpha, size)
    spread = alpha > 0
    safe_alpha = np.where(spread, alpha, 1.0)
    rate = np.where(spread, gen.gamma(1.0 / safe_alpha, safe_alpha * mu, size), mu)
    return gen.poisson(rate)


DISTRIBUTIONS = {d.name: d for d in (
    _Distribution("uniform", (("low", 0.0), ("high", 1.0)), ("low", "high"),
                  ((lambda lo, hi: hi >= lo, "high must be at least low"),),
                  lambda gen, lo, hi, size: gen.uniform(lo, hi, size)),
    _Distribution("normal", (("loc", 0.0), ("scale", 1.0)), ("mu", "sigma"),
                  ((lambda m, s: s > 0, "the scale (standard deviation) must be positive"),),
                  lambda gen, m, s, size: gen.normal(m, s, size)),
    _Distribution("gamma", (("alpha", 1.0), ("beta", 1.0)), ("alpha", "beta"),
                  ((lambda a, b: a > 0, "alpha (shape) must be positive"),
                   (lambda a, b: b > 0, "beta (scale) must be positive")),
                  lambda gen, a, b, size: gen.gamma(a, b, size)),
    _Distribution("exponential", (("lam", 1.0),), ("lam",),
                  ((lambda lam: lam > 0, "lam (rate) must be positive"),),
                  lambda gen, lam, size: gen.exponential(1.0 / lam, size)),
    _Distribution("poisson", (("lam", 1.0),), ("lam",),
                  ((lambda lam: lam >= 0, "lam (rate) must not be negative"),),
                  lambda gen, lam, size: gen.poisson(lam, size)),
    _Distribution("negative_binomial", (("k", 1), ("p", 1.0)), ("k", "p"),
                  ((lambda k, p: k >= 0, "k (number of successes) must not be negative"),
                   (lambda k, p: (p > 0) & (p <= 1), "p (success probability) must be in (0, 1]")),
                  _negative_binomial, integer_attrs=("k",)),
    _Distribution("generalized_negative_binomial", (("mu", 1.0), ("alpha", 1.0)),
                  ("mu", "alpha"),
                  ((lambda mu, a: mu >= 0, "mu (mean) must not be negative"),
                   (lambda mu, a: a >= 0, "alpha (dispersion) must not be negative")),
                  _generalized_negative_binomial),
)}


def _attr_decl(dist, attr, default):
    kind = Int if attr in dist.integer_attrs else Float
    return kind(default, doc="%s of the %s distribution" % (attr, dist.name))


def _write(k, out, samples):
    """Store host samples into an output buffer (host array or device array)."""
    k.copy(out, np.asarray(samples).reshape(tuple(out.shape)))


def _no_gradient(k, in_grads, req):
    for grad, r in zip(in_grads, req):
        if grad is not None and r == "write":
            k.fill(grad, 0)


class _Sampler(Operator):
    """Shared by the samplers: no inputs' gradient, an output dtype from ``dtype``."""
    default_dtype = "float32"
    stateful = True         # each node draws its own numbers: identical nodes stay apart

    def out_dtype(self, p):
        dtype = p.get("dtype")
        return self.default_dtype if dtype in (None, "None") else dtype

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        _no_gradient(k, in_grads, req)


def _draw_with_attributes(op, p, k, out, state):
    """Fill ``out`` from ``op.dist`` with the parameters given as attributes."""
    values = [getattr(p, name) for name, _ in op.dist.attrs]
    op.dist.check(op, values)
    gen = _rng.get_rng(state.get("context"))
    _write(k, out, op.dist.draw(gen, *values, tuple(out.shape)))


def _known(shape):
    return shape is not None and len(shape) > 0 and all(d for d in shape)


class _RandomOp(_Sampler):
    """``_random_<d>``: scalar parameters, output shape from ``shape``."""
    inputs = ()
    dist = None

    def infer_shape(self, p, in_shapes):
        shape = tuple(p.shape) if p.shape else None
        return [], [shape if _known(shape) else None]

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        return []

    def infer_type(self, p, in_types):
        return [], [self.out_dtype(p)]

    def forward(self, p, k, inputs, outputs, is_train, state):
        _draw_with_attributes(self, p, k, outputs[0], state)


class _RandomLikeOp(_Sampler):
    """``_random_<d>_like``: scalar parameters, shape and dtype of ``data``."""
    inputs = ("data",)
    dist = None

    def infer_shape(self, p, in_shapes):
        return list(in_shapes), [in_shapes[0]]

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        return [merge_shape(in_shapes[0], out_shapes[0])]

    def forward(self, p, k, inputs, outputs, is_train, state):
        _draw_with_attributes(self, p, k, outputs[0], state)


class _SampleOp(_Sampler):
    """``_sample_<d>``: parameter arrays of one shape S, output S + ``shape``."""
    dist = None

    def infer_shape(self, p, in_shapes):
        common = None
        for name, shape in zip(self.inputs, in_shapes):
            try:
                common = merge_shape(common, shape)
            except ValueError:
                raise self.error("input '%s' has shape %s, expected %s (every parameter array "
                                 "has the same shape)", name, shape, common) from None
        out = None if common is None else tuple(common) + tuple(p.shape or ())
        return [common] * len(in_shapes), [out]

    def infer_type(self, p, in_types):
        known = next((t for t in in_types if t is not None), None)
        return [t if t is not None else known for t in in_types], [self.out_dtype(p)]

    def forward(self, p, k, inputs, outputs, is_train, state):
        extra = tuple(p.shape or ())
        values = [np.asarray(k.to_host(x), dtype=np.float64) for x in inputs]
        self.dist.check(self, values)
        base = tuple(values[0].shape)
        blocks = [v.reshape(base + (1,) * len(extra)) for v in values]
        gen = _rng.get_rng(state.get("context"))
        _write(k, outputs[0], self.dist.draw(gen, *blocks, base + extra))


def _shape_param(doc="Shape of the samples"):
    return Shape((), doc=doc)


def _register_distribution(dist):
    attrs = {name: _attr_decl(dist, name, default) for name, default in dist.attrs}
    dtype = _DtypeChoice(*_FLOAT_DTYPES, default="None", doc="Output dtype ('None': float32)")
    random_params = dict(attrs, shape=_shape_param(),
                         ctx=Str("", doc="Context of the output (no inputs to take it from)"),
                         dtype=dtype)
    aliases = ("random_" + dist.name,) + ((dist.name,) if dist.name in ("uniform", "normal")
                                          else ())
    register(type("Random_" + dist.name, (_RandomOp,),
                  {"name": "_random_" + dist.name, "aliases": aliases, "dist": dist,
                   "params": random_params}))
    register(type("RandomLike_" + dist.name, (_RandomLikeOp,),
                  {"name": "_random_%s_like" % dist.name, "dist": dist, "params": dict(attrs)}))
    register(type("Sample_" + dist.name, (_SampleOp,),
                  {"name": "_sample_" + dist.name, "aliases": ("sample_" + dist.name,),
                   "dist": dist, "inputs": dist.inputs,
                   "params": {"shape": _shape_param(), "dtype": dtype}}))


for _dist in DISTRIBUTIONS.values():
    _register_distribution(_dist)
del _dist


@register
class RandomRandint(_RandomOp):
    """Integers drawn uniformly from [low, high)."""
    name = "_random_randint"
    aliases = ("random_randint",)
    default_dtype = "int32"
    params = {"low": Int(doc="Lowest integer drawn (inclusive)"),
              "high": Int(doc="Highest integer drawn (exclusive)"),
              "shape": _shape_param(),
              "ctx": Str("", doc="Context of the output (no inputs to take it from)"),
              "dtype": _DtypeChoice("None", "int32", "int64", default="None",
                            doc="Output dtype ('None': int32)")}

    def forward(self, p, k, inputs, outputs, is_train, state):
        if p.high <= p.low:
            raise engine.DeferredOperatorError(
                "Operator %s: high (%d) must be greater than low (%d)" % (self.name, p.high, p.low))
        gen = _rng.get_rng(state.get("context"))
        _write(k, outputs[0], gen.integers(p.low, p.high, tuple(outputs[0].shape), np.int64))


@register
class SampleMultinomial(_Sampler):
    """Category indices drawn from the probability rows of ``data`` (its last axis); with
    ``get_prob`` a second output holds the log-probability of each drawn index."""
    name = "_sample_multinomial"
    aliases = ("sample_multinomial",)
    default_dtype = "int32"
    params = {"shape": _shape_param("Samples drawn from each distribution"),
              "get_prob": Bool(False, doc="Also output the log-probability of each sample"),
              "dtype": _DtypeChoice("float16", "float32", "float64", "int32", "uint8",
                                  default="int32",
                            doc="Dtype of the sampled indices")}

    def num_outputs(self, p):
        return 2 if p.get_prob else 1

    def infer_shape(self, p, in_shapes):
        data = in_shapes[0]
        if data is None:
            return list(in_shapes), [None] * self.num_outputs(p)
        if len(data) == 0 or (data[-1] is not None and data[-1] < 1):
            raise self.error("data must have at least one axis holding at least one "
                             "probability, got shape %s", tuple(data))
        out = tuple(data[:-1]) + tuple(p.shape or ())
        return list(in_shapes), [out or (1,)] * self.num_outputs(p)

    def infer_type(self, p, in_types):
        out = [self.out_dtype(p)] + ([in_types[0]] if p.get_prob else [])
        return list(in_types), out

    def forward(self, p, k, inputs, outputs, is_train, state):
        probs = np.asarray(k.to_host(inputs[0]), dtype=np.float64)
        rows = probs.reshape(-1, probs.shape[-1])
        if np.any(rows < 0) or not np.all(np.isfinite(rows)):
            raise engine.DeferredOperatorError("Operator %s: probabilities must be finite and "
                                               "not negative" % self.name)
        count = int(np.prod(p.shape or ()))
        cumulative = np.cumsum(rows, axis=1)
        gen = _rng.get_rng(state.get("context"))
        # inverse transform: the first category whose cumulative mass passes u
        u = gen.random((rows.shape[0], count)) * cumulative[:, -1:]
        picks = np.empty(u.shape, np.int64)
        for r in range(rows.shape[0]):
            picks[r] = np.searchsorted(cumulative[r], u[r], side="right")
        picks = np.minimum(picks, rows.shape[1] - 1)
        state["multinomial_picks"] = picks
        _write(k, outputs[0], picks)
        if p.get_prob:
            with np.errstate(divide="ignore"):
                _write(k, outputs[1], np.log(np.take_along_axis(rows, picks, axis=1)))

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if in_grads[0] is None or req[0] == "null":
            return
        dlogp = out_grads[1] if p.get_prob and len(out_grads) > 1 else None
        picks = state.get("multinomial_picks")
        probs = np.asarray(k.to_host(inputs[0]), dtype=np.float64)
        grad = np.zeros(probs.shape, np.float64)
        if dlogp is not None and picks is not None:
            rows = probs.reshape(-1, probs.shape[-1])
            flat = grad.reshape(rows.shape)
            heads = np.asarray(k.to_host(dlogp), dtype=np.float64).reshape(picks.shape)
            # d log p[i] / d p[i] = 1 / p[i], summed over the samples that drew i
            row_ids = np.repeat(np.arange(rows.shape[0]), picks.shape[1])
            np.add.at(flat, (row_ids, picks.reshape(-1)),
                      heads.reshape(-1) / rows[row_ids, picks.reshape(-1)])
        if req[0] == "add":
            k.assign(in_grads[0], _device_like(k, grad, in_grads[0]), "add")
        else:
            _write(k, in_grads[0], grad)


def _device_like(k, host, like):
    """``host`` as an array ``k.assign`` can add into ``like`` (same space and dtype)."""
    buf = k.empty(tuple(like.shape), like.dtype)
    k.copy(buf, host)
    return buf


@register
class Shuffle(_Sampler):
    """The rows (first axis) of ``data`` in a random order."""
    name = "_shuffle"
    aliases = ("shuffle",)
    params = {}

    def infer_shape(self, p, in_shapes):
        return list(in_shapes), [in_shapes[0]]

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        return [merge_shape(in_shapes[0], out_shapes[0])]

    def infer_type(self, p, in_types):
        return list(in_types), [in_types[0]]

    def forward(self, p, k, inputs, outputs, is_train, state):
        host = np.asarray(k.to_host(inputs[0]))
        order = _rng.get_rng(state.get("context")).permutation(host.shape[0])
        _write(k, outputs[0], host[order])


def zipfian_draws(gen, range_max, count):
    """``count`` classes from the log-uniform (Zipfian) law on [0, range_max):
    P(c) = log((c + 2) / (c + 1)) / log(range_max + 1)."""
    u = gen.random(count)
    classes = np.floor(np.exp(u * math.log(range_max + 1.0))).astype(np.int64) - 1
    return np.clip(classes, 0, range_max - 1)


@register
class SampleUniqueZipfian(_Sampler):
    """Per row of ``shape`` = (batch, num_sampled): distinct classes drawn from the Zipfian
    law on [0, range_max) by rejecting repeats; the second output counts the draws made."""
    name = "_sample_unique_zipfian"
    inputs = ()
    params = {"range_max": Int(doc="Number of classes"),
              "shape": Shape((), doc="(batch size, samples per row)")}

    def num_outputs(self, p):
        return 2

    def check_params(self, p):
        if len(p.shape) != 2 or min(p.shape) < 1:
            raise self.error("shape must be (batch size, samples per row), got %s", p.shape)
        if p.shape[1] > p.range_max:
            raise self.error("cannot draw %d distinct classes out of range_max=%d",
                             p.shape[1], p.range_max)

    def infer_shape(self, p, in_shapes):
        return [], [tuple(p.shape), (p.shape[0],)]

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        return []

    def infer_type(self, p, in_types):
        return [], ["int64", "int64"]

    def forward(self, p, k, inputs, outputs, is_train, state):
        batch, wanted = p.shape
        gen = _rng.get_rng(state.get("context"))
        samples = np.empty((batch, wanted), np.int64)
        trials = np.empty(batch, np.int64)
        for row in range(batch):
            draws = np.empty(0, np.int64)
            while True:
                draws = np.concatenate([draws, zipfian_draws(gen, p.range_max, 2 * wanted)])
                _, first = np.unique(draws, return_index=True)
                if first.size >= wanted:
                    # the draws that brought a new class, in the order they came
                    kept = np.sort(first)[:wanted]
                    samples[row], trials[row] = draws[kept], kept[-1] + 1
                    break
        _write(k, outputs[0], samples)
        _write(k, outputs[1], trials)


def zipfian_candidates(op, true_classes, num_sampled, range_max, **where):
    """``rand_zipfian`` for either frontend (``op(name)`` gives the frontend's function of an
    operator, ``nd`` or ``sym``): ``num_sampled`` classes drawn with replacement from the
    Zipfian law on [0, range_max), and the expected count of each true and each sampled class
    among ``num_sampled`` draws. ``where`` holds ``ctx`` for the imperative frontend."""
    log_range = math.log(range_max + 1.0)
    u = op("_random_uniform")(0, log_range, shape=(num_sampled,), dtype="float64", **where)
    # exp(u) - 1 lies in [0, range_max); its floor is the class
    sampled = op("Cast")(op("clip")(op("floor")(op("exp")(u) - 1), 0, range_max - 1),
                         dtype="int64")

    def expected_count(classes):
        c = op("Cast")(classes, dtype="float64")
        return op("log")((c + 2.0) / (c + 1.0)) * (num_sampled / log_range)

    return sampled, expected_count(true_classes), expected_count(sampled)
