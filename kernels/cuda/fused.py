"""CUDA launchers of fused element-wise groups (the spec and the loop body: ``kernels/fused.py``).

The body the CPU launchers run in their row loops runs here in a grid-stride loop over
``rows x cols`` elements, so both halves compute a fused group with the same per-element math.
Kernels are generated per spec and cached in-process (numba compiles each per signature).
"""
from .. import fused as _fused
from .memory import launch_config

__all__ = ["fused_elemwise"]

_TEMPLATE = '''
@cuda.jit
def {name}(R, C, {args}):
    n = R * C
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        r = i // C
        c = i - r * C
{body}
'''


class FusedKernel:
    """One direction of a fused group on the GPU: ``kernel(rows, cols, *arrays)``."""
    __slots__ = ("kernel",)

    def __init__(self, kernel):
        self.kernel = kernel

    def __call__(self, rows, cols, *arrays):
        self.kernel[launch_config(rows * cols)](rows, cols, *arrays)


def source(spec):
    """The generated module text of a spec (both directions)."""
    lines = ["from numba import cuda"] + _fused.header(spec)
    for direction in ("forward", "backward"):
        body = "\n".join(" " * 8 + line for line in _fused.body_lines(spec, direction))
        lines.append(_TEMPLATE.format(name=direction, body=body,
                                      args=", ".join(_fused.arg_names(spec, direction))))
    return "\n".join(lines) + "\n"


_launchers = {}


def fused_elemwise(spec):
    """(forward, backward) launchers of a fused group's spec (see ``kernels/fused.py``)."""
    found = _launchers.get(spec)
    if found is None:
        mod = _fused.load_module("cuda", source(spec))
        found = _launchers[spec] = (FusedKernel(mod.forward), FusedKernel(mod.backward))
    return found
