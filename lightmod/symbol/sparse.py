"""``mx.sym.sparse``: the ``_sparse_X`` operators (and every operator by name) (generated lazily)."""
from ..operator.frontend import namespace_hooks as _namespace_hooks
from .register import find_function as _find_function

__getattr__, __dir__ = _namespace_hooks(__name__, ("_sparse_", ""), _find_function)
