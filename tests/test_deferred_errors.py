"""Where an operator's failure is reported (lightmod/engine.py), and mx.engine's bulk scope.

An operator that fails while computing (here: samplers given parameters outside their law)
returns normally; the failure is raised by the first read of its result or of anything
computed from it, or by ``waitall``, once; later operations work. Errors found from the
arguments alone are still raised by the call.
"""
import numpy as np
import pytest

import lightmod as mx
from lightmod import engine
from lightmod.base import MXNetError


@pytest.fixture(autouse=True)
def no_failure_left_over():
    mx.nd.waitall()
    yield
    mx.nd.waitall()


def _failed(shape=(2, 2)):
    return mx.nd.random.normal(0, -1, shape=shape)


@pytest.mark.parametrize("read", [
    lambda a: a.asnumpy(), lambda a: a.wait_to_read(), lambda a: a.asscalar(),
    lambda a: mx.nd.waitall(), lambda a: float(a), lambda a: repr(a)])
def test_a_failure_is_raised_by_the_first_read_only(read):
    a = _failed((1,))
    with pytest.raises(MXNetError, match="scale"):
        read(a)
    read(a)                                      # reported once: the next read is quiet
    assert not engine.any_uncleared()


def test_consumers_carry_the_failure_without_raising():
    a = _failed()
    results = [mx.nd.dot(a, a), a + 1, a.copyto(mx.cpu()), a.copy(), a.astype("float64"),
               a.reshape((4,)), a[1], a[0:1], mx.nd.relu(a), a.T]
    for r in results:
        assert r._error is a._error
    with pytest.raises(MXNetError):
        results[0].asnumpy()
    # one failure: reading any of them reported it for all
    for r in results + [a]:
        r.asnumpy()


def test_views_share_the_failure_and_the_rest_still_works():
    first, second = _failed().copyto(mx.cpu())
    with pytest.raises(MXNetError):
        first.asnumpy()
    second.asnumpy()                             # the same failure, already reported
    ok = mx.nd.ones((2,)) * 3
    np.testing.assert_array_equal(ok.asnumpy(), [3, 3])


def test_in_place_updates_and_copies_into_existing_arrays_carry_it():
    a = _failed()
    b = mx.nd.zeros((2, 2))
    b += a
    c = mx.nd.zeros((2, 2))
    a.copyto(c)
    d = mx.nd.zeros((2, 2))
    d[:] = a
    assert b._error is a._error and c._error is a._error and d._error is a._error
    with pytest.raises(MXNetError):
        d.wait_to_read()
    b.asnumpy()


def test_waitall_reports_the_oldest_failure_once():
    _failed()
    mx.nd.random.uniform(3, 1, shape=(1,))
    with pytest.raises(MXNetError, match="_random_normal"):
        mx.nd.waitall()
    mx.nd.waitall()
    _failed()
    with pytest.raises(MXNetError):
        mx.nd.waitall()


def test_argument_errors_are_still_raised_by_the_call():
    with pytest.raises(MXNetError, match="shape"):
        mx.nd.dot(mx.nd.ones((2, 3)), mx.nd.ones((2, 3)))
    with pytest.raises(MXNetError, match="unknown attribute"):
        mx.nd.Activation(mx.nd.ones((2,)), act_type="relu", bogus=1)
    assert not engine.any_uncleared()


def _graph():
    x = mx.sym.var("x")
    sigma = mx.sym.var("sigma")
    noisy = mx.sym.dot(x, mx.sym.random.normal(mx.sym.zeros((2,)), sigma, shape=(2,)))
    clean = x * 2
    return mx.sym.Group([mx.sym.make_loss(mx.sym.sum(noisy)), clean])


def test_executor_outputs_that_depend_on_a_failed_node_carry_it():
    sigma = mx.nd.array([1.0, -1.0])
    grad = mx.nd.zeros((2, 2))
    exe = _graph().bind(mx.cpu(), {"x": mx.nd.ones((2, 2)), "sigma": sigma},
                        args_grad={"x": grad, "sigma": mx.nd.zeros((2,))})
    loss, clean = exe.forward(is_train=True)            # does not raise
    np.testing.assert_array_equal(clean.asnumpy(), 2 * np.ones((2, 2)))   # independent of it
    exe.backward([mx.nd.ones((1,)), mx.nd.ones((2, 2))])                # does not raise
    with pytest.raises(MXNetError, match="_sample_normal"):
        grad.asnumpy()
    loss.asnumpy()                                       # the same failure, reported
    # a valid parameter: the next forward recomputes everything and nothing is left failed
    sigma[:] = mx.nd.array([1.0, 0.5])
    loss, clean = exe.forward(is_train=True)
    exe.backward([mx.nd.ones((1,)), mx.nd.ones((2, 2))])
    assert np.isfinite(loss.asnumpy()).all() and np.isfinite(grad.asnumpy()).all()


def test_executor_reported_by_waitall_and_fed_failed_arguments():
    exe = _graph().bind(mx.cpu(), {"x": mx.nd.ones((2, 2)), "sigma": mx.nd.array([-1.0, 1])})
    exe.forward()
    with pytest.raises(MXNetError):
        mx.nd.waitall()
    # an argument that holds a failure: every output computed from it holds it too
    bad_x = _failed().copyto(mx.cpu())
    exe2 = _graph().bind(mx.cpu(), {"x": bad_x, "sigma": mx.nd.ones((2,))})
    loss, clean = exe2.forward()
    assert loss._error is bad_x._error and clean._error is bad_x._error
    with pytest.raises(MXNetError):
        clean.asnumpy()


def test_bulk_scope_sets_and_restores_the_size():
    before = mx.engine.set_bulk_size(4)
    assert mx.engine.set_bulk_size(before) == 4
    with mx.engine.bulk(10):
        assert mx.engine.set_bulk_size(10) == 10
        x = mx.nd.ones((3,))
        x += 1
    assert mx.engine.set_bulk_size(before) == before
    np.testing.assert_array_equal(x.asnumpy(), [2, 2, 2])
    with pytest.raises(TypeError):
        mx.engine.set_bulk_size(2.5)


def test_a_failure_inside_the_inference_plan_is_reported_where_the_output_is_read():
    """forward(is_train=False) runs the inference plan; a sampler failing inside it still
    returns, and the first read of the output raises, as in the plain walk."""
    data = mx.sym.Variable("data")
    noise = mx.sym.random.normal(loc=0, scale=-1, shape=(4, 3))
    net = mx.sym.Activation(mx.sym.FullyConnected(data + noise, num_hidden=2, name="fc"),
                            act_type="relu")
    exe = net.simple_bind(mx.cpu(), data=(4, 3), grad_req="null")
    for arr in exe.arg_dict.values():
        arr[:] = 0.5
    out = exe.forward(is_train=False)[0]
    with pytest.raises(MXNetError, match="scale"):
        out.asnumpy()
    clean = mx.sym.Activation(mx.sym.FullyConnected(data, num_hidden=2, name="fc"),
                              act_type="relu").simple_bind(mx.cpu(), data=(4, 3), grad_req="null")
    for arr in clean.arg_dict.values():
        arr[:] = 0.5
    np.testing.assert_allclose(clean.forward(is_train=False)[0].asnumpy(), np.full((4, 2), 1.25))


def test_take_out_of_range_in_raise_mode_is_reported_at_the_read():
    # MXNet 1.9.1 (test_operator.py::test_take): the forward call returns, reading the output
    # raises
    data, idx = mx.sym.Variable("a"), mx.sym.Variable("indices")
    exe = mx.sym.take(data, mx.sym.BlockGrad(idx), mode="raise").simple_bind(
        mx.cpu(), a=(3, 2), indices=(2,))
    exe.arg_dict["indices"][:] = mx.nd.array([3, -6])
    exe.forward(is_train=True)
    with pytest.raises(MXNetError, match="out of bound"):
        exe.outputs[0].asnumpy()
    exe.arg_dict["a"][:] = np.arange(6.0).reshape(3, 2)
    exe.arg_dict["indices"][:] = mx.nd.array([2, 0])
    exe.forward(is_train=True)
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), [[4, 5], [0, 1]])
    late = mx.nd.take(mx.nd.ones((3,)), mx.nd.array([5.0]), mode="raise")
    with pytest.raises(MXNetError, match="out of bound"):
        late.asnumpy()
    np.testing.assert_array_equal(
        mx.nd.take(mx.nd.arange(3), mx.nd.array([2.0, 0.0]), mode="raise").asnumpy(), [2, 0])
