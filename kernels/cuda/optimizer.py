"""CUDA optimizer updates: grid-stride kernels calling the per-element math the CPU loops call
(``kernels/optimizer_math.py``), run by the launchers both halves share
(``kernels/optimizer_launchers.py``). One kernel per update rule, one pass over memory.

Rows: every kernel walks ``total = len(ids) * row_len`` items; item j is element
``ids[j // row_len] * row_len + j % row_len`` (the dense update is ids = [0], row_len = n).
float16 arrays go through float32 device copies (written back when the kernel stores into
them), as on the CPU.
"""
import math

import numpy as np
from numba import cuda

from .. import optimizer_math as M
from ..optimizer_launchers import LAUNCHER_NAMES, OptimizerLaunchers
from .memory import copy, flat, launch_config

__all__ = [*LAUNCHER_NAMES, "opt_l2_norm", "opt_sum_sq", "opt_nonzero_rows"]

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


def _same_buffer(a, b):
    if a is b:
        return True
    try:
        return a.device_ctypes_pointer.value == b.device_ctypes_pointer.value
    except AttributeError:   # the simulator's arrays are numpy-backed
        return np.may_share_memory(np.asarray(a), np.asarray(b))


# ---------------------------------------------------------------------------------------------
# Launchers (the kernel-set API, written once for both halves in kernels/optimizer_launchers.py)
# with each rule's kernel
# ---------------------------------------------------------------------------------------------
_LAUNCHERS = OptimizerLaunchers(_launch, _same_buffer, dict(
    sgd=_sgd_k, sgd_mom=_sgd_mom_k, mp_sgd=_mp_sgd_k, mp_sgd_mom=_mp_sgd_mom_k, nag=_nag_k,
    mp_nag=_mp_nag_k, adam=_adam_k, rmsprop=_rmsprop_k, rmspropalex=_rmspropalex_k,
    ftrl=_ftrl_k, ftml=_ftml_k, signsgd=_signsgd_k, signum=_signum_k, lamb1=_lamb1_k,
    lamb2=_lamb2_k, mp_lamb2=_mp_lamb2_k, adagrad=_adagrad_k, adagrad_rows=_adagrad_rows_k,
    adadelta=_adadelta_k, adamax=_adamax_k, nadam=_nadam_k, dcasgd_nomom=_dcasgd_nomom_k,
    dcasgd=_dcasgd_k, sgld=_sgld_k, quantize_2bit=_quantize_2bit_k))


def __getattr__(name):
    # the launchers (sgd_update, adam_update ...) are the methods of _LAUNCHERS
    if name in LAUNCHER_NAMES:
        return getattr(_LAUNCHERS, name)
    raise AttributeError("module '%s' has no attribute '%s'" % (__name__, name))


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
