"""The hypothesis profiles lightmod's tests (and its users') run under.

The first call of a numba kernel compiles it (seconds), so a per-example deadline would fail
examples that merely happen to come first: both profiles set ``deadline=None``.
"""
import os

from hypothesis import HealthCheck, Phase, settings

PROFILE = "lightmod"
CI_PROFILE = "lightmod-ci"
MUTATION_PROFILE = "lightmod-mutation"
PROFILE_ENV = "LIGHTMOD_HYPOTHESIS_PROFILE"

_SLOW_CHECKS = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile(PROFILE, deadline=None, suppress_health_check=_SLOW_CHECKS,
                          max_examples=50)
settings.register_profile(CI_PROFILE, deadline=None, suppress_health_check=_SLOW_CHECKS,
                          max_examples=20, derandomize=True, database=None,
                          print_blob=True)


def load_profile(name=PROFILE):
    """Make the profile ``name`` ('lightmod' or 'lightmod-ci') hypothesis' default."""
    settings.load_profile(name)


# Mutation runs (tests/mutation_check.py) only need to know that a test fails: no shrinking.
settings.register_profile(MUTATION_PROFILE, deadline=None, suppress_health_check=_SLOW_CHECKS,
                          derandomize=True, database=None,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate])


def settings_for(max_examples, profile=PROFILE, **overrides):
    """A ``settings`` object based on ``profile`` with ``max_examples`` (and other
    ``overrides``), for ``@settings_for(10)`` on a single test without changing the global
    default. The environment variable ``LIGHTMOD_HYPOTHESIS_PROFILE`` replaces ``profile``
    (the mutation check sets it to skip shrinking)."""
    profile = os.environ.get(PROFILE_ENV, profile)
    return settings(settings.get_profile(profile), max_examples=max_examples, **overrides)
