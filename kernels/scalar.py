"""Per-element and per-index math as plain ``@njit`` functions, used by BOTH kernel halves.

The CPU launchers call them from ``prange`` loops, the CUDA kernels from grid-stride loops, so
the math of an activation or of one optimizer step is written exactly once.

Element-wise family
-------------------
Unary and binary operators are selected by a small integer code (``UNARY_CODES`` /
``BINARY_CODES`` map MXNet-ish names to codes); the code is loop-invariant, so the compiled loops
branch once per element on a predictable value. All functions are compiled with
``error_model='numpy'`` by their callers' settings: division by zero gives inf/nan as in MXNet.
Every branch may return a different numeric type; numba unifies them (float64 at worst), and
the launcher stores into the output's dtype, which is exact for float16/float32 results.

The hottest operators also exist as tiny ``inline='always'`` functions (``relu``, ``add`` ...)
that the dispatchers call; the CPU launchers give them loops of their own, where they inline
and vectorise (a dispatch per element is several times slower for cheap math).
numba's on-disk cache entries of the launchers that inline this math carry a digest of the whole
package (``cache_stamp.py``): an edit here makes them recompile.
"""
import math

import numpy as np
from numba import njit  # noqa: F401
from numba.extending import register_jitable

from . import cache_stamp  # noqa: F401  (stamps the cache entries made below)

# --- unary codes ------------------------------------------------------------------------------
U_RELU, U_SIGMOID, U_TANH, U_EXP, U_LOG, U_SQRT, U_RSQRT, U_SQUARE, U_ABS, U_NEGATIVE, \
    U_SIGN, U_SOFTSIGN, U_LOG1P, U_EXPM1, U_RECIPROCAL, U_COS, U_SIN, U_FLOOR, U_CEIL, \
    U_ROUND, U_COPY, U_TAN, U_LOG2, U_LOG10, U_CBRT, U_TRUNC, U_RINT, U_SINH, U_COSH, \
    U_ARCSIN, U_ARCCOS, U_ARCTAN, U_ARCSINH, U_ARCCOSH, U_ARCTANH, U_DEGREES, U_RADIANS, \
    U_RCBRT, U_LOGICAL_NOT, U_ERF, U_GAMMA, U_GAMMALN = range(42)

UNARY_CODES = {
    "relu": U_RELU, "sigmoid": U_SIGMOID, "tanh": U_TANH, "exp": U_EXP, "log": U_LOG,
    "sqrt": U_SQRT, "rsqrt": U_RSQRT, "square": U_SQUARE, "abs": U_ABS, "negative": U_NEGATIVE,
    "sign": U_SIGN, "softsign": U_SOFTSIGN, "log1p": U_LOG1P, "expm1": U_EXPM1,
    "reciprocal": U_RECIPROCAL, "cos": U_COS, "sin": U_SIN, "floor": U_FLOOR, "ceil": U_CEIL,
    "round": U_ROUND, "copy": U_COPY, "tan": U_TAN, "log2": U_LOG2, "log10": U_LOG10,
    "cbrt": U_CBRT, "trunc": U_TRUNC, "rint": U_RINT, "sinh": U_SINH, "cosh": U_COSH,
    "arcsin": U_ARCSIN, "arccos": U_ARCCOS, "arctan": U_ARCTAN, "arcsinh": U_ARCSINH,
    "arccosh": U_ARCCOSH, "arctanh": U_ARCTANH, "degrees": U_DEGREES, "radians": U_RADIANS,
    "rcbrt": U_RCBRT, "logical_not": U_LOGICAL_NOT, "erf": U_ERF, "gamma": U_GAMMA,
    "gammaln": U_GAMMALN,
}

# --- unary functions with two parameters (clip's bounds, hard_sigmoid's alpha and beta) -------
P_CLIP, P_HARD_SIGMOID = range(2)

# 180 / pi and its inverse (degrees and radians)
DEGREES_PER_RADIAN = 57.29577951308232
RADIANS_PER_DEGREE = 0.017453292519943295
# 2 / sqrt(pi): the slope of erf at 0
TWO_OVER_SQRT_PI = 1.1283791670955126

# --- binary codes -----------------------------------------------------------------------------
B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MAX, B_MIN, B_MOD, B_EQ, B_NE, B_GT, B_GE, B_LT, B_LE, \
    B_AND, B_OR, B_XOR, B_HYPOT = range(18)

BINARY_CODES = {
    "add": B_ADD, "sub": B_SUB, "mul": B_MUL, "div": B_DIV, "power": B_POW, "maximum": B_MAX,
    "minimum": B_MIN, "mod": B_MOD, "equal": B_EQ, "not_equal": B_NE, "greater": B_GT,
    "greater_equal": B_GE, "lesser": B_LT, "lesser_equal": B_LE, "logical_and": B_AND,
    "logical_or": B_OR, "logical_xor": B_XOR, "hypot": B_HYPOT,
}


@njit(cache=True, nogil=True)
def ffloor(x):
    """floor(x) as a float: math.floor returns an int64 in numba, which overflows for
    |x| >= 2**63 and cannot hold nan/inf; floats that large are already integers."""
    if not abs(x) < 4503599627370496.0:   # 2**52; also true for nan and inf
        return x * 1.0
    return float(math.floor(x))


@njit(cache=True, nogil=True)
def fceil(x):
    if not abs(x) < 4503599627370496.0:
        return x * 1.0
    return float(math.ceil(x))


@njit(cache=True, nogil=True)
def ftrunc(x):
    return ffloor(x) if x >= 0 else fceil(x)


@njit(cache=True, nogil=True, error_model="numpy")
def mx_mod(a, b):
    """MXNet's mod: the result takes the divisor's sign (like Python); x mod 0 is 0."""
    if b == 0:
        return 0.0
    return a % b   # numba implements Python's % exactly (an fmod plus a sign fix)


@njit(cache=True, nogil=True, error_model="numpy")
def digamma(x):
    """psi(x) = d/dx log|gamma(x)|: the derivative of gammaln, and gamma's as gamma * psi.

    Negative x is reflected (psi(x) = psi(1 - x) - pi / tan(pi x)), x is then raised past 12
    with psi(x) = psi(x + 1) - 1/x, and the asymptotic series in 1/x^2 finishes it (the
    first term left out, about 0.02 / x^12, is below 3e-15 there). The poles (0, -1, ... and
    -inf) give +inf, as MXNet 1.9.1's gamma/gammaln gradients do."""
    if x != x:
        return math.nan
    if x <= 0 and x == ffloor(x):
        return math.inf
    total = 0.0
    if x < 0:
        total = -math.pi / math.tan(math.pi * x)
        x = 1.0 - x
    while x < 12.0:
        total -= 1.0 / x
        x += 1.0
    inv2 = 1.0 / (x * x)
    series = inv2 * (1.0 / 12 - inv2 * (1.0 / 120 - inv2 * (1.0 / 252 - inv2 * (
        1.0 / 240 - inv2 / 132))))
    return total + math.log(x) - 0.5 / x - series


# --- the hottest operators as tiny functions (the dispatchers below call them too) ---------
@njit(cache=True, inline="always")
def relu(x):
    return x if (x > 0 or x != x) else 0.0


@njit(cache=True, inline="always")
def relu_grad(x, y):
    # NaN passes through, as it does forward (MXNet's relu gradient at NaN is NaN)
    return 1.0 if y > 0 else (y if y != y else 0.0)


@njit(cache=True, inline="always")
def sigmoid_grad(x, y):
    return y * (1.0 - y)


@njit(cache=True, inline="always")
def tanh_grad(x, y):
    return 1.0 - y * y


@njit(cache=True, inline="always")
def square(x):
    return x * x


@njit(cache=True, inline="always")
def square_grad(x, y):
    return 2.0 * x


@njit(cache=True, inline="always")
def negative(x):
    return -x


@njit(cache=True, inline="always")
def add(a, b):
    return a + b


@njit(cache=True, inline="always")
def sub(a, b):
    return a - b


@njit(cache=True, inline="always")
def mul(a, b):
    return a * b


@njit(cache=True, inline="always", error_model="numpy")
def div(a, b):
    return a / b


@njit(cache=True, nogil=True, error_model="numpy")
def unary(code, x):
    """f(x) for the unary operator ``code``."""
    if code == U_RELU:
        return relu(x)
    elif code == U_SIGMOID:
        return 1.0 / (1.0 + math.exp(-x))
    elif code == U_TANH:
        return math.tanh(x)
    elif code == U_EXP:
        return math.exp(x)
    elif code == U_LOG:
        return math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)
    elif code == U_SQRT:
        return math.sqrt(x) if x >= 0 else math.nan
    elif code == U_RSQRT:
        return 1.0 / math.sqrt(x) if x >= 0 else math.nan
    elif code == U_SQUARE:
        return square(x)
    elif code == U_ABS:
        return abs(x)
    elif code == U_NEGATIVE:
        return negative(x)
    elif code == U_SIGN:
        return 1.0 if x > 0 else (-1.0 if x < 0 else 0.0)
    elif code == U_SOFTSIGN:
        return x / (1.0 + abs(x))
    elif code == U_LOG1P:
        return math.log1p(x) if x > -1 else (-math.inf if x == -1 else math.nan)
    elif code == U_EXPM1:
        return math.expm1(x)
    elif code == U_RECIPROCAL:
        return 1.0 / x
    elif code == U_COS:
        return math.cos(x)
    elif code == U_SIN:
        return math.sin(x)
    elif code == U_FLOOR:
        return ffloor(x)
    elif code == U_CEIL:
        return fceil(x)
    elif code == U_ROUND:
        # C's round(): halves away from zero (numpy rounds halves to even)
        if not abs(x) < 4503599627370496.0:
            return x * 1.0
        return ffloor(x + 0.5) if x >= 0 else -ffloor(-x + 0.5)
    elif code == U_TAN:
        return math.tan(x)
    elif code == U_LOG2:
        return math.log2(x) if x > 0 else (-math.inf if x == 0 else math.nan)
    elif code == U_LOG10:
        return math.log10(x) if x > 0 else (-math.inf if x == 0 else math.nan)
    elif code == U_CBRT:
        return math.copysign(abs(x) ** (1.0 / 3.0), x)
    elif code == U_TRUNC:
        return ftrunc(x)
    elif code == U_RINT:
        # MXNet's rint picks the floor on ties (0.5 -> 0, 1.5 -> 1, -0.5 -> -1)
        f = ffloor(x)
        c = fceil(x)
        return f if x - f <= c - x else c
    elif code == U_SINH:
        return math.sinh(x)
    elif code == U_COSH:
        return math.cosh(x)
    elif code == U_ARCSIN:
        return math.asin(x) if -1 <= x <= 1 else math.nan
    elif code == U_ARCCOS:
        return math.acos(x) if -1 <= x <= 1 else math.nan
    elif code == U_ARCTAN:
        return math.atan(x)
    elif code == U_ARCSINH:
        return math.asinh(x)
    elif code == U_ARCCOSH:
        return math.acosh(x) if x >= 1 else math.nan
    elif code == U_ARCTANH:
        if -1 < x < 1:
            return math.atanh(x)
        return math.copysign(math.inf, x) if abs(x) == 1 else math.nan
    elif code == U_DEGREES:
        return x * DEGREES_PER_RADIAN
    elif code == U_RADIANS:
        return x * RADIANS_PER_DEGREE
    elif code == U_RCBRT:
        return 1.0 / math.copysign(abs(x) ** (1.0 / 3.0), x)
    elif code == U_LOGICAL_NOT:
        return 1.0 if x == 0 else 0.0
    elif code == U_ERF:
        return math.erf(x)
    elif code == U_GAMMA:
        if x == 0:
            return math.copysign(math.inf, x)   # +-0 -> +-inf, as MXNet and C's tgamma
        if x < 0 and x == ffloor(x):
            return math.nan     # the other poles (and -inf); math.gamma would raise there
        return math.gamma(x)
    elif code == U_GAMMALN:
        if x <= 0 and x == ffloor(x):
            return math.inf
        return math.lgamma(x)
    return x  # U_COPY


@njit(cache=True, nogil=True, error_model="numpy")
def unary_grad(code, x, y):
    """df/dx for the unary operator ``code`` at input x with output y = f(x)."""
    if code == U_RELU:
        return relu_grad(x, y)
    elif code == U_SIGMOID:
        return sigmoid_grad(x, y)
    elif code == U_TANH:
        return tanh_grad(x, y)
    elif code == U_EXP:
        return y
    elif code == U_LOG:
        return 1.0 / x
    elif code == U_SQRT:
        return 0.5 / y
    elif code == U_RSQRT:
        return -0.5 * y * y * y
    elif code == U_SQUARE:
        return square_grad(x, y)
    elif code == U_ABS:
        return 1.0 if x > 0 else (-1.0 if x < 0 else 0.0)
    elif code == U_NEGATIVE:
        return -1.0
    elif code == U_SOFTSIGN:
        d = 1.0 + abs(x)
        return 1.0 / (d * d)
    elif code == U_LOG1P:
        return 1.0 / (1.0 + x)
    elif code == U_EXPM1:
        return math.exp(x)
    elif code == U_RECIPROCAL:
        return -1.0 / (x * x)
    elif code == U_COS:
        return -math.sin(x)
    elif code == U_SIN:
        return math.cos(x)
    elif code == U_TAN:
        return 1.0 + y * y
    elif code == U_LOG2:
        return 1.0 / (x * math.log(2.0))
    elif code == U_LOG10:
        return 1.0 / (x * math.log(10.0))
    elif code == U_CBRT:
        return 1.0 / (3.0 * y * y)
    elif code == U_COPY:
        return 1.0
    elif code == U_SINH:
        return math.cosh(x)
    elif code == U_COSH:
        return math.sinh(x)
    elif code == U_ARCSIN:
        return 1.0 / math.sqrt(1.0 - x * x) if -1 < x < 1 else math.nan
    elif code == U_ARCCOS:
        return -1.0 / math.sqrt(1.0 - x * x) if -1 < x < 1 else math.nan
    elif code == U_ARCTAN:
        return 1.0 / (1.0 + x * x)
    elif code == U_ARCSINH:
        return 1.0 / math.sqrt(x * x + 1.0)
    elif code == U_ARCCOSH:
        return 1.0 / math.sqrt(x * x - 1.0) if x > 1 else math.nan
    elif code == U_ARCTANH:
        return 1.0 / (1.0 - x * x)
    elif code == U_DEGREES:
        return DEGREES_PER_RADIAN
    elif code == U_RADIANS:
        return RADIANS_PER_DEGREE
    elif code == U_RCBRT:
        # d/dx x^(-1/3) = -(1/3) x^(-4/3) = -y^4 / 3
        return -(y * y * y * y) / 3.0
    elif code == U_ERF:
        return TWO_OVER_SQRT_PI * math.exp(-x * x)
    elif code == U_GAMMA:
        return y * digamma(x)
    elif code == U_GAMMALN:
        return digamma(x)
    return 0.0  # sign, floor, ceil, round, trunc, rint, logical_not: piecewise constant


@njit(cache=True, nogil=True, error_model="numpy")
def binary(code, a, b):
    """f(a, b) for the binary operator ``code``; comparisons give 1 or 0."""
    if code == B_ADD:
        return add(a, b)
    elif code == B_SUB:
        return sub(a, b)
    elif code == B_MUL:
        return mul(a, b)
    elif code == B_DIV:
        return div(a, b)
    elif code == B_POW:
        return a ** b
    elif code == B_MAX:
        return a if a > b or a != a else b
    elif code == B_MIN:
        return a if a < b or a != a else b
    elif code == B_MOD:
        return mx_mod(a, b)
    elif code == B_EQ:
        return 1.0 if a == b else 0.0
    elif code == B_NE:
        return 1.0 if a != b else 0.0
    elif code == B_GT:
        return 1.0 if a > b else 0.0
    elif code == B_GE:
        return 1.0 if a >= b else 0.0
    elif code == B_LT:
        return 1.0 if a < b else 0.0
    elif code == B_LE:
        return 1.0 if a <= b else 0.0
    elif code == B_AND:
        return 1.0 if (a != 0 and b != 0) else 0.0
    elif code == B_OR:
        return 1.0 if (a != 0 or b != 0) else 0.0
    elif code == B_XOR:
        return 1.0 if ((a != 0) != (b != 0)) else 0.0
    return math.sqrt(a * a + b * b)  # B_HYPOT


@njit(cache=True, nogil=True, error_model="numpy")
def binary_grad_lhs(code, a, b):
    """d f(a, b) / da (MXNet's conventions at ties: maximum passes to a when a >= b)."""
    if code == B_ADD or code == B_SUB:
        return 1.0
    elif code == B_MUL:
        return b
    elif code == B_DIV:
        return 1.0 / b
    elif code == B_POW:
        return b * a ** (b - 1)
    elif code == B_MAX:
        return 1.0 if a >= b else 0.0
    elif code == B_MIN:
        return 1.0 if a <= b else 0.0
    elif code == B_MOD:
        return 1.0
    elif code == B_HYPOT:
        return a / math.sqrt(a * a + b * b)
    return 0.0  # comparisons and logical ops


@njit(cache=True, nogil=True, error_model="numpy")
def binary_grad_rhs(code, a, b):
    """d f(a, b) / db."""
    if code == B_ADD:
        return 1.0
    elif code == B_SUB:
        return -1.0
    elif code == B_MUL:
        return a
    elif code == B_DIV:
        return -a / (b * b)
    elif code == B_POW:
        return a ** b * math.log(a) if a > 0 else (0.0 if a == 0 else math.nan)
    elif code == B_MAX:
        return 1.0 if a < b else 0.0
    elif code == B_MIN:
        return 1.0 if a > b else 0.0
    elif code == B_MOD:
        return -ffloor(a / b) if b != 0 else 0.0
    elif code == B_HYPOT:
        return b / math.sqrt(a * a + b * b)
    return 0.0


@njit(cache=True, nogil=True, error_model="numpy")
def clip(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


@njit(cache=True, nogil=True, error_model="numpy")
def clip_grad(x, lo, hi):
    """MXNet passes the gradient where lo <= x <= hi (bounds included)."""
    return 0.0 if (x < lo or x > hi) else 1.0


@njit(cache=True, nogil=True, error_model="numpy")
def hard_sigmoid(x, alpha, beta):
    """max(0, min(1, alpha * x + beta))."""
    return clip(alpha * x + beta, 0.0, 1.0)


@njit(cache=True, nogil=True, error_model="numpy")
def hard_sigmoid_grad(x, alpha, beta):
    """alpha where 0 < alpha * x + beta < 1, else 0 (the kinks get 0, as in MXNet)."""
    y = alpha * x + beta
    return alpha if (y > 0.0 and y < 1.0) else 0.0


@njit(cache=True, inline="always", error_model="numpy")
def param_unary(code, x, p, q):
    """f(x; p, q) for the two-parameter unary function ``code`` (P_CLIP, P_HARD_SIGMOID)."""
    if code == P_CLIP:
        return clip(x, p, q)
    return hard_sigmoid(x, p, q)


@njit(cache=True, inline="always", error_model="numpy")
def param_unary_grad(code, x, p, q):
    """df/dx of ``param_unary(code, x, p, q)``."""
    if code == P_CLIP:
        return clip_grad(x, p, q)
    return hard_sigmoid_grad(x, p, q)


@njit(cache=True, inline="always", error_model="numpy")
def scalar_op_grad(code, x, s, reverse):
    """d/dx of ``x op s`` (reverse: ``s op x``) for the binary operator ``code``."""
    if reverse:
        return binary_grad_rhs(code, s, x)
    return binary_grad_lhs(code, x, s)


@njit(cache=True, nogil=True)
def strided_offset(i, shape, strides):
    """Offset of flat C-order index i of ``shape`` in an array with element ``strides``."""
    i = np.int64(i)   # prange indices are unsigned: keep the divisions in integers
    off = 0
    for d in range(len(shape) - 1, -1, -1):
        n = shape[d]
        q = i // n
        off += (i - q * n) * strides[d]
        i = q
    return off


# --- helpers on arrays: register_jitable, so that numba compiles them into the CPU loops and the
# CUDA kernels that call them and the CUDA simulator runs them as Python on its own arrays (an
# @njit function cannot take the simulator's arrays) -------------------------------------------
@register_jitable(forceinline=True)
def store(dst, i, v, accumulate):
    """dst[i] = v, or dst[i] += v when accumulating (a gradient request 'add').

    The CUDA kernels call it as it is. The CPU loops call ``cpu/elemwise.py``'s ``store``, this
    function compiled with numba's IR inlining (``inline="always"``), so that LLVM unswitches
    the loops on ``accumulate`` and vectorises them (through this overload, even force-inlined,
    they ran up to 1.7x slower); numba-cuda cannot IR-inline a register_jitable function."""
    if accumulate:
        dst[i] += v
    else:
        dst[i] = v


@register_jitable
def broadcast_grad_sum(code, which, x, other, g, j, keep, red, nred, so, sother):
    """Sum over the broadcast dims of g * d(a op b)/d(input ``which``: 0 = a, 1 = b) at element
    j of that input ``x`` (``keep``/``red`` split the collapsed shape into the input's own dims
    and the reduced ones; ``so``/``sother`` are g's and the other input's strides)."""
    base_o = strided_offset(j, keep, so)
    base_b = strided_offset(j, keep, sother)
    s = 0.0
    for r in range(nred):
        io = base_o + strided_offset(r, red, so)
        ib = base_b + strided_offset(r, red, sother)
        if which == 0:
            s += g[io] * binary_grad_lhs(code, x[j], other[ib])
        else:
            s += g[io] * binary_grad_rhs(code, other[ib], x[j])
    return s
