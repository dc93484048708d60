"""Argument checks the public entry points share: each names the call, the argument, what was
expected and what came, where the bare failure would be an AttributeError or StopIteration
deep inside."""
import numbers

from .base import MXNetError

__all__ = ["data_iter", "integer", "first_batch", "same_shape", "symbol", "batch_array",
           "contexts"]


def _kind(value):
    """A type name a user recognises: ``str``, ``numpy.ndarray``, ``lightmod.NDArray``..."""
    kind = type(value)
    package = kind.__module__.split(".")[0]
    return kind.__name__ if package == "builtins" else "%s.%s" % (package, kind.__name__)


def data_iter(value, where, argument):
    """TypeError unless ``value`` is a data iterator (``provide_data`` and iterable)."""
    if not hasattr(value, "provide_data") or not hasattr(value, "__iter__"):
        raise TypeError("%s: %s must be a DataIter (e.g. mx.io.NDArrayIter(data, label, "
                        "batch_size)), got %s" % (where, argument, _kind(value)))


def integer(value, where, argument):
    """TypeError unless ``value`` is an integer (bool excluded)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s: %s must be an int, got %s %r"
                        % (where, argument, _kind(value), value))


def first_batch(iterator, where, argument):
    """The first batch of ``iterator``; MXNetError when it has none (an epoch needs one)."""
    batch = next(iterator, None)
    if batch is None:
        raise MXNetError("%s: %s yielded no batch (empty data, or an iterator that was not "
                         "reset)" % (where, argument))
    return batch


def same_shape(name, given, target, where):
    """MXNetError unless the array given for parameter ``name`` has the bound array's shape."""
    if tuple(given.shape) != tuple(target.shape):
        raise MXNetError("%s: parameter %r has shape %s, but the bound module's %r has shape %s"
                         % (where, str(name), tuple(given.shape), str(name),
                            tuple(target.shape)))


def symbol(value, where):
    """TypeError unless ``value`` is a Symbol."""
    from .symbol import Symbol
    if not isinstance(value, Symbol):
        raise TypeError("%s: symbol must be a Symbol (e.g. mx.sym.Variable('data') and "
                        "operators on it), got %s" % (where, _kind(value)))


def batch_array(value, where):
    """TypeError unless a batch input is an NDArray (or a per-device list of them)."""
    from .ndarray import NDArray
    if not isinstance(value, (NDArray, list, tuple)):
        raise TypeError("%s: DataBatch data and label must be NDArrays (mx.nd.array(x) converts "
                        "a numpy array), got %s" % (where, _kind(value)))


def contexts(value, where):
    """TypeError unless ``value`` is a Context or a non-empty list of them."""
    from .context import Context
    items = value if isinstance(value, (list, tuple)) else [value]
    if not items or not all(isinstance(c, Context) for c in items):
        raise TypeError("%s: context must be a Context (mx.cpu(), mx.gpu(0)) or a list of them, "
                        "got %r" % (where, value))
