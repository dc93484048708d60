"""``mx.sym.image``: the ``_image_X`` operators as ``sym.image.X`` (generated lazily)."""
from ..operator.frontend import namespace_hooks as _namespace_hooks
from .register import find_function as _find_function

__getattr__, __dir__ = _namespace_hooks(__name__, ("_image_",), _find_function)
