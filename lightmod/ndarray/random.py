"""``nd.random``: random arrays from the random operators (``operator/random_ops.py``).

Distribution parameters are numbers (the ``_random_<d>`` operator: one array of ``shape``,
``(1,)`` when neither ``shape`` nor ``out`` is given) or NDArrays of one shape ``S`` (the
``_sample_<d>`` operator: shape ``S + shape``), as in MXNet; mixing the two is an error. The
numbers come from the generator of the output's device (``lightmod/rng.py``), so
``mx.random.seed`` (also ``nd.random.seed``) makes them reproducible. Other ``_random_*`` and
``_sample_*`` operators (``normal_like`` ...) are reachable here under their short names.
"""
from .. import rng as _rng
from .._sampling import given_keywords, operator_prefix
from ..operator.frontend import namespace_hooks as _namespace_hooks
from .ndarray import NDArray
from .register import find_function as _find_function
from .register import op_function as _op_function

__all__ = ["seed", "uniform", "normal", "randn", "randint", "shuffle", "exponential",
           "gamma", "poisson", "negative_binomial", "generalized_negative_binomial",
           "multinomial"]

__getattr__, __dir__ = _namespace_hooks(__name__, ("_random_", "_sample_"), _find_function)

seed = _rng.seed


def _draw(kind, params, shape, dtype, ctx, out, kwargs, array_kind=True):
    """Run ``_sample_<kind>`` (NDArray parameters) or ``_random_<kind>`` (numbers)."""
    prefix = operator_prefix(params, NDArray, array_kind)
    if prefix == "_sample_":
        return _op_function(prefix + kind)(*params, out=out, **given_keywords(
            shape=shape, dtype=dtype), **kwargs)
    if shape is None:
        shape = out.shape if out is not None else (1,)
    return _op_function(prefix + kind)(*params, out=out, **given_keywords(
        shape=shape, dtype=dtype, ctx=ctx), **kwargs)


def uniform(low=0, high=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from U[low, high)."""
    return _draw("uniform", (low, high), shape, dtype, ctx, out, kwargs)


def normal(loc=0, scale=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from N(loc, scale**2)."""
    return _draw("normal", (loc, scale), shape, dtype, ctx, out, kwargs)


def randn(*shape, **kwargs):
    """Standard normal samples of the given shape (``loc``/``scale`` keywords allowed)."""
    loc, scale = kwargs.pop("loc", 0), kwargs.pop("scale", 1)
    return normal(loc, scale, shape or None, **kwargs)


def poisson(lam=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from the Poisson law of rate ``lam``."""
    return _draw("poisson", (lam,), shape, dtype, ctx, out, kwargs)


def exponential(scale=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from the exponential law of mean ``scale`` (rate ``1 / scale``)."""
    return _draw("exponential", (1.0 / scale,), shape, dtype, ctx, out, kwargs)


def gamma(alpha=1, beta=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from the gamma law of shape ``alpha`` and scale ``beta``."""
    return _draw("gamma", (alpha, beta), shape, dtype, ctx, out, kwargs)


def negative_binomial(k=1, p=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Failures before the ``k``-th success, each trial succeeding with probability ``p``."""
    return _draw("negative_binomial", (k, p), shape, dtype, ctx, out, kwargs)


def generalized_negative_binomial(mu=1, alpha=1, shape=None, dtype=None, ctx=None, out=None,
                                  **kwargs):
    """Counts of mean ``mu`` and variance ``mu + alpha * mu**2``."""
    return _draw("generalized_negative_binomial", (mu, alpha), shape, dtype, ctx, out, kwargs)


def randint(low, high, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Integers uniformly from [low, high) (int32 unless ``dtype`` says int64)."""
    return _draw("randint", (low, high), shape, dtype, ctx, out, kwargs, array_kind=False)


def multinomial(data, shape=None, get_prob=False, out=None, dtype="int32", **kwargs):
    """Category indices drawn from the probability rows of ``data`` (its last axis): shape
    ``data.shape[:-1] + shape``; with ``get_prob`` also their log-probabilities."""
    return _op_function("_sample_multinomial")(data, out=out, **given_keywords(
        shape=shape, get_prob=get_prob, dtype=dtype), **kwargs)


def shuffle(data, **kwargs):
    """A copy of ``data`` with its rows (first axis) in a random order."""
    return _op_function("_shuffle")(data, **kwargs)
