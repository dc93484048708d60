"""kernels/cpu/nn.py softmax_forward: the contiguous-rows path (numba shift, numpy exp in place,
numba normalisation) against a float64 reference and against the general path (taken when
row lengths are given), for drawn sizes, temperatures, dtypes and in place."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmod.kernels.cpu import nn as knn


def _reference(x, temperature):
    z = x.astype(np.float64) / temperature
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(0, 70), length=st.integers(1, 300), temperature=st.sampled_from(
    [1.0, 0.5, 3.0]), dtype=st.sampled_from([np.float32, np.float64]), in_place=st.booleans(),
    seed=st.integers(0, 2 ** 16), scale=st.sampled_from([1.0, 10.0, 100.0]))
def test_contiguous_rows_match_reference_and_general_path(rows, length, temperature, dtype,
                                                          in_place, seed, scale):
    x = (np.random.RandomState(seed).randn(rows, length) * scale).astype(dtype)
    out = x.copy() if in_place else np.empty_like(x)
    src = out if in_place else x
    knn.softmax_forward(src[:, :, None], out[:, :, None], temperature)
    general = np.empty_like(x)
    knn.softmax_forward(x[:, :, None], general[:, :, None], temperature, False,
                        np.full(rows, length, dtype))
    tol = 2e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, _reference(x, temperature), rtol=tol * 10, atol=tol)
    np.testing.assert_allclose(out, general, rtol=tol * 10, atol=tol)
    if rows:
        np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=tol * 10)


def test_strided_inner_axis_keeps_the_general_path():
    x = np.random.RandomState(0).randn(3, 5, 4).astype(np.float32)
    out = np.empty_like(x)
    knn.softmax_forward(x, out)
    ref = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, ref / ref.sum(axis=1, keepdims=True), rtol=1e-5)
