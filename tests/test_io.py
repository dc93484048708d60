"""mx.io: DataDesc, DataBatch, DataIter, NDArrayIter, ResizeIter, PrefetchingIter, CSVIter.

Covers the NDArrayIter parts of MXNet's test_io.py plus golden batches MXNet 1.9.1 produced
(tests/fixtures/make_init_metric_golden.py).
"""
import json
import os
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lightmod as mx
from lightmod.io import CSVIter, DataBatch, DataDesc, DataIter, NDArrayIter, PrefetchingIter, ResizeIter

GOLDEN = json.load(open(os.path.join(os.path.dirname(__file__), "fixtures",
                                     "init_metric_golden.json")))


def _record(it, epochs, hard_reset_after=None):
    """The same record make_init_metric_golden.py writes for an iterator."""
    rec = {"provide_data": [[d.name, list(d.shape), np.dtype(d.dtype).name, d.layout]
                            for d in it.provide_data],
           "provide_label": [[d.name, list(d.shape), np.dtype(d.dtype).name, d.layout]
                             for d in it.provide_label],
           "epochs": []}
    for ep in range(epochs):
        batches = []
        for batch in it:
            batches.append({"data": [d.asnumpy().tolist() for d in batch.data],
                            "label": ([l.asnumpy().tolist() for l in batch.label]
                                      if batch.label else batch.label),
                            "pad": batch.pad})
        rec["epochs"].append(batches)
        if hard_reset_after is not None and ep == hard_reset_after:
            it.hard_reset()
        else:
            it.reset()
    return rec


# ---------------------------------------------------------------------------------------------
# DataDesc / DataBatch / DataIter
# ---------------------------------------------------------------------------------------------
def test_datadesc_is_a_namedtuple_with_dtype_and_layout():
    d = DataDesc("data", (2, 3))
    name, shape = d
    assert (name, shape) == ("data", (2, 3))
    assert d.dtype is np.float32 and d.layout == "NCHW"
    assert repr(d) == "DataDesc[data,(2, 3),<class 'numpy.float32'>,NCHW]"
    d2 = DataDesc("x", (4, 5), "int32", "NTC")
    assert d2.dtype == "int32" and d2.layout == "NTC" and d2[1] == (4, 5)
    assert DataDesc.get_batch_axis(None) == 0
    assert DataDesc.get_batch_axis("NCHW") == 0
    assert DataDesc.get_batch_axis("TNC") == 1
    assert DataDesc.get_batch_axis("C") == -1
    descs = DataDesc.get_list([("a", (1, 2)), ("b", (3,))], [("a", np.int32), ("b", np.float16)])
    assert [(x.name, x.shape, x.dtype) for x in descs] == [("a", (1, 2), np.int32),
                                                           ("b", (3,), np.float16)]
    assert [x.dtype for x in DataDesc.get_list([("a", (1,))], None)] == [np.float32]


def test_databatch_str_and_checks():
    batch = DataBatch(data=[mx.nd.ones((2, 3))])
    assert str(batch) == "DataBatch: data shapes: [(2, 3)] label shapes: None"
    batch = DataBatch([mx.nd.ones((2, 3))], [mx.nd.ones((2,))], pad=1, index=np.arange(2),
                      bucket_key=5, provide_data=[DataDesc("data", (2, 3))])
    assert str(batch) == "DataBatch: data shapes: [(2, 3)] label shapes: [(2,)]"
    assert batch.pad == 1 and batch.bucket_key == 5 and batch.provide_data[0].name == "data"
    with pytest.raises(AssertionError, match="Data must be list"):
        DataBatch(mx.nd.ones((2, 3)))
    with pytest.raises(AssertionError, match="Label must be list"):
        DataBatch([mx.nd.ones((2, 3))], mx.nd.ones((2,)))


class _CountIter(DataIter):
    """A user iterator written against the base-class protocol."""

    def __init__(self, n):
        super().__init__(batch_size=2)
        self.n, self.i = n, 0

    def reset(self):
        self.i = 0

    def iter_next(self):
        self.i += 1
        return self.i <= self.n

    def getdata(self):
        return [mx.nd.ones((2, 1)) * self.i]

    def getlabel(self):
        return [mx.nd.zeros((2,))]

    def getpad(self):
        return 0


def test_dataiter_protocol():
    it = _CountIter(3)
    assert iter(it) is it
    values = [b.data[0].asnumpy()[0, 0] for b in it]
    assert values == [1, 2, 3]
    with pytest.raises(StopIteration):
        it.next()
    it.reset()
    b = next(it)
    assert b.index is None and b.pad == 0 and b.label[0].shape == (2,)
    base = DataIter()
    assert base.batch_size == 0
    with pytest.raises(StopIteration):
        base.next()


# ---------------------------------------------------------------------------------------------
# NDArrayIter — MXNet's test_io behaviours
# ---------------------------------------------------------------------------------------------
def _thousand():
    data = np.ones([1000, 2, 2])
    label = np.ones([1000, 1])
    for i in range(1000):
        data[i] = i / 100
        label[i] = i / 100
    return data, label


@pytest.mark.parametrize("as_nd", [False, True])
def test_ndarrayiter_pad_discard_roll_over(as_nd):
    data, label = _thousand()
    if as_nd:
        data, label = mx.nd.array(data), mx.nd.array(label)
    it = NDArrayIter(data, label, 128, True, last_batch_handle="pad")
    assert sum(1 for _ in it) == 8
    it = NDArrayIter(data, label, 128, False, last_batch_handle="pad")
    counts = np.zeros(10, int)
    for batch in it:
        lab = batch.label[0].asnumpy().ravel()
        assert (batch.data[0].asnumpy()[:, 0, 0] == lab).all()
        np.add.at(counts, lab.astype(int), 1)
    assert counts[0] == 124 and (counts[1:] == 100).all()
    last_pad_batch = batch
    assert last_pad_batch.pad == 24
    it = NDArrayIter(data, label, 128, False, last_batch_handle="discard")
    assert sum(1 for _ in it) == 7
    it = NDArrayIter(data, label, 128, False, last_batch_handle="roll_over")
    assert sum(1 for _ in it) == 7
    it.reset()
    first = it.next()
    # the 104 left-over samples followed by the first 24: the same as the last 'pad' batch
    np.testing.assert_array_equal(first.data[0].asnumpy(), last_pad_batch.data[0].asnumpy())
    np.testing.assert_array_equal(first.label[0].asnumpy(), last_pad_batch.label[0].asnumpy())
    assert first.pad == 104


def test_ndarrayiter_input_forms_and_names():
    data = np.arange(40.).reshape(10, 4)
    label = np.arange(10.)
    it = NDArrayIter(data, label, 5)
    assert [d.name for d in it.provide_data] == ["data"]
    assert [d.name for d in it.provide_label] == ["softmax_label"]
    it = NDArrayIter([data], [label], 5, data_name="x", label_name="y")
    assert [d.name for d in it.provide_data] == ["x"]
    assert [d.name for d in it.provide_label] == ["y"]
    it = NDArrayIter([data, data * 2, data * 3], [label, label], 5)
    assert [d.name for d in it.provide_data] == ["_0_data", "_1_data", "_2_data"]
    assert [d.name for d in it.provide_label] == ["_0_softmax_label", "_1_softmax_label"]
    it = NDArrayIter({"z": data, "a": data + 1, "m": data + 2}, {"lb": label}, 5)
    assert [d.name for d in it.provide_data] == ["a", "m", "z"]
    b = it.next()
    np.testing.assert_array_equal(b.data[0].asnumpy(), (data + 1)[:5])
    np.testing.assert_array_equal(b.data[2].asnumpy(), data[:5])
    for lab in (None, []):
        it = NDArrayIter(data, lab, 5)
        assert it.provide_label == []
        b = it.next()
        assert not b.label
    with pytest.raises(TypeError):
        NDArrayIter(5, None, 2)
    with pytest.raises(AssertionError):
        NDArrayIter(None, None, 2)


def test_ndarrayiter_dtypes_and_descs():
    it = NDArrayIter(np.zeros((6, 3, 2), np.float64), np.zeros(6, np.int64), 4)
    pd, pl = it.provide_data[0], it.provide_label[0]
    assert (pd.shape, pd.dtype, pd.layout) == ((4, 3, 2), np.float32, "NCHW")
    assert (pl.shape, pl.dtype) == ((4,), np.float32)
    b = it.next()
    assert b.data[0].dtype == np.float32 and b.label[0].dtype == np.float32
    # NDArrays keep their dtype (until a shuffle, which goes through nd.array as in MXNet)
    it = NDArrayIter(mx.nd.zeros((6, 2), dtype="float64"), mx.nd.zeros((6,), dtype="int32"), 4)
    assert it.provide_data[0].dtype == np.float64 and it.provide_label[0].dtype == np.int32
    assert it.next().data[0].dtype == np.float64
    it = NDArrayIter(mx.nd.zeros((6, 2), dtype="float64"), None, 4, shuffle=True)
    assert it.provide_data[0].dtype == np.float32
    # layout: the batch axis is the position of N
    it = NDArrayIter(np.arange(24.).reshape(2, 12), None, 5, layout="TN",
                     last_batch_handle="discard")
    golden = GOLDEN["ndarrayiter"]["layout_TN_provide"]
    assert [[d.name, list(d.shape), d.layout] for d in it.provide_data] == golden
    batches = [b.data[0].asnumpy() for b in it]
    assert len(batches) == 2 and batches[0].shape == (2, 5)
    np.testing.assert_array_equal(batches[1], np.arange(24.).reshape(2, 12)[:, 5:10])


def test_ndarrayiter_batches_are_copies():
    data = np.arange(12.).reshape(6, 2).astype(np.float32)
    src = mx.nd.array(data)
    it = NDArrayIter(src, None, 3)
    b = it.next()
    b.data[0][:] = -1
    np.testing.assert_array_equal(src.asnumpy(), data)


def test_ndarrayiter_pad_tiles_a_small_data_set():
    data = np.arange(10.)
    it = NDArrayIter(data, data, 205, last_batch_handle="pad")
    batches = list(it)
    assert len(batches) == 1 and batches[0].pad == 195
    expected = np.concatenate([np.tile(data, 20), data[:5]])
    np.testing.assert_array_equal(batches[0].data[0].asnumpy(), expected)
    np.testing.assert_array_equal(batches[0].label[0].asnumpy(), expected)


def test_ndarrayiter_shuffle_idx_is_the_permutation():
    data = np.arange(50.).reshape(25, 2)
    label = np.arange(25.)
    np.random.seed(3)
    it = NDArrayIter(data, label, 5, shuffle=True, last_batch_handle="discard")
    idx = it.idx.copy()
    assert sorted(idx.tolist()) == list(range(25)) and idx.tolist() != list(range(25))
    got = np.concatenate([b.data[0].asnumpy() for b in it])
    np.testing.assert_array_equal(got, data[idx])
    it.reset()
    got2 = np.concatenate([b.label[0].asnumpy() for b in it])
    assert sorted(got2.tolist()) == list(range(25))
    assert got2.tolist() != label[idx].tolist()  # reshuffled at reset


@pytest.mark.parametrize("key", sorted(k for k in GOLDEN["ndarrayiter"]
                                       if k[:3] in ("pad", "dis", "rol")))
def test_ndarrayiter_golden_last_batch_handles(key):
    data = np.arange(20, dtype=np.float64).reshape(10, 2)
    label = np.arange(10, dtype=np.float64)
    handle, _, rest = key.rpartition("_")
    if key == "roll_over_hard_reset":
        it = NDArrayIter(data, label, 4, last_batch_handle="roll_over")
        assert _record(it, 3, hard_reset_after=0) == GOLDEN["ndarrayiter"][key]
        return
    it = NDArrayIter(data, label, int(rest), last_batch_handle=handle)
    assert _record(it, 3) == GOLDEN["ndarrayiter"][key]


def test_ndarrayiter_golden_input_forms():
    data = np.arange(20, dtype=np.float64).reshape(10, 2)
    label = np.arange(10, dtype=np.float64)
    g = GOLDEN["ndarrayiter"]
    assert _record(NDArrayIter({"b": data, "a": data * 10}, {"y": label}, 4), 1) == \
        g["dict_inputs"]
    assert _record(NDArrayIter([data, data + 100], [label, label * 2], 4,
                               last_batch_handle="discard"), 1) == g["list_inputs"]
    assert _record(NDArrayIter(data, [], 5), 1) == g["empty_label"]
    assert _record(NDArrayIter(data, None, 5), 1) == g["no_label"]


@pytest.mark.parametrize("handle", ["pad", "discard", "roll_over"])
def test_ndarrayiter_golden_shuffle_matches_mxnet_under_numpy_seed(handle):
    data = np.arange(20, dtype=np.float64).reshape(10, 2)
    label = np.arange(10, dtype=np.float64)
    g = GOLDEN["ndarrayiter"]["shuffle_seed11"][handle]
    np.random.seed(11)
    it = NDArrayIter(data, label, 4, shuffle=True, last_batch_handle=handle)
    assert it.idx.tolist() == g["idx0"]
    assert _record(it, 2) == g["record"]
    assert it.idx.tolist() == g["idx_final"]


def test_ndarrayiter_errors():
    with pytest.raises(ValueError, match="last_batch_handle"):
        NDArrayIter(np.zeros((4, 2)), None, 2, last_batch_handle="wrap")
    with pytest.raises(mx.MXNetError, match="'softmax_label' has 3 samples on axis 0, "
                                             "expected 4 like 'data'"):
        NDArrayIter(np.zeros((4, 2)), np.zeros(3), 2)
    it = NDArrayIter(np.zeros((4, 2)), None, 2)
    list(it)
    it.cursor = 10
    with pytest.raises(mx.MXNetError, match="needs reset"):
        it.getdata()


@pytest.mark.parametrize("handle", ["pad", "discard", "roll_over"])
@pytest.mark.parametrize("shuffle", [False, True])
def test_ndarrayiter_longer_labels_use_their_first_samples(handle, shuffle):
    """As MXNet's iterator (whose own loss tests rely on it): a label with more samples than
    the data is read for the data's samples only (here with a warning naming it)."""
    data = np.arange(20, dtype=np.float32).reshape(10, 2)
    label = np.arange(20, dtype=np.float32) * 10
    np.random.seed(5)
    with pytest.warns(UserWarning, match="'w' has 20 samples on axis 0; only the first 10"):
        longer = NDArrayIter(data, {"label": label, "w": label + 1}, 4, shuffle=shuffle,
                             last_batch_handle=handle)
    np.random.seed(5)
    exact = NDArrayIter(data, {"label": label[:10], "w": label[:10] + 1}, 4, shuffle=shuffle,
                        last_batch_handle=handle)
    assert longer.provide_label == exact.provide_label
    got = [(b.data[0].asnumpy(), [x.asnumpy() for x in b.label], b.pad) for b in longer]
    want = [(b.data[0].asnumpy(), [x.asnumpy() for x in b.label], b.pad) for b in exact]
    assert len(got) == len(want) > 0
    for (d1, l1, p1), (d2, l2, p2) in zip(got, want):
        np.testing.assert_array_equal(d1, d2)
        np.testing.assert_array_equal(l1[0], l2[0])
        np.testing.assert_array_equal(l1[1], l2[1])
        assert p1 == p2
        # each label row belongs to its data row: label = 10 * (first data column / 2)
        np.testing.assert_array_equal(l1[0], d1[:, 0] * 5)


def test_ndarrayiter_csr_only_with_discard():
    dense = np.zeros((7, 5), np.float32)
    dense[np.arange(7), np.arange(7) % 5] = np.arange(1, 8)
    csr = mx.nd.array(dense).tostype("csr")
    with pytest.raises(NotImplementedError, match="discard"):
        NDArrayIter({"data": csr}, dense, 3, last_batch_handle="pad")
    with pytest.raises(NotImplementedError):
        NDArrayIter(dense, csr, 3, last_batch_handle="roll_over")
    it = NDArrayIter(csr, csr, 3, last_batch_handle="discard")
    batches = list(it)
    assert len(batches) == 2
    for k, b in enumerate(batches):
        assert b.data[0].stype == "csr"
        np.testing.assert_array_equal(b.data[0].asnumpy(), dense[3 * k:3 * k + 3])
    it = NDArrayIter({"csr_data": csr, "dns_data": dense}, dense, 2, shuffle=True,
                     last_batch_handle="discard")
    n = 0
    for b in it:
        n += 1
        np.testing.assert_array_equal(b.data[0].asnumpy(), b.data[1].asnumpy())
        assert b.data[0].stype == "csr"
    assert n == 3


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 23), bs=st.integers(1, 9),
       handle=st.sampled_from(["pad", "discard", "roll_over"]))
def test_ndarrayiter_property_every_sample_once_per_epoch(n, bs, handle):
    data = np.arange(n, dtype=np.float32)
    it = NDArrayIter(data, None, bs, last_batch_handle=handle)
    seen = []
    for ep in range(3):
        batches = list(it)
        for b in batches:
            assert b.data[0].shape == (bs,)
            seen.append((ep, b.data[0].asnumpy(), b.pad))
        if handle == "pad":
            assert len(batches) == -(-n // bs)
            flat = np.concatenate([b.data[0].asnumpy() for b in batches])
            np.testing.assert_array_equal(flat, np.arange(len(batches) * bs) % n)
            assert batches[-1].pad == len(batches) * bs - n
        elif handle == "discard":
            assert len(batches) == n // bs
            flat = np.concatenate([b.data[0].asnumpy() for b in batches] or [np.zeros(0)])
            np.testing.assert_array_equal(flat, np.arange(len(flat)))
        it.reset()
    if handle == "roll_over":
        # over the epochs the stream is the data repeated, nothing lost or duplicated
        flat = np.concatenate([s[1] for s in seen] or [np.zeros(0)])
        np.testing.assert_array_equal(flat, np.arange(len(flat)) % n)


# ---------------------------------------------------------------------------------------------
# ResizeIter / PrefetchingIter
# ---------------------------------------------------------------------------------------------
def test_resize_iter():
    base = NDArrayIter(np.arange(12.).reshape(6, 2), np.arange(6.), 2)
    it = ResizeIter(base, 5)
    assert it.batch_size == 2 and it.provide_data == base.provide_data
    firsts = [b.data[0].asnumpy()[0, 0] for b in it]
    assert firsts == [0, 4, 8, 0, 4]
    it.reset()
    assert [b.label[0].asnumpy()[0] for b in it] == [0, 2, 4, 0, 2]
    it = ResizeIter(NDArrayIter(np.arange(12.).reshape(6, 2), None, 2), 2,
                    reset_internal=False)
    assert [b.data[0].asnumpy()[0, 0] for b in it] == [0, 4]
    it.reset()
    assert [b.data[0].asnumpy()[0, 0] for b in it] == [8, 0]


def test_prefetching_iter_single_and_renamed():
    data = np.arange(40.).reshape(10, 4)
    it = PrefetchingIter(NDArrayIter(data, np.arange(10.), 4))
    assert it.batch_size == 4
    for _ in range(2):
        batches = list(it)
        assert [b.pad for b in batches] == [0, 0, 2]
        np.testing.assert_array_equal(batches[1].data[0].asnumpy(), data[4:8])
        assert batches[0].provide_data[0].name == "data"
        it.reset()
    it1 = NDArrayIter({"data": data}, {"softmax_label": np.arange(10.)}, 5)
    it2 = NDArrayIter({"data": data * 2}, None, 5, layout="NC")
    it = PrefetchingIter([it1, it2], rename_data=[{"data": "d1"}, {"data": "d2"}])
    assert [(d.name, d.shape) for d in it.provide_data] == [("d1", (5, 4)), ("d2", (5, 4))]
    assert it.provide_data[1].layout == "NC"
    assert [d.name for d in it.provide_label] == ["softmax_label"]
    batches = list(it)
    assert len(batches) == 2
    np.testing.assert_array_equal(batches[1].data[1].asnumpy(), data[5:] * 2)
    assert len(batches[1].label) == 1
    assert it.getpad() == 0 and it.getdata() is batches[1].data


def test_prefetching_iter_errors_reach_the_caller_and_threads_stop():
    class Broken(DataIter):
        provide_data = [DataDesc("data", (2, 2))]
        provide_label = []

        def next(self):
            raise RuntimeError("disk on fire")

    it = PrefetchingIter(Broken())
    with pytest.raises(RuntimeError, match="disk on fire"):
        it.next()
    threads = [w.thread for w in it._workers]
    del it
    import gc
    gc.collect()
    for t in threads:
        t.join(timeout=5)
        assert not t.is_alive()
    a = NDArrayIter(np.zeros((6, 2)), None, 2)
    b = NDArrayIter(np.zeros((4, 2)), None, 2)
    it = PrefetchingIter([a, b])
    it.next()
    it.next()
    with pytest.raises(mx.MXNetError, match="different numbers"):
        it.next()


# ---------------------------------------------------------------------------------------------
# CSVIter
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def csv_files(tmp_path):
    data_path = tmp_path / "data.csv"
    label_path = tmp_path / "label.csv"
    label2_path = tmp_path / "label2.csv"
    data_path.write_text("\n".join("%d,%d,%d" % (i + 1, i + 2, i + 3) for i in range(5)) + "\n")
    label_path.write_text("\n".join(str(i + 1) for i in range(5)) + "\n")
    label2_path.write_text("\n".join("%d,%d" % (2 * i + 1, 2 * i + 2) for i in range(5)) + "\n")
    return str(data_path), str(label_path), str(label2_path)


def test_csviter_golden(csv_files):
    data_path, label_path, label2_path = csv_files
    cases = [("b3_round", dict(batch_size=3, round_batch=True, label_csv=label_path)),
             ("b3_noround", dict(batch_size=3, round_batch=False, label_csv=label_path)),
             ("b2_round", dict(batch_size=2, round_batch=True)),
             ("b2_label2", dict(batch_size=2, label_csv=label2_path, label_shape=(2,))),
             ("b5_int32", dict(batch_size=5, dtype="int32", label_csv=label_path)),
             ("b7_noround_epoch0", dict(batch_size=7, round_batch=False))]
    for name, kw in cases:
        it = CSVIter(data_csv=data_path, data_shape=(3,), **kw)
        rec = {"provide_data": [[d.name, list(d.shape), np.dtype(d.dtype).name]
                                for d in it.provide_data],
               "provide_label": [[d.name, list(d.shape), np.dtype(d.dtype).name]
                                 for d in it.provide_label],
               "epochs": []}
        for _ in range(1 if name == "b7_noround_epoch0" else 4):
            batches = []
            for batch in it:
                batches.append({"data": batch.data[0].asnumpy().tolist(),
                                "label": batch.label[0].asnumpy().tolist(),
                                "pad": batch.pad, "index": batch.index.tolist()})
            rec["epochs"].append(batches)
            it.reset()
        want = GOLDEN["csviter"][name]
        if name == "b7_noround_epoch0":
            # MXNet's filler rows of a first short batch are uninitialised memory: compare the
            # real rows only (lightmod's filler rows are zeros)
            for got_b, want_b in zip(rec["epochs"][0], want["epochs"][0]):
                real = 7 - want_b["pad"]
                assert got_b["pad"] == want_b["pad"] and got_b["index"] == want_b["index"]
                assert got_b["data"][:real] == want_b["data"][:real]
                assert got_b["label"][:real] == want_b["label"][:real]
                assert np.count_nonzero(got_b["data"][real:]) == 0
            assert rec["provide_data"] == want["provide_data"]
            continue
        assert rec == want, name
    it = CSVIter(data_csv=data_path, data_shape=(1, 3), batch_size=2)
    assert [list(d.shape) for d in it.provide_data] == GOLDEN["csviter"]["shape_1x3_provide"]


def test_csviter_directory_getters_and_errors(tmp_path, csv_files):
    data_path = csv_files[0]
    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "a.csv").write_text("1,2\n3,4\n")
    (folder / "b.csv").write_text("5,6\n")
    it = CSVIter(data_csv=str(folder), data_shape=(2,), batch_size=3)
    assert it.batch_size == 3
    assert it.iter_next()
    np.testing.assert_array_equal(it.getdata().asnumpy(), [[1, 2], [3, 4], [5, 6]])
    np.testing.assert_array_equal(it.getlabel().asnumpy(), [0, 0, 0])
    assert it.getpad() == 0 and it.getindex().tolist() == [0, 1, 2]
    assert not it.iter_next()
    with pytest.raises(mx.MXNetError, match="row-length=3"):
        CSVIter(data_csv=data_path, data_shape=(4,), batch_size=2)
    with pytest.raises(mx.MXNetError, match="does not exist"):
        CSVIter(data_csv=str(tmp_path / "missing.csv"), data_shape=(3,), batch_size=2)
    with pytest.raises(mx.MXNetError, match="batch_size"):
        CSVIter(data_csv=data_path, data_shape=(3,))
    with pytest.raises(mx.MXNetError, match="rows"):
        CSVIter(data_csv=data_path, data_shape=(3,), label_csv=str(folder / "b.csv"),
                label_shape=(2,), batch_size=2)


# ---------------------------------------------------------------------------------------------
# module-level names
# ---------------------------------------------------------------------------------------------
def test_io_namespace():
    for name in ("DataDesc", "DataBatch", "DataIter", "NDArrayIter", "ResizeIter",
                 "PrefetchingIter", "CSVIter"):
        assert getattr(mx.io, name) is getattr(mx.io.io, name)
    d = pickle.loads(pickle.dumps(DataDesc("a", (1, 2), np.int32, "NC")))
    assert tuple(d) == ("a", (1, 2)) and d.dtype is np.int32 and d.layout == "NC"


def test_ndarrayiter_roll_over_batch_reads_the_same_twice_and_needs_iter_next():
    """lightmod's departures from MXNet's cursor bookkeeping: the carried batch can be read
    again (MXNet's second getdata() returned the carried labels), ``cursor`` is the first
    fresh sample (MXNet's was negative there), and no batch exists before iter_next()."""
    data = np.arange(20, dtype=np.float32).reshape(10, 2)
    label = np.arange(10, dtype=np.float32) + 100
    it = NDArrayIter(data, label, 4, last_batch_handle="roll_over")
    with pytest.raises(mx.MXNetError, match="iter_next"):
        it.getdata()
    assert it.getpad() == 0
    assert len(list(it)) == 2          # samples 8 and 9 wait for the next epoch
    it.reset()
    assert it.iter_next() and it.cursor == 0 and it.getpad() == 2
    first = it.getdata()[0].asnumpy()
    np.testing.assert_array_equal(first, data[[8, 9, 0, 1]])
    np.testing.assert_array_equal(it.getdata()[0].asnumpy(), first)
    np.testing.assert_array_equal(it.getlabel()[0].asnumpy(), label[[8, 9, 0, 1]])
    assert it.iter_next() and it.cursor == 2 and it.getpad() == 0
    np.testing.assert_array_equal(it.getdata()[0].asnumpy(), data[2:6])
    it.hard_reset()
    assert [b.pad for b in it] == [0, 0]
