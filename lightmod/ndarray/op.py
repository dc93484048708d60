"""``nd.op``: every registered operator by name or alias (as ``mx.nd.op.<name>``)."""
from ._namespace import lazy_getattr, lazy_dir

__getattr__ = lazy_getattr(__name__, ("",))
__dir__ = lazy_dir(__name__, ("",))
