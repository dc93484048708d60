"""kernels/cpu/nn.py fc_forward: small batches with many outputs are computed as w @ x^T and
transposed into the output with the bias in the same pass; the result is the plain product's
(checked against float64 numpy for shapes on both sides of the thresholds)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmod.kernels.cpu import nn as knn


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 80), k=st.integers(1, 300), h=st.sampled_from([1, 10, 127, 128, 500]),
       bias=st.booleans(), dtype=st.sampled_from([np.float32, np.float64]),
       seed=st.integers(0, 2 ** 16))
def test_fc_forward_matches_numpy(n, k, h, bias, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, k)).astype(dtype)
    w = rng.standard_normal((h, k)).astype(dtype)
    b = rng.standard_normal(h).astype(dtype) if bias else None
    out = np.full((n, h), np.nan, dtype)
    scratch = {}
    knn.fc_forward(x, w, b, out, scratch)
    ref = x.astype(np.float64) @ w.astype(np.float64).T
    if bias:
        ref += b
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol * np.sqrt(k))
    transposed = (1 < n <= knn.FC_TRANSPOSED_MAX_ROWS and h >= knn.FC_TRANSPOSED_MIN_HIDDEN
                  and k >= knn.FC_TRANSPOSED_MIN_K)
    assert ("fc_t" in scratch) == transposed


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fc_forward_same_bits_every_call_and_reuses_its_scratch(dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((32, 800)).astype(dtype)
    w = rng.standard_normal((500, 800)).astype(dtype)
    b = rng.standard_normal(500).astype(dtype)
    scratch = {}
    first = np.empty((32, 500), dtype)
    knn.fc_forward(x, w, b, first, scratch)
    buf = scratch["fc_t"]
    again = np.empty_like(first)
    knn.fc_forward(x, w, b, again, scratch)
    assert scratch["fc_t"] is buf
    np.testing.assert_array_equal(first, again)
