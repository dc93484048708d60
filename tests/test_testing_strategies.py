"""lightmod.testing: the strategies produce what they promise, and the package stays lazy."""
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lightmod as mx
from lightmod.module.executor_group import _split_input_slice
from lightmod.testing import strategies as lst
from lightmod.testing._profile import settings_for

SETTINGS = settings_for(15, profile="lightmod-ci", suppress_health_check=list(HealthCheck))


def test_import_is_lazy_and_registers_profiles():
    code = ("import sys, lightmod, lightmod.testing; print('hypothesis' in sys.modules); "
            "from lightmod.testing import strategies; from hypothesis import settings; "
            "p = settings.get_profile('lightmod'); print(p.deadline, "
            "settings.get_profile('lightmod-ci').derandomize)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=tempfile.gettempdir()).stdout.split()
    assert out == ["False", "None", "True"]
    import lightmod.testing as testing
    assert testing.op_cases is testing.operators.op_cases
    with pytest.raises(AttributeError):
        testing.no_such_thing


def test_settings_for_follows_the_environment(monkeypatch):
    monkeypatch.setenv("LIGHTMOD_HYPOTHESIS_PROFILE", "lightmod-mutation")
    s = settings_for(3, profile="lightmod-ci")
    assert s.max_examples == 3 and s.deadline is None
    assert "shrink" not in [p.name for p in s.phases]
    monkeypatch.delenv("LIGHTMOD_HYPOTHESIS_PROFILE")
    assert settings_for(3, profile="lightmod-ci").derandomize


@SETTINGS
@given(shape=lst.shapes(max_dims=3, max_side=4))
def test_shapes(shape):
    assert 1 <= len(shape) <= 3 and all(1 <= d <= 4 for d in shape)


@SETTINGS
@given(drawn=lst.broadcastable_shapes(num_shapes=3), same=lst.broadcastable_shapes(
    num_shapes=2, same_ndim=True))
def test_broadcastable_shapes(drawn, same):
    shapes, result = drawn
    assert np.broadcast_shapes(*shapes) == result
    shapes, result = same
    assert len({len(s) for s in shapes}) == 1
    assert np.broadcast_shapes(*shapes) == result
    lhs, rhs = (mx.nd.ones(s) for s in shapes)
    assert mx.nd.broadcast_add(lhs, rhs).shape == result


@SETTINGS
@given(arr=lst.ndarrays(dtype=lst.dtypes(floats_only=False), ctx=mx.cpu(1)))
def test_ndarrays(arr):
    assert isinstance(arr, mx.nd.NDArray) and arr.context == mx.cpu(1)
    assert np.dtype(arr.dtype).name in ("float32", "float64", "float16", "int32", "int64", "uint8")
    assert np.all(np.isfinite(arr.asnumpy().astype(np.float64)))


@SETTINGS
@given(ctxs=lst.contexts(1, 3))
def test_contexts(ctxs):
    assert 1 <= len(ctxs) <= 3 and len(set(ctxs)) == len(ctxs)
    assert all(c.device_type == "cpu" for c in ctxs)


@SETTINGS
@given(graph=lst.symbols())
def test_symbols_infer_and_run(graph):
    shapes = graph.arg_shapes()
    assert all(all(d > 0 for d in s) for s in shapes.values())
    exe = graph.symbol.simple_bind(mx.cpu(), grad_req="null", **graph.data_shapes)
    rng = np.random.default_rng(0)
    for _name, arr in exe.arg_dict.items():
        arr[:] = rng.uniform(-1, 1, arr.shape)
    outs = exe.forward()
    assert outs[0].shape == graph.symbol.infer_shape(**graph.data_shapes)[1][0]
    assert set(graph.op_names) <= set(lst.graph_operators())


@SETTINGS
@given(net=lst.module_nets(), config=lst.module_configs())
def test_module_nets_and_configs_bind(net, config):
    _split_input_slice(config.batch_size, config.work_load_list or [1] * len(config.contexts))
    assert config.grad_req in ("write", "add")
    assert net.param_shapes(2) == net.param_shapes(5)      # no batch-shaped parameters
    mod = mx.mod.Module(net.symbol, data_names=net.data_names, label_names=net.label_names,
                        **config.module_kwargs())
    mod.bind(net.data_shapes(config.batch_size), net.label_shapes(config.batch_size),
             grad_req=config.grad_req)
    mod.init_params()
    assert mod.output_shapes[0][1] == (config.batch_size, net.outputs)


@SETTINGS
@given(opt=lst.optimizers())
def test_optimizers_can_be_created_and_step(opt):
    name, params = opt
    optimizer = mx.optimizer.create(name, **params)
    assert 0 < optimizer.lr <= 0.5
    weight = mx.nd.array([0.5, -0.5])
    state = optimizer.create_state(0, weight)
    optimizer.update(0, weight, mx.nd.array([0.1, 0.2]), state)
    assert np.all(np.isfinite(weight.asnumpy()))


def test_every_deterministic_optimizer_is_drawn():
    names = set()

    @settings(max_examples=120, database=None, derandomize=True, deadline=None)
    @given(lst.optimizers())
    def collect(opt):
        names.add(opt[0])

    collect()
    assert names >= {"sgd", "adam", "rmsprop", "nag", "adagrad", "ftrl", "signum"}
    assert "sgld" not in names


@SETTINGS
@given(batch=lst.data_batches([("data", (2, 3)), ("other", (2,))], [("label", (2,))],
                              bucket_key=7))
def test_data_batches(batch):
    assert [d.shape for d in batch.data] == [(2, 3), (2,)]
    assert batch.label[0].shape == (2,) and batch.bucket_key == 7
    assert [d.name for d in batch.provide_data] == ["data", "other"]
    assert batch.provide_label[0].name == "label"


@SETTINGS
@given(drawn=lst.ndarray_iters(data_shape=(2,)))
def test_ndarray_iters(drawn):
    it, data, label = drawn
    batches = list(it)
    n, bs = len(data), it.batch_size
    expected = n // bs if it.last_batch_handle in ("discard", "roll_over") else -(-n // bs)
    assert len(batches) == expected
    for b in batches:
        assert b.data[0].shape == (bs, 2) and b.label[0].shape == (bs,)


@SETTINGS
@given(keys=lst.bucket_keys(min_size=2))
def test_bucket_keys(keys):
    assert keys == sorted(set(keys), reverse=True) and len(keys) >= 2


@settings(max_examples=5, deadline=None)
@given(st.data())
def test_work_load_lists_split(data):
    batch = data.draw(st.integers(3, 9))
    loads = data.draw(lst.work_load_lists(3, batch))
    assert len(_split_input_slice(batch, loads)) == 3
