"""The kvstore interface, its plug-in registry and ``create``.

``KVStoreBase.register`` works as in MXNet 1.9.1: a subclass registered under its lower-cased
class name is what ``mx.kv.create(name)`` returns for that name. A store serving several type
strings (the distributed store: ``dist_sync``, ``dist_async`` ...) lists them in a class
attribute ``kvstore_types``; it is then registered under each and constructed with the type
string: ``klass(name)``. Every other name gives lightmod's local store (``KVStore``), like
MXNet's C++ ``KVStore::Create``: a device store when the name contains 'device' or is 'nccl',
a CPU-reducing store otherwise, ``type`` reporting the name as given.
"""
import warnings

from ..base import unimplemented_property
from ..ndarray import NDArray

__all__ = ["KVStoreBase"]


class KVStoreBase:
    """What every kvstore offers (the Module and gluon-style code call only these)."""

    OPTIMIZER = "optimizer"
    kv_registry = {}

    def broadcast(self, key, value, out, priority=0):
        """Initialise ``key`` with ``value`` and pull it into ``out``."""
        raise NotImplementedError("%s does not implement broadcast" % type(self).__name__)

    def pushpull(self, key, value, out=None, priority=0):
        """Push ``value`` (summed over a list) and pull the result into ``out`` (or ``value``)."""
        raise NotImplementedError("%s does not implement pushpull" % type(self).__name__)

    def set_optimizer(self, optimizer):
        """Run ``optimizer`` on the store's values at every push."""
        raise NotImplementedError("%s does not implement set_optimizer" % type(self).__name__)

    def is_capable(self, capability):
        """Whether the store supports a capability (``KVStoreBase.OPTIMIZER``)."""
        raise NotImplementedError("%s does not implement is_capable" % type(self).__name__)

    def save_optimizer_states(self, fname, dump_optimizer=False):
        raise NotImplementedError("%s cannot save optimizer states" % type(self).__name__)

    def load_optimizer_states(self, fname):
        raise NotImplementedError("%s cannot load optimizer states" % type(self).__name__)

    type = unimplemented_property("%s does not report its type")
    rank = unimplemented_property("%s does not report its rank")
    num_workers = unimplemented_property("%s does not report num_workers")

    @staticmethod
    def register(klass):
        """Register a kvstore class (a decorator): ``create(<lower-cased class name>)`` and,
        for each string in ``klass.kvstore_types``, ``create(<that string>)`` build it."""
        if not isinstance(klass, type):
            raise AssertionError("KVStoreBase.register expects a class, got %r" % (klass,))
        names = [klass.__name__.lower()] + [n.lower() for n in getattr(klass, "kvstore_types", ())]
        for name in names:
            if name in KVStoreBase.kv_registry and KVStoreBase.kv_registry[name] is not klass:
                old = KVStoreBase.kv_registry[name]
                warnings.warn("WARNING: New kvstore %s.%s is overriding existing kvstore %s.%s"
                              % (klass.__module__, klass.__name__, old.__module__, old.__name__),
                              stacklevel=2)
            KVStoreBase.kv_registry[name] = klass
        return klass


def _optimizer_capability(capability, runs_optimizer):
    """``is_capable``'s answer for the one capability MXNet defines ('optimizer'); any other
    name is a ValueError."""
    if capability.lower() == KVStoreBase.OPTIMIZER:
        return runs_optimizer
    raise ValueError(f"Unknown capability: {capability}")


class _SingleProcessStore(KVStoreBase):
    """A store whose only worker is this process (rank 0 of 1)."""

    @property
    def rank(self):
        return 0

    @property
    def num_workers(self):
        return 1


@KVStoreBase.register
class TestStore(_SingleProcessStore):
    """MXNet's minimal test store: no optimizer, values are summed and copied out."""

    def broadcast(self, key, value, out, priority=0):
        out = out if isinstance(out, list) else [out]
        for o in out:
            o[:] = value

    def pushpull(self, key, value, out=None, priority=0):
        if isinstance(value, NDArray):
            if out is not None:
                for o in (out if isinstance(out, list) else [out]):
                    o[:] = value
            return
        ctx = value[0].context
        reduced = value[0].as_in_context(ctx).copy()
        for v in value[1:]:
            reduced += v.as_in_context(ctx)
        targets = value if out is None else (out if isinstance(out, list) else [out])
        for o in targets:
            o[:] = reduced

    @staticmethod
    def is_capable(capability):
        return _optimizer_capability(capability, runs_optimizer=False)

    @property
    def type(self):
        return "teststore"

    # A store without the 'optimizer' capability refuses the optimizer methods with
    # NotImplementedError, as MXNet's TestStore does (its callers update locally instead).
    def set_optimizer(self, optimizer):
        raise NotImplementedError("teststore cannot run an optimizer "
                                  "(is_capable('optimizer') is False)")

    def save_optimizer_states(self, fname, dump_optimizer=False):
        raise NotImplementedError("teststore has no optimizer states to save")

    def load_optimizer_states(self, fname):
        raise NotImplementedError("teststore has no optimizer states to load")
