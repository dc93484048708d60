"""kernels/cpu/blas.py: out += a @ b in one GEMM call, for every layout it accepts, and the
layouts and dtypes it hands back to numpy (returns False, leaves out alone)."""
import numpy as np
import pytest

from lightmod.kernels.cpu.blas import _numpy_blas_paths, gemm_accumulate


def _operand(rng, rows, cols, dtype, transposed):
    return rng.rand(cols, rows).astype(dtype).T if transposed else \
        rng.rand(rows, cols).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,k,n", [(40, 8, 30), (8, 40, 30), (1, 5, 7), (5, 1, 7), (7, 5, 1),
                                   (1, 1, 1)])
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_adds_the_product(dtype, m, k, n, ta, tb):
    rng = np.random.RandomState(m * 100 + k * 10 + n)
    a, b = _operand(rng, m, k, dtype, ta), _operand(rng, k, n, dtype, tb)
    out = rng.rand(m, n).astype(dtype)
    expected = out + a.astype(np.float64) @ b.astype(np.float64)
    assert gemm_accumulate(a, b, out)
    np.testing.assert_allclose(out, expected, rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_column_block_of_a_wider_destination():
    rng = np.random.RandomState(0)
    a, b = rng.rand(4, 3).astype(np.float32), rng.rand(3, 5).astype(np.float32)
    wide = np.zeros((4, 10), np.float32)
    assert gemm_accumulate(a, b, wide[:, 2:7])
    np.testing.assert_allclose(wide[:, 2:7], a @ b, rtol=1e-6)
    assert not wide[:, :2].any() and not wide[:, 7:].any()


def test_declines_what_it_cannot_describe():
    rng = np.random.RandomState(1)
    a, b = rng.rand(6, 4), rng.rand(4, 5)
    out = np.zeros((6, 5))
    assert not gemm_accumulate(a.astype(np.float16), b.astype(np.float16),
                               out.astype(np.float16))
    assert not gemm_accumulate(a.astype(np.float32), b, out)          # mixed dtypes
    assert not gemm_accumulate(a, b, out.T.copy().T)                  # column-major out
    assert not gemm_accumulate(a[::-1], b, out)                       # negative strides
    assert not out.any()


def test_uses_numpys_own_openblas():
    import numpy
    for path in _numpy_blas_paths():
        assert "numpy" in path
    if not _numpy_blas_paths():
        pytest.skip("numpy has no bundled OpenBLAS here (%s)" % numpy.__file__)
