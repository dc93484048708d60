"""A hypothesis state machine for the Module lifecycle.

:class:`ModuleStateMachine` builds a :class:`~lightmod.module.Module` over a random per-sample
network (:func:`~lightmod.testing.strategies.module_nets`) on 1-3 devices, then calls
``bind``, ``init_params``, ``set_params``, ``init_optimizer``, ``forward``,
``forward_backward``, ``update``, ``reshape``, ``get_params`` and a checkpoint round trip in
any order hypothesis chooses -- including the wrong ones. A plain model of the module
(flags, the device parameters, the parameter cache, the kvstore's copy, gradients, momentum)
says what each call must do, following MXNet 1.9.1's Module:

* a call before the step it needs raises the lifecycle error (``NotBoundError``, an
  ``AssertionError`` too) and changes nothing; a repeated ``bind``/``init_params``/
  ``init_optimizer`` without ``force_*`` is ignored;
* outputs equal a single float64 executor over the whole batch (one context equals
  several); gradients are the batch's gradient, summed into the buffer with
  ``grad_req='add'``; ``update`` is SGD with ``rescale_grad = 1/(batch bound at
  init_optimizer)``, which later reshapes do not change, weight decay only on ``*_weight``;
* ``reshape`` (explicit, or a batch of another size) keeps parameters, gradients and the
  optimizer; a forced re-bind keeps parameters but copies the possibly stale cache to the
  devices (MXNet's quirk), while the kvstore keeps its own copy;
* ``get_params`` returns the device values; a checkpoint loaded into a new Module computes
  the same, optimizer state included (the machine continues with the loaded module).

Use it as ``TestModule = ModuleStateMachine.TestCase`` with ``settings`` of your choice;
``ModuleStateMachine.with_nets(strategy)`` runs the same rules on networks of your own.
"""
import logging
import os
import shutil
import tempfile
import warnings

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from .. import io as _io
from .. import ndarray as _nd
from ..base import NotBoundError
from ..module import Module
from ..module.executor_group import _split_input_slice
from . import _profile  # noqa: F401  (registers the hypothesis profiles)
from .reference import ReferenceNet, sgd_step, weight_decay_applies
from .strategies import module_configs, module_nets

__all__ = ["ModuleStateMachine", "RTOL", "ATOL"]

RTOL, ATOL = 2e-4, 2e-5
_QUIET = logging.getLogger("lightmod.testing.module_machine")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def _close(actual, expected, what):
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL, err_msg=what)


class ModuleStateMachine(RuleBasedStateMachine):
    """Drives one Module through its lifecycle; see the module docstring for the rules."""

    def __init__(self):
        super().__init__()
        self.module = None
        self._tmp = tempfile.mkdtemp(prefix="lightmod-machine-")
        self._epoch = 0

    def teardown(self):
        shutil.rmtree(self._tmp, ignore_errors=True)

    # --- model of the module ---------------------------------------------------------------
    @initialize(net=module_nets(), config=module_configs(grad_reqs=("write", "add")),
                start=st.sampled_from(["training", "initialised", "bound", "fresh"]),
                seed=st.integers(0, 2 ** 16))
    def create(self, net, config, start, seed):
        """A new Module; ``start`` says how far through the lifecycle it is taken at once
        (so short runs still reach training), each step checked like the rules."""
        self._create(net, config)
        if start != "fresh":
            self.bind(config.batch_size, False)
        if start in ("initialised", "training"):
            self.init_params(seed, False, False)
        if start == "training":
            self.init_optimizer(0.1, 0.9, 0.01, False)

    @classmethod
    def with_nets(cls, nets, configs=None):
        """A subclass whose networks come from ``nets`` (a strategy of
        :class:`~lightmod.testing.strategies.ModuleNet`, e.g. ``st.just(ModuleNet(...))`` for
        your own model) and configurations from ``configs`` (default: module_configs())."""
        configs = configs if configs is not None else module_configs(grad_reqs=("write", "add"))

        class Machine(cls):
            @initialize(net=nets, config=configs,
                        start=st.sampled_from(["training", "initialised", "bound", "fresh"]),
                        seed=st.integers(0, 2 ** 16))
            def create(self, net, config, start, seed):
                cls.create(self, net, config, start, seed)

        Machine.__name__ = Machine.__qualname__ = cls.__name__ + "WithNets"
        return Machine

    def _create(self, net, config):
        self.net = net
        self.config = config
        self.ref = ReferenceNet(net.symbol, net.data_names, net.label_names)
        self.module = self._new_module()
        self.bound = False
        self.batch = None               # the batch size the executors have now
        self.params_initialized = False
        self.optimizer = None           # dict(lr, momentum, wd, rescale) once initialised
        self.device = None              # {name: float64 array}: what every device holds
        self.cache = None               # the module's CPU cache (get_params' dicts)
        self.dirty = False
        self.kv = None                  # the kvstore's copy when updates run there
        self.grads = None               # {name: summed gradient buffer}
        self.mom = None
        self.unusable = False

    def _new_module(self):
        return Module(self.net.symbol, data_names=self.net.data_names,
                      label_names=self.net.label_names, logger=_QUIET,
                      **self.config.module_kwargs())

    @property
    def update_on_kvstore(self):
        # a 'local' kvstore with one device means no kvstore at all (updates run on the device)
        return len(self.config.contexts) > 1

    def _zeros(self):
        return {n: np.zeros(s) for n, s in self.net.param_shapes().items()}

    def _batch(self, batch_size, seed):
        rng = np.random.default_rng(seed)
        x = rng.uniform(-1, 1, (batch_size, self.net.features))
        y = rng.uniform(-1, 1, (batch_size, self.net.outputs))
        return x, y

    def _module_batch(self, x, y):
        return _io.DataBatch([_nd.array(x)], [_nd.array(y)])

    def _device_params(self, module=None):
        """{name: value} from the executors, after checking every device holds the same."""
        group = (module or self.module)._exec_group
        out = {}
        for name, arrays in zip(group.param_names, group.param_arrays):
            first = arrays[0].asnumpy().astype(np.float64)
            for other in arrays[1:]:
                np.testing.assert_array_equal(other.asnumpy(), arrays[0].asnumpy(),
                                              err_msg="devices disagree on %s" % name)
            out[name] = first
        return out

    def _device_grads(self):
        group = self.module._exec_group
        return {name: sum(g.asnumpy().astype(np.float64) for g in grads)
                for name, grads in zip(group.param_names, group.grad_arrays)}

    # --- rules -------------------------------------------------------------------------------
    def _valid_batch(self, batch_size):
        """``batch_size`` if every device gets a share of it, else the current (or the
        configured) batch size."""
        batch_size = max(batch_size, len(self.config.contexts))
        try:
            _split_input_slice(batch_size, self.config.work_load_list
                               or [1] * len(self.config.contexts))
        except ValueError:
            return self.batch or self.config.batch_size
        return batch_size

    # --- what each call needs -------------------------------------------------------------
    def _allowed(self, call):
        """Whether ``call`` (a rule name) may run in the current state."""
        needs = {"init_params": self.bound, "set_params": self.bound, "reshape": self.bound,
                 "init_optimizer": self.bound and self.params_initialized,
                 "forward": self.bound and self.params_initialized,
                 "forward_backward": self.bound and self.params_initialized,
                 "update": (self.bound and self.params_initialized
                            and self.optimizer is not None),
                 "get_params": self.params_initialized,
                 "save_checkpoint": self.params_initialized}
        return needs[call]

    def _out_of_order_calls(self):
        x, y = self._batch(self.batch or self.config.batch_size, 0)
        params = {k: _nd.array(v) for k, v in self._draw_params(0).items()}
        size = self.batch or self.config.batch_size
        return {
            "init_params": lambda: self.module.init_params(arg_params=params),
            "set_params": lambda: self.module.set_params(params, {}),
            "reshape": lambda: self.module.reshape(self.net.data_shapes(size),
                                                   self.net.label_shapes(size)),
            "init_optimizer": lambda: self.module.init_optimizer(
                optimizer_params={"learning_rate": 0.1}),
            "forward": lambda: self.module.forward(self._module_batch(x, y)),
            "forward_backward": lambda: self.module.forward_backward(self._module_batch(x, y)),
            "update": self.module.update,
            "get_params": self.module.get_params,
            "save_checkpoint": lambda: self.module.save_checkpoint(
                os.path.join(self._tmp, "never"), 0),
        }

    @precondition(lambda self: self.module is not None and not (
        self.bound and self.params_initialized and self.optimizer is not None))
    @rule(data=st.data())
    def call_out_of_order(self, data):
        """A call whose prerequisite is missing raises the lifecycle error, naming it."""
        calls = self._out_of_order_calls()
        name = data.draw(st.sampled_from(sorted(n for n in calls if not self._allowed(n))),
                         label="call")
        try:
            calls[name]()
        except NotBoundError as err:
            assert "call " in str(err) and "()" in str(err), str(err)
            assert isinstance(err, AssertionError)
            return
        raise AssertionError("%s() out of order did not raise the lifecycle error" % name)

    # --- rules (each in its proper order; call_out_of_order covers the others) -------------
    @precondition(lambda self: self.module is not None and not self.unusable)
    @rule(batch_size=st.integers(1, 8), force=st.sampled_from([False, False, False, True]))
    def bind(self, batch_size, force):
        batch_size = self._valid_batch(batch_size)
        call = lambda: self.module.bind(  # noqa: E731
            self.net.data_shapes(batch_size), self.net.label_shapes(batch_size),
            force_rebind=force, grad_req=self.config.grad_req)
        if self.bound and not force:
            call()
            return                      # already bound: ignored with a warning
        if self.cache is not None and not self.params_initialized:
            # bound once, never initialised: the zero cache exists but does not count as
            # parameters, and MXNet's bind asserts on that (lightmod: ValueError); the
            # module stays unbound
            try:
                call()
            except (AssertionError, ValueError):
                self.bound = False
                self.batch = None
                self.unusable = True    # every later bind fails the same way
                return
            raise AssertionError("re-binding an uninitialised module must fail")
        call()
        self.bound = True
        self.batch = batch_size
        self.grads = self._zeros()      # new executors, new gradient buffers
        if self.params_initialized:
            # the cache goes to the devices, stale or not
            self.device = {k: v.copy() for k, v in self.cache.items()}
        else:
            self.device = self._zeros()
            self.cache = self._zeros()

    def _draw_params(self, seed):
        rng = np.random.default_rng(seed)
        return {n: rng.uniform(-0.5, 0.5, s) for n, s in self.net.param_shapes().items()}

    @precondition(lambda self: self.module is not None and self.bound)
    @rule(seed=st.integers(0, 2 ** 16), force=st.booleans(), through_set_params=st.booleans())
    def init_params(self, seed, force, through_set_params=False):
        """init_params(arg_params=...) or set_params(...) (which forces)."""
        values = {k: _nd.array(v) for k, v in self._draw_params(seed).items()}
        if through_set_params:
            self.module.set_params(values, {})
        elif self.params_initialized and not force:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                self.module.init_params(arg_params=values)
            assert caught, "a repeated init_params must warn"
            return                      # ignored
        else:
            self.module.init_params(arg_params=values, force_init=force)
        self._set_all(self._draw_params(seed))   # the kvstore's copy (if any) stays

    def _set_all(self, values):
        self.params_initialized = True
        stored = {k: v.astype(np.float32).astype(np.float64) for k, v in values.items()}
        self.device = dict(stored)
        self.cache = {k: v.copy() for k, v in stored.items()}
        self.dirty = False

    @precondition(lambda self: self.module is not None and self.bound
                  and self.params_initialized)
    @rule(lr=st.sampled_from([0.01, 0.1, 0.5]), momentum=st.sampled_from([0.0, 0.9]),
          wd=st.sampled_from([0.0, 0.01]), force=st.booleans())
    def init_optimizer(self, lr, momentum, wd, force):
        self.module.init_optimizer(optimizer="sgd", force_init=force, optimizer_params={
            "learning_rate": lr, "momentum": momentum, "wd": wd})
        if self.optimizer is not None and not force:
            return                      # already initialised: ignored
        if self.dirty:
            self.cache = {k: v.copy() for k, v in self.device.items()}
            self.dirty = False
        self.optimizer = {"lr": lr, "momentum": momentum, "wd": wd,
                          "rescale": 1.0 / self.batch}
        self.mom = self._zeros()
        self.kv = {k: v.copy() for k, v in self.cache.items()} \
            if self.update_on_kvstore else None

    def _check_outputs(self, x, y):
        expected = self.ref.forward(self.device, {"data": x, "lro_label": y})[0]
        _close(self.module.get_outputs()[0].asnumpy(), expected, "outputs")

    @precondition(lambda self: self.module is not None and self.bound
                  and self.params_initialized)
    @rule(batch_size=st.integers(1, 8), same=st.booleans(), seed=st.integers(0, 2 ** 16),
          train=st.booleans())
    def forward(self, batch_size, same, seed, train):
        """forward(is_train=False), or forward_backward; a batch of another size re-shapes
        the module first."""
        size = self.batch if same else self._valid_batch(batch_size)
        x, y = self._batch(size, seed)
        if not train:
            self.module.forward(self._module_batch(x, y), is_train=False)
            self.batch = size
            self._check_outputs(x, y)
            return
        self.module.forward_backward(self._module_batch(x, y))
        self.batch = size
        self._check_outputs(x, y)
        grads = self.ref.gradients(self.device, {"data": x, "lro_label": y})
        actual = self._device_grads()
        for name, g in grads.items():
            expected = g + self.grads[name] if self.config.grad_req == "add" else g
            _close(actual[name], expected, "gradient of %s (grad_req=%s)"
                   % (name, self.config.grad_req))
        self.grads = actual

    @precondition(lambda self: self.module is not None and self.bound
                  and self.params_initialized and self.optimizer is not None)
    @rule(seed=st.integers(0, 2 ** 16))
    def train_step(self, seed):
        """forward_backward then update on a batch of the bound size."""
        self.forward(self.batch, True, seed, True)
        self.update(sync=False)

    @precondition(lambda self: self.module is not None and self.bound
                  and self.params_initialized and self.optimizer is not None)
    @rule(sync=st.booleans())
    def update(self, sync=False):
        """update(); with ``sync``, get_params() right after must show the new values."""
        before = {k: v.copy() for k, v in self.device.items()}
        self.module.update()
        o = self.optimizer
        source = self.kv if self.update_on_kvstore else self.device
        new = {}
        for name, weight in source.items():
            wd = o["wd"] if weight_decay_applies(name) else 0.0
            new[name], self.mom[name] = sgd_step(weight, self.grads[name], self.mom[name],
                                                 o["lr"], o["momentum"], wd, o["rescale"])
        actual = self._device_params()
        for name in new:
            _close(actual[name], new[name], "%s after update (rescale_grad=1/%d)"
                   % (name, round(1 / o["rescale"])))
        self.device = actual            # continue from the module's float32 values
        if self.update_on_kvstore:
            self.kv = {k: v.copy() for k, v in actual.items()}
        self.dirty = True
        if sync:
            moved = [n for n in new if np.abs(new[n] - before[n]).max() > 1e-4]
            synced = {k: v.asnumpy() for k, v in self.module.get_params()[0].items()}
            for name in moved:
                assert not np.array_equal(synced[name], before[name].astype(np.float32)), \
                    "get_params() after update() still shows the old %s" % name
            self.cache = {k: v.astype(np.float64) for k, v in synced.items()}
            self.dirty = False

    @precondition(lambda self: self.module is not None and self.bound)
    @rule(batch_size=st.integers(1, 8))
    def reshape(self, batch_size):
        size = self._valid_batch(batch_size)
        before = [list(arrays) for arrays in self.module._exec_group.param_arrays]
        self.module.reshape(self.net.data_shapes(size), self.net.label_shapes(size))
        self.batch = size
        assert self.module.data_shapes[0].shape == (size, self.net.features)
        for old, new in zip(before, self.module._exec_group.param_arrays):
            for a, b in zip(old, new):
                assert a is b or np.shares_memory(a.asnumpy(), b.asnumpy()) or \
                    np.array_equal(a.asnumpy(), b.asnumpy()), "reshape replaced a parameter"

    @precondition(lambda self: self.module is not None and self.params_initialized)
    @rule()
    def get_params(self):
        arg, aux = self.module.get_params()
        assert set(arg) == set(self.device) and not aux
        for name, value in arg.items():
            _close(value.asnumpy(), self.device[name], "get_params()[%s]" % name)
        # the cache is refreshed in place: it is the module's own dict
        assert self.module.get_params()[0] is arg
        # (the average over devices may differ from the device copies in the last bit)
        self.cache = {k: v.asnumpy().astype(np.float64) for k, v in arg.items()}
        self.dirty = False

    @precondition(lambda self: self.module is not None and self.params_initialized)
    @rule(seed=st.integers(0, 2 ** 16))
    def checkpoint_round_trip(self, seed):
        """save_checkpoint, Module.load, bind, init_optimizer: the loaded module computes the
        same; the machine continues with it."""
        self._epoch += 1
        prefix = os.path.join(self._tmp, "ckpt")
        with_states = self.optimizer is not None
        self.module.save_checkpoint(prefix, self._epoch, save_optimizer_states=with_states)
        saved = {k: v.asnumpy() for k, v in self.module.get_params()[0].items()}
        self.cache = {k: v.astype(np.float64) for k, v in saved.items()}
        self.dirty = False
        loaded = Module.load(prefix, self._epoch, load_optimizer_states=with_states,
                             data_names=self.net.data_names, label_names=self.net.label_names,
                             logger=_QUIET, **self.config.module_kwargs())
        assert loaded.params_initialized and not loaded.binded
        size = self.batch or self.config.batch_size
        loaded.bind(self.net.data_shapes(size), self.net.label_shapes(size),
                    grad_req=self.config.grad_req)
        for name, value in self._device_params(loaded).items():
            np.testing.assert_array_equal(value, saved[name], err_msg="loaded " + name)
        self.device = {k: v.copy() for k, v in self.cache.items()}
        if with_states:
            o = self.optimizer
            loaded.init_optimizer(optimizer="sgd", optimizer_params={
                "learning_rate": o["lr"], "momentum": o["momentum"], "wd": o["wd"]})
            o["rescale"] = 1.0 / size
            if self.update_on_kvstore:
                self.kv = {k: v.copy() for k, v in self.device.items()}
        x, y = self._batch(size, seed)
        loaded.forward(self._module_batch(x, y), is_train=False)
        if self.bound:
            self.module.forward(self._module_batch(x, y), is_train=False)
            _close(loaded.get_outputs()[0].asnumpy(), self.module.get_outputs()[0].asnumpy(),
                   "outputs of the loaded module")
        self.module = loaded
        self._check_outputs(x, y)
        self.bound = True
        self.batch = size
        self.grads = self._zeros()

    # --- invariants --------------------------------------------------------------------------
    @invariant()
    def flags_follow_the_lifecycle(self):
        if self.module is None:
            return
        assert self.module.binded == self.bound
        assert self.module.params_initialized == self.params_initialized
        assert self.module.optimizer_initialized == (self.optimizer is not None)

    @precondition(lambda self: self.module is not None and self.bound)
    @invariant()
    def bound_shapes_and_parameters(self):
        assert self.module.data_shapes[0].shape == (self.batch, self.net.features)
        if self.params_initialized:
            for name, value in self._device_params().items():
                _close(value, self.device[name], "device copy of %s" % name)
