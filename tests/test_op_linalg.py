"""The linalg family (mx.nd.linalg / mx.sym.linalg): numpy references, numeric gradients, MXNet
1.9.1's values and gradients (tests/fixtures/make_linalg_golden.py) and the errors bad inputs
give."""
import json
import os

import numpy as np
import ophelpers as oh
import pytest

import lightmod as mx
from lightmod.base import MXNetError

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures",
                       "linalg_golden.json")) as _f:
    GOLDEN = json.load(_f)

RNG = np.random.default_rng(20)


def _spd(n, batch=(), rng=RNG):
    x = rng.normal(size=batch + (n, n))
    return x @ np.swapaxes(x, -1, -2) + n * np.eye(n)


def _nd(x, dtype="float64"):
    return mx.nd.array(np.asarray(x), dtype=dtype)


def _as_list(out):
    return out if isinstance(out, (list, tuple)) else [out]


# ---------------------------------------------------------------------------------------------
# MXNet 1.9.1's outputs and gradients
# ---------------------------------------------------------------------------------------------
def _golden_cases(prefix):
    return [pytest.param(c, id="%s-%d" % (c["op"], i)) for i, c in enumerate(GOLDEN["cases"])
            if c["op"].startswith(prefix)]


def _symbol(path):
    obj = mx.sym
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def run_golden(case):
    """Bind the case's operator like the fixture script did; outputs and gradients."""
    dtype = case["dtype"]
    arrays = [np.asarray(e["values"], dtype).reshape(e["shape"]) for e in case["inputs"]]
    names = ["in%d" % i for i in range(len(arrays))]
    sym = _symbol(case["op"])(*[mx.sym.var(n) for n in names], **case["attrs"])
    wanted = [n for n, g in zip(names, case.get("grads") or [True] * len(names)) if g is not None]
    grads = {n: mx.nd.zeros(a.shape, dtype=dtype) for n, a in zip(names, arrays) if n in wanted}
    ex = sym.bind(mx.cpu(), {n: mx.nd.array(a, dtype=dtype) for n, a in zip(names, arrays)},
                  args_grad=grads, grad_req={n: "write" if n in wanted else "null" for n in names})
    ex.forward(is_train=True)
    outs = [o.asnumpy() for o in ex.outputs]
    heads = [np.asarray(h, o.dtype).reshape(o.shape) for h, o in zip(case["heads"], outs)]
    ex.backward([mx.nd.array(h, dtype=h.dtype) for h in heads])
    return outs, [grads[n].asnumpy() if n in grads else None for n in names]


@pytest.mark.parametrize("case", _golden_cases("linalg."))
def test_linalg_matches_mxnet(case):
    if "error" in case:
        with pytest.raises(MXNetError):
            run_golden(dict(case, heads=[], grads=None))
        return
    outs, grads = run_golden(case)
    tol = dict(rtol=1e-9, atol=1e-10)
    for got, want in zip(outs, case["outputs"]):
        expected = np.asarray(want["values"]).reshape(want["shape"])
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, **tol)
    for got, want in zip(grads, case["grads"]):
        if want is not None:
            np.testing.assert_allclose(got.ravel(), want, **tol)


# ---------------------------------------------------------------------------------------------
# numpy references, batched, float32 and float64
# ---------------------------------------------------------------------------------------------
def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if dtype == "float32" else dict(rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_products_match_numpy(dtype):
    a, b, c = RNG.normal(size=(2, 3, 4, 5)), RNG.normal(size=(2, 3, 6, 4)), RNG.normal(size=(2, 3, 5, 6))
    out = mx.nd.linalg.gemm(_nd(a, dtype), _nd(b, dtype), _nd(c, dtype), transpose_a=True,
                            transpose_b=True, alpha=1.5, beta=-2.0)
    expected = 1.5 * np.swapaxes(a, -1, -2) @ np.swapaxes(b, -1, -2) - 2.0 * c
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_allclose(out.asnumpy(), expected, **_tol(dtype))
    out = mx.nd.linalg.gemm2(_nd(a, dtype), _nd(c, dtype), alpha=0.5)
    np.testing.assert_allclose(out.asnumpy(), 0.5 * a @ c, **_tol(dtype))
    # the row axis elsewhere: the same as swapping it to -2 and back
    a4, b4 = RNG.normal(size=(4, 2, 3)), RNG.normal(size=(4, 2, 5))
    out = mx.nd.linalg.gemm2(_nd(a4, dtype), _nd(b4, dtype), transpose_a=True, axis=0)
    expected = np.swapaxes(np.swapaxes(np.swapaxes(a4, 0, 1), -1, -2) @ np.swapaxes(b4, 0, 1), 0, 1)
    np.testing.assert_allclose(out.asnumpy(), expected, **_tol(dtype))
    s = mx.nd.linalg.syrk(_nd(a, dtype), alpha=2.0)
    np.testing.assert_allclose(s.asnumpy(), 2.0 * a @ np.swapaxes(a, -1, -2), **_tol(dtype))
    s = mx.nd.linalg.syrk(_nd(a, dtype), transpose=True)
    np.testing.assert_allclose(s.asnumpy(), np.swapaxes(a, -1, -2) @ a, **_tol(dtype))


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_factorisations_match_numpy(lower, dtype):
    spd = _spd(4, (3,))
    chol = np.linalg.cholesky(spd)
    factor = chol if lower else np.swapaxes(chol, -1, -2)
    np.testing.assert_allclose(mx.nd.linalg.potrf(_nd(spd, dtype), lower=lower).asnumpy(), factor,
                               **_tol(dtype))
    np.testing.assert_allclose(mx.nd.linalg.potri(_nd(factor, dtype), lower=lower).asnumpy(),
                               np.linalg.inv(spd), **_tol(dtype))
    tri = np.tril(RNG.normal(size=(3, 4, 4))) + 4 * np.eye(4)
    if not lower:
        tri = np.swapaxes(tri, -1, -2)
    noisy = tri + (np.triu if lower else np.tril)(RNG.normal(size=tri.shape), 1 if lower else -1)
    b = RNG.normal(size=(3, 4, 2))
    for transpose in (False, True):
        op_a = np.swapaxes(tri, -1, -2) if transpose else tri
        out = mx.nd.linalg.trsm(_nd(noisy, dtype), _nd(b, dtype), transpose=transpose, lower=lower,
                                alpha=2.0)
        np.testing.assert_allclose(out.asnumpy(), np.linalg.solve(op_a, 2.0 * b), **_tol(dtype))
        out = mx.nd.linalg.trmm(_nd(noisy, dtype), _nd(np.swapaxes(b, -1, -2), dtype),
                                transpose=transpose, rightside=True, lower=lower)
        np.testing.assert_allclose(out.asnumpy(), np.swapaxes(b, -1, -2) @ op_a, **_tol(dtype))
    np.testing.assert_allclose(mx.nd.linalg.sumlogdiag(_nd(spd, dtype)).asnumpy(),
                               np.log(np.diagonal(spd, 0, -2, -1)).sum(-1), **_tol(dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_decompositions_match_numpy(dtype):
    a = RNG.normal(size=(2, 3, 5))
    q, l = mx.nd.linalg.gelqf(_nd(a, dtype))
    q, l = q.asnumpy(), l.asnumpy()
    np.testing.assert_allclose(l @ q, a, **_tol(dtype))
    np.testing.assert_allclose(q @ np.swapaxes(q, -1, -2), np.broadcast_to(np.eye(3), (2, 3, 3)),
                               **_tol(dtype))
    assert np.all(np.triu(l, 1) == 0)
    # numpy's QR of A^T is the same factorisation up to the signs of L's diagonal
    r = np.linalg.qr(np.swapaxes(a, -1, -2))[1]
    np.testing.assert_allclose(np.abs(np.diagonal(l, 0, -2, -1)), np.abs(np.diagonal(r, 0, -2, -1)),
                               **_tol(dtype))
    sym = _spd(5, (2,)) - 3 * np.eye(5)
    u, lam = mx.nd.linalg.syevd(_nd(sym, dtype))
    u, lam = u.asnumpy(), lam.asnumpy()
    w, v = np.linalg.eigh(sym)
    np.testing.assert_allclose(lam, w, **_tol(dtype))
    for b in range(2):
        for i in range(5):
            ref = v[b][:, i] * np.sign(v[b][:, i][np.argmax(np.abs(v[b][:, i]))])
            np.testing.assert_allclose(u[b][i], ref, rtol=1e-3 if dtype == "float32" else 1e-8,
                                       atol=1e-3 if dtype == "float32" else 1e-8)
    x = RNG.normal(size=(3, 4, 4))
    np.testing.assert_allclose(mx.nd.linalg.inverse(_nd(x, dtype)).asnumpy(), np.linalg.inv(x),
                               rtol=1e-3 if dtype == "float32" else 1e-9, atol=1e-3)
    np.testing.assert_allclose(mx.nd.linalg.det(_nd(x, dtype)).asnumpy(), np.linalg.det(x),
                               **_tol(dtype))
    sign, logabs = mx.nd.linalg.slogdet(_nd(x, dtype))
    ref_sign, ref_log = np.linalg.slogdet(x)
    np.testing.assert_array_equal(sign.asnumpy(), ref_sign)
    np.testing.assert_allclose(logabs.asnumpy(), ref_log, **_tol(dtype))


def test_single_matrix_results_have_shape_one():
    a = _nd(_spd(3))
    assert mx.nd.linalg.det(a).shape == (1,)
    assert mx.nd.linalg.sumlogdiag(a).shape == (1,)
    assert [o.shape for o in mx.nd.linalg.slogdet(a)] == [(1,), (1,)]
    assert [o.shape for o in mx.nd.linalg.syevd(a)] == [(3, 3), (3,)]


@pytest.mark.parametrize("n", [1, 2, 4])
def test_diagonal_and_triangle_maps_match_numpy(n):
    x = RNG.normal(size=(2, n, n))
    for offset in range(1 - n, n):
        diag = mx.nd.linalg.extractdiag(_nd(x), offset=offset).asnumpy()
        np.testing.assert_array_equal(diag, np.diagonal(x, offset, -2, -1))
        made = mx.nd.linalg.makediag(_nd(diag), offset=offset).asnumpy()
        np.testing.assert_array_equal(made, np.stack([np.diag(d, offset) for d in diag]))
        for lower in ([True, False] if offset == 0 else [True]):
            vec = mx.nd.linalg.extracttrian(_nd(x), offset=offset, lower=lower).asnumpy()
            takes_lower = offset < 0 or (offset == 0 and lower)
            if takes_lower:      # row by row
                rows, cols = np.tril_indices(n, offset)
            else:                # column by column: the lower triangle of the transpose
                cols, rows = np.tril_indices(n, -offset)
            np.testing.assert_array_equal(vec, x[:, rows, cols])
            back = mx.nd.linalg.maketrian(_nd(vec), offset=offset, lower=lower).asnumpy()
            np.testing.assert_array_equal(back, np.tril(x, offset) if takes_lower
                                          else np.triu(x, offset))


def test_names_and_aliases():
    a = _nd(_spd(2))
    for name in ("linalg_potrf", "_linalg_potrf"):
        np.testing.assert_allclose(getattr(mx.nd, name)(a).asnumpy(),
                                   mx.nd.linalg.potrf(a).asnumpy())
    assert mx.sym.linalg.gemm2(mx.sym.var("a"), mx.sym.var("b")).name.startswith("gemm2")
    assert "potrf" in dir(mx.nd.linalg)


# ---------------------------------------------------------------------------------------------
# gradients against central differences (float64)
# ---------------------------------------------------------------------------------------------
GRAD_CASES = [
    ("_linalg_gemm", {"alpha": 1.5, "beta": 0.5, "transpose_b": True},
     [RNG.normal(size=(2, 2, 3)), RNG.normal(size=(2, 4, 3)), RNG.normal(size=(2, 2, 4))]),
    ("_linalg_gemm", {"transpose_a": True, "axis": 0},
     [RNG.normal(size=(3, 2, 2)), RNG.normal(size=(3, 2, 4)), RNG.normal(size=(2, 2, 4))]),
    ("_linalg_gemm2", {"alpha": -2.0, "transpose_a": True}, [RNG.normal(size=(3, 2)),
                                                              RNG.normal(size=(3, 4))]),
    ("_linalg_syrk", {"alpha": 0.7}, [RNG.normal(size=(2, 2, 3))]),
    ("_linalg_syrk", {"transpose": True}, [RNG.normal(size=(3, 2))]),
    ("_linalg_trmm", {"lower": False, "transpose": True}, [RNG.normal(size=(2, 3, 3)),
                                                           RNG.normal(size=(2, 3, 2))]),
    ("_linalg_trmm", {"rightside": True, "alpha": 2.0}, [RNG.normal(size=(3, 3)),
                                                         RNG.normal(size=(2, 3))]),
    ("_linalg_trsm", {"alpha": 1.5}, [np.tril(RNG.normal(size=(3, 3))) + 3 * np.eye(3),
                                      RNG.normal(size=(3, 2))]),
    ("_linalg_trsm", {"rightside": True, "transpose": True, "lower": False},
     [np.triu(RNG.normal(size=(2, 3, 3))) + 3 * np.eye(3), RNG.normal(size=(2, 2, 3))]),
    ("_linalg_potri", {}, [np.tril(RNG.uniform(0.2, 1, (2, 3, 3))) + np.eye(3)]),
    ("_linalg_potri", {"lower": False}, [np.triu(RNG.uniform(0.2, 1, (3, 3))) + np.eye(3)]),
    ("_linalg_sumlogdiag", {}, [_spd(3, (2,))]),
    ("_linalg_gelqf", {}, [RNG.normal(size=(2, 2, 4))]),
    ("_linalg_inverse", {}, [_spd(3, (2,))]),
    ("_linalg_det", {}, [RNG.normal(size=(2, 3, 3))]),
    ("_linalg_slogdet", {}, [RNG.normal(size=(2, 3, 3))]),
    ("_linalg_extractdiag", {"offset": -1}, [RNG.normal(size=(2, 3, 3))]),
    ("_linalg_makediag", {"offset": 2}, [RNG.normal(size=(2, 2))]),
    ("_linalg_extracttrian", {"offset": 1}, [RNG.normal(size=(2, 3, 3))]),
    ("_linalg_maketrian", {"lower": False}, [RNG.normal(size=(2, 6))]),
]


@pytest.mark.parametrize("name,attrs,inputs", GRAD_CASES,
                         ids=["%s-%d" % (c[0], i) for i, c in enumerate(GRAD_CASES)])
def test_gradient_is_numeric_gradient(name, attrs, inputs):
    oh.check_grad(name, attrs, inputs, rtol=1e-5, atol=1e-7, eps=1e-6)


def _symmetric_grad(name, attrs, x, head):
    """Gradient of sum(head * f(sym(x))) with sym(x) = (x + x^T) / 2 from the operator, and the
    same by central differences: potrf and syevd read one triangle, so only perturbations that
    keep the input symmetric are meaningful."""
    def f(v):
        s = 0.5 * (v + np.swapaxes(v, -1, -2))
        outs, _, _, _ = oh.forward(name, attrs, [s])
        return sum(float(np.sum(o * h)) for o, h in zip(outs, head))
    sx = 0.5 * (x + np.swapaxes(x, -1, -2))
    g = oh.backward(name, attrs, [sx], head)[0]
    analytic = 0.5 * (g + np.swapaxes(g, -1, -2))
    numeric = np.zeros_like(x)
    eps = 1e-6
    for j in range(x.size):
        d = np.zeros(x.size)
        d[j] = eps
        d = d.reshape(x.shape)
        numeric.reshape(-1)[j] = (f(x + d) - f(x - d)) / (2 * eps)
    return analytic, numeric


@pytest.mark.parametrize("name,attrs", [("_linalg_potrf", {}), ("_linalg_potrf", {"lower": False}),
                                        ("_linalg_syevd", {})])
def test_symmetric_input_gradients(name, attrs):
    x = _spd(3, (2,)) + np.diag([0.0, 1.0, 3.0])       # distinct eigenvalues
    outs, _, _, _ = oh.forward(name, attrs, [x])
    head = [RNG.normal(size=o.shape) for o in outs]
    analytic, numeric = _symmetric_grad(name, attrs, x, head)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7)


def test_grad_req_add_accumulates():
    a, b = RNG.normal(size=(3, 3)), RNG.normal(size=(3, 2))
    tri = np.tril(a) + 3 * np.eye(3)
    start = [np.ones((3, 3)), np.full((3, 2), 2.0)]
    head = [RNG.normal(size=(3, 2))]
    written = oh.backward("_linalg_trsm", {}, [tri, b], head)
    added = oh.backward("_linalg_trsm", {}, [tri, b], head, req=["add", "add"], init_grads=start)
    for w, s, ad in zip(written, start, added):
        np.testing.assert_allclose(ad, w + s, rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# bad inputs
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("call,words", [
    (lambda: mx.nd.linalg.potrf(_nd(np.ones((2, 3)))), ["_linalg_potrf", "square", "(2, 3)"]),
    (lambda: mx.nd.linalg.potrf(_nd([[1.0, 2.0], [2.0, 1.0]])), ["positive definite", "(2, 2)"]),
    (lambda: mx.nd.linalg.inverse(_nd([[1.0, 2.0], [2.0, 4.0]])), ["singular", "(2, 2)"]),
    (lambda: mx.nd.linalg.syevd(_nd(np.ones(3))), ["'A'", "at least 2 dimensions", "(3,)"]),
    (lambda: mx.nd.linalg.gelqf(_nd(np.ones((4, 3)))), ["m <= n", "(4, 3)"]),
    (lambda: mx.nd.linalg.gemm2(_nd(np.ones((2, 3))), _nd(np.ones((2, 3)))),
     ["_linalg_gemm2", "(2, 3)"]),
    (lambda: mx.nd.linalg.gemm(_nd(np.ones((2, 3))), _nd(np.ones((3, 2))), _nd(np.ones((3, 3)))),
     ["'C'", "(3, 3)", "(2, 2)"]),
    (lambda: mx.nd.linalg.gemm2(_nd(np.ones((2, 2, 3))), _nd(np.ones((3, 3, 2)))), ["batch"]),
    (lambda: mx.nd.linalg.gemm2(_nd(np.ones((2, 2))), _nd(np.ones((2, 2))), axis=1), ["axis=1"]),
    (lambda: mx.nd.linalg.trsm(_nd(np.eye(3)), _nd(np.ones((2, 2)))), ["(3, 3)", "(2, 2)"]),
    (lambda: mx.nd.linalg.maketrian(_nd(np.ones(4))), ["4 entries", "triangle"]),
    (lambda: mx.nd.linalg.extractdiag(_nd(np.ones((2, 2))), offset=2), ["offset=2"]),
    (lambda: mx.nd.linalg.det(mx.nd.array(np.eye(2), dtype="int32")), ["float32 and float64",
                                                                      "int32"]),
    (lambda: mx.nd.linalg.trmm(_nd(np.eye(2)), mx.nd.array(np.eye(2), dtype="float32")),
     ["'B'", "float32"]),
])
def test_bad_inputs_raise_clear_errors(call, words):
    with pytest.raises(MXNetError) as err:
        call()
    for word in words:
        assert word in str(err.value), (word, str(err.value))


def test_symbolic_shape_errors_name_the_operator():
    sym = mx.sym.linalg.potri(mx.sym.var("a"))
    with pytest.raises(MXNetError, match="square"):
        sym.infer_shape(a=(3, 4))
    _, out, _ = mx.sym.linalg.gelqf(mx.sym.var("a")).infer_shape(a=(5, 2, 3))
    assert out == [(5, 2, 3), (5, 2, 2)]
