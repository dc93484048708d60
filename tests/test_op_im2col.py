"""im2col / col2im against a direct numpy construction of the column matrix, the convolution
they express, their adjointness, numeric gradients and bad inputs."""
import itertools

import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError
from lightmod.test_utils import check_numeric_gradient


def _positions(spatial, kernel, stride, dilate, pad):
    return [(size + 2 * p - (d * (k - 1) + 1)) // s + 1
            for size, k, s, d, p in zip(spatial, kernel, stride, dilate, pad)]


def _reference_im2col(x, kernel, stride, dilate, pad):
    """Column l of sample n: the C * prod(kernel) values under window position l."""
    n, c = x.shape[:2]
    nd = len(kernel)
    padded = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    grid = _positions(x.shape[2:], kernel, stride, dilate, pad)
    cols = np.zeros((n, c * int(np.prod(kernel)), int(np.prod(grid))), x.dtype)
    for li, where in enumerate(itertools.product(*[range(g) for g in grid])):
        for ki, offs in enumerate(itertools.product(*[range(k) for k in kernel])):
            index = tuple(where[a] * stride[a] + offs[a] * dilate[a] for a in range(nd))
            for ch in range(c):
                cols[:, ch * int(np.prod(kernel)) + ki, li] = padded[(slice(None), ch) + index]
    return cols


GEOMETRIES = [
    ((2, 3, 6, 5), (3, 3), (1, 1), (1, 1), (0, 0)),
    ((1, 2, 7, 6), (3, 2), (2, 1), (1, 2), (1, 0)),
    ((2, 2, 9), (3,), (2,), (2,), (1,)),
    ((1, 2, 4, 4, 3), (2, 2, 2), (1, 2, 1), (1, 1, 1), (0, 1, 1)),
]


@pytest.mark.parametrize("shape,kernel,stride,dilate,pad", GEOMETRIES)
def test_im2col_matches_the_direct_construction(shape, kernel, stride, dilate, pad):
    x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
    kw = dict(kernel=kernel, stride=stride, dilate=dilate, pad=pad)
    want = _reference_im2col(x, kernel, stride, dilate, pad)
    got = mx.nd.im2col(mx.nd.array(x), **kw)
    np.testing.assert_array_equal(got.asnumpy(), want)
    # col2im is the adjoint: <im2col(x), y> == <x, col2im(y)>
    y = np.random.default_rng(1).uniform(-1, 1, want.shape)
    back = mx.nd.col2im(mx.nd.array(y, dtype="float64"), output_size=shape[2:], **kw)
    assert back.shape == shape
    np.testing.assert_allclose(np.sum(want.astype(np.float64) * y),
                               np.sum(x.astype(np.float64) * back.asnumpy()), rtol=1e-10)


def test_im2col_times_weights_is_a_convolution():
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (2, 3, 8, 7)).astype(np.float32)
    w = rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32)
    kw = dict(kernel=(3, 3), stride=(2, 1), dilate=(1, 2), pad=(1, 1))
    col = mx.nd.im2col(mx.nd.array(x), **kw).asnumpy()
    conv = mx.nd.Convolution(mx.nd.array(x), mx.nd.array(w), num_filter=4, no_bias=True,
                             **kw).asnumpy()
    product = np.einsum("fk,nkl->nfl", w.reshape(4, -1), col).reshape(conv.shape)
    np.testing.assert_allclose(product, conv, rtol=1e-5, atol=1e-5)


def test_col2im_of_ones_counts_the_windows_covering_each_pixel():
    shape, kernel, stride = (1, 1, 5, 5), (3, 3), (2, 2)
    ones = mx.nd.ones(mx.nd.im2col(mx.nd.zeros(shape), kernel=kernel, stride=stride).shape)
    counts = mx.nd.col2im(ones, (5, 5), kernel=kernel, stride=stride).asnumpy()[0, 0]
    per_axis = np.array([1, 1, 2, 1, 1])
    np.testing.assert_array_equal(counts, np.outer(per_axis, per_axis))


def test_gradients_match_finite_differences():
    data = mx.sym.var("data")
    kw = dict(kernel=(2, 2), stride=(1, 2), pad=(1, 0))
    x = np.random.default_rng(3).uniform(-1, 1, (1, 2, 3, 4))
    check_numeric_gradient(mx.sym.im2col(data, **kw), {"data": x}, dtype=np.float64,
                           rtol=1e-5, atol=1e-8)
    cols = np.random.default_rng(4).uniform(-1, 1, (1, 8, 8))
    check_numeric_gradient(mx.sym.col2im(data, output_size=(3, 4), **kw), {"data": cols},
                           dtype=np.float64, rtol=1e-5, atol=1e-8)


def test_float16_and_grad_add():
    x = np.random.default_rng(5).uniform(-1, 1, (1, 2, 4, 4))
    half = mx.nd.im2col(mx.nd.array(x, dtype="float16"), kernel=(2, 2)).asnumpy()
    assert half.dtype == np.float16
    np.testing.assert_allclose(half, _reference_im2col(x, (2, 2), (1, 1), (1, 1), (0, 0)),
                               atol=1e-3)
    data = mx.sym.var("data")
    grad = mx.nd.ones((1, 2, 4, 4))
    exe = mx.sym.im2col(data, kernel=(2, 2)).bind(mx.cpu(), {"data": mx.nd.array(x)},
                                                  args_grad={"data": grad}, grad_req="add")
    exe.forward(is_train=True)
    head = mx.nd.ones((1, 8, 9))
    exe.backward(head)
    expected = 1 + mx.nd.col2im(head, (4, 4), kernel=(2, 2)).asnumpy()
    np.testing.assert_allclose(grad.asnumpy(), expected)


def test_bad_inputs_name_the_problem():
    with pytest.raises(MXNetError, match="spatial"):
        mx.nd.im2col(mx.nd.ones((2, 3, 4)), kernel=(2, 2))
    with pytest.raises(MXNetError, match="does not fit"):
        mx.nd.im2col(mx.nd.ones((1, 1, 2, 2)), kernel=(3, 3))
    with pytest.raises(MXNetError, match="stride"):
        mx.nd.im2col(mx.nd.ones((1, 1, 4, 4)), kernel=(2, 2), stride=(0, 1))
    with pytest.raises(MXNetError, match="expected"):
        mx.nd.col2im(mx.nd.ones((1, 7, 9)), (4, 4), kernel=(2, 2))
    with pytest.raises(MXNetError, match="output_size"):
        mx.nd.col2im(mx.nd.ones((1, 4, 9)), (4, 4, 4), kernel=(2, 2))
    with pytest.raises(MXNetError, match="kernel"):
        mx.nd.im2col(mx.nd.ones((1, 1, 4, 4)))
