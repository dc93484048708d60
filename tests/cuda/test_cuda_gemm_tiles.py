"""The register-tiled GEMM of kernels/cuda/nn.py (FullyConnected, the im2col convolution, dot,
the RNN) against numpy in float64: every transpose pair, write and accumulate, sizes off the
tiles, both tile shapes (run under NUMBA_ENABLE_CUDASIM=1, where the tiles are small, or on a
GPU)."""
import numpy as np
import pytest

from lightmod.kernels import cuda_support

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not (cuda_support.simulator_enabled()
                                      or cuda_support.num_gpus() > 0),
                                 reason="needs a GPU or NUMBA_ENABLE_CUDASIM=1")]


def _check(m, n, depth, trans_a, trans_b, accumulate, dtype, rng):
    from numba import cuda

    from lightmod.kernels.cuda.nn import _gemm
    a = rng.standard_normal((depth, m) if trans_a else (m, depth))
    b = rng.standard_normal((n, depth) if trans_b else (depth, n))
    c0 = rng.standard_normal((m, n))
    expected = (a.T if trans_a else a) @ (b.T if trans_b else b) + (c0 if accumulate else 0)
    c = cuda.to_device(c0.astype(dtype))
    _gemm(cuda.to_device(a.astype(dtype)), cuda.to_device(b.astype(dtype)), c, trans_a, trans_b,
          accumulate)
    tol = 1e-4 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(c.copy_to_host(), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("m, n, depth", [(3, 5, 7), (17, 23, 9)])
def test_gemm_against_numpy(m, n, depth, trans_a, trans_b):
    rng = np.random.default_rng(m * n + trans_a + 2 * trans_b)
    for accumulate in (False, True):
        _check(m, n, depth, trans_a, trans_b, accumulate, np.float32, rng)


def test_gemm_picks_both_tiles_and_float64():
    from lightmod.kernels.cuda import nn
    large, small = nn.GEMM_TILES
    rng = np.random.default_rng(0)
    # enough large tiles for the large kernel, then a product far too small for it
    rows = large.bm * 2 + 1
    cols = large.bn * (nn.GEMM_LARGE_MIN_BLOCKS // 2) + 3
    assert -(-rows // large.bm) * -(-cols // large.bn) >= nn.GEMM_LARGE_MIN_BLOCKS
    for m, n in ((rows, cols), (2, 3)):
        _check(m, n, 5, False, True, True, np.float64, rng)
        _check(m, n, 6, True, False, False, np.float32, rng)


def test_gemm_empty_output_is_a_no_op():
    from numba import cuda

    from lightmod.kernels.cuda.nn import _gemm
    c = cuda.to_device(np.zeros((0, 4), np.float32))
    _gemm(cuda.to_device(np.zeros((0, 3), np.float32)), cuda.to_device(np.ones((3, 4),
                                                                                 np.float32)),
          c, False, False, False)
    assert c.shape == (0, 4)
