"""Gradient requests: what backward does with a gradient buffer.

MXNet spells a request as a string; binding converts each one once into a :class:`GradReq`,
which is what the executor plans with and what operators and kernels receive. A ``GradReq`` is
a ``str`` subclass equal to its MXNet spelling, so ``req == "add"`` keeps working and printing a
request shows the familiar word.

* ``NULL``: no gradient is computed for the input.
* ``WRITE``: the gradient overwrites the buffer.
* ``ADD``: the gradient is added to what the buffer holds.
"""
import enum

__all__ = ["GradReq"]


class GradReq(str, enum.Enum):
    NULL = "null"
    WRITE = "write"
    ADD = "add"

    # print and format as the MXNet word, not as "GradReq.ADD"
    __str__ = str.__str__
    __format__ = str.__format__

    @property
    def code(self):
        """0 / 1 / 2 for null / write / add: the integer the numba kernels take."""
        return _CODES[self]

    @classmethod
    def parse(cls, value, where="grad_req"):
        """The request MXNet's spelling ``value`` names (a GradReq passes through)."""
        req = _PARSE.get(value) if isinstance(value, str) else None
        if req is None:
            # MXNet's Python front-end knows these three words only ('inplace' is internal)
            raise ValueError("%s must be in ('null', 'write', 'add'), got %r" % (where, value))
        return req


_CODES = {GradReq.NULL: 0, GradReq.WRITE: 1, GradReq.ADD: 2}
_PARSE = {"null": GradReq.NULL, "write": GradReq.WRITE, "add": GradReq.ADD}
