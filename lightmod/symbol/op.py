"""``mx.sym.op``: every operator by its registered name (generated lazily)."""
from ._namespace import lazy_getattr as _lazy_getattr, lazy_dir as _lazy_dir

__getattr__ = _lazy_getattr(__name__, ('',))
__dir__ = _lazy_dir(__name__, ('',))
