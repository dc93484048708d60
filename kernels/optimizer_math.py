"""One optimizer step for one element, as plain ``@njit`` functions shared by both kernel halves.

The CPU loops (``kernels/cpu/optimizer.py``) and the CUDA grid-stride kernels
(``kernels/cuda/optimizer.py``) call these, so each update rule of MXNet 1.9.1 is written once.

Conventions:

* Every argument has the compute dtype (float32 for float32/float16 weights, float64 for
  float64 ones): the launchers cast the scalar hyper-parameters (and any derived constant such as
  ``1 - beta1``) before the call, so no Python literal promotes float32 math to float64 here.
* ``clip_gradient < 0`` means "no clipping", as MXNet's operator default of -1 does.
* The functions return the new values (weight first, then the states in argument order); the
  caller stores them. Reading every input before storing keeps ``out is weight`` safe.
* ``error_model="numpy"``: a division by zero gives inf/nan as in MXNet's kernels instead of
  raising, and the loops around these functions vectorise (no per-element error branch).
"""
import math

from numba import njit

from . import cache_stamp  # noqa: F401  (stamps the cache entries made below)


@njit(cache=True, nogil=True, error_model="numpy")
def clip(x, bound):
    """x clipped to [-bound, bound]; bound < 0 leaves x unchanged (NaN passes through)."""
    if bound < 0:
        return x
    if x > bound:
        return bound
    if x < -bound:
        return -bound
    return x


@njit(cache=True, nogil=True, error_model="numpy")
def sign(x, one):
    """-1, 0 or +1 of x's type (NaN gives 0, as MXNet's ``(x > 0) - (x < 0)``)."""
    if x > 0:
        return one
    if x < 0:
        return -one
    return one - one


# --- SGD family (sgd_update, sgd_mom_update, mp_*, multi_*) ----------------------------------
@njit(cache=True, nogil=True, error_model="numpy")
def sgd(w, g, lr, decay, rescale, clip_gradient):
    """w' = (1 - lr*wd) w - lr clip(rescale g); ``decay`` is 1 - lr*wd."""
    return decay * w - lr * clip(rescale * g, clip_gradient)


@njit(cache=True, nogil=True, error_model="numpy")
def sgd_mom(w, g, m, lr, lr_wd, momentum, rescale, clip_gradient):
    """m' = momentum m - lr wd w - lr clip(rescale g);  w' = w + m'. ``lr_wd`` is lr*wd."""
    m = momentum * m - lr_wd * w - lr * clip(rescale * g, clip_gradient)
    return w + m, m


@njit(cache=True, nogil=True, error_model="numpy")
def nag_mom(w, g, m, lr, wd, momentum, momentum_plus_one, rescale, clip_gradient, in_place):
    """Nesterov momentum (nag_mom_update): the step uses the decayed momentum and the gradient
    with weight decay added after the clip. MXNet's kernel reads the weight again for the
    momentum's decay term after storing the output, so in place (out = weight) that term sees
    the new weight; ``in_place`` reproduces it."""
    gc = clip(rescale * g, clip_gradient)
    m = momentum * m
    w_new = w - m + momentum_plus_one * (m - lr * (gc + wd * w))
    w_decay = w_new if in_place else w
    return w_new, m - lr * (gc + wd * w_decay)


# --- Adam / RMSProp / FTML / Ftrl (weight decay enters the gradient before the clip) ---------
@njit(cache=True, nogil=True, error_model="numpy")
def adam(w, g, mean, var, lr, wd, beta1, one_minus_beta1, beta2, one_minus_beta2, epsilon,
         rescale, clip_gradient):
    """adam_update: g' = clip(rescale g + wd w); the bias correction is folded into lr."""
    gr = clip(rescale * g + wd * w, clip_gradient)
    mean = beta1 * mean + one_minus_beta1 * gr
    var = beta2 * var + one_minus_beta2 * (gr * gr)
    return w - lr * mean / (math.sqrt(var) + epsilon), mean, var


@njit(cache=True, nogil=True, error_model="numpy")
def rmsprop(w, g, n, lr, wd, gamma1, one_minus_gamma1, epsilon, rescale, clip_gradient,
            clip_weights):
    """rmsprop_update (Tieleman & Hinton), with optional weight clipping."""
    gr = clip(rescale * g + wd * w, clip_gradient)
    n = one_minus_gamma1 * gr * gr + gamma1 * n
    w = clip(w - lr * (gr / math.sqrt(n + epsilon)), clip_weights)
    return w, n


@njit(cache=True, nogil=True, error_model="numpy")
def rmspropalex(w, g, n, gm, delta, lr, wd, gamma1, one_minus_gamma1, gamma2, epsilon, rescale,
                clip_gradient, clip_weights):
    """rmspropalex_update (Graves 2013, the centered variant)."""
    gr = clip(rescale * g + wd * w, clip_gradient)
    n = one_minus_gamma1 * gr * gr + gamma1 * n
    gm = one_minus_gamma1 * gr + gamma1 * gm
    delta = gamma2 * delta - lr * (gr / math.sqrt(n - gm * gm + epsilon))
    w = clip(w + delta, clip_weights)
    return w, n, gm, delta


@njit(cache=True, nogil=True, error_model="numpy")
def ftml(w, g, d, v, z, lr, wd, beta1, one_minus_beta1, beta2, one_minus_beta2, epsilon,
         bias1, bias2, rescale, clip_gradient):
    """ftml_update; ``bias1 = 1 - beta1**t`` and ``bias2 = 1 - beta2**t``."""
    gr = clip(rescale * g + wd * w, clip_gradient)
    v = beta2 * v + one_minus_beta2 * gr * gr
    d_t = bias1 / lr * (math.sqrt(v / bias2) + epsilon)
    z = beta1 * z + one_minus_beta1 * gr - (d_t - beta1 * d) * w
    return -z / d_t, d_t, v, z


@njit(cache=True, nogil=True, error_model="numpy")
def ftrl(w, g, z, n, lr, wd, lamda1, beta, rescale, clip_gradient, one):
    """ftrl_update (FTRL-proximal)."""
    gr = clip(rescale * g, clip_gradient)
    n_new = n + gr * gr
    z = z + gr - (math.sqrt(n_new) - math.sqrt(n)) * w / lr
    if abs(z) > lamda1:
        w = (sign(z, one) * lamda1 - z) / ((beta + math.sqrt(n_new)) / lr + wd)
    else:
        w = one - one
    return w, z, n_new


# --- sign-based ----------------------------------------------------------------------------
@njit(cache=True, nogil=True, error_model="numpy")
def signsgd(w, g, lr, decay, one):
    """signsgd_update: w' = (1 - lr wd) w - lr sign(g) (rescale and clip cannot change a sign)."""
    return decay * w - lr * sign(g, one)


@njit(cache=True, nogil=True, error_model="numpy")
def signum(w, g, m, lr, wd, momentum, one_minus_momentum, decay_lh, rescale, clip_gradient, one):
    """signum_update: momentum of the clipped gradient, then a step along its sign;
    ``decay_lh = 1 - lr*wd_lh``."""
    m = momentum * m - one_minus_momentum * wd * w \
        - one_minus_momentum * clip(rescale * g, clip_gradient)
    return decay_lh * w + lr * sign(m, one), m


# --- LAMB ----------------------------------------------------------------------------------
@njit(cache=True, nogil=True, error_model="numpy")
def lamb_phase1(w, g, mean, var, wd, beta1, one_minus_beta1, beta2, one_minus_beta2, epsilon,
                bias1, bias2, rescale, clip_gradient):
    """lamb_update_phase1: returns (direction, mean, var); ``bias1``/``bias2`` are
    ``1 - beta**t`` with bias correction, 1 without."""
    gr = clip(rescale * g, clip_gradient)
    mean = beta1 * mean + one_minus_beta1 * gr
    var = beta2 * var + one_minus_beta2 * gr * gr
    direction = (mean / bias1) / (math.sqrt(var / bias2) + epsilon) + wd * w
    return direction, mean, var


@njit(cache=True, nogil=True, error_model="numpy")
def lamb_phase2(w, direction, scaled_lr):
    """lamb_update_phase2: ``scaled_lr`` is lr times the trust ratio r1/r2 (or lr alone)."""
    return w - scaled_lr * direction


# --- optimizers MXNet writes in Python (their math, fused) ----------------------------------
@njit(cache=True, nogil=True, error_model="numpy")
def adagrad(w, g, history, lr, wd, epsilon, rescale, clip_gradient):
    """AdaGrad (dense): history += g'^2; w += -lr (g' / sqrt(history + eps) + wd w)."""
    gr = clip(rescale * g, clip_gradient)
    history = history + gr * gr
    return w + (gr / math.sqrt(history + epsilon) + w * wd) * -lr, history


@njit(cache=True, nogil=True, error_model="numpy")
def adagrad_rows(w, g, history, lr, epsilon, rescale, clip_gradient):
    """The row_sparse adagrad_update kernel: only present rows, no weight decay; epsilon sits
    inside the square root, as in MXNet 1.9.1's kernel (and its dense update)."""
    gr = clip(rescale * g, clip_gradient)
    history = history + gr * gr
    return w - lr * (gr / math.sqrt(history + epsilon)), history


@njit(cache=True, nogil=True, error_model="numpy")
def adadelta(w, g, acc_g, acc_delta, wd, rho, one_minus_rho, epsilon, rescale, clip_gradient):
    """AdaDelta; also returns the rescaled gradient (MXNet rescales the caller's grad in place)."""
    g_rescaled = g * rescale
    gr = clip(g_rescaled, clip_gradient)
    acc_g = acc_g * rho + one_minus_rho * gr * gr
    delta = math.sqrt(acc_delta + epsilon) / math.sqrt(acc_g + epsilon) * gr
    acc_delta = acc_delta * rho + one_minus_rho * delta * delta
    return w - (delta + wd * w), acc_g, acc_delta, g_rescaled


@njit(cache=True, nogil=True, error_model="numpy")
def adamax(w, g, m, u, lr_t, wd, beta1, one_minus_beta1, beta2, rescale, clip_gradient):
    """Adamax: u = max(beta2 u, |g'|); w -= lr_t m / u."""
    gr = clip(g * rescale + wd * w, clip_gradient)
    m = m * beta1 + one_minus_beta1 * gr
    u = max(beta2 * u, abs(gr))
    return w - lr_t * m / u, m, u


@njit(cache=True, nogil=True, error_model="numpy")
def nadam(w, g, m, v, lr, wd, beta1, one_minus_beta1, beta2, one_minus_beta2, epsilon,
          sched_denom, sched_next_denom, bias2, one_minus_mom_t, mom_t1, rescale, clip_gradient):
    """Nadam; the momentum schedule terms are computed per step by the optimizer:
    ``sched_denom = 1 - m_schedule``, ``sched_next_denom = 1 - m_schedule_next``,
    ``bias2 = 1 - beta2**t``."""
    gr = clip(g * rescale + wd * w, clip_gradient)
    m = m * beta1 + one_minus_beta1 * gr
    v = v * beta2 + one_minus_beta2 * gr * gr
    m_bar = one_minus_mom_t * (gr / sched_denom) + mom_t1 * (m / sched_next_denom)
    return w - lr * m_bar / (math.sqrt(v / bias2) + epsilon), m, v


@njit(cache=True, nogil=True, error_model="numpy")
def dcasgd(w, g, m, prev, neg_lr, wd, momentum, lamda, rescale, clip_gradient):
    """DCASGD with momentum: m = momentum m - lr (g' + wd w + lamda g'^2 (w - prev));
    prev = w; w += m. Without momentum pass momentum = 0 and m = 0."""
    gr = clip(g * rescale, clip_gradient)
    m = m * momentum + neg_lr * (gr + wd * w + lamda * gr * gr * (w - prev))
    return w + m, m, w


@njit(cache=True, nogil=True, error_model="numpy")
def sgld(w, g, noise, neg_half_lr, wd, rescale, clip_gradient):
    """SGLD: w += -lr/2 (g' + wd w) + noise, noise ~ N(0, sqrt(lr)) drawn by the caller."""
    gr = clip(g * rescale, clip_gradient)
    w = w + neg_half_lr * (gr + wd * w)
    return w + noise


# --- gradient compression ------------------------------------------------------------------
@njit(cache=True, nogil=True, error_model="numpy")
def quantize_2bit(g, residual, threshold):
    """MXNet's 2-bit scheme: add g to the residual and send +-threshold or 0 (the dequantized
    value), keeping what was not sent in the residual."""
    r = residual + g
    if r >= threshold:
        return threshold, r - threshold
    if r <= -threshold:
        return -threshold, r + threshold
    return threshold - threshold, r
