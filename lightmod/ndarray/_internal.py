"""``nd._internal``: every operator by its registered name or alias (``_plus_scalar`` ...)."""
from ._namespace import lazy_getattr, lazy_dir

__getattr__ = lazy_getattr(__name__, ("",))
__dir__ = lazy_dir(__name__, ("",))
