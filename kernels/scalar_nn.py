"""Per-element math of the nn and loss operators, as plain ``@njit`` functions.

Both kernel halves call these: the CPU launchers from (p)range loops, the CUDA kernels from
grid-stride loops, so each activation and its derivative is written exactly once. Every
function takes and returns scalars. Derivatives follow MXNet 1.9.1: where MXNet computes the
gradient from the op's *output* (relu, sigmoid, tanh, softrelu, elu, selu, rrelu) the function
takes the output, so numbers match MXNet's even at the kinks.
"""
import math

from numba import njit

from . import cache_stamp  # noqa: F401  (stamps the cache entries made below)
from .scalar_tensor import resolve_index

# What the nn family of both kernel sets exports (``kernels/cpu/nn.py``, ``kernels/cuda/nn.py``
# set their ``__all__`` from it, so the two halves cannot drift apart).
KERNEL_NAMES = ("ACTIVATIONS", "LEAKY_TYPES", "REGRESSION_KINDS",
                "fc_forward", "fc_backward", "activation_forward", "activation_backward",
                "leaky_relu_forward", "leaky_relu_backward", "prelu_forward", "prelu_backward",
                "rrelu_forward", "rrelu_backward", "dropout_forward", "dropout_backward",
                "embedding_forward", "embedding_backward", "softmax_forward", "softmax_backward",
                "softmax_output_backward", "regression_backward", "count_label_equal",
                "count_greater", "smooth_l1_forward", "smooth_l1_backward",
                "softmax_ce_forward", "softmax_ce_backward")

# Activation codes (the launchers map act_type strings to these).
ACT_RELU = 0
ACT_SIGMOID = 1
ACT_TANH = 2
ACT_SOFTRELU = 3
ACT_SOFTSIGN = 4

LEAKY_LEAKY = 0
LEAKY_ELU = 1
LEAKY_SELU = 2
LEAKY_GELU = 3

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_LAMBDA = 1.0507009873554804934193349852946
INV_SQRT_2 = 0.7071067811865475
INV_SQRT_2PI = 0.3989422804014327

# Regression-head gradient kinds.
REG_DIFF = 0        # out - label (linear, logistic, probabilities-as-label)
REG_SIGN = 1        # sign(out - label) (MAE)

# Names the operators pass -> codes (both kernel halves map with these).
ACTIVATIONS = {"relu": ACT_RELU, "sigmoid": ACT_SIGMOID, "tanh": ACT_TANH,
               "softrelu": ACT_SOFTRELU, "softsign": ACT_SOFTSIGN}
LEAKY_TYPES = {"leaky": LEAKY_LEAKY, "elu": LEAKY_ELU, "selu": LEAKY_SELU, "gelu": LEAKY_GELU}
REGRESSION_KINDS = {"diff": REG_DIFF, "sign": REG_SIGN}


@njit(cache=True, nogil=True)
def activation_value(x, code):
    """Activation's forward value at x."""
    if code == ACT_RELU:
        return x if x > 0 else 0.0      # NaN > 0 is false: NaN gives 0, as in MXNet
    if code == ACT_SIGMOID:
        return 1.0 / (1.0 + math.exp(-x))
    if code == ACT_TANH:
        return math.tanh(x)
    if code == ACT_SOFTRELU:
        # log(1 + e^x), linear beyond 20 where the exponential would only add rounding
        return x if x > 20.0 else math.log1p(math.exp(x))
    return x / (1.0 + abs(x))          # softsign


@njit(cache=True, nogil=True)
def activation_slope(x, y, code):
    """d activation / dx, from the input x and the output y (MXNet uses y except softsign)."""
    if code == ACT_RELU:
        return 1.0 if y > 0 else 0.0
    if code == ACT_SIGMOID:
        return y * (1.0 - y)
    if code == ACT_TANH:
        return 1.0 - y * y
    if code == ACT_SOFTRELU:
        return -math.expm1(-y)
    d = 1.0 + abs(x)                   # softsign
    return 1.0 / (d * d)


@njit(cache=True, nogil=True)
def leaky_value(x, code, slope):
    """LeakyReLU forward (leaky, elu, selu, gelu); slope is alpha for elu."""
    if code == LEAKY_LEAKY:
        return x if x > 0 else slope * x
    if code == LEAKY_ELU:
        return x if x > 0 else slope * math.expm1(x)
    if code == LEAKY_SELU:
        return SELU_LAMBDA * (x if x > 0 else SELU_ALPHA * math.expm1(x))
    return 0.5 * x * (1.0 + math.erf(x * INV_SQRT_2))    # gelu (erf form, as MXNet 1.9.1)


@njit(cache=True, nogil=True)
def leaky_slope(x, y, code, slope):
    """d LeakyReLU / dx as MXNet 1.9.1 computes it: leaky and gelu from the input x, elu and
    selu from the output y.

    selu's negative side is MXNet's lambda * (y + alpha), not the exact lambda*alpha*e^x
    (= y + lambda*alpha); we reproduce MXNet's numbers (verified against 1.9.1).
    """
    if code == LEAKY_LEAKY:
        return 1.0 if x > 0 else slope
    if code == LEAKY_ELU:
        return 1.0 if y > 0 else y + slope
    if code == LEAKY_SELU:
        return SELU_LAMBDA if y > 0 else SELU_LAMBDA * (y + SELU_ALPHA)
    return (0.5 * (1.0 + math.erf(x * INV_SQRT_2))
            + x * INV_SQRT_2PI * math.exp(-0.5 * x * x))


@njit(cache=True, nogil=True)
def smooth_l1_value(x, sigma2):
    """0.5 (sigma x)^2 inside |x| < 1/sigma^2, |x| - 0.5/sigma^2 outside."""
    ax = abs(x)
    if ax < 1.0 / sigma2:
        return 0.5 * sigma2 * x * x
    return ax - 0.5 / sigma2


@njit(cache=True, nogil=True)
def smooth_l1_slope(x, sigma2):
    if abs(x) < 1.0 / sigma2:
        return sigma2 * x
    if x > 0:
        return 1.0
    if x < 0:
        return -1.0
    return 0.0


@njit(cache=True, nogil=True)
def regression_diff(out, label, kind):
    """Un-scaled gradient of a regression head at one element."""
    d = out - label
    if kind == REG_SIGN:
        if d > 0:
            return 1.0
        if d < 0:
            return -1.0
        return 0.0
    return d


@njit(cache=True, nogil=True)
def clip_index(value, size):
    """MXNet's index rule for Embedding/take(mode='clip'): truncate toward 0, clip to [0, size)
    (``resolve_index`` without wrapping)."""
    return resolve_index(value, size, False)


@njit(cache=True, nogil=True)
def row_length(value, has_length, full):
    """Elements of a softmax row that take part (use_length): int(value) clipped to [0, full]."""
    if not has_length:
        return full
    n = int(value)
    return 0 if n < 0 else (full if n > full else n)


@njit(cache=True, nogil=True)
def broadcast_offset(i, shape, strides):
    """Offset into a broadcast operand for flat index i of an array of `shape` (C order).

    ``strides`` are the operand's element strides with 0 on broadcast axes.
    """
    off = 0
    for d in range(len(shape) - 1, -1, -1):
        n = shape[d]
        off += (i % n) * strides[d]
        i //= n
    return off


def broadcast_strides(full_shape, part_shape):
    """Element strides (0 on broadcast axes) of a C-ordered array of part_shape seen as
    full_shape; host-side companion of broadcast_offset."""
    strides = [0] * len(full_shape)
    acc = 1
    for d in range(len(full_shape) - 1, -1, -1):
        if part_shape[d] != 1:
            strides[d] = acc
        acc *= part_shape[d]
    return tuple(strides)


@njit(cache=True, nogil=True)
def softmax_grad_term(dy, y, use_log):
    """A row element's share of the sum a softmax gradient subtracts: the head gradient ``dy``
    for log_softmax (``use_log``), ``dy * y`` for softmax (``y`` the element's output)."""
    return dy if use_log else dy * y


@njit(cache=True, nogil=True)
def softmax_grad_value(dy, y, s, inv_t, use_log):
    """Gradient at one row element of softmax (log_softmax when ``use_log``) with output ``y``,
    head gradient ``dy``, the row's sum ``s`` of ``softmax_grad_term`` and 1/temperature
    ``inv_t``."""
    if use_log:
        return (dy - math.exp(y) * s) * inv_t
    return (dy - s) * y * inv_t
