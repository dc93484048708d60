"""The Module contract as hypothesis properties, runnable against any Module-like class.

Each entry of :data:`CONTRACT` is one promise a Module makes (``docs/module_contract.md``
lists them with the property that checks each). A property is written against a *factory*
``make_module(symbol, data_names, label_names, context, **options)`` rather than against
:class:`~lightmod.module.Module` itself, so the same checks run on a user's subclass or on a
re-implementation built on ``BaseModule``::

    from lightmod.testing.contract import check_module_contract
    check_module_contract(lambda symbol, data_names, label_names, context, **options:
                          MyModule(symbol, data_names, label_names, context=context, **options))

``options`` is what a property needs beyond the four positional arguments:
``work_load_list`` and ``fixed_param_names`` (a factory that cannot honour one lists it in
``check_module_contract(..., unsupported=...)`` and the properties needing it are left out).

Every expected value comes from a plain model: one float64 executor on the whole batch
(:class:`~lightmod.testing.reference.ReferenceNet`) and MXNet's SGD written out in numpy
(:func:`~lightmod.testing.reference.sgd_step`).
"""
import contextlib
import logging
import os
import shutil
import tempfile
import warnings

import numpy as np
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from .. import io as _io
from .. import metric as _metric
from .. import ndarray as _nd
from .. import symbol as _sym
from ..base import MXNetError
from ..context import cpu
from ..initializer import InitDesc, Uniform
from ..module import BucketingModule, Module
from ..monitor import Monitor
from ..name import NameManager
from . import _profile
from .reference import ReferenceNet, sgd_step, weight_decay_applies

__all__ = ["CONTRACT", "ContractProperty", "ContractNet", "contract_nets", "module_factory",
           "check_module_contract", "property_names"]

RTOL, ATOL = 2e-4, 2e-5
QUIET = logging.getLogger("lightmod.testing.contract")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False

LABEL = "lro_label"


def module_factory(cls=Module):
    """The factory for ``cls`` (a Module subclass with Module's constructor)."""
    def make(symbol, data_names, label_names, context, **options):
        return cls(symbol, data_names=data_names, label_names=label_names, context=context,
                   logger=QUIET, **options)
    make.__name__ = "make_" + cls.__name__
    return make


# ---------------------------------------------------------------------------------------------
# networks
# ---------------------------------------------------------------------------------------------
class ContractNet:
    """A small regression network: ``data (batch, features)`` -> hidden layers -> a
    ``FullyConnected`` head -> ``LinearRegressionOutput`` named ``lro`` (label ``lro_label``).

    ``batchnorm`` adds a BatchNorm after the first layer (training mode then mixes samples);
    ``shared`` applies one weight twice (two layers, one parameter); ``blocked`` adds a branch
    behind BlockGrad, whose parameters get no gradient; ``dropout`` is the Dropout rate before
    the head (0: none).
    """

    def __init__(self, features, hidden, outputs, act, batchnorm=False, shared=False,
                 blocked=False, dropout=0.0, lr_mults=None, wd_mults=None):
        self.features, self.hidden, self.outputs = features, hidden, outputs
        self.act, self.batchnorm, self.shared, self.blocked = act, batchnorm, shared, blocked
        self.dropout = dropout
        self.lr_mults = dict(lr_mults or {})
        self.wd_mults = dict(wd_mults or {})
        self.data_names = ["data"]
        self.label_names = [LABEL]
        self.symbol = self._build()
        self.param_names = [n for n in self.symbol.list_arguments() if n not in ("data", LABEL)]
        self.aux_names = self.symbol.list_auxiliary_states()

    def __repr__(self):
        return ("ContractNet(features=%d, hidden=%d, outputs=%d, act=%r, batchnorm=%s, "
                "shared=%s, blocked=%s, dropout=%s, lr_mults=%s, wd_mults=%s)"
                % (self.features, self.hidden, self.outputs, self.act, self.batchnorm,
                   self.shared, self.blocked, self.dropout, self.lr_mults, self.wd_mults))

    def _weight(self, name):
        attrs = {}
        if name in self.lr_mults:
            attrs["lr_mult"] = self.lr_mults[name]
        if name in self.wd_mults:
            attrs["wd_mult"] = self.wd_mults[name]
        return _sym.Variable(name, **attrs)

    def _build(self):
        with NameManager():
            data = _sym.Variable("data")
            net = _sym.FullyConnected(data, weight=self._weight("fc1_weight"),
                                      num_hidden=self.hidden, name="fc1")
            if self.batchnorm:
                net = _sym.BatchNorm(net, fix_gamma=False, momentum=0.8, name="bn")
            net = _sym.Activation(net, act_type=self.act, name="act1")
            if self.shared:
                tied = self._weight("tied_weight")
                net = _sym.FullyConnected(net, weight=tied, num_hidden=self.hidden,
                                          no_bias=True, name="tied_a")
                net = _sym.Activation(net, act_type="tanh", name="act_tied")
                net = _sym.FullyConnected(net, weight=tied, num_hidden=self.hidden,
                                          no_bias=True, name="tied_b")
            if self.blocked:
                side = _sym.FullyConnected(data, num_hidden=self.hidden, name="side")
                net = net + _sym.BlockGrad(side, name="side_blocked")
            if self.dropout:
                net = _sym.Dropout(net, p=self.dropout, name="drop")
            net = _sym.FullyConnected(net, weight=self._weight("head_weight"),
                                      num_hidden=self.outputs, name="head")
            return _sym.LinearRegressionOutput(net, name="lro")

    def data_shapes(self, batch):
        return [("data", (batch, self.features))]

    def label_shapes(self, batch):
        return [(LABEL, (batch, self.outputs))]

    def shapes(self):
        arg_shapes, _, aux_shapes = self.symbol.infer_shape(data=(2, self.features),
                                                            lro_label=(2, self.outputs))
        args = dict(zip(self.symbol.list_arguments(), arg_shapes))
        return ({n: args[n] for n in self.param_names},
                dict(zip(self.aux_names, aux_shapes)))

    def params(self, seed):
        """Parameter values (float32, uniform in [-0.5, 0.5]) and auxiliary states (moving
        means near 0, moving variances near 1)."""
        rng = np.random.default_rng(seed)
        arg_shapes, aux_shapes = self.shapes()
        args = {n: rng.uniform(-0.5, 0.5, s).astype(np.float32) for n, s in arg_shapes.items()}
        aux = {n: (rng.uniform(0.5, 1.5, s) if n.endswith("var") else
                   rng.uniform(-0.2, 0.2, s)).astype(np.float32)
               for n, s in aux_shapes.items()}
        return args, aux

    def batches(self, batch, count, seed):
        rng = np.random.default_rng(seed + 7)
        return [(rng.uniform(-1, 1, (batch, self.features)).astype(np.float32),
                 rng.uniform(-1, 1, (batch, self.outputs)).astype(np.float32))
                for _ in range(count)]


@st.composite
def contract_nets(draw, batchnorm=None, dropout=False, multipliers=False):
    """A :class:`ContractNet`. ``batchnorm`` None draws it; ``dropout`` True draws a rate;
    ``multipliers`` draws ``lr_mult``/``wd_mult`` attributes on some weights."""
    bn = draw(st.booleans()) if batchnorm is None else batchnorm
    lr_mults, wd_mults = {}, {}
    if multipliers:
        for name in ("fc1_weight", "head_weight"):
            if draw(st.booleans()):
                lr_mults[name] = draw(st.sampled_from([0.0, 0.5, 2.0]))
            if draw(st.booleans()):
                wd_mults[name] = draw(st.sampled_from([0.0, 3.0]))
    return ContractNet(features=draw(st.integers(1, 4)), hidden=draw(st.integers(2, 5)),
                       outputs=draw(st.integers(1, 3)),
                       act=draw(st.sampled_from(["tanh", "sigmoid", "relu"])),
                       batchnorm=bn, shared=draw(st.booleans()), blocked=draw(st.booleans()),
                       dropout=draw(st.sampled_from([0.3, 0.5])) if dropout else 0.0,
                       lr_mults=lr_mults, wd_mults=wd_mults)


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _contexts(n):
    return [cpu(i) for i in range(n)]


def _batch(x, y=None, pad=0):
    label = None if y is None else [_nd.array(y)]
    provide_label = None if y is None else [_io.DataDesc(LABEL, y.shape)]
    return _io.DataBatch([_nd.array(x)], label, pad=pad,
                         provide_data=[_io.DataDesc("data", x.shape)],
                         provide_label=provide_label)


def _nd_dict(values):
    return {k: _nd.array(v) for k, v in values.items()}


def _np_dict(values):
    return {k: v.asnumpy().astype(np.float64) for k, v in values.items()}


def _close(actual, expected, what, rtol=RTOL, atol=ATOL):
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=what)


def _ready(make, net, batch, devices=1, seed=0, for_training=True, inputs_need_grad=False,
           grad_req="write", **options):
    """A module bound for ``batch`` with ``net.params(seed)`` set; returns (module, args, aux)."""
    mod = make(net.symbol, net.data_names, net.label_names, _contexts(devices), **options)
    mod.bind(net.data_shapes(batch), net.label_shapes(batch), for_training=for_training,
             inputs_need_grad=inputs_need_grad, grad_req=grad_req)
    args, aux = net.params(seed)
    mod.init_params(arg_params=_nd_dict(args), aux_params=_nd_dict(aux))
    return mod, args, aux


def _sgd(mod, lr, momentum=0.0, wd=0.0, kvstore="local"):
    mod.init_optimizer(kvstore=kvstore, optimizer="sgd",
                       optimizer_params={"learning_rate": lr, "momentum": momentum, "wd": wd})


def _expected_sgd(net, args, batches, lr, momentum, wd, fixed=(), batch=None):
    """What SGD (rescale 1/batch, the symbol's lr/wd multipliers, weight decay on weights
    only) makes of ``args`` over ``batches``."""
    ref = ReferenceNet(net.symbol, net.data_names, net.label_names)
    weights = {k: v.astype(np.float64) for k, v in args.items()}
    moms = {k: np.zeros_like(v) for k, v in weights.items()}
    for x, y in batches:
        grads = ref.gradients(weights, {"data": x, LABEL: y})
        for name in weights:
            if name in fixed:
                continue
            wd_mult = net.wd_mults.get(name, 1.0 if weight_decay_applies(name) else 0.0)
            weights[name], moms[name] = sgd_step(
                weights[name], grads[name], moms[name], lr * net.lr_mults.get(name, 1.0),
                momentum, wd * wd_mult, rescale_grad=1.0 / (batch or len(x)))
    return weights


def _close_steps(got, want, start, names):
    """Compare what training changed (small steps would hide in the weights' values)."""
    for name in names:
        _close(got[name] - start[name], want[name] - start[name], name)


def _train(mod, batches):
    for x, y in batches:
        mod.forward_backward(_batch(x, y))
        mod.update()


@contextlib.contextmanager
def _environ(**values):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update({k: str(v) for k, v in values.items()})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _random_seed(seed):
    from .. import random as _random
    _random.seed(seed)
    yield


@contextlib.contextmanager
def _tmpdir():
    path = tempfile.mkdtemp(prefix="lightmod-contract-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _raises(exc_types, fn, what):
    try:
        fn()
    except exc_types:
        return
    raise AssertionError("%s: expected %s" % (what, " or ".join(t.__name__ for t in exc_types)))


_SEED = st.integers(0, 2 ** 16)
_LR = st.sampled_from([0.05, 0.2, 0.5])


# ---------------------------------------------------------------------------------------------
# the properties: each `_prop_*` takes the factory and returns a hypothesis test
# ---------------------------------------------------------------------------------------------
def _prop_forward_mode(make, settings):
    @settings
    @given(net=contract_nets(batchnorm=True), batch=st.integers(2, 6), seed=_SEED,
           for_training=st.booleans())
    def forward_mode_follows_for_training(net, batch, seed, for_training):
        """forward(is_train=None) runs in the mode the module was bound for: BatchNorm
        normalises with the batch's statistics in training and with the moving statistics
        in inference; an explicit is_train overrides it."""
        mod, args, aux = _ready(make, net, batch, seed=seed, for_training=for_training)
        x, y = net.batches(batch, 1, seed)[0]
        ref = ReferenceNet(net.symbol, net.data_names, net.label_names)
        inputs = {"data": x, LABEL: y}
        mod.forward(_batch(x, y))
        _close(mod.get_outputs()[0].asnumpy(),
               ref.forward(args, inputs, is_train=for_training, aux=aux)[0],
               "forward(is_train=None) bound with for_training=%s" % for_training)
        mod.forward(_batch(x, y), is_train=False)
        _close(mod.get_outputs()[0].asnumpy(), ref.forward(args, inputs, False, aux)[0],
               "forward(is_train=False)")
    return forward_mode_follows_for_training


def _prop_dropout_mode(make, settings):
    @settings
    @given(rate=st.sampled_from([0.3, 0.5]), batch=st.integers(4, 8), seed=_SEED)
    def dropout_only_in_training(rate, batch, seed):
        """Dropout keeps each value scaled by 1/(1-p) or zeroes it in training mode, and is
        the identity in inference mode."""
        with NameManager():
            net = _sym.LinearRegressionOutput(
                _sym.Dropout(_sym.Variable("data"), p=rate, name="drop"), name="lro")
        mod = make(net, ["data"], [LABEL], _contexts(1))
        mod.bind([("data", (batch, 16))], [(LABEL, (batch, 16))])
        mod.init_params()
        x = np.random.default_rng(seed).uniform(0.5, 1.5, (batch, 16)).astype(np.float32)
        y = np.zeros_like(x)
        mod.forward(_batch(x, y), is_train=False)
        _close(mod.get_outputs()[0].asnumpy(), x, "Dropout in inference mode", 0, 0)
        mod.forward(_batch(x, y), is_train=True)
        out = mod.get_outputs()[0].asnumpy()
        kept = out != 0
        _close(out[kept], x[kept] / (1 - rate), "kept values are scaled by 1/(1-p)", 1e-5, 0)
        dropped = 1 - kept.mean()
        assert 0.1 < dropped < 0.8, "Dropout(p=%s) dropped %.2f of 16*%d values" % (
            rate, dropped, batch)
    return dropout_only_in_training


def _prop_fixed_params(make, settings):
    @settings
    @given(net=contract_nets(batchnorm=False), batch=st.integers(1, 5), seed=_SEED,
           lr=_LR, data=st.data())
    def fixed_params_stay(net, batch, seed, lr, data):
        """fixed_param_names are never updated (and decay does not touch them); the others
        follow SGD on the batch gradient."""
        fixed = data.draw(st.lists(st.sampled_from(net.param_names), unique=True, max_size=3),
                          "fixed")
        mod, args, _ = _ready(make, net, batch, seed=seed, fixed_param_names=fixed)
        _sgd(mod, lr, momentum=0.9, wd=0.01)
        batches = net.batches(batch, 2, seed)
        _train(mod, batches)
        got = _np_dict(mod.get_params()[0])
        want = _expected_sgd(net, args, batches, lr, 0.9, 0.01, fixed=fixed)
        for name in net.param_names:
            if name in fixed:
                np.testing.assert_array_equal(got[name], args[name], "fixed %s moved" % name)
            else:
                _close(got[name] - args[name], want[name] - args[name], name)
    return fixed_params_stay


def _prop_grad_req(make, settings):
    @settings
    @given(net=contract_nets(batchnorm=False), batch=st.integers(1, 5), seed=_SEED,
           devices=st.integers(1, 2), data=st.data())
    def grad_req_per_argument(net, batch, seed, devices, data):
        """grad_req per argument: 'write' holds the last batch's gradient, 'add' the sum over
        batches, 'null' none (no gradient array)."""
        batch = max(batch, devices)
        reqs = {n: data.draw(st.sampled_from(["write", "add", "null"]), n)
                for n in net.param_names}
        mod, args, _ = _ready(make, net, batch, devices=devices, seed=seed, grad_req=reqs)
        batches = net.batches(batch, 2, seed)
        ref = ReferenceNet(net.symbol, net.data_names, net.label_names)
        per_batch = [ref.gradients(args, {"data": x, LABEL: y}) for x, y in batches]
        for x, y in batches:
            mod.forward_backward(_batch(x, y))
        group = mod._exec_group
        for name, grads in zip(group.param_names, group.grad_arrays):
            if reqs[name] == "null":
                assert all(g is None for g in grads), "%s has grad_req 'null'" % name
                continue
            got = sum(g.asnumpy().astype(np.float64) for g in grads)
            want = per_batch[-1][name] if reqs[name] == "write" else \
                per_batch[0][name] + per_batch[1][name]
            _close(got, want, "%s with grad_req %r" % (name, reqs[name]))
    return grad_req_per_argument


def _prop_input_grads(make, settings):
    @settings
    @given(net=contract_nets(batchnorm=False), batch=st.integers(2, 6), seed=_SEED,
           devices=st.integers(1, 3))
    def input_gradients(net, batch, seed, devices):
        """With inputs_need_grad, get_input_grads() is the loss gradient with respect to the
        data, merged over devices in batch order."""
        batch = max(batch, devices)
        mod, args, _ = _ready(make, net, batch, devices=devices, seed=seed,
                              inputs_need_grad=True)
        x, y = net.batches(batch, 1, seed)[0]
        mod.forward_backward(_batch(x, y))
        got = mod.get_input_grads()[0].asnumpy()
        sym = net.symbol
        exe = sym.simple_bind(cpu(), grad_req="write", data=x.shape, lro_label=y.shape,
                              type_dict={n: np.float64 for n in sym.list_arguments()})
        for name, value in list(args.items()) + [("data", x), (LABEL, y)]:
            exe.arg_dict[name][:] = value
        exe.forward(is_train=True)
        exe.backward()
        _close(got, exe.grad_dict["data"].asnumpy(), "input gradient")
    return input_gradients


def _prop_multipliers(make, settings):
    @settings
    @given(net=contract_nets(batchnorm=False, multipliers=True), batch=st.integers(1, 5),
           seed=_SEED, lr=_LR, wd=st.sampled_from([0.0, 0.05]))
    def lr_and_wd_multipliers(net, batch, seed, lr, wd):
        """lr_mult / wd_mult symbol attributes scale each parameter's rate and decay; weight
        decay applies to *_weight parameters only (biases are not decayed), and the gradient
        is rescaled by 1/batch size."""
        mod, args, _ = _ready(make, net, batch, seed=seed)
        _sgd(mod, lr, momentum=0.0, wd=wd)
        batches = net.batches(batch, 2, seed)
        _train(mod, batches)
        got = _np_dict(mod.get_params()[0])
        want = _expected_sgd(net, args, batches, lr, 0.0, wd)
        _close_steps(got, want, args, net.param_names)
    return lr_and_wd_multipliers


def _prop_optimizer_multipliers(make, settings):
    @settings
    @given(net=contract_nets(batchnorm=False), batch=st.integers(1, 4), seed=_SEED,
           mult=st.sampled_from([0.0, 0.5, 3.0]))
    def optimizer_set_lr_mult(net, batch, seed, mult):
        """Optimizer.set_lr_mult({name: m}) after init_optimizer scales that parameter's
        step by m."""
        mod, args, _ = _ready(make, net, batch, seed=seed)
        _sgd(mod, 0.1)
        mod._optimizer.set_lr_mult({"head_weight": mult})
        batches = net.batches(batch, 1, seed)
        _train(mod, batches)
        got = _np_dict(mod.get_params()[0])
        scaled = ContractNet(net.features, net.hidden, net.outputs, net.act,
                             shared=net.shared, blocked=net.blocked,
                             lr_mults={"head_weight": mult})
        want = _expected_sgd(scaled, args, batches, 0.1, 0.0, 0.0)
        _close_steps(got, want, args, net.param_names)
    return optimizer_set_lr_mult


def _prop_kvstore(make, settings):
    @settings
    @given(net=contract_nets(batchnorm=False), batch=st.integers(2, 6), seed=_SEED,
           devices=st.integers(1, 3), kvstore=st.sampled_from([None, "local", "device"]),
           on_kvstore=st.booleans(), momentum=st.sampled_from([0.0, 0.9]))
    def kvstore_and_update_on_kvstore(net, batch, seed, devices, kvstore, on_kvstore,
                                      momentum):
        """The kvstore type (none, 'local', 'device') and whether updates run on it
        (MXNET_UPDATE_ON_KVSTORE) do not change the result: SGD on the summed gradient."""
        batch = max(batch, devices)
        if kvstore is None:
            devices = 1         # without a store each device steps alone (see get_params)
        with _environ(MXNET_UPDATE_ON_KVSTORE=int(on_kvstore)):
            mod, args, _ = _ready(make, net, batch, devices=devices, seed=seed)
            _sgd(mod, 0.2, momentum=momentum, kvstore=kvstore)
            batches = net.batches(batch, 3, seed)
            _train(mod, batches)
        got = _np_dict(mod.get_params()[0])
        want = _expected_sgd(net, args, batches, 0.2, momentum, 0.0)
        _close_steps(got, want, args, net.param_names)
    return kvstore_and_update_on_kvstore


def _prop_devices(make, settings, work_loads=True):
    @settings
    @given(net=contract_nets(batchnorm=False), seed=_SEED, data=st.data())
    def devices_equal_one(net, seed, data):
        """Several devices (uneven work loads included) compute what one device computes:
        the same outputs, the same gradients, the same updated parameters."""
        devices = data.draw(st.integers(2, 3), "devices")
        batch = data.draw(st.integers(devices, 7), "batch")
        options = {}
        if work_loads:
            loads = data.draw(st.lists(st.integers(1, 3), min_size=devices,
                                       max_size=devices), "work_load_list")
            counts = [round(w * batch / sum(loads)) for w in loads]
            if min(counts[:-1] + [batch - sum(counts[:-1])]) >= 1:
                options["work_load_list"] = loads
        mod, args, _ = _ready(make, net, batch, devices=devices, seed=seed, **options)
        _sgd(mod, 0.3, momentum=0.5)
        batches = net.batches(batch, 2, seed)
        _train(mod, batches)
        x, y = batches[0]
        mod.forward(_batch(x, y), is_train=False)
        got = _np_dict(mod.get_params()[0])
        want = _expected_sgd(net, args, batches, 0.3, 0.5, 0.0)
        _close_steps(got, want, args, net.param_names)
        ref = ReferenceNet(net.symbol, net.data_names, net.label_names)
        _close(mod.get_outputs()[0].asnumpy(),
               ref.forward(want, {"data": x, LABEL: y})[0], "outputs")
    return devices_equal_one


def _prop_init_params(make, settings):
    @settings
    @given(net=contract_nets(), seed=_SEED, data=st.data())
    def init_and_set_params_flags(net, seed, data):
        """init_params/set_params: a missing parameter is an error unless allow_missing (then
        the initializer fills it); set_params(allow_missing=True) refuses an unknown name
        unless allow_extra; a second init_params is ignored unless force_init; set_params
        replaces the values, auxiliary states included."""
        args, aux = net.params(seed)
        missing = data.draw(st.sampled_from(net.param_names), "missing")
        partial = {k: v for k, v in args.items() if k != missing}

        def fresh():
            mod = make(net.symbol, net.data_names, net.label_names, _contexts(1))
            mod.bind(net.data_shapes(2), net.label_shapes(2))
            return mod

        mod = fresh()
        _raises((RuntimeError, MXNetError, ValueError), lambda: mod.init_params(
            arg_params=_nd_dict(partial), aux_params=_nd_dict(aux), allow_missing=False),
            "init_params without %s and allow_missing=False" % missing)
        mod = fresh()
        initializer = Uniform(0.3)
        with _random_seed(seed):
            mod.init_params(initializer=initializer, arg_params=_nd_dict(partial),
                            aux_params=_nd_dict(aux), allow_missing=True)
        got = _np_dict(mod.get_params()[0])
        # only the missing parameter draws from the generator, so the same seed refills it
        with _random_seed(seed):
            filled = _nd.zeros(args[missing].shape)
            initializer(InitDesc(missing, net.symbol.attr_dict().get(missing)), filled)
        np.testing.assert_array_equal(got[missing], filled.asnumpy(),
                                      "allow_missing fills %s with the initializer" % missing)
        for name, value in partial.items():
            np.testing.assert_array_equal(got[name], value, name)
        extra = dict(args, not_a_parameter=np.zeros(2, np.float32))
        mod = fresh()
        mod.init_params(arg_params=_nd_dict(args), aux_params=_nd_dict(aux))
        _raises((ValueError, MXNetError), lambda: mod.set_params(
            _nd_dict(extra), _nd_dict(aux), allow_missing=True, allow_extra=False),
            "set_params with an unknown name and allow_extra=False")
        mod.set_params(_nd_dict(extra), _nd_dict(aux), allow_missing=True, allow_extra=True)
        other, other_aux = net.params(seed + 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mod.init_params(arg_params=_nd_dict(other), aux_params=_nd_dict(other_aux))
        got = _np_dict(mod.get_params()[0])
        for name in net.param_names:
            np.testing.assert_array_equal(got[name], args[name],
                                          "init_params without force_init changed %s" % name)
        mod.init_params(arg_params=_nd_dict(other), aux_params=_nd_dict(other_aux),
                        force_init=True)
        got = _np_dict(mod.get_params()[0])
        for name in net.param_names:
            np.testing.assert_array_equal(got[name], other[name], "force_init " + name)
        mod.set_params(_nd_dict(args), _nd_dict(aux))
        got_args, got_aux = mod.get_params()
        for name in net.param_names:
            np.testing.assert_array_equal(got_args[name].asnumpy(), args[name], "set " + name)
        for name in net.aux_names:
            np.testing.assert_array_equal(got_aux[name].asnumpy(), aux[name], "set " + name)
    return init_and_set_params_flags


def _prop_get_params_fresh(make, settings):
    @settings
    @given(net=contract_nets(batchnorm=False), batch=st.integers(2, 5), seed=_SEED,
           devices=st.integers(1, 3), steps=st.integers(1, 3))
    def get_params_after_update(net, batch, seed, devices, steps):
        """get_params() after any number of updates returns the devices' current values
        (never a stale copy), and every device holds the same values."""
        batch = max(batch, devices)
        mod, args, _ = _ready(make, net, batch, devices=devices, seed=seed)
        _sgd(mod, 0.3)
        batches = net.batches(batch, steps, seed)
        for i in range(steps):
            _train(mod, batches[i:i + 1])
            got = _np_dict(mod.get_params()[0])
            want = _expected_sgd(net, args, batches[:i + 1], 0.3, 0.0, 0.0)
            for name in net.param_names:
                _close(got[name] - args[name], want[name] - args[name],
                       "%s after %d updates" % (name, i + 1))
    return get_params_after_update


def _prop_get_params_average(make, settings):
    @settings
    @given(net=contract_nets(batchnorm=False), seed=_SEED, devices=st.integers(2, 3),
           lr=_LR, data=st.data())
    def get_params_averages_devices(net, seed, devices, lr, data):
        """Without a kvstore every device steps with its own slice's gradient, and
        get_params() returns the average of the devices' parameters."""
        batch = data.draw(st.integers(devices, 6), "batch")
        mod, args, _ = _ready(make, net, batch, devices=devices, seed=seed)
        _sgd(mod, lr, kvstore=None)
        x, y = net.batches(batch, 1, seed)[0]
        _train(mod, [(x, y)])
        ref = ReferenceNet(net.symbol, net.data_names, net.label_names)
        sizes = [round(batch / devices)] * devices
        sizes[-1] = batch - sum(sizes[:-1])
        starts = np.cumsum([0] + sizes)
        steps = []
        for k in range(devices):
            part = slice(starts[k], starts[k + 1])
            grads = ref.gradients(args, {"data": x[part], LABEL: y[part]})
            steps.append({n: sgd_step(args[n].astype(np.float64), grads[n], None, lr,
                                      rescale_grad=1.0 / batch)[0] for n in net.param_names})
        got = _np_dict(mod.get_params()[0])
        for name in net.param_names:
            want = np.mean([step[name] for step in steps], axis=0)
            _close(got[name] - args[name], want - args[name], name)
    return get_params_averages_devices


def _prop_aux_round_trip(make, settings):
    @settings
    @given(net=contract_nets(batchnorm=True), batch=st.integers(2, 5), seed=_SEED)
    def auxiliary_states_round_trip(net, batch, seed):
        """BatchNorm's moving statistics move in training, and survive save_checkpoint/load,
        save_params/load_params and set_params; the loaded module predicts the same."""
        mod, args, aux = _ready(make, net, batch, seed=seed)
        _sgd(mod, 0.1)
        batches = net.batches(batch, 2, seed)
        _train(mod, batches)
        got_args, got_aux = mod.get_params()
        moved = [n for n in net.aux_names
                 if not np.allclose(got_aux[n].asnumpy(), aux[n])]
        assert moved, "training left every moving statistic unchanged"
        x, y = batches[0]
        mod.forward(_batch(x, y), is_train=False)
        want = mod.get_outputs()[0].asnumpy()
        with _tmpdir() as tmp:
            prefix = os.path.join(tmp, "net")
            mod.save_checkpoint(prefix, 3)
            loaded = type(mod).load(prefix, 3, data_names=net.data_names,
                                    label_names=net.label_names, context=_contexts(1))
            loaded.bind(net.data_shapes(batch), net.label_shapes(batch), for_training=False)
            loaded.forward(_batch(x, y), is_train=False)
            _close(loaded.get_outputs()[0].asnumpy(), want, "after save_checkpoint/load")
            fname = os.path.join(tmp, "net.params")
            mod.save_params(fname)
            other = make(net.symbol, net.data_names, net.label_names, _contexts(1))
            other.bind(net.data_shapes(batch), net.label_shapes(batch), for_training=False)
            other.load_params(fname)
            for name, value in other.get_params()[1].items():
                np.testing.assert_array_equal(value.asnumpy(), got_aux[name].asnumpy(), name)
            other.forward(_batch(x, y), is_train=False)
            _close(other.get_outputs()[0].asnumpy(), want, "after save_params/load_params")
        third = make(net.symbol, net.data_names, net.label_names, _contexts(1))
        third.bind(net.data_shapes(batch), net.label_shapes(batch), for_training=False)
        third.init_params()
        third.set_params(got_args, got_aux)
        third.forward(_batch(x, y), is_train=False)
        _close(third.get_outputs()[0].asnumpy(), want, "after set_params")
    return auxiliary_states_round_trip


def _prop_resume(make, settings):
    @settings
    @given(net=contract_nets(batchnorm=False), batch=st.integers(1, 4), seed=_SEED,
           optimizer=st.sampled_from([("sgd", {"learning_rate": 0.1, "momentum": 0.9}),
                                      ("rmsprop", {"learning_rate": 0.05}),
                                      ("adagrad", {"learning_rate": 0.1}),
                                      ("nag", {"learning_rate": 0.1, "momentum": 0.8})]),
           split=st.integers(1, 3))
    def resume_equals_uninterrupted(net, batch, seed, optimizer, split):
        """Training resumed from save_checkpoint(save_optimizer_states=True) and
        load(load_optimizer_states=True) ends where uninterrupted training ends: momentum
        and other optimizer state survive the round trip."""
        batches = net.batches(batch, 4, seed)

        def start():
            mod, _, _ = _ready(make, net, batch, seed=seed)
            mod.init_optimizer(optimizer=optimizer[0], optimizer_params=optimizer[1])
            return mod

        straight = start()
        _train(straight, batches)
        first = start()
        _train(first, batches[:split])
        with _tmpdir() as tmp:
            prefix = os.path.join(tmp, "resume")
            first.save_checkpoint(prefix, 1, save_optimizer_states=True)
            resumed = type(first).load(prefix, 1, load_optimizer_states=True,
                                       data_names=net.data_names, label_names=net.label_names,
                                       context=_contexts(1))
            resumed.bind(net.data_shapes(batch), net.label_shapes(batch))
            resumed.init_optimizer(optimizer=optimizer[0], optimizer_params=optimizer[1])
            _train(resumed, batches[split:])
        want = _np_dict(straight.get_params()[0])
        got = _np_dict(resumed.get_params()[0])
        for name in net.param_names:
            _close(got[name], want[name], name)
    return resume_equals_uninterrupted


def _prop_batching(make, settings):
    @settings
    @given(net=contract_nets(batchnorm=None), n=st.integers(1, 11), b1=st.integers(1, 5),
           b2=st.integers(1, 5), seed=_SEED)
    def outputs_do_not_depend_on_batching(net, n, b1, b2, seed):
        """predict() over a dataset gives each sample the same output whatever the batch
        size: reshape to another batch keeps the parameters, and the padding of a last,
        partial batch is cut from the result."""
        args, aux = net.params(seed)
        x = np.random.default_rng(seed).uniform(-1, 1, (n, net.features)).astype(np.float32)
        mod = make(net.symbol, net.data_names, net.label_names, _contexts(1))
        mod.bind(net.data_shapes(b1), net.label_shapes(b1), for_training=False)
        mod.init_params(arg_params=_nd_dict(args), aux_params=_nd_dict(aux))
        # the second iterator's batch size re-shapes the bound module
        y = np.zeros((n, net.outputs), np.float32)
        outs = [mod.predict(_io.NDArrayIter(x, y, batch_size=b, last_batch_handle="pad",
                                            label_name=LABEL)).asnumpy() for b in (b1, b2)]
        ref = ReferenceNet(net.symbol, net.data_names, net.label_names)
        want = ref.forward(args, {"data": x, LABEL: np.zeros((n, net.outputs))}, False, aux)[0]
        _close(outs[0], want, "predict with batch %d" % b1)
        _close(outs[1], want, "predict with batch %d" % b2)
    return outputs_do_not_depend_on_batching


def _prop_score(make, settings):
    @settings
    @given(net=contract_nets(batchnorm=False), n=st.integers(1, 11), b=st.integers(1, 5),
           seed=_SEED)
    def score_and_iter_predict_with_padding(net, n, b, seed):
        """iter_predict yields each batch's outputs without its padding (pad tells how many
        rows were added); score() evaluates the metric on whole batches, padding included."""
        args, aux = net.params(seed)
        rng = np.random.default_rng(seed)
        x = rng.uniform(-1, 1, (n, net.features)).astype(np.float32)
        y = rng.uniform(-1, 1, (n, net.outputs)).astype(np.float32)
        mod = make(net.symbol, net.data_names, net.label_names, _contexts(1))
        mod.bind(net.data_shapes(b), net.label_shapes(b), for_training=False)
        mod.init_params(arg_params=_nd_dict(args), aux_params=_nd_dict(aux))
        it = _io.NDArrayIter(x, y, batch_size=b, last_batch_handle="pad", label_name=LABEL)
        ref = ReferenceNet(net.symbol, net.data_names, net.label_names)
        rows = 0
        for outputs, nbatch, batch in mod.iter_predict(it):
            real = b - batch.pad
            assert outputs[0].shape[0] == real, "iter_predict kept the padding"
            want = ref.forward(args, {"data": x[rows:rows + real],
                                      LABEL: y[rows:rows + real]}, False, aux)[0]
            _close(outputs[0].asnumpy(), want, "iter_predict batch %d" % nbatch)
            rows += real
        assert rows == n
        # the last batch is filled up cyclically from the first samples
        rows_seen = np.arange(n + (-n) % b) % n
        px, py = x[rows_seen], y[rows_seen]
        pred = ref.forward(args, {"data": px, LABEL: py}, False, aux)[0]
        # MSE averages the per-batch mean squared errors; the padded rows count
        want_mse = np.mean([np.mean((pred[i:i + b] - py[i:i + b]) ** 2)
                            for i in range(0, len(px), b)])
        (name, value), = mod.score(it, _metric.MSE())
        assert name == "mse"
        _close(value, want_mse, "score() MSE over the padded batches", 1e-4, 1e-6)
    return score_and_iter_predict_with_padding


def _prop_fit(make, settings):
    @settings
    @given(net=contract_nets(batchnorm=False), n=st.integers(2, 8), b=st.integers(1, 4),
           seed=_SEED, begin=st.integers(0, 2), epochs=st.integers(1, 3),
           stop_after=st.sampled_from([None, 0, 1]))
    def fit_runs_the_epochs(net, n, b, seed, begin, epochs, stop_after):
        """fit() trains epochs begin_epoch..num_epoch-1: one update per batch (the same as
        forward_backward + update by hand), epoch_end_callback once per epoch with its number,
        batch_end_callback once per batch, validation scored every epoch on eval_data; a
        callback raising StopTraining ends training after that epoch."""
        from ..fit_callbacks import StopTraining
        b = min(b, n)
        args, aux = net.params(seed)
        rng = np.random.default_rng(seed)
        x = rng.uniform(-1, 1, (n, net.features)).astype(np.float32)
        y = rng.uniform(-1, 1, (n, net.outputs)).astype(np.float32)
        it = _io.NDArrayIter(x, y, batch_size=b, last_batch_handle="discard", label_name=LABEL)
        mod = make(net.symbol, net.data_names, net.label_names, _contexts(1))
        seen = {"epochs": [], "batches": 0, "scores": 0}

        def on_epoch(epoch, *_):
            seen["epochs"].append(epoch)
            if stop_after is not None and len(seen["epochs"]) > stop_after:
                raise StopTraining("enough")

        def on_batch(param):
            seen["batches"] += 1

        def on_eval(param):
            seen["scores"] += 1

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mod.fit(it, eval_data=it, eval_metric="mse", epoch_end_callback=on_epoch,
                    batch_end_callback=on_batch, eval_end_callback=on_eval,
                    arg_params=_nd_dict(args), aux_params=_nd_dict(aux),
                    optimizer_params={"learning_rate": 0.1}, begin_epoch=begin,
                    num_epoch=begin + epochs)
        ran = epochs if stop_after is None else min(epochs, stop_after + 1)
        assert seen["epochs"] == list(range(begin, begin + ran)), seen
        per_epoch = n // b
        assert seen["batches"] == per_epoch * ran, seen
        batches = [(x[i * b:(i + 1) * b], y[i * b:(i + 1) * b]) for i in range(per_epoch)]
        want = _expected_sgd(net, args, batches * ran, 0.1, 0.0, 0.0)
        got = _np_dict(mod.get_params()[0])
        _close_steps(got, want, args, net.param_names)
        assert seen["scores"] >= ran - (0 if stop_after is None else 1), seen
    return fit_runs_the_epochs


def _prop_monitor(make, settings):
    @settings
    @given(net=contract_nets(batchnorm=False), batch=st.integers(1, 4), seed=_SEED,
           interval=st.integers(1, 3))
    def monitor_reports_every_interval(net, batch, seed, interval):
        """install_monitor: on every interval-th step (tic/toc around a forward), toc() gives
        the statistic of each matching array, weights included, computed on its values."""
        mod, args, _ = _ready(make, net, batch, seed=seed)
        mon = Monitor(interval, stat_func=lambda a: _nd.array([float(np.abs(
            a.asnumpy()).max())]), pattern=".*weight")
        mod.install_monitor(mon)
        x, y = net.batches(batch, 1, seed)[0]
        for step in range(interval + 1):
            mon.tic()
            mod.forward(_batch(x, y), is_train=False)
            report = mon.toc()
            if step % interval:
                assert report == [], "a step between intervals reported %s" % report
                continue
            names = {name for _, name, _ in report}
            for pname in net.param_names:
                if pname.endswith("weight"):
                    assert pname in names, "%s missing from %s" % (pname, sorted(names))
            for _, name, text in report:
                if name in args:
                    _close(float(text.split()[0]), np.abs(args[name]).max(), name, 1e-5, 1e-6)
    return monitor_reports_every_interval


def _prop_lifecycle(make, settings):
    @settings
    @given(net=contract_nets(batchnorm=False), seed=_SEED)
    def lifecycle_errors(net, seed):
        """Calls before the step they need fail (an AssertionError subclass, as MXNet's
        asserts) and change nothing: init_params/forward before bind, forward/init_optimizer
        before init_params, update before init_optimizer."""
        args, aux = net.params(seed)
        x, y = net.batches(2, 1, seed)[0]
        mod = make(net.symbol, net.data_names, net.label_names, _contexts(1))
        _raises((AssertionError,), lambda: mod.init_params(arg_params=_nd_dict(args)),
                "init_params before bind")
        _raises((AssertionError,), lambda: mod.forward(_batch(x, y)), "forward before bind")
        mod.bind(net.data_shapes(2), net.label_shapes(2))
        _raises((AssertionError,), lambda: mod.forward(_batch(x, y)),
                "forward before init_params")
        _raises((AssertionError,), lambda: mod.init_optimizer(),
                "init_optimizer before init_params")
        mod.init_params(arg_params=_nd_dict(args), aux_params=_nd_dict(aux))
        _raises((AssertionError,), mod.update, "update before init_optimizer")
        got = _np_dict(mod.get_params()[0])
        for name in net.param_names:
            np.testing.assert_array_equal(got[name], args[name], name)
    return lifecycle_errors


# --- chains of modules ----------------------------------------------------------------------
def _prop_sequential(make, settings):
    @settings
    @given(features=st.integers(1, 4), hidden=st.integers(2, 5), outputs=st.integers(1, 3),
           act=st.sampled_from(["tanh", "relu"]), batch=st.integers(1, 5), seed=_SEED,
           python_loss=st.booleans())
    def sequential_modules_chain(features, hidden, outputs, act, batch, seed, python_loss):
        """A SequentialModule of a body module and a head module (a Module with a regression
        head, or a PythonLossModule whose gradient is that head's) trains like the one
        network they make up: gradients flow back through the chain and every module's
        parameters follow SGD."""
        from ..module import PythonLossModule, SequentialModule
        net = ContractNet(features, hidden, outputs, act)
        args, _ = net.params(seed)
        with NameManager():
            body = _sym.Activation(_sym.FullyConnected(_sym.Variable("data"), num_hidden=hidden,
                                                       name="fc1"), act_type=act, name="act1")
            head = _sym.FullyConnected(_sym.Variable("hidden"), num_hidden=outputs,
                                       name="head")
        chain = SequentialModule(logger=QUIET)
        chain.add(make(body, ["data"], None, _contexts(1)))
        if python_loss:
            chain.add(make(head, ["hidden"], None, _contexts(1)), auto_wiring=True)
            chain.add(PythonLossModule(data_names=["head_output"], label_names=[LABEL],
                                       # LinearRegressionOutput's gradient, which
                                       # divides by the outputs per sample
                                       grad_func=lambda scores, labels:
                                       (scores - labels) / outputs),
                      take_labels=True, auto_wiring=True)
        else:
            chain.add(make(_sym.LinearRegressionOutput(head, name="lro"), ["hidden"], [LABEL],
                           _contexts(1)), take_labels=True, auto_wiring=True)
        chain.bind(net.data_shapes(batch), net.label_shapes(batch))
        chain.init_params(arg_params=_nd_dict(args), allow_missing=True)
        _sgd(chain, 0.2)
        batches = net.batches(batch, 2, seed)
        _train(chain, batches)
        got = _np_dict(chain.get_params()[0])
        want = _expected_sgd(net, args, batches, 0.2, 0.0, 0.0)
        _close_steps(got, want, args, net.param_names)
    return sequential_modules_chain


# --- bucketing ------------------------------------------------------------------------------
BUCKET_KEYS = (1, 2, 3)


def _bucket_sym_gen(hidden, features, outputs):
    """Bucket key k: data (batch, k, features), averaged over k, then fc1 -> tanh -> head.
    The default bucket (the largest key) adds a layer ``mid``; the others use a subset of its
    parameters."""
    def sym_gen(key):
        with NameManager():
            net = _sym.mean(_sym.Variable("data"), axis=1)
            net = _sym.Activation(_sym.FullyConnected(net, num_hidden=hidden, name="fc1"),
                                  act_type="tanh")
            if key == max(BUCKET_KEYS):
                net = _sym.Activation(_sym.FullyConnected(net, num_hidden=hidden, name="mid"),
                                      act_type="tanh")
            net = _sym.FullyConnected(net, num_hidden=outputs, name="head")
            net = _sym.LinearRegressionOutput(net, name="lro")
        return net, ("data",), (LABEL,)
    return sym_gen


def bucketing_factory(cls=BucketingModule):
    """The factory for ``cls`` (BucketingModule or a subclass with its constructor)."""
    def make(sym_gen, default_bucket_key, context):
        return cls(sym_gen, default_bucket_key=default_bucket_key, context=context,
                   logger=QUIET)
    make.__name__ = "make_" + cls.__name__
    return make


def _prop_buckets(make_bucketing, settings):
    @settings
    @given(hidden=st.integers(2, 4), features=st.integers(1, 3), outputs=st.integers(1, 2),
           keys=st.lists(st.sampled_from(BUCKET_KEYS), min_size=2, max_size=5),
           batch=st.integers(1, 4), seed=_SEED, momentum=st.sampled_from([0.0, 0.9]),
           devices=st.integers(1, 2))
    def buckets_share_parameters_and_optimizer(hidden, features, outputs, keys, batch, seed,
                                               momentum, devices):
        """Buckets share the default bucket's parameters and one optimizer (momentum
        included): training through any sequence of buckets equals the same SGD steps on
        one set of parameters, each step moving only the parameters its bucket uses."""
        batch = max(batch, devices)
        sym_gen = _bucket_sym_gen(hidden, features, outputs)
        default = max(BUCKET_KEYS)
        mod = make_bucketing(sym_gen, default, _contexts(devices))
        mod.bind([("data", (batch, default, features))], [(LABEL, (batch, outputs))])
        mod.init_params()
        mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.2,
                                                                "momentum": momentum})
        start = _np_dict(mod.get_params()[0])
        weights = {k: v.copy() for k, v in start.items()}
        moms = {k: np.zeros_like(v) for k, v in start.items()}
        refs = {}
        rng = np.random.default_rng(seed)
        for key in keys:
            x = rng.uniform(-1, 1, (batch, key, features)).astype(np.float32)
            y = rng.uniform(-1, 1, (batch, outputs)).astype(np.float32)
            mod.forward_backward(_io.DataBatch(
                [_nd.array(x)], [_nd.array(y)], bucket_key=key,
                provide_data=[_io.DataDesc("data", x.shape)],
                provide_label=[_io.DataDesc(LABEL, y.shape)]))
            mod.update()
            ref = refs.get(key) or refs.setdefault(
                key, ReferenceNet(sym_gen(key)[0], ["data"], [LABEL]))
            grads = ref.gradients({n: weights[n] for n in ref.param_names},
                                  {"data": x, LABEL: y})
            for name in ref.param_names:
                weights[name], moms[name] = sgd_step(weights[name], grads[name], moms[name],
                                                     0.2, momentum, rescale_grad=1.0 / batch)
        got = _np_dict(mod.get_params()[0])
        assert set(got) == set(start), "get_params names changed: %s" % sorted(got)
        for name in start:
            _close(got[name] - start[name], weights[name] - start[name],
                   "%s after buckets %s" % (name, keys))
    return buckets_share_parameters_and_optimizer


# ---------------------------------------------------------------------------------------------
# the contract
# ---------------------------------------------------------------------------------------------
class ContractProperty:
    """One line of the contract: ``name``, the promise (``doc``), the builder of its
    hypothesis test, and the factory options it needs."""

    def __init__(self, builder, needs=(), kind="module"):
        self.builder = builder
        self.needs = tuple(needs)
        self.kind = kind
        probe = builder(lambda *a, **k: None, lambda f: f)
        self.name = probe.__name__
        self.doc = " ".join((probe.__doc__ or "").split())

    def build(self, make, settings):
        return self.builder(make, settings)


CONTRACT = [
    ContractProperty(_prop_forward_mode),
    ContractProperty(_prop_dropout_mode),
    ContractProperty(_prop_fixed_params, needs=("fixed_param_names",)),
    ContractProperty(_prop_grad_req),
    ContractProperty(_prop_input_grads),
    ContractProperty(_prop_multipliers),
    ContractProperty(_prop_optimizer_multipliers),
    ContractProperty(_prop_kvstore),
    ContractProperty(_prop_devices, needs=("work_load_list",)),
    ContractProperty(_prop_init_params),
    ContractProperty(_prop_get_params_fresh),
    ContractProperty(_prop_get_params_average),
    ContractProperty(_prop_aux_round_trip),
    ContractProperty(_prop_resume),
    ContractProperty(_prop_batching),
    ContractProperty(_prop_score),
    ContractProperty(_prop_fit),
    ContractProperty(_prop_monitor),
    ContractProperty(_prop_lifecycle),
    ContractProperty(_prop_sequential),
    ContractProperty(_prop_buckets, kind="bucketing"),
]
BY_NAME = {p.name: p for p in CONTRACT}


def property_names():
    return [p.name for p in CONTRACT]


def contract_settings(max_examples=8, profile=_profile.CI_PROFILE):
    return _profile.settings_for(max_examples, profile=profile,
                                 suppress_health_check=list(HealthCheck))


def build_properties(make_module=None, make_bucketing_module=None, names=None,
                     unsupported=(), max_examples=8, profile=_profile.CI_PROFILE):
    """{name: hypothesis test} for the contract properties (all, or ``names``).

    Module properties run against ``make_module`` and bucketing properties against
    ``make_bucketing_module(sym_gen, default_bucket_key, context)``. With neither factory
    given, both default to lightmod's own classes; with only ``make_module`` given, the
    bucketing properties are left out. Properties needing an option named in
    ``unsupported`` are left out too.
    """
    if make_module is None and make_bucketing_module is None:
        make_module, make_bucketing_module = module_factory(), bucketing_factory()
    factories = {"module": make_module, "bucketing": make_bucketing_module}
    settings = contract_settings(max_examples, profile)
    chosen = [BY_NAME[n] for n in names] if names else CONTRACT
    return {p.name: p.build(factories[p.kind], settings) for p in chosen
            if factories[p.kind] is not None and not set(p.needs) & set(unsupported)}


def check_module_contract(make_module=None, make_bucketing_module=None, names=None,
                          unsupported=(), max_examples=8, profile=_profile.CI_PROFILE):
    """Run the Module contract against your Module class.

    ``make_module(symbol, data_names, label_names, context, **options)`` returns a new,
    unbound module (``options``: ``work_load_list``, ``fixed_param_names``; name those your
    class cannot take in ``unsupported``). ``make_bucketing_module(sym_gen,
    default_bucket_key, context)`` does the same for a bucketing class. Every property runs
    (``names`` selects some); the first that fails raises an AssertionError naming it, with
    hypothesis' counterexample (the drawn network, batch and seed) in the message. Returns
    the names of the properties that passed.
    """
    passed = []
    for name, test in build_properties(make_module, make_bucketing_module, names,
                                       unsupported, max_examples, profile).items():
        try:
            test()
        except Exception as err:
            # hypothesis attaches the smallest failing example as notes: keep it in the message
            example = "\n".join(getattr(err, "__notes__", []))
            raise AssertionError("Module contract property %r failed: %s\n%s"
                                 % (name, err, example)) from err
        passed.append(name)
    return passed
