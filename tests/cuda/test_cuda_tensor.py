"""CUDA kernels of the tensor and reduction operators against the CPU kernels, through the
operator declarations (tiny shapes; run under NUMBA_ENABLE_CUDASIM=1 in its own pytest process:
``NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/cuda``).
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ophelpers as oh  # noqa: E402

from lightmod.kernels import cuda_support  # noqa: E402

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not (cuda_support.simulator_enabled()
                                      or cuda_support.num_gpus() > 0),
                                 reason="needs a GPU or NUMBA_ENABLE_CUDASIM=1")]

RNG = np.random.default_rng(11)


def randn(*shape):
    return RNG.standard_normal(shape)


def compare(name, attrs, inputs, req=None, init=None, rtol=1e-10, grads=True):
    """Forward (and backward) on both kernel sets; outputs and gradients must agree."""
    results = {}
    for device in ("cpu", "cuda"):
        outs, _, op, p = oh.forward(name, attrs, inputs, device=device)
        heads = [np.random.default_rng(7).standard_normal(o.shape)
                 for o in outs[:op.num_visible_outputs(p)]]
        g = oh.backward(name, attrs, inputs, heads, req=req, device=device,
                        init_grads=init) if grads else []
        results[device] = (outs, g)
    (c_outs, c_grads), (g_outs, g_grads) = results["cpu"], results["cuda"]
    for i, (a, b) in enumerate(zip(c_outs, g_outs)):
        assert a.dtype == b.dtype and a.shape == b.shape
        # float32 sums near zero differ by round-off with BLAS blocking and thread count
        atol = 1e-6 if a.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(b, a, rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg="%s output %d" % (name, i))
    for i, (a, b) in enumerate(zip(c_grads, g_grads)):
        if a is None:
            assert b is None
        else:
            atol = 1e-6 if a.dtype == np.float32 else 1e-12
            np.testing.assert_allclose(b, a, rtol=rtol, atol=atol, equal_nan=True,
                                       err_msg="%s grad %d" % (name, i))


def compare_add(name, attrs, inputs, rtol=1e-10):
    """Also with every gradient accumulated ('add') into ones."""
    compare(name, attrs, inputs, rtol=rtol)
    compare(name, attrs, inputs, req=["add"] * len(inputs),
            init=[np.ones_like(np.asarray(x, dtype=np.float64)) for x in inputs], rtol=rtol)


# ---------------------------------------------------------------------------------------------
# shape manipulation (strided gathers and scatters)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,attrs,shape", [
    ("Reshape", {"shape": (-1, 0)}, (2, 3, 4)),
    ("Flatten", {}, (2, 3, 2)),
    ("expand_dims", {"axis": 1}, (2, 3)),
    ("squeeze", {}, (2, 1, 3)),
    ("transpose", {"axes": (2, 0, 1)}, (2, 3, 4)),
    ("transpose", {}, (3, 5)),
    ("SwapAxis", {"dim1": 0, "dim2": 2}, (2, 3, 4)),
    ("slice", {"begin": (1, None, 3), "end": (None, None, 0), "step": (-1, -2, -1)}, (2, 3, 4)),
    ("slice_axis", {"axis": 1, "begin": 1, "end": None}, (2, 3, 4)),
    ("SliceChannel", {"num_outputs": 2, "axis": 2}, (2, 3, 4)),
    ("SliceChannel", {"num_outputs": 3, "axis": 1, "squeeze_axis": True}, (2, 3, 4)),
    ("tile", {"reps": (2, 1, 3)}, (2, 3)),
    ("repeat", {"repeats": 3, "axis": 1}, (2, 3)),
    ("repeat", {"repeats": 2}, (2, 3)),
    ("broadcast_to", {"shape": (3, 0, 4)}, (1, 2, 1)),
    ("broadcast_axis", {"axis": (0, 2), "size": (3, 4)}, (1, 2, 1)),
    ("Cast", {"dtype": "float32"}, (2, 3)),
])
def test_shape_ops(name, attrs, shape):
    compare_add(name, attrs, [randn(*shape)])


def test_concat_stack_add_n_broadcast_like():
    a, b = randn(2, 3, 4), randn(2, 1, 4)
    compare_add("Concat", {"num_args": 2, "dim": 1}, [a, b])
    compare_add("stack", {"num_args": 2, "axis": 1}, [a, randn(2, 3, 4)])
    compare_add("add_n", {"num_args": 3}, [a, randn(2, 3, 4), randn(2, 3, 4)])
    compare_add("broadcast_like", {}, [b, a])


def test_split_with_missing_head_gradient():
    x = randn(2, 4)
    g = randn(2, 2)
    ref = oh.backward("SliceChannel", {"num_outputs": 2}, [x], [None, g])[0]
    got = oh.backward("SliceChannel", {"num_outputs": 2}, [x], [None, g], device="cuda")[0]
    np.testing.assert_array_equal(got, ref)


def test_fills_and_casts_between_dtypes():
    for name, attrs in (("_zeros", {"shape": (2, 3)}), ("_ones", {"shape": (4,)}),
                        ("_full", {"shape": (2, 2), "value": -1.5, "dtype": "float64"})):
        compare(name, attrs, [], grads=False)
    x = randn(3, 4) * 10
    compare("Cast", {"dtype": "int32"}, [x], grads=False)
    compare("Cast", {"dtype": "float64"}, [x.astype(np.float32)])


# ---------------------------------------------------------------------------------------------
# indexing
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("attrs", [{}, {"mode": "wrap"}, {"axis": 1}, {"axis": -1, "mode": "wrap"}])
def test_take_with_repeated_indices(attrs):
    # repeated indices make the gradient's atomics collide
    idx = np.array([[0.0, 2.0, 2.0], [-1.0, 7.3, 0.0]])
    compare_add("take", attrs, [randn(3, 4), idx])


def test_take_float32_and_raise():
    x = randn(5, 3).astype(np.float32)
    idx = np.array([4, 0, 4, 1], dtype=np.int32)
    compare("take", {"mode": "raise"}, [x, idx])
    from lightmod.base import MXNetError
    with pytest.raises(MXNetError, match="out of bound"):
        oh.forward("take", {"mode": "raise"}, [x, np.array([5.0])], device="cuda")


@pytest.mark.parametrize("attrs,idx_shape", [({}, (3,)), ({"axis": 0, "mode": "wrap"}, (4,)),
                                             ({"axis": 1, "keepdims": True}, (2, 4))])
def test_pick(attrs, idx_shape):
    data = randn(2, 3, 4)[0] if len(idx_shape) == 1 and attrs.get("axis", -1) != 1 \
        else randn(2, 3, 4)
    idx = RNG.uniform(-3, 6, idx_shape).round(1)
    compare_add("pick", attrs, [data, idx])


def test_one_hot_and_where():
    idx = np.array([[0.0, 2.0, -1.0], [3.0, 1.7, 1.0]])
    compare("one_hot", {"depth": 3, "on_value": 4, "off_value": -2}, [idx])
    compare("one_hot", {"depth": 4, "dtype": "int32"}, [idx])
    cond = np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 1.0]])
    compare_add("where", {}, [cond, randn(2, 3), randn(2, 3)])
    compare_add("where", {}, [np.array([0.0, 1.0]), randn(2, 3), randn(2, 3)])


def test_argmax_argmin():
    x = randn(3, 4, 2).round(1)
    x[0, 1, 0] = np.nan
    for name in ("argmax", "argmin"):
        for attrs in ({}, {"axis": 1}, {"axis": 0, "keepdims": True}):
            compare(name, attrs, [x])


# ---------------------------------------------------------------------------------------------
# reductions: one thread per output and one block per output (shared-memory tree)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod", "nansum", "nanprod",
                                  "_square_sum"])
@pytest.mark.parametrize("attrs,shape", [
    ({"axis": 1}, (2, 3, 4)),                        # short: one thread per output
    ({"axis": (0, 2), "keepdims": True}, (2, 3, 4)),
    ({"axis": 1, "exclude": True}, (3, 2, 40)),      # 120 elements reduced: tree blocks
    ({}, (5, 30)),                                   # everything into one output: one tree
])
def test_reductions(name, attrs, shape):
    x = randn(*shape)
    if "prod" in name:
        x = np.sign(x) * (0.9 + 0.1 * np.abs(x))
    if name.startswith("nan"):
        x[0, 0] = np.nan
    compare_add(name, attrs, [x], rtol=1e-9)


@pytest.mark.parametrize("attrs", [{}, {"ord": 1, "axis": 1}, {"axis": (0, 1), "keepdims": True}])
def test_norm(attrs):
    compare_add("norm", attrs, [randn(4, 30)], rtol=1e-9)


def test_max_ties_and_float32():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    compare("max", {"axis": 1}, [x])
    compare("sum", {"axis": 0}, [randn(100, 3).astype(np.float32)], rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# dot, batch_dot
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("attrs,a,b", [
    ({}, (3, 4), (4, 5)),
    ({"transpose_a": True}, (4, 3, 2), (4, 5)),
    ({"transpose_b": True}, (2, 3, 17), (5, 17)),     # more than one GEMM tile along K
    ({"transpose_a": True, "transpose_b": True}, (4, 3), (2, 4)),
    ({}, (3,), (3,)),
    ({}, (2, 3), (3,)),
])
def test_dot(attrs, a, b):
    compare_add("dot", attrs, [randn(*a), randn(*b)], rtol=1e-9)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, True)])
def test_batch_dot(ta, tb):
    a = randn(*((2, 2, 4, 3) if ta else (2, 2, 3, 4)))
    b = randn(*((2, 2, 5, 4) if tb else (2, 2, 4, 5)))
    compare_add("batch_dot", {"transpose_a": ta, "transpose_b": tb}, [a, b], rtol=1e-9)


def test_dot_float32():
    compare("dot", {}, [randn(5, 20).astype(np.float32), randn(20, 3).astype(np.float32)],
            rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# the kernels directly
# ---------------------------------------------------------------------------------------------
def test_strided_gather_and_scatter_kernels():
    from numba import cuda

    from lightmod.kernels import cpu
    from lightmod.kernels import cuda as kc
    src = np.arange(24.0)
    shape, strides, offset = (2, 3), (-5, 2), 17
    ref = np.zeros(6)
    cpu.strided_gather(ref, src, offset, shape, strides)
    dev = cuda.to_device(np.zeros(6))
    kc.strided_gather(dev, cuda.to_device(src), offset, shape, strides)
    np.testing.assert_array_equal(dev.copy_to_host(), ref)
    np.testing.assert_array_equal(ref, [17, 19, 21, 12, 14, 16])
    dst = np.ones(24)
    cpu.strided_scatter(dst, np.arange(6.0), offset, shape, strides, "add")
    ddst = cuda.to_device(np.ones(24))
    kc.strided_scatter(ddst, cuda.to_device(np.arange(6.0)), offset, shape, strides, "add")
    np.testing.assert_array_equal(ddst.copy_to_host(), dst)


def test_reduce_kernels_directly():
    from numba import cuda

    from lightmod.kernels import cpu
    from lightmod.kernels import cuda as kc
    from lightmod.kernels import scalar_tensor as S
    x = randn(3, 70, 2)
    for kind in (S.R_MAX, S.R_NORM2, S.R_MEAN):
        ref = np.zeros(6)
        cpu.reduce_axes(ref, x, (3, 70, 2), (1,), kind)
        dev = cuda.to_device(np.zeros(6))
        kc.reduce_axes(dev, cuda.to_device(x), (3, 70, 2), (1,), kind)
        np.testing.assert_allclose(dev.copy_to_host(), ref, rtol=1e-10)


# ---------------------------------------------------------------------------------------------
# topk, sort, argsort (parallel ranks)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,attrs", [
    ("sort", {}), ("sort", {"axis": 0, "is_ascend": False}), ("argsort", {"axis": None}),
    ("argsort", {"is_ascend": False}), ("topk", {"k": 2, "ret_typ": "both"}),
    ("topk", {"axis": 1, "k": 0, "ret_typ": "value", "is_ascend": True}),
    ("topk", {"k": 3, "ret_typ": "mask"}), ("topk", {"axis": None, "k": 4}),
])
def test_sorting(name, attrs):
    x = (randn(3, 4, 5) * 2).round()            # ties: the stable order must agree
    compare(name, attrs, [x], grads=False)
    y = randn(3, 4, 5)
    compare_add(name, attrs, [y])
