"""The optimizer launchers of both kernel halves, written once (no numba here).

A launcher casts the hyper-parameters the way MXNet casts its float32 operator parameters,
derives the constants the rule's per-element math (``optimizer_math.py``) takes (``1 - beta1``,
the bias corrections ...), and hands weight, gradient, states and output to its half's
``launch(kernel, rows, arrays, written, scalars)``:

* ``kernel``: what the half runs for the rule (the CPU's (serial, prange, rows) loops, the CUDA
  grid-stride kernel), looked up by rule name in the table the half gives;
* ``rows``: None for the dense update, or the int64 row indices of a lazy row_sparse update;
* ``arrays[0]`` is the array that fixes the size and the row length; ``written`` are the
  positions the kernel stores into (float16 arrays are staged through float32 copies, and
  these are written back).

Each half builds one :class:`OptimizerLaunchers` and exports its bound methods under their
names (``LAUNCHER_NAMES``: ``sgd_update`` ...): that is the kernel-set API the optimizers and
the update operators call.
"""
import numpy as np

from ..base import MXNetError

__all__ = ["OptimizerLaunchers", "LAUNCHER_NAMES", "compute_dtype", "cast_scalars", "lamb_trust_lr"]


def compute_dtype(dtype):
    """float64 computes in float64; everything else (float32, float16) in float32."""
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


def cast_scalars(dtype, *values):
    """MXNet's operator parameters are float32; they reach the kernel cast to its dtype."""
    t = compute_dtype(dtype)
    return tuple(t(np.float32(v)) for v in values)


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


def _bounds_checked(launch):
    """``launch`` behind a check, once per call, that keeps every kernel inside its arrays: the
    kernels index all arrays with the positions of ``arrays[0]`` (or of its rows), so every array
    must have its element count and every row index must be one of its rows."""
    def checked(kernel, rows, arrays, written, scalars):
        size = arrays[0].size
        for array in arrays[1:]:
            if array.size != size:
                raise MXNetError("optimizer update: the arrays have shapes %s; the weight, "
                                 "gradient, states and output must all have the weight's %d "
                                 "elements"
                                 % (", ".join(str(tuple(a.shape)) for a in arrays), size))
        if rows is not None and len(rows):
            nrows = arrays[0].shape[0] if arrays[0].ndim else 1
            if int(np.min(rows)) < 0 or int(np.max(rows)) >= nrows:
                raise MXNetError("optimizer update: row indices must lie in [0, %d), got %d..%d"
                                 % (nrows, int(np.min(rows)), int(np.max(rows))))
        launch(kernel, rows, arrays, written, scalars)
    return checked


class OptimizerLaunchers:
    """The update functions of one kernel half.

    ``launch``: the half's launcher (see the module docstring); ``same_buffer(a, b)``: whether
    two of its arrays share memory (NAG reads the weight after writing ``out``); ``kernels``:
    rule name -> what ``launch`` runs for it.
    """

    def __init__(self, launch, same_buffer, kernels):
        self._launch = _bounds_checked(launch)
        self._same_buffer = same_buffer
        self._kernels = kernels

    def sgd_update(self, weight, grad, out, lr, wd, rescale_grad, clip_gradient, rows=None):
        lr, wd, rescale, clip = cast_scalars(weight.dtype, lr, wd, rescale_grad, clip_gradient)
        decay = lr.dtype.type(1) - lr * wd
        self._launch(self._kernels["sgd"], rows, (weight, grad, out), (2,),
                     (lr, decay, rescale, clip))

    def sgd_mom_update(self, weight, grad, mom, out, lr, wd, momentum, rescale_grad,
                       clip_gradient, rows=None):
        lr, wd, momentum, rescale, clip = cast_scalars(weight.dtype, lr, wd, momentum,
                                                       rescale_grad, clip_gradient)
        self._launch(self._kernels["sgd_mom"], rows, (weight, grad, mom, out), (2, 3),
                     (lr, lr * wd, momentum, rescale, clip))

    def mp_sgd_update(self, weight, grad, weight32, out, lr, wd, rescale_grad, clip_gradient):
        lr, wd, rescale, clip = cast_scalars(np.float32, lr, wd, rescale_grad, clip_gradient)
        decay = np.float32(1) - lr * wd
        self._launch(self._kernels["mp_sgd"], None, (weight32, grad, out), (0, 2),
                     (lr, decay, rescale, clip))

    def mp_sgd_mom_update(self, weight, grad, mom, weight32, out, lr, wd, momentum,
                          rescale_grad, clip_gradient):
        lr, wd, momentum, rescale, clip = cast_scalars(np.float32, lr, wd, momentum,
                                                       rescale_grad, clip_gradient)
        self._launch(self._kernels["mp_sgd_mom"], None, (weight32, grad, mom, out), (0, 2, 3),
                     (lr, lr * wd, momentum, rescale, clip))

    def nag_mom_update(self, weight, grad, mom, out, lr, wd, momentum, rescale_grad,
                       clip_gradient):
        lr, wd, momentum, rescale, clip = cast_scalars(weight.dtype, lr, wd, momentum,
                                                       rescale_grad, clip_gradient)
        in_place = self._same_buffer(weight, out)
        self._launch(self._kernels["nag"], None, (weight, grad, mom, out), (2, 3),
                     (lr, wd, momentum, momentum + momentum.dtype.type(1), rescale, clip,
                      in_place))

    def mp_nag_mom_update(self, weight, grad, mom, weight32, out, lr, wd, momentum,
                          rescale_grad, clip_gradient):
        lr, wd, momentum, rescale, clip = cast_scalars(np.float32, lr, wd, momentum,
                                                       rescale_grad, clip_gradient)
        # MXNet's mixed-precision kernel keeps the new master weight in the variable the decay
        # term reads, so it always sees the new weight
        self._launch(self._kernels["mp_nag"], None, (weight32, grad, mom, out), (0, 2, 3),
                     (lr, wd, momentum, momentum + np.float32(1), rescale, clip, True))

    def adam_update(self, weight, grad, mean, var, out, lr, wd, beta1, beta2, epsilon,
                    rescale_grad, clip_gradient, rows=None):
        lr, wd, b1, b2, eps, rescale, clip = cast_scalars(weight.dtype, lr, wd, beta1, beta2,
                                                          epsilon, rescale_grad, clip_gradient)
        one = b1.dtype.type(1)
        self._launch(self._kernels["adam"], rows, (weight, grad, mean, var, out), (2, 3, 4),
                     (lr, wd, b1, one - b1, b2, one - b2, eps, rescale, clip))

    def rmsprop_update(self, weight, grad, n, out, lr, wd, gamma1, epsilon, rescale_grad,
                       clip_gradient, clip_weights):
        lr, wd, g1, eps, rescale, clip, clip_w = cast_scalars(
            weight.dtype, lr, wd, gamma1, epsilon, rescale_grad, clip_gradient, clip_weights)
        self._launch(self._kernels["rmsprop"], None, (weight, grad, n, out), (2, 3),
                     (lr, wd, g1, g1.dtype.type(1) - g1, eps, rescale, clip, clip_w))

    def rmspropalex_update(self, weight, grad, n, g, delta, out, lr, wd, gamma1, gamma2,
                           epsilon, rescale_grad, clip_gradient, clip_weights):
        lr, wd, g1, g2, eps, rescale, clip, clip_w = cast_scalars(
            weight.dtype, lr, wd, gamma1, gamma2, epsilon, rescale_grad, clip_gradient,
            clip_weights)
        self._launch(self._kernels["rmspropalex"], None, (weight, grad, n, g, delta, out),
                     (2, 3, 4, 5),
                     (lr, wd, g1, g1.dtype.type(1) - g1, g2, eps, rescale, clip, clip_w))

    def ftrl_update(self, weight, grad, z, n, out, lr, wd, lamda1, beta, rescale_grad,
                    clip_gradient, rows=None):
        lr, wd, lamda1, beta, rescale, clip = cast_scalars(weight.dtype, lr, wd, lamda1, beta,
                                                           rescale_grad, clip_gradient)
        self._launch(self._kernels["ftrl"], rows, (weight, grad, z, n, out), (2, 3, 4),
                     (lr, wd, lamda1, beta, rescale, clip, lr.dtype.type(1)))

    def ftml_update(self, weight, grad, d, v, z, out, lr, wd, beta1, beta2, epsilon, t,
                    rescale_grad, clip_grad):
        lr, wd, b1, b2, eps, rescale, clip = cast_scalars(weight.dtype, lr, wd, beta1, beta2,
                                                          epsilon, rescale_grad, clip_grad)
        one = b1.dtype.type(1)
        bias1, bias2 = one - b1 ** int(t), one - b2 ** int(t)
        self._launch(self._kernels["ftml"], None, (weight, grad, d, v, z, out), (2, 3, 4, 5),
                     (lr, wd, b1, one - b1, b2, one - b2, eps, bias1, bias2, rescale, clip))

    def signsgd_update(self, weight, grad, out, lr, wd):
        lr, wd = cast_scalars(weight.dtype, lr, wd)
        one = lr.dtype.type(1)
        self._launch(self._kernels["signsgd"], None, (weight, grad, out), (2,),
                     (lr, one - lr * wd, one))

    def signum_update(self, weight, grad, mom, out, lr, wd, momentum, wd_lh, rescale_grad,
                      clip_gradient):
        lr, wd, momentum, wd_lh, rescale, clip = cast_scalars(
            weight.dtype, lr, wd, momentum, wd_lh, rescale_grad, clip_gradient)
        one = lr.dtype.type(1)
        self._launch(self._kernels["signum"], None, (weight, grad, mom, out), (2, 3),
                     (lr, wd, momentum, one - momentum, one - lr * wd_lh, rescale, clip, one))

    def lamb_update_phase1(self, weight, grad, mean, var, out, beta1, beta2, epsilon, t,
                           bias_correction, wd, rescale_grad, clip_gradient):
        """Writes LAMB's update direction into ``out`` (MXNet's phase-1 output ``g``)."""
        b1, b2, eps, wd, rescale, clip = cast_scalars(weight.dtype, beta1, beta2, epsilon, wd,
                                                      rescale_grad, clip_gradient)
        one = b1.dtype.type(1)
        if bias_correction:
            bias1, bias2 = one - b1 ** int(t), one - b2 ** int(t)
        else:
            bias1 = bias2 = one
        self._launch(self._kernels["lamb1"], None, (weight, grad, mean, var, out), (2, 3, 4),
                     (wd, b1, one - b1, b2, one - b2, eps, bias1, bias2, rescale, clip))

    def mp_lamb_update_phase1(self, weight, grad, mean, var, weight32, out, beta1, beta2,
                              epsilon, t, bias_correction, wd, rescale_grad, clip_gradient):
        """Phase 1 on the float32 master copy (the float16 gradient is read as float32)."""
        self.lamb_update_phase1(weight32, grad, mean, var, out, beta1, beta2, epsilon, t,
                                bias_correction, wd, rescale_grad, clip_gradient)

    def lamb_update_phase2(self, weight, g, r1, r2, out, lr, lower_bound=-1.0,
                           upper_bound=-1.0):
        (scaled,) = cast_scalars(weight.dtype,
                                 lamb_trust_lr(lr, r1, r2, lower_bound, upper_bound))
        self._launch(self._kernels["lamb2"], None, (weight, g, out), (2,), (scaled,))

    def mp_lamb_update_phase2(self, weight, g, r1, r2, weight32, out, lr, lower_bound=-1.0,
                              upper_bound=-1.0):
        scaled = lamb_trust_lr(lr, r1, r2, lower_bound, upper_bound)
        self._launch(self._kernels["mp_lamb2"], None, (weight32, g, out), (0, 2), (scaled,))

    def adagrad_update(self, weight, grad, history, out, lr, wd, epsilon, rescale_grad,
                       clip_gradient):
        lr, wd, eps, rescale, clip = cast_scalars(weight.dtype, lr, wd, epsilon, rescale_grad,
                                                  clip_gradient)
        self._launch(self._kernels["adagrad"], None, (weight, grad, history, out), (2, 3),
                     (lr, wd, eps, rescale, clip))

    def sparse_adagrad_update(self, weight, grad, history, out, lr, epsilon, rescale_grad,
                              clip_gradient, rows):
        lr, eps, rescale, clip = cast_scalars(weight.dtype, lr, epsilon, rescale_grad,
                                              clip_gradient)
        self._launch(self._kernels["adagrad_rows"], rows, (weight, grad, history, out), (2, 3),
                     (lr, eps, rescale, clip))

    def adadelta_update(self, weight, grad, acc_g, acc_delta, out, wd, rho, epsilon,
                        rescale_grad, clip_gradient):
        """AdaDelta; like MXNet it leaves the rescaled gradient in ``grad``."""
        wd, rho, eps, rescale, clip = cast_scalars(weight.dtype, wd, rho, epsilon, rescale_grad,
                                                   clip_gradient)
        self._launch(self._kernels["adadelta"], None, (weight, grad, acc_g, acc_delta, out),
                     (1, 2, 3, 4), (wd, rho, rho.dtype.type(1) - rho, eps, rescale, clip))

    def adamax_update(self, weight, grad, m, u, out, lr_t, wd, beta1, beta2, rescale_grad,
                      clip_gradient):
        lr_t, wd, b1, b2, rescale, clip = cast_scalars(weight.dtype, lr_t, wd, beta1, beta2,
                                                       rescale_grad, clip_gradient)
        self._launch(self._kernels["adamax"], None, (weight, grad, m, u, out), (2, 3, 4),
                     (lr_t, wd, b1, b1.dtype.type(1) - b1, b2, rescale, clip))

    def nadam_update(self, weight, grad, m, v, out, lr, wd, beta1, beta2, epsilon, sched_denom,
                     sched_next_denom, bias2, momentum_t, momentum_t1, rescale_grad,
                     clip_gradient):
        (lr, wd, b1, b2, eps, sd, snd, bias2, mom_t, mom_t1, rescale, clip) = cast_scalars(
            weight.dtype, lr, wd, beta1, beta2, epsilon, sched_denom, sched_next_denom, bias2,
            momentum_t, momentum_t1, rescale_grad, clip_gradient)
        one = b1.dtype.type(1)
        self._launch(self._kernels["nadam"], None, (weight, grad, m, v, out), (2, 3, 4),
                     (lr, wd, b1, one - b1, b2, one - b2, eps, sd, snd, bias2, one - mom_t,
                      mom_t1, rescale, clip))

    def dcasgd_update(self, weight, grad, mom, previous, out, lr, wd, momentum, lamda,
                      rescale_grad, clip_gradient):
        """DCASGD; ``mom`` is None when momentum is 0 (MXNet keeps no momentum state then)."""
        neg_lr, wd, momentum, lamda, rescale, clip = cast_scalars(
            weight.dtype, -lr, wd, momentum, lamda, rescale_grad, clip_gradient)
        if mom is None:
            self._launch(self._kernels["dcasgd_nomom"], None, (weight, grad, previous, out),
                         (2, 3), (neg_lr, wd, lamda, rescale, clip))
        else:
            self._launch(self._kernels["dcasgd"], None, (weight, grad, mom, previous, out),
                         (2, 3, 4), (neg_lr, wd, momentum, lamda, rescale, clip))

    def sgld_update(self, weight, grad, noise, out, lr, wd, rescale_grad, clip_gradient):
        neg_half_lr, wd, rescale, clip = cast_scalars(weight.dtype, -lr / 2, wd, rescale_grad,
                                                      clip_gradient)
        self._launch(self._kernels["sgld"], None, (weight, grad, noise, out), (3,),
                     (neg_half_lr, wd, rescale, clip))

    def quantize_2bit(self, grad, residual, out, threshold):
        """2-bit gradient compression: ``out`` gets the dequantized values (+-threshold or 0)."""
        (threshold,) = cast_scalars(grad.dtype, threshold)
        self._launch(self._kernels["quantize_2bit"], None, (grad, residual, out), (1, 2),
                     (threshold,))


# the kernel-set API both halves export
LAUNCHER_NAMES = tuple(name for name in vars(OptimizerLaunchers) if not name.startswith("_"))
