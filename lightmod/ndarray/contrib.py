"""``nd.contrib``: the operators registered as ``_contrib_<name>``."""
from ..operator.frontend import namespace_hooks as _namespace_hooks
from .register import find_function as _find_function

__getattr__, __dir__ = _namespace_hooks(__name__, ("_contrib_",), _find_function)
