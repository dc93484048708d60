"""``mx.sym.random``: the ``_random_X`` / ``_sample_X`` operators (generated lazily)."""
from ..operator.frontend import namespace_hooks as _namespace_hooks
from .register import find_function as _find_function

__getattr__, __dir__ = _namespace_hooks(__name__, ("_random_", "_sample_"), _find_function)
