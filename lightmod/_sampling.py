"""What ``nd.random`` and ``sym.random`` share: choosing the operator family from the kinds of
the distribution parameters, and passing on only the keywords the caller gave."""
from .base import numeric_types


def given_keywords(**values):
    """The keywords whose value is not None (the operator's defaults apply to the others)."""
    return {key: value for key, value in values.items() if value is not None}


def operator_prefix(params, array_type, array_kind=True):
    """``"_sample_"`` when the parameters are all ``array_type`` (NDArray or Symbol: one
    distribution per element) and the distribution has such a form (``array_kind``),
    ``"_random_"`` when they are all numbers; any other mix is an error, as in MXNet."""
    arrays = [isinstance(v, array_type) for v in params]
    if all(arrays) and array_kind:
        return "_sample_"
    if any(arrays) or not all(isinstance(v, numeric_types) for v in params):
        if any(arrays) and array_kind:
            raise AssertionError("Distribution parameters must all have the same type, but got "
                                 "%s" % ", ".join(sorted({type(v).__name__ for v in params})))
        raise ValueError("Distribution parameters must be either %s or numbers, but got %s"
                         % (array_type.__name__, ", ".join(type(v).__name__ for v in params)))
    return "_random_"
