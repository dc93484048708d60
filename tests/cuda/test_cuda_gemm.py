"""The tiled GEMM behind FullyConnected, Convolution, dot and the RNN on the GPU, against numpy:
every transpose combination, overwrite and accumulate, sizes that are not multiples of the tiles
(run under NUMBA_ENABLE_CUDASIM=1, where the tiles are small, or on a GPU)."""
import itertools

import numpy as np
import pytest

from lightmod.kernels import cuda_support

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not (cuda_support.simulator_enabled()
                                      or cuda_support.num_gpus() > 0),
                                 reason="needs a GPU or NUMBA_ENABLE_CUDASIM=1")]


def _run(m, n, depth, trans_a, trans_b, accumulate, dtype, seed=0):
    from numba import cuda

    from lightmod.kernels.cuda.nn import _gemm
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((depth, m) if trans_a else (m, depth)).astype(dtype)
    b = rng.standard_normal((n, depth) if trans_b else (depth, n)).astype(dtype)
    c0 = rng.standard_normal((m, n)).astype(dtype)
    c = cuda.to_device(c0)
    _gemm(cuda.to_device(a), cuda.to_device(b), c, trans_a, trans_b, accumulate)
    want = (a.T if trans_a else a).astype(np.float64) @ (b.T if trans_b else b).astype(np.float64)
    if accumulate:
        want += c0
    return c.copy_to_host(), want


@pytest.mark.parametrize("trans_a,trans_b", list(itertools.product([False, True], repeat=2)))
@pytest.mark.parametrize("m,n,depth", [(1, 1, 1), (9, 17, 5), (16, 8, 4), (3, 20, 13)])
def test_gemm_matches_numpy(m, n, depth, trans_a, trans_b):
    for accumulate in (False, True):
        got, want = _run(m, n, depth, trans_a, trans_b, accumulate, np.float32)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5,
                                   err_msg="accumulate=%s" % accumulate)


def test_gemm_float64_and_a_tile_edge_in_every_direction():
    from lightmod.kernels.cuda import nn
    m, n, depth = nn.GEMM_BM + 1, nn.GEMM_BN + 3, 2 * nn.GEMM_BK + 1
    got, want = _run(m, n, depth, True, False, True, np.float64, seed=3)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_gemm_with_zero_depth_writes_zeros_or_keeps_the_sum():
    got, _ = _run(4, 5, 0, False, False, False, np.float32)
    assert not got.any()
    got, want = _run(4, 5, 0, False, True, True, np.float32)
    np.testing.assert_array_equal(got, want.astype(np.float32))


def test_gemm_rejects_integer_outputs():
    from numba import cuda

    from lightmod.kernels.cuda.nn import _gemm
    x = cuda.to_device(np.ones((2, 2), np.int32))
    with pytest.raises(TypeError, match="float32 and float64"):
        _gemm(x, x, x, False, False, False)
