"""kernels/cpu/conv_direct.py: the direct data gradient of few-channel convolutions against a
float64 numpy reference on drawn geometries, its bits against the thread split, the
Convolution plan choosing it, and its generated kernels cached on disk for the next
process."""
import json
import os
import subprocess
import sys

import numpy as np
import ophelpers as oh
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_op_conv import conv_ref

from lightmod.kernels import cpu as kcpu
from lightmod.kernels.cpu import conv_direct as cd
from lightmod.operator.conv import geometry3, shape5

# a handful of geometries (each compiles its own kernels once, then loads them from disk)
_geometries = st.sampled_from([
    # (C, KH, KW, dilate, pad)
    (3, 3, 3, 1, 1), (2, 5, 5, 1, 0), (2, 2, 3, 2, 2), (4, 1, 1, 1, 0), (3, 3, 2, 1, 4),
])


def _case(n, c, f, h, w, kh, kw, dil, pad, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    wt = rng.standard_normal((f, c, kh, kw)).astype(dtype)
    out_sp = [size + 2 * pad - dil * (k - 1) for size, k in ((h, kh), (w, kw))]
    g = geometry3((kh, kw), (1, 1), (pad, pad), (dil, dil), out_sp)
    return rng, x, wt, g, out_sp


def _data_grad_ref(dy, w, x_shape, pad, dil):
    """The data gradient of conv_ref at stride 1, in float64."""
    n, c, h, wd = x_shape
    kh, kw = w.shape[2:]
    oh_, ow = dy.shape[2:]
    dxp = np.zeros((n, c, h + 2 * pad, wd + 2 * pad))
    for a in range(kh):
        for b in range(kw):
            dxp[:, :, a * dil:a * dil + oh_, b * dil:b * dil + ow] += np.einsum(
                "nfij,fc->ncij", dy.astype(np.float64), w[:, :, a, b].astype(np.float64))
    return dxp[:, :, pad:pad + h, pad:pad + wd]


def _tol(dtype):
    return dict(rtol=2e-5, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)


@settings(max_examples=20, deadline=None)
@given(geo=_geometries, n=st.integers(1, 3), f=st.integers(1, 9), extra=st.integers(0, 4),
       dtype=st.sampled_from([np.float32, np.float64]), add=st.booleans(),
       seed=st.integers(0, 2 ** 16))
def test_data_gradient_matches_reference(geo, n, f, extra, dtype, add, seed):
    c, kh, kw, dil, pad = geo
    # image sizes from the smallest the kernel fits into up to a few more (each size is one
    # compiled kernel, so a few per geometry)
    h = max(1, dil * (kh - 1) + 1 - 2 * pad) + extra
    w_ = max(1, dil * (kw - 1) + 1 - 2 * pad) + 2
    rng, x, wt, g, out_sp = _case(n, c, f, h, w_, kh, kw, dil, pad, dtype, seed)
    dy = rng.standard_normal((n, f) + tuple(out_sp)).astype(dtype)
    start = rng.standard_normal(x.shape).astype(dtype)
    dx = start.copy()
    assert cd.direct_conv_backward_data(dy, wt, dx, shape5(x.shape), g, add, {})
    ref = _data_grad_ref(dy, wt, x.shape, pad, dil) + (start if add else 0)
    np.testing.assert_allclose(dx, ref, **_tol(dtype))


def test_bits_do_not_depend_on_the_thread_split(monkeypatch):
    rng, x, wt, g, out_sp = _case(7, 3, 5, 9, 11, 3, 3, 1, 1, np.float32, 3)
    dy = rng.standard_normal((7, 5) + tuple(out_sp)).astype(np.float32)
    results = []
    for parts in (1, 2, 3):
        monkeypatch.setattr(cd, "task_count", lambda work, items, p=parts: p)
        out = np.empty_like(x)
        cd.direct_conv_backward_data(dy, wt, out, shape5(x.shape), g, work={})
        results.append(out)
    for other in results[1:]:
        np.testing.assert_array_equal(results[0], other)


def test_declines_what_it_does_not_take():
    _, x, wt, g, out_sp = _case(2, 3, 4, 6, 6, 3, 3, 1, 1, np.float32, 0)
    x5 = shape5(x.shape)
    assert cd.direct_conv_fits(x5, g, 1, np.float32)
    assert not cd.direct_conv_fits(x5, g, 3, np.float32)                 # grouped
    assert not cd.direct_conv_fits(x5, g, 1, np.float16)
    strided = geometry3((3, 3), (2, 2), (1, 1), (1, 1), (3, 3))
    assert not cd.direct_conv_fits(x5, strided, 1, np.float32)
    assert not cd.direct_conv_fits((2, 8, 1, 6, 6), g, 1, np.float32)    # many channels
    assert not cd.direct_conv_fits((2, 1, 1, 6, 6), g, 1, np.float32)    # one channel
    assert not cd.direct_conv_fits((2, 3, 4, 6, 6), geometry3((2, 3, 3), (1, 1, 1), (0, 1, 1),
                                                             (1, 1, 1), (3, 6, 6)), 1,
                                   np.float32)                          # 3-D
    dy = np.zeros((2, 4) + tuple(out_sp), np.float32)
    assert not cd.direct_conv_backward_data(dy, wt.astype(np.float64), np.empty_like(x), x5, g)
    assert not cd.direct_conv_backward_data(dy, wt, np.asfortranarray(x), x5, g)


@pytest.mark.parametrize("channels, stride, direct", [(1, 1, False), (3, 1, True),
                                                     (3, 2, False)])
def test_convolution_plan_chooses_direct_data_gradient(monkeypatch, channels, stride, direct):
    """Convolution of a 2-4 channel image at stride 1 computes its data gradient with the
    direct kernels, and the other gradients as before; the results are the reference's."""
    used = []
    real = cd.direct_conv_backward_data
    monkeypatch.setattr(kcpu, "direct_conv_backward_data",
                        lambda *a, **k: used.append(1) or real(*a, **k))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, channels, 10, 9)).astype(np.float32)
    w = rng.standard_normal((6, channels, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    attrs = dict(kernel=(3, 3), num_filter=6, pad=(1, 1), stride=(stride, stride))
    ref = conv_ref(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
                   (stride, stride), (1, 1), (1, 1), 1)
    head = rng.standard_normal(ref.shape).astype(np.float32)
    for req in (["write", "null", "null"], ["add", "write", "write"]):
        init = [np.full(a.shape, 0.5, a.dtype) for a in (x, w, b)]
        dx, dw, db = oh.backward("Convolution", attrs, [x, w, b], [head], req=req,
                                 init_grads=init)
        assert len(used) == (1 if direct else 0)
        used.clear()
        if stride == 1:
            dx_ref = _data_grad_ref(head, w, x.shape, 1, 1) + (0.5 if req[0] == "add" else 0)
            np.testing.assert_allclose(dx, dx_ref, rtol=1e-4, atol=1e-4)
        if req[2] == "write":
            np.testing.assert_allclose(db, head.astype(np.float64).sum(axis=(0, 2, 3)),
                                       rtol=1e-4, atol=1e-4)
            assert dw.shape == w.shape
        else:
            assert dw is None and db is None


_CHILD = r"""
import json
import numpy as np
from lightmod.kernels.cpu import conv_direct as cd
from lightmod.operator.conv import geometry3, shape5
w = np.ones((3, 2, 2, 2), np.float32)
g = geometry3((2, 2), (1, 1), (1, 1), (1, 1), (8, 6))
dy = np.ones((2, 3, 8, 6), np.float32)
dx = np.empty((2, 2, 7, 5), np.float32)
cd.direct_conv_backward_data(dy, w, dx, shape5(dx.shape), g)
mod = cd._module(2, 2, 2, 1, 1, 7, 5)
misses = sum(sum(f.stats.cache_misses.values()) for f in (getattr(mod, n) for n in dir(mod))
             if hasattr(f, "stats"))
print(json.dumps({"misses": misses, "sum": float(dx.sum())}))
"""


def test_generated_kernels_compile_once_across_processes(tmp_path):
    env = dict(os.environ, LIGHTMOD_CACHE_DIR=str(tmp_path))
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                             text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert runs[0]["misses"] > 0
    assert runs[1]["misses"] == 0
    assert runs[0]["sum"] == runs[1]["sum"]
