"""GroupNorm, BatchNorm_v1, image.normalize, PReLU with per-sample slopes and 'same' pooling
with an all-zero pad: numpy references, numeric gradients and bad inputs."""
import numpy as np
import ophelpers as oh
import pytest

import lightmod as mx
from lightmod.base import MXNetError


def group_norm(x, gamma, beta, groups, eps):
    n = x.shape[0]
    g = x.reshape(n, groups, -1)
    mean = g.mean(axis=2)
    std = np.sqrt(g.var(axis=2) + eps)
    y = (g - mean[:, :, None]) / std[:, :, None] * gamma[None, :, None] + beta[None, :, None]
    return y.reshape(x.shape), mean, std


@pytest.mark.parametrize("shape,groups", [((2, 4, 3), 2), ((3, 6, 2, 2), 3), ((2, 2), 1)])
def test_group_norm_matches_numpy_and_gradient(shape, groups):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    gamma, beta = rng.standard_normal(groups), rng.standard_normal(groups)
    attrs = {"num_groups": groups, "eps": 1e-3, "output_mean_var": True}
    outs, _, _, _ = oh.forward("GroupNorm", attrs, [x, gamma, beta])
    for got, want in zip(outs, group_norm(x, gamma, beta, groups, 1e-3)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    oh.check_grad("GroupNorm", {"num_groups": groups, "eps": 1e-3}, [x, gamma, beta],
                  rtol=1e-4, atol=1e-7)


def test_group_norm_float16_and_shapes():
    rng = np.random.default_rng(1)
    x = rng.uniform(0.2, 1.0, (2, 4, 3, 3)).astype(np.float16)
    gamma = np.array([0.5, -1.0], np.float16)
    beta = np.array([0.1, 0.2], np.float16)
    y = mx.nd.GroupNorm(mx.nd.array(x, dtype="float16"), mx.nd.array(gamma, dtype="float16"),
                        mx.nd.array(beta, dtype="float16"), num_groups=2, eps=1e-2)
    want = group_norm(x.astype(np.float64), gamma.astype(np.float64), beta.astype(np.float64),
                      2, 1e-2)[0]
    assert y.dtype == np.float16
    np.testing.assert_allclose(y.asnumpy(), want, rtol=1e-2, atol=5e-3)
    sym = mx.sym.GroupNorm(mx.sym.var("data"), num_groups=2, output_mean_var=True)
    args, outs, _ = sym.infer_shape(data=(5, 4, 3))
    assert args == [(5, 4, 3), (2,), (2,)] and outs == [(5, 4, 3), (5, 2), (5, 2)]


def test_group_norm_bad_inputs():
    op, p = oh.prepare("GroupNorm", {"num_groups": 3})
    with pytest.raises(MXNetError, match=r"GroupNorm: data has shape \(2, 4, 3\): its 4 "
                                         r"channels do not split into num_groups=3"):
        op.infer_shape(p, [(2, 4, 3), None, None])
    with pytest.raises(MXNetError, match=r"input 'gamma' has shape \(4,\) but \(3,\)"):
        op.infer_shape(p, [(2, 6, 3), (4,), None])
    with pytest.raises(MXNetError, match="num_groups must be positive"):
        oh.prepare("GroupNorm", {"num_groups": 0})


def test_batchnorm_v1_is_batchnorm_on_axis_1():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3, 2))
    params = [rng.uniform(0.5, 1.5, 3), rng.standard_normal(3), rng.standard_normal(3),
              rng.uniform(0.5, 1.5, 3)]
    for attrs in ({"fix_gamma": False}, {"fix_gamma": True, "use_global_stats": True}):
        dy = [rng.standard_normal(x.shape)]
        v1 = oh.backward("BatchNorm_v1", attrs, [x] + params, dy)
        v2 = oh.backward("BatchNorm", attrs, [x] + params, dy)
        for a, b in zip(v1, v2):
            if b is not None:
                np.testing.assert_allclose(a, b, rtol=1e-12)
        out1 = oh.forward("BatchNorm_v1", attrs, [x] + params)[0][0]
        out2 = oh.forward("BatchNorm", attrs, [x] + params)[0][0]
        np.testing.assert_allclose(out1, out2, rtol=1e-12)
    oh.check_grad("BatchNorm_v1", {"fix_gamma": False}, [x] + params, wrt=[0, 1, 2],
                  rtol=1e-4, atol=1e-7)
    with pytest.raises(MXNetError, match="BatchNorm_v1: unknown attribute 'axis'"):
        oh.prepare("BatchNorm_v1", {"axis": 1})


@pytest.mark.parametrize("shape", [(3, 4, 5), (2, 3, 4, 5)])
def test_image_normalize(shape):
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, shape)
    mean, std = (0.1, 0.5, 1.0), (2.0, 0.5, 1.0)
    bshape = (3, 1, 1) if len(shape) == 3 else (1, 3, 1, 1)
    want = (x - np.reshape(mean, bshape)) / np.reshape(std, bshape)
    attrs = {"mean": mean, "std": std}
    np.testing.assert_allclose(oh.forward("_image_normalize", attrs, [x])[0][0], want)
    oh.check_grad("_image_normalize", attrs, [x])
    # one value applies to every channel; the namespaces reach the operator
    y = mx.nd.image.normalize(mx.nd.array(x), mean=0.5, std=2.0).asnumpy()
    np.testing.assert_allclose(y, (x - 0.5) / 2.0, rtol=1e-5, atol=1e-7)
    assert mx.sym.image.normalize(mx.sym.var("d")).list_arguments() == ["d"]


def test_image_normalize_bad_inputs():
    op, p = oh.prepare("_image_normalize", {"mean": (0.1, 0.2), "std": (1.0,)})
    with pytest.raises(MXNetError, match=r"mean \(0.1, 0.2\) must have 1 or 3 values"):
        op.infer_shape(p, [(3, 4, 4)])
    with pytest.raises(MXNetError, match="expected 3 dims"):
        op.infer_shape(p, [(4, 4)])
    op, p = oh.prepare("_image_normalize", {"std": (1.0, 0.0, 1.0)})
    with pytest.raises(MXNetError, match="std .* must not contain 0"):
        op.infer_shape(p, [(3, 4, 4)])


@pytest.mark.parametrize("gamma_shape", [(3, 4), (3, 1), (4,), (1,)])
@pytest.mark.parametrize("data_shape", [(3, 4), (3, 4, 2, 2)])
def test_prelu_gamma_broadcasts_over_batch_and_channel(gamma_shape, data_shape):
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, data_shape)
    x[np.abs(x) < 0.05] = 0.5
    gamma = rng.uniform(0.1, 0.5, gamma_shape)
    full = gamma.reshape(gamma_shape + (1,) * (len(data_shape) - len(gamma_shape)))
    if gamma_shape == (4,):
        full = gamma.reshape((1, 4) + (1,) * (len(data_shape) - 2))
    want = np.where(x > 0, x, x * full)
    out = oh.forward("LeakyReLU", {"act_type": "prelu"}, [x, gamma])[0][0]
    np.testing.assert_allclose(out, want)
    oh.check_grad("LeakyReLU", {"act_type": "prelu"}, [x, gamma])


def test_prelu_gamma_that_does_not_broadcast():
    op, p = oh.prepare("LeakyReLU", {"act_type": "prelu"})
    with pytest.raises(MXNetError, match=r"gamma has shape \(2, 4\), expected \(4,\)"):
        op.infer_shape(p, [(3, 4, 5), (2, 4)])
    with pytest.raises(MXNetError, match=r"gamma has shape \(1, 3, 4\)"):
        op.infer_shape(p, [(3, 4, 5), (1, 3, 4)])


def test_pooling_same_accepts_a_zero_pad_of_any_length():
    x = mx.nd.array(np.arange(10, dtype=np.float32).reshape(1, 1, 10))
    y = mx.nd.Pooling(x, kernel=(2,), stride=(2,), pad=(0, 0, 0), pool_type="max",
                      pooling_convention="same")
    np.testing.assert_array_equal(y.asnumpy().ravel(), [1, 3, 5, 7, 9])
    with pytest.raises(MXNetError, match="does not take pad"):
        mx.nd.Pooling(x, kernel=(2,), stride=(2,), pad=(2,), pool_type="max",
                      pooling_convention="same")
