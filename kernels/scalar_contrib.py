"""Per-element math of the ``contrib`` operators (quadratic, quantize, dequantize, allclose),
plain ``@njit`` functions both kernel halves call (``kernels/cpu/contrib.py``,
``kernels/cuda/contrib.py``)."""
import math

from numba import njit

from . import cache_stamp  # noqa: F401  (stamps the cache entries made below)

# the quantized ranges MXNet 1.9.1's CPU dequantize divides by (half a step beyond the largest
# code, as its oneDNN path does)
INT8_RANGE = 127.5
UINT8_RANGE = 255.5


@njit(cache=True, nogil=True)
def quadratic_value(x, a, b, c):
    return (a * x + b) * x + c


@njit(cache=True, nogil=True)
def quadratic_slope(x, a, b):
    return 2.0 * a * x + b


@njit(cache=True, nogil=True)
def quantize_value(x, scale, signed):
    """The code of x: |x| * scale rounded half away from zero, clipped to [-128, 127] (int8,
    ``signed``) or [0, 255] (uint8)."""
    q = math.floor(abs(x) * scale + 0.5)
    if x < 0:
        q = -q
    if signed:
        return min(max(q, -128.0), 127.0)
    return min(max(q, 0.0), 255.0)


@njit(cache=True, nogil=True)
def real_range(lo, hi):
    """The symmetric range the quantizers map codes onto: max(|lo|, |hi|)."""
    return max(abs(lo), abs(hi))


@njit(cache=True, nogil=True)
def is_close(a, b, rtol, atol, equal_nan):
    """numpy.isclose's rule for one pair: |a - b| <= atol + rtol |b| (NaN equal to NaN only
    with equal_nan; infinities equal when identical)."""
    if a != a or b != b:
        return equal_nan and a != a and b != b
    if a == b:
        return True
    return abs(a - b) <= atol + rtol * abs(b)
