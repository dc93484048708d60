"""CUDA optimizer updates: the launchers of ``kernels/cpu/optimizer.py`` (same names and
signatures) as grid-stride kernels calling the same per-element math
(``kernels/optimizer_math.py``). One kernel per update rule, one pass over memory.

Rows: every kernel walks ``total = len(ids) * row_len`` items; item j is element
``ids[j // row_len] * row_len + j % row_len`` (the dense update is ids = [0], row_len = n).
float16 arrays go through float32 device copies (written back when the kernel stores into
them), as on the CPU.
"""
import math

import numpy as np
from numba import cuda

from .. import optimizer_math as M
from ..cpu.optimizer import cast_scalars, lamb_trust_lr
from .memory import copy, flat, launch_config

__all__ = ["sgd_update", "sgd_mom_update", "mp_sgd_update", "mp_sgd_mom_update",
           "nag_mom_update", "mp_nag_mom_update", "adam_update", "rmsprop_update",
           "rmspropalex_update", "ftrl_update", "ftml_update", "signsgd_update",
           "signum_update", "lamb_update_phase1", "mp_lamb_update_phase1", "lamb_update_phase2",
           "mp_lamb_update_phase2", "adagrad_update", "sparse_adagrad_update", "adadelta_update",
           "adamax_update", "nadam_update", "dcasgd_update", "sgld_update", "quantize_2bit",
           "opt_l2_norm", "opt_sum_sq", "opt_nonzero_rows"]

_DENSE_IDS = {}   # device id -> device array [0] (the dense update's single "row")


# ---------------------------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------------------------
@cuda.jit
def _sgd_k(ids, row_len, total, w, g, out, lr, decay, rescale, clip_gradient):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        out[i] = M.sgd(w[i], g[i], lr, decay, rescale, clip_gradient)


@cuda.jit
def _sgd_mom_k(ids, row_len, total, w, g, m, out, lr, lr_wd, momentum, rescale, clip_gradient):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        out[i], m[i] = M.sgd_mom(w[i], g[i], m[i], lr, lr_wd, momentum, rescale, clip_gradient)


@cuda.jit
def _mp_sgd_k(ids, row_len, total, w32, g, out, lr, decay, rescale, clip_gradient):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        w32[i] = M.sgd(w32[i], g[i], lr, decay, rescale, clip_gradient)
        out[i] = w32[i]


@cuda.jit
def _mp_sgd_mom_k(ids, row_len, total, w32, g, m, out, lr, lr_wd, momentum, rescale,
                  clip_gradient):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        w32[i], m[i] = M.sgd_mom(w32[i], g[i], m[i], lr, lr_wd, momentum, rescale,
                                 clip_gradient)
        out[i] = w32[i]


@cuda.jit
def _nag_k(ids, row_len, total, w, g, m, out, lr, wd, momentum, momentum1, rescale,
           clip_gradient, in_place):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        out[i], m[i] = M.nag_mom(w[i], g[i], m[i], lr, wd, momentum, momentum1, rescale,
                                 clip_gradient, in_place)


@cuda.jit
def _mp_nag_k(ids, row_len, total, w32, g, m, out, lr, wd, momentum, momentum1, rescale,
              clip_gradient, in_place):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        w32[i], m[i] = M.nag_mom(w32[i], g[i], m[i], lr, wd, momentum, momentum1, rescale,
                                 clip_gradient, in_place)
        out[i] = w32[i]


@cuda.jit
def _adam_k(ids, row_len, total, w, g, mean, var, out, lr, wd, b1, omb1, b2, omb2, eps, rescale,
            clip_gradient):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        out[i], mean[i], var[i] = M.adam(w[i], g[i], mean[i], var[i], lr, wd, b1, omb1, b2,
                                         omb2, eps, rescale, clip_gradient)


@cuda.jit
def _rmsprop_k(ids, row_len, total, w, g, st_n, out, lr, wd, g1, omg1, eps, rescale,
               clip_gradient, clip_weights):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        out[i], st_n[i] = M.rmsprop(w[i], g[i], st_n[i], lr, wd, g1, omg1, eps, rescale,
                                    clip_gradient, clip_weights)


@cuda.jit
def _rmspropalex_k(ids, row_len, total, w, g, st_n, st_g, delta, out, lr, wd, g1, omg1, g2, eps,
                   rescale, clip_gradient, clip_weights):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        out[i], st_n[i], st_g[i], delta[i] = M.rmspropalex(
            w[i], g[i], st_n[i], st_g[i], delta[i], lr, wd, g1, omg1, g2, eps, rescale,
            clip_gradient, clip_weights)


@cuda.jit
def _ftrl_k(ids, row_len, total, w, g, z, st_n, out, lr, wd, lamda1, beta, rescale,
            clip_gradient, one):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        out[i], z[i], st_n[i] = M.ftrl(w[i], g[i], z[i], st_n[i], lr, wd, lamda1, beta, rescale,
                                       clip_gradient, one)


@cuda.jit
def _ftml_k(ids, row_len, total, w, g, d, v, z, out, lr, wd, b1, omb1, b2, omb2, eps, bias1,
            bias2, rescale, clip_gradient):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        out[i], d[i], v[i], z[i] = M.ftml(w[i], g[i], d[i], v[i], z[i], lr, wd, b1, omb1, b2,
                                          omb2, eps, bias1, bias2, rescale, clip_gradient)


@cuda.jit
def _signsgd_k(ids, row_len, total, w, g, out, lr, decay, one):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        out[i] = M.signsgd(w[i], g[i], lr, decay, one)


@cuda.jit
def _signum_k(ids, row_len, total, w, g, m, out, lr, wd, momentum, omm, decay_lh, rescale,
              clip_gradient, one):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        out[i], m[i] = M.signum(w[i], g[i], m[i], lr, wd, momentum, omm, decay_lh, rescale,
                                clip_gradient, one)


@cuda.jit
def _lamb1_k(ids, row_len, total, w, g, mean, var, out, wd, b1, omb1, b2, omb2, eps, bias1,
             bias2, rescale, clip_gradient):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        out[i], mean[i], var[i] = M.lamb_phase1(w[i], g[i], mean[i], var[i], wd, b1, omb1, b2,
                                                omb2, eps, bias1, bias2, rescale, clip_gradient)


@cuda.jit
def _lamb2_k(ids, row_len, total, w, direction, out, scaled_lr):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        out[i] = M.lamb_phase2(w[i], direction[i], scaled_lr)


@cuda.jit
def _mp_lamb2_k(ids, row_len, total, w32, direction, out, scaled_lr):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        w32[i] = M.lamb_phase2(w32[i], direction[i], scaled_lr)
        out[i] = w32[i]


@cuda.jit
def _adagrad_k(ids, row_len, total, w, g, h, out, lr, wd, eps, rescale, clip_gradient):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        out[i], h[i] = M.adagrad(w[i], g[i], h[i], lr, wd, eps, rescale, clip_gradient)


@cuda.jit
def _adagrad_rows_k(ids, row_len, total, w, g, h, out, lr, eps, rescale, clip_gradient):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        out[i], h[i] = M.adagrad_rows(w[i], g[i], h[i], lr, eps, rescale, clip_gradient)


@cuda.jit
def _adadelta_k(ids, row_len, total, w, g, acc_g, acc_d, out, wd, rho, omr, eps, rescale,
                clip_gradient):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        out[i], acc_g[i], acc_d[i], g[i] = M.adadelta(w[i], g[i], acc_g[i], acc_d[i], wd, rho,
                                                      omr, eps, rescale, clip_gradient)


@cuda.jit
def _adamax_k(ids, row_len, total, w, g, m, u, out, lr_t, wd, b1, omb1, b2, rescale,
              clip_gradient):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        out[i], m[i], u[i] = M.adamax(w[i], g[i], m[i], u[i], lr_t, wd, b1, omb1, b2, rescale,
                                      clip_gradient)


@cuda.jit
def _nadam_k(ids, row_len, total, w, g, m, v, out, lr, wd, b1, omb1, b2, omb2, eps, sd, snd,
             bias2, ommt, mt1, rescale, clip_gradient):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        out[i], m[i], v[i] = M.nadam(w[i], g[i], m[i], v[i], lr, wd, b1, omb1, b2, omb2, eps,
                                     sd, snd, bias2, ommt, mt1, rescale, clip_gradient)


@cuda.jit
def _dcasgd_k(ids, row_len, total, w, g, m, prev, out, neg_lr, wd, momentum, lamda, rescale,
              clip_gradient):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        out[i], m[i], prev[i] = M.dcasgd(w[i], g[i], m[i], prev[i], neg_lr, wd, momentum,
                                         lamda, rescale, clip_gradient)


@cuda.jit
def _dcasgd_nomom_k(ids, row_len, total, w, g, prev, out, neg_lr, wd, lamda, rescale,
                    clip_gradient):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        zero = w[i] - w[i]
        out[i], _, prev[i] = M.dcasgd(w[i], g[i], zero, prev[i], neg_lr, wd, zero, lamda,
                                      rescale, clip_gradient)


@cuda.jit
def _sgld_k(ids, row_len, total, w, g, noise, out, neg_half_lr, wd, rescale, clip_gradient):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        out[i] = M.sgld(w[i], g[i], noise[i], neg_half_lr, wd, rescale, clip_gradient)


@cuda.jit
def _quantize_2bit_k(ids, row_len, total, g, residual, out, threshold):
    for j in range(cuda.grid(1), total, cuda.gridsize(1)):
        i = ids[j // row_len] * row_len + j % row_len
        out[i], residual[i] = M.quantize_2bit(g[i], residual[i], threshold)


@cuda.jit
def _sum_sq_k(x, acc):
    """Block-wise sums of squares (float64 accumulation), added into acc[0]."""
    shared = cuda.shared.array(256, dtype=np.float64)
    tid = cuda.threadIdx.x
    s = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        v = x[i]
        s += v * v
    shared[tid] = s
    cuda.syncthreads()
    step = cuda.blockDim.x // 2
    while step > 0:
        if tid < step:
            shared[tid] += shared[tid + step]
        cuda.syncthreads()
        step //= 2
    if tid == 0:
        cuda.atomic.add(acc, 0, shared[0])


# ---------------------------------------------------------------------------------------------
# launch helpers
# ---------------------------------------------------------------------------------------------
def _dense_ids():
    device = getattr(cuda.get_current_device(), "id", 0)   # (the simulator has no id)
    ids = _DENSE_IDS.get(device)
    if ids is None:
        ids = _DENSE_IDS[device] = cuda.to_device(np.zeros(1, dtype=np.int64))
    return ids


def _stage(arrays, written):
    """Flat device views; float16 arrays get float32 device copies (written back after)."""
    flats, back = [], []
    for pos, a in enumerate(arrays):
        view = flat(a)
        if a.dtype == np.float16:
            c = cuda.device_array(a.size, dtype=np.float32)
            copy(c, view)
            flats.append(c)
            if pos in written:
                back.append((view, c))
        else:
            flats.append(view)
    return flats, back


def _launch(kernel, rows, arrays, written, scalars):
    n = arrays[0].size
    if n == 0:
        return
    flats, back = _stage(arrays, written)
    if rows is None:
        ids, row_len, total = _dense_ids(), n, n
    else:
        host_rows = np.ascontiguousarray(rows, dtype=np.int64)
        if host_rows.size == 0:
            return
        row_len = n // arrays[0].shape[0]
        ids, total = cuda.to_device(host_rows), host_rows.size * row_len
    kernel[launch_config(total)](ids, row_len, total, *flats, *scalars)
    for original, staged in back:
        copy(original, staged)


# ---------------------------------------------------------------------------------------------
# launchers (same signatures as kernels/cpu/optimizer.py)
# ---------------------------------------------------------------------------------------------
def sgd_update(weight, grad, out, lr, wd, rescale_grad, clip_gradient, rows=None):
    lr, wd, rescale, clip = cast_scalars(weight.dtype, lr, wd, rescale_grad, clip_gradient)
    _launch(_sgd_k, rows, (weight, grad, out), (2,),
            (lr, lr.dtype.type(1) - lr * wd, rescale, clip))


def sgd_mom_update(weight, grad, mom, out, lr, wd, momentum, rescale_grad, clip_gradient,
                   rows=None):
    lr, wd, momentum, rescale, clip = cast_scalars(weight.dtype, lr, wd, momentum, rescale_grad,
                                                   clip_gradient)
    _launch(_sgd_mom_k, rows, (weight, grad, mom, out), (2, 3),
            (lr, lr * wd, momentum, rescale, clip))


def mp_sgd_update(weight, grad, weight32, out, lr, wd, rescale_grad, clip_gradient):
    lr, wd, rescale, clip = cast_scalars(np.float32, lr, wd, rescale_grad, clip_gradient)
    _launch(_mp_sgd_k, None, (weight32, grad, out), (0, 2),
            (lr, np.float32(1) - lr * wd, rescale, clip))


def mp_sgd_mom_update(weight, grad, mom, weight32, out, lr, wd, momentum, rescale_grad,
                      clip_gradient):
    lr, wd, momentum, rescale, clip = cast_scalars(np.float32, lr, wd, momentum, rescale_grad,
                                                   clip_gradient)
    _launch(_mp_sgd_mom_k, None, (weight32, grad, mom, out), (0, 2, 3),
            (lr, lr * wd, momentum, rescale, clip))


def _same_buffer(a, b):
    if a is b:
        return True
    try:
        return a.device_ctypes_pointer.value == b.device_ctypes_pointer.value
    except AttributeError:   # the simulator's arrays are numpy-backed
        return np.may_share_memory(np.asarray(a), np.asarray(b))


def nag_mom_update(weight, grad, mom, out, lr, wd, momentum, rescale_grad, clip_gradient):
    lr, wd, momentum, rescale, clip = cast_scalars(weight.dtype, lr, wd, momentum, rescale_grad,
                                                   clip_gradient)
    _launch(_nag_k, None, (weight, grad, mom, out), (2, 3),
            (lr, wd, momentum, momentum + momentum.dtype.type(1), rescale, clip,
             _same_buffer(weight, out)))


def mp_nag_mom_update(weight, grad, mom, weight32, out, lr, wd, momentum, rescale_grad,
                      clip_gradient):
    lr, wd, momentum, rescale, clip = cast_scalars(np.float32, lr, wd, momentum, rescale_grad,
                                                   clip_gradient)
    _launch(_mp_nag_k, None, (weight32, grad, mom, out), (0, 2, 3),
            (lr, wd, momentum, momentum + np.float32(1), rescale, clip, True))


def adam_update(weight, grad, mean, var, out, lr, wd, beta1, beta2, epsilon, rescale_grad,
                clip_gradient, rows=None):
    lr, wd, b1, b2, eps, rescale, clip = cast_scalars(weight.dtype, lr, wd, beta1, beta2,
                                                      epsilon, rescale_grad, clip_gradient)
    one = b1.dtype.type(1)
    _launch(_adam_k, rows, (weight, grad, mean, var, out), (2, 3, 4),
            (lr, wd, b1, one - b1, b2, one - b2, eps, rescale, clip))


def rmsprop_update(weight, grad, n, out, lr, wd, gamma1, epsilon, rescale_grad, clip_gradient,
                   clip_weights):
    lr, wd, g1, eps, rescale, clip, clip_w = cast_scalars(
        weight.dtype, lr, wd, gamma1, epsilon, rescale_grad, clip_gradient, clip_weights)
    _launch(_rmsprop_k, None, (weight, grad, n, out), (2, 3),
            (lr, wd, g1, g1.dtype.type(1) - g1, eps, rescale, clip, clip_w))


def rmspropalex_update(weight, grad, n, g, delta, out, lr, wd, gamma1, gamma2, epsilon,
                       rescale_grad, clip_gradient, clip_weights):
    lr, wd, g1, g2, eps, rescale, clip, clip_w = cast_scalars(
        weight.dtype, lr, wd, gamma1, gamma2, epsilon, rescale_grad, clip_gradient, clip_weights)
    _launch(_rmspropalex_k, None, (weight, grad, n, g, delta, out), (2, 3, 4, 5),
            (lr, wd, g1, g1.dtype.type(1) - g1, g2, eps, rescale, clip, clip_w))


def ftrl_update(weight, grad, z, n, out, lr, wd, lamda1, beta, rescale_grad, clip_gradient,
                rows=None):
    lr, wd, lamda1, beta, rescale, clip = cast_scalars(weight.dtype, lr, wd, lamda1, beta,
                                                       rescale_grad, clip_gradient)
    _launch(_ftrl_k, rows, (weight, grad, z, n, out), (2, 3, 4),
            (lr, wd, lamda1, beta, rescale, clip, lr.dtype.type(1)))


def ftml_update(weight, grad, d, v, z, out, lr, wd, beta1, beta2, epsilon, t, rescale_grad,
                clip_grad):
    lr, wd, b1, b2, eps, rescale, clip = cast_scalars(weight.dtype, lr, wd, beta1, beta2,
                                                      epsilon, rescale_grad, clip_grad)
    one = b1.dtype.type(1)
    _launch(_ftml_k, None, (weight, grad, d, v, z, out), (2, 3, 4, 5),
            (lr, wd, b1, one - b1, b2, one - b2, eps, one - b1 ** int(t), one - b2 ** int(t),
             rescale, clip))


def signsgd_update(weight, grad, out, lr, wd):
    lr, wd = cast_scalars(weight.dtype, lr, wd)
    one = lr.dtype.type(1)
    _launch(_signsgd_k, None, (weight, grad, out), (2,), (lr, one - lr * wd, one))


def signum_update(weight, grad, mom, out, lr, wd, momentum, wd_lh, rescale_grad, clip_gradient):
    lr, wd, momentum, wd_lh, rescale, clip = cast_scalars(weight.dtype, lr, wd, momentum, wd_lh,
                                                          rescale_grad, clip_gradient)
    one = lr.dtype.type(1)
    _launch(_signum_k, None, (weight, grad, mom, out), (2, 3),
            (lr, wd, momentum, one - momentum, one - lr * wd_lh, rescale, clip, one))


def lamb_update_phase1(weight, grad, mean, var, out, beta1, beta2, epsilon, t, bias_correction,
                       wd, rescale_grad, clip_gradient):
    b1, b2, eps, wd, rescale, clip = cast_scalars(weight.dtype, beta1, beta2, epsilon, wd,
                                                  rescale_grad, clip_gradient)
    one = b1.dtype.type(1)
    bias1, bias2 = (one - b1 ** int(t), one - b2 ** int(t)) if bias_correction else (one, one)
    _launch(_lamb1_k, None, (weight, grad, mean, var, out), (2, 3, 4),
            (wd, b1, one - b1, b2, one - b2, eps, bias1, bias2, rescale, clip))


def mp_lamb_update_phase1(weight, grad, mean, var, weight32, out, beta1, beta2, epsilon, t,
                          bias_correction, wd, rescale_grad, clip_gradient):
    lamb_update_phase1(weight32, grad, mean, var, out, beta1, beta2, epsilon, t,
                       bias_correction, wd, rescale_grad, clip_gradient)


def lamb_update_phase2(weight, g, r1, r2, out, lr, lower_bound=-1.0, upper_bound=-1.0):
    (scaled,) = cast_scalars(weight.dtype, lamb_trust_lr(lr, r1, r2, lower_bound, upper_bound))
    _launch(_lamb2_k, None, (weight, g, out), (2,), (scaled,))


def mp_lamb_update_phase2(weight, g, r1, r2, weight32, out, lr, lower_bound=-1.0,
                          upper_bound=-1.0):
    scaled = lamb_trust_lr(lr, r1, r2, lower_bound, upper_bound)
    _launch(_mp_lamb2_k, None, (weight32, g, out), (0, 2), (scaled,))


def adagrad_update(weight, grad, history, out, lr, wd, epsilon, rescale_grad, clip_gradient):
    lr, wd, eps, rescale, clip = cast_scalars(weight.dtype, lr, wd, epsilon, rescale_grad,
                                              clip_gradient)
    _launch(_adagrad_k, None, (weight, grad, history, out), (2, 3), (lr, wd, eps, rescale, clip))


def sparse_adagrad_update(weight, grad, history, out, lr, epsilon, rescale_grad, clip_gradient,
                          rows):
    lr, eps, rescale, clip = cast_scalars(weight.dtype, lr, epsilon, rescale_grad, clip_gradient)
    _launch(_adagrad_rows_k, rows, (weight, grad, history, out), (2, 3), (lr, eps, rescale, clip))


def adadelta_update(weight, grad, acc_g, acc_delta, out, wd, rho, epsilon, rescale_grad,
                    clip_gradient):
    wd, rho, eps, rescale, clip = cast_scalars(weight.dtype, wd, rho, epsilon, rescale_grad,
                                               clip_gradient)
    _launch(_adadelta_k, None, (weight, grad, acc_g, acc_delta, out), (1, 2, 3, 4),
            (wd, rho, rho.dtype.type(1) - rho, eps, rescale, clip))


def adamax_update(weight, grad, m, u, out, lr_t, wd, beta1, beta2, rescale_grad, clip_gradient):
    lr_t, wd, b1, b2, rescale, clip = cast_scalars(weight.dtype, lr_t, wd, beta1, beta2,
                                                   rescale_grad, clip_gradient)
    _launch(_adamax_k, None, (weight, grad, m, u, out), (2, 3, 4),
            (lr_t, wd, b1, b1.dtype.type(1) - b1, b2, rescale, clip))


def nadam_update(weight, grad, m, v, out, lr, wd, beta1, beta2, epsilon, sched_denom,
                 sched_next_denom, bias2, momentum_t, momentum_t1, rescale_grad, clip_gradient):
    (lr, wd, b1, b2, eps, sd, snd, bias2, mom_t, mom_t1, rescale, clip) = cast_scalars(
        weight.dtype, lr, wd, beta1, beta2, epsilon, sched_denom, sched_next_denom, bias2,
        momentum_t, momentum_t1, rescale_grad, clip_gradient)
    one = b1.dtype.type(1)
    _launch(_nadam_k, None, (weight, grad, m, v, out), (2, 3, 4),
            (lr, wd, b1, one - b1, b2, one - b2, eps, sd, snd, bias2, one - mom_t, mom_t1,
             rescale, clip))


def dcasgd_update(weight, grad, mom, previous, out, lr, wd, momentum, lamda, rescale_grad,
                  clip_gradient):
    neg_lr, wd, momentum, lamda, rescale, clip = cast_scalars(weight.dtype, -lr, wd, momentum,
                                                              lamda, rescale_grad, clip_gradient)
    if mom is None:
        _launch(_dcasgd_nomom_k, None, (weight, grad, previous, out), (2, 3),
                (neg_lr, wd, lamda, rescale, clip))
    else:
        _launch(_dcasgd_k, None, (weight, grad, mom, previous, out), (2, 3, 4),
                (neg_lr, wd, momentum, lamda, rescale, clip))


def sgld_update(weight, grad, noise, out, lr, wd, rescale_grad, clip_gradient):
    neg_half_lr, wd, rescale, clip = cast_scalars(weight.dtype, -lr / 2, wd, rescale_grad,
                                                  clip_gradient)
    _launch(_sgld_k, None, (weight, grad, noise, out), (3,), (neg_half_lr, wd, rescale, clip))


def quantize_2bit(grad, residual, out, threshold):
    (threshold,) = cast_scalars(grad.dtype, threshold)
    _launch(_quantize_2bit_k, None, (grad, residual, out), (1, 2), (threshold,))


def opt_sum_sq(x):
    """Sum of squares of a device array, as a numpy scalar of the compute dtype."""
    acc = cuda.to_device(np.zeros(1, dtype=np.float64))
    view = flat(x)
    if view.size:
        blocks, _ = launch_config(view.size)
        _sum_sq_k[min(blocks, 256), 256](view, acc)
    dtype = np.float64 if x.dtype == np.float64 else np.float32
    return dtype(acc.copy_to_host()[0])


def opt_l2_norm(x):
    s = opt_sum_sq(x)
    return s.dtype.type(math.sqrt(s))


def opt_nonzero_rows(grad):
    """Rows (axis 0) of a device array holding a non-zero (found on the host)."""
    from ..cpu.optimizer import opt_nonzero_rows as host_rows
    return host_rows(grad.copy_to_host())
