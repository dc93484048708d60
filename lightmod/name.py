"""Automatic names for symbols: ``NameManager`` and ``Prefix`` (MXNet 1.9.1's mx.name).

An operator created without ``name=`` is called ``<hint><n>`` where the hint is the lower-cased
function name (``fullyconnected0``) and the counter is per hint and per manager. ``with
NameManager():`` starts fresh counters (BucketingModule relies on it so every bucket gets the
same names) and restores the previous manager on exit. The current manager is thread-local.
"""
import threading

from .base import ThreadScopeMeta, current_scope

__all__ = ["NameManager", "Prefix", "current"]


class NameManager(metaclass=ThreadScopeMeta):
    """Gives unique names to symbols created without an explicit name."""
    _current = threading.local()

    def __init__(self):
        self._counter = {}
        self._old_manager = None

    def get(self, name, hint):
        """``name`` if given, else ``hint`` followed by this manager's counter for the hint."""
        if name:
            return name
        count = self._counter.get(hint, 0)
        self._counter[hint] = count + 1
        return "%s%d" % (hint, count)

    def __enter__(self):
        self._old_manager = current()
        NameManager._current.value = self
        return self

    def __exit__(self, ptype, value, trace):
        NameManager._current.value = self._old_manager


class Prefix(NameManager):
    """A name manager that puts ``prefix`` in front of every name it gives (explicit ones too).

    >>> with mx.name.Prefix('mynet_'):
    ...     net = mx.sym.FullyConnected(data, num_hidden=10, name='fc1')
    >>> net.list_arguments()
    ['data', 'mynet_fc1_weight', 'mynet_fc1_bias']
    """

    def __init__(self, prefix):
        super().__init__()
        self._prefix = prefix

    def get(self, name, hint):
        return self._prefix + super().get(name, hint)


def current():
    """The name manager in force in this thread (a default one is created per thread)."""
    return current_scope(NameManager)


NameManager._current.value = NameManager()
