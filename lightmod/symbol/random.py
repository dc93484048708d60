"""``mx.sym.random``: the ``_random_X`` / ``_sample_X`` operators (generated lazily)."""
from ._namespace import lazy_getattr as _lazy_getattr, lazy_dir as _lazy_dir

__getattr__ = _lazy_getattr(__name__, ('_random_', '_sample_'))
__dir__ = _lazy_dir(__name__, ('_random_', '_sample_'))
