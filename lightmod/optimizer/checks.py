"""Checks of optimizer hyper-parameters, so that a wrong value fails where it is given, naming
it, instead of deep inside an update (``learning_rate="0.1"`` used to end in a TypeError about
multiplying a sequence)."""
import math
import numbers

from ..base import MXNetError

__all__ = ["check_hyper_parameters"]

# attribute -> the constructor argument users write
_PUBLIC = {"lr": "learning_rate"}
# attributes for which None means "not used"
_MAY_BE_NONE = {"lr", "clip_gradient", "lower_bound", "upper_bound"}
# numbers every optimizer or one of the built-in rules keeps as attributes
HYPER_PARAMETERS = ("lr", "wd", "rescale_grad", "clip_gradient", "momentum", "beta1", "beta2",
                    "epsilon", "gamma1", "gamma2", "rho", "lamda1", "beta", "lower_bound",
                    "upper_bound", "schedule_decay", "eta", "lamda", "initial_accumulator_value")


def check_hyper_parameters(optimizer, names=HYPER_PARAMETERS):
    """TypeError unless each of ``names`` that ``optimizer`` has is a real number (or None where
    None means "off"); MXNetError for NaN, and for infinity except in clip_gradient."""
    owner = type(optimizer).__name__
    for attr in names:
        if not hasattr(optimizer, attr):
            continue
        value = getattr(optimizer, attr)
        public = _PUBLIC.get(attr, attr)
        if value is None:
            if attr in _MAY_BE_NONE:
                continue
            raise TypeError("%s: %s must be a number, got None" % (owner, public))
        if not isinstance(value, numbers.Real):
            raise TypeError("%s: %s must be a number, got %s %r"
                            % (owner, public, type(value).__name__, value))
        if math.isnan(value) or (math.isinf(value) and attr != "clip_gradient"):
            raise MXNetError("%s: %s must be finite, got %r" % (owner, public, value))
