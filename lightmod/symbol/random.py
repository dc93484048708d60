"""``mx.sym.random``: the random operators (``operator/random_ops.py``) as graph nodes.

Distribution parameters are numbers (a ``_random_<d>`` node of ``shape``) or Symbols (a
``_sample_<d>`` node taking them as inputs), as in MXNet; mixing the two is an error. The
other ``_random_*`` and ``_sample_*`` operators (``normal_like`` ...) are reachable here under
their short names.
"""
from .._sampling import given_keywords, operator_prefix
from ..operator.frontend import namespace_hooks as _namespace_hooks
from .register import find_function as _find_function
from .register import op_function as _op_function
from .symbol import Symbol

__all__ = ["uniform", "normal", "randn", "poisson", "exponential", "gamma", "multinomial",
           "negative_binomial", "generalized_negative_binomial", "shuffle", "randint"]

__getattr__, __dir__ = _namespace_hooks(__name__, ("_random_", "_sample_"), _find_function)


def _node(kind, params, shape, dtype, kwargs, array_kind=True):
    """A ``_sample_<kind>`` node (Symbol parameters) or a ``_random_<kind>`` node (numbers)."""
    prefix = operator_prefix(params, Symbol, array_kind)
    return _op_function(prefix + kind)(*params, **given_keywords(shape=shape, dtype=dtype),
                                       **kwargs)


def uniform(low=0, high=1, shape=None, dtype=None, **kwargs):
    """Samples from U[low, high)."""
    return _node("uniform", (low, high), shape, dtype, kwargs)


def normal(loc=0, scale=1, shape=None, dtype=None, **kwargs):
    """Samples from N(loc, scale**2)."""
    return _node("normal", (loc, scale), shape, dtype, kwargs)


def randn(*shape, **kwargs):
    """Standard normal samples of the given shape (``loc``/``scale`` keywords allowed)."""
    loc, scale = kwargs.pop("loc", 0), kwargs.pop("scale", 1)
    return normal(loc, scale, shape or None, **kwargs)


def poisson(lam=1, shape=None, dtype=None, **kwargs):
    """Samples from the Poisson law of rate ``lam``."""
    return _node("poisson", (lam,), shape, dtype, kwargs)


def exponential(scale=1, shape=None, dtype=None, **kwargs):
    """Samples from the exponential law of mean ``scale`` (rate ``1 / scale``)."""
    return _node("exponential", (1.0 / scale,), shape, dtype, kwargs)


def gamma(alpha=1, beta=1, shape=None, dtype=None, **kwargs):
    """Samples from the gamma law of shape ``alpha`` and scale ``beta``."""
    return _node("gamma", (alpha, beta), shape, dtype, kwargs)


def negative_binomial(k=1, p=1, shape=None, dtype=None, **kwargs):
    """Failures before the ``k``-th success, each trial succeeding with probability ``p``."""
    return _node("negative_binomial", (k, p), shape, dtype, kwargs)


def generalized_negative_binomial(mu=1, alpha=1, shape=None, dtype=None, **kwargs):
    """Counts of mean ``mu`` and variance ``mu + alpha * mu**2``."""
    return _node("generalized_negative_binomial", (mu, alpha), shape, dtype, kwargs)


def randint(low, high, shape=None, dtype=None, **kwargs):
    """Integers uniformly from [low, high) (int32 unless ``dtype`` says int64)."""
    return _node("randint", (low, high), shape, dtype, kwargs, array_kind=False)


def multinomial(data, shape=None, get_prob=True, dtype="int32", **kwargs):
    """Category indices drawn from the probability rows of ``data`` (its last axis); with
    ``get_prob`` (the default here, as in MXNet) a second output of log-probabilities."""
    return _op_function("_sample_multinomial")(data, **given_keywords(
        shape=shape, get_prob=get_prob, dtype=dtype), **kwargs)


def shuffle(data, **kwargs):
    """``data`` with its rows (first axis) in a random order."""
    return _op_function("_shuffle")(data, **kwargs)
