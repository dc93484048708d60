"""CPU launchers of fused element-wise groups (the spec and the loop body: ``kernels/fused.py``).

Each direction is compiled twice from one generated source, serial and with ``prange`` over
rows; a call picks by the elements it touches (``jit.PARALLEL_MIN``, with the group's node count
as the cost weight). Compiled code is cached in-process per spec and on disk by numba.
"""
import numpy as np
from numba import njit, prange, uint64

from .. import cache_stamp  # noqa: F401  (stamps the cache entries made below)
from .. import fused as _fused
from .. import threads as _threads
from ..scalar_nn import ACT_RELU, activation_value
from .jit import PARALLEL_MIN, parallel_loop, task_count

__all__ = ["fused_elemwise", "add_row_bias", "affine_act_rows"]

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
# GEMM epilogues: the bias (and a scale, an activation) of a product's output in one pass
# over it (FullyConnected here; the convolutions' own passes in conv.py use the same
# arguments)
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


_DUMMIES = {}


def _dummy(dtype):
    """A 1-element array standing in for an absent optional argument (one compiled signature)."""
    key = np.dtype(dtype)
    arr = _DUMMIES.get(key)
    if arr is None:
        arr = _DUMMIES[key] = np.zeros(1, dtype=key)
    return arr


def _epilogue_args(dtype, scale, shift):
    mode = 2 if scale is not None else (1 if shift is not None else 0)
    dummy = _dummy(dtype)
    return (dummy if scale is None else scale.reshape(-1),
            dummy if shift is None else shift.reshape(-1), mode)


@njit(cache=True, nogil=True)
def _affine_act_rows(out, dims, scale, shift, mode, act, r0, r1):
    _, F = dims
    for r in range(r0, r1):
        base = uint64(r * F)
        for f in range(uint64(F)):
            v = out[base + f]
            if mode == 2:
                v = v * scale[f]
            if mode >= 1:
                v = v + shift[f]
            if act == ACT_RELU:
                v = v if v > 0 else out.dtype.type(0)
            elif act >= 0:
                v = activation_value(v, act)
            out[base + f] = v


@njit(cache=True, nogil=True, parallel=True)
def _affine_act_rows_parallel(out, dims, scale, shift, mode, act, count, parts):
    for i in prange(parts):
        _affine_act_rows(out, dims, scale, shift, mode, act, i * count // parts,
                         (i + 1) * count // parts)


def affine_act_rows(out, scale=None, shift=None, act=-1):
    """In place on out (N, F): out = act(out * scale[f] + shift[f]) (the epilogue of a fully
    connected layer; scale / shift may be None, act -1 means none)."""
    scale, shift, mode = _epilogue_args(out.dtype, scale, shift)
    count = out.shape[0]
    args = (out.reshape(-1), out.shape, scale, shift, mode, act)
    # serial up to 8x the usual threshold: it follows a BLAS call whose threads still spin,
    # and a parallel region then waits for a core (measured 3x slower on 2 cores)
    parts = task_count(out.size, count, cost=0.25)
    if parts > 1:
        _affine_act_rows_parallel(*args, count, parts)
    else:
        _affine_act_rows(*args, 0, count)
