"""MXNet's optimizer update operators (``nd.sgd_update(w, g, out=w, lr=...)`` and friends).

Each operator runs one fused kernel of the kernel set (``k.sgd_mom_update`` ...), the same one
``mx.optimizer`` calls directly. State inputs (momentum, mean, var, the float32 master weight
...) are auxiliary inputs updated in place, as MXNet's mutable inputs are; the result goes to
the output, which is usually ``out=weight``.

Row-sparse gradients: lightmod stores them densely, and an all-zero row is a row the sparse
gradient does not hold. Like MXNet's storage-type inference, ``infer_storage_type`` chooses the
dispatch: with a row_sparse gradient and ``lazy_update`` (sgd, sgd_mom, adam), always for the
sparse adagrad, and for ftrl when weight and states are row_sparse too, only the rows present
in the gradient are updated; otherwise the standard dense update runs on all rows (MXNet's
dense fallback).
"""
import numpy as np

from .registry import Bool, Float, FloatTuple, Int, Operator, merge_shape, register

__all__ = []

_GRAD_CLIP_DOC = "Clip gradient to [-clip_gradient, clip_gradient]; off when negative"


def _host_floats(x):
    """A small backend array (lrs, norms ...) as a list of Python floats."""
    host = x if isinstance(x, np.ndarray) else x.copy_to_host()
    return [float(v) for v in np.asarray(host).reshape(-1)]


def _common(**extra):
    """The parameters most update ops share, in MXNet's order after the op-specific ones."""
    params = dict(extra)
    params.setdefault("wd", Float(0.0, "Weight decay"))
    params["rescale_grad"] = Float(1.0, "Rescale gradient to grad = rescale_grad*grad")
    params["clip_gradient"] = Float(-1.0, _GRAD_CLIP_DOC)
    return params


class _Update(Operator):
    """An element-wise update: every input has the weight's shape; output = new weight."""
    inputs = ("weight", "grad")
    fp32_inputs = ()        # inputs that are float32 whatever the weight's dtype (mp states)
    # lazy row_sparse dispatch: 'param' (when lazy_update), 'always', 'all_rsp' (only when
    # every input is row_sparse: MXNet runs a dense fallback otherwise), None (always dense)
    lazy = None

    def has_backward(self, p):
        return False

    def infer_shape(self, p, in_shapes):
        shape = self.same_shape(p, in_shapes, "the weight's shape")
        return [shape] * len(in_shapes), [shape]

    def infer_type(self, p, in_types):
        names = self.list_inputs(p)
        dtype = in_types[0]
        out = []
        for name, t in zip(names, in_types):
            out.append("float32" if name in self.fp32_inputs else (t if t is not None else dtype))
        return out, [dtype]

    def infer_storage_type(self, p, in_stypes):
        """Pick the dispatch (recorded on the parsed params) and give the output's stype."""
        rows = in_stypes[1] == "row_sparse" and (
            self.lazy == "always" or (self.lazy == "param" and p.lazy_update)
            or (self.lazy == "all_rsp" and all(s == "row_sparse" for s in in_stypes)))
        p._lazy_rows = bool(rows)
        return [in_stypes[0]]

    # parameters passed to the kernel after the output, in the kernel's order
    hyper = ()

    def forward(self, p, k, inputs, outputs, is_train, state):
        """The kernel named like the operator: inputs, output, ``hyper`` values, and the rows
        of a lazily-updated row_sparse gradient for the ops that have a lazy dispatch."""
        rows = () if self.lazy is None else (self.rows(p, k, inputs[1]),)
        getattr(k, self.name)(*inputs, outputs[0], *(getattr(p, name) for name in self.hyper), *rows)

    def rows(self, p, k, grad):
        """The rows to update: None (all) unless the lazy row_sparse dispatch was chosen."""
        return k.opt_nonzero_rows(grad) if p.get("_lazy_rows", False) else None


def _declare_update(name, params, hyper, states=(), lazy=None, mp=False):
    """Register the update operator ``name``: inputs weight, grad and its ``states``
    (auxiliary inputs updated in place). Multi-precision (``mp``) ops also take the float32
    master weight last and keep every state in float32. ``hyper`` and ``lazy``: see _Update."""
    if mp:
        states = tuple(states) + ("weight32",)
    return register(type(name, (_Update,), {
        "name": name, "inputs": ("weight", "grad") + tuple(states), "aux": tuple(states),
        "fp32_inputs": tuple(states) if mp else (), "lazy": lazy, "params": params,
        "hyper": hyper}))


def _lr(**extra):
    """_common with the learning rate first."""
    return _common(lr=Float(doc="Learning rate"), **extra)


def _with(params, **more):
    params.update(more)
    return params


_LAZY = Bool(True, "Update only the rows of a row_sparse gradient")
_DENSE = Bool(True, "Accepted for compatibility (the update is dense)")
_MOMENTUM = Float(0.0, "Momentum")
_EPSILON = Float(1e-8, "Numerical stability constant")
_CLIP_WEIGHTS = Float(-1.0, "Clip weights to [-clip_weights, clip_weights]; off when negative")
_SGD = ("lr", "wd", "rescale_grad", "clip_gradient")
_SGD_MOM = ("lr", "wd", "momentum", "rescale_grad", "clip_gradient")

_declare_update("sgd_update", _with(_lr(), lazy_update=_LAZY), _SGD, lazy="param")
_declare_update("sgd_mom_update", _with(_lr(momentum=_MOMENTUM), lazy_update=_LAZY), _SGD_MOM,
                ("mom",), lazy="param")
_declare_update("mp_sgd_update", _with(_lr(), lazy_update=_DENSE), _SGD, mp=True)
_declare_update("mp_sgd_mom_update", _with(_lr(momentum=_MOMENTUM), lazy_update=_DENSE),
                _SGD_MOM, ("mom",), mp=True)
_declare_update("nag_mom_update", _lr(momentum=_MOMENTUM), _SGD_MOM, ("mom",))
_declare_update("mp_nag_mom_update", _lr(momentum=_MOMENTUM), _SGD_MOM, ("mom",), mp=True)
_declare_update("adam_update",
                _with(_lr(beta1=Float(0.9, "Decay of the 1st moment"),
                          beta2=Float(0.999, "Decay of the 2nd moment"), epsilon=_EPSILON),
                      lazy_update=_LAZY),
                ("lr", "wd", "beta1", "beta2", "epsilon", "rescale_grad", "clip_gradient"),
                ("mean", "var"), lazy="param")
_declare_update("rmsprop_update",
                _with(_lr(gamma1=Float(0.95, "Decay rate"), epsilon=_EPSILON),
                      clip_weights=_CLIP_WEIGHTS),
                ("lr", "wd", "gamma1", "epsilon", "rescale_grad", "clip_gradient",
                 "clip_weights"), ("n",))
_declare_update("rmspropalex_update",
                _with(_lr(gamma1=Float(0.95, "Decay rate"), gamma2=Float(0.9, "Decay rate"),
                          epsilon=_EPSILON), clip_weights=_CLIP_WEIGHTS),
                ("lr", "wd", "gamma1", "gamma2", "epsilon", "rescale_grad", "clip_gradient",
                 "clip_weights"), ("n", "g", "delta"))
_declare_update("ftrl_update",
                _lr(lamda1=Float(0.01, "L1 regularization"),
                    beta=Float(1.0, "Per-coordinate learning rate beta")),
                ("lr", "wd", "lamda1", "beta", "rescale_grad", "clip_gradient"), ("z", "n"),
                lazy="all_rsp")
_declare_update("ftml_update",
                {"lr": Float(doc="Learning rate"),
                 "beta1": Float(0.6, "Decay of the 1st moment"),
                 "beta2": Float(0.999, "Decay of the 2nd moment"), "epsilon": _EPSILON,
                 "t": Int(doc="Number of update"), "wd": Float(0.0, "Weight decay"),
                 "rescale_grad": Float(1.0, "Rescale gradient to grad = rescale_grad*grad"),
                 "clip_grad": Float(-1.0, _GRAD_CLIP_DOC)},
                ("lr", "wd", "beta1", "beta2", "epsilon", "t", "rescale_grad", "clip_grad"),
                ("d", "v", "z"))
_declare_update("signsgd_update", _lr(), ("lr", "wd"))
_declare_update("signum_update",
                _with(_lr(momentum=_MOMENTUM),
                      wd_lh=Float(0.0, "Decoupled weight decay (Loshchilov & Hutter)")),
                ("lr", "wd", "momentum", "wd_lh", "rescale_grad", "clip_gradient"), ("mom",))


_LAMB1_PARAMS = {
    "beta1": Float(0.9, "Decay of the 1st moment"), "beta2": Float(0.999, "Decay of the 2nd moment"),
    "epsilon": Float(1e-6, "Numerical stability constant"), "t": Int(doc="Index update count"),
    "bias_correction": Bool(True, "Whether to use bias correction"),
    "wd": Float(doc="Weight decay"),
    "rescale_grad": Float(1.0, "Rescale gradient to grad = rescale_grad*grad"),
    "clip_gradient": Float(-1.0, _GRAD_CLIP_DOC)}

_LAMB2_PARAMS = {"lr": Float(doc="Learning rate"),
                 "lower_bound": Float(-1.0, "Lower limit of the weight norm; off when negative"),
                 "upper_bound": Float(-1.0, "Upper limit of the weight norm; off when negative")}


@register
class LambUpdatePhase1(_Update):
    name = "lamb_update_phase1"
    inputs = ("weight", "grad", "mean", "var")
    aux = ("mean", "var")
    params = dict(_LAMB1_PARAMS)
    hyper = ("beta1", "beta2", "epsilon", "t", "bias_correction", "wd", "rescale_grad", "clip_gradient")


@register
class MPLambUpdatePhase1(_Update):
    name = "mp_lamb_update_phase1"
    inputs = ("weight", "grad", "mean", "var", "weight32")
    aux = ("mean", "var", "weight32")
    fp32_inputs = ("mean", "var", "weight32")
    params = dict(_LAMB1_PARAMS)

    def infer_type(self, p, in_types):
        ins, _ = super().infer_type(p, in_types)
        return ins, ["float32"]
    hyper = ("beta1", "beta2", "epsilon", "t", "bias_correction", "wd", "rescale_grad", "clip_gradient")


class _LambPhase2(_Update):
    def infer_shape(self, p, in_shapes):
        names = self.list_inputs(p)
        shapes = list(in_shapes)
        shape = None
        for i, (name, s) in enumerate(zip(names, in_shapes)):
            if name in ("r1", "r2"):
                try:
                    shapes[i] = merge_shape(s, (1,))
                except ValueError:
                    raise self.error("input '%s' must have shape (1,), got %s", name, s) from None
                continue
            try:
                shape = merge_shape(shape, s)
            except ValueError:
                raise self.error("input '%s' has shape %s, expected %s (the weight's shape)",
                                 name, s, shape) from None
        return [(1,) if n in ("r1", "r2") else shape for n in names], [shape]

    @staticmethod
    def _scalar(x):
        return _host_floats(x)[0]


@register
class LambUpdatePhase2(_LambPhase2):
    name = "lamb_update_phase2"
    inputs = ("weight", "g", "r1", "r2")
    params = dict(_LAMB2_PARAMS)

    def forward(self, p, k, inputs, outputs, is_train, state):
        w, g, r1, r2 = inputs
        k.lamb_update_phase2(w, g, self._scalar(r1), self._scalar(r2), outputs[0], p.lr,
                             p.lower_bound, p.upper_bound)


@register
class MPLambUpdatePhase2(_LambPhase2):
    name = "mp_lamb_update_phase2"
    inputs = ("weight", "g", "r1", "r2", "weight32")
    aux = ("weight32",)
    fp32_inputs = ("g", "weight32")
    params = dict(_LAMB2_PARAMS)

    def forward(self, p, k, inputs, outputs, is_train, state):
        w, g, r1, r2, w32 = inputs
        k.mp_lamb_update_phase2(w, g, self._scalar(r1), self._scalar(r2), w32, outputs[0], p.lr,
                                p.lower_bound, p.upper_bound)


@register
class SparseAdagradUpdate(_Update):
    """The row_sparse AdaGrad step (``nd.sparse.adagrad_update``): only present rows move."""
    name = "_sparse_adagrad_update"
    inputs = ("weight", "grad", "history")
    aux = ("history",)
    lazy = "always"
    params = _common(lr=Float(doc="Learning rate"),
                     epsilon=Float(1e-7, "Numerical stability constant"))

    def check_params(self, p):
        if p.wd != 0:
            raise self.error("sparse adagrad_update does not support wd (got wd=%s)", p.wd)

    def forward(self, p, k, inputs, outputs, is_train, state):
        w, g, h = inputs
        rows = self.rows(p, k, g)
        if rows is None:
            k.adagrad_update(w, g, h, outputs[0], p.lr, 0.0, p.epsilon, p.rescale_grad,
                             p.clip_gradient)
        else:
            k.sparse_adagrad_update(w, g, h, outputs[0], p.lr, p.epsilon, p.rescale_grad,
                                    p.clip_gradient, rows)


# ---------------------------------------------------------------------------------------------
# Multi-tensor SGD: one call updates num_weights weights (weight_i, grad_i[, mom_i][, weight32_i])
# ---------------------------------------------------------------------------------------------
class _MultiSGD(Operator):
    """``multi_*sgd*_update(*data, num_weights=n, ...)``: the arrays come in groups per weight.

    ``num_arrays`` is the count of positional arrays (set by the nd function, like
    ``num_args``); ``num_weights`` is MXNet's parameter.
    """
    variadic = "num_arrays"
    per_weight = ("weight", "grad")
    preloaded = False       # lrs and wds come as two trailing float32 arrays
    momentum_param = False
    mp = False

    def has_backward(self, p):
        return False

    def check_params(self, p):
        expected = p.num_weights * len(self.per_weight) + (2 if self.preloaded else 0)
        if p.num_arrays != expected:
            raise self.error("num_weights=%d needs %d arrays (%s per weight%s), got %d",
                             p.num_weights, expected, ", ".join(self.per_weight),
                             " plus lrs and wds" if self.preloaded else "", p.num_arrays)
        if not self.preloaded:
            for key in ("lrs", "wds"):
                if len(getattr(p, key)) != p.num_weights:
                    raise self.error("%s has %d values, expected num_weights=%d", key,
                                     len(getattr(p, key)), p.num_weights)

    def list_inputs(self, p):
        names = ["%s_%d" % (n, i) for i in range(p.num_weights) for n in self.per_weight]
        return names + (["lrs", "wds"] if self.preloaded else [])

    def list_aux(self, p):
        return [n for n in self.list_inputs(p) if n.rsplit("_", 1)[0] in ("mom", "weight32")]

    def num_outputs(self, p):
        return p.num_weights

    def infer_shape(self, p, in_shapes):
        group = len(self.per_weight)
        shapes = list(in_shapes)
        outs = []
        names = self.list_inputs(p)
        for i in range(p.num_weights):
            shape = None
            for j in range(group):
                s = in_shapes[i * group + j]
                try:
                    shape = merge_shape(shape, s)
                except ValueError:
                    raise self.error("input '%s' has shape %s, expected %s (weight %d's shape)",
                                     names[i * group + j], s, shape, i) from None
            for j in range(group):
                shapes[i * group + j] = shape
            outs.append(shape)
        if self.preloaded:
            for pos in (-2, -1):
                try:
                    shapes[pos] = merge_shape(in_shapes[pos], (p.num_weights,))
                except ValueError:
                    raise self.error("input '%s' has shape %s, expected (%d,)", names[pos],
                                     in_shapes[pos], p.num_weights) from None
        return shapes, outs

    def infer_type(self, p, in_types):
        group = len(self.per_weight)
        types = list(in_types)
        outs = []
        for i in range(p.num_weights):
            dtype = in_types[i * group]
            for j, n in enumerate(self.per_weight):
                if n in ("mom", "weight32") and self.mp:
                    types[i * group + j] = "float32"
                elif types[i * group + j] is None:
                    types[i * group + j] = dtype
            outs.append(dtype)
        if self.preloaded:
            types[-2] = types[-1] = "float32"
        return types, outs

    def forward(self, p, k, inputs, outputs, is_train, state):
        group = len(self.per_weight)
        if self.preloaded:
            lrs, wds = _host_floats(inputs[-2]), _host_floats(inputs[-1])
        else:
            lrs, wds = p.lrs, p.wds
        momentum = p.momentum if self.momentum_param else 0.0
        for i in range(p.num_weights):
            arrays = inputs[i * group:(i + 1) * group]
            _multi_step(k, self.mp, self.momentum_param, arrays, outputs[i], lrs[i], wds[i],
                        momentum, p.rescale_grad, p.clip_gradient)


def _multi_step(k, mp, with_momentum, arrays, out, lr, wd, momentum, rescale, clip):
    """One weight of a multi-tensor call: the same kernel the single-weight op runs."""
    if mp and with_momentum:
        w, g, mom, w32 = arrays
        k.mp_sgd_mom_update(w, g, mom, w32, out, lr, wd, momentum, rescale, clip)
    elif mp:
        w, g, w32 = arrays
        k.mp_sgd_update(w, g, w32, out, lr, wd, rescale, clip)
    elif with_momentum:
        w, g, mom = arrays
        k.sgd_mom_update(w, g, mom, out, lr, wd, momentum, rescale, clip)
    else:
        w, g = arrays
        k.sgd_update(w, g, out, lr, wd, rescale, clip)


def _multi_params(preloaded, momentum):
    params = {}
    if not preloaded:
        params["lrs"] = FloatTuple(doc="Learning rates, one per weight")
        params["wds"] = FloatTuple(doc="Weight decays, one per weight")
    if momentum:
        params["momentum"] = Float(0.0, "Momentum")
    params["rescale_grad"] = Float(1.0, "Rescale gradient to grad = rescale_grad*grad")
    params["clip_gradient"] = Float(-1.0, _GRAD_CLIP_DOC)
    params["num_weights"] = Int(1, "Number of updated weights")
    params["num_arrays"] = Int(0, "Number of positional arrays (set by the nd function)")
    return params


def _declare_multi(name, per_weight, preloaded, momentum, mp):
    cls = type(name, (_MultiSGD,), {
        "name": name, "per_weight": per_weight, "preloaded": preloaded,
        "momentum_param": momentum, "mp": mp, "params": _multi_params(preloaded, momentum)})
    register(cls)
    return cls


for _pre in (False, True):
    _prefix = "preloaded_" if _pre else ""
    _declare_multi(_prefix + "multi_sgd_update", ("weight", "grad"), _pre, False, False)
    _declare_multi(_prefix + "multi_sgd_mom_update", ("weight", "grad", "mom"), _pre, True, False)
    _declare_multi(_prefix + "multi_mp_sgd_update", ("weight", "grad", "weight32"), _pre, False,
                   True)
    _declare_multi(_prefix + "multi_mp_sgd_mom_update", ("weight", "grad", "mom", "weight32"),
                   _pre, True, True)


@register
class MultiSumSq(Operator):
    """``multi_sum_sq(*arrays, num_arrays=n)``: the sum of squares of each array (float32)."""
    name = "multi_sum_sq"
    variadic = "num_arrays"
    params = {"num_arrays": Int(doc="Number of input arrays")}

    def has_backward(self, p):
        return False

    def infer_shape(self, p, in_shapes):
        return list(in_shapes), [(p.num_arrays,)]

    def infer_type(self, p, in_types):
        return list(in_types), ["float32"]

    def forward(self, p, k, inputs, outputs, is_train, state):
        values = np.array([float(k.opt_sum_sq(x)) for x in inputs], dtype=np.float32)
        _store_host(k, outputs[0], values)


@register
class MultiLars(Operator):
    """``multi_lars(lrs, weights_sum_sq, grads_sum_sq, wds, eta, eps, rescale_grad)``: LARS
    learning rates eta*|w| / (|g|*rescale + wd*|w| + eps) * lr (lr where a norm is zero)."""
    name = "multi_lars"
    inputs = ("lrs", "weights_sum_sq", "grads_sum_sq", "wds")
    params = {"eta": Float(doc="LARS coefficient"), "eps": Float(doc="Numerical stability"),
              "rescale_grad": Float(1.0, "Gradient rescale factor")}

    def has_backward(self, p):
        return False

    def infer_type(self, p, in_types):
        return ["float32"] * 4, ["float32"]

    def forward(self, p, k, inputs, outputs, is_train, state):
        lrs, w2, g2, wds = (np.asarray(_host_floats(x), dtype=np.float32) for x in inputs)
        _store_host(k, outputs[0], lars_rates(lrs, w2, g2, wds, p.eta, p.eps, p.rescale_grad))


def lars_rates(lrs, w_sum_sq, g_sum_sq, wds, eta, eps, rescale_grad):
    """The multi_lars formula on float32 numpy vectors."""
    f = np.float32
    w_norm, g_norm = np.sqrt(w_sum_sq.astype(f)), np.sqrt(g_sum_sq.astype(f))
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = lrs * f(eta) * w_norm / (g_norm * f(rescale_grad) + wds * w_norm + f(eps))
    return np.where((w_sum_sq > 0) & (g_sum_sq > 0), scaled, lrs).astype(f)


def _store_host(k, dst, values):
    """Write a small host vector into an output buffer of either device."""
    if isinstance(dst, np.ndarray):
        dst[...] = values.reshape(dst.shape)
    else:
        dst.copy_to_device(np.ascontiguousarray(values.reshape(dst.shape), dtype=dst.dtype))
