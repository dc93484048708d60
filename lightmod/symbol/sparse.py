"""``mx.sym.sparse``: the ``_sparse_X`` operators (and every operator by name) (generated lazily)."""
from ._namespace import lazy_getattr as _lazy_getattr, lazy_dir as _lazy_dir

__getattr__ = _lazy_getattr(__name__, ('_sparse_', ''))
__dir__ = _lazy_dir(__name__, ('_sparse_', ''))
