"""Edge cases MXNet 1.9.1's own operator tests (tests/python/unittest/test_operator.py) check,
with the values MXNet gives."""
import numpy as np
import pytest

import lightmod as mx


@pytest.mark.parametrize("mode", ["training", "always"])
def test_dropout_with_p_one_is_nan_like_mxnet(mode):
    # MXNet scales the kept elements by 1 / (1 - p): with p = 1 that is 0 * inf = nan for
    # every element, forward and backward (test_dropout, check_dropout_ratio(1.0, ...))
    x = mx.sym.var("data")
    exe = mx.sym.Dropout(x, p=1.0, mode=mode).simple_bind(mx.cpu(), data=(4, 5))
    exe.arg_dict["data"][:] = 1
    exe.forward(is_train=True)
    assert np.isnan(exe.outputs[0].asnumpy()).all()
    exe.backward([mx.nd.ones((4, 5))])
    assert np.isnan(exe.grad_dict["data"].asnumpy()).all()
    exe.forward(is_train=False)
    out = exe.outputs[0].asnumpy()
    if mode == "always":
        assert np.isnan(out).all()
    else:
        np.testing.assert_array_equal(out, np.ones((4, 5)))   # inference: identity


def test_dropout_below_one_still_scales_the_kept():
    mx.random.seed(0)
    out = mx.nd.Dropout(mx.nd.ones((200, 50)), p=0.75, mode="always").asnumpy()
    assert set(np.unique(out)) <= {0.0, 4.0}
    assert 0.2 < (out > 0).mean() < 0.3
    with pytest.raises(mx.MXNetError, match="p must be in"):
        mx.nd.Dropout(mx.nd.ones((2,)), p=1.5)
