"""kernels/cpu/conv_wgrad.py: the weight and bias gradients of a convolution as a direct
reduction, against a float64 numpy reference for drawn geometries (stride, padding,
dilation, groups), dtypes and gradient requests; the same bits on every call, serial or
threaded; the operator's choice of it; and its generated code kept across processes."""
import json
import os
import subprocess
import sys

import numpy as np
import ophelpers as oh
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmod.kernels import cpu as kcpu
from lightmod.kernels import threads
from lightmod.kernels.cpu import conv_wgrad as kwgrad
from lightmod.operator import conv as conv_mod
from lightmod.operator.conv import geometry3, shape5


def wgrad_ref(x, dy, kernel, stride, pad, dilate, groups):
    """(dw, db) in float64: dw[f, c, ky, kx] = sum of dy[n, f, oy, ox] times the input the
    tap reads, for 2-D x (n, C, H, W) and dy (n, F, OH, OW)."""
    n, c = x.shape[:2]
    f, oh_, ow = dy.shape[1:]
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])])
    dy64 = dy.astype(np.float64)
    cg, fg = c // groups, f // groups
    dw = np.zeros((f, cg) + tuple(kernel))
    for ky in range(kernel[0]):
        for kx in range(kernel[1]):
            y0, x0 = ky * dilate[0], kx * dilate[1]
            patch = xp[:, :, y0:y0 + stride[0] * (oh_ - 1) + 1:stride[0],
                       x0:x0 + stride[1] * (ow - 1) + 1:stride[1]]
            for g in range(groups):
                dw[g * fg:(g + 1) * fg, :, ky, kx] = np.einsum(
                    "nfhw,nchw->fc", dy64[:, g * fg:(g + 1) * fg], patch[:, g * cg:(g + 1) * cg])
    return dw, dy64.sum(axis=(0, 2, 3))


def _out_size(size, kernel, stride, pad, dilate):
    return (size + 2 * pad - dilate * (kernel - 1) - 1) // stride + 1


def _direct(x, dy, dw, db, kernel, stride, pad, dilate, groups, req_w, req_b):
    """conv_wgrad_direct on fresh scratch; returns its answer."""
    x5 = shape5(x.shape)
    g = geometry3(kernel, stride, pad, dilate, dy.shape[2:])
    assert kwgrad.conv_wgrad_fits(x5, g, groups, dy.shape[1])
    blocks, xs_size, dw_size, db_size = kwgrad.conv_wgrad_scratch(x5, g, dy.shape[1])
    scratch = [np.full(xs_size, np.nan, x.dtype)] + [
        np.full((blocks, size), np.nan, x.dtype) for size in (dw_size, db_size)]
    return kwgrad.conv_wgrad_direct(x, dy, dw, db, x5, g, groups, *scratch, req_w, req_b)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 5), groups=st.integers(1, 2), cg=st.integers(1, 3), fg=st.integers(1, 5),
       h=st.integers(1, 9), w=st.integers(1, 11), kh=st.integers(1, 3),
       kw=st.sampled_from([1, 2, 3, 5]), sw=st.integers(1, 3), ph=st.integers(0, 2),
       pw=st.integers(0, 2), dh=st.integers(1, 2), dw_=st.integers(1, 2),
       dtype=st.sampled_from([np.float32, np.float64]),
       req_w=st.sampled_from(["write", "add"]), req_b=st.sampled_from(["write", "add", "null"]),
       seed=st.integers(0, 2 ** 16))
def test_direct_weight_gradient_equals_reference(n, groups, cg, fg, h, w, kh, kw, sw, ph, pw,
                                                 dh, dw_, dtype, req_w, req_b, seed):
    oh_ = _out_size(h, kh, 1, ph, dh)
    ow = _out_size(w, kw, sw, pw, dw_)
    if oh_ < 1 or ow < 1:
        return
    c, f = groups * cg, groups * fg
    rng = np.random.RandomState(seed)
    x = rng.uniform(-1, 1, (n, c, h, w)).astype(dtype)
    dy = rng.uniform(-1, 1, (n, f, oh_, ow)).astype(dtype)
    dw0 = rng.uniform(-1, 1, (f, cg, kh, kw)).astype(dtype)
    db0 = rng.uniform(-1, 1, f).astype(dtype)
    dw, db = dw0.copy(), db0.copy()
    kernel, stride, pad, dilate = (kh, kw), (1, sw), (ph, pw), (dh, dw_)
    assert _direct(x, dy, dw, None if req_b == "null" else db, kernel, stride, pad, dilate,
                   groups, req_w, req_b)
    ref_w, ref_b = wgrad_ref(x, dy, kernel, stride, pad, dilate, groups)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(dw, ref_w + (dw0 if req_w == "add" else 0), **tol)
    if req_b == "null":
        np.testing.assert_array_equal(db, db0)
    else:
        np.testing.assert_allclose(db, ref_b + (db0 if req_b == "add" else 0), **tol)


def test_one_dimensional_data():
    rng = np.random.RandomState(3)
    x = rng.uniform(-1, 1, (3, 2, 40)).astype(np.float32)
    dy = rng.uniform(-1, 1, (3, 4, 17)).astype(np.float32)
    dw = np.zeros((4, 2, 5), np.float32)
    db = np.zeros(4, np.float32)
    assert _direct(x, dy, dw, db, (5,), (2,), (1,), (2,), 1, "write", "write")
    ref_w, ref_b = wgrad_ref(x[:, :, None], dy[:, :, None], (1, 5), (1, 2), (0, 1), (1, 2), 1)
    np.testing.assert_allclose(dw, ref_w[:, :, 0], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(db, ref_b, rtol=1e-4, atol=1e-4)


def test_shapes_it_declines():
    x5 = (2, 3, 1, 10, 10)
    g = geometry3((3, 3), (2, 1), (0, 0), (1, 1), (4, 8))        # vertical stride 2
    assert not kwgrad.conv_wgrad_fits(x5, g, 1, 4)
    g3 = geometry3((2, 3, 3), (1, 1, 1), (0, 0, 0), (1, 1, 1), (3, 8, 8))
    assert not kwgrad.conv_wgrad_fits((2, 3, 4, 10, 10), g3, 1, 4)   # depth
    # a strided view or another dtype: False, nothing written
    x = np.ones((2, 3, 10, 20), np.float32)[:, :, :, ::2]
    dy = np.ones((2, 4, 8, 8), np.float32)
    dw = np.zeros((4, 3, 3, 3), np.float32)
    x5 = shape5(x.shape)
    g = geometry3((3, 3), (1, 1), (0, 0), (1, 1), (8, 8))
    blocks, a, b, c = kwgrad.conv_wgrad_scratch(x5, g, 4)
    scratch = [np.zeros(a, np.float32)] + [np.zeros((blocks, s), np.float32) for s in (b, c)]
    assert not kwgrad.conv_wgrad_direct(x, dy, dw, None, x5, g, 1, *scratch, "write", "null")
    assert not kwgrad.conv_wgrad_direct(np.ascontiguousarray(x).astype(np.int32), dy, dw, None,
                                        x5, g, 1, *scratch, "write", "null")
    assert not dw.any()


def test_same_bits_every_call_serial_or_threaded():
    """The images' blocks are fixed by the batch size, so the serial and the threaded build,
    a repeat and a serial region give the same bits."""
    rng = np.random.RandomState(1)
    x = rng.uniform(-1, 1, (16, 1, 28, 28)).astype(np.float32)
    dy = rng.uniform(-1, 1, (16, 20, 24, 24)).astype(np.float32)
    x5, g = shape5(x.shape), geometry3((5, 5), (1, 1), (0, 0), (1, 1), (24, 24))
    blocks, a, b, c = kwgrad.conv_wgrad_scratch(x5, g, 20)
    assert blocks == 8
    results = []
    mod = kwgrad._module(5, 20)
    for run in (mod.blocks_serial, mod.blocks_parallel):
        dwp, dbp = np.zeros((blocks, b), np.float32), np.zeros((blocks, c), np.float32)
        run(x.reshape(-1), dy.reshape(-1), dwp, dbp, np.zeros((blocks, a // blocks), np.float32),
            (16, 1, 28, 28, 20, 24, 24, 5, 1), (0, 0, 1, 1, 1), True, blocks)
        results.append((dwp, dbp))
    for serial in (False, False, True):
        dw = np.zeros((20, 1, 5, 5), np.float32)
        db = np.zeros(20, np.float32)
        if serial:
            threads.serial_thread()
            try:
                assert _direct(x, dy, dw, db, (5, 5), (1, 1), (0, 0), (1, 1), 1, "write",
                               "write")
            finally:
                threads.leave_serial()
        else:
            assert _direct(x, dy, dw, db, (5, 5), (1, 1), (0, 0), (1, 1), 1, "write", "write")
        results.append((dw, db))
    # the two builds' block partials, then the three calls' gradients
    assert results[1][0].tobytes() == results[0][0].tobytes()
    assert results[1][1].tobytes() == results[0][1].tobytes()
    for dw, db in results[3:]:
        assert dw.tobytes() == results[2][0].tobytes()
        assert db.tobytes() == results[2][1].tobytes()


def _conv_grads(attrs, x, w, b, head, req, monkeypatch, spy):
    calls = []
    if spy:
        real = kwgrad.conv_wgrad_direct
        monkeypatch.setattr(kcpu, "conv_wgrad_direct",
                            lambda *a, **k: calls.append(1) or real(*a, **k))
    inputs = [x, w] if b is None else [x, w, b]
    init = [np.full(a.shape, 0.5, a.dtype) for a in inputs]
    grads = oh.backward("Convolution", attrs, inputs, [head], req=req, init_grads=init)
    return grads, len(calls)


@pytest.mark.parametrize("case", [
    # (data, filters, kernel, pad, stride, groups, no_bias, uses the direct kernel)
    ((4, 1, 28, 28), 20, (5, 5), (0, 0), (1, 1), 1, False, True),      # LeNet conv1
    ((2, 3, 32, 32), 8, (3, 3), (1, 1), (1, 1), 1, True, True),        # a ResNet stem
    ((2, 16, 20, 20), 16, (3, 3), (1, 1), (1, 1), 1, False, True),     # row layout, Winograd
    ((2, 4, 18, 40), 6, (3, 3), (1, 1), (1, 2), 2, False, True),       # groups, stride (1, 2)
    ((4, 20, 12, 12), 50, (5, 5), (0, 0), (1, 1), 1, False, False),    # LeNet conv2: 8x8 out
    ((2, 3, 32, 32), 8, (1, 1), (0, 0), (1, 1), 1, False, False),      # 1x1: a product
    ((2, 3, 33, 33), 8, (3, 3), (1, 1), (2, 2), 1, False, False),      # vertical stride 2
])
@pytest.mark.parametrize("req", [("write", "write", "write"), ("null", "add", "add"),
                                 ("add", "write", "null")])
def test_operator_uses_it_where_the_plan_says(case, req, monkeypatch):
    xshape, f, kernel, pad, stride, groups, no_bias, direct = case
    rng = np.random.RandomState(0)
    x = rng.uniform(-1, 1, xshape).astype(np.float32)
    w = rng.uniform(-1, 1, (f, xshape[1] // groups) + kernel).astype(np.float32)
    b = None if no_bias else rng.uniform(-1, 1, f).astype(np.float32)
    req = req[:2] if no_bias else req
    attrs = dict(kernel=kernel, pad=pad, stride=stride, num_filter=f, num_group=groups,
                 no_bias=no_bias)
    oshape = [(xshape[2 + i] + 2 * pad[i] - kernel[i]) // stride[i] + 1 for i in range(2)]
    head = rng.uniform(-1, 1, (xshape[0], f) + tuple(oshape)).astype(np.float32)
    grads, calls = _conv_grads(attrs, x, w, b, head, list(req), monkeypatch, True)
    assert calls == (1 if direct and req[1] != "null" else 0)
    # the product path (the direct kernel turned off) gives the same gradients
    monkeypatch.setattr(conv_mod, "WGRAD_MIN_POSITIONS", 1 << 30)
    expected, calls = _conv_grads(attrs, x, w, b, head, list(req), monkeypatch, False)
    for got, want in zip(grads, expected):
        if want is None:
            assert got is None
        else:
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    ref_w, ref_b = wgrad_ref(x, head, kernel, stride, pad, (1, 1), groups)
    if req[1] != "null":
        np.testing.assert_allclose(grads[1], ref_w + (0.5 if req[1] == "add" else 0),
                                   rtol=1e-4, atol=1e-4)
    if not no_bias and req[2] != "null":
        np.testing.assert_allclose(grads[2], ref_b + (0.5 if req[2] == "add" else 0),
                                   rtol=1e-4, atol=1e-4)


def test_float16_is_staged_through_float32():
    rng = np.random.RandomState(2)
    x = rng.uniform(-1, 1, (2, 1, 20, 20)).astype(np.float16)
    w = rng.uniform(-1, 1, (4, 1, 3, 3)).astype(np.float16)
    b = np.zeros(4, np.float16)
    head = rng.uniform(-1, 1, (2, 4, 18, 18)).astype(np.float16)
    attrs = dict(kernel=(3, 3), num_filter=4)
    grads = oh.backward("Convolution", attrs, [x, w, b], [head], req=["null", "write", "write"])
    ref_w, ref_b = wgrad_ref(x.astype(np.float32), head.astype(np.float32), (3, 3), (1, 1),
                             (0, 0), (1, 1), 1)
    np.testing.assert_allclose(grads[1], ref_w, rtol=2e-2, atol=5e-2)
    np.testing.assert_allclose(grads[2], ref_b, rtol=2e-2, atol=5e-2)


PROBE = r'''
import json, sys
import numpy as np
from lightmod.kernels.cpu import conv_wgrad as kwgrad
from lightmod.operator.conv import geometry3, shape5
x = np.ones((2, 2, 6, 16), np.float32)
dy = np.ones((2, 3, 4, 5), np.float32)
x5, g = shape5(x.shape), geometry3((3, 12), (1, 1), (0, 0), (1, 1), (4, 5))
blocks, a, b, c = kwgrad.conv_wgrad_scratch(x5, g, 3)
scratch = [np.zeros(a, np.float32)] + [np.zeros((blocks, s), np.float32) for s in (b, c)]
dw = np.zeros((3, 2, 3, 12), np.float32)
assert kwgrad.conv_wgrad_direct(x, dy, dw, None, x5, g, 1, *scratch, "write", "null")
assert dw[0, 0, 0, 0] == 2 * 4 * 5, dw[0, 0, 0, 0]
mod = kwgrad._module(12, 3)
print(json.dumps([len(mod.blocks_serial.stats.cache_misses),
                  len(mod.blocks_serial.stats.cache_hits), mod.__file__]))
'''


def test_generated_code_is_cached_across_processes(tmp_path):
    """The first process compiles the generated module (kernel rows of 12 taps, unused
    elsewhere) under the cache directory; a second one loads it from there."""
    env = dict(os.environ, LIGHTMOD_CACHE_DIR=str(tmp_path), PYTHONSAFEPATH="1")
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                              env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert runs[0][:2] == [1, 0]
    assert runs[1][:2] == [0, 1]
    assert runs[0][2] == runs[1][2] and runs[0][2].startswith(str(tmp_path))


def test_training_forward_keeps_no_patch_rows_for_the_direct_reduction():
    """A row-layout layer whose weight gradient the direct reduction computes: its training
    forward does not keep the whole batch's patch rows (nothing would read them), and the
    gradients stay right."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 8, 18, 18))
    w = rng.standard_normal((4, 8, 3, 3))
    b = rng.standard_normal(4)
    attrs = dict(kernel=(3, 3), num_filter=4)
    state = {}
    oh.forward("Convolution", attrs, [x, w, b], state=state)
    plan = state["plan"]
    assert plan.by_rows and not plan.winograd and plan.osize == 256
    assert "rows_all" not in state
    head = rng.standard_normal((2, 4, 16, 16))
    grads = oh.backward("Convolution", attrs, [x, w, b], [head])
    want_w, want_b = wgrad_ref(x, head, (3, 3), (1, 1), (0, 0), (1, 1), 1)
    np.testing.assert_allclose(grads[1], want_w, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(grads[2], want_b, rtol=1e-10)
