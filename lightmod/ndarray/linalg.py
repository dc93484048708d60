"""``nd.linalg``: the operators registered as ``_linalg_<name>``."""
from ._namespace import lazy_getattr, lazy_dir

__getattr__ = lazy_getattr(__name__, ("_linalg_",))
__dir__ = lazy_dir(__name__, ("_linalg_",))
