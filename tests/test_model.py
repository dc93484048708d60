"""mx.model: checkpoints (atomic writes), kvstore decisions, the update helpers."""
import logging
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lightmod as mx
from lightmod import model
from lightmod.base import atomic_write
from lightmod.module.executor_group import _split_input_slice


def mlp(num_hidden=5):
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=num_hidden, name="fc1")
    return mx.sym.SoftmaxOutput(net, name="softmax")


# --- batch split -------------------------------------------------------------------------------
@pytest.mark.parametrize("batch, loads, expected", [
    (5, [1, 1], [(0, 2), (2, 5)]),        # round(2.5) == 2 (banker's rounding)
    (7, [1, 1], [(0, 4), (4, 7)]),        # round(3.5) == 4
    (5, [1, 1, 1], [(0, 2), (2, 4), (4, 5)]),
    (4, [1, 1, 1], [(0, 1), (1, 2), (2, 4)]),
    (10, [1, 2], [(0, 3), (3, 10)]),
    (8, [1], [(0, 8)]),
])
def test_split_input_slice_examples(batch, loads, expected):
    assert [(s.start, s.stop) for s in _split_input_slice(batch, loads)] == expected


def test_split_input_slice_too_many_slices():
    with pytest.raises(ValueError, match="Too many slices"):
        _split_input_slice(1, [1, 1])


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 64), st.lists(st.integers(1, 5), min_size=1, max_size=4))
def test_split_input_slice_covers_batch(batch, loads):
    try:
        slices = _split_input_slice(batch, loads)
    except ValueError:
        return   # some device would get nothing
    assert slices[0].start == 0 and slices[-1].stop == batch
    for a, b in zip(slices, slices[1:]):
        assert a.stop == b.start and a.start < a.stop


# --- kvstore decisions ---------------------------------------------------------------------------
def _params(*shapes):
    return {"p%d" % i: mx.nd.zeros(s) for i, s in enumerate(shapes)}


def test_create_kvstore_rules(monkeypatch):
    monkeypatch.delenv("MXNET_UPDATE_ON_KVSTORE", raising=False)
    params = _params((3, 4))
    assert model._create_kvstore(None, 2, params) == (None, False)
    # a string with one device and no 'dist' means no kvstore at all
    assert model._create_kvstore("local", 1, params) == (None, False)
    kv, update = model._create_kvstore("local", 2, params)
    assert kv.type == "local" and update is True
    kv, update = model._create_kvstore("device", 2, params)
    assert kv.type == "device" and update is True
    # a KVStore object is used as given, even with one device
    store = mx.kv.create("local")
    kv, update = model._create_kvstore(store, 1, params)
    assert kv is store and update is True
    with pytest.raises(TypeError):
        model._create_kvstore(3, 2, params)


def test_create_kvstore_env_and_big_params(monkeypatch):
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", "0")
    assert model._create_kvstore("local", 2, _params((3,)))[1] is False
    monkeypatch.delenv("MXNET_UPDATE_ON_KVSTORE")
    # 'local' refuses to update parameters larger than 16M elements (shape only is looked at)
    big = {"w": mx.nd.zeros((1,))}
    big["w"] = type("FakeArray", (), {"shape": (4097, 4096)})()
    kv, update = model._create_kvstore("local", 2, big)
    assert kv is not None and update is False
    kv, update = model._create_kvstore("device", 2, big)
    assert update is True


def test_update_params_keys_per_device():
    """Without update on kvstore the updater sees keys i*num_device + k, once per device."""
    calls = []

    def updater(indices, grads, weights):
        calls.append(list(indices))
        for g, w in zip(grads, weights):
            w[:] = w - g

    ctxs = [mx.cpu(0), mx.cpu(1)]
    weights = [[mx.nd.ones((2,), ctx=c) for c in ctxs], [mx.nd.ones((3,), ctx=c) for c in ctxs],
               [mx.nd.ones((1,), ctx=c) for c in ctxs]]
    grads = [[mx.nd.ones((2,), ctx=c) for c in ctxs], [None, None],
             [mx.nd.ones((1,), ctx=c) * 2 for c in ctxs]]
    kv = mx.kv.create("local")
    for name, w in zip(["a", "b", "c"], weights):
        kv.init(name, w[0])
    model._update_params(weights, grads, updater, num_device=2, kvstore=kv,
                         param_names=["a", "b", "c"])
    assert calls == [[0, 4], [1, 5]]
    # gradients were summed over the two devices before the update
    for dev in range(2):
        np.testing.assert_array_equal(weights[0][dev].asnumpy(), [-1, -1])
        np.testing.assert_array_equal(weights[1][dev].asnumpy(), [1, 1, 1])
        np.testing.assert_array_equal(weights[2][dev].asnumpy(), [-3])


def test_update_params_on_kvstore_sums_and_broadcasts():
    ctxs = [mx.cpu(0), mx.cpu(1)]
    kv = mx.kv.create("local")
    seen = []

    def updater(key, grad, weight):
        seen.append(key.decode() if isinstance(key, bytes) else key)
        weight[:] = weight - grad

    kv._set_updater(updater)
    weights = [[mx.nd.ones((2,), ctx=c) for c in ctxs]]
    grads = [[mx.nd.ones((2,), ctx=c) * (k + 1) for k, c in enumerate(ctxs)]]
    model._initialize_kvstore(kv, weights, {"w": mx.nd.ones((2,))}, ["w"], True)
    model._update_params_on_kvstore(weights, grads, kv, ["w"])
    assert seen == ["w"]
    for w in weights[0]:
        np.testing.assert_array_equal(w.asnumpy(), [-2, -2])


# --- checkpoints ---------------------------------------------------------------------------------
def test_checkpoint_round_trip(tmp_path):
    prefix = str(tmp_path / "net")
    sym = mlp()
    arg = {"fc1_weight": mx.nd.array(np.arange(15).reshape(5, 3)),
           "fc1_bias": mx.nd.array(np.arange(5))}
    aux = {"bn_moving_mean": mx.nd.array([1.5, 2.5])}
    model.save_checkpoint(prefix, 7, sym, arg, aux)
    assert sorted(os.listdir(tmp_path)) == ["net-0007.params", "net-symbol.json"]
    sym2, arg2, aux2 = model.load_checkpoint(prefix, 7)
    assert sym2.tojson() == sym.tojson()
    assert set(arg2) == set(arg) and set(aux2) == set(aux)
    for k in arg:
        np.testing.assert_array_equal(arg2[k].asnumpy(), arg[k].asnumpy())
    np.testing.assert_array_equal(aux2["bn_moving_mean"].asnumpy(), [1.5, 2.5])
    assert model.load_params(prefix, 7)[0].keys() == arg.keys()


def test_save_checkpoint_without_symbol(tmp_path):
    prefix = str(tmp_path / "p")
    model.save_checkpoint(prefix, 1, None, {"w": mx.nd.ones((2,))}, {})
    assert os.listdir(tmp_path) == ["p-0001.params"]


def test_load_params_empty_file_warns(tmp_path, caplog):
    prefix = str(tmp_path / "e")
    mx.nd.save(prefix + "-0000.params", {})
    with caplog.at_level(logging.WARNING):
        arg, aux = model.load_params(prefix, 0)
    assert arg == {} and aux == {}
    assert "is empty" in caplog.text


def test_atomic_write_interrupted_keeps_old_file(tmp_path, monkeypatch):
    """A save that fails half way leaves the previous file intact and no temporary behind."""
    fname = str(tmp_path / "x-symbol.json")
    atomic_write(fname, "old contents")

    def broken_replace(src, dst):
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(KeyboardInterrupt):
        atomic_write(fname, "new contents" * 1000)
    monkeypatch.undo()
    with open(fname) as f:
        assert f.read() == "old contents"
    assert os.listdir(tmp_path) == ["x-symbol.json"]
    atomic_write(fname, b"bytes too")
    with open(fname, "rb") as f:
        assert f.read() == b"bytes too"


def test_symbol_json_written_atomically(tmp_path, monkeypatch):
    prefix = str(tmp_path / "net")
    model.save_checkpoint(prefix, 1, mlp(3), {}, {})
    before = open(prefix + "-symbol.json").read()

    def broken_tojson(*args, **kwargs):
        raise RuntimeError("serialisation failed")

    bad = mlp(4)
    monkeypatch.setattr(type(bad), "tojson", broken_tojson)
    with pytest.raises(RuntimeError):
        model.save_checkpoint(prefix, 1, bad, {}, {})
    monkeypatch.undo()
    assert open(prefix + "-symbol.json").read() == before


def test_batch_end_param_fields():
    p = model.BatchEndParam(epoch=1, nbatch=2, eval_metric=None, locals={})
    assert p._fields == ("epoch", "nbatch", "eval_metric", "locals")
    assert type(p).__name__ == "BatchEndParams"


def test_multiple_callbacks():
    seen = []
    model._multiple_callbacks([lambda x: seen.append(("a", x)), lambda x: seen.append(("b", x))], 1)
    model._multiple_callbacks(lambda x: seen.append(("c", x)), 2)
    model._multiple_callbacks(None, 3)
    assert seen == [("a", 1), ("b", 1), ("c", 2)]


def test_checkpoint_files_are_written_atomically_with_normal_permissions(tmp_path):
    """Every checkpoint file goes through one atomic writer that honours the umask."""
    import os

    import lightmod as mx
    from lightmod.base import atomic_write
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=2, name="fc")
    prefix = str(tmp_path / "ck")
    net.save(prefix + "-symbol.json")
    mx.nd.save(prefix + "-0001.params", {"arg:fc_weight": mx.nd.ones((2, 3))})
    old = os.umask(0o022)
    try:
        atomic_write(prefix + ".txt", "x")
        for name in ("-symbol.json", "-0001.params", ".txt"):
            mode = os.stat(prefix + name).st_mode & 0o777
            assert mode == 0o644, (name, oct(mode))
    finally:
        os.umask(old)
