"""mx.kv: MXNet 1.9.1's test_kvstore.py behaviours, gradient compression (golden values from
MXNet, tests/fixtures/optimizer_golden.*), optimizer on the store, plug-in registry."""
import json
import os

import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError

SHAPE = (4, 4)
KEYS = [5, 7, 11]
STR_KEYS = ["b", "c", "d"]
FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def init_kv(stype="default", str_keys=False):
    kv = mx.kv.create()
    keys = STR_KEYS if str_keys else KEYS
    kv.init("a" if str_keys else 3, mx.nd.zeros(SHAPE).tostype(stype))
    kv.init(keys, [mx.nd.zeros(SHAPE).tostype(stype)] * len(keys))
    return kv


def check_all(arr, value):
    np.testing.assert_array_equal(arr.asnumpy(), np.full(arr.shape, value, dtype=np.float32))


@pytest.mark.parametrize("stype", ["default", "row_sparse"])
@pytest.mark.parametrize("str_keys", [False, True])
def test_single_and_list_kv_pair(stype, str_keys):
    kv = init_kv(stype, str_keys)
    key = "a" if str_keys else 3
    keys = STR_KEYS if str_keys else KEYS
    kv.push(key, mx.nd.ones(SHAPE).tostype(stype))
    out = mx.nd.zeros(SHAPE)
    kv.pull(key, out=out)
    check_all(out, 1)
    one = mx.nd.ones(SHAPE).tostype(stype)
    kv.push(keys, [one] * len(keys))          # the same NDArray for several keys
    outs = [mx.nd.zeros(SHAPE) for _ in keys]
    kv.pull(keys, out=outs)
    for o in outs:
        check_all(o, 1)


def test_row_sparse_pull():
    kv = mx.kv.create()
    value = np.arange(24, dtype=np.float32).reshape(6, 4) + 1
    kv.init("e", mx.nd.array(value).tostype("row_sparse"))
    out = mx.nd.zeros((6, 4)).tostype("row_sparse")
    kv.row_sparse_pull("e", out=out, row_ids=mx.nd.array([[1, 4], [4, 1]]))
    expect = np.zeros_like(value)
    expect[[1, 4]] = value[[1, 4]]
    np.testing.assert_array_equal(out.asnumpy(), expect)
    outs = [mx.nd.zeros((6, 4)).tostype("row_sparse") for _ in range(3)]
    kv.row_sparse_pull("e", out=outs, row_ids=mx.nd.array([0, 5, 5]))
    for o in outs:
        np.testing.assert_array_equal(o.asnumpy()[[0, 5]], value[[0, 5]])
        assert not o.asnumpy()[1:5].any()
    with pytest.raises(MXNetError):
        kv.row_sparse_pull("e", out=mx.nd.zeros((6, 4)), row_ids=mx.nd.array([0]))
    with pytest.raises(AssertionError):
        kv.row_sparse_pull("e", out=outs, row_ids=[mx.nd.array([0])] * 2)


def test_init_and_duplicate_init():
    kv = mx.kv.create()
    kv.init(3, mx.nd.ones(SHAPE) * 4)
    out = mx.nd.zeros(SHAPE)
    kv.pull(3, out=out)
    check_all(out, 4)
    with pytest.raises(MXNetError, match="duplicate"):
        kv.init(3, mx.nd.ones(SHAPE))
    with pytest.raises(MXNetError, match="not been inited"):
        kv.push(9, mx.nd.ones(SHAPE))
    with pytest.raises(AssertionError):
        kv.pull(3)


@pytest.mark.parametrize("kv_type", ["local", "device"])
def test_pull_sums_a_pushed_list(kv_type):
    kv = mx.kv.create(kv_type)
    kv.init(3, mx.nd.zeros(SHAPE))
    kv.push(3, [mx.nd.ones(SHAPE) for _ in range(4)])
    outs = [mx.nd.zeros(SHAPE) for _ in range(2)]
    kv.pull(3, out=outs)
    for o in outs:
        check_all(o, 4)
    kv.init(9, mx.nd.ones(SHAPE) * 2)      # a fresh key pulls its init value
    out = mx.nd.zeros(SHAPE)
    kv.pull(9, out=out)
    check_all(out, 2)


@pytest.mark.parametrize("stype", ["default", "row_sparse"])
def test_aggregator_over_devices(stype):
    kv = init_kv(stype)
    devs = [mx.cpu(i) for i in range(4)]
    vals = [mx.nd.ones(SHAPE, d).tostype(stype) for d in devs]
    kv.push(3, vals)
    kv.pull(3, out=vals, ignore_sparse=False)
    for v, d in zip(vals, devs):
        check_all(v, 4)
        assert v.context == d
    vals = [[mx.nd.ones(SHAPE, d).tostype(stype) * 2.0 for d in devs] for _ in KEYS]
    kv.push(KEYS, vals)
    kv.pull(KEYS, out=vals, ignore_sparse=False)
    for group in vals:
        for v in group:
            check_all(v, 8)


def test_updater_receives_keys_as_mxnet_passes_them():
    facts = json.load(open(os.path.join(FIX, "optimizer_golden.json")))["facts"]
    seen = []

    def updater(key, recv, local):
        seen.append(key)
        local += recv

    for str_keys in (False, True):
        kv = init_kv(str_keys=str_keys)
        kv._set_updater(updater)
        key = "a" if str_keys else 3
        outs = [mx.nd.ones(SHAPE, mx.cpu(i)) for i in range(4)]
        for _ in range(4):
            kv.push(key, outs)
            kv.pull(key, out=outs)
        check_all(outs[0], 500)     # 0+4, 4+16, 20+80, 100+400
    assert type(seen[0]).__name__ == facts["updater_key_types"]["int"]
    assert type(seen[-1]).__name__ == facts["updater_key_types"]["str"]
    assert seen[-1] == b"a"


def test_updater_accumulates():
    kv = init_kv()
    kv._set_updater(lambda key, recv, local: local.__iadd__(recv))
    vals = [mx.nd.ones(SHAPE, mx.cpu(i)) for i in range(4)]
    for _ in range(4):
        kv.push(3, vals)
    out = mx.nd.zeros(SHAPE)
    kv.pull(3, out=out)
    check_all(out, 16)


def test_get_type_rank_workers():
    for name in ("local", "device", "nccl", "local_allreduce_cpu", "local_update_cpu"):
        kv = mx.kv.create(name)
        assert kv.type == name and kv.rank == 0 and kv.num_workers == 1
        assert kv.is_capable("optimizer") and kv.is_capable(mx.kv.KVStoreBase.OPTIMIZER)
    assert mx.kv.create("LOCAL").type == "local"
    with pytest.raises(ValueError):
        mx.kv.create().is_capable("teleport")
    with pytest.raises(TypeError):
        mx.kv.create(3)
    with pytest.raises(MXNetError, match="dist_nowhere"):
        mx.kv.create("dist_nowhere")     # a 'dist' type no registered store serves
    mx.kv.create()._barrier()


def test_invalid_pull_and_mixed_keys():
    for stype in ("default", "row_sparse"):
        kv = init_kv(stype)
        kv.push(3, mx.nd.ones(SHAPE).tostype(stype) * 2)
        out = mx.nd.ones(SHAPE).tostype("row_sparse")
        kv.pull(3, out=out)                      # ignored: the out keeps its value
        check_all(out, 1)
        with pytest.raises(MXNetError):
            kv.row_sparse_pull(3, out=mx.nd.zeros(SHAPE), row_ids=mx.nd.array([1]))
        with pytest.raises(MXNetError):
            kv.push("x", mx.nd.ones(SHAPE))
        with pytest.raises(MXNetError):
            kv.pull("x", out=mx.nd.zeros(SHAPE))
        with pytest.raises(MXNetError):
            kv.init("x", mx.nd.ones(SHAPE))
        with pytest.raises(MXNetError):
            kv.row_sparse_pull("x", out=out, row_ids=mx.nd.array([1]))
    skv = init_kv(str_keys=True)
    with pytest.raises(MXNetError):
        skv.push(3, mx.nd.ones(SHAPE))
    with pytest.raises(AssertionError, match="inconsistent"):
        mx.kv.create().init([1, "a"], [mx.nd.ones(SHAPE)] * 2)


def test_pushpull_and_broadcast():
    kv = mx.kv.create("device")
    kv.broadcast("w", mx.nd.ones(SHAPE) * 3, out=[mx.nd.zeros(SHAPE) for _ in range(2)])
    grads = [mx.nd.ones(SHAPE, mx.cpu(i)) for i in range(3)]
    kv.pushpull("w", grads)                      # no out: the values receive the result
    for g in grads:
        check_all(g, 3)
    out = mx.nd.zeros(SHAPE)
    kv.pushpull("w", mx.nd.ones(SHAPE) * 5, out=out)
    check_all(out, 5)


def test_optimizer_on_the_store_matches_an_updater_on_the_sum():
    rng = np.random.default_rng(0)
    w0 = rng.uniform(-1, 1, SHAPE)
    grads = [[rng.uniform(-1, 1, SHAPE) for _ in range(2)] for _ in range(3)]
    kv = mx.kv.create("local")
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=0.01))
    kv.init("fc_weight", mx.nd.array(w0))
    weights = [mx.nd.array(w0, ctx=mx.cpu(i)) for i in range(2)]
    ref_w = mx.nd.array(w0)
    ref = mx.optimizer.get_updater(mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=0.01))
    for step in grads:
        kv.pushpull("fc_weight", [mx.nd.array(g, ctx=mx.cpu(i)) for i, g in enumerate(step)],
                    out=weights)
        ref("fc_weight", mx.nd.array(step[0] + step[1]), ref_w)
    for w in weights:
        np.testing.assert_allclose(w.asnumpy(), ref_w.asnumpy(), rtol=1e-6)
    assert set(kv._updater.states) == {"fc_weight"}     # bytes keys come back as names


def test_save_and_load_optimizer_states(tmp_path):
    kv = mx.kv.create()
    kv.set_optimizer(mx.optimizer.Adam(learning_rate=0.01))
    kv.init(0, mx.nd.ones(SHAPE))
    kv.push(0, mx.nd.ones(SHAPE))
    fname = str(tmp_path / "kv.states")
    kv.save_optimizer_states(fname, dump_optimizer=True)
    other = mx.kv.create()
    other.set_optimizer(mx.optimizer.SGD())
    other.load_optimizer_states(fname)
    assert isinstance(other._updater.optimizer, mx.optimizer.Adam)
    np.testing.assert_array_equal(other._updater.states[0][0].asnumpy(),
                                  kv._updater.states[0][0].asnumpy())
    plain = mx.kv.create()
    with pytest.raises(MXNetError, match="set_optimizer"):
        plain.save_optimizer_states(fname)
    with open(fname, "wb") as f:
        f.write(b"\x80\x04garbage")
    with pytest.raises(MXNetError):
        other.load_optimizer_states(fname)


# ---------------------------------------------------------------------------------------------
# 2-bit gradient compression against MXNet 1.9.1
# ---------------------------------------------------------------------------------------------
ARRAYS = np.load(os.path.join(FIX, "optimizer_golden.npz"))


def test_two_bit_compression_matches_mxnet_over_devices():
    kv = mx.kv.create("device")
    kv.set_gradient_compression({"type": "2bit", "threshold": 0.5})
    kv.init(0, mx.nd.zeros((3, 4)))
    for step in range(3):
        vals = [mx.nd.array(ARRAYS["kv2bit/push%d/dev%d" % (step, d)], ctx=mx.cpu(d))
                for d in range(2)]
        kv.push(0, vals)
        out = mx.nd.zeros((3, 4))
        kv.pull(0, out=out)
        np.testing.assert_allclose(out.asnumpy(), ARRAYS["kv2bit/pull%d" % step], rtol=1e-6)


def test_two_bit_compression_with_optimizer_matches_mxnet():
    kv = mx.kv.create("device")
    kv.set_gradient_compression({"type": "2bit", "threshold": 0.25})
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.1, momentum=0.9))
    kv.init("w", mx.nd.ones((3, 4)))
    for step in range(2):
        out = mx.nd.zeros((3, 4))
        kv.pushpull("w", mx.nd.array(ARRAYS["kv2bit_opt/push%d" % step]), out=out)
        np.testing.assert_allclose(out.asnumpy(), ARRAYS["kv2bit_opt/pull%d" % step], rtol=1e-6)


def test_compression_arguments():
    with pytest.raises(MXNetError, match="not supported"):
        mx.kv.create("local").set_gradient_compression({"type": "2bit"})
    kv = mx.kv.create("device")
    with pytest.raises(MXNetError, match="threshold"):
        kv.set_gradient_compression({"type": "2bit", "threshold": 0})
    with pytest.raises(MXNetError, match="unknown type"):
        kv.set_gradient_compression({"type": "3bit"})
    with pytest.raises(MXNetError, match="unknown parameter"):
        kv.set_gradient_compression({"type": "2bit", "ratio": 2})
    kv.set_gradient_compression({"type": "none"})


# ---------------------------------------------------------------------------------------------
# plug-in registry
# ---------------------------------------------------------------------------------------------
def test_registry_test_store_and_plugins():
    ts = mx.kv.create("teststore")
    assert ts.type == "teststore" and not ts.is_capable("optimizer")
    vals = [mx.nd.ones(SHAPE, mx.cpu(i)) for i in range(3)]
    ts.pushpull(0, vals)
    for v in vals:
        check_all(v, 3)

    @mx.kv.KVStoreBase.register
    class FakeDist(mx.kv.KVStore):
        kvstore_types = ("dist_fake_sync", "dist_fake_async")

    try:
        kv = mx.kv.create("dist_fake_async")
        assert isinstance(kv, FakeDist) and kv.type == "dist_fake_async"
        assert isinstance(mx.kv.create("fakedist"), FakeDist)
        with pytest.warns(UserWarning):
            mx.kv.KVStoreBase.register(type("FakeDist", (mx.kv.KVStore,), {}))
    finally:
        for name in ("fakedist", "dist_fake_sync", "dist_fake_async"):
            mx.kv.KVStoreBase.kv_registry.pop(name, None)
