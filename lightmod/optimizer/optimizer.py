"""Optimizers, the registry and the Updater, with MXNet 1.9.1's semantics.

The base class keeps MXNet's attributes under MXNet's names (``lr``, ``wd``, ``rescale_grad``,
``lr_mult``, ``wd_mult``, ``idx2name``, ``num_update``, ``_index_update_count`` ...): user
subclasses and reference implementations read them, and an optimizer pickled into a ``.states``
file must load on either side.

Every ``update`` runs one fused kernel of the weight's device (``lightmod.kernels.cpu`` or
``.cuda``) directly on the backend arrays: rescale, clip, weight decay, state and weight updates
in one pass. The ``nd.*_update`` operators run the same kernels. Optimizers that MXNet writes as
a chain of NDArray expressions (AdaGrad, AdaDelta, Adamax, Nadam, DCASGD, SGLD) get a fused
kernel with the same arithmetic.

Row-sparse gradients are stored densely; an all-zero row is a row the gradient does not hold.
``lazy_update`` (SGD, Adam; always for row_sparse AdaGrad, and for Ftrl on a row_sparse weight)
updates only the rows the gradient holds, as MXNet's sparse kernels do.
"""
import logging
import math
import os
import warnings

import numpy

from ..base import MXNetError
from ..ndarray import NDArray, zeros
from ..ndarray import ndarray as _nd_core
from .checks import check_hyper_parameters

__all__ = ["AdaDelta", "AdaGrad", "Adam", "Adamax", "DCASGD", "FTML", "Ftrl", "LARS", "LBSGD",
           "NAG", "Nadam", "Optimizer", "RMSProp", "SGD", "SGLD", "Signum", "LAMB", "Test",
           "ccSGD", "create", "register"]


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _kernels(arr):
    """The kernel set of an NDArray's device (imported at call time: importing lightmod stays
    free of numba)."""
    from .. import kernels
    return kernels.for_context(arr.context)


def _check_arrays(weight, grad):
    """MXNet asserts both are NDArrays; say which one is not."""
    for name, x in (("weight", weight), ("grad", grad)):
        if not isinstance(x, NDArray):
            raise AssertionError("Optimizer.update: %s must be an NDArray, got %s"
                                 % (name, type(x).__name__))


def _op_clip(clip_gradient):
    """Clip bound for the update operators: MXNet passes clip_gradient only when truthy,
    otherwise the operator's -1 (off) applies."""
    return float(clip_gradient) if clip_gradient else -1.0


def _py_clip(clip_gradient):
    """Clip bound for the optimizers MXNet writes in Python: they clip whenever
    clip_gradient is not None (0 included)."""
    return float(clip_gradient) if clip_gradient is not None else -1.0


def _rows(k, grad, lazy):
    """Rows to update: those a row_sparse gradient holds when the lazy update applies."""
    if lazy and grad.stype == "row_sparse":
        return k.opt_nonzero_rows(grad._data)
    return None


def _as_list(index, weight, grad, state):
    if isinstance(index, (tuple, list)):
        return list(index), list(weight), list(grad), list(state)
    return [index], [weight], [grad], [state]


_FLOAT16_WARNING = ("Accumulating with float16 in optimizer can lead to poor accuracy or slow "
                    "convergence. Consider using multi_precision=True option of the %s")


def _state_and_master_copy(optimizer, index, weight, name):
    """``create_state_multi_precision`` of SGD, NAG and LARS: ``(state, float32 master copy)``
    for a float16 weight with ``multi_precision`` (the base class puts the master first);
    ``name`` ends the float16 warning ("SGD optimizer")."""
    if optimizer.multi_precision and weight.dtype == numpy.float16:
        master = weight.astype(numpy.float32)
        return (optimizer.create_state(index, master), master)
    if weight.dtype == numpy.float16 and not optimizer.multi_precision:
        warnings.warn(_FLOAT16_WARNING % name, stacklevel=2)
    return optimizer.create_state(index, weight)


# ---------------------------------------------------------------------------------------------
# the base class
# ---------------------------------------------------------------------------------------------
class Optimizer:
    """The base class of all optimizers (MXNet 1.9.1's ``mx.optimizer.Optimizer``).

    Parameters
    ----------
    rescale_grad : float
        Gradients are multiplied by this before use (usually ``1/batch_size``).
    param_idx2name : dict of int to str
        Names of the parameter indices; names not ending in ``_weight``/``_gamma`` get no
        weight decay.
    wd : float
        Weight decay (L2 penalty) coefficient.
    clip_gradient : float or None
        Clip gradients to ``[-clip_gradient, clip_gradient]``.
    learning_rate : float or None
        Initial learning rate; 0.01 when neither it nor ``lr_scheduler`` is given; overrides
        the scheduler's ``base_lr`` when both are.
    lr_scheduler : LRScheduler or None
    sym : Symbol or None
        Its ``__lr_mult__``/``__wd_mult__`` attributes set per-parameter multipliers.
    begin_num_update : int
        Starting value of the update counters.
    multi_precision : bool
        Keep a float32 master copy of float16 weights and update that.
    param_dict : dict of index to gluon-style parameter (with ``lr_mult``/``wd_mult``)
    """

    opt_registry = {}

    def __init__(self, rescale_grad=1., param_idx2name=None, wd=0., clip_gradient=None,
                 learning_rate=None, lr_scheduler=None, sym=None, begin_num_update=0,
                 multi_precision=False, param_dict=None):
        if param_idx2name is None:
            param_idx2name = {}
        if not isinstance(param_idx2name, dict):
            raise AssertionError("param_idx2name should be a dict of param indexes to names, "
                                 "got %s" % type(param_idx2name).__name__)
        # The attributes are created in MXNet's order: a .states file written with
        # dump_optimizer=True pickles __dict__ in that order, byte for byte.
        self.rescale_grad, self.lr_scheduler = rescale_grad, lr_scheduler
        self.lr = _starting_lr(learning_rate, lr_scheduler)
        self.wd, self.lr_mult, self.wd_mult = wd, {}, {}
        self.begin_num_update = self.num_update = begin_num_update
        # update counts per index, one table per device (see _set_current_context)
        self._all_index_update_counts = {0: {}}
        self._index_update_count = self._all_index_update_counts[0]
        self.clip_gradient, self.multi_precision = clip_gradient, multi_precision
        self.aggregate_num = 0  # how many weights one fused update may take; 0: no fusing
        self.idx2name = param_idx2name.copy()
        self.sym_info = (sym.attr_dict(), sym.list_arguments()) if sym is not None else ()
        self.param_dict = param_dict or {}
        self.allow_np_array = False
        self.set_lr_mult({})
        self.set_wd_mult({})
        check_hyper_parameters(self, ("lr", "wd", "rescale_grad", "clip_gradient"))

    # --- registry -------------------------------------------------------------------------------
    @staticmethod
    def register(klass):
        """Register an optimizer class under its lower-cased name (a decorator)."""
        if not isinstance(klass, type):
            raise AssertionError("Optimizer.register expects a class, got %r" % (klass,))
        name = klass.__name__.lower()
        if name in Optimizer.opt_registry:
            warnings.warn("WARNING: New optimizer %s.%s is overriding existing optimizer %s.%s"
                          % (klass.__module__, klass.__name__,
                             Optimizer.opt_registry[name].__module__,
                             Optimizer.opt_registry[name].__name__), stacklevel=2)
        Optimizer.opt_registry[name] = klass
        return klass

    @staticmethod
    def create_optimizer(name, **kwargs):
        """An instance of the optimizer registered as ``name`` (case-insensitive)."""
        if name.lower() in Optimizer.opt_registry:
            return Optimizer.opt_registry[name.lower()](**kwargs)
        raise ValueError("Cannot find optimizer %s" % name)

    # --- learning rate --------------------------------------------------------------------------
    @property
    def learning_rate(self):
        if self.lr_scheduler is not None:
            return self.lr_scheduler(self.num_update)
        return self.lr

    def set_learning_rate(self, lr):
        """Set ``lr``; MXNet raises UserWarning when a scheduler owns the learning rate."""
        if self.lr_scheduler is not None:
            raise UserWarning("LRScheduler of the optimizer has already been defined. Note that "
                              "set_learning_rate can mutate the value of the learning rate of "
                              "the optimizer only when the LRScheduler of the optimizer is "
                              "undefined.")
        self.lr = lr

    def set_lr_scale(self, args_lrscale):
        """Deprecated in MXNet: use set_lr_mult."""
        raise DeprecationWarning("set_lr_scale is deprecated, use set_lr_mult")

    def _symbol_mults(self, attr_key):
        """``{argument name: multiplier}`` read from the symbol's ``attr_key`` attributes."""
        if not self.sym_info:
            return {}
        attrs, arg_names = self.sym_info
        return {name: float(attrs[name][attr_key]) for name in arg_names
                if attr_key in attrs.get(name, ())}

    def set_lr_mult(self, args_lr_mult):
        """Per-parameter learning-rate multipliers: the symbol's ``__lr_mult__`` attributes,
        overridden by ``args_lr_mult`` (keys: names or indices)."""
        self.lr_mult = self._symbol_mults("__lr_mult__")
        self.lr_mult.update(args_lr_mult)

    @staticmethod
    def _decayed_by_default(name):
        """Whether a parameter gets weight decay unless told otherwise."""
        return name.endswith("_weight") or name.endswith("_gamma")

    def set_wd_mult(self, args_wd_mult):
        """Per-parameter weight-decay multipliers: 0 for each ``idx2name`` name that
        ``_decayed_by_default`` exempts, then the symbol's ``__wd_mult__``, then
        ``args_wd_mult``, each overriding the one before."""
        self.wd_mult = {name: 0.0 for name in self.idx2name.values()
                        if not self._decayed_by_default(name)}
        self.wd_mult.update(self._symbol_mults("__wd_mult__"))
        self.wd_mult.update(args_wd_mult)

    # --- counters -------------------------------------------------------------------------------
    def _set_current_context(self, device_id):
        """Select the per-device update counters (the Updater calls this)."""
        if device_id not in self._all_index_update_counts:
            self._all_index_update_counts[device_id] = {}
        self._index_update_count = self._all_index_update_counts[device_id]

    def _update_count(self, index):
        """Count one more update of ``index`` (or each index of a list)."""
        if not isinstance(index, (list, tuple)):
            index = [index]
        for idx in index:
            if idx not in self._index_update_count:
                self._index_update_count[idx] = self.begin_num_update
            self._index_update_count[idx] += 1
            self.num_update = max(self._index_update_count[idx], self.num_update)

    def _start_update(self, index, weight, grad):
        """Check the arrays, count the update of ``index``, and return its ``(lr, wd)``
        (the rate after counting, so a scheduler sees this update)."""
        _check_arrays(weight, grad)
        self._update_count(index)
        return self._get_lr(index), self._get_wd(index)

    def _scheduled_lr(self):
        if self.lr_scheduler is not None:
            return self.lr_scheduler(self.num_update)
        return self.lr

    def _get_lrs(self, indices):
        """Learning rates of ``indices``: the current rate times each one's multiplier
        (``param_dict``, then the index itself, then its name)."""
        lr = self._scheduled_lr()
        return [lr * self._multiplier(index, self.lr_mult, "lr_mult") for index in indices]

    def _get_lr(self, index):
        return self._get_lrs([index])[0]

    def _get_wds(self, indices):
        """Weight decays of ``indices`` (``wd`` times each one's multiplier)."""
        return [self.wd * self._multiplier(index, self.wd_mult, "wd_mult") for index in indices]

    def _get_wd(self, index):
        return self._get_wds([index])[0]

    def _multiplier(self, index, table, attr):
        if index in self.param_dict:
            return getattr(self.param_dict[index], attr)
        if index in table:
            return table[index]
        if index in self.idx2name:
            return table.get(self.idx2name[index], 1.0)
        return 1.0

    # --- states ---------------------------------------------------------------------------------
    def create_state(self, index, weight):
        """The auxiliary state of one weight (None for optimizers without one)."""
        return None

    def create_state_multi_precision(self, index, weight):
        """Like create_state, plus a float32 master copy when ``multi_precision`` and the
        weight is float16: ``(master, inner_state)``."""
        if self.multi_precision and weight.dtype == numpy.float16:
            master = weight.astype(numpy.float32)
            return (master,) + (self.create_state(index, master),)
        if weight.dtype == numpy.float16 and not self.multi_precision:
            warnings.warn(_FLOAT16_WARNING % "optimizer", stacklevel=2)
        return self.create_state(index, weight)

    def update(self, index, weight, grad, state):
        """Update ``weight`` in place from ``grad`` and ``state``."""
        raise NotImplementedError("%s does not define update()" % type(self).__name__)

    def update_multi_precision(self, index, weight, grad, state):
        """update() on the float32 master copy for float16 weights with multi_precision."""
        if self.multi_precision and weight.dtype == numpy.float16:
            master, inner = state[0], state[1]
            grad32 = grad.astype(numpy.float32)
            self.update(index, master, grad32, inner)
            _cast_into(master, weight)
        else:
            self.update(index, weight, grad, state)

    # --- pickling (MXNet's layout: everything but param_dict) ------------------------------------
    def __getstate__(self):
        ret = self.__dict__.copy()
        ret.pop("param_dict", None)
        return ret

    def __setstate__(self, state):
        self.__dict__ = state
        self.param_dict = {}


register = Optimizer.register
create = Optimizer.create_optimizer


class _OwnMultiPrecision:
    """``update``/``update_multi_precision`` for optimizers whose ``_update_impl`` keeps the
    float32 master copy of float16 weights itself and, given lists, updates several weights."""

    def update(self, index, weight, grad, state):
        self._update_impl(index, weight, grad, state, multi_precision=False)

    def update_multi_precision(self, index, weight, grad, state):
        first = weight[0] if isinstance(index, (tuple, list)) else weight
        use_mp = self.multi_precision and first.dtype == numpy.float16
        self._update_impl(index, weight, grad, state, multi_precision=use_mp)


def _zeros_for(weight, count, **kwargs):
    """``count`` zero states of ``weight``'s shape on its context (``kwargs``: dtype, stype)."""
    return tuple(zeros(weight.shape, weight.context, **kwargs) for _ in range(count))


def _starting_lr(learning_rate, lr_scheduler):
    """The optimizer's ``lr``: ``learning_rate``, or 0.01 when it and the scheduler are both
    missing. A given ``learning_rate`` also becomes the scheduler's ``base_lr``, with a
    printed notice when that changes it."""
    if lr_scheduler is None:
        return 0.01 if learning_rate is None else learning_rate
    if learning_rate is not None and lr_scheduler.base_lr != learning_rate:
        print(UserWarning("learning rate from ``lr_scheduler`` has been overwritten by "
                          "``learning_rate`` in optimizer."))
        lr_scheduler.base_lr = learning_rate
    return learning_rate


def _cast_into(src, dst):
    """dst[:] = src converted to dst's dtype (the master-copy cast back)."""
    k = _kernels(dst)
    if isinstance(dst._data, numpy.ndarray):
        numpy.copyto(dst._data, src._data, casting="unsafe")
    else:
        k.copy(dst._data, src._data)


# ---------------------------------------------------------------------------------------------
# SGD family
# ---------------------------------------------------------------------------------------------
def _sgd_step(weight, grad, state, multi_precision, lr, wd, momentum, rescale, clip, lazy):
    """One weight of SGD: plain/momentum (``state`` the momentum or None), float32 master copy
    or not (``multi_precision``: ``state`` is ``(momentum or None, master)``), lazy rows of a
    row_sparse gradient (``lazy``, without master copy) or dense."""
    k = _kernels(weight)
    w, g = weight._data, grad._data
    if multi_precision:
        mom, weight32 = state
        if mom is not None:
            k.mp_sgd_mom_update(w, g, mom._data, weight32._data, w, lr, wd, momentum, rescale,
                                clip)
        else:
            k.mp_sgd_update(w, g, weight32._data, w, lr, wd, rescale, clip)
    elif state is not None:
        k.sgd_mom_update(w, g, state._data, w, lr, wd, momentum, rescale, clip,
                         _rows(k, grad, lazy))
    else:
        k.sgd_update(w, g, w, lr, wd, rescale, clip, _rows(k, grad, lazy))


class _SGDMomentumState:
    """SGD's and LARS's states: the momentum (of the weight's storage type with
    ``lazy_update``, else dense), None without momentum; float16 weights with
    ``multi_precision`` also get a float32 master copy."""

    def create_state_multi_precision(self, index, weight):
        return _state_and_master_copy(self, index, weight, "SGD optimizer")

    def create_state(self, index, weight):
        if self.momentum != 0.0:
            stype = weight.stype if self.lazy_update else "default"
            return zeros(weight.shape, weight.context, dtype=weight.dtype, stype=stype)
        return None


@register
class SGD(_SGDMomentumState, _OwnMultiPrecision, Optimizer):
    """Stochastic gradient descent with momentum and weight decay.

    ``state = momentum*state - lr*wd*weight - lr*clip(rescale_grad*grad); weight += state``
    (without momentum: ``weight = (1 - lr*wd)*weight - lr*clip(rescale_grad*grad)``). With a
    row_sparse gradient and ``lazy_update`` only the rows the gradient holds are updated.
    float16 weights with ``multi_precision`` update a float32 master copy:
    state = ``(momentum or None, master)``.
    """

    def __init__(self, momentum=0.0, lazy_update=True, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.lazy_update = lazy_update
        self.aggregate_num = int(os.getenv("MXNET_OPTIMIZER_AGGREGATION_SIZE", "4"))

    def _update_impl(self, indices, weights, grads, states, multi_precision=False):
        indices, weights, grads, states = _as_list(indices, weights, grads, states)
        for weight, grad in zip(weights, grads):
            _check_arrays(weight, grad)
        self._update_count(indices)
        lrs = self._get_lrs(indices)
        wds = self._get_wds(indices)
        momentum = self.momentum if self.momentum > 0 else 0.0
        clip = _op_clip(self.clip_gradient)
        for weight, grad, state, lr, wd in zip(weights, grads, states, lrs, wds):
            _sgd_step(weight, grad, state, multi_precision, lr, wd, momentum, self.rescale_grad,
                      clip, self.lazy_update)


@register
class ccSGD(SGD):   # noqa: N801  (MXNet's name)
    """An alias of SGD kept for old code."""


@register
class NAG(Optimizer):
    """Nesterov accelerated gradient:
    ``m = momentum*m; w = w - m + (momentum+1)*(m - lr*(clip(g) + wd*w)); m -= lr*(...)``."""

    def __init__(self, momentum=0.0, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum

    def create_state_multi_precision(self, index, weight):
        return _state_and_master_copy(self, index, weight, "NAG optimizer")

    def create_state(self, index, weight):
        if self.momentum != 0.0:
            return zeros(weight.shape, weight.context, dtype=weight.dtype)
        return None

    def _update_impl(self, index, weight, grad, state, multi_precision=False):
        lr, wd = self._start_update(index, weight, grad)
        momentum = self.momentum if self.momentum > 0 else 0.0
        clip = _op_clip(self.clip_gradient)
        k = _kernels(weight)
        w, g = weight._data, grad._data
        if not multi_precision:
            if state is not None:
                k.nag_mom_update(w, g, state._data, w, lr, wd, momentum, self.rescale_grad, clip)
            else:
                k.sgd_update(w, g, w, lr, wd, self.rescale_grad, clip)
        elif state[0] is not None:
            k.mp_nag_mom_update(w, g, state[0]._data, state[1]._data, w, lr, wd, momentum,
                                self.rescale_grad, clip)
        else:
            k.mp_sgd_update(w, g, state[1]._data, w, lr, wd, self.rescale_grad, clip)

    def update(self, index, weight, grad, state):
        self._update_impl(index, weight, grad, state, multi_precision=False)

    def update_multi_precision(self, index, weight, grad, state):
        use_mp = (self.multi_precision and weight.dtype == numpy.float16
                  and isinstance(state, (tuple, list)))
        self._update_impl(index, weight, grad, state, multi_precision=use_mp)


@register
class Signum(Optimizer):
    """Signum (sign of the momentum) and, with ``momentum=0``, SignSGD; ``wd_lh`` is the
    decoupled weight decay."""

    def __init__(self, learning_rate=0.01, momentum=0.9, wd_lh=0.0, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum = momentum
        self.wd_lh = wd_lh

    def create_state(self, index, weight):
        if self.momentum != 0.0:
            return zeros(weight.shape, weight.context, dtype=weight.dtype, stype=weight.stype)
        return None

    def _update_impl(self, index, weight, grad, state):
        lr, wd = self._start_update(index, weight, grad)
        k = _kernels(weight)
        w, g = weight._data, grad._data
        if state is not None:
            k.signum_update(w, g, state._data, w, lr, wd,
                            self.momentum if self.momentum > 0 else 0.0,
                            self.wd_lh if self.wd_lh else 0.0, self.rescale_grad,
                            _op_clip(self.clip_gradient))
        else:
            k.signsgd_update(w, g, w, lr, wd)

    def update(self, index, weight, grad, state):
        self._update_impl(index, weight, grad, state)


@register
class FTML(Optimizer):
    """Follow The Moving Leader; states ``(d, v, z)``."""

    def __init__(self, beta1=0.6, beta2=0.999, epsilon=1e-8, **kwargs):
        super().__init__(**kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon

    def create_state(self, index, weight):
        return tuple(zeros(weight.shape, weight.context, dtype=weight.dtype) for _ in range(3))

    def update(self, index, weight, grad, state):
        lr, wd = self._start_update(index, weight, grad)
        t = self._index_update_count[index]
        d, v, z = state
        w = weight._data
        _kernels(weight).ftml_update(w, grad._data, d._data, v._data, z._data, w, lr, wd,
                                     self.beta1, self.beta2, self.epsilon, t, self.rescale_grad,
                                     _op_clip(self.clip_gradient))


def _is_lars_exempt(name):
    return name.endswith("gamma") or name.endswith("beta") or name.endswith("bias")


@register
class LARS(_SGDMomentumState, _OwnMultiPrecision, Optimizer):
    """SGD with layer-wise adaptive rate scaling: each weight's rate is scaled by
    ``eta*|w| / (|g| + wd*|w| + eps)`` (names ending in gamma/beta/bias are exempt)."""

    def __init__(self, momentum=0.0, lazy_update=True, eta=0.001, eps=0,
                 momentum_correction=True, **kwargs):
        super().__init__(**kwargs)
        # (assignment order = MXNet's attribute order, for byte-identical pickles)
        self.momentum, self.momentum_correction = momentum, momentum_correction
        self.lazy_update = lazy_update
        self.aggregate_num = int(os.getenv("MXNET_OPTIMIZER_AGGREGATION_SIZE", "4"))
        self.eta, self.eps = eta, eps
        self.skip = 0
        self.last_lr = self.cur_lr = None  # scheduled rates of the previous and this update

    def _get_lrs(self, indices):
        """Also tracks the previous and current scheduled rate (for momentum correction)."""
        if self.cur_lr is not None:
            self.last_lr = self.cur_lr
        lr = self._scheduled_lr()
        if self.cur_lr is None:
            self.last_lr = lr
        self.cur_lr = lr
        return [lr * self._multiplier(index, self.lr_mult, "lr_mult") for index in indices]

    @staticmethod
    def _decayed_by_default(name):
        """LARS decays only the ``_weight`` parameters by default."""
        return name.endswith("_weight")

    def _l2norm(self, v, rescale=False):
        """L2 norm in float32 (of the rescaled array when ``rescale``)."""
        k = _kernels(v)
        norm = float(k.opt_l2_norm(v._data))
        return float(numpy.float32(norm) * numpy.float32(self.rescale_grad)) if rescale else norm

    def _get_lars(self, i, weight, g, lr, wd):
        """``lr`` scaled by the layer's trust ratio; unscaled for exempt names and for
        weights or gradients whose norm is not positive."""
        if _is_lars_exempt(self.idx2name.get(i, str(i))):
            return lr
        norms = (self._l2norm(weight), self._l2norm(g, rescale=True))
        if not (norms[0] > 0.0 and norms[1] > 0.0):
            return lr
        trust = self.eta * norms[0] / (norms[1] + wd * norms[0] + self.eps)
        return trust * lr

    def _update_impl(self, indices, weights, grads, states, multi_precision=False):
        from ..operator.optimizer_op import lars_rates
        indices, weights, grads, states = _as_list(indices, weights, grads, states)
        aggregate = True
        for weight, grad in zip(weights, grads):
            _check_arrays(weight, grad)
            aggregate = aggregate and weight.stype == "default" and grad.stype == "default"
        self._update_count(indices)
        lrs = self._get_lrs(indices)
        wds = self._get_wds(indices)
        momentum = 0.0
        if self.momentum > 0:
            momentum = self.momentum * (self.cur_lr / self.last_lr) \
                if (self.momentum_correction and self.last_lr != 0) else self.momentum
        clip = _op_clip(self.clip_gradient)

        if aggregate:
            # multi_sum_sq + multi_lars: float32 rates for the non-exempt weights
            names = [self.idx2name[i] if i in self.idx2name else str(i) for i in indices]
            scaled = [pos for pos, n in enumerate(names) if not _is_lars_exempt(n)]
            f32 = numpy.float32
            new_lrs = numpy.array(lrs, dtype=f32)
            if scaled:
                w2 = numpy.array([float(_kernels(weights[p]).opt_sum_sq(weights[p]._data))
                                  for p in scaled], dtype=f32)
                g2 = numpy.array([float(_kernels(grads[p]).opt_sum_sq(grads[p]._data))
                                  for p in scaled], dtype=f32)
                new_lrs[scaled] = lars_rates(new_lrs[scaled], w2, g2,
                                             numpy.array([wds[p] for p in scaled], dtype=f32),
                                             self.eta, self.eps, self.rescale_grad)
            lrs = [float(x) for x in new_lrs]
            lazy = False
        else:
            lrs = [self._get_lars(i, w, g, lr, wd)
                   for i, w, g, lr, wd in zip(indices, weights, grads, lrs, wds)]
            lazy = self.lazy_update
        for weight, grad, state, lr, wd in zip(weights, grads, states, lrs, wds):
            _sgd_step(weight, grad, state, multi_precision, lr, wd, momentum, self.rescale_grad,
                      clip, lazy)


@register
class LBSGD(Optimizer):
    """Large-batch SGD: gradients are accumulated over ``batch_scale`` calls and the rate is
    warmed up ('linear', 'power2', 'sqrt') or scaled LARS-style ('lars')."""

    def __init__(self, momentum=0.0, multi_precision=False, warmup_strategy="linear",
                 warmup_epochs=5, batch_scale=1, updates_per_epoch=32, begin_epoch=0,
                 num_epochs=60, **kwargs):
        super().__init__(**kwargs)
        logging.info("Running Large-Batch SGD Algorithm")
        logging.info("(Batch_scale=%f, warmup_epochs=%d, warmup_strategy=%s, "
                     "updates_per_epoch=%d)", batch_scale, warmup_epochs, warmup_strategy,
                     updates_per_epoch)
        # (assignment order = MXNet's attribute order, for byte-identical pickles)
        self.momentum, self.multi_precision = momentum, multi_precision
        self.warmup_strategy, self.warmup_epochs = warmup_strategy, warmup_epochs
        self.batch_scale, self.updates_per_epoch = batch_scale, updates_per_epoch
        self.init_updates = begin_epoch * updates_per_epoch  # accumulated-update count to resume at
        self.num_epochs = num_epochs
        self.lbmult, self.cumgrads, self.adaptive, self.admult = 1, {}, False, 1

    def create_state(self, index, weight):
        if self.multi_precision and weight.dtype == numpy.float16:
            master = weight.astype(numpy.float32)
            momentum = None
            if self.momentum != 0.0:
                momentum = zeros(weight.shape, weight.context, dtype=numpy.float32,
                                 stype=weight.stype)
            return (momentum, master)
        if weight.dtype == numpy.float16 and not self.multi_precision:
            warnings.warn(_FLOAT16_WARNING % "SGD optimizer", stacklevel=2)
        if self.momentum != 0.0:
            return zeros(weight.shape, weight.context, dtype=weight.dtype, stype=weight.stype)
        return None

    def _get_lbmult(self, nup):
        """The warmup multiplier after ``nup`` accumulated updates."""
        nwup = self.warmup_epochs * self.updates_per_epoch
        strategy = self.warmup_strategy
        maxmult = float(self.batch_scale)
        if nup >= nwup:
            return maxmult
        if nwup <= 1:
            return 1.0
        if strategy == "linear":
            return 1.0 + (maxmult - 1) * nup / nwup
        if strategy == "power2":
            return 1.0 + (maxmult - 1) * (nup * nup) / (nwup * nwup)
        if strategy == "sqrt":
            return 1.0 + (maxmult - 1) * math.sqrt(float(nup) / nwup)
        return 1.0

    def _get_lars(self, weight, g, wd):
        """The LARS multiplier, kept within [0.01, 100]."""
        weight2 = self._l2norm(weight)
        grad2 = self._l2norm(g)
        lars = math.sqrt(weight2 / (grad2 + wd * weight2 + 1e-18))
        return min(max(lars, 0.01), 100)

    def _l2norm(self, v):
        """The sum of squares (MXNet's name for it)."""
        return float(_kernels(v).opt_sum_sq(v._data))

    def _reset_cum_gradient(self, index):
        self.cumgrads[index]["cum_grad"] = 0

    def _get_cum_gradient(self, index):
        return self.cumgrads.get(index, {})

    def _put_cum_gradient(self, index, cgrad):
        self.cumgrads[index] = cgrad

    def _cumulate_gradient(self, grad, index):
        cgrad = self._get_cum_gradient(index)
        if cgrad and cgrad["num_cums"] > 0:
            cum_grad = cgrad["cum_grad"] + grad
            num_cums = cgrad["num_cums"] + 1
        else:
            cum_grad = grad
            num_cums = self.init_updates + 1
        cgrad = {"cum_grad": cum_grad, "num_cums": num_cums}
        self._put_cum_gradient(index, cgrad)
        return cgrad

    def update(self, index, weight, grad, state):
        _check_arrays(weight, grad)
        lr, wd = self._get_lr(index), self._get_wd(index)
        self._update_count(index)
        acc = self._cumulate_gradient(grad, index)
        if acc["num_cums"] % self.batch_scale != 0:
            # between the real steps only the weight decay is applied (lr 0, no clipping)
            w = weight._data
            _kernels(weight).sgd_update(w, grad._data, w, 0.0, wd, 1.0, -1.0)
            return
        # every batch_scale accumulations: one SGD step on the mean accumulated gradient
        mean_grad = acc["cum_grad"] / self.batch_scale
        scale = (self._get_lars(weight, mean_grad, wd) if self.warmup_strategy == "lars"
                 else self._get_lbmult(acc["num_cums"]))
        _sgd_step(weight, mean_grad, state, isinstance(state, (list, tuple)), lr * scale, wd,
                  self.momentum if self.momentum > 0 else 0.0,
                  self.rescale_grad, _op_clip(self.clip_gradient), False)
        self._reset_cum_gradient(index)


@register
class LAMB(_OwnMultiPrecision, Optimizer):
    """LAMB (layer-wise adaptive moments): an Adam direction scaled by the trust ratio
    ``|w| / |direction|`` (bounded by ``lower_bound``/``upper_bound``)."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6,
                 lower_bound=None, upper_bound=None, bias_correction=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        self.bias_correction = bias_correction
        self.aggregate_num = max(1, min(45, int(os.getenv("MXNET_OPTIMIZER_AGGREGATION_SIZE",
                                                          "45"))))

    def create_state(self, index, weight):
        return _zeros_for(weight, 2, dtype=weight.dtype, stype=weight.stype)

    def _step(self, index, weight, grad, state, multi_precision):
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        t = self._index_update_count[index]
        if multi_precision:
            (mean, var), master = state[1], state[0]
        else:
            (mean, var), master = state, None
        k = _kernels(weight)
        base = master if master is not None else weight
        direction = _nd_core.empty(weight.shape, weight.context, dtype=base.dtype)
        k.lamb_update_phase1(base._data, grad._data, mean._data, var._data, direction._data,
                             self.beta1, self.beta2, self.epsilon, t, self.bias_correction, wd,
                             self.rescale_grad, _op_clip(self.clip_gradient))
        r1 = k.opt_l2_norm(base._data)
        r2 = k.opt_l2_norm(direction._data)
        lower = self.lower_bound if self.lower_bound else -1.0
        upper = self.upper_bound if self.upper_bound else -1.0
        w = weight._data
        if master is not None:
            k.mp_lamb_update_phase2(w, direction._data, r1, r2, master._data, w, lr, lower,
                                    upper)
        else:
            k.lamb_update_phase2(w, direction._data, r1, r2, w, lr, lower, upper)

    def _update_impl(self, index, weight, grad, state, multi_precision=False):
        if self.aggregate_num <= 1 or not isinstance(index, (tuple, list)):
            if isinstance(index, (tuple, list)):
                if len(index) != self.aggregate_num:
                    raise AssertionError("LAMB got %d indices for aggregate_num=%d"
                                         % (len(index), self.aggregate_num))
                index, weight, grad, state = index[0], weight[0], grad[0], state[0]
            _check_arrays(weight, grad)
            self._step(index, weight, grad, state, multi_precision)
            return
        # the multi-tensor path: numerically the same as one weight at a time
        for i, w, g, s in zip(index, weight, grad, state):
            _check_arrays(w, g)
            self._step(i, w, g, s, multi_precision)


@register
class DCASGD(Optimizer):
    """Delay-compensated asynchronous SGD; state ``(momentum or None, previous weight)``."""

    def __init__(self, momentum=0.0, lamda=0.04, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.weight_previous = {}
        self.lamda = lamda

    def create_state(self, index, weight):
        if self.momentum == 0.0:
            return (None, weight.copy())
        return (zeros(weight.shape, weight.context, dtype=weight.dtype), weight.copy())

    def update(self, index, weight, grad, state):
        lr, wd = self._start_update(index, weight, grad)
        mom, previous = state
        w = weight._data
        _kernels(weight).dcasgd_update(w, grad._data, None if mom is None else mom._data,
                                       previous._data, w, lr, wd, self.momentum, self.lamda,
                                       self.rescale_grad, _py_clip(self.clip_gradient))


@register
class SGLD(Optimizer):
    """Stochastic gradient Langevin dynamics: half an SGD step plus N(0, sqrt(lr)) noise drawn
    from lightmod's generator (``mx.random.seed`` makes it reproducible)."""

    def create_state(self, index, weight):
        return None

    def update(self, index, weight, grad, state):
        from ..ndarray import random as nd_random
        lr, wd = self._start_update(index, weight, grad)
        noise = nd_random.normal(0, math.sqrt(lr), shape=weight.shape, dtype=weight.dtype,
                                 ctx=weight.context)
        w = weight._data
        _kernels(weight).sgld_update(w, grad._data, noise._data, w, lr, wd, self.rescale_grad,
                                     _py_clip(self.clip_gradient))


@register
class Adam(Optimizer):
    """Adam: ``g' = clip(rescale*g + wd*w)``, moments ``(mean, var)``, bias correction folded
    into the rate with the per-index count ``t``."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 lazy_update=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.lazy_update = lazy_update

    def create_state(self, index, weight):
        stype = weight.stype if self.lazy_update else "default"
        return _zeros_for(weight, 2, dtype=weight.dtype, stype=stype)

    def update(self, index, weight, grad, state):
        lr, wd = self._start_update(index, weight, grad)
        t = self._index_update_count[index]
        coef1 = 1. - self.beta1 ** t
        coef2 = 1. - self.beta2 ** t
        lr *= math.sqrt(coef2) / coef1
        mean, var = state
        k = _kernels(weight)
        w = weight._data
        k.adam_update(w, grad._data, mean._data, var._data, w, lr, wd, self.beta1, self.beta2,
                      self.epsilon, self.rescale_grad, _op_clip(self.clip_gradient),
                      _rows(k, grad, self.lazy_update))


@register
class AdaGrad(Optimizer):
    """AdaGrad: ``history += g'^2; w -= lr*(g'/sqrt(history + eps) + wd*w)``; a row_sparse
    gradient runs MXNet's sparse kernel (present rows only, no weight decay)."""

    def __init__(self, eps=1e-7, **kwargs):
        super().__init__(**kwargs)
        self.float_stable_eps = eps

    def create_state(self, index, weight):
        return zeros(weight.shape, weight.context, stype=weight.stype)

    def update(self, index, weight, grad, state):
        lr, wd = self._start_update(index, weight, grad)
        k = _kernels(weight)
        w = weight._data
        if grad.stype == "row_sparse":
            if wd != 0:
                raise MXNetError("adagrad_update: the row_sparse (sparse) update does not "
                                 "support weight decay, got wd=%s" % wd)
            k.sparse_adagrad_update(w, grad._data, state._data, w, lr, self.float_stable_eps,
                                    self.rescale_grad, _op_clip(self.clip_gradient),
                                    k.opt_nonzero_rows(grad._data))
        else:
            k.adagrad_update(w, grad._data, state._data, w, lr, wd, self.float_stable_eps,
                             self.rescale_grad, _py_clip(self.clip_gradient))


@register
class RMSProp(Optimizer):
    """RMSProp (Tieleman & Hinton) or, with ``centered``, Graves' variant; ``clip_weights``
    bounds the weights."""

    def __init__(self, learning_rate=0.001, gamma1=0.9, gamma2=0.9, epsilon=1e-8,
                 centered=False, clip_weights=None, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.gamma1 = gamma1
        self.gamma2 = gamma2
        self.centered = centered
        self.epsilon = epsilon
        self.clip_weights = clip_weights

    def create_state(self, index, weight):
        if self.centered:
            return tuple(zeros(weight.shape, weight.context, stype=weight.stype)
                         for _ in range(3))
        return (zeros(weight.shape, weight.context, stype=weight.stype),)

    def update(self, index, weight, grad, state):
        lr, wd = self._start_update(index, weight, grad)
        clip = _op_clip(self.clip_gradient)
        clip_w = float(self.clip_weights) if self.clip_weights else -1.0
        k = _kernels(weight)
        w = weight._data
        if not self.centered:
            (n,) = state
            k.rmsprop_update(w, grad._data, n._data, w, lr, wd, self.gamma1, self.epsilon,
                             self.rescale_grad, clip, clip_w)
        else:
            n, g, delta = state
            k.rmspropalex_update(w, grad._data, n._data, g._data, delta._data, w, lr, wd,
                                 self.gamma1, self.gamma2, self.epsilon, self.rescale_grad, clip,
                                 clip_w)


@register
class AdaDelta(Optimizer):
    """AdaDelta (no learning rate). Like MXNet it rescales the caller's gradient in place."""

    def __init__(self, rho=0.90, epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.rho = rho
        self.epsilon = epsilon

    def create_state(self, index, weight):
        return (zeros(weight.shape, weight.context), zeros(weight.shape, weight.context))

    def update(self, index, weight, grad, state):
        _check_arrays(weight, grad)
        wd = self._get_wd(index)
        self._update_count(index)
        acc_g, acc_delta = state
        w = weight._data
        _kernels(weight).adadelta_update(w, grad._data, acc_g._data, acc_delta._data, w, wd,
                                         self.rho, self.epsilon, self.rescale_grad,
                                         _py_clip(self.clip_gradient))


@register
class Ftrl(Optimizer):
    """FTRL-proximal; states ``(z, n)``; with row_sparse weight and gradient only the
    gradient's rows are updated.
    Its own ``learning_rate`` default (0.1) replaces the base class's."""

    def __init__(self, lamda1=0.01, learning_rate=0.1, beta=1, **kwargs):
        super().__init__(**kwargs)
        self.lamda1 = lamda1
        self.beta = beta
        self.lr = learning_rate

    def create_state(self, index, weight):
        return _zeros_for(weight, 2, stype=weight.stype)

    def update(self, index, weight, grad, state):
        lr, wd = self._start_update(index, weight, grad)
        z, n = state
        k = _kernels(weight)
        w = weight._data
        # MXNet's sparse ftrl kernel needs row_sparse weight and states; a dense weight with a
        # row_sparse gradient falls back to the dense update of every row
        lazy = weight.stype == "row_sparse" and z.stype == "row_sparse"
        k.ftrl_update(w, grad._data, z._data, n._data, w, lr, wd, self.lamda1, self.beta,
                      self.rescale_grad, _op_clip(self.clip_gradient), _rows(k, grad, lazy))


@register
class Adamax(Optimizer):
    """AdaMax (Adam with the infinity norm)."""

    def __init__(self, learning_rate=0.002, beta1=0.9, beta2=0.999, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2

    def create_state(self, index, weight):
        return _zeros_for(weight, 2, dtype=weight.dtype)

    def update(self, index, weight, grad, state):
        lr, wd = self._start_update(index, weight, grad)
        t = self._index_update_count[index]
        lr /= (1. - self.beta1 ** t)
        m, u = state
        w = weight._data
        _kernels(weight).adamax_update(w, grad._data, m._data, u._data, w, lr, wd, self.beta1,
                                       self.beta2, self.rescale_grad,
                                       _py_clip(self.clip_gradient))


@register
class Nadam(Optimizer):
    """Nesterov Adam with the momentum schedule of Dozat (2016); like MXNet the schedule
    product ``m_schedule`` is shared by all parameters."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 schedule_decay=0.004, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.schedule_decay = schedule_decay
        self.m_schedule = 1.

    def create_state(self, index, weight):
        return _zeros_for(weight, 2, dtype=weight.dtype)

    def update(self, index, weight, grad, state):
        lr, wd = self._start_update(index, weight, grad)
        t = self._index_update_count[index]
        momentum_t = self.beta1 * (1. - 0.5 * (pow(0.96, t * self.schedule_decay)))
        momentum_t_1 = self.beta1 * (1. - 0.5 * (pow(0.96, (t + 1) * self.schedule_decay)))
        self.m_schedule = self.m_schedule * momentum_t
        m_schedule_next = self.m_schedule * momentum_t_1
        m, v = state
        w = weight._data
        _kernels(weight).nadam_update(w, grad._data, m._data, v._data, w, lr, wd, self.beta1,
                                      self.beta2, self.epsilon, 1. - self.m_schedule,
                                      1. - m_schedule_next, 1. - pow(self.beta2, t), momentum_t,
                                      momentum_t_1, self.rescale_grad,
                                      _py_clip(self.clip_gradient))


@register
class Test(Optimizer):
    """MXNet's test optimizer: ``weight += grad*rescale_grad; state = weight``."""

    def create_state(self, index, weight):
        return zeros(weight.shape, weight.context)

    def update(self, index, weight, grad, state):
        weight[:] += grad * self.rescale_grad
        state[:] = weight
