"""kernels/cpu/conv.py cols_forward's image-by-image products (each image's product written
straight into the output, the bias riding in it): the chunked products' results for every
epilogue (none, bias, scale and shift, activations), the convolution itself against a float64
reference, and each image's bits independent of the batch around it (so of how a sample split
slices the batch). The bits equal the chunked ones where BLAS takes the same path for both
widths (the benchmarked layers); at other widths its edge kernels may sum in another order."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_op_conv import conv_ref

from lightmod.kernels.cpu import conv as kconv
from lightmod.kernels.cpu.blas import gemm_function
from lightmod.kernels.scalar_nn import ACT_RELU, ACT_TANH

pytestmark = pytest.mark.skipif(gemm_function(np.float32) is None,
                                reason="numpy's BLAS cannot be called from compiled code")


def _geometry(kernel, stride, pad, osize):
    return (1, kernel, kernel, 1, stride, stride, 0, pad, pad, 1, 1, 1, 1, osize, osize)


def _forward(x, w, g, chunk, scale, shift, act, per_image, col_out=None):
    n, c = x.shape[:2]
    f = w.shape[0]
    ck = c * g[1] * g[2]
    o = g[13] * g[14]
    col = np.full(ck * chunk * o, np.nan, x.dtype)
    res = np.full(f * chunk * o, np.nan, x.dtype)
    y = np.full((n, f, o), np.nan, x.dtype)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(kconv, "IMAGE_PRODUCT_MIN_POSITIONS", 0 if per_image else 1 << 40)
        assert kconv.cols_forward(x.reshape((n, c, 1) + x.shape[2:]), w.reshape(f, ck), col,
                                  res, y, g, chunk, scale, shift, act)
    if col_out is not None:
        col_out.append(col)
    return y


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 4), c=st.integers(1, 3), f=st.integers(1, 7), size=st.integers(3, 20),
       kernel=st.integers(1, 5), stride=st.integers(1, 2), pad=st.integers(0, 2),
       chunk=st.integers(1, 3), epilogue=st.sampled_from(["none", "bias", "affine"]),
       act=st.sampled_from([-1, ACT_RELU, ACT_TANH]),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2 ** 16))
def test_image_products_match_the_chunked_ones(n, c, f, size, kernel, stride, pad, chunk,
                                               epilogue, act, dtype, seed):
    if kernel > size + 2 * pad:
        return
    osize = (size + 2 * pad - kernel) // stride + 1
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, size, size)).astype(dtype)
    w = rng.standard_normal((f, c, kernel, kernel)).astype(dtype)
    shift = None if epilogue == "none" else rng.standard_normal(f).astype(dtype)
    scale = rng.standard_normal(f).astype(dtype) if epilogue == "affine" else None
    g = _geometry(kernel, stride, pad, osize)
    chunk = min(chunk, max(1, n - 1))     # (a batch of one chunk keeps the chunked product)
    chunked = _forward(x, w, g, chunk, scale, shift, act, per_image=False)
    direct = _forward(x, w, g, chunk, scale, shift, act, per_image=True)
    close = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(direct, chunked, rtol=close, atol=close)
    for i in range(n):      # an image alone: the same bits
        alone = _forward(x[i:i + 1], w, g, 1, scale, shift, act, per_image=True)
        np.testing.assert_array_equal(alone[0], direct[i])
    ref = conv_ref(x.astype(np.float64), w.astype(np.float64),
                   np.zeros(f) if shift is None else shift.astype(np.float64),
                   (stride, stride), (pad, pad), (1, 1), 1).reshape(n, f, -1)
    if scale is not None:
        ref = (ref - shift[:, None]) * scale[:, None] + shift[:, None]
    if act == ACT_RELU:
        ref = np.maximum(ref, 0)
    elif act == ACT_TANH:
        ref = np.tanh(ref)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(direct, ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("layer", [(1, 28, 20, 5, 0), (3, 32, 32, 3, 1)],
                         ids=["lenet-conv1", "resnet-stem"])
def test_the_benchmarked_layers_take_the_image_products_with_the_chunked_bits(layer):
    c, size, f, kernel, pad = layer
    osize = size + 2 * pad - kernel + 1
    assert osize * osize >= kconv.IMAGE_PRODUCT_MIN_POSITIONS
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, c, size, size)).astype(np.float32)
    w = rng.standard_normal((f, c, kernel, kernel)).astype(np.float32)
    b = rng.standard_normal(f).astype(np.float32)
    g = _geometry(kernel, 1, pad, osize)
    np.testing.assert_array_equal(_forward(x, w, g, 2, None, b, -1, per_image=True),
                                  _forward(x, w, g, 2, None, b, -1, per_image=False))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_a_batch_of_one_chunk_leaves_its_columns(n):
    """The operator's backward reuses the forward's column matrix when the batch is one chunk
    (state['col_ready']): the image products must leave it there too."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, 2, 20, 20)).astype(np.float32)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    g = _geometry(3, 1, 1, 20)
    cols, expected = [], np.empty((2 * 9, n * 400), np.float32)
    _forward(x, w, g, n, None, None, -1, per_image=True, col_out=cols)
    kconv.im2col(x.reshape(n, 2, 1, 20, 20), expected, g)
    np.testing.assert_array_equal(cols[0], expected.reshape(-1))
