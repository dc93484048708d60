"""CPU launchers of the ``contrib`` operators' element-wise math (``kernels/scalar_contrib.py``)."""
import numpy as np
from numba import prange

from .. import scalar_contrib as S
from .jit import parallel_loop

__all__ = ["contrib_quadratic", "contrib_quadratic_backward", "contrib_quantize",
           "contrib_dequantize", "contrib_allclose"]


@parallel_loop(cost=1.0)
def _quadratic(x, out, a, b, c):
    for i in prange(x.size):
        out[i] = S.quadratic_value(x[i], a, b, c)


def contrib_quadratic(x, out, a, b, c):
    """out = a x^2 + b x + c."""
    _quadratic(x.size, x.reshape(-1), out.reshape(-1), float(a), float(b), float(c))


@parallel_loop(cost=1.0)
def _quadratic_grad(x, g, dx, a, b, add):
    for i in prange(x.size):
        v = g[i] * S.quadratic_slope(x[i], a, b)
        dx[i] = dx[i] + v if add else v


def contrib_quadratic_backward(x, g, dx, a, b, req):
    """dx (req) g (2 a x + b)."""
    if req != "null":
        _quadratic_grad(x.size, x.reshape(-1), g.reshape(-1), dx.reshape(-1), float(a), float(b),
                        req == "add")


@parallel_loop(cost=2.0)
def _quantize(x, lo, hi, out, out_lo, out_hi, signed):
    r = S.real_range(lo[0], hi[0])
    scale = (127.0 if signed else 255.0) / r
    for i in prange(x.size):
        out[i] = S.quantize_value(x[i], scale, signed)
    out_lo[0] = -r if signed else lo[0]
    out_hi[0] = r if signed else hi[0]


def contrib_quantize(x, lo, hi, out, out_lo, out_hi):
    """Codes of x (int8 or uint8: out's dtype) for the range [lo[0], hi[0]], and the range the
    codes stand for (symmetric for int8, the given one for uint8)."""
    signed = out.dtype == np.int8
    _quantize(x.size, x.reshape(-1), lo.reshape(-1), hi.reshape(-1), out.reshape(-1),
              out_lo.reshape(-1), out_hi.reshape(-1), signed)


@parallel_loop(cost=1.0)
def _dequantize(q, lo, hi, out, signed):
    step = S.real_range(lo[0], hi[0]) / (S.INT8_RANGE if signed else S.UINT8_RANGE)
    for i in prange(q.size):
        out[i] = q[i] * step


def contrib_dequantize(q, lo, hi, out):
    """Real values of the int8 / uint8 codes q for the range [lo[0], hi[0]]."""
    _dequantize(q.size, q.reshape(-1), lo.reshape(-1), hi.reshape(-1), out.reshape(-1),
                q.dtype == np.int8)


@parallel_loop(cost=1.0)
def _allclose(a, b, rtol, atol, equal_nan):
    bad = 0
    for i in prange(a.size):
        if not S.is_close(a[i], b[i], rtol, atol, equal_nan):
            bad += 1
    return bad


def contrib_allclose(a, b, out, rtol, atol, equal_nan):
    """out[0] = 1 when every pair of a and b is close (numpy.isclose's rule), else 0."""
    bad = _allclose(a.size, a.reshape(-1), b.reshape(-1), float(rtol), float(atol),
                    bool(equal_nan))
    out.reshape(-1)[0] = 0 if bad else 1
