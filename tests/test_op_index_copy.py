"""contrib.index_copy: rows of a copy of old_tensor replaced by new_tensor's, against numpy over
drawn shapes and indices (repeats keep the last row), gradients against numeric ones, MXNet
1.9.1's own example, and bad shapes and indices."""
import numpy as np
import ophelpers as oh
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lightmod as mx
from lightmod.base import MXNetError


@st.composite
def cases(draw):
    rows = draw(st.integers(1, 40))
    rest = tuple(draw(st.lists(st.integers(1, 5), max_size=2)))
    count = draw(st.integers(0, 8))
    idx = draw(st.lists(st.integers(0, rows - 1), min_size=count, max_size=count))
    return rows, rest, idx, draw(st.integers(0, 999))


def _reference(old, idx, new):
    out = old.copy()
    for j, i in enumerate(idx):
        out[i] = new[j]
    return out


@settings(max_examples=60, deadline=None)
@given(case=cases(), dtype=st.sampled_from([np.float32, np.float64, np.float16, np.int32]))
def test_forward_matches_numpy(case, dtype):
    rows, rest, idx, seed = case
    rng = np.random.default_rng(seed)
    old = (rng.standard_normal((rows,) + rest) * 10).astype(dtype)
    new = (rng.standard_normal((len(idx),) + rest) * 10).astype(dtype)
    index = np.array(idx, dtype=np.int64)
    got = mx.nd.contrib.index_copy(mx.nd.array(old, dtype=dtype),
                                   mx.nd.array(index, dtype=np.int64),
                                   mx.nd.array(new, dtype=dtype)).asnumpy()
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, _reference(old, idx, new))


@settings(max_examples=15, deadline=None)
@given(case=cases())
def test_gradients_match_numeric(case):
    rows, rest, idx, seed = case
    idx = list(dict.fromkeys(idx))      # distinct: an overwritten row has no gradient
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal((rows,) + rest), np.array(idx, dtype=np.float64),
              rng.standard_normal((len(idx),) + rest)]
    oh.check_grad("_contrib_index_copy", {}, inputs, wrt=[0, 2], rtol=1e-6, atol=1e-8)
    head = rng.standard_normal((rows,) + rest)
    grads = oh.backward("_contrib_index_copy", {}, inputs, [head])
    kept = head.copy()
    kept[idx] = 0
    np.testing.assert_allclose(grads[0], kept)
    np.testing.assert_allclose(grads[2], head[idx].reshape(grads[2].shape))
    assert not np.any(grads[1])


def test_mxnet_example_and_add_requests():
    # MXNet 1.9.1's test_operator.py::test_index_copy values
    x = mx.nd.zeros((5, 3))
    t = mx.nd.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    index = mx.nd.array([0, 4, 2], dtype=np.int64)
    x.attach_grad(grad_req="add")
    t.attach_grad(grad_req="add")
    for _ in range(2):
        with mx.autograd.record():
            out = mx.nd.contrib.index_copy(x, index, t)
        out.backward(mx.nd.ones((5, 3)) * 2)
    np.testing.assert_array_equal(out.asnumpy(), [[1, 2, 3], [0, 0, 0], [7, 8, 9], [0, 0, 0],
                                                  [4, 5, 6]])
    np.testing.assert_array_equal(x.grad.asnumpy(), 4 * np.array([[0] * 3, [1] * 3, [0] * 3,
                                                                  [1] * 3, [0] * 3]))
    np.testing.assert_array_equal(t.grad.asnumpy(), np.full((3, 3), 4.0))


def test_in_a_bound_symbol():
    old, idx, new = mx.sym.var("old"), mx.sym.var("idx"), mx.sym.var("new")
    sym = mx.sym.contrib.index_copy(old, idx, new)
    assert sym.list_arguments() == ["old", "idx", "new"]
    _, outs, _ = sym.infer_shape(old=(6, 2), idx=(3,))
    assert outs == [(6, 2)]
    exe = sym.simple_bind(mx.cpu(), old=(6, 2), idx=(3,), grad_req={"old": "write",
                                                                     "idx": "null",
                                                                     "new": "write"})
    exe.arg_dict["old"][:] = np.arange(12).reshape(6, 2)
    exe.arg_dict["idx"][:] = [5, 1, 5]
    exe.arg_dict["new"][:] = [[-1, -1], [-2, -2], [-3, -3]]
    out = exe.forward(is_train=True)[0].asnumpy()
    np.testing.assert_array_equal(out[[0, 1, 5]], [[0, 1], [-2, -2], [-3, -3]])
    exe.backward(mx.nd.ones((6, 2)))
    np.testing.assert_array_equal(exe.grad_dict["old"].asnumpy()[:, 0], [1, 0, 1, 1, 1, 0])


def test_bad_shapes_and_indices():
    old, idx, new = mx.sym.var("old"), mx.sym.var("idx"), mx.sym.var("new")
    sym = mx.sym.contrib.index_copy(old, idx, new)
    with pytest.raises(MXNetError, match=r"new_tensor.*\(3, 2\).*expected \(2, 2\)"):
        sym.infer_shape(old=(6, 2), idx=(2,), new=(3, 2))
    with pytest.raises(MXNetError, match="index_vector.*1-D"):
        sym.infer_shape(old=(6, 2), idx=(2, 1))
    out = mx.nd.contrib.index_copy(mx.nd.zeros((4, 2)), mx.nd.array([1, 4]), mx.nd.ones((2, 2)))
    with pytest.raises(MXNetError, match=r"outside \[0, 4\)"):
        out.asnumpy()
    with pytest.raises(MXNetError, match="new_tensor"):
        mx.nd.contrib.index_copy(mx.nd.zeros((4, 2)), mx.nd.array([1]), mx.nd.ones((1, 3)))
