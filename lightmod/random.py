"""``mx.random``: seeding lightmod's one generator (``lightmod/rng.py``) and its samplers.

``mx.random.seed(s)`` makes the whole sequence (initializers, Dropout masks, SGLD noise,
``nd.random.*``) reproducible; the same seed and the same calls give the same numbers.
``mx.random.uniform`` / ``normal`` / ... are ``mx.nd.random``'s samplers, as in MXNet.
"""
from .ndarray.random import (
                             exponential,
                             gamma,
                             generalized_negative_binomial,
                             multinomial,
                             negative_binomial,
                             normal,
                             poisson,
                             randint,
                             randn,
                             shuffle,
                             uniform,
)
from .rng import get_rng, seed

__all__ = ["seed", "get_rng", "uniform", "normal", "randn", "randint", "exponential", "gamma",
           "poisson", "negative_binomial", "generalized_negative_binomial", "multinomial",
           "shuffle"]
