"""What a monitor with ``monitor_all`` sees, in order, and mx.operator.get_operator_arguments."""
import ctypes

import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError


def _names(sym):
    seen = []
    ex = sym.simple_bind(ctx=mx.cpu(), grad_req="null")
    ex.set_monitor_callback(lambda name, arr: seen.append(name), monitor_all=True)
    ex.forward()
    return seen


@pytest.mark.parametrize("make, expected", [
    (lambda d: mx.sym.Convolution(d, kernel=(2, 2), num_filter=1, name="conv"),
     ["data", "conv_data", "conv_weight", "conv_weight", "conv_bias", "conv_bias",
      "conv_output"]),
    (lambda d: mx.sym.FullyConnected(d, num_hidden=4, no_bias=True, name="fc"),
     ["data", "fc_data", "fc_weight", "fc_weight", "fc_output"]),
    # MXNet names the inputs of these operators by position
    (lambda d: mx.sym.Activation(d, act_type="relu", name="act"),
     ["data", "act_input0", "act_output"]),
    (lambda d: mx.sym.SoftmaxActivation(d, name="sa"), ["data", "sa_input0", "sa_output"]),
    (lambda d: mx.sym.concat(d, d, dim=0, name="cc"),
     ["data", "cc_arg0", "data", "cc_arg1", "cc_output"]),
    # an input made by another operator has no variable name to report first
    (lambda d: mx.sym.relu(mx.sym.sigmoid(d, name="sig"), name="r"),
     ["data", "sig_data", "sig_output", "r_data", "r_output"]),
])
def test_monitor_all_reports_variables_then_operator_inputs(make, expected):
    data = mx.sym.var("data", shape=(2, 3, 4, 4))
    assert _names(make(data)) == expected


def test_monitor_callback_arrays_work_through_ctypes_handles():
    data = mx.sym.var("data", shape=(1, 2, 3, 3))
    net = mx.sym.Convolution(data, kernel=(1, 1), num_filter=1, name="conv")
    mins = {}

    def callback(name, arr):
        # the MXNet idiom: a raw handle turned back into an NDArray
        arr = mx.nd.NDArray(ctypes.cast(arr, mx.base.NDArrayHandle), writable=False)
        mins[name] = mx.nd.min(arr).asscalar()

    ex = net.simple_bind(mx.cpu(), grad_req="null")
    ex.arg_dict["data"][:] = np.arange(18).reshape(1, 2, 3, 3)
    ex.arg_dict["conv_weight"][:] = 1.0
    ex.arg_dict["conv_bias"][:] = 0.5
    ex.set_monitor_callback(callback, monitor_all=True)
    ex.forward()
    assert mins == {"data": 0.0, "conv_data": 0.0, "conv_weight": 1.0, "conv_bias": 0.5,
                    "conv_output": 9.5}


def test_get_operator_arguments():
    args = mx.operator.get_operator_arguments("Activation")
    assert isinstance(args, mx.operator.OperatorArguments)
    assert args.narg == 2 and args.names == ["data", "act_type"]
    assert args.types == ["NDArray-or-Symbol",
                          "{'relu', 'sigmoid', 'softrelu', 'softsign', 'tanh'}, required"]
    fc = mx.operator.get_operator_arguments("FullyConnected")
    types = dict(zip(fc.names, fc.types))
    assert fc.names[:3] == ["data", "weight", "bias"]
    assert types["num_hidden"] == "int, required"
    assert types["no_bias"] == "boolean, optional, default=0"
    assert types["flatten"] == "boolean, optional, default=1"
    concat = mx.operator.get_operator_arguments("concat")     # an alias
    assert concat.names[0] == "data" and concat.types[0] == "NDArray-or-Symbol[]"
    pool = dict(zip(*mx.operator.get_operator_arguments("Pooling")[1:]))
    assert pool["pool_type"] == "{'avg', 'lp', 'max', 'sum'},optional, default='max'"
    assert pool["kernel"] == "Shape(tuple), optional, default=[]"
    with pytest.raises(MXNetError, match="no_such_op"):
        mx.operator.get_operator_arguments("no_such_op")
