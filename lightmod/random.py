"""Random numbers: one seeded generator that every lightmod component draws from.

``mx.random.seed(s)`` makes the whole sequence (initializers, Dropout masks, SGLD noise,
``nd.random.*``) reproducible; the same seed and the same calls give the same numbers.
"""
import numpy as np

__all__ = ["seed", "get_rng"]

_rng = np.random.default_rng(0)


def seed(seed_state, ctx="all"):
    """Seed the generator (``ctx`` is accepted for MXNet compatibility; one stream serves all)."""
    global _rng
    _rng = np.random.default_rng(int(seed_state))


def get_rng():
    """The numpy Generator behind every random draw in lightmod."""
    return _rng
