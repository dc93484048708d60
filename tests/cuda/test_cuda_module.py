"""Module training on GPUs (run under NUMBA_ENABLE_CUDASIM=1 or on a GPU): one GPU against the
CPU, data parallelism over two GPUs (the simulator has one: the ``two_gpus`` fixture of
conftest.py simulates two and checks that every kernel runs on the GPU its arrays live on),
group2ctxs across GPUs, checkpoints of GPU modules, and what happens without CUDA.
"""
import numpy as np
import pytest

import lightmod as mx
from lightmod.kernels import cuda_support

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not (cuda_support.simulator_enabled()
                                      or cuda_support.num_gpus() > 0),
                                 reason="needs a GPU or NUMBA_ENABLE_CUDASIM=1")]

BATCH = 4


def _mlp():
    data = mx.sym.var("data")
    h = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=6, name="fc1"),
                          act_type="relu")
    h = mx.sym.FullyConnected(h, num_hidden=3, name="fc2")
    return mx.sym.SoftmaxOutput(h, name="softmax")


def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2 * BATCH, 5)).astype(np.float32)
    y = rng.integers(0, 3, 2 * BATCH).astype(np.float32)
    return mx.io.NDArrayIter(x, y, batch_size=BATCH)


def _train(context, symbol=None, kvstore="local", epochs=1, group2ctxs=None, **bind):
    """A few SGD-momentum steps (two per epoch); returns the module, the outputs of the last
    batch and the cross-entropy metric."""
    it = _data()
    mod = mx.mod.Module(_mlp() if symbol is None else symbol, context=context,
                        group2ctxs=group2ctxs)
    mod.bind(data_shapes=it.provide_data, label_shapes=it.provide_label, **bind)
    mx.random.seed(1)
    mod.init_params(mx.init.Xavier(magnitude=2.0))
    mod.init_optimizer(kvstore=kvstore, optimizer="sgd",
                       optimizer_params={"learning_rate": 0.5, "momentum": 0.9, "wd": 1e-3})
    metric = mx.metric.create("ce")
    for _ in range(epochs):
        it.reset()
        for batch in it:
            mod.forward_backward(batch)
            mod.update()
            mod.update_metric(metric, batch.label)
    return mod, mod.get_outputs()[0].asnumpy(), metric.get()[1]


def _assert_same_params(mod, ref, rtol=1e-4, atol=1e-5):
    args, auxs = mod.get_params()
    ref_args, ref_auxs = ref.get_params()
    assert sorted(args) == sorted(ref_args)
    for name in ref_args:
        assert args[name].context == mx.cpu(0)       # get_params copies to the host
        np.testing.assert_allclose(args[name].asnumpy(), ref_args[name].asnumpy(), rtol=rtol,
                                   atol=atol, err_msg=name)
    for name in ref_auxs:
        np.testing.assert_allclose(auxs[name].asnumpy(), ref_auxs[name].asnumpy(), rtol=rtol,
                                   atol=atol, err_msg=name)


# ---------------------------------------------------------------------------------------------
# one GPU
# ---------------------------------------------------------------------------------------------
def test_mlp_on_gpu_matches_cpu():
    ref, out_ref, ce_ref = _train(mx.cpu())
    mod, out, ce = _train(mx.gpu(0))
    exe = mod._exec_group.execs[0]
    assert exe.arg_dict["fc1_weight"].context == mx.gpu(0)
    assert exe.grad_dict["fc1_weight"].context == mx.gpu(0)
    assert mod.get_outputs()[0].context == mx.gpu(0)
    _assert_same_params(mod, ref)
    np.testing.assert_allclose(out, out_ref, rtol=1e-4, atol=1e-6)
    assert ce == pytest.approx(ce_ref, rel=1e-4)
    # inference on the GPU module
    it = _data()
    np.testing.assert_allclose(mod.predict(it).asnumpy(), ref.predict(it).asnumpy(), rtol=1e-4,
                               atol=1e-6)
    assert mod.score(it, "acc")[0][1] == ref.score(it, "acc")[0][1]


def test_fit_on_gpu_matches_fit_on_cpu():
    def fit(ctx):
        rng = np.random.default_rng(3)
        x = rng.standard_normal((8, 4)).astype(np.float32)
        it = mx.io.NDArrayIter(x, (x[:, 0] > 0).astype(np.float32), batch_size=8)
        mod = mx.mod.Module(_mlp(), context=ctx)
        mx.random.seed(2)
        mod.fit(it, num_epoch=2, optimizer="adam",
                optimizer_params={"learning_rate": 0.05}, initializer=mx.init.Xavier())
        return mod, mod.score(it, "ce")[0][1]
    ref, ce_ref = fit(mx.cpu())
    mod, ce = fit(mx.gpu(0))
    _assert_same_params(mod, ref)
    assert ce == pytest.approx(ce_ref, rel=1e-4)


def test_checkpoint_of_gpu_module_loads_on_cpu(tmp_path):
    mod, _, _ = _train(mx.gpu(0), epochs=1)
    prefix = str(tmp_path / "gpu")
    mod.save_checkpoint(prefix, 1, save_optimizer_states=True)
    cpu_mod = mx.mod.Module.load(prefix, 1, load_optimizer_states=True, context=mx.cpu())
    it = _data()
    cpu_mod.bind(data_shapes=it.provide_data, label_shapes=it.provide_label)
    _assert_same_params(cpu_mod, mod, rtol=0, atol=0)
    # the .params records say cpu(0): get_params copies to the host before saving
    raw = open(prefix + "-0001.params", "rb").read()
    assert b"\x02\x00\x00\x00\x00\x00\x00\x00" not in raw[:200]


# ---------------------------------------------------------------------------------------------
# two GPUs
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kvstore", ["device", "local", None])
def test_data_parallel_over_two_gpus(two_gpus, kvstore):
    # the same data parallelism on two CPU replicas is the reference (without a kvstore each
    # replica updates with its own gradients, as in MXNet)
    ref, out_ref, ce_ref = _train([mx.cpu(0), mx.cpu(1)], kvstore=kvstore)
    mod, out, ce = _train([mx.gpu(0), mx.gpu(1)], kvstore=kvstore)
    execs = mod._exec_group.execs
    assert [e.arg_dict["fc1_weight"].context for e in execs] == [mx.gpu(0), mx.gpu(1)]
    assert [e.arg_dict["data"].shape[0] for e in execs] == [BATCH // 2, BATCH // 2]
    assert two_gpus.launches[0] > 0 and two_gpus.launches[1] > 0
    _assert_same_params(mod, ref)
    np.testing.assert_allclose(out, out_ref, rtol=1e-4, atol=1e-6)
    assert ce == pytest.approx(ce_ref, rel=1e-4)
    if kvstore is not None:
        # the gradients were summed: the replicas agree, and with the one-CPU run
        w0, w1 = (e.arg_dict["fc2_weight"].asnumpy() for e in execs)
        np.testing.assert_array_equal(w0, w1)
        single, _, _ = _train(mx.cpu(), kvstore=kvstore)
        _assert_same_params(mod, single)


def test_group2ctxs_places_groups_on_two_gpus(two_gpus):
    data = mx.sym.var("data")
    with mx.AttrScope(ctx_group="first"):
        h = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=6, name="fc1"),
                              act_type="relu")
    with mx.AttrScope(ctx_group="second"):
        h = mx.sym.FullyConnected(h, num_hidden=3, name="fc2")
        net = mx.sym.SoftmaxOutput(h, name="softmax")
    ref, out_ref, _ = _train(mx.cpu(), symbol=net)
    mod, out, _ = _train(mx.gpu(0), symbol=net,
                         group2ctxs={"first": mx.gpu(0), "second": mx.gpu(1)})
    exe = mod._exec_group.execs[0]
    assert exe.arg_dict["fc1_weight"].context == mx.gpu(0)
    assert exe.arg_dict["fc2_weight"].context == mx.gpu(1)
    assert exe.grad_dict["fc2_weight"].context == mx.gpu(1)
    assert mod.get_outputs()[0].context == mx.gpu(1)
    assert two_gpus.launches[0] > 0 and two_gpus.launches[1] > 0
    _assert_same_params(mod, ref)
    np.testing.assert_allclose(out, out_ref, rtol=1e-4, atol=1e-6)


def test_arrays_and_copies_between_two_gpus(two_gpus):
    a = mx.nd.array(np.arange(6).reshape(2, 3), ctx=mx.gpu(1))
    b = (a * 2 + 1).sum(axis=1)
    assert b.context == mx.gpu(1) and b.asnumpy().tolist() == [9, 27]
    c = a.copyto(mx.gpu(0))
    assert c.context == mx.gpu(0) and c.asnumpy().tolist() == a.asnumpy().tolist()
    d = mx.nd.zeros((2, 3), ctx=mx.gpu(0))
    a.copyto(d)                                   # same dtype: a device-to-device copy
    assert (d + 1).asnumpy().tolist() == [[1, 2, 3], [4, 5, 6]]
    e = mx.nd.zeros((2, 3), ctx=mx.gpu(1), dtype="float64")
    a.copyto(e)
    assert e.asnumpy().tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(mx.MXNetError, match="different contexts"):
        a + c
    assert two_gpus.launches[1] > 0


def test_copy_with_cast_between_two_gpus(two_gpus):
    a = mx.nd.array([[1.5, 2.5]], ctx=mx.gpu(1))
    b = mx.nd.zeros((1, 2), ctx=mx.gpu(0), dtype="float64")
    a.copyto(b)
    assert b.asnumpy().tolist() == [[1.5, 2.5]]
    wrong = list(two_gpus.violations)
    two_gpus.violations.clear()
    assert not wrong, wrong


def test_gpu_index_out_of_range(two_gpus):
    with pytest.raises(mx.MXNetError, match=r"gpu\(2\) does not exist: 2 GPU\(s\) are visible"):
        mx.nd.zeros((2,), ctx=mx.gpu(2))


# ---------------------------------------------------------------------------------------------
# without CUDA
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def fresh_cuda_checks():
    """Forget which GPUs were found usable (so a monkeypatched CUDA is looked at again)."""
    from lightmod import kernels
    saved = (dict(cuda_support._checked), dict(kernels._kernel_sets))
    cuda_support._checked.clear()
    kernels._kernel_sets.clear()
    yield
    for cache, old in zip((cuda_support._checked, kernels._kernel_sets), saved):
        cache.clear()
        cache.update(old)


def test_missing_numba_cuda_says_what_to_install(fresh_cuda_checks, monkeypatch):
    monkeypatch.setattr(cuda_support, "numba_cuda_installed", lambda: False)
    with pytest.raises(mx.MXNetError, match=r"gpu\(0\) needs numba's CUDA target: "
                                            r"pip install 'lightmod\[cuda\]'"):
        mx.nd.ones((2,), ctx=mx.gpu(0))
    assert mx.num_gpus() == 0


def test_missing_driver_says_so(fresh_cuda_checks, monkeypatch):
    from numba import cuda
    monkeypatch.setattr(cuda, "is_available", lambda: False)
    monkeypatch.setattr(cuda, "detect", lambda: (_ for _ in ()).throw(
        RuntimeError("CUDA driver library cannot be found")))
    with pytest.raises(mx.MXNetError) as info:
        mx.nd.array([1.0], ctx=mx.gpu(0))
    message = str(info.value)
    assert "gpu(0) is not usable: no CUDA driver or GPU was found" in message
    assert "CUDA driver library cannot be found" in message
    assert "NUMBA_ENABLE_CUDASIM=1" in message
    assert mx.num_gpus() == 0
    # a module bound to the GPU fails at bind with the same message
    it = _data()
    mod = mx.mod.Module(_mlp(), context=mx.gpu(0))
    with pytest.raises(mx.MXNetError, match="no CUDA driver or GPU was found"):
        mod.bind(data_shapes=it.provide_data, label_shapes=it.provide_label)


def test_gpu_records_load_on_cpu_without_cuda(fresh_cuda_checks, monkeypatch, tmp_path):
    path = str(tmp_path / "gpu.params")
    mx.nd.save(path, {"w": mx.nd.array([[1, 2], [3, 4]], ctx=mx.gpu(0)),
                      "b": mx.nd.array([5, 6], ctx=mx.gpu(0), dtype="int32")})
    assert mx.nd.load(path)["w"].context == mx.gpu(0)
    monkeypatch.setattr(cuda_support, "numba_cuda_installed", lambda: False)
    loaded = mx.nd.load(path)
    assert loaded["w"].context == mx.cpu(0) and loaded["b"].context == mx.cpu(0)
    assert loaded["w"].asnumpy().tolist() == [[1, 2], [3, 4]]
    assert loaded["b"].dtype == np.int32 and loaded["b"].asnumpy().tolist() == [5, 6]


def test_record_of_a_missing_gpu_loads_on_cpu(two_gpus, tmp_path):
    path = str(tmp_path / "gpu1.params")
    mx.nd.save(path, [mx.nd.array([7.0, 8.0], ctx=mx.gpu(1))])
    assert mx.nd.load(path)[0].context == mx.gpu(1)
    from numba.cuda.simulator.cudadrv import devices
    devices.gpus.lst = devices.gpus.lst[:1]          # the file moved to a one-GPU machine
    back = mx.nd.load(path)[0]
    assert back.context == mx.cpu(0) and back.asnumpy().tolist() == [7.0, 8.0]
