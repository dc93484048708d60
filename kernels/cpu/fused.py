"""CPU launchers of fused element-wise groups (the spec and the loop body: ``kernels/fused.py``).

Each direction is compiled twice from one generated source, serial and with ``prange`` over
rows; a call picks by the elements it touches (``jit.PARALLEL_MIN``, with the group's node count
as the cost weight). Compiled code is cached in-process per spec and on disk by numba.
"""
from numba import prange

from .. import cache_stamp  # noqa: F401  (stamps the cache entries made below)
from .. import fused as _fused
from .. import threads as _threads
from .jit import PARALLEL_MIN, parallel_loop

__all__ = ["fused_elemwise", "add_row_bias"]

_TEMPLATE = '''
@njit(cache=_CACHE, nogil=True, error_model="numpy", parallel={parallel})
def {name}(R, C, {args}):
    for r in {loop}(R):
        for c in range(C):
{body}
'''


class FusedLoop:
    """One direction of a fused group: ``loop(rows, cols, *arrays)``."""
    __slots__ = ("serial", "parallel", "cost")

    def __init__(self, serial, parallel, cost):
        self.serial, self.parallel, self.cost = serial, parallel, cost

    def __call__(self, rows, cols, *arrays):
        if rows > 1 and rows * cols * self.cost >= PARALLEL_MIN and not _threads.in_serial():
            return self.parallel(rows, cols, *arrays)
        return self.serial(rows, cols, *arrays)


def source(spec):
    """The generated module text of a spec (both directions, serial and parallel)."""
    lines = ["from numba import njit, prange"] + _fused.header(spec)
    for direction in ("forward", "backward"):
        body = "\n".join(" " * 12 + line for line in _fused.body_lines(spec, direction))
        args = ", ".join(_fused.arg_names(spec, direction))
        for parallel in (False, True):
            name = "%s_%s" % (direction, "parallel" if parallel else "serial")
            lines.append(_TEMPLATE.format(name=name, args=args, body=body, parallel=parallel,
                                          loop="prange" if parallel else "range"))
    return "\n".join(lines) + "\n"


_launchers = {}


def fused_elemwise(spec):
    """(forward, backward) launchers of a fused group's spec (see ``kernels/fused.py``)."""
    found = _launchers.get(spec)
    if found is None:
        mod = _fused.load_module("cpu", source(spec))
        cost = max(1, len(spec[2]))
        found = _launchers[spec] = (FusedLoop(mod.forward_serial, mod.forward_parallel, cost),
                                    FusedLoop(mod.backward_serial, mod.backward_parallel, cost))
    return found


# ---------------------------------------------------------------------------------------------
# GEMM epilogue: the bias of a FullyConnected output in one pass over it
# ---------------------------------------------------------------------------------------------
@parallel_loop()
def _add_row_bias(out, b):
    for i in prange(out.shape[0]):
        row = out[i]
        for j in range(row.shape[0]):
            row[j] += b[j]


def add_row_bias(out, b):
    """out (rows, n) += b (n,) in place. numpy's broadcasting add allocates an iteration
    buffer per call (8192 elements), which a planned training step must not do."""
    _add_row_bias(out.size, out, b)
