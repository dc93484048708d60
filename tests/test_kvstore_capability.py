"""A kvstore without the 'optimizer' capability refuses the optimizer calls."""
import pytest

import lightmod as mx


def test_teststore_refuses_optimizer_methods_with_not_implemented_error():
    kv = mx.kv.create("teststore")
    assert kv.is_capable("optimizer") is False
    with pytest.raises(NotImplementedError, match="optimizer"):
        kv.set_optimizer(mx.optimizer.create("sgd"))
    with pytest.raises(NotImplementedError, match="save"):
        kv.save_optimizer_states("unused")
    with pytest.raises(NotImplementedError, match="load"):
        kv.load_optimizer_states("unused")
    with pytest.raises(ValueError, match="capability"):
        kv.is_capable("teleport")
