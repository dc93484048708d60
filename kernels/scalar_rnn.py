"""Per-unit math of the fused RNN operator, shared by the CPU and CUDA halves.

Plain ``@njit`` functions over scalars: the CPU launchers call them from (p)range loops over the
(batch, hidden) units of one time step, the CUDA kernels from grid-stride loops. Pre-activations
arrive with both biases already added. Formulas follow MXNet 1.9.1's RNN operator:

* LSTM, gates i, f, g, o:  c = f*c_prev + i*g,  h = o*tanh(c)
* GRU, gates r, z, n (cuDNN form): n = tanh(x_n + r*(W_hn h_prev + b_hn)), h = (1-z)*n + z*h_prev
* vanilla: h = tanh(a) or relu(a)

The backward functions take the saved (activated) gates and return pre-activation gradients.
"""
import math

from numba import njit

from . import cache_stamp  # noqa: F401  (stamps the cache entries made below)


@njit(cache=True, nogil=True)
def sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


@njit(cache=True, nogil=True)
def tanh(x):
    """tanh through expm1: within a few ulp of math.tanh and about a third cheaper on the CPU
    (libm's tanh dominates the gate math otherwise); exact +-1 beyond |x| > 20."""
    if x > 20.0:
        return 1.0
    if x < -20.0:
        return -1.0
    e = math.expm1(2.0 * x)
    return e / (e + 2.0)


@njit(cache=True, nogil=True)
def lstm_unit(ai, af, ag, ao, c_prev):
    """Gates from pre-activations; returns (i, f, g, o, c, h)."""
    i = sigmoid(ai)
    f = sigmoid(af)
    g = tanh(ag)
    o = sigmoid(ao)
    c = f * c_prev + i * g
    h = o * tanh(c)
    return i, f, g, o, c, h


@njit(cache=True, nogil=True)
def lstm_unit_grad(dh, dc, i, f, g, o, c, c_prev):
    """Gradients of lstm_unit: (d ai, d af, d ag, d ao, d c_prev) from dh and the carried dc."""
    tc = tanh(c)
    dct = dc + dh * o * (1.0 - tc * tc)
    dai = dct * g * i * (1.0 - i)
    daf = dct * c_prev * f * (1.0 - f)
    dag = dct * i * (1.0 - g * g)
    dao = dh * tc * o * (1.0 - o)
    return dai, daf, dag, dao, dct * f


@njit(cache=True, nogil=True)
def gru_unit(ar, az, xn, hn, h_prev):
    """ar, az: full pre-activations; xn = W_in x + b_in; hn = W_hn h_prev + b_hn.

    Returns (r, z, n, h)."""
    r = sigmoid(ar)
    z = sigmoid(az)
    n = tanh(xn + r * hn)
    h = (1.0 - z) * n + z * h_prev
    return r, z, n, h


@njit(cache=True, nogil=True)
def gru_unit_grad(dh, r, z, n, hn, h_prev):
    """Gradients of gru_unit: (d ar, d az, d xn, d hn, direct d h_prev)."""
    dn = dh * (1.0 - z)
    dz = dh * (h_prev - n)
    dxn = dn * (1.0 - n * n)
    dr = dxn * hn
    return dr * r * (1.0 - r), dz * z * (1.0 - z), dxn, dxn * r, dh * z


@njit(cache=True, nogil=True)
def vanilla_unit(a, relu):
    if relu:
        return a if a > 0.0 else 0.0
    return tanh(a)


@njit(cache=True, nogil=True)
def vanilla_unit_grad(dh, h, relu):
    """Gradient of vanilla_unit from its output h (as MXNet computes it)."""
    if relu:
        return dh if h > 0.0 else 0.0
    return dh * (1.0 - h * h)
