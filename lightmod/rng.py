"""The one seeded generator that every lightmod component draws from.

Initializers, Dropout masks, RReLU slopes, SGLD noise and ``nd.random.*`` all take their
numbers from :func:`get_rng`, so ``mx.random.seed(s)`` (which is :func:`seed`) makes the whole
sequence reproducible: the same seed and the same calls give the same numbers. This module sits
at the bottom of the layers (numpy only), so operators can draw without importing the array
front-end.
"""
import numpy as np

__all__ = ["seed", "get_rng"]

_generator = np.random.default_rng(0)


def seed(seed_state, ctx="all"):
    """Seed the generator (``ctx`` is accepted for MXNet compatibility; one stream serves all)."""
    global _generator
    _generator = np.random.default_rng(int(seed_state))


def get_rng():
    """The numpy Generator behind every random draw in lightmod."""
    return _generator
