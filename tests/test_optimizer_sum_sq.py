"""The optimizers' sum of squares (LAMB's trust ratio, LARS, gradient norms) on the CPU."""
import numpy as np
import pytest

from lightmod.kernels.cpu import optimizer as cpu_opt


@pytest.mark.parametrize("dtype, rtol, result", [(np.float64, 1e-12, np.float64),
                                                 (np.float32, 1e-5, np.float32),
                                                 (np.float16, 1e-5, np.float32)])
@pytest.mark.parametrize("shape", [(0,), (1,), (7, 3), (1 << 16, 3)])
def test_sum_sq_matches_a_float64_reference(dtype, rtol, result, shape):
    x = np.random.RandomState(1).uniform(-2, 2, shape).astype(dtype)
    got = cpu_opt.opt_sum_sq(x)
    assert type(got) is result
    np.testing.assert_allclose(float(got), float((x.astype(np.float64) ** 2).sum()), rtol=rtol)
    norm = cpu_opt.opt_l2_norm(x)
    np.testing.assert_allclose(float(norm), np.sqrt(float(got)), rtol=1e-6)


def test_sum_sq_reads_views_and_gives_the_same_bits_every_time():
    x = np.random.RandomState(2).uniform(-1, 1, (300, 400)).astype(np.float32)
    view = x[:, 100:]                      # not contiguous
    first = cpu_opt.opt_sum_sq(view)
    np.testing.assert_allclose(float(first), float((view.astype(np.float64) ** 2).sum()),
                               rtol=1e-5)
    assert all(cpu_opt.opt_sum_sq(view) == first for _ in range(3))
