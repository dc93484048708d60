"""``mx.engine``: bulk-size settings, and where an operator's failure is reported.

lightmod runs every operator when it is called, so there is no queue to bundle: ``bulk`` and
``set_bulk_size`` keep MXNet's interface (the previous size comes back) and change nothing
else.

MXNet reports the failure of an operator (a sampler given a negative scale, an index out of
range...) not when the operator is called but when its result is first *read*: by
``asnumpy``/``asscalar``/``wait_to_read``, by ``mx.nd.waitall()``, or by reading something
computed from it. lightmod keeps that contract with :class:`PendingError`:

* an operator that fails while computing raises :class:`DeferredOperatorError`; the
  imperative call (``nd.X``) and the executor catch it, wrap it in a ``PendingError`` and
  attach that to the outputs, and the call returns normally;
* an operation given an array that carries a pending error does not compute: its outputs
  carry the same ``PendingError`` (views, copies and results of later operators included);
* the first read of any array carrying it raises the error and clears it, for every array
  that shares it; ``waitall`` raises the oldest uncleared error and clears them all;
* errors found from the arguments alone (unknown attributes, shape and type mismatches) are
  still raised by the call itself, as MXNet raises them while setting the operation up.
"""
import threading

from .base import MXNetError

__all__ = ["bulk", "set_bulk_size", "DeferredOperatorError", "PendingError"]

_bulk_size = 0
_lock = threading.Lock()
_uncleared = []          # PendingErrors not raised yet, oldest first


def set_bulk_size(size):
    """Set the number of operators MXNet would bundle into one engine task; returns the
    previous size (lightmod runs operators one by one whatever the size)."""
    global _bulk_size
    if isinstance(size, bool) or not isinstance(size, int):
        raise TypeError("set_bulk_size: size must be an int, got %r" % (size,))
    previous, _bulk_size = _bulk_size, size
    return previous


class _BulkScope:
    """``with mx.engine.bulk(n):`` sets the bulk size for the block and restores it after."""

    def __init__(self, size):
        self._size = size
        self._previous = None

    def __enter__(self):
        self._previous = set_bulk_size(self._size)
        return self

    def __exit__(self, *exc):
        set_bulk_size(self._previous)


def bulk(size):
    """A scope running its operators with bulk size ``size`` (see :func:`set_bulk_size`)."""
    return _BulkScope(size)


class DeferredOperatorError(MXNetError):
    """An operator failed while computing; reported where its result is read."""


class PendingError:
    """The not-yet-reported error of one failed operation, shared by every array that
    holds its (missing) result or something computed from it."""
    __slots__ = ("error",)

    def __init__(self, error):
        self.error = error

    def __repr__(self):
        return "<PendingError %s>" % ("cleared" if self.error is None else repr(self.error))


def defer(error):
    """A new PendingError for ``error``, remembered for ``waitall``."""
    cell = PendingError(error)
    with _lock:
        _uncleared.append(cell)
    return cell


def any_uncleared():
    """Whether some failure has not been reported yet (when not, arrays need no checks)."""
    return bool(_uncleared)


def pending_of(arrays):
    """The first uncleared PendingError carried by one of ``arrays``, or None."""
    if not _uncleared:
        return None
    for arr in arrays:
        cell = getattr(arr, "_error", None)
        if cell is not None and cell.error is not None:
            return cell
    return None


def report(cell):
    """Raise the error of ``cell`` if it has not been reported, clearing it first."""
    if cell is None:
        return
    with _lock:
        error, cell.error = cell.error, None
        if error is not None:
            _uncleared.remove(cell)
    if error is not None:
        raise error


def report_all():
    """``waitall``: raise the oldest unreported error and clear every other one."""
    with _lock:
        cells = list(_uncleared)
        _uncleared.clear()
        first = cells[0].error if cells else None
        for cell in cells:
            cell.error = None
    if first is not None:
        raise first
