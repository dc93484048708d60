"""kernels/cpu/conv.py cols_forward / cols_backward and rows_forward / rows_backward_data:
the column and row layouts' chunk loops in one compiled call (numpy's OpenBLAS called from
numba), against the operator's Python chunk loops and a numpy reference, for drawn
geometries, chunk sizes, dtypes and gradient requests."""
import numpy as np
import ophelpers as oh
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_op_conv import conv_ref

from lightmod.kernels import cpu as kcpu
from lightmod.kernels.cpu import conv as kconv
from lightmod.kernels.cpu.blas import gemm_function
from lightmod.operator import conv as conv_mod

REQS = ("write", "add", "null")


def _run(compiled, attrs, inputs, head, req, chunk_elements, layout="cols"):
    """Forward and backward of Convolution with a one-thread plan forced (the column layout
    in chunks of ``chunk_elements`` column elements, or the row layout), through the
    compiled chunk loops or the Python ones."""
    names = {"cols": ("cols_forward", "cols_backward"),
             "rows": ("rows_forward", "rows_backward_data")}[layout]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(conv_mod.Convolution, "_serial", staticmethod(lambda k, n, work: True))
        m.setattr(conv_mod, "SERIAL_COL_BUDGET", chunk_elements)
        m.setattr(conv_mod, "ROW_BUDGET", chunk_elements)
        m.setattr(conv_mod, "WINOGRAD_MIN_CHANNELS", 1 << 30)
        m.setattr(conv_mod, "ROW_MIN_CHANNELS", 1 << 30 if layout == "cols" else 1)
        # the column layout's loops, not the direct data gradient of few-channel images
        m.setattr(kcpu, "direct_conv_fits", lambda *a, **k: False)
        used = []
        if compiled:
            for name in names:
                real = getattr(kconv, name)
                m.setattr(kcpu, name, lambda *a, _r=real, _n=name, **k: used.append(_n) or
                          _r(*a, **k))
        else:
            for name in names:
                m.setattr(kcpu, name, lambda *a, **k: False)
        out = oh.forward("Convolution", attrs, inputs)[0][0]
        init = [np.full(x.shape, 0.5, x.dtype) for x in inputs]
        grads = oh.backward("Convolution", attrs, inputs, [head], req=req, init_grads=init)
        if compiled:
            assert used.count(names[0]) == 2
            assert used.count(names[1]) == (1 if layout == "cols" or req[0] != "null" else 0)
    return out, grads


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 5), c=st.integers(1, 3), f=st.integers(1, 6), size=st.integers(3, 9),
       kernel=st.integers(1, 3), stride=st.integers(1, 2), pad=st.integers(0, 2),
       dilate=st.integers(1, 2), chunk_images=st.integers(1, 3),
       dtype=st.sampled_from([np.float32, np.float64]),
       req=st.tuples(*[st.sampled_from(REQS)] * 3), seed=st.integers(0, 2 ** 16),
       layout=st.sampled_from(["cols", "rows"]))
def test_compiled_chunk_loop_equals_the_python_one(n, c, f, size, kernel, stride,
                                                   pad, dilate, chunk_images, dtype, req,
                                                   seed, layout):
    span = dilate * (kernel - 1) + 1
    if span > size + 2 * pad:
        return
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, size, size)).astype(dtype)
    w = rng.standard_normal((f, c, kernel, kernel)).astype(dtype)
    b = rng.standard_normal(f).astype(dtype)
    attrs = dict(kernel=(kernel, kernel), num_filter=f, stride=(stride, stride),
                 pad=(pad, pad), dilate=(dilate, dilate))
    osize = (size + 2 * pad - span) // stride + 1
    head = rng.standard_normal((n, f, osize, osize)).astype(dtype)
    per_image = c * kernel * kernel * osize * osize
    budget = per_image * chunk_images
    out_c, grads_c = _run(True, attrs, [x, w, b], head, list(req), budget, layout)
    out_p, grads_p = _run(False, attrs, [x, w, b], head, list(req), budget, layout)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    ref = conv_ref(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
                   (stride, stride), (pad, pad), (dilate, dilate), 1)
    np.testing.assert_allclose(out_c, ref, **tol)
    np.testing.assert_allclose(out_c, out_p, **tol)
    for r, gc, gp in zip(req, grads_c, grads_p):
        if r == "null":
            assert gc is None and gp is None
        else:
            np.testing.assert_allclose(gc, gp, **tol)


def test_declines_arrays_it_cannot_pass_as_they_are():
    x = np.ones((2, 1, 1, 4, 4), np.float32)
    w2 = np.ones((3, 4), np.float32)
    col = np.empty(4 * 9 * 2, np.float32)
    res = np.empty(3 * 9 * 2, np.float32)
    y = np.empty((2, 3, 9), np.float32)
    g = (1, 2, 2, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 3, 3)
    assert not kconv.cols_forward(x, w2.astype(np.float64), col, res, y, g, 2)
    assert not kconv.cols_forward(x, np.asfortranarray(w2), col, res, y, g, 2)
    assert kconv.cols_forward(x, w2, col, res, y, g, 2)
    np.testing.assert_allclose(y, 4.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm_function_multiplies(dtype):
    gemm = gemm_function(dtype)
    assert gemm is not None
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 5)).astype(dtype), rng.standard_normal((5, 4)).astype(dtype)
    c = np.ones((3, 4), dtype)
    gemm(101, 111, 111, 3, 4, 5, 2.0, a.ctypes.data, 5, b.ctypes.data, 4, 1.0, c.ctypes.data, 4)
    np.testing.assert_allclose(c, 1 + 2 * a @ b, rtol=1e-5)
    assert gemm_function(np.int32) is None


@pytest.mark.parametrize("budget", [0, 1 << 22])
def test_row_layout_keeps_patch_rows_only_within_its_budget(monkeypatch, budget):
    monkeypatch.setattr(conv_mod, "KEEP_ROWS_BUDGET", budget)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 8, 7, 7))
    w = rng.standard_normal((4, 8, 3, 3))
    b = rng.standard_normal(4)
    attrs = dict(kernel=(3, 3), num_filter=4)
    state = {}
    oh.forward("Convolution", attrs, [x, w, b], state=state)
    assert state["plan"].by_rows and not state["plan"].winograd
    assert ("rows_all" in state) == (budget > 0)
    head = [rng.standard_normal((3, 4, 5, 5))]
    grads = oh.backward("Convolution", attrs, [x, w, b], head)
    dw = np.einsum("nfhw,nchw->fc", head[0], x[:, :, :5, :5])    # the (0, 0) kernel tap
    np.testing.assert_allclose(grads[1][:, :, 0, 0], dw, rtol=1e-10)
