"""lightmod.test_utils: MXNet 1.9.1's testing helpers, names and behaviour."""
import os
import sys

import numpy as np
import pytest

import lightmod as mx
from lightmod import test_utils as tu


# --- what MXNet's test files get from `from mxnet.test_utils import *` -----------------------
def test_star_import_gives_what_mxnet_test_files_use():
    namespace = {}
    exec("from lightmod.test_utils import *", namespace)
    for name in ("np", "mx", "sys", "os", "time", "assert_almost_equal", "almost_equal",
                 "same_array", "check_numeric_gradient", "check_symbolic_forward",
                 "check_symbolic_backward", "check_consistency", "check_speed", "rand_ndarray",
                 "rand_shape_2d", "rand_shape_3d", "rand_shape_nd", "default_context",
                 "set_default_context", "simple_forward", "environment", "assert_exception",
                 "retry"):
        assert name in namespace, name
    assert namespace["sys"] is sys and namespace["np"] is np and namespace["mx"] is mx


def test_importing_lightmod_does_not_import_hypothesis():
    import subprocess
    import tempfile
    code = ("import sys, lightmod; import lightmod.test_utils; "
            "print('hypothesis' in sys.modules, 'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=tempfile.gettempdir()).stdout.split()
    assert out == ["False", "False"]


# --- tolerances ----------------------------------------------------------------------------
def test_default_tolerances_by_dtype():
    assert tu.default_rtols()[np.dtype(np.float16)] == 1e-2
    assert tu.default_rtols()[np.dtype(np.float32)] == 1e-4
    assert tu.default_rtols()[np.dtype(np.float64)] == 1e-5
    assert tu.default_atols()[np.dtype(np.float32)] == 1e-3
    assert tu.default_atols()[np.dtype(np.float64)] == 1e-20
    assert tu.default_atols()[np.dtype(np.int32)] == 0
    assert tu.get_rtol() == 1e-5 and tu.get_atol() == 1e-20 and tu.get_rtol(0.3) == 0.3
    # the looser dtype of the two operands decides
    assert tu.get_tols(np.zeros(1, np.float16), np.zeros(1, np.float64), None, None) == \
        (1e-2, 1e-1)
    assert tu.get_tols(1.0, np.zeros(1, np.float32), {np.dtype(np.float32): 0.5}, None)[0] == 0.5


def test_assert_almost_equal_uses_dtype_defaults():
    a = np.ones(4, np.float32)
    tu.assert_almost_equal(a, a + 5e-4)                     # within float32's atol 1e-3
    with pytest.raises(AssertionError):
        tu.assert_almost_equal(a.astype(np.float64), a.astype(np.float64) + 5e-4)
    tu.assert_almost_equal(mx.nd.array(a), a + 5e-4)        # NDArray operands
    tu.assert_almost_equal(np.float32(1.0), 1.0 + 1e-5)      # scalars


def test_assert_almost_equal_message_names_the_worst_element():
    a = np.zeros((2, 3))
    b = a.copy()
    b[1, 2] = 1.0
    b[0, 0] = 0.5
    with pytest.raises(AssertionError) as err:
        tu.assert_almost_equal(a, b, rtol=1e-5, atol=1e-5, names=("mine", "theirs"))
    text = str(err.value)
    assert "Location of maximum error: (1, 2)" in text
    assert "mine=0.00000000" in text and "theirs=1.00000000" in text
    assert "mismatch 33.333333%" in text


def test_equal_nan_and_bool():
    nan = np.array([1.0, np.nan])
    with pytest.raises(AssertionError):
        tu.assert_almost_equal(nan, nan)
    tu.assert_almost_equal(nan, nan, equal_nan=True)
    assert tu.almost_equal(nan, nan, equal_nan=True) and not tu.almost_equal(nan, nan)
    with pytest.raises(AssertionError):
        tu.assert_almost_equal(np.array([True]), np.array([False]))


def test_use_broadcast_false_checks_shapes():
    tu.assert_almost_equal(np.ones((2, 3)), np.ones(3))
    with pytest.raises(AssertionError, match="shape"):
        tu.assert_almost_equal(np.ones((2, 3)), np.ones(3), use_broadcast=False)


def test_almost_equal_with_err_tolerates_a_fraction():
    a = np.zeros(10)
    b = a.copy()
    b[0] = 1
    tu.assert_almost_equal_with_err(a, b, rtol=1e-5, atol=1e-5, etol=0.2)
    with pytest.raises(AssertionError):
        tu.assert_almost_equal_with_err(a, b, rtol=1e-5, atol=1e-5, etol=0.05)
    tu.assert_almost_equal_ignore_nan(np.array([1.0, np.nan]), np.array([1.0, 5.0]))


def test_same_array_detects_shared_memory():
    a = mx.nd.ones((2, 2))
    assert tu.same_array(a, a)
    assert not tu.same_array(a, a.copy())
    np.testing.assert_array_equal(a.asnumpy(), np.ones((2, 2)))   # restored


# --- random data ---------------------------------------------------------------------------
def test_random_shapes_and_arrays():
    np.random.seed(3)
    for _ in range(20):
        s2 = tu.rand_shape_2d(3, 4)
        assert 1 <= s2[0] <= 3 and 1 <= s2[1] <= 4
        s3 = tu.rand_shape_3d()
        assert len(s3) == 3 and all(1 <= d <= 10 for d in s3)
        sn = tu.rand_shape_nd(4, 2)
        assert isinstance(sn, tuple) and len(sn) == 4 and all(1 <= d <= 2 for d in sn)
    assert 0 in {d for _ in range(50) for d in tu.rand_shape_2d(1, 1, allow_zero_size=True)}
    arr = tu.rand_ndarray((3, 4))
    assert arr.shape == (3, 4) and arr.dtype == np.float32
    assert tu.rand_ndarray((3, 4), dtype=np.float64).dtype == np.float64
    np.random.seed(5)
    first = tu.rand_ndarray((2, 2)).asnumpy()
    np.random.seed(5)
    np.testing.assert_array_equal(first, tu.rand_ndarray((2, 2)).asnumpy())


def test_rand_sparse_arrays():
    np.random.seed(0)
    rsp = tu.rand_ndarray((6, 3), "row_sparse", density=0.5)
    assert rsp.stype == "row_sparse" and rsp.shape == (6, 3)
    csr, (indptr, indices, data) = tu.rand_sparse_ndarray((4, 5), "csr", density=0.4)
    assert csr.stype == "csr"
    dense = csr.asnumpy()
    assert np.count_nonzero(dense) == data.shape[0]
    empty, _ = tu.rand_sparse_ndarray((3, 2), "row_sparse", density=0.0)
    assert not empty.asnumpy().any()
    with pytest.raises(ValueError):
        tu.rand_sparse_ndarray((3, 2), "coo")


# --- contexts and environment --------------------------------------------------------------
def test_default_context_follows_set_default_context():
    assert tu.default_context() == mx.cpu(0)
    tu.set_default_context(mx.cpu(1))
    try:
        assert tu.default_context() == mx.cpu(1)
        assert mx.current_context() == mx.cpu(1)
        assert tu.rand_ndarray((2,)).context == mx.cpu(1)
    finally:
        tu.set_default_context(mx.cpu(0))


def test_environment_sets_and_restores():
    os.environ.pop("LIGHTMOD_TU_A", None)
    os.environ["LIGHTMOD_TU_B"] = "old"
    with tu.environment("LIGHTMOD_TU_A", "1"):
        assert os.environ["LIGHTMOD_TU_A"] == "1"
    assert "LIGHTMOD_TU_A" not in os.environ
    with pytest.raises(RuntimeError):
        with tu.environment({"LIGHTMOD_TU_A": "2", "LIGHTMOD_TU_B": None}):
            assert os.environ["LIGHTMOD_TU_A"] == "2" and "LIGHTMOD_TU_B" not in os.environ
            raise RuntimeError("body fails")
    assert "LIGHTMOD_TU_A" not in os.environ and os.environ["LIGHTMOD_TU_B"] == "old"
    del os.environ["LIGHTMOD_TU_B"]
    with pytest.raises(ValueError):
        with tu.environment("A", "1", "B"):
            pass


# --- symbol checks -------------------------------------------------------------------------
def _fc():
    data = mx.sym.Variable("data")
    return mx.sym.FullyConnected(data, num_hidden=3, name="fc")


def test_simple_forward():
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    out = tu.simple_forward(x * y + 1, x=np.array([1.0, 2.0]), y=np.array([3.0, 4.0]))
    np.testing.assert_allclose(out, [4.0, 9.0])
    both = tu.simple_forward(mx.sym.Group([x + y, x - y]), x=np.ones(2), y=np.ones(2))
    assert isinstance(both, list) and len(both) == 2


def test_check_symbolic_forward_and_backward():
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    a, b = np.array([[1.0, 2.0]]), np.array([[3.0, 5.0]])
    outs = tu.check_symbolic_forward(x * y, [a, b], [a * b])
    assert outs[0].shape == (1, 2)
    prod = x * y
    tu.check_symbolic_forward(prod, {"x": a, "y": b}, {prod.list_outputs()[0]: a * b})
    with pytest.raises(AssertionError, match="EXPECTED"):
        tu.check_symbolic_forward(x * y, [a, b], [a * b + 1])
    head = np.array([[1.0, -1.0]])
    for req in ("write", "add"):
        tu.check_symbolic_backward(x * y, [a, b], [head], [head * b, head * a], grad_req=req)
    grads = tu.check_symbolic_backward(x * y, [a, b], [head], {"x": head * b, "y": head * a},
                                       grad_req={"x": "write", "y": "null"},
                                       dtype=np.float64)
    assert grads["x"].dtype == np.float64
    with pytest.raises(AssertionError, match="BACKWARD_x"):
        tu.check_symbolic_backward(x * y, [a, b], [head], [head * a, head * b])
    with pytest.raises(ValueError, match="do not match"):
        tu.check_symbolic_forward(x * y, {"x": a}, [a])


def test_check_numeric_gradient_passes_and_catches():
    np.random.seed(1)
    data = np.random.uniform(-1, 1, (2, 4))
    weight = np.random.uniform(-1, 1, (3, 4))
    bias = np.random.uniform(-1, 1, (3,))
    tu.check_numeric_gradient(_fc(), [data, weight, bias])
    tu.check_numeric_gradient(_fc(), {"data": data, "fc_weight": weight, "fc_bias": bias},
                              dtype=np.float64, rtol=1e-6, atol=1e-9,
                              grad_nodes={"fc_weight": "add", "data": "write", "fc_bias": "null"})
    x = mx.sym.Variable("x")
    # a symbol whose backward is zero: BlockGrad; the numeric gradient is the identity's
    with pytest.raises(AssertionError, match="NUMERICAL_x"):
        tu.check_numeric_gradient(mx.sym.BlockGrad(x * 2) + x, [np.ones((2, 2))],
                                  dtype=np.float64)
    # aux states are reset before every evaluation
    bn = mx.sym.BatchNorm(x, fix_gamma=False, name="bn")
    tu.check_numeric_gradient(bn, [np.random.uniform(-1, 1, (4, 3)), np.ones(3), np.zeros(3)],
                              aux_states=[np.zeros(3), np.ones(3)], dtype=np.float64,
                              rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="outputs"):
        tu.check_numeric_gradient(mx.sym.Group([x, x * 2]), [np.ones(2)])


def test_numeric_grad_direct():
    x = mx.sym.Variable("x")
    exe = (x * x).simple_bind(mx.cpu(), x=(3,), type_dict={"x": np.float64})
    loc = {"x": np.array([1.0, 2.0, 3.0])}
    grads = tu.numeric_grad(exe, loc, eps=1e-4, dtype=np.float64)
    np.testing.assert_allclose(grads["x"], [2.0, 4.0, 6.0], rtol=1e-6)


def test_check_consistency_across_contexts_and_dtypes():
    np.random.seed(2)
    ctx_list = [{"ctx": mx.cpu(0), "data": (2, 4), "type_dict": {"data": np.float64}},
                {"ctx": mx.cpu(1), "data": (2, 4), "type_dict": {"data": np.float32}},
                {"ctx": mx.cpu(0), "data": (2, 4), "type_dict": {"data": np.float32}}]
    gt = tu.check_consistency(_fc(), ctx_list)
    assert set(gt) >= {"fc_output", "data", "fc_weight", "fc_bias"}
    assert gt["fc_output"].dtype == np.float64          # the most precise is the reference
    # a symbol that differs between the entries is caught
    other = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=3, name="fc",
                                  no_bias=True) + 0
    with pytest.raises(ValueError):
        tu.check_consistency([_fc(), other], ctx_list[:2])
    with pytest.raises(ValueError):
        tu.check_consistency(_fc(), ctx_list[:1])


def test_check_consistency_reports_a_difference():
    np.random.seed(4)
    x = mx.sym.Variable("x")
    with mx.name.NameManager():
        sym_a = x * 2
    with mx.name.NameManager():
        sym_b = x * 2.01                # same node names, different values
    ctx_list = [{"ctx": mx.cpu(0), "x": (3,), "type_dict": {"x": np.float64}},
                {"ctx": mx.cpu(0), "x": (3,), "type_dict": {"x": np.float64}}]
    with pytest.raises(AssertionError):
        tu.check_consistency([sym_a, sym_b], ctx_list, rtol=1e-6, atol=1e-8)


def test_check_speed_returns_seconds_per_run():
    t = tu.check_speed(_fc(), data=(4, 5), N=3)
    assert 0 < t < 10
    t = tu.check_speed(_fc(), location={"data": np.ones((4, 5)), "fc_weight": np.ones((3, 5)),
                                        "fc_bias": np.ones(3)}, N=2, typ="forward")
    assert t > 0
    with pytest.raises(ValueError):
        tu.check_speed(_fc(), data=(4, 5), typ="backward")


def test_misc_helpers():
    tu.assert_exception(lambda: 1 / 0, ZeroDivisionError)
    with pytest.raises(AssertionError):
        tu.assert_exception(lambda: None, ZeroDivisionError)
    calls = []

    @tu.retry(3)
    def flaky():
        calls.append(1)
        assert len(calls) >= 2

    flaky()
    assert len(calls) == 2
    np.testing.assert_array_equal(tu.np_reduce(np.ones((2, 3, 4)), (0, 2), True, np.sum),
                                  np.full((1, 3, 1), 8.0))
    np.testing.assert_array_equal(tu.collapse_sum_like(np.ones((2, 3)), (1, 3)),
                                  np.full((1, 3), 2.0))
    assert tu.same_symbol_structure(_fc(), _fc())
    assert not tu.same_symbol_structure(_fc(), mx.sym.tanh(mx.sym.Variable("data")) + 1)
    assert tu.list_gpus() == list(range(mx.context.num_gpus()))
    sample = tu.random_sample(list(range(5)), 3)
    assert len(set(sample)) == 3
    u = tu.random_uniform_arrays((2, 2), low=1, high=2)[0]
    assert u.shape == (2, 2) and (u >= 1).all()
    with pytest.raises(TypeError):
        tu.random_uniform_arrays((2,), bad=1)


def test_compare_optimizer():
    np.random.seed(0)
    tu.compare_optimizer(mx.optimizer.SGD(learning_rate=0.1, momentum=0.9),
                         mx.optimizer.SGD(learning_rate=0.1, momentum=0.9), (3, 2), np.float32)
    with pytest.raises(AssertionError):
        tu.compare_optimizer(mx.optimizer.SGD(learning_rate=0.1),
                             mx.optimizer.SGD(learning_rate=0.2), (3, 2), np.float32)
