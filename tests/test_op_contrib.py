"""contrib operators (quadratic, div_sqrt_dim, allclose, quantize / dequantize, the interleaved
attention products) and ctc_loss: numpy references, numeric gradients, MXNet 1.9.1's values
(tests/fixtures/make_linalg_golden.py) and bad inputs."""
import itertools

import numpy as np
import ophelpers as oh
import pytest
from test_op_linalg import GOLDEN, _golden_cases, run_golden

import lightmod as mx
from lightmod.base import MXNetError

RNG = np.random.default_rng(31)


@pytest.mark.parametrize("case", _golden_cases("contrib.") + _golden_cases("ctc_loss"))
def test_matches_mxnet(case):
    if "error" in case:
        with pytest.raises(MXNetError):
            run_golden(dict(case, heads=[], grads=None))
        return
    outs, grads = run_golden(case)
    for got, want in zip(outs, case["outputs"]):
        np.testing.assert_allclose(got, np.asarray(want["values"]).reshape(want["shape"]),
                                   rtol=1e-5, atol=1e-5)
    for got, want in zip(grads, case["grads"]):
        if want is not None:
            np.testing.assert_allclose(got.ravel(), want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# quadratic, div_sqrt_dim, allclose
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_quadratic_matches_numpy(dtype):
    x = RNG.normal(size=(3, 4)).astype(dtype)
    out = mx.nd.contrib.quadratic(mx.nd.array(x, dtype=dtype), a=0.5, b=-2.0, c=1.0)
    tol = 1e-2 if dtype == "float16" else 1e-6
    np.testing.assert_allclose(out.asnumpy(), 0.5 * x.astype(np.float64) ** 2 - 2 * x + 1,
                               rtol=tol, atol=tol)
    assert out.dtype == np.dtype(dtype)


def test_quadratic_keeps_sparse_storage_only_without_constant():
    dense = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, 0.0]])
    csr = mx.nd.array(dense).tostype("csr")
    kept = mx.nd.contrib.quadratic(csr, a=1.0, b=1.0)
    assert kept.stype == "csr"
    np.testing.assert_allclose(kept.asnumpy(), dense ** 2 + dense)
    shifted = mx.nd.contrib.quadratic(csr, a=1.0, c=1.0)
    assert shifted.stype == "default"
    np.testing.assert_allclose(shifted.asnumpy(), dense ** 2 + 1)


def test_quadratic_and_div_sqrt_dim_gradients():
    oh.check_grad("_contrib_quadratic", {"a": 0.7, "b": -0.3, "c": 2.0}, [RNG.normal(size=(2, 3))])
    oh.check_grad("_contrib_div_sqrt_dim", {}, [RNG.normal(size=(2, 3, 4))])
    x = RNG.normal(size=(2, 9))
    np.testing.assert_allclose(mx.nd.contrib.div_sqrt_dim(mx.nd.array(x)).asnumpy(), x / 3.0,
                               rtol=1e-6)


def test_allclose_matches_numpy_and_mxnet():
    for case in GOLDEN["allclose"]:
        a, b = (mx.nd.array(np.asarray(case[k]).reshape(3, 4), dtype="float64") for k in "ab")
        out = mx.nd.contrib.allclose(a, b, rtol=case["rtol"], atol=case["atol"])
        assert out.dtype == np.uint8 and out.shape == ()
        assert out.asnumpy() == case["out"]
    a = RNG.normal(size=(5, 6)).astype(np.float32)
    for delta in (0.0, 1e-7, 1e-3):
        b = a + delta
        out = mx.nd.contrib.allclose(mx.nd.array(a), mx.nd.array(b), rtol=1e-5, atol=1e-7)
        assert bool(out.asnumpy()) == np.allclose(a, b, rtol=1e-5, atol=1e-7)
    nan = mx.nd.array([np.nan, 1.0])
    assert mx.nd.contrib.allclose(nan, nan).asnumpy() == 1
    assert mx.nd.contrib.allclose(nan, nan, equal_nan=False).asnumpy() == 0
    # the 0-d result cannot be bound in a graph (documented in docs/compatibility.md)
    sym = mx.sym.contrib.allclose(mx.sym.var("a"), mx.sym.var("b"))
    with pytest.raises(MXNetError):
        sym.bind(mx.cpu(), {"a": mx.nd.ones((2, 2)), "b": mx.nd.ones((2, 2))})
    with pytest.raises(MXNetError, match="same shape"):
        mx.nd.contrib.allclose(mx.nd.ones((2, 3)), mx.nd.ones((3, 2)))


# ---------------------------------------------------------------------------------------------
# quantize, dequantize
# ---------------------------------------------------------------------------------------------
def test_quantize_and_dequantize_match_mxnet():
    for case in GOLDEN["quantize"]:
        data = mx.nd.array(np.asarray(case["data"], np.float32).reshape(3, 4))
        q, lo, hi = mx.nd.contrib.quantize(data, mx.nd.array([case["min"]]),
                                           mx.nd.array([case["max"]]), out_type=case["out_type"])
        assert q.dtype == np.dtype(case["qdtype"])
        np.testing.assert_array_equal(q.asnumpy().ravel(), case["q"])
        np.testing.assert_array_equal(lo.asnumpy(), case["qmin"])
        np.testing.assert_array_equal(hi.asnumpy(), case["qmax"])
        back = mx.nd.contrib.dequantize(q, lo, hi)
        assert back.dtype == np.float32
        np.testing.assert_allclose(back.asnumpy().ravel(), case["dequantized"], rtol=1e-6)


def test_quantize_rounds_half_away_from_zero_and_clips():
    # int8 codes are |x| * 127 / r rounded half away from zero, within [-128, 127]
    r = 127.0
    x = mx.nd.array([0.5, -0.5, 1.49, -1.5, 300.0, -300.0])
    q, lo, hi = mx.nd.contrib.quantize(x, mx.nd.array([-r]), mx.nd.array([r / 2]), out_type="int8")
    np.testing.assert_array_equal(q.asnumpy(), [1, -1, 1, -2, 127, -128])
    assert (lo.asnumpy()[0], hi.asnumpy()[0]) == (-r, r)
    q, lo, hi = mx.nd.contrib.quantize(x, mx.nd.array([0.0]), mx.nd.array([255.0]))
    assert q.dtype == np.uint8
    np.testing.assert_array_equal(q.asnumpy(), [1, 0, 1, 0, 255, 0])


def test_quantize_bad_inputs():
    with pytest.raises(MXNetError, match="min_range must have shape"):
        mx.nd.contrib.quantize(mx.nd.ones(3), mx.nd.zeros(2), mx.nd.ones(1))
    with pytest.raises(MXNetError, match="int8 or uint8"):
        mx.nd.contrib.dequantize(mx.nd.ones(3), mx.nd.zeros(1), mx.nd.ones(1))
    with pytest.raises(MXNetError, match="out_type"):
        mx.nd.contrib.quantize(mx.nd.ones(3), mx.nd.zeros(1), mx.nd.ones(1), out_type="int16")


# ---------------------------------------------------------------------------------------------
# interleaved attention products
# ---------------------------------------------------------------------------------------------
def _split_heads(x, heads, blocks):
    """(seq, batch, heads * blocks * dim) -> blocks arrays of (batch * heads, seq, dim)."""
    seq, batch, feat = x.shape
    dim = feat // (heads * blocks)
    parts = x.reshape(seq, batch, heads, blocks, dim).transpose(3, 1, 2, 0, 4)
    return [p.reshape(batch * heads, seq, dim) for p in parts]


def _merge_heads(o, batch, heads):
    bh, seq, dim = o.shape
    return o.reshape(batch, heads, seq, dim).transpose(2, 0, 1, 3).reshape(seq, batch, heads * dim)


def test_interleaved_products_match_numpy():
    heads, dim, batch, lq, lk = 2, 3, 2, 4, 5
    qkv = RNG.normal(size=(lq, batch, heads * 3 * dim))
    q, k, v = _split_heads(qkv, heads, 3)
    scores = mx.nd.contrib.interleaved_matmul_selfatt_qk(mx.nd.array(qkv, dtype="float64"),
                                                         heads=heads).asnumpy()
    np.testing.assert_allclose(scores, q @ np.swapaxes(k, 1, 2) / np.sqrt(dim), rtol=1e-12)
    att = RNG.normal(size=(batch * heads, lq, lq))
    out = mx.nd.contrib.interleaved_matmul_selfatt_valatt(mx.nd.array(qkv, dtype="float64"),
                                                          mx.nd.array(att, dtype="float64"),
                                                          heads=heads).asnumpy()
    np.testing.assert_allclose(out, _merge_heads(att @ v, batch, heads), rtol=1e-12)
    queries = RNG.normal(size=(lq, batch, heads * dim))
    kv = RNG.normal(size=(lk, batch, heads * 2 * dim))
    (qe,) = _split_heads(queries, heads, 1)
    ke, ve = _split_heads(kv, heads, 2)
    scores = mx.nd.contrib.interleaved_matmul_encdec_qk(mx.nd.array(queries, dtype="float64"),
                                                        mx.nd.array(kv, dtype="float64"),
                                                        heads=heads).asnumpy()
    np.testing.assert_allclose(scores, qe @ np.swapaxes(ke, 1, 2) / np.sqrt(dim), rtol=1e-12)
    att = RNG.normal(size=(batch * heads, lq, lk))
    out = mx.nd.contrib.interleaved_matmul_encdec_valatt(mx.nd.array(kv, dtype="float64"),
                                                         mx.nd.array(att, dtype="float64"),
                                                         heads=heads).asnumpy()
    np.testing.assert_allclose(out, _merge_heads(att @ ve, batch, heads), rtol=1e-12)


@pytest.mark.parametrize("name,inputs", [
    ("_contrib_interleaved_matmul_selfatt_qk", [(3, 2, 12)]),
    ("_contrib_interleaved_matmul_selfatt_valatt", [(3, 2, 12), (4, 3, 3)]),
    ("_contrib_interleaved_matmul_encdec_qk", [(3, 2, 4), (5, 2, 8)]),
    ("_contrib_interleaved_matmul_encdec_valatt", [(5, 2, 8), (4, 3, 5)]),
])
def test_interleaved_gradients(name, inputs):
    oh.check_grad(name, {"heads": 2}, [RNG.normal(size=s) for s in inputs], rtol=1e-5, atol=1e-7,
                  eps=1e-6)


def test_interleaved_bad_shapes():
    with pytest.raises(MXNetError, match="not a multiple of heads"):
        mx.nd.contrib.interleaved_matmul_selfatt_qk(mx.nd.ones((3, 2, 10)), heads=2)
    with pytest.raises(MXNetError, match="3-dimensional"):
        mx.nd.contrib.interleaved_matmul_encdec_qk(mx.nd.ones((3, 4)), mx.nd.ones((3, 2, 8)),
                                                   heads=2)
    with pytest.raises(MXNetError, match="attention has shape"):
        mx.nd.contrib.interleaved_matmul_encdec_valatt(mx.nd.ones((5, 2, 8)),
                                                       mx.nd.ones((4, 3, 4)), heads=2)
    with pytest.raises(MXNetError, match="heads must be positive"):
        mx.nd.contrib.interleaved_matmul_selfatt_qk(mx.nd.ones((3, 2, 12)), heads=0)


# ---------------------------------------------------------------------------------------------
# ctc_loss
# ---------------------------------------------------------------------------------------------
def _ctc_by_enumeration(acts, label, blank):
    """-log of the summed probability of every frame-by-frame path that collapses (merge
    repeats, drop blanks) to the label: the definition, for tiny inputs."""
    frames, alphabet = acts.shape
    probs = np.exp(acts - acts.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    total = 0.0
    for path in itertools.product(range(alphabet), repeat=frames):
        collapsed = [c for i, c in enumerate(path) if c != blank and (i == 0 or c != path[i - 1])]
        if collapsed == list(label):
            total += np.prod(probs[np.arange(frames), path])
    return -np.log(total)


@pytest.mark.parametrize("blank_label", ["first", "last"])
def test_ctc_loss_is_the_summed_path_probability(blank_label):
    frames, batch, alphabet = 4, 3, 3
    acts = RNG.normal(size=(frames, batch, alphabet))
    if blank_label == "first":
        labels, blank = np.array([[1, 2, 0], [1, 1, 0], [2, 0, 0]]), 0
        targets = [[1, 2], [1, 1], [2]]
    else:
        labels, blank = np.array([[0, 1, -1], [0, 0, -1], [1, -1, -1]]), 2
        targets = [[0, 1], [0, 0], [1]]
    loss = mx.nd.ctc_loss(mx.nd.array(acts, dtype="float64"), mx.nd.array(labels),
                          blank_label=blank_label).asnumpy()
    expected = [_ctc_by_enumeration(acts[:, b], targets[b], blank) for b in range(batch)]
    np.testing.assert_allclose(loss, expected, rtol=1e-10)


def test_ctc_loss_lengths_and_gradient():
    acts = RNG.normal(size=(5, 2, 4))
    labels = np.array([[1, 3, 2], [2, 2, 1]], dtype=np.float64)
    lengths = [np.array([4.0, 5.0]), np.array([2.0, 3.0])]
    attrs = {"use_data_lengths": True, "use_label_lengths": True}
    loss = mx.nd.ctc_loss(mx.nd.array(acts, dtype="float64"), mx.nd.array(labels),
                          mx.nd.array(lengths[0]), mx.nd.array(lengths[1]), **attrs).asnumpy()
    np.testing.assert_allclose(loss[0], _ctc_by_enumeration(acts[:4, 0], [1, 3], 0), rtol=1e-10)
    np.testing.assert_allclose(loss[1], _ctc_by_enumeration(acts[:, 1], [2, 2, 1], 0), rtol=1e-10)
    oh.check_grad("ctc_loss", attrs, [acts, labels] + lengths, wrt=[0], rtol=1e-5, atol=1e-7,
                  eps=1e-6)
    grads = oh.backward("ctc_loss", attrs, [acts, labels] + lengths, [np.ones(2)])
    assert np.all(grads[0][4, 0] == 0)          # frames beyond a sequence get no gradient
    oh.check_grad("ctc_loss", {}, [acts, labels], wrt=[0], rtol=1e-5, atol=1e-7, eps=1e-6)


def test_ctc_loss_bad_inputs():
    with pytest.raises(MXNetError, match="cannot exceed the number of frames"):
        mx.nd.ctc_loss(mx.nd.ones((3, 2, 4)), mx.nd.ones((2, 4)))
    with pytest.raises(MXNetError, match="3-dimensional"):
        mx.nd.ctc_loss(mx.nd.ones((3, 4)), mx.nd.ones((2, 2)))
    with pytest.raises(MXNetError, match=r"label must have shape \(batch"):
        mx.nd.ctc_loss(mx.nd.ones((3, 2, 4)), mx.nd.ones((3, 2)))
    with pytest.raises(MXNetError, match="data_lengths must have shape"):
        mx.nd.ctc_loss(mx.nd.ones((3, 2, 4)), mx.nd.ones((2, 2)), mx.nd.ones(3),
                       use_data_lengths=True)


@pytest.mark.parametrize("lengths, pattern", [
    (([6.0, 5.0], None), r"data_lengths must lie in \[0, 5\], got 6.0 at sequence 0"),
    (([5.0, -1.0], None), r"data_lengths must lie in \[0, 5\], got -1.0 at sequence 1"),
    (([5.0, np.nan], None), r"data_lengths must lie in \[0, 5\], got nan"),
    ((None, [3.0, 4.0]), r"label_lengths must lie in \[0, 3\], got 4.0 at sequence 1"),
])
def test_ctc_loss_lengths_outside_the_arrays_raise(lengths, pattern):
    """A length past the data or the label would make the recursion read outside its
    arrays (a crash before): it raises, naming the input and the sequence."""
    data_lengths, label_lengths = lengths
    attrs = {}
    if data_lengths is not None:
        attrs.update(data_lengths=mx.nd.array(data_lengths), use_data_lengths=True)
    if label_lengths is not None:
        attrs.update(label_lengths=mx.nd.array(label_lengths), use_label_lengths=True)
    with pytest.raises(MXNetError, match=pattern):
        mx.nd.ctc_loss(mx.nd.ones((5, 2, 4)), mx.nd.array([[1, 2, 1], [2, 1, 1]]), **attrs)


def test_ctc_loss_label_classes_outside_the_alphabet_raise():
    acts = mx.nd.array(RNG.normal(size=(5, 2, 4)), dtype="float64")
    with pytest.raises(MXNetError, match=r"label holds 9.0, outside the classes \[0, 4\)"):
        mx.nd.ctc_loss(acts, mx.nd.array([[9, 1], [1, 2]]))
    with pytest.raises(MXNetError, match=r"label holds -3.0, outside the classes \[-1, 4\)"):
        mx.nd.ctc_loss(acts, mx.nd.array([[0, 1], [-3, 2]]), blank_label="last")
    # entries past a sequence's label length are not read, whatever they hold
    lengths = mx.nd.array([1.0, 2.0])
    loose = mx.nd.ctc_loss(acts, mx.nd.array([[1, 99], [1, 2]]), label_lengths=lengths,
                           use_label_lengths=True).asnumpy()
    clean = mx.nd.ctc_loss(acts, mx.nd.array([[1, 0], [1, 2]]), label_lengths=lengths,
                           use_label_lengths=True).asnumpy()
    np.testing.assert_array_equal(loose, clean)
    # padding of either convention passes
    last = mx.nd.ctc_loss(acts, mx.nd.array([[0, -1], [1, 2]]), blank_label="last").asnumpy()
    np.testing.assert_allclose(last[0], _ctc_by_enumeration(acts.asnumpy()[:, 0], [0], 3),
                               rtol=1e-10)
