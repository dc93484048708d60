"""CPU optimizer updates: one fused loop per update rule over numpy arrays.

Every launcher takes backend arrays of any shape (weight, gradient, states, output; ``out`` may
be the weight itself) plus the hyper-parameters as Python numbers, and updates the states and
``out`` in one pass. The per-element math (``kernels/optimizer_math.py``) and the launchers
themselves (``kernels/optimizer_launchers.py``) are shared with the CUDA half; this file has the
loops and the launch skeleton.

* ``rows``: None for the dense update, or an int64 array of row indices (rows along axis 0):
  the lazy row_sparse update then touches only those rows (``opt_nonzero_rows(grad)`` finds them).
* Scalars are cast as MXNet casts its float32 operator parameters: to float32 first, then to the
  compute dtype (float32 for float32 and float16 weights, float64 for float64 ones).
* Small arrays run a serial loop, large ones a ``prange`` loop (``jit.ParallelLoop``). Lazy row
  updates run a serial loop over the rows.
* numba has no float16 on the CPU: float16 (and non-contiguous) arrays are staged through
  float32 copies, which are written back when the kernel writes them.
"""
import math

import numpy as np
from numba import njit, prange

from .. import cache_stamp  # noqa: F401  (stamps the cache entries made below)
from .. import optimizer_math as M
from ..optimizer_launchers import LAUNCHER_NAMES, OptimizerLaunchers
from .jit import ParallelLoop

__all__ = [*LAUNCHER_NAMES, "opt_l2_norm", "opt_sum_sq", "opt_nonzero_rows"]

# an update step reads and writes several arrays per element but is cheap arithmetic: it pays
# to wake the threads only for large weights
_COST = 1 / 8


# ---------------------------------------------------------------------------------------------
# Launch helpers
# ---------------------------------------------------------------------------------------------
def _stage(arrays, written):
    """Flat 1-D views for the kernel; float16 or non-contiguous arrays get float32/contiguous
    copies. Returns (flat arrays, [(original, copy)] to write back afterwards)."""
    flats, back = [], []
    for pos, a in enumerate(arrays):
        if a.dtype == np.float16:
            c = a.astype(np.float32).reshape(-1)
        elif not a.flags.c_contiguous:
            c = np.ascontiguousarray(a).reshape(-1)
        else:
            flats.append(a.reshape(-1))
            continue
        flats.append(c)
        if pos in written:
            back.append((a, c))
    return flats, back


def _launch(kernels, rows, arrays, written, scalars):
    """Run one fused update. ``kernels`` = (dense ParallelLoop, rows loop) of the rule;
    ``arrays[0]`` is the weight (it fixes sizes and the row length); ``written`` are the
    positions the kernel stores into."""
    dense, by_rows = kernels
    n = arrays[0].size
    flats, back = _stage(arrays, written)
    if rows is None:
        dense(n, *flats, *scalars)
    else:
        row_len = n // arrays[0].shape[0] if arrays[0].ndim and arrays[0].shape[0] else n
        by_rows(np.ascontiguousarray(rows, dtype=np.int64), row_len, *flats, *scalars)
    for original, copy in back:
        np.copyto(original, copy.reshape(original.shape), casting="unsafe")


# ---------------------------------------------------------------------------------------------
# The loops. Each rule's dense loop is written once with prange and compiled serial and
# parallel (``_dense_loops``); the rules with a lazy row_sparse update also have a rows loop
# (``ids``: rows of ``row_len`` elements). The dense loops index from range(n) (prange(n)) so
# numba knows the index is non-negative and vectorises them.
# ---------------------------------------------------------------------------------------------
def _dense_loops(loop):
    """The serial / prange dispatch of a rule's dense loop."""
    return ParallelLoop(loop, cost=_COST, error_model="numpy")


def _sgd(w, g, out, lr, decay, rescale, clip_gradient):
    for i in prange(w.size):
        out[i] = M.sgd(w[i], g[i], lr, decay, rescale, clip_gradient)


@njit(cache=True, nogil=True, error_model="numpy")
def _sgd_rows(ids, row_len, w, g, out, lr, decay, rescale, clip_gradient):
    n = w.size
    for r in range(ids.size):
        for i in range(ids[r] * row_len, min(ids[r] * row_len + row_len, n)):
            out[i] = M.sgd(w[i], g[i], lr, decay, rescale, clip_gradient)


def _sgd_mom(w, g, m, out, lr, lr_wd, momentum, rescale, clip_gradient):
    for i in prange(w.size):
        out[i], m[i] = M.sgd_mom(w[i], g[i], m[i], lr, lr_wd, momentum, rescale,
                                 clip_gradient)


@njit(cache=True, nogil=True, error_model="numpy")
def _sgd_mom_rows(ids, row_len, w, g, m, out, lr, lr_wd, momentum, rescale, clip_gradient):
    n = w.size
    for r in range(ids.size):
        for i in range(ids[r] * row_len, min(ids[r] * row_len + row_len, n)):
            out[i], m[i] = M.sgd_mom(w[i], g[i], m[i], lr, lr_wd, momentum, rescale,
                                     clip_gradient)


def _mp_sgd(w32, g, out, lr, decay, rescale, clip_gradient):
    for i in prange(w32.size):
        w32[i] = M.sgd(w32[i], g[i], lr, decay, rescale, clip_gradient)
        out[i] = w32[i]


def _mp_sgd_mom(w32, g, m, out, lr, lr_wd, momentum, rescale, clip_gradient):
    for i in prange(w32.size):
        w32[i], m[i] = M.sgd_mom(w32[i], g[i], m[i], lr, lr_wd, momentum, rescale,
                                 clip_gradient)
        out[i] = w32[i]


def _nag(w, g, m, out, lr, wd, momentum, momentum1, rescale, clip_gradient,
           in_place):
    for i in prange(w.size):
        out[i], m[i] = M.nag_mom(w[i], g[i], m[i], lr, wd, momentum, momentum1, rescale,
                                 clip_gradient, in_place)


def _mp_nag(w32, g, m, out, lr, wd, momentum, momentum1, rescale,
              clip_gradient, in_place):
    for i in prange(w32.size):
        w32[i], m[i] = M.nag_mom(w32[i], g[i], m[i], lr, wd, momentum, momentum1, rescale,
                                 clip_gradient, in_place)
        out[i] = w32[i]


def _adam(w, g, mean, var, out, lr, wd, b1, omb1, b2, omb2, eps, rescale,
            clip_gradient):
    for i in prange(w.size):
        out[i], mean[i], var[i] = M.adam(w[i], g[i], mean[i], var[i], lr, wd, b1, omb1,
                                         b2, omb2, eps, rescale, clip_gradient)


@njit(cache=True, nogil=True, error_model="numpy")
def _adam_rows(ids, row_len, w, g, mean, var, out, lr, wd, b1, omb1, b2, omb2, eps, rescale,
            clip_gradient):
    n = w.size
    for r in range(ids.size):
        for i in range(ids[r] * row_len, min(ids[r] * row_len + row_len, n)):
            out[i], mean[i], var[i] = M.adam(w[i], g[i], mean[i], var[i], lr, wd, b1, omb1,
                                             b2, omb2, eps, rescale, clip_gradient)


def _rmsprop(w, g, st_n, out, lr, wd, g1, omg1, eps, rescale, clip_gradient,
               clip_weights):
    for i in prange(w.size):
        out[i], st_n[i] = M.rmsprop(w[i], g[i], st_n[i], lr, wd, g1, omg1, eps, rescale,
                                    clip_gradient, clip_weights)


def _rmspropalex(w, g, st_n, st_g, delta, out, lr, wd, g1, omg1, g2, eps,
                   rescale, clip_gradient, clip_weights):
    for i in prange(w.size):
        out[i], st_n[i], st_g[i], delta[i] = M.rmspropalex(
            w[i], g[i], st_n[i], st_g[i], delta[i], lr, wd, g1, omg1, g2, eps, rescale,
            clip_gradient, clip_weights)


def _ftrl(w, g, z, st_n, out, lr, wd, lamda1, beta, rescale, clip_gradient,
            one):
    for i in prange(w.size):
        out[i], z[i], st_n[i] = M.ftrl(w[i], g[i], z[i], st_n[i], lr, wd, lamda1, beta,
                                       rescale, clip_gradient, one)


@njit(cache=True, nogil=True, error_model="numpy")
def _ftrl_rows(ids, row_len, w, g, z, st_n, out, lr, wd, lamda1, beta, rescale, clip_gradient,
            one):
    n = w.size
    for r in range(ids.size):
        for i in range(ids[r] * row_len, min(ids[r] * row_len + row_len, n)):
            out[i], z[i], st_n[i] = M.ftrl(w[i], g[i], z[i], st_n[i], lr, wd, lamda1, beta,
                                           rescale, clip_gradient, one)


def _ftml(w, g, d, v, z, out, lr, wd, b1, omb1, b2, omb2, eps, bias1, bias2,
            rescale, clip_gradient):
    for i in prange(w.size):
        out[i], d[i], v[i], z[i] = M.ftml(w[i], g[i], d[i], v[i], z[i], lr, wd, b1, omb1,
                                          b2, omb2, eps, bias1, bias2, rescale,
                                          clip_gradient)


def _signsgd(w, g, out, lr, decay, one):
    for i in prange(w.size):
        out[i] = M.signsgd(w[i], g[i], lr, decay, one)


def _signum(w, g, m, out, lr, wd, momentum, omm, decay_lh, rescale,
              clip_gradient, one):
    for i in prange(w.size):
        out[i], m[i] = M.signum(w[i], g[i], m[i], lr, wd, momentum, omm, decay_lh, rescale,
                                clip_gradient, one)


def _lamb1(w, g, mean, var, out, wd, b1, omb1, b2, omb2, eps, bias1, bias2,
             rescale, clip_gradient):
    for i in prange(w.size):
        out[i], mean[i], var[i] = M.lamb_phase1(w[i], g[i], mean[i], var[i], wd, b1, omb1,
                                                b2, omb2, eps, bias1, bias2, rescale,
                                                clip_gradient)


def _lamb2(w, direction, out, scaled_lr):
    for i in prange(w.size):
        out[i] = M.lamb_phase2(w[i], direction[i], scaled_lr)


def _mp_lamb2(w32, direction, out, scaled_lr):
    for i in prange(w32.size):
        w32[i] = M.lamb_phase2(w32[i], direction[i], scaled_lr)
        out[i] = w32[i]


def _adagrad(w, g, h, out, lr, wd, eps, rescale, clip_gradient):
    for i in prange(w.size):
        out[i], h[i] = M.adagrad(w[i], g[i], h[i], lr, wd, eps, rescale, clip_gradient)


# numba's disk cache of a kernel is invalidated by its own file only, not by the math it
# inlines: editing M.adagrad_rows (eps moved inside the square root) needs this file to change
@njit(cache=True, nogil=True, error_model="numpy")
def _adagrad_rows(ids, row_len, w, g, h, out, lr, eps, rescale, clip_gradient):
    n = w.size
    for r in range(ids.size):
        for i in range(ids[r] * row_len, min(ids[r] * row_len + row_len, n)):
            out[i], h[i] = M.adagrad_rows(w[i], g[i], h[i], lr, eps, rescale, clip_gradient)


def _adadelta(w, g, acc_g, acc_d, out, wd, rho, omr, eps, rescale,
                clip_gradient):
    for i in prange(w.size):
        out[i], acc_g[i], acc_d[i], g[i] = M.adadelta(w[i], g[i], acc_g[i], acc_d[i], wd,
                                                      rho, omr, eps, rescale, clip_gradient)


def _adamax(w, g, m, u, out, lr_t, wd, b1, omb1, b2, rescale, clip_gradient):
    for i in prange(w.size):
        out[i], m[i], u[i] = M.adamax(w[i], g[i], m[i], u[i], lr_t, wd, b1, omb1, b2,
                                      rescale, clip_gradient)


def _nadam(w, g, m, v, out, lr, wd, b1, omb1, b2, omb2, eps, sd, snd, bias2,
             ommt, mt1, rescale, clip_gradient):
    for i in prange(w.size):
        out[i], m[i], v[i] = M.nadam(w[i], g[i], m[i], v[i], lr, wd, b1, omb1, b2, omb2,
                                     eps, sd, snd, bias2, ommt, mt1, rescale, clip_gradient)


def _dcasgd(w, g, m, prev, out, neg_lr, wd, momentum, lamda, rescale,
              clip_gradient):
    for i in prange(w.size):
        out[i], m[i], prev[i] = M.dcasgd(w[i], g[i], m[i], prev[i], neg_lr, wd, momentum,
                                         lamda, rescale, clip_gradient)


def _dcasgd_nomom(w, g, prev, out, neg_lr, wd, lamda, rescale, clip_gradient):
    for i in prange(w.size):
        zero = w[i] - w[i]
        out[i], _, prev[i] = M.dcasgd(w[i], g[i], zero, prev[i], neg_lr, wd, zero, lamda,
                                      rescale, clip_gradient)


def _sgld(w, g, noise, out, neg_half_lr, wd, rescale, clip_gradient):
    for i in prange(w.size):
        out[i] = M.sgld(w[i], g[i], noise[i], neg_half_lr, wd, rescale, clip_gradient)


def _quantize_2bit(g, residual, out, threshold):
    for i in prange(g.size):
        out[i], residual[i] = M.quantize_2bit(g[i], residual[i], threshold)


@njit(cache=True, nogil=True, error_model="numpy")
def _nonzero_rows(g2d):
    """Indices of the rows of a 2-D array holding at least one non-zero."""
    found = np.empty(g2d.shape[0], dtype=np.int64)
    count = 0
    for r in range(g2d.shape[0]):
        for j in range(g2d.shape[1]):
            if g2d[r, j] != 0:
                found[count] = r
                count += 1
                break
    return found[:count]


def _same_buffer(a, b):
    return a is b or np.may_share_memory(a, b)


# ---------------------------------------------------------------------------------------------
# Launchers (the kernel-set API, written once for both halves in kernels/optimizer_launchers.py)
# with each rule's (dense, rows) loops
# ---------------------------------------------------------------------------------------------
_LAUNCHERS = OptimizerLaunchers(_launch, _same_buffer, dict(
    sgd=(_dense_loops(_sgd), _sgd_rows),
    sgd_mom=(_dense_loops(_sgd_mom), _sgd_mom_rows),
    mp_sgd=(_dense_loops(_mp_sgd), None),
    mp_sgd_mom=(_dense_loops(_mp_sgd_mom), None),
    nag=(_dense_loops(_nag), None),
    mp_nag=(_dense_loops(_mp_nag), None),
    adam=(_dense_loops(_adam), _adam_rows),
    rmsprop=(_dense_loops(_rmsprop), None),
    rmspropalex=(_dense_loops(_rmspropalex), None),
    ftrl=(_dense_loops(_ftrl), _ftrl_rows),
    ftml=(_dense_loops(_ftml), None),
    signsgd=(_dense_loops(_signsgd), None),
    signum=(_dense_loops(_signum), None),
    lamb1=(_dense_loops(_lamb1), None),
    lamb2=(_dense_loops(_lamb2), None),
    mp_lamb2=(_dense_loops(_mp_lamb2), None),
    adagrad=(_dense_loops(_adagrad), None),
    adagrad_rows=(None, _adagrad_rows),
    adadelta=(_dense_loops(_adadelta), None),
    adamax=(_dense_loops(_adamax), None),
    nadam=(_dense_loops(_nadam), None),
    dcasgd_nomom=(_dense_loops(_dcasgd_nomom), None),
    dcasgd=(_dense_loops(_dcasgd), None),
    sgld=(_dense_loops(_sgld), None),
    quantize_2bit=(_dense_loops(_quantize_2bit), None),
))


def __getattr__(name):
    # the launchers (sgd_update, adam_update ...) are the methods of _LAUNCHERS
    if name in LAUNCHER_NAMES:
        return getattr(_LAUNCHERS, name)
    raise AttributeError("module '%s' has no attribute '%s'" % (__name__, name))


def opt_sum_sq(x):
    """Sum of squares of all elements, accumulated in float32 for float32/float16 input.

    numpy's einsum loop rather than a BLAS dot: it runs on the calling thread, so the bits
    never depend on a thread count, and a crowded machine does not slow it down (a threaded
    float64 dot of 2^20 elements took 40x longer there)."""
    flat = x.reshape(-1)
    if flat.dtype == np.float16:
        flat = flat.astype(np.float32)
    return flat.dtype.type(np.einsum("i,i->", flat, flat))


def opt_l2_norm(x):
    """The L2 norm of all elements (MXNet's ``NDArray.norm()``), as a numpy scalar."""
    s = opt_sum_sq(x)
    return s.dtype.type(math.sqrt(s))


def opt_nonzero_rows(grad):
    """Row indices (axis 0) where ``grad`` has a non-zero: the rows a dense-backed row_sparse
    gradient stores."""
    if grad.ndim == 0:
        return np.zeros(1 if grad != 0 else 0, dtype=np.int64)
    g2d = grad.reshape(grad.shape[0], -1) if grad.flags.c_contiguous else \
        np.ascontiguousarray(grad).reshape(grad.shape[0], -1)
    if g2d.dtype == np.float16:
        g2d = g2d.view(np.uint16) & np.uint16(0x7FFF)   # -0.0 counts as zero
    return _nonzero_rows(g2d)
