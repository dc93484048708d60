"""``mx.sym.contrib``: the ``_contrib_X`` operators as ``sym.contrib.X`` (generated lazily)."""
from ..operator.frontend import namespace_hooks as _namespace_hooks
from ..operator.random_ops import zipfian_candidates as _zipfian_candidates
from .register import find_function as _find_function
from .register import op_function as _op_function

__getattr__, __dir__ = _namespace_hooks(__name__, ("_contrib_",), _find_function)


def rand_zipfian(true_classes, num_sampled, range_max):
    """``num_sampled`` classes drawn with replacement from the Zipfian (log-uniform) law on
    [0, range_max), with the expected counts of ``true_classes`` and of the sampled classes
    among ``num_sampled`` draws: three Symbols (int64, float64, float64)."""
    return _zipfian_candidates(_op_function, true_classes, num_sampled, range_max)
