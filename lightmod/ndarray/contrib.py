"""``nd.contrib``: the operators registered as ``_contrib_<name>``."""
from ._namespace import lazy_getattr, lazy_dir

__getattr__ = lazy_getattr(__name__, ("_contrib_",))
__dir__ = lazy_dir(__name__, ("_contrib_",))
