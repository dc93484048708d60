"""The implicit-GEMM convolution kernels (kernels/cuda/conv_implicit.py) against a direct numpy
convolution in float64: forward with bias / folded scale, shift and activation, data gradient
and weight gradient with 'write' and 'add', over tile edges, padding, stride, dilation and
groups; the Convolution operator on the GPU (implicit and im2col paths) against the CPU one;
a small conv net's Module outputs and gradients on gpu(0) against cpu(0).

Run under NUMBA_ENABLE_CUDASIM=1 (its tiles are 8x8 / 4x16 there, so these small shapes cross
several tiles and split the weight gradient's reduction) or on a GPU (full-size tiles)."""
import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ophelpers as oh  # noqa: E402

import lightmod as mx  # noqa: E402
from lightmod.kernels import cuda_support  # noqa: E402
from lightmod.operator.conv import geometry3, shape5  # noqa: E402

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not (cuda_support.simulator_enabled()
                                      or cuda_support.num_gpus() > 0),
                                 reason="needs a GPU or NUMBA_ENABLE_CUDASIM=1")]


# ---------------------------------------------------------------------------------------------
# direct numpy convolution (float64), its data and weight gradients
# ---------------------------------------------------------------------------------------------
def _out_size(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _windows(shape, kernel, stride, pad, dilate):
    """For each tap: the slices of the padded 2-d image that the output pixels read."""
    (_, _, H, W), (KH, KW) = shape, kernel
    OH = _out_size(H, KH, stride[0], pad[0], dilate[0])
    OW = _out_size(W, KW, stride[1], pad[1], dilate[1])
    for kh in range(KH):
        for kw in range(KW):
            h0, w0 = kh * dilate[0], kw * dilate[1]
            yield kh, kw, (slice(h0, h0 + stride[0] * (OH - 1) + 1, stride[0]),
                           slice(w0, w0 + stride[1] * (OW - 1) + 1, stride[1]))


def conv_reference(x, w, stride, pad, dilate, groups):
    n, C, H, W = x.shape
    F, cg, KH, KW = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    OH = _out_size(H, KH, stride[0], pad[0], dilate[0])
    OW = _out_size(W, KW, stride[1], pad[1], dilate[1])
    cols = np.zeros((n, C, KH, KW, OH, OW))
    for kh, kw, (sh, sw) in _windows(x.shape, (KH, KW), stride, pad, dilate):
        cols[:, :, kh, kw] = xp[:, :, sh, sw]
    fg = F // groups
    y = np.concatenate([np.einsum("nckhab,fckh->nfab", cols[:, g * cg:(g + 1) * cg],
                                  w[g * fg:(g + 1) * fg]) for g in range(groups)], axis=1)
    return y, cols


def conv_gradients(x, w, dy, stride, pad, dilate, groups):
    """(dx, dw) of sum(conv(x, w) * dy)."""
    _, cols = conv_reference(x, w, stride, pad, dilate, groups)
    F, cg, KH, KW = w.shape
    fg = F // groups
    dw = np.concatenate([np.einsum("nfab,nckhab->fckh", dy[:, g * fg:(g + 1) * fg],
                                   cols[:, g * cg:(g + 1) * cg]) for g in range(groups)])
    dcols = np.concatenate([np.einsum("nfab,fckh->nckhab", dy[:, g * fg:(g + 1) * fg],
                                      w[g * fg:(g + 1) * fg]) for g in range(groups)], axis=1)
    n, C, H, W = x.shape
    dxp = np.zeros((n, C, H + 2 * pad[0], W + 2 * pad[1]))
    for kh, kw, (sh, sw) in _windows(x.shape, (KH, KW), stride, pad, dilate):
        dxp[:, :, sh, sw] += dcols[:, :, kh, kw]
    return dxp[:, :, pad[0]:pad[0] + H, pad[1]:pad[1] + W], dw


# ---------------------------------------------------------------------------------------------
# the kernels, called directly
# ---------------------------------------------------------------------------------------------
def _device(a, dtype):
    from numba import cuda
    return cuda.to_device(np.ascontiguousarray(a, dtype=dtype))


def _geometry(xshape, kernel, stride, pad, dilate):
    out = tuple(_out_size(xshape[2 + i], kernel[i], stride[i], pad[i], dilate[i])
                for i in range(2))
    return shape5(xshape), geometry3(kernel, stride, pad, dilate, out), out


def _tolerance(dtype):
    return dict(rtol=2e-5, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)


def check_kernels(n, c, h, w, f, kernel, stride, pad, dilate, groups, dtype, rng,
                  with_scale=True):
    from lightmod.kernels.cuda import conv_implicit as ci
    x = rng.standard_normal((n, c, h, w))
    wt = rng.standard_normal((f, c // groups) + kernel)
    dims, g, out = _geometry(x.shape, kernel, stride, pad, dilate)
    y_ref, _ = conv_reference(x, wt, stride, pad, dilate, groups)
    tol = _tolerance(dtype)
    xd, wd = _device(x, dtype), _device(wt, dtype)

    # forward: plain, with a bias, with a folded scale + shift and relu
    bias = rng.standard_normal(f)
    scale = rng.uniform(0.5, 1.5, f)
    cases = [(None, None, -1, y_ref), (None, bias, -1, y_ref + bias[:, None, None])]
    if with_scale:
        cases.append((scale, bias, 0, np.maximum(y_ref * scale[:, None, None]
                                                 + bias[:, None, None], 0)))
    for sc, sh, act, expected in cases:
        y = _device(np.full(y_ref.shape, np.nan), dtype)
        ci.implicit_conv_forward(xd, wd, y, dims, g, groups,
                                 None if sc is None else _device(sc, dtype),
                                 None if sh is None else _device(sh, dtype), act)
        np.testing.assert_allclose(y.copy_to_host(), expected, err_msg="forward", **tol)

    dy = rng.standard_normal(y_ref.shape)
    dx_ref, dw_ref = conv_gradients(x, wt, dy, stride, pad, dilate, groups)
    dyd = _device(dy, dtype)
    for accumulate in (False, True):
        start_x = rng.standard_normal(x.shape)
        dx = _device(start_x if accumulate else np.full(x.shape, np.nan), dtype)
        ci.implicit_conv_backward_data(dyd, wd, dx, dims, g, groups, accumulate=accumulate)
        np.testing.assert_allclose(dx.copy_to_host(), dx_ref + (start_x if accumulate else 0),
                                   err_msg="data gradient, accumulate=%s" % accumulate, **tol)
        start_w = rng.standard_normal(wt.shape)
        dw = _device(start_w if accumulate else np.full(wt.shape, np.nan), dtype)
        partial = _device(np.zeros(ci.implicit_weight_scratch(dims, g, groups, f)), dtype)
        ci.implicit_conv_backward_weight(xd, dyd, dw, dims, g, groups, partial,
                                         accumulate=accumulate)
        np.testing.assert_allclose(dw.copy_to_host(), dw_ref + (start_w if accumulate else 0),
                                   err_msg="weight gradient, accumulate=%s" % accumulate, **tol)


@pytest.mark.parametrize("n, c, h, w, f, kernel, stride, pad, dilate, groups", [
    (2, 3, 7, 6, 5, (3, 3), (1, 1), (1, 1), (1, 1), 1),       # padding, sizes off the tile
    (1, 4, 9, 8, 6, (3, 2), (2, 1), (1, 0), (1, 2), 2),       # stride, dilation, groups
    (3, 2, 5, 5, 3, (1, 1), (1, 1), (0, 0), (1, 1), 1),       # 1x1: one tap
    (1, 2, 8, 6, 5, (5, 5), (2, 2), (2, 2), (1, 1), 1),       # LeNet-like 5x5, stride 2
    (2, 6, 6, 5, 6, (3, 3), (2, 2), (1, 2), (2, 1), 3),       # groups of 2, uneven pads
])
def test_kernels_against_numpy(n, c, h, w, f, kernel, stride, pad, dilate, groups):
    rng = np.random.default_rng(n * 100 + c * 10 + f)
    check_kernels(n, c, h, w, f, kernel, stride, pad, dilate, groups, np.float32, rng)


@pytest.mark.parametrize("n, c, h, w, f, stride", [
    (2, 3, 6, 5, 4, (2, 1)),      # 3-4 rows: the narrow tiles
    (1, 6, 5, 4, 6, (1, 1)),      # 6 rows: the wide tiles
])
def test_kernels_float64(n, c, h, w, f, stride):
    check_kernels(n, c, h, w, f, (3, 3), stride, (1, 1), (1, 1), 1, np.float64,
                  np.random.default_rng(3))


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_kernels_hypothesis_shapes(data):
    draw = data.draw
    groups = draw(st.sampled_from([1, 1, 2]))
    c = groups * draw(st.integers(1, 3))
    f = groups * draw(st.integers(1, 5))
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilate = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pad = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    h = draw(st.integers(max(1, dilate[0] * (kernel[0] - 1) + 1 - 2 * pad[0]), 7))
    w = draw(st.integers(max(1, dilate[1] * (kernel[1] - 1) + 1 - 2 * pad[1]), 7))
    n = draw(st.integers(1, 2))
    check_kernels(n, c, h, w, f, kernel, stride, pad, dilate, groups, np.float32,
                  np.random.default_rng(draw(st.integers(0, 1000))), with_scale=False)


def test_weight_gradient_splits_its_reduction_in_a_fixed_order():
    """A reduction long enough to be split into chunks gives the same bits every run."""
    from lightmod.kernels.cuda import conv_implicit as ci
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 2, 9, 9)).astype(np.float32)
    dims, g, out = _geometry(x.shape, (3, 3), (1, 1), (1, 1), (1, 1))
    _, splits, _ = ci._weight_split(dims, g, 1, 3)
    assert splits > 1
    dy = _device(rng.standard_normal((3, 3) + out), np.float32)
    xd = _device(x, np.float32)
    results = []
    for _ in range(2):
        dw = _device(np.zeros((3, 2, 3, 3)), np.float32)
        partial = _device(np.full(ci.implicit_weight_scratch(dims, g, 1, 3), np.nan),
                          np.float32)
        ci.implicit_conv_backward_weight(xd, dy, dw, dims, g, 1, partial)
        results.append(dw.copy_to_host())
    assert np.array_equal(results[0], results[1])


# ---------------------------------------------------------------------------------------------
# the operator: implicit path and im2col fallback on the GPU against the CPU kernels
# ---------------------------------------------------------------------------------------------
def _run_op(attrs, inputs, device, req):
    outs, _, op, p = oh.forward("Convolution", attrs, inputs, device=device)
    head = np.random.default_rng(11).standard_normal(outs[0].shape).astype(inputs[0].dtype)
    init = [np.ones_like(a) for a in inputs]
    grads = oh.backward("Convolution", attrs, inputs, [head], req=[req] * len(inputs),
                        device=device, init_grads=init)
    return [outs[0]] + grads


ROWS = (dict(kernel=(3, 3), num_filter=3, pad=(1, 1)), (1, 8, 4, 5))     # im2row layout
COLS = (dict(kernel=(3, 3), num_filter=4, stride=(2, 2), num_group=2, no_bias=True),
        (1, 4, 5, 5))                                                      # im2col layout
ONE_D = (dict(kernel=(3,), num_filter=3, pad=(1,), dilate=(2,)), (2, 2, 7))
THREE_D = (dict(kernel=(2, 2, 2), num_filter=2, stride=(1, 2, 1)), (1, 2, 3, 4, 3))


@pytest.mark.parametrize("attrs, xshape, path", [
    case + (path,) for case, paths in ((ROWS, ("implicit", "im2col")),
                                       (COLS, ("implicit", "im2col")),
                                       (ONE_D, ("implicit",)), (THREE_D, ("implicit",)))
    for path in paths])
@pytest.mark.parametrize("req", ["write", "add"])
def test_operator_gpu_matches_cpu(attrs, xshape, req, path, monkeypatch):
    from lightmod.kernels.cuda import conv_implicit as ci
    monkeypatch.setenv("LIGHTMOD_CUDA_CONV", path)
    rng = np.random.default_rng(1)
    c, f, groups = xshape[1], attrs["num_filter"], attrs.get("num_group", 1)
    inputs = [rng.standard_normal(xshape), rng.standard_normal((f, c // groups)
                                                               + attrs["kernel"])]
    if not attrs.get("no_bias"):
        inputs.append(rng.standard_normal(f))
    inputs = [a.astype(np.float32) for a in inputs]
    assert ci.implicit_conv_fits(shape5(xshape), None, groups, f, np.float32) == (
        path == "implicit")
    cpu = _run_op(attrs, inputs, "cpu", req)
    gpu = _run_op(attrs, inputs, "cuda", req)
    for what, a, b in zip(["output", "data grad", "weight grad", "bias grad"], cpu, gpu):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4, err_msg=what)


def test_inference_epilogue_on_the_gpu_matches_cpu():
    """forward_epilogue (BatchNorm folded to scale / shift, then relu) through the implicit
    forward's store, against the CPU convolution's output pass."""
    from numba import cuda

    from lightmod.kernels import cpu as kcpu
    from lightmod.kernels import cuda as kgpu
    op, p = oh.prepare("Convolution", dict(kernel=(3, 3), num_filter=6, pad=(1, 1)))
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 6, 7)).astype(np.float32)
    w = rng.standard_normal((6, 3, 3, 3)).astype(np.float32)
    scale = rng.uniform(0.5, 1.5, 6).astype(np.float32)
    shift = rng.standard_normal(6).astype(np.float32)
    y_cpu = np.zeros((2, 6, 6, 7), np.float32)
    op.forward_epilogue(p, kcpu, x, w, scale, shift, 0, y_cpu, {})
    y_gpu = cuda.to_device(np.zeros_like(y_cpu))
    op.forward_epilogue(p, kgpu, cuda.to_device(x), cuda.to_device(w), cuda.to_device(scale),
                        cuda.to_device(shift), 0, y_gpu, {})
    np.testing.assert_allclose(y_gpu.copy_to_host(), y_cpu, rtol=1e-5, atol=1e-5)
    assert (y_cpu == 0).any() and (y_cpu > 0).any()


def test_shares_memory_sees_views_and_separate_arrays():
    """The kernel set's overlap test that the inference plan uses to keep a fused layer from
    writing over its own input."""
    from numba import cuda

    from lightmod.kernels import cuda as kgpu
    buf = cuda.to_device(np.zeros((2, 3, 4), np.float32))
    assert kgpu.shares_memory(buf, buf.reshape(buf.size)[3:])
    assert not kgpu.shares_memory(buf, cuda.to_device(np.zeros(5, np.float32)))


# ---------------------------------------------------------------------------------------------
# a conv net through the Module API on both devices
# ---------------------------------------------------------------------------------------------
def _conv_net():
    net = mx.sym.Convolution(mx.sym.var("data"), kernel=(3, 3), pad=(1, 1), num_filter=4,
                             name="conv1")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.Convolution(net, kernel=(3, 3), stride=(2, 2), num_filter=5, num_group=1,
                             name="conv2")
    net = mx.sym.Activation(net, act_type="tanh")
    net = mx.sym.FullyConnected(mx.sym.Flatten(net), num_hidden=3, name="fc")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def test_module_conv_net_gpu_matches_cpu():
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, (2, 2, 7, 7)).astype(np.float32)
    y = np.array([0, 2], np.float32)
    results = []
    for ctx in (mx.cpu(), mx.gpu(0)):
        mod = mx.mod.Module(_conv_net(), context=ctx)
        mod.bind(data_shapes=[("data", x.shape)], label_shapes=[("softmax_label", y.shape)],
                 inputs_need_grad=True)
        mx.random.seed(3)
        mod.init_params(mx.init.Xavier())
        if results:
            mod.set_params(*results[0][2])
        batch = mx.io.DataBatch([mx.nd.array(x, ctx=ctx)], [mx.nd.array(y, ctx=ctx)])
        mod.forward(batch, is_train=True)
        mod.backward()
        out = mod.get_outputs()[0].asnumpy()
        grads = {name: g[0].asnumpy() for name, g in
                 zip(mod._exec_group.param_names, mod._exec_group.grad_arrays)}
        grads["data"] = mod.get_input_grads()[0].asnumpy()
        results.append((out, grads, mod.get_params()))
    (out_c, grads_c, _), (out_g, grads_g, _) = results
    np.testing.assert_allclose(out_g, out_c, rtol=1e-5, atol=1e-6)
    assert set(grads_c) == set(grads_g)
    for name in grads_c:
        np.testing.assert_allclose(grads_g[name], grads_c[name], rtol=1e-4, atol=1e-6,
                                   err_msg=name)
