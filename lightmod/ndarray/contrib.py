"""``nd.contrib``: the operators registered as ``_contrib_<name>``, plus the element tests
``isnan``, ``isinf`` and ``isfinite``, which MXNet writes with ordinary NDArray operators
(1 where the test holds, 0 elsewhere, in the input's dtype)."""
from ..operator.frontend import namespace_hooks as _namespace_hooks
from .ndarray import NDArray as _NDArray
from .register import find_function as _find_function

__getattr__, __dir__ = _namespace_hooks(__name__, ("_contrib_",), _find_function)

_INF = float("inf")


def _checked(data, name):
    if not isinstance(data, _NDArray):
        raise TypeError("contrib.%s: data must be an NDArray, got %s" % (name, type(data).__name__))
    return data


def isnan(data):
    """1 where ``data`` is NaN (the only value unequal to itself), else 0."""
    data = _checked(data, "isnan")
    return data != data


def isinf(data):
    """1 where ``data`` is +inf or -inf, else 0."""
    return _checked(data, "isinf").abs() == _INF


def isfinite(data):
    """1 where ``data`` is neither NaN nor infinite, else 0."""
    data = _checked(data, "isfinite")
    return (data == data) * (data.abs() != _INF)
