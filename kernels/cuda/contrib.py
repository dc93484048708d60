"""CUDA launchers of the ``contrib`` operators' element-wise math: the same functions and
arguments as ``kernels/cpu/contrib.py``, grid-stride loops over ``kernels/scalar_contrib.py``."""
import numpy as np
from numba import cuda

from .. import scalar_contrib as S
from .memory import fill, flat
from .memory import launch_config as launch

__all__ = ["contrib_quadratic", "contrib_quadratic_backward", "contrib_quantize",
           "contrib_dequantize", "contrib_allclose"]


@cuda.jit
def _quadratic_k(x, out, a, b, c):
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        out[i] = S.quadratic_value(x[i], a, b, c)


def contrib_quadratic(x, out, a, b, c):
    """out = a x^2 + b x + c."""
    if x.size:
        _quadratic_k[launch(x.size)](flat(x), flat(out), float(a), float(b), float(c))


@cuda.jit
def _quadratic_grad_k(x, g, dx, a, b, add):
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = g[i] * S.quadratic_slope(x[i], a, b)
        dx[i] = dx[i] + v if add else v


def contrib_quadratic_backward(x, g, dx, a, b, req):
    """dx (req) g (2 a x + b)."""
    if req != "null" and x.size:
        _quadratic_grad_k[launch(x.size)](flat(x), flat(g), flat(dx), float(a), float(b),
                                          req == "add")


@cuda.jit
def _quantize_k(x, lo, hi, out, out_lo, out_hi, signed):
    r = S.real_range(lo[0], hi[0])
    scale = (127.0 if signed else 255.0) / r
    start = cuda.grid(1)
    for i in range(start, x.shape[0], cuda.gridsize(1)):
        out[i] = S.quantize_value(x[i], scale, signed)
    if start == 0:
        out_lo[0] = -r if signed else lo[0]
        out_hi[0] = r if signed else hi[0]


def contrib_quantize(x, lo, hi, out, out_lo, out_hi):
    """Codes of x (int8 or uint8: out's dtype) for the range [lo[0], hi[0]], and the range the
    codes stand for (symmetric for int8, the given one for uint8)."""
    _quantize_k[launch(max(x.size, 1))](flat(x), flat(lo), flat(hi), flat(out), flat(out_lo),
                                        flat(out_hi), np.dtype(out.dtype) == np.int8)


@cuda.jit
def _dequantize_k(q, lo, hi, out, signed):
    step = S.real_range(lo[0], hi[0]) / (S.INT8_RANGE if signed else S.UINT8_RANGE)
    for i in range(cuda.grid(1), q.shape[0], cuda.gridsize(1)):
        out[i] = q[i] * step


def contrib_dequantize(q, lo, hi, out):
    """Real values of the int8 / uint8 codes q for the range [lo[0], hi[0]]."""
    if q.size:
        _dequantize_k[launch(q.size)](flat(q), flat(lo), flat(hi), flat(out),
                                      np.dtype(q.dtype) == np.int8)


@cuda.jit
def _allclose_k(a, b, out, rtol, atol, equal_nan):
    for i in range(cuda.grid(1), a.shape[0], cuda.gridsize(1)):
        if not S.is_close(a[i], b[i], rtol, atol, equal_nan):
            out[0] = 0           # every thread that finds a pair apart writes the same 0


def contrib_allclose(a, b, out, rtol, atol, equal_nan):
    """out[0] = 1 when every pair of a and b is close (numpy.isclose's rule), else 0."""
    fill(out, 1)
    if a.size:
        _allclose_k[launch(a.size)](flat(a), flat(b), flat(out), float(rtol), float(atol),
                                    bool(equal_nan))
