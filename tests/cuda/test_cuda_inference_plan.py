"""The inference plan on gpu(0) (run under NUMBA_ENABLE_CUDASIM=1 or on a GPU): planned and
plain ``forward(is_train=False)`` agree on drawn conv / BatchNorm / activation / FC stacks, and
``predict`` leaves the parameters bit-identical."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from inference_plan_cases import build, compare, stacks

import lightmod as mx
from lightmod.kernels import cuda_support

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not (cuda_support.simulator_enabled()
                                      or cuda_support.num_gpus() > 0),
                                 reason="needs a GPU or NUMBA_ENABLE_CUDASIM=1")]


@pytest.fixture(autouse=True)
def _one_executor(monkeypatch):
    """The CPU half inspects the plan of the executor it binds: no sample split, which would
    run the plans of its child executors instead (tests/test_sample_split.py tests those)."""
    monkeypatch.setenv("LIGHTMOD_SAMPLE_SPLIT", "0")


@settings(max_examples=8, deadline=None)
@given(case=stacks(max_layers=2), seed=st.integers(0, 2 ** 16))
def test_plan_matches_plain_inference_forward_on_gpu(case, seed):
    layers, fc, shape = case
    planned, plain, plan = compare(build(layers, fc, shape[1]), shape, mx.gpu(0), seed)
    np.testing.assert_allclose(planned, plain, rtol=2e-5, atol=2e-5)
    fusable = any(layer["bn"] or layer["act"] for layer in layers) or fc["bn"] or fc["act"]
    assert (plan.fused_count > 0) == bool(fusable)


def test_predict_on_gpu_keeps_params_and_matches_cpu():
    net = mx.sym.Convolution(mx.sym.var("data"), kernel=(3, 3), num_filter=8, name="conv")
    net = mx.sym.BatchNorm(net, fix_gamma=False, name="bn")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.FullyConnected(net, num_hidden=3, name="fc")
    net = mx.sym.Activation(net, act_type="tanh")
    rng = np.random.RandomState(0)
    x = rng.uniform(-1, 1, (4, 8, 5, 5)).astype(np.float32)
    outs, params = [], None
    for ctx in (mx.cpu(), mx.gpu(0)):
        mod = mx.mod.Module(net, context=ctx, label_names=None)
        mod.bind(data_shapes=[("data", x.shape)], for_training=False)
        if params is None:
            mx.random.seed(1)
            mod.init_params(mx.init.Uniform(0.5))
            args, aux = mod.get_params()
            aux = {k: mx.nd.array(rng.uniform(0.3, 2.0, v.shape)) for k, v in aux.items()}
            params = (args, aux)
        mod.set_params(*params)
        before = [{k: v.asnumpy().copy() for k, v in d.items()} for d in mod.get_params()]
        outs.append(mod.predict(mx.io.NDArrayIter(x, batch_size=4)).asnumpy())
        assert mod._exec_group.execs[0]._inference_plan.fused_count == 2
        after = mod.get_params()
        for b, a in zip(before, after):
            for name in b:
                assert b[name].tobytes() == a[name].asnumpy().tobytes(), name
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-5)
