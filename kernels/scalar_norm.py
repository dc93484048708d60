"""Per-channel math of the normalisation operators, as plain ``@njit`` functions both kernel
halves call (the CPU loops per channel, the CUDA kernels once per block)."""
import math

from numba import njit

from . import cache_stamp  # noqa: F401  (stamps the cache entries made below)

# Gradient requests as the numba kernels take them (GradReq.code): 0 null, 1 write, 2 add.
REQ_NULL = 0
REQ_WRITE = 1
REQ_ADD = 2
_REQ_CODES = {"null": REQ_NULL, "write": REQ_WRITE, "add": REQ_ADD}


def req_code(req):
    """A gradient request ('null' / 'write' / 'add', or a GradReq, which equals its word) as
    the int the norm kernels take."""
    return _REQ_CODES[req]


def accumulate_req(accumulate):
    """The request code of a store that adds (accumulate) or overwrites."""
    return REQ_ADD if accumulate else REQ_WRITE


@njit(cache=True, nogil=True)
def store_req(dst, i, value, code):
    """dst[i] = value (write), dst[i] += value (add), or nothing (null)."""
    if code == REQ_WRITE:
        dst[i] = value
    elif code == REQ_ADD:
        dst[i] += value


@njit(cache=True, nogil=True)
def bn_input_grad_coefficients(sdy, sdyx, count, mean, invstd, gamma, batch_stats):
    """BatchNorm's input gradient of one channel as ``dx = a * dy + b * x + shift``.

    ``sdy`` is the channel's sum of dy, ``sdyx`` its sum of dy * xhat (xhat = (x - mean) *
    invstd), ``count`` its element count, ``gamma`` the scale in use (1 with fix_gamma). With
    batch statistics the mean and variance depend on x, so
    dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)), which expands to the three
    coefficients; with the moving statistics dx = gamma * invstd * dy.
    """
    scale = gamma * invstd
    if not batch_stats:
        return scale, 0.0, 0.0
    mdyx = sdyx / count
    return scale, -scale * mdyx * invstd, scale * (mean * mdyx * invstd - sdy / count)


@njit(cache=True, nogil=True)
def bn_fold_channel(gamma, beta, mean, var, bias, eps):
    """BatchNorm with moving statistics applied to a layer output y with bias ``bias``, as
    ``BN(y + bias) = y * scale + shift``: returns (scale, shift) of one channel (gamma 1 with
    fix_gamma)."""
    scale = gamma / math.sqrt(var + eps)
    return scale, beta + (bias - mean) * scale


@njit(cache=True, nogil=True)
def lrn_window(c, half, C):
    """[lo, hi): the channels of LRN's window around channel c, clipped to [0, C)."""
    return max(c - half, 0), min(c + half + 1, C)
