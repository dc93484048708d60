"""Optimizer states that do not fit the parameters are refused with a clear MXNetError, before
any kernel runs (they used to be accepted and the next update() crashed the process)."""
import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError
from lightmod.optimizer.states import dumps_states

OPTIMIZERS = [("sgd", {}), ("sgd", {"momentum": 0.9}), ("nag", {"momentum": 0.9}), ("adam", {}),
              ("rmsprop", {}), ("rmsprop", {"centered": True}), ("adagrad", {}), ("adadelta", {}),
              ("ftrl", {}), ("adamax", {}), ("nadam", {}), ("signum", {}), ("ftml", {}),
              ("dcasgd", {"momentum": 0.9})]


def _trained(tmp_path, num_hidden, name, params, steps=1):
    net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=num_hidden, name="fc")
    net = mx.sym.SoftmaxOutput(net, name="softmax")
    mod = mx.mod.Module(net)
    mod.bind([("data", (2, 4))], [("softmax_label", (2,))])
    mod.init_params(mx.init.Uniform(0.5))
    mod.init_optimizer(optimizer=name, optimizer_params=dict(params))
    batch = mx.io.DataBatch([mx.nd.ones((2, 4))], [mx.nd.array([0, 1])])
    for _ in range(steps):
        mod.forward_backward(batch)
        mod.update()
    return mod


def _has_states(mod):
    return any(s is not None for s in mod._updater.states.values())


@pytest.mark.parametrize("name, params", OPTIMIZERS)
def test_states_of_another_shape_are_refused_on_load(tmp_path, name, params):
    saved = _trained(tmp_path, 3, name, params)
    fname = str(tmp_path / "small.states")
    saved.save_optimizer_states(fname)
    bigger = _trained(tmp_path, 5, name, params, steps=0)
    if not _has_states(saved):
        bigger.load_optimizer_states(fname)      # stateless rule (plain sgd): nothing to check
        return
    with pytest.raises(MXNetError, match=r"'fc_(weight|bias)'.*shape \(3.*shape \(5"):
        bigger.load_optimizer_states(fname)


@pytest.mark.parametrize("name, params", OPTIMIZERS)
def test_refused_states_never_reach_the_kernels(tmp_path, name, params):
    # the updater itself checks a loaded state the first time it meets it
    saved = _trained(tmp_path, 3, name, params)
    blob = saved._updater.get_states()
    bigger = _trained(tmp_path, 5, name, params, steps=0)
    bigger._updater.set_states(blob)
    batch = mx.io.DataBatch([mx.nd.ones((2, 4))], [mx.nd.array([0, 1])])
    bigger.forward_backward(batch)
    if not _has_states(saved):
        bigger.update()
        return
    with pytest.raises(MXNetError, match=r"parameter 'fc_(weight|bias)'"):
        bigger.update()


def test_checkpoint_of_a_larger_network_is_refused(tmp_path):
    prefix = str(tmp_path / "big")
    big = _trained(tmp_path, 3, "adam", {})
    big.save_checkpoint(prefix, 1, save_optimizer_states=True)
    # same layer, but the states file holds an extra key (another parameter)
    states = dict(big._updater.states)
    states[7] = (mx.nd.zeros((9,)), mx.nd.zeros((9,)))
    with open(prefix + "-0001.states", "wb") as f:
        f.write(dumps_states(states))
    mod = mx.mod.Module.load(prefix, 1, load_optimizer_states=True)
    mod.bind([("data", (2, 4))], [("softmax_label", (2,))])
    with pytest.raises(MXNetError, match=r"state for key 7.*keys \[0, 1, .fc_bias., .fc_weight.\]"):
        mod.init_optimizer(optimizer="adam")


def test_states_of_another_dtype_are_refused(tmp_path):
    mod = _trained(tmp_path, 3, "sgd", {"momentum": 0.9})
    states = {k: v.astype("float64") for k, v in mod._updater.states.items()}
    fname = str(tmp_path / "f64.states")
    with open(fname, "wb") as f:
        f.write(dumps_states(states))
    with pytest.raises(MXNetError, match=r"dtype float64.*dtype float32"):
        mod.load_optimizer_states(fname)


def test_matching_states_load_and_train_on(tmp_path):
    # momentum SGD: the next step depends on the loaded momentum only
    a = _trained(tmp_path, 3, "sgd", {"momentum": 0.9}, steps=2)
    fname = str(tmp_path / "a.states")
    a.save_optimizer_states(fname)
    b = _trained(tmp_path, 3, "sgd", {"momentum": 0.9}, steps=0)
    b.set_params(*a.get_params())
    b.load_optimizer_states(fname)
    batch = mx.io.DataBatch([mx.nd.ones((2, 4))], [mx.nd.array([0, 1])])
    for m in (a, b):
        m.forward_backward(batch)
        m.update()
    np.testing.assert_array_equal(a.get_params()[0]["fc_weight"].asnumpy(),
                                  b.get_params()[0]["fc_weight"].asnumpy())


@pytest.mark.parametrize("bad", ["grad", "state"])
def test_kernel_launcher_refuses_arrays_of_other_sizes(bad):
    from lightmod.kernels import cpu
    w = np.ones((4, 3), np.float32)
    g = np.ones((2, 3) if bad == "grad" else (4, 3), np.float32)
    m = np.zeros((4, 3) if bad == "grad" else (8, 3), np.float32)
    out = w.copy()
    with pytest.raises(MXNetError, match=r"\(4, 3\).*12 elements"):
        cpu.sgd_mom_update(w, g, m, out, 0.1, 0.0, 0.9, 1.0, -1.0)
    np.testing.assert_array_equal(out, np.ones((4, 3), np.float32))


def test_kernel_launcher_refuses_rows_outside_the_weight():
    from lightmod.kernels import cpu
    w = np.ones((4, 3), np.float32)
    with pytest.raises(MXNetError, match=r"row indices must lie in \[0, 4\), got 1\.\.9"):
        cpu.sgd_update(w, w.copy(), w.copy(), 0.1, 0.0, 1.0, -1.0, rows=np.array([1, 9]))
    with pytest.raises(MXNetError, match=r"got -1\.\.2"):
        cpu.sgd_update(w, w.copy(), w.copy(), 0.1, 0.0, 1.0, -1.0, rows=np.array([-1, 2]))
