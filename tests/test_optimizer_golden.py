"""Optimizer trajectories and state files against MXNet 1.9.1 (tests/fixtures/optimizer_golden.*,
made by tests/fixtures/make_optimizer_golden.py).

Each case replays MXNet's run: same initial weights and gradients, the Updater called the same
way (lists or one index at a time), and compares the weights after every step and the final
states to float32 tolerance (float16 cases to float16 tolerance).
"""
import importlib.util
import json
import os

import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "fixtures")
GOLDEN = json.load(open(os.path.join(FIX, "optimizer_golden.json")))
ARRAYS = np.load(os.path.join(FIX, "optimizer_golden.npz"))
STATES_DIR = os.path.join(FIX, "optimizer_states")


def _load_maker():
    spec = importlib.util.spec_from_file_location(
        "make_optimizer_golden", os.path.join(FIX, "make_optimizer_golden.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAKER = _load_maker()
TOL = {"float16": dict(rtol=2e-3, atol=2e-3), "float32": dict(rtol=2e-5, atol=2e-6),
       "float64": dict(rtol=1e-6, atol=1e-7)}


def _case_inputs(c):
    n = len(GOLDEN["shapes"])
    weights = [ARRAYS["%s/w%d/init" % (c["name"], i)] for i in range(n)]
    grads = [[ARRAYS["%s/g%d/step%d" % (c["name"], i, t)] for i in range(n)]
             for t in range(c["steps"])]
    return weights, grads


@pytest.mark.parametrize("c", GOLDEN["cases"], ids=[c["name"] for c in GOLDEN["cases"]])
def test_trajectory_matches_mxnet(c):
    weights, grads = _case_inputs(c)
    traj, leaves, structure = MAKER.run_case(mx, c, weights, grads)
    tol = TOL[c["dtype"]]
    for t, step in enumerate(traj):
        for i, w in enumerate(step):
            np.testing.assert_allclose(
                w, ARRAYS["%s/w%d/step%d" % (c["name"], i, t)], err_msg="%s: weight %d, step %d"
                % (c["name"], i, t), **tol)
            assert w.dtype == np.dtype(c["dtype"])
    assert structure == c["state_structure"]
    for i, ls in enumerate(leaves):
        for j, s in enumerate(ls):
            np.testing.assert_allclose(s, ARRAYS["%s/s%d/%d" % (c["name"], i, j)],
                                       err_msg="%s: state %d leaf %d" % (c["name"], i, j), **tol)


def _state_case(name):
    for index, (n, opt, kwargs, dtype, dump) in enumerate(GOLDEN["state_cases"]):
        if n == name:
            return index, opt, kwargs, dtype, dump
    raise KeyError(name)


STATE_NAMES = [sc[0] for sc in GOLDEN["state_cases"]]


@pytest.mark.parametrize("name", STATE_NAMES)
def test_mxnet_states_file_loads_and_next_step_matches(name):
    index, opt, kwargs, dtype, dump = _state_case(name)
    _, grads = MAKER.state_data(index, dtype)
    n = len(GOLDEN["shapes"])
    ws = [mx.nd.array(ARRAYS["states/%s/w%d/saved" % (name, i)], dtype=dtype) for i in range(n)]
    upd = mx.optimizer.get_updater(MAKER.make_optimizer(mx, opt, kwargs))
    with open(os.path.join(STATES_DIR, "mxnet_%s.states" % name), "rb") as f:
        upd.set_states(f.read())
    if dump:
        assert type(upd.optimizer).__name__.lower() == opt
    else:
        for i in range(n):
            upd.optimizer._index_update_count[i] = 2
        upd.optimizer.num_update = 2
    upd(list(range(n)), [mx.nd.array(g, dtype=dtype) for g in grads[2]], ws)
    for i, w in enumerate(ws):
        np.testing.assert_allclose(w.asnumpy(), ARRAYS["states/%s/w%d/next" % (name, i)],
                                   **TOL[dtype])


@pytest.mark.parametrize("name", STATE_NAMES)
def test_lightmod_states_file_is_what_mxnet_loaded(name):
    """lightmod writes the same bytes as the file MXNet loaded, and the step MXNet took from
    it matches lightmod's own next step."""
    index, opt, kwargs, dtype, dump = _state_case(name)
    weights, grads = MAKER.state_data(index, dtype)
    n = len(GOLDEN["shapes"])
    upd = mx.optimizer.get_updater(MAKER.make_optimizer(mx, opt, kwargs))
    ws = [mx.nd.array(w, dtype=dtype) for w in weights]
    for step in grads[:2]:
        upd(list(range(n)), [mx.nd.array(g, dtype=dtype) for g in step], ws)
    written = upd.get_states(dump)
    with open(os.path.join(STATES_DIR, "lightmod_%s.states" % name), "rb") as f:
        committed = f.read()
    assert written == committed
    assert GOLDEN["facts"]["lightmod_states_loaded_by_mxnet"][name].lower() == opt
    upd(list(range(n)), [mx.nd.array(g, dtype=dtype) for g in grads[2]], ws)
    for i, w in enumerate(ws):
        np.testing.assert_allclose(w.asnumpy(), ARRAYS["lmstates/%s/w%d/next" % (name, i)],
                                   **TOL[dtype])


def test_states_round_trip_between_updaters():
    opt = mx.optimizer.Adam(learning_rate=0.01)
    upd = mx.optimizer.get_updater(opt)
    w = mx.nd.array(np.linspace(-1, 1, 12).reshape(3, 4))
    g = mx.nd.array(np.linspace(1, -1, 12).reshape(3, 4))
    upd("w", g, w)
    blob = upd.get_states(dump_optimizer=True)
    other = mx.optimizer.get_updater(mx.optimizer.SGD())
    other.set_states(blob)
    assert isinstance(other.optimizer, mx.optimizer.Adam)
    assert other.optimizer._index_update_count == {"w": 1}
    np.testing.assert_array_equal(other.states["w"][0].asnumpy(), upd.states["w"][0].asnumpy())
    assert other.states_synced == {"w": False}


@pytest.mark.parametrize("blob", [
    b"", b"not a pickle", b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00K\x01.",   # int 1
    # os.system('true') through a REDUCE: must be refused before anything runs
    b"\x80\x04\x95\x1d\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x8c\x06system\x93\x8c\x04true"
    b"\x85R.",
])
def test_set_states_refuses_corrupt_or_foreign_pickles(blob):
    upd = mx.optimizer.get_updater(mx.optimizer.SGD())
    with pytest.raises(MXNetError):
        upd.set_states(blob)
    assert upd.states == {}


CALLED = []


def _side_effect(*args):
    CALLED.append(args)
    return {}


class _Sneaky:
    def __reduce__(self):
        return _side_effect, ("ran",)


def test_set_states_runs_nothing_from_a_foreign_pickle(tmp_path):
    import pickle
    blob = pickle.dumps({0: _Sneaky()})
    upd = mx.optimizer.get_updater(mx.optimizer.SGD())
    with pytest.raises(MXNetError, match="_side_effect"):
        upd.set_states(blob)
    kv = mx.kv.create()
    kv.set_optimizer(mx.optimizer.SGD())
    fname = tmp_path / "evil.states"
    fname.write_bytes(pickle.dumps(({0: None}, _Sneaky())))
    with pytest.raises(MXNetError):
        kv.load_optimizer_states(str(fname))
    assert CALLED == []


def test_set_states_refuses_an_ndarray_with_corrupt_record():
    good = mx.optimizer.get_updater(mx.optimizer.SGD(momentum=0.9))
    good(0, mx.nd.ones((2, 2)), mx.nd.ones((2, 2)))
    blob = bytearray(good.get_states())
    # truncate the raw NDArray record inside the pickle: shorten the bytes payload
    start = blob.index(b"\xc9\xfa\x93\xf9")
    size = blob[start - 1]
    blob[start - 1] = size - 8
    del blob[start + size - 8:start + size]
    with pytest.raises(MXNetError):
        mx.optimizer.get_updater(mx.optimizer.SGD()).set_states(bytes(blob))
