"""SequenceMask, SequenceReverse and SequenceLast against numpy, with numeric gradients,
write/add requests, the symbol frontend and bad inputs."""
import numpy as np
import ophelpers as oh
import pytest

import lightmod as mx
from lightmod.base import MXNetError


def _time_major(x, axis):
    """x with its time axis first and the batch second."""
    return np.swapaxes(x, 0, 1) if axis == 1 else x


def masked(x, lengths, value, axis):
    out = _time_major(x.copy(), axis)
    for b, n in enumerate(lengths):
        out[int(n):, b] = value
    return _time_major(out, axis)


def reversed_seq(x, lengths):
    out = x.copy()
    for b, n in enumerate(lengths):
        n = int(n)
        out[:n, b] = x[:n, b][::-1]
    return out


def last(x, lengths, axis):
    tm = _time_major(x, axis)
    return np.stack([tm[int(n) - 1, b] for b, n in enumerate(lengths)])


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("shape", [(4, 3), (5, 2, 3), (3, 4, 2, 2)])
def test_sequence_mask_matches_numpy(axis, shape):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape)
    steps, batch = (shape[1], shape[0]) if axis == 1 else shape[:2]
    lengths = rng.integers(1, steps + 1, batch).astype(np.float32)
    attrs = {"use_sequence_length": True, "value": -2.5, "axis": axis}
    out, _, _, _ = oh.forward("SequenceMask", attrs, [x, lengths])
    np.testing.assert_array_equal(out[0], masked(x, lengths, -2.5, axis))
    oh.check_grad("SequenceMask", attrs, [x, lengths], wrt=[0])
    # without lengths every step is kept
    out, _, _, _ = oh.forward("SequenceMask", {"axis": axis}, [x])
    np.testing.assert_array_equal(out[0], x)


def test_sequence_mask_integer_lengths_and_add_request():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3, 2))
    lengths = np.array([1, 4, 2], dtype=np.int32)
    attrs = {"use_sequence_length": True}
    dy = rng.standard_normal(x.shape)
    init = rng.standard_normal(x.shape)
    g = oh.backward("SequenceMask", attrs, [x, lengths], [dy], req=["add", "write"],
                    init_grads=[init, None])
    np.testing.assert_allclose(g[0], init + masked(dy, lengths, 0.0, 0))
    np.testing.assert_array_equal(g[1], np.zeros(3))


@pytest.mark.parametrize("shape", [(4, 3), (5, 2, 3)])
def test_sequence_reverse_matches_numpy(shape):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape)
    lengths = rng.integers(1, shape[0] + 1, shape[1]).astype(np.float64)
    attrs = {"use_sequence_length": True}
    out, _, _, _ = oh.forward("SequenceReverse", attrs, [x, lengths])
    np.testing.assert_array_equal(out[0], reversed_seq(x, lengths))
    oh.check_grad("SequenceReverse", attrs, [x, lengths], wrt=[0])
    out, _, _, _ = oh.forward("SequenceReverse", {}, [x])
    np.testing.assert_array_equal(out[0], x[::-1])


def test_sequence_reverse_symbol_with_lengths():
    x = np.arange(18, dtype=np.float32).reshape(3, 2, 3)
    sym = mx.sym.SequenceReverse(mx.sym.var("seq"), mx.sym.var("n"), use_sequence_length=True)
    assert sym.list_arguments() == ["seq", "n"]
    exe = sym.bind(mx.cpu(), {"seq": mx.nd.array(x), "n": mx.nd.array([2, 3])})
    out = exe.forward()[0].asnumpy()
    np.testing.assert_array_equal(out, reversed_seq(x, [2, 3]))
    # without the flag there is no lengths input
    assert mx.sym.SequenceReverse(mx.sym.var("seq")).list_arguments() == ["seq"]


@pytest.mark.parametrize("axis", [0, 1])
def test_sequence_last_matches_numpy(axis):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 3, 2))
    batch = x.shape[1 - axis]
    lengths = rng.integers(1, x.shape[axis] + 1, batch).astype(np.float32)
    attrs = {"use_sequence_length": True, "axis": axis}
    out, _, _, _ = oh.forward("SequenceLast", attrs, [x, lengths])
    np.testing.assert_array_equal(out[0], last(x, lengths, axis))
    oh.check_grad("SequenceLast", attrs, [x, lengths], wrt=[0])
    out, _, _, _ = oh.forward("SequenceLast", {"axis": axis}, [x])
    np.testing.assert_array_equal(out[0], np.take(x, -1, axis=axis))


def test_sequence_bad_inputs():
    op, p = oh.prepare("SequenceMask", {"use_sequence_length": True})
    with pytest.raises(MXNetError, match=r"SequenceMask: sequence_length has shape \(4,\), "
                                         r"expected \(3,\)"):
        op.infer_shape(p, [(5, 3, 2), (4,)])
    with pytest.raises(MXNetError, match="SequenceMask: data has shape \\(5,\\)"):
        op.infer_shape(p, [(5,), None])
    with pytest.raises(MXNetError, match="SequenceReverse: axis must be 0, got 1"):
        oh.prepare("SequenceReverse", {"axis": 1})
    with pytest.raises(MXNetError, match="SequenceLast: axis must be 0 or 1, got 2"):
        oh.prepare("SequenceLast", {"axis": 2})


def test_sequence_lengths_out_of_range_are_clamped():
    # a length beyond the steps reads only real steps (no out-of-bounds access)
    x = np.arange(6, dtype=np.float64).reshape(3, 2)
    out, _, _, _ = oh.forward("SequenceReverse", {"use_sequence_length": True},
                              [x, np.array([7.0, -1.0])])
    np.testing.assert_array_equal(out[0][:, 0], x[::-1, 0])
    np.testing.assert_array_equal(out[0][:, 1], x[:, 1])
