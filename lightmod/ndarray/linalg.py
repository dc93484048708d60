"""``nd.linalg``: the operators registered as ``_linalg_<name>``."""
from ..operator.frontend import namespace_hooks as _namespace_hooks
from .register import find_function as _find_function

__getattr__, __dir__ = _namespace_hooks(__name__, ("_linalg_",), _find_function)
