"""``mx.kv`` / ``mx.kvstore``: key-value stores that sum gradients across devices and can run
the optimizer (``create('local' | 'device' | 'nccl' | ...)``, ``KVStoreBase.register``)."""
from .base import KVStoreBase  # noqa: F401
from .kvstore import KVStore, create  # noqa: F401
from . import dist  # noqa: F401  (registers the MPI stores: dist_sync, dist_device_sync, ...)

__all__ = ["create", "KVStoreBase", "KVStore"]
