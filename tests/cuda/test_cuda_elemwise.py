"""CUDA element-wise kernels against the CPU kernels (run under NUMBA_ENABLE_CUDASIM=1)."""
import os
import sys

import numpy as np
import pytest

import lightmod as mx

if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") in ("", "0") and mx.num_gpus() == 0:
    pytest.skip("needs a GPU or NUMBA_ENABLE_CUDASIM=1", allow_module_level=True)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ophelpers as oh  # noqa: E402

from lightmod.kernels import cpu as kcpu  # noqa: E402
from lightmod.kernels import cuda as kcuda  # noqa: E402
from lightmod.kernels.scalar import UNARY_CODES  # noqa: E402

RNG = np.random.default_rng(3)
X = (RNG.standard_normal((2, 3)) * 2).astype(np.float32)
POS = np.abs(X) + 0.3
# every registered operator computed by a unary kernel code (a new one is tested by itself),
# plus the fills
UNARY_OPS = sorted(name for name, op in oh.registry.all_ops().items()
                   if getattr(op, "fn", None) in UNARY_CODES) + ["zeros_like", "ones_like"]
POSITIVE_ONLY = {"log", "sqrt", "rsqrt", "log2", "log10", "log1p", "reciprocal", "cbrt"}


def _both(name, attrs, inputs, head=None, req=None, init=None):
    fwd = [oh.forward(name, attrs, inputs, device=d)[0] for d in ("cpu", "cuda")]
    for a, b in zip(*fwd):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6, err_msg=name)
    if head is None:
        return
    grads = [oh.backward(name, attrs, inputs, head, req=req, init_grads=init, device=d)
             for d in ("cpu", "cuda")]
    for a, b in zip(*grads):
        if a is None:
            assert b is None
        else:
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6, err_msg=name)


def test_every_unary_code_is_tested():
    tested = {oh.registry.get(n).fn for n in UNARY_OPS if getattr(oh.registry.get(n), "fn", None)}
    assert tested == set(UNARY_CODES)


@pytest.mark.parametrize("name", UNARY_OPS)
def test_unary(name):
    x = POS if name in POSITIVE_ONLY else X
    _both(name, {}, [x], head=[np.ones_like(x)])


def test_clip_and_req_add():
    _both("clip", {"a_min": -0.5, "a_max": 1.0}, [X], head=[np.full_like(X, 2.0)],
          req=["add"], init=[np.ones_like(X)])
    _both("tanh", {}, [X], head=[np.ones_like(X)], req=["add"], init=[np.ones_like(X)])


@pytest.mark.parametrize("name", ["elemwise_add", "elemwise_sub", "elemwise_mul",
                                  "elemwise_div", "_maximum", "_minimum", "_power", "_mod",
                                  "_hypot", "_equal", "_greater", "_logical_xor"])
def test_same_shape_binary(name):
    b = POS[::-1].copy()
    a = POS if name == "_power" else X
    _both(name, {}, [a, b], head=[np.ones_like(X)])


@pytest.mark.parametrize("shapes", [((2, 3), (3,)), ((2, 1, 3), (4, 1)), ((1,), (2, 2)),
                                    ((3, 1), (1, 3))])
@pytest.mark.parametrize("name", ["broadcast_add", "broadcast_sub", "broadcast_mul",
                                  "broadcast_div", "broadcast_power", "broadcast_maximum",
                                  "broadcast_mod", "broadcast_lesser"])
def test_broadcast(name, shapes):
    a = (RNG.random(shapes[0]) + 0.5).astype(np.float32)
    b = (RNG.random(shapes[1]) + 0.5).astype(np.float32)
    out_shape = np.broadcast_shapes(*shapes)
    _both(name, {}, [a, b], head=[RNG.standard_normal(out_shape).astype(np.float32)],
          req=["write", "add"], init=[None, np.ones(shapes[1], np.float32)])


@pytest.mark.parametrize("name", ["_plus_scalar", "_rminus_scalar", "_rdiv_scalar",
                                  "_power_scalar", "_rpower_scalar", "_maximum_scalar",
                                  "_mod_scalar", "_rmod_scalar", "_greater_equal_scalar"])
def test_scalar(name):
    _both(name, {"scalar": 1.5}, [POS], head=[np.ones_like(POS)])


def test_float16_and_int_dtypes():
    _both("exp", {}, [X.astype(np.float16)])
    _both("broadcast_mul", {}, [X.astype(np.float16), np.ones(3, np.float16)],
          head=[np.ones((2, 3), np.float16)])
    _both("_plus_scalar", {"scalar": 2.7}, [np.array([1, -2, 3], np.int32)])
    _both("abs", {}, [np.array([1, -2, 3], np.int64)])


def test_memory_helpers_and_sum_to_shape():
    src = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    for dst_shape in [(3, 1), (1, 3, 4), (4,), (2, 1, 1)]:
        want = np.zeros(dst_shape, np.float32)
        kcpu.sum_to_shape(src, want)
        dev = kcuda.zeros(dst_shape, np.float32)
        kcuda.sum_to_shape(kcuda.from_host(src), dev)
        np.testing.assert_allclose(dev.copy_to_host(), want, rtol=1e-5)
        kcuda.sum_to_shape(kcuda.from_host(src), dev, "add")
        np.testing.assert_allclose(dev.copy_to_host(), 2 * want, rtol=1e-5)
    d = kcuda.full((2, 2), 3, np.int32)
    assert d.copy_to_host().tolist() == [[3, 3], [3, 3]]
    f = kcuda.empty((2, 2), np.float64)
    kcuda.copy(f, d)                                         # device cast
    kcuda.assign(f, kcuda.from_host(np.ones((2, 2))), "add")
    assert f.copy_to_host().tolist() == [[4, 4], [4, 4]]
    kcuda.copy(f, kcuda.from_host(np.array([1.0, 2.0])))     # device broadcast
    assert f.copy_to_host().tolist() == [[1, 2], [1, 2]]
    kcuda.copy(f, np.array([[5.0], [6.0]]))                  # host broadcast
    assert f.copy_to_host().tolist() == [[5, 5], [6, 6]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_assign_scalar_follows_the_request(dtype):
    start = RNG.standard_normal((3, 5)).astype(dtype)
    for req, want in [("write", np.full_like(start, 0.25)), ("add", start + dtype(0.25)),
                      ("null", start)]:
        host = start.copy()
        kcpu.assign_scalar(host, 0.25, req)
        dev = kcuda.from_host(start)
        kcuda.assign_scalar(dev, 0.25, req)
        np.testing.assert_array_equal(host, want, err_msg=req)
        np.testing.assert_array_equal(dev.copy_to_host(), want, err_msg=req)
    empty = kcuda.empty((0, 3), dtype)
    kcuda.assign_scalar(empty, 1.0, "add")      # nothing to launch
    assert empty.copy_to_host().shape == (0, 3)
