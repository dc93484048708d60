"""``mx.sym.contrib``: the ``_contrib_X`` operators as ``sym.contrib.X`` (generated lazily)."""
from ._namespace import lazy_getattr as _lazy_getattr, lazy_dir as _lazy_dir

__getattr__ = _lazy_getattr(__name__, ('_contrib_',))
__dir__ = _lazy_dir(__name__, ('_contrib_',))
