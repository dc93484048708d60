"""``mx.sym._internal``: every operator by its registered name, the underscore ones included
(generated lazily)."""
from ..operator.frontend import namespace_hooks as _namespace_hooks
from .register import find_function as _find_function

__getattr__, __dir__ = _namespace_hooks(__name__, ("",), _find_function)
