"""GPU NDArrays (run under NUMBA_ENABLE_CUDASIM=1): creation, host/device copies, views,
indexing, arithmetic through the CUDA kernels, save/load of GPU records."""
import os

import numpy as np
import pytest

import lightmod as mx

if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") in ("", "0") and mx.num_gpus() == 0:
    pytest.skip("needs a GPU or NUMBA_ENABLE_CUDASIM=1", allow_module_level=True)

G = mx.gpu(0)


def test_creation_on_gpu():
    for arr, value in [(mx.nd.zeros((2, 3), ctx=G), 0), (mx.nd.ones(4, ctx=G, dtype="int32"), 1),
                       (mx.nd.full((2,), 2.5, ctx=G), 2.5)]:
        assert arr.context == G
        assert not isinstance(arr._data, np.ndarray)
        assert (arr.asnumpy() == value).all()
    a = mx.nd.array([[1, 2], [3, 4]], ctx=G)
    assert a.dtype == np.float32 and a.asnumpy().tolist() == [[1, 2], [3, 4]]
    assert mx.nd.arange(3, ctx=G).asnumpy().tolist() == [0, 1, 2]
    assert mx.nd.empty((2, 2), ctx=G).shape == (2, 2)


def test_transfers_and_copies():
    host = mx.nd.array(np.arange(6).reshape(2, 3))
    dev = host.as_in_context(G)
    assert dev.context == G and dev.asnumpy().tolist() == host.asnumpy().tolist()
    assert dev.as_in_context(G) is dev
    back = dev.copyto(mx.cpu())
    assert isinstance(back._data, np.ndarray)
    dev2 = dev.copy()
    dev2[:] = 0
    assert dev.asnumpy().sum() == 15
    target = mx.nd.zeros((2, 3), ctx=G, dtype="int32")
    host.copyto(target)
    assert target.asnumpy().tolist() == [[0, 1, 2], [3, 4, 5]]
    assert dev.astype("float64").dtype == np.float64
    assert dev.astype("int32").asnumpy().tolist() == [[0, 1, 2], [3, 4, 5]]
    mx.nd.waitall()
    dev.wait_to_read()


def test_views_and_indexing():
    a = mx.nd.array(np.arange(12).reshape(3, 4), ctx=G)
    row = a[1]
    row[:] = -1                                  # first-axis views share memory
    assert a.asnumpy()[1].tolist() == [-1] * 4
    r = a.reshape((2, 6))
    r[0, 0] = 100
    assert a.asnumpy()[0, 0] == 100
    assert a[:, 1].asnumpy().tolist() == [1, -1, 9]
    col = a[:, 1]
    col[:] = 7                                   # non-contiguous: a copy
    assert a.asnumpy()[0, 1] == 1
    a[:, 2] = 5                                  # non-contiguous assignment
    assert a.asnumpy()[:, 2].tolist() == [5, 5, 5]
    a[2] = mx.nd.array([1, 2, 3, 4])             # host NDArray into a device row
    a[0:1] = mx.nd.array([[9, 9, 9, 9]], ctx=G)
    assert a.asnumpy()[2].tolist() == [1, 2, 3, 4] and a.asnumpy()[0].tolist() == [9] * 4
    assert a[mx.nd.array([2, 0])].asnumpy()[:, 0].tolist() == [1, 9]
    assert a[1, 3].shape == (1,)


def test_arithmetic_on_gpu():
    x = np.array([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]], dtype=np.float32)
    a, b = mx.nd.array(x, ctx=G), mx.nd.array([1.0, 2.0, 4.0], ctx=G)
    for res, ref in [(a + b, x + [1, 2, 4]), (a * 2, x * 2), (1 - a, 1 - x), (a / b, x / [1, 2, 4]),
                     (a > 0, (x > 0).astype(np.float32)), (-a, -x), (abs(a), np.abs(x)),
                     (mx.nd.relu(a), np.maximum(x, 0)), (a ** 2, x ** 2)]:
        assert res.context == G
        np.testing.assert_allclose(res.asnumpy(), ref, rtol=1e-6)
    a += b
    np.testing.assert_allclose(a.asnumpy(), x + [1, 2, 4])
    with pytest.raises(mx.MXNetError, match="different contexts"):
        mx.nd.array(x, ctx=G) + mx.nd.array(x)


def test_sparse_on_gpu():
    d = mx.nd.array([[0, 1], [0, 0], [2, 0]], ctx=G)
    c = d.tostype("csr")
    assert c.stype == "csr" and c.context == G
    assert c.indptr.asnumpy().tolist() == [0, 1, 1, 2]


def test_save_load_gpu_records(tmp_path):
    a = mx.nd.array([[1, 2], [3, 4]], ctx=G)
    path = str(tmp_path / "g.params")
    mx.nd.save(path, {"a": a})
    raw = open(path, "rb").read()
    assert raw[24 + 8 + 4 + 16:24 + 8 + 4 + 24] == b"\x02\x00\x00\x00\x00\x00\x00\x00"
    back = mx.nd.load(path)["a"]
    assert back.context == G                         # CUDA usable: back on the GPU
    assert back.asnumpy().tolist() == [[1, 2], [3, 4]]
    cpu_copy = a.copyto(mx.cpu())
    mx.nd.save(str(tmp_path / "c.params"), [cpu_copy])
    # the same bytes apart from the context
    other = open(str(tmp_path / "c.params"), "rb").read()
    assert len(other) == len(raw) - len(b"a") - 8


def test_random_on_gpu():
    mx.random.seed(5)
    u = mx.nd.random.uniform(shape=(2, 2), ctx=G)
    mx.random.seed(5)
    v = mx.nd.random.uniform(shape=(2, 2))
    assert u.context == G
    np.testing.assert_array_equal(u.asnumpy(), v.asnumpy())


def test_float16_to_integer_truncates_toward_zero(monkeypatch):
    # numba-cuda's own half -> integer conversion rounds to nearest (cvt.rni): the copy must never
    # hand the kernel a float16 source with an integer destination, and must truncate like numpy
    from lightmod.kernels.cuda import memory
    launched = []
    gather = memory._gather_kernel

    class Recording:
        def __getitem__(self, config):
            def launch(src, out, shape, strides):
                launched.append((np.dtype(src.dtype), np.dtype(out.dtype)))
                return gather[config](src, out, shape, strides)
            return launch

    monkeypatch.setattr(memory, "_gather_kernel", Recording())
    host = np.array([[-1.75, -0.5, 0.5], [0.0, 1.5, 2.75]], dtype=np.float16)
    x = mx.nd.array(host, ctx=G, dtype="float16")
    for dtype in ("int32", "int8", "uint8", "int64"):
        got = x.astype(dtype).asnumpy()
        keep = host >= 0 if dtype == "uint8" else np.ones(host.shape, bool)   # negatives wrap
        np.testing.assert_array_equal(got[keep], host[keep].astype(dtype), err_msg=dtype)
        assert got.dtype == np.dtype(dtype)
    assert launched and all(not (s == np.float16 and d.kind in "biu") for s, d in launched)
    assert mx.nd.Cast(x, dtype="int32").asnumpy().tolist() == [[-1, 0, 0], [0, 1, 2]]
