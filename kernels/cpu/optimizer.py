"""CPU optimizer updates: one fused loop per update rule over numpy arrays.

Every launcher takes backend arrays of any shape (weight, gradient, states, output; ``out`` may
be the weight itself) plus the hyper-parameters as Python numbers, and updates the states and
``out`` in one pass. The math is in ``kernels/optimizer_math.py``, shared with the CUDA half.

* ``rows``: None for the dense update, or an int64 array of row indices (rows along axis 0):
  the lazy row_sparse update then touches only those rows (``opt_nonzero_rows(grad)`` finds them).
* Scalars are cast as MXNet casts its float32 operator parameters: to float32 first, then to the
  compute dtype (float32 for float32 and float16 weights, float64 for float64 ones).
* Small arrays run a serial loop; arrays of at least ``PARALLEL_MIN`` elements run a ``prange``
  loop. Lazy row updates run a serial loop over the rows.
* numba has no float16 on the CPU: float16 (and non-contiguous) arrays are staged through
  float32 copies, which are written back when the kernel writes them.
"""
import math

import numpy as np
from numba import njit, prange

from .. import optimizer_math as M

__all__ = ["sgd_update", "sgd_mom_update", "mp_sgd_update", "mp_sgd_mom_update",
           "nag_mom_update", "mp_nag_mom_update", "adam_update", "rmsprop_update",
           "rmspropalex_update", "ftrl_update", "ftml_update", "signsgd_update",
           "signum_update", "lamb_update_phase1", "mp_lamb_update_phase1", "lamb_update_phase2",
           "mp_lamb_update_phase2", "adagrad_update", "sparse_adagrad_update", "adadelta_update",
           "adamax_update", "nadam_update", "dcasgd_update", "sgld_update", "quantize_2bit",
           "opt_l2_norm", "opt_sum_sq", "opt_nonzero_rows"]

PARALLEL_MIN = 1 << 20


# ---------------------------------------------------------------------------------------------
# Launch helpers
# ---------------------------------------------------------------------------------------------
def compute_dtype(dtype):
    """float64 computes in float64; everything else (float32, float16) in float32."""
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


def cast_scalars(dtype, *values):
    """MXNet's operator parameters are float32; they reach the kernel cast to its dtype."""
    t = compute_dtype(dtype)
    return tuple(t(np.float32(v)) for v in values)


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
    """Run one fused update. ``kernels`` = (serial, prange, rows) loops of the rule;
    ``arrays[0]`` is the weight (it fixes sizes and the row length); ``written`` are the
    positions the kernel stores into."""
    serial, parallel, by_rows = kernels
    n = arrays[0].size
    flats, back = _stage(arrays, written)
    if rows is None:
        (parallel if n >= PARALLEL_MIN else serial)(*flats, *scalars)
    else:
        row_len = n // arrays[0].shape[0] if arrays[0].ndim and arrays[0].shape[0] else n
        by_rows(np.ascontiguousarray(rows, dtype=np.int64), row_len, *flats, *scalars)
    for original, copy in back:
        np.copyto(original, copy.reshape(original.shape), casting="unsafe")


# ---------------------------------------------------------------------------------------------
# The loops. Each rule has a serial and a prange version of the same dense loop; the rules with a
# lazy row_sparse update also have a rows loop (``ids``: rows of ``row_len`` elements). The dense
# loops index from range(n) so numba knows the index is non-negative and vectorises them.
# ---------------------------------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def _sgd_s(w, g, out, lr, decay, rescale, clip_gradient):
    for i in range(w.size):
        out[i] = M.sgd(w[i], g[i], lr, decay, rescale, clip_gradient)


@njit(cache=True, parallel=True, error_model="numpy")
def _sgd_p(w, g, out, lr, decay, rescale, clip_gradient):
    for i in prange(w.size):
        out[i] = M.sgd(w[i], g[i], lr, decay, rescale, clip_gradient)


@njit(cache=True, error_model="numpy")
def _sgd_rows(ids, row_len, w, g, out, lr, decay, rescale, clip_gradient):
    n = w.size
    for r in range(ids.size):
        for i in range(ids[r] * row_len, min(ids[r] * row_len + row_len, n)):
            out[i] = M.sgd(w[i], g[i], lr, decay, rescale, clip_gradient)


@njit(cache=True, error_model="numpy")
def _sgd_mom_s(w, g, m, out, lr, lr_wd, momentum, rescale, clip_gradient):
    for i in range(w.size):
        out[i], m[i] = M.sgd_mom(w[i], g[i], m[i], lr, lr_wd, momentum, rescale,
                                 clip_gradient)


@njit(cache=True, parallel=True, error_model="numpy")
def _sgd_mom_p(w, g, m, out, lr, lr_wd, momentum, rescale, clip_gradient):
    for i in prange(w.size):
        out[i], m[i] = M.sgd_mom(w[i], g[i], m[i], lr, lr_wd, momentum, rescale,
                                 clip_gradient)


@njit(cache=True, error_model="numpy")
def _sgd_mom_rows(ids, row_len, w, g, m, out, lr, lr_wd, momentum, rescale, clip_gradient):
    n = w.size
    for r in range(ids.size):
        for i in range(ids[r] * row_len, min(ids[r] * row_len + row_len, n)):
            out[i], m[i] = M.sgd_mom(w[i], g[i], m[i], lr, lr_wd, momentum, rescale,
                                     clip_gradient)


@njit(cache=True, error_model="numpy")
def _mp_sgd_s(w32, g, out, lr, decay, rescale, clip_gradient):
    for i in range(w32.size):
        w32[i] = M.sgd(w32[i], g[i], lr, decay, rescale, clip_gradient)
        out[i] = w32[i]


@njit(cache=True, parallel=True, error_model="numpy")
def _mp_sgd_p(w32, g, out, lr, decay, rescale, clip_gradient):
    for i in prange(w32.size):
        w32[i] = M.sgd(w32[i], g[i], lr, decay, rescale, clip_gradient)
        out[i] = w32[i]


@njit(cache=True, error_model="numpy")
def _mp_sgd_mom_s(w32, g, m, out, lr, lr_wd, momentum, rescale, clip_gradient):
    for i in range(w32.size):
        w32[i], m[i] = M.sgd_mom(w32[i], g[i], m[i], lr, lr_wd, momentum, rescale,
                                 clip_gradient)
        out[i] = w32[i]


@njit(cache=True, parallel=True, error_model="numpy")
def _mp_sgd_mom_p(w32, g, m, out, lr, lr_wd, momentum, rescale, clip_gradient):
    for i in prange(w32.size):
        w32[i], m[i] = M.sgd_mom(w32[i], g[i], m[i], lr, lr_wd, momentum, rescale,
                                 clip_gradient)
        out[i] = w32[i]


@njit(cache=True, error_model="numpy")
def _nag_s(w, g, m, out, lr, wd, momentum, momentum1, rescale, clip_gradient,
           in_place):
    for i in range(w.size):
        out[i], m[i] = M.nag_mom(w[i], g[i], m[i], lr, wd, momentum, momentum1, rescale,
                                 clip_gradient, in_place)


@njit(cache=True, parallel=True, error_model="numpy")
def _nag_p(w, g, m, out, lr, wd, momentum, momentum1, rescale, clip_gradient,
           in_place):
    for i in prange(w.size):
        out[i], m[i] = M.nag_mom(w[i], g[i], m[i], lr, wd, momentum, momentum1, rescale,
                                 clip_gradient, in_place)


@njit(cache=True, error_model="numpy")
def _mp_nag_s(w32, g, m, out, lr, wd, momentum, momentum1, rescale,
              clip_gradient, in_place):
    for i in range(w32.size):
        w32[i], m[i] = M.nag_mom(w32[i], g[i], m[i], lr, wd, momentum, momentum1, rescale,
                                 clip_gradient, in_place)
        out[i] = w32[i]


@njit(cache=True, parallel=True, error_model="numpy")
def _mp_nag_p(w32, g, m, out, lr, wd, momentum, momentum1, rescale,
              clip_gradient, in_place):
    for i in prange(w32.size):
        w32[i], m[i] = M.nag_mom(w32[i], g[i], m[i], lr, wd, momentum, momentum1, rescale,
                                 clip_gradient, in_place)
        out[i] = w32[i]


@njit(cache=True, error_model="numpy")
def _adam_s(w, g, mean, var, out, lr, wd, b1, omb1, b2, omb2, eps, rescale,
            clip_gradient):
    for i in range(w.size):
        out[i], mean[i], var[i] = M.adam(w[i], g[i], mean[i], var[i], lr, wd, b1, omb1,
                                         b2, omb2, eps, rescale, clip_gradient)


@njit(cache=True, parallel=True, error_model="numpy")
def _adam_p(w, g, mean, var, out, lr, wd, b1, omb1, b2, omb2, eps, rescale,
            clip_gradient):
    for i in prange(w.size):
        out[i], mean[i], var[i] = M.adam(w[i], g[i], mean[i], var[i], lr, wd, b1, omb1,
                                         b2, omb2, eps, rescale, clip_gradient)


@njit(cache=True, error_model="numpy")
def _adam_rows(ids, row_len, w, g, mean, var, out, lr, wd, b1, omb1, b2, omb2, eps, rescale,
            clip_gradient):
    n = w.size
    for r in range(ids.size):
        for i in range(ids[r] * row_len, min(ids[r] * row_len + row_len, n)):
            out[i], mean[i], var[i] = M.adam(w[i], g[i], mean[i], var[i], lr, wd, b1, omb1,
                                             b2, omb2, eps, rescale, clip_gradient)


@njit(cache=True, error_model="numpy")
def _rmsprop_s(w, g, st_n, out, lr, wd, g1, omg1, eps, rescale, clip_gradient,
               clip_weights):
    for i in range(w.size):
        out[i], st_n[i] = M.rmsprop(w[i], g[i], st_n[i], lr, wd, g1, omg1, eps, rescale,
                                    clip_gradient, clip_weights)


@njit(cache=True, parallel=True, error_model="numpy")
def _rmsprop_p(w, g, st_n, out, lr, wd, g1, omg1, eps, rescale, clip_gradient,
               clip_weights):
    for i in prange(w.size):
        out[i], st_n[i] = M.rmsprop(w[i], g[i], st_n[i], lr, wd, g1, omg1, eps, rescale,
                                    clip_gradient, clip_weights)


@njit(cache=True, error_model="numpy")
def _rmspropalex_s(w, g, st_n, st_g, delta, out, lr, wd, g1, omg1, g2, eps,
                   rescale, clip_gradient, clip_weights):
    for i in range(w.size):
        out[i], st_n[i], st_g[i], delta[i] = M.rmspropalex(
            w[i], g[i], st_n[i], st_g[i], delta[i], lr, wd, g1, omg1, g2, eps, rescale,
            clip_gradient, clip_weights)


@njit(cache=True, parallel=True, error_model="numpy")
def _rmspropalex_p(w, g, st_n, st_g, delta, out, lr, wd, g1, omg1, g2, eps,
                   rescale, clip_gradient, clip_weights):
    for i in prange(w.size):
        out[i], st_n[i], st_g[i], delta[i] = M.rmspropalex(
            w[i], g[i], st_n[i], st_g[i], delta[i], lr, wd, g1, omg1, g2, eps, rescale,
            clip_gradient, clip_weights)


@njit(cache=True, error_model="numpy")
def _ftrl_s(w, g, z, st_n, out, lr, wd, lamda1, beta, rescale, clip_gradient,
            one):
    for i in range(w.size):
        out[i], z[i], st_n[i] = M.ftrl(w[i], g[i], z[i], st_n[i], lr, wd, lamda1, beta,
                                       rescale, clip_gradient, one)


@njit(cache=True, parallel=True, error_model="numpy")
def _ftrl_p(w, g, z, st_n, out, lr, wd, lamda1, beta, rescale, clip_gradient,
            one):
    for i in prange(w.size):
        out[i], z[i], st_n[i] = M.ftrl(w[i], g[i], z[i], st_n[i], lr, wd, lamda1, beta,
                                       rescale, clip_gradient, one)


@njit(cache=True, error_model="numpy")
def _ftrl_rows(ids, row_len, w, g, z, st_n, out, lr, wd, lamda1, beta, rescale, clip_gradient,
            one):
    n = w.size
    for r in range(ids.size):
        for i in range(ids[r] * row_len, min(ids[r] * row_len + row_len, n)):
            out[i], z[i], st_n[i] = M.ftrl(w[i], g[i], z[i], st_n[i], lr, wd, lamda1, beta,
                                           rescale, clip_gradient, one)


@njit(cache=True, error_model="numpy")
def _ftml_s(w, g, d, v, z, out, lr, wd, b1, omb1, b2, omb2, eps, bias1, bias2,
            rescale, clip_gradient):
    for i in range(w.size):
        out[i], d[i], v[i], z[i] = M.ftml(w[i], g[i], d[i], v[i], z[i], lr, wd, b1, omb1,
                                          b2, omb2, eps, bias1, bias2, rescale,
                                          clip_gradient)


@njit(cache=True, parallel=True, error_model="numpy")
def _ftml_p(w, g, d, v, z, out, lr, wd, b1, omb1, b2, omb2, eps, bias1, bias2,
            rescale, clip_gradient):
    for i in prange(w.size):
        out[i], d[i], v[i], z[i] = M.ftml(w[i], g[i], d[i], v[i], z[i], lr, wd, b1, omb1,
                                          b2, omb2, eps, bias1, bias2, rescale,
                                          clip_gradient)


@njit(cache=True, error_model="numpy")
def _signsgd_s(w, g, out, lr, decay, one):
    for i in range(w.size):
        out[i] = M.signsgd(w[i], g[i], lr, decay, one)


@njit(cache=True, parallel=True, error_model="numpy")
def _signsgd_p(w, g, out, lr, decay, one):
    for i in prange(w.size):
        out[i] = M.signsgd(w[i], g[i], lr, decay, one)


@njit(cache=True, error_model="numpy")
def _signum_s(w, g, m, out, lr, wd, momentum, omm, decay_lh, rescale,
              clip_gradient, one):
    for i in range(w.size):
        out[i], m[i] = M.signum(w[i], g[i], m[i], lr, wd, momentum, omm, decay_lh, rescale,
                                clip_gradient, one)


@njit(cache=True, parallel=True, error_model="numpy")
def _signum_p(w, g, m, out, lr, wd, momentum, omm, decay_lh, rescale,
              clip_gradient, one):
    for i in prange(w.size):
        out[i], m[i] = M.signum(w[i], g[i], m[i], lr, wd, momentum, omm, decay_lh, rescale,
                                clip_gradient, one)


@njit(cache=True, error_model="numpy")
def _lamb1_s(w, g, mean, var, out, wd, b1, omb1, b2, omb2, eps, bias1, bias2,
             rescale, clip_gradient):
    for i in range(w.size):
        out[i], mean[i], var[i] = M.lamb_phase1(w[i], g[i], mean[i], var[i], wd, b1, omb1,
                                                b2, omb2, eps, bias1, bias2, rescale,
                                                clip_gradient)


@njit(cache=True, parallel=True, error_model="numpy")
def _lamb1_p(w, g, mean, var, out, wd, b1, omb1, b2, omb2, eps, bias1, bias2,
             rescale, clip_gradient):
    for i in prange(w.size):
        out[i], mean[i], var[i] = M.lamb_phase1(w[i], g[i], mean[i], var[i], wd, b1, omb1,
                                                b2, omb2, eps, bias1, bias2, rescale,
                                                clip_gradient)


@njit(cache=True, error_model="numpy")
def _lamb2_s(w, direction, out, scaled_lr):
    for i in range(w.size):
        out[i] = M.lamb_phase2(w[i], direction[i], scaled_lr)


@njit(cache=True, parallel=True, error_model="numpy")
def _lamb2_p(w, direction, out, scaled_lr):
    for i in prange(w.size):
        out[i] = M.lamb_phase2(w[i], direction[i], scaled_lr)


@njit(cache=True, error_model="numpy")
def _mp_lamb2_s(w32, direction, out, scaled_lr):
    for i in range(w32.size):
        w32[i] = M.lamb_phase2(w32[i], direction[i], scaled_lr)
        out[i] = w32[i]


@njit(cache=True, parallel=True, error_model="numpy")
def _mp_lamb2_p(w32, direction, out, scaled_lr):
    for i in prange(w32.size):
        w32[i] = M.lamb_phase2(w32[i], direction[i], scaled_lr)
        out[i] = w32[i]


@njit(cache=True, error_model="numpy")
def _adagrad_s(w, g, h, out, lr, wd, eps, rescale, clip_gradient):
    for i in range(w.size):
        out[i], h[i] = M.adagrad(w[i], g[i], h[i], lr, wd, eps, rescale, clip_gradient)


@njit(cache=True, parallel=True, error_model="numpy")
def _adagrad_p(w, g, h, out, lr, wd, eps, rescale, clip_gradient):
    for i in prange(w.size):
        out[i], h[i] = M.adagrad(w[i], g[i], h[i], lr, wd, eps, rescale, clip_gradient)


@njit(cache=True, error_model="numpy")
def _adagrad_rows(ids, row_len, w, g, h, out, lr, eps, rescale, clip_gradient):
    n = w.size
    for r in range(ids.size):
        for i in range(ids[r] * row_len, min(ids[r] * row_len + row_len, n)):
            out[i], h[i] = M.adagrad_rows(w[i], g[i], h[i], lr, eps, rescale, clip_gradient)


@njit(cache=True, error_model="numpy")
def _adadelta_s(w, g, acc_g, acc_d, out, wd, rho, omr, eps, rescale,
                clip_gradient):
    for i in range(w.size):
        out[i], acc_g[i], acc_d[i], g[i] = M.adadelta(w[i], g[i], acc_g[i], acc_d[i], wd,
                                                      rho, omr, eps, rescale, clip_gradient)


@njit(cache=True, parallel=True, error_model="numpy")
def _adadelta_p(w, g, acc_g, acc_d, out, wd, rho, omr, eps, rescale,
                clip_gradient):
    for i in prange(w.size):
        out[i], acc_g[i], acc_d[i], g[i] = M.adadelta(w[i], g[i], acc_g[i], acc_d[i], wd,
                                                      rho, omr, eps, rescale, clip_gradient)


@njit(cache=True, error_model="numpy")
def _adamax_s(w, g, m, u, out, lr_t, wd, b1, omb1, b2, rescale, clip_gradient):
    for i in range(w.size):
        out[i], m[i], u[i] = M.adamax(w[i], g[i], m[i], u[i], lr_t, wd, b1, omb1, b2,
                                      rescale, clip_gradient)


@njit(cache=True, parallel=True, error_model="numpy")
def _adamax_p(w, g, m, u, out, lr_t, wd, b1, omb1, b2, rescale, clip_gradient):
    for i in prange(w.size):
        out[i], m[i], u[i] = M.adamax(w[i], g[i], m[i], u[i], lr_t, wd, b1, omb1, b2,
                                      rescale, clip_gradient)


@njit(cache=True, error_model="numpy")
def _nadam_s(w, g, m, v, out, lr, wd, b1, omb1, b2, omb2, eps, sd, snd, bias2,
             ommt, mt1, rescale, clip_gradient):
    for i in range(w.size):
        out[i], m[i], v[i] = M.nadam(w[i], g[i], m[i], v[i], lr, wd, b1, omb1, b2, omb2,
                                     eps, sd, snd, bias2, ommt, mt1, rescale, clip_gradient)


@njit(cache=True, parallel=True, error_model="numpy")
def _nadam_p(w, g, m, v, out, lr, wd, b1, omb1, b2, omb2, eps, sd, snd, bias2,
             ommt, mt1, rescale, clip_gradient):
    for i in prange(w.size):
        out[i], m[i], v[i] = M.nadam(w[i], g[i], m[i], v[i], lr, wd, b1, omb1, b2, omb2,
                                     eps, sd, snd, bias2, ommt, mt1, rescale, clip_gradient)


@njit(cache=True, error_model="numpy")
def _dcasgd_s(w, g, m, prev, out, neg_lr, wd, momentum, lamda, rescale,
              clip_gradient):
    for i in range(w.size):
        out[i], m[i], prev[i] = M.dcasgd(w[i], g[i], m[i], prev[i], neg_lr, wd, momentum,
                                         lamda, rescale, clip_gradient)


@njit(cache=True, parallel=True, error_model="numpy")
def _dcasgd_p(w, g, m, prev, out, neg_lr, wd, momentum, lamda, rescale,
              clip_gradient):
    for i in prange(w.size):
        out[i], m[i], prev[i] = M.dcasgd(w[i], g[i], m[i], prev[i], neg_lr, wd, momentum,
                                         lamda, rescale, clip_gradient)


@njit(cache=True, error_model="numpy")
def _dcasgd_nomom_s(w, g, prev, out, neg_lr, wd, lamda, rescale, clip_gradient):
    for i in range(w.size):
        zero = w[i] - w[i]
        out[i], _, prev[i] = M.dcasgd(w[i], g[i], zero, prev[i], neg_lr, wd, zero, lamda,
                                      rescale, clip_gradient)


@njit(cache=True, parallel=True, error_model="numpy")
def _dcasgd_nomom_p(w, g, prev, out, neg_lr, wd, lamda, rescale, clip_gradient):
    for i in prange(w.size):
        zero = w[i] - w[i]
        out[i], _, prev[i] = M.dcasgd(w[i], g[i], zero, prev[i], neg_lr, wd, zero, lamda,
                                      rescale, clip_gradient)


@njit(cache=True, error_model="numpy")
def _sgld_s(w, g, noise, out, neg_half_lr, wd, rescale, clip_gradient):
    for i in range(w.size):
        out[i] = M.sgld(w[i], g[i], noise[i], neg_half_lr, wd, rescale, clip_gradient)


@njit(cache=True, parallel=True, error_model="numpy")
def _sgld_p(w, g, noise, out, neg_half_lr, wd, rescale, clip_gradient):
    for i in prange(w.size):
        out[i] = M.sgld(w[i], g[i], noise[i], neg_half_lr, wd, rescale, clip_gradient)


@njit(cache=True, error_model="numpy")
def _quantize_2bit_s(g, residual, out, threshold):
    for i in range(g.size):
        out[i], residual[i] = M.quantize_2bit(g[i], residual[i], threshold)


@njit(cache=True, parallel=True, error_model="numpy")
def _quantize_2bit_p(g, residual, out, threshold):
    for i in prange(g.size):
        out[i], residual[i] = M.quantize_2bit(g[i], residual[i], threshold)


@njit(cache=True, error_model="numpy")
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


# (serial, prange, rows) loops of each rule
_SGD = (_sgd_s, _sgd_p, _sgd_rows)
_SGD_MOM = (_sgd_mom_s, _sgd_mom_p, _sgd_mom_rows)
_MP_SGD = (_mp_sgd_s, _mp_sgd_p, None)
_MP_SGD_MOM = (_mp_sgd_mom_s, _mp_sgd_mom_p, None)
_NAG = (_nag_s, _nag_p, None)
_MP_NAG = (_mp_nag_s, _mp_nag_p, None)
_ADAM = (_adam_s, _adam_p, _adam_rows)
_RMSPROP = (_rmsprop_s, _rmsprop_p, None)
_RMSPROPALEX = (_rmspropalex_s, _rmspropalex_p, None)
_FTRL = (_ftrl_s, _ftrl_p, _ftrl_rows)
_FTML = (_ftml_s, _ftml_p, None)
_SIGNSGD = (_signsgd_s, _signsgd_p, None)
_SIGNUM = (_signum_s, _signum_p, None)
_LAMB1 = (_lamb1_s, _lamb1_p, None)
_LAMB2 = (_lamb2_s, _lamb2_p, None)
_MP_LAMB2 = (_mp_lamb2_s, _mp_lamb2_p, None)
_ADAGRAD = (_adagrad_s, _adagrad_p, None)
_ADAGRAD_ROWS = (None, None, _adagrad_rows)
_ADADELTA = (_adadelta_s, _adadelta_p, None)
_ADAMAX = (_adamax_s, _adamax_p, None)
_NADAM = (_nadam_s, _nadam_p, None)
_DCASGD_NOMOM = (_dcasgd_nomom_s, _dcasgd_nomom_p, None)
_DCASGD = (_dcasgd_s, _dcasgd_p, None)
_SGLD = (_sgld_s, _sgld_p, None)
_QUANTIZE_2BIT = (_quantize_2bit_s, _quantize_2bit_p, None)


# ---------------------------------------------------------------------------------------------
# Launchers (the kernel-set API; kernels/cuda/optimizer.py has the same signatures)
# ---------------------------------------------------------------------------------------------
def sgd_update(weight, grad, out, lr, wd, rescale_grad, clip_gradient, rows=None):
    lr, wd, rescale, clip = cast_scalars(weight.dtype, lr, wd, rescale_grad, clip_gradient)
    decay = lr.dtype.type(1) - lr * wd
    _launch(_SGD, rows, (weight, grad, out), (2,), (lr, decay, rescale, clip))


def sgd_mom_update(weight, grad, mom, out, lr, wd, momentum, rescale_grad, clip_gradient,
                   rows=None):
    lr, wd, momentum, rescale, clip = cast_scalars(weight.dtype, lr, wd, momentum, rescale_grad,
                                                   clip_gradient)
    _launch(_SGD_MOM, rows, (weight, grad, mom, out), (2, 3),
            (lr, lr * wd, momentum, rescale, clip))


def mp_sgd_update(weight, grad, weight32, out, lr, wd, rescale_grad, clip_gradient):
    lr, wd, rescale, clip = cast_scalars(np.float32, lr, wd, rescale_grad, clip_gradient)
    decay = np.float32(1) - lr * wd
    _launch(_MP_SGD, None, (weight32, grad, out), (0, 2),
            (lr, decay, rescale, clip))


def mp_sgd_mom_update(weight, grad, mom, weight32, out, lr, wd, momentum, rescale_grad,
                      clip_gradient):
    lr, wd, momentum, rescale, clip = cast_scalars(np.float32, lr, wd, momentum, rescale_grad,
                                                   clip_gradient)
    _launch(_MP_SGD_MOM, None, (weight32, grad, mom, out), (0, 2, 3),
            (lr, lr * wd, momentum, rescale, clip))


def nag_mom_update(weight, grad, mom, out, lr, wd, momentum, rescale_grad, clip_gradient):
    lr, wd, momentum, rescale, clip = cast_scalars(weight.dtype, lr, wd, momentum, rescale_grad,
                                                   clip_gradient)
    in_place = out is weight or np.may_share_memory(weight, out)
    _launch(_NAG, None, (weight, grad, mom, out), (2, 3),
            (lr, wd, momentum, momentum + momentum.dtype.type(1), rescale, clip, in_place))


def mp_nag_mom_update(weight, grad, mom, weight32, out, lr, wd, momentum, rescale_grad,
                      clip_gradient):
    lr, wd, momentum, rescale, clip = cast_scalars(np.float32, lr, wd, momentum, rescale_grad,
                                                   clip_gradient)
    # MXNet's mixed-precision kernel keeps the new master weight in the variable the decay
    # term reads, so it always sees the new weight
    _launch(_MP_NAG, None, (weight32, grad, mom, out), (0, 2, 3),
            (lr, wd, momentum, momentum + np.float32(1), rescale, clip, True))


def adam_update(weight, grad, mean, var, out, lr, wd, beta1, beta2, epsilon, rescale_grad,
                clip_gradient, rows=None):
    lr, wd, b1, b2, eps, rescale, clip = cast_scalars(weight.dtype, lr, wd, beta1, beta2,
                                                      epsilon, rescale_grad, clip_gradient)
    one = b1.dtype.type(1)
    _launch(_ADAM, rows, (weight, grad, mean, var, out), (2, 3, 4),
            (lr, wd, b1, one - b1, b2, one - b2, eps, rescale, clip))


def rmsprop_update(weight, grad, n, out, lr, wd, gamma1, epsilon, rescale_grad, clip_gradient,
                   clip_weights):
    lr, wd, g1, eps, rescale, clip, clip_w = cast_scalars(
        weight.dtype, lr, wd, gamma1, epsilon, rescale_grad, clip_gradient, clip_weights)
    _launch(_RMSPROP, None, (weight, grad, n, out), (2, 3),
            (lr, wd, g1, g1.dtype.type(1) - g1, eps, rescale, clip, clip_w))


def rmspropalex_update(weight, grad, n, g, delta, out, lr, wd, gamma1, gamma2, epsilon,
                       rescale_grad, clip_gradient, clip_weights):
    lr, wd, g1, g2, eps, rescale, clip, clip_w = cast_scalars(
        weight.dtype, lr, wd, gamma1, gamma2, epsilon, rescale_grad, clip_gradient, clip_weights)
    _launch(_RMSPROPALEX, None, (weight, grad, n, g, delta, out), (2, 3, 4, 5),
            (lr, wd, g1, g1.dtype.type(1) - g1, g2, eps, rescale, clip, clip_w))


def ftrl_update(weight, grad, z, n, out, lr, wd, lamda1, beta, rescale_grad, clip_gradient,
                rows=None):
    lr, wd, lamda1, beta, rescale, clip = cast_scalars(weight.dtype, lr, wd, lamda1, beta,
                                                       rescale_grad, clip_gradient)
    _launch(_FTRL, rows, (weight, grad, z, n, out), (2, 3, 4),
            (lr, wd, lamda1, beta, rescale, clip, lr.dtype.type(1)))


def ftml_update(weight, grad, d, v, z, out, lr, wd, beta1, beta2, epsilon, t, rescale_grad,
                clip_grad):
    lr, wd, b1, b2, eps, rescale, clip = cast_scalars(weight.dtype, lr, wd, beta1, beta2,
                                                      epsilon, rescale_grad, clip_grad)
    one = b1.dtype.type(1)
    bias1, bias2 = one - b1 ** int(t), one - b2 ** int(t)
    _launch(_FTML, None, (weight, grad, d, v, z, out), (2, 3, 4, 5),
            (lr, wd, b1, one - b1, b2, one - b2, eps, bias1, bias2, rescale, clip))


def signsgd_update(weight, grad, out, lr, wd):
    lr, wd = cast_scalars(weight.dtype, lr, wd)
    one = lr.dtype.type(1)
    _launch(_SIGNSGD, None, (weight, grad, out), (2,), (lr, one - lr * wd, one))


def signum_update(weight, grad, mom, out, lr, wd, momentum, wd_lh, rescale_grad, clip_gradient):
    lr, wd, momentum, wd_lh, rescale, clip = cast_scalars(weight.dtype, lr, wd, momentum, wd_lh,
                                                          rescale_grad, clip_gradient)
    one = lr.dtype.type(1)
    _launch(_SIGNUM, None, (weight, grad, mom, out), (2, 3),
            (lr, wd, momentum, one - momentum, one - lr * wd_lh, rescale, clip, one))


def lamb_update_phase1(weight, grad, mean, var, out, beta1, beta2, epsilon, t, bias_correction,
                       wd, rescale_grad, clip_gradient):
    """Writes LAMB's update direction into ``out`` (MXNet's phase-1 output ``g``)."""
    b1, b2, eps, wd, rescale, clip = cast_scalars(weight.dtype, beta1, beta2, epsilon, wd,
                                                  rescale_grad, clip_gradient)
    one = b1.dtype.type(1)
    if bias_correction:
        bias1, bias2 = one - b1 ** int(t), one - b2 ** int(t)
    else:
        bias1 = bias2 = one
    _launch(_LAMB1, None, (weight, grad, mean, var, out), (2, 3, 4),
            (wd, b1, one - b1, b2, one - b2, eps, bias1, bias2, rescale, clip))


def mp_lamb_update_phase1(weight, grad, mean, var, weight32, out, beta1, beta2, epsilon, t,
                          bias_correction, wd, rescale_grad, clip_gradient):
    """Phase 1 on the float32 master copy (the float16 gradient is read as float32)."""
    lamb_update_phase1(weight32, grad, mean, var, out, beta1, beta2, epsilon, t,
                       bias_correction, wd, rescale_grad, clip_gradient)


def lamb_trust_lr(lr, r1, r2, lower_bound, upper_bound):
    """lr times MXNet's trust ratio: r1 (bounded when a bound is >= 0) over r2, or lr alone
    when either norm is zero. Computed in float32 like MXNet's kernel."""
    lr, r1, r2 = np.float32(lr), np.float32(r1), np.float32(r2)
    if lower_bound is not None and lower_bound >= 0:
        r1 = max(r1, np.float32(lower_bound))
    if upper_bound is not None and upper_bound >= 0:
        r1 = min(r1, np.float32(upper_bound))
    if r1 == 0 or r2 == 0:
        return lr
    return lr * (r1 / r2)


def lamb_update_phase2(weight, g, r1, r2, out, lr, lower_bound=-1.0, upper_bound=-1.0):
    (scaled,) = cast_scalars(weight.dtype, lamb_trust_lr(lr, r1, r2, lower_bound, upper_bound))
    _launch(_LAMB2, None, (weight, g, out), (2,), (scaled,))


def mp_lamb_update_phase2(weight, g, r1, r2, weight32, out, lr, lower_bound=-1.0,
                          upper_bound=-1.0):
    scaled = lamb_trust_lr(lr, r1, r2, lower_bound, upper_bound)
    _launch(_MP_LAMB2, None, (weight32, g, out), (0, 2), (scaled,))


def adagrad_update(weight, grad, history, out, lr, wd, epsilon, rescale_grad, clip_gradient):
    lr, wd, eps, rescale, clip = cast_scalars(weight.dtype, lr, wd, epsilon, rescale_grad,
                                              clip_gradient)
    _launch(_ADAGRAD, None, (weight, grad, history, out), (2, 3),
            (lr, wd, eps, rescale, clip))


def sparse_adagrad_update(weight, grad, history, out, lr, epsilon, rescale_grad, clip_gradient,
                          rows):
    lr, eps, rescale, clip = cast_scalars(weight.dtype, lr, epsilon, rescale_grad, clip_gradient)
    _launch(_ADAGRAD_ROWS, rows, (weight, grad, history, out), (2, 3),
            (lr, eps, rescale, clip))


def adadelta_update(weight, grad, acc_g, acc_delta, out, wd, rho, epsilon, rescale_grad,
                    clip_gradient):
    """AdaDelta; like MXNet it leaves the rescaled gradient in ``grad``."""
    wd, rho, eps, rescale, clip = cast_scalars(weight.dtype, wd, rho, epsilon, rescale_grad,
                                               clip_gradient)
    _launch(_ADADELTA, None, (weight, grad, acc_g, acc_delta, out), (1, 2, 3, 4),
            (wd, rho, rho.dtype.type(1) - rho, eps, rescale, clip))


def adamax_update(weight, grad, m, u, out, lr_t, wd, beta1, beta2, rescale_grad, clip_gradient):
    lr_t, wd, b1, b2, rescale, clip = cast_scalars(weight.dtype, lr_t, wd, beta1, beta2,
                                                   rescale_grad, clip_gradient)
    _launch(_ADAMAX, None, (weight, grad, m, u, out), (2, 3, 4),
            (lr_t, wd, b1, b1.dtype.type(1) - b1, b2, rescale, clip))


def nadam_update(weight, grad, m, v, out, lr, wd, beta1, beta2, epsilon, sched_denom,
                 sched_next_denom, bias2, momentum_t, momentum_t1, rescale_grad, clip_gradient):
    (lr, wd, b1, b2, eps, sd, snd, bias2, mom_t, mom_t1, rescale, clip) = cast_scalars(
        weight.dtype, lr, wd, beta1, beta2, epsilon, sched_denom, sched_next_denom, bias2,
        momentum_t, momentum_t1, rescale_grad, clip_gradient)
    one = b1.dtype.type(1)
    _launch(_NADAM, None, (weight, grad, m, v, out), (2, 3, 4),
            (lr, wd, b1, one - b1, b2, one - b2, eps, sd, snd, bias2, one - mom_t, mom_t1,
             rescale, clip))


def dcasgd_update(weight, grad, mom, previous, out, lr, wd, momentum, lamda, rescale_grad,
                  clip_gradient):
    """DCASGD; ``mom`` is None when momentum is 0 (MXNet keeps no momentum state then)."""
    neg_lr, wd, momentum, lamda, rescale, clip = cast_scalars(weight.dtype, -lr, wd, momentum,
                                                              lamda, rescale_grad, clip_gradient)
    if mom is None:
        _launch(_DCASGD_NOMOM, None, (weight, grad, previous, out), (2, 3),
                (neg_lr, wd, lamda, rescale, clip))
    else:
        _launch(_DCASGD, None, (weight, grad, mom, previous, out), (2, 3, 4),
                (neg_lr, wd, momentum, lamda, rescale, clip))


def sgld_update(weight, grad, noise, out, lr, wd, rescale_grad, clip_gradient):
    neg_half_lr, wd, rescale, clip = cast_scalars(weight.dtype, -lr / 2, wd, rescale_grad,
                                                  clip_gradient)
    _launch(_SGLD, None, (weight, grad, noise, out), (3,),
            (neg_half_lr, wd, rescale, clip))


def quantize_2bit(grad, residual, out, threshold):
    """2-bit gradient compression: ``out`` gets the dequantized values (+-threshold or 0)."""
    (threshold,) = cast_scalars(grad.dtype, threshold)
    _launch(_QUANTIZE_2BIT, None, (grad, residual, out), (1, 2),
            (threshold,))


def opt_sum_sq(x):
    """Sum of squares of all elements, accumulated in float32 for float32/float16 input."""
    flat = x.reshape(-1)
    if flat.dtype == np.float16:
        flat = flat.astype(np.float32)
    return flat.dtype.type(np.dot(flat, flat))


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
