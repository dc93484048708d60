"""Random numbers: one seeded generator that every lightmod component draws from.

``mx.random.seed(s)`` makes the whole sequence (initializers, Dropout masks, SGLD noise,
``nd.random.*``) reproducible; the same seed and the same calls give the same numbers.
``mx.random.uniform`` / ``normal`` / ... are ``mx.nd.random``'s samplers, as in MXNet.
"""
import numpy as np

__all__ = ["seed", "get_rng", "uniform", "normal", "randn", "randint", "exponential", "gamma",
           "poisson", "negative_binomial", "multinomial", "shuffle"]

_rng = np.random.default_rng(0)


def seed(seed_state, ctx="all"):
    """Seed the generator (``ctx`` is accepted for MXNet compatibility; one stream serves all)."""
    global _rng
    _rng = np.random.default_rng(int(seed_state))


def get_rng():
    """The numpy Generator behind every random draw in lightmod."""
    return _rng


def _sampler(name):
    def sample(*args, **kwargs):
        from .ndarray import random as nd_random   # lightmod.ndarray imports this module
        return getattr(nd_random, name)(*args, **kwargs)
    sample.__name__ = name
    sample.__doc__ = "Same as ``mx.nd.random.%s``." % name
    return sample


uniform = _sampler("uniform")
normal = _sampler("normal")
randn = _sampler("randn")
randint = _sampler("randint")
exponential = _sampler("exponential")
gamma = _sampler("gamma")
poisson = _sampler("poisson")
negative_binomial = _sampler("negative_binomial")
multinomial = _sampler("multinomial")
shuffle = _sampler("shuffle")
