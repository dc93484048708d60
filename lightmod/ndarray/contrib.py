"""``nd.contrib``: the operators registered as ``_contrib_<name>``, plus the element tests
``isnan``, ``isinf`` and ``isfinite``, which MXNet writes with ordinary NDArray operators
(1 where the test holds, 0 elsewhere, in the input's dtype)."""
from ..operator.frontend import namespace_hooks as _namespace_hooks
from ..operator.random_ops import zipfian_candidates as _zipfian_candidates
from .ndarray import NDArray as _NDArray
from .register import find_function as _find_function
from .register import op_function as _op_function

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


def rand_zipfian(true_classes, num_sampled, range_max, ctx=None):
    """``num_sampled`` classes drawn with replacement from the Zipfian (log-uniform) law on
    [0, range_max), P(c) = log((c + 2) / (c + 1)) / log(range_max + 1); returns them (int64)
    with the expected counts of ``true_classes`` and of the sampled classes among
    ``num_sampled`` draws (float64)."""
    if ctx is None:
        ctx = true_classes.context
    return _zipfian_candidates(_op_function, true_classes.as_in_context(ctx), num_sampled,
                               range_max, ctx=ctx)
