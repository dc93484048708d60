"""mx.gluon.utils against MXNet 1.9.1 (tests/fixtures/make_gluon_utils_golden.py); the rest of
Gluon raises a clear MXNetError."""
import json
import os
import warnings

import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError
from lightmod.gluon import utils

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures",
                       "gluon_utils_golden.json")) as _f:
    GOLDEN = json.load(_f)


@pytest.mark.parametrize("case", GOLDEN["split"], ids=lambda c: "axis%(axis)d-n%(num)d-%(even)s" % c)
def test_split_data_matches_mxnet(case):
    data = mx.nd.array(GOLDEN["data"])
    want = case["result"]
    if isinstance(want, str):
        kind = ValueError if want.startswith("ValueError") else MXNetError
        with pytest.raises(kind) as info:
            utils.split_data(data, case["num"], batch_axis=case["axis"], even_split=case["even"])
        if kind is ValueError:
            assert str(info.value) == want[len("ValueError: "):]
        return
    parts = utils.split_data(data, case["num"], batch_axis=case["axis"], even_split=case["even"])
    assert isinstance(parts, list) and len(parts) == len(want)
    for part, expected in zip(parts, want):
        np.testing.assert_array_equal(part.asnumpy(), np.asarray(expected, np.float32))


def test_split_data_axis0_parts_are_views():
    data = mx.nd.array(np.zeros((4, 2)))
    parts = utils.split_data(data, 2)
    parts[1][:] = 5
    np.testing.assert_array_equal(data.asnumpy()[2:], 5)


def test_split_and_load_matches_mxnet():
    ctxs = [mx.cpu(0), mx.cpu(1), mx.cpu(2)]
    parts = utils.split_and_load(GOLDEN["data"], ctxs, batch_axis=1, even_split=False)
    for part, (values, ctx), want_ctx in zip(parts, GOLDEN["split_and_load"], ctxs):
        np.testing.assert_array_equal(part.asnumpy(), np.asarray(values, np.float32))
        assert str(part.context) == ctx and part.context == want_ctx
    single = utils.split_and_load(mx.nd.ones((3, 2)), [mx.cpu(1)])
    assert len(single) == 1 and single[0].context == mx.cpu(1) and single[0].shape == (3, 2)
    with pytest.raises(MXNetError, match="ctx_list"):
        utils.split_and_load(mx.nd.ones((3, 2)), [])


@pytest.mark.parametrize("i", range(len(GOLDEN["clip"])))
def test_clip_global_norm_matches_mxnet(i):
    case = GOLDEN["clip"][i]
    arrays = [mx.nd.array(a) for a in case["inputs"]]
    norm = utils.clip_global_norm(arrays, case["max_norm"])
    assert type(norm).__name__ == case["norm_type"]
    np.testing.assert_allclose(norm, case["norm"], rtol=1e-6)
    for arr, want in zip(arrays, case["outputs"]):
        np.testing.assert_allclose(arr.asnumpy(), np.asarray(want, np.float32), rtol=1e-5, atol=1e-7)
    arrays = [mx.nd.array(a) for a in case["inputs"]]
    norm_nd = utils.clip_global_norm(arrays, case["max_norm"], check_isfinite=False)
    assert isinstance(norm_nd, mx.nd.NDArray) and list(norm_nd.shape) == case["norm_nd_shape"]
    np.testing.assert_allclose(norm_nd.asnumpy(), case["norm_nd"], rtol=1e-6)
    # numpy reference: the joint norm, and the scale min(1, max_norm / norm)
    flat = np.concatenate([np.ravel(a) for a in case["inputs"]])
    np.testing.assert_allclose(norm, np.linalg.norm(flat), rtol=1e-6)


def test_clip_global_norm_warns_on_inf():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        norm = utils.clip_global_norm([mx.nd.array([np.inf, 1.0])], 1.0)
    assert str(norm) == GOLDEN["inf_norm"]
    assert [str(w.message) for w in caught] == GOLDEN["inf_warning"]
    with pytest.raises(MXNetError, match="non-empty"):
        utils.clip_global_norm([], 1.0)


def test_rest_of_gluon_is_refused_clearly():
    assert mx.gluon.utils is utils
    with pytest.raises(MXNetError, match="mx.gluon.nn is not supported.*Module API"):
        mx.gluon.nn
    with pytest.raises(MXNetError, match="mx.gluon.Trainer is not supported"):
        from lightmod.gluon import Trainer  # noqa: F401
    assert not hasattr(mx.gluon, "__wrapped__")
