"""Bad input at the public entry points: each case gives a clear error (the exception type and
a message naming the argument, what was expected and what came) or, where MXNet 1.9.1 defines
a result, that result.

One table, ``CASES``: (case id, call, expected exception type, regex its message must match).
The CLI cases check one line on stderr and exit status 2. NaN/inf through the activations are
compared with MXNet's outputs (``fixtures/special_values_golden.json``).
"""
import json
import os

import numpy as np
import pytest

import lightmod as mx
from lightmod import cli
from lightmod.base import MXNetError, NotBoundError

HERE = os.path.dirname(os.path.abspath(__file__))
DIGITS = os.path.join(os.path.dirname(HERE), "examples", "data", "mxnet-digits")


def _net():
    net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=3, name="fc")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def _bound():
    mod = mx.mod.Module(_net())
    mod.bind([("data", (2, 4))], [("softmax_label", (2,))])
    return mod


def _ready(**optimizer_params):
    mod = _bound()
    mod.init_params()
    mod.init_optimizer(optimizer_params=optimizer_params or (("learning_rate", 0.1),))
    return mod


def _iter(n=4, batch_size=2, value=0.0):
    return mx.io.NDArrayIter(np.full((n, 4), value, np.float32), np.zeros(n), batch_size)


class _EmptyIter(mx.io.DataIter):
    def __init__(self):
        super().__init__(2)
        self.provide_data = [mx.io.DataDesc("data", (2, 4))]
        self.provide_label = [mx.io.DataDesc("softmax_label", (2,))]

    def next(self):
        raise StopIteration

    def reset(self):
        pass


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def _batch(data, label=None):
    return mx.io.DataBatch([data], [label if label is not None else mx.nd.zeros(2)])


MISSING = "/nonexistent-folder/sub"

CASES = [
    # --- Module lifecycle ---------------------------------------------------------------------
    ("Module symbol None", lambda t: mx.mod.Module(None), TypeError,
     r"Module: symbol must be a Symbol.*got NoneType"),
    ("Module context str", lambda t: mx.mod.Module(_net(), context="cpu"), TypeError,
     r"Module: context must be a Context.*got 'cpu'"),
    ("bind shape str", lambda t: mx.mod.Module(_net()).bind([("data", "2,4")]), TypeError,
     r"data_shapes: the shape of 'data' must be a tuple of ints, got str"),
    ("bind wrong input name", lambda t: mx.mod.Module(_net()).bind([("dta", (2, 4))]),
     ValueError, r"don't match names specified by data_names.*dta.*'data'"),
    ("bind negative dim", lambda t: mx.mod.Module(_net()).bind([("data", (2, -4))]),
     MXNetError, r"data: \(2, -4\)"),
    ("init_params before bind", lambda t: mx.mod.Module(_net()).init_params(), NotBoundError,
     r"call bind\(\) before init_params\(\)"),
    ("forward before bind",
     lambda t: mx.mod.Module(_net()).forward(_batch(mx.nd.ones((2, 4)))), NotBoundError,
     r"call bind\(\) before forward\(\)"),
    ("update before init_optimizer", lambda t: (lambda m: (m.init_params(), m.update()))(_bound()),
     NotBoundError, r"call init_optimizer\(\) before update\(\)"),
    ("set_params wrong shape",
     lambda t: _ready().set_params({"fc_weight": mx.nd.ones((5, 4)), "fc_bias": mx.nd.ones(3)},
                                   {}),
     MXNetError, r"parameter 'fc_weight' has shape \(5, 4\).*'fc_weight' has shape \(3, 4\)"),
    ("set_params missing parameter", lambda t: _ready().set_params({"fc_weight": mx.nd.ones((3, 4))},
                                                                   {}),
     RuntimeError, r"fc_bias is not presented"),
    ("forward numpy data", lambda t: _ready().forward(_batch(np.ones((2, 4)), mx.nd.zeros(2))),
     TypeError, r"forward: DataBatch data and label must be NDArrays.*got numpy.ndarray"),
    ("forward data not a list",
     lambda t: _ready().forward(mx.io.DataBatch(mx.nd.ones((2, 4)), [mx.nd.zeros(2)])),
     AssertionError, r"Data must be list of NDArrays \(got NDArray\)"),
    ("forward wrong feature count", lambda t: _ready().forward(_batch(mx.nd.ones((2, 5)))),
     MXNetError, r"arg:fc_weight changed"),
    # --- fit / score / predict ----------------------------------------------------------------
    ("fit empty iterator", lambda t: _bound().fit(_EmptyIter(), num_epoch=1), MXNetError,
     r"fit: train_data yielded no batch"),
    ("fit numpy train_data", lambda t: _bound().fit(np.zeros((4, 4)), num_epoch=1), TypeError,
     r"fit: train_data must be a DataIter.*got numpy.ndarray"),
    ("fit num_epoch str", lambda t: _bound().fit(_iter(), num_epoch="2"), TypeError,
     r"fit: num_epoch must be an int, got str '2'"),
    ("fit num_epoch missing", lambda t: _bound().fit(_iter()), ValueError,
     r"specify number of epochs"),
    ("fit learning_rate str",
     lambda t: _bound().fit(_iter(), num_epoch=1, optimizer_params={"learning_rate": "0.1"}),
     TypeError, r"SGD: learning_rate must be a number, got str '0.1'"),
    ("score numpy eval_data", lambda t: _ready().score(np.zeros((4, 4)), "acc"), AttributeError,
     r"reset"),
    ("score unknown metric", lambda t: _ready().score(_iter(), "nosuchmetric"), AssertionError,
     r"nosuchmetric is not registered"),
    # --- iterators ----------------------------------------------------------------------------
    ("NDArrayIter batch_size 0", lambda t: _iter(batch_size=0), ValueError,
     r"NDArrayIter: batch_size must be positive, got 0"),
    ("NDArrayIter batch_size str", lambda t: _iter(batch_size="2"), TypeError,
     r"NDArrayIter: batch_size must be an int, got str '2'"),
    ("NDArrayIter label count",
     lambda t: mx.io.NDArrayIter(np.zeros((4, 4)), np.zeros(3), batch_size=2), MXNetError,
     r"'softmax_label' has 3 samples on axis 0, expected 4"),
    ("NDArrayIter str data", lambda t: mx.io.NDArrayIter("abc", batch_size=2), TypeError,
     r"Input must be NDArray.*got str"),
    ("NDArrayIter bad last_batch_handle",
     lambda t: mx.io.NDArrayIter(np.zeros((4, 4)), batch_size=2, last_batch_handle="drop"),
     ValueError, r"last_batch_handle must be one of.*'drop'"),
    # --- checkpoints and files ----------------------------------------------------------------
    ("load_checkpoint missing", lambda t: mx.model.load_checkpoint(MISSING + "/x", 1), MXNetError,
     r"no checkpoint for epoch 1 of prefix .*x-0001.params does not exist"),
    ("Module.load missing epoch", lambda t: mx.mod.Module.load(MISSING + "/x", 3), MXNetError,
     r"no checkpoint for epoch 3"),
    ("Module.load without states",
     lambda t: (_ready().save_checkpoint(str(t / "m"), 1),
                mx.mod.Module.load(str(t / "m"), 1, load_optimizer_states=True)),
     MXNetError, r"has no optimizer states.*m-0001.states does not exist"),
    ("save_checkpoint missing folder", lambda t: _ready().save_checkpoint(MISSING + "/x", 1),
     MXNetError, r"save_checkpoint: the folder of prefix '/nonexistent-folder/sub/x' does not"),
    ("save_checkpoint epoch str", lambda t: _ready().save_checkpoint(str(t / "m"), "1"),
     TypeError, r"epoch must be an int, got str '1'"),
    ("save_params missing folder", lambda t: _ready().save_params(MISSING + "/x.params"),
     FileNotFoundError, r"cannot write /nonexistent-folder/sub/x.params: folder"),
    ("nd.save missing folder", lambda t: mx.nd.save(MISSING + "/a.nd", {"a": mx.nd.ones(1)}),
     FileNotFoundError, r"cannot write /nonexistent-folder/sub/a.nd"),
    ("nd.load missing", lambda t: mx.nd.load(MISSING + "/a.params"), MXNetError,
     r"nd.load: cannot open /nonexistent-folder/sub/a.params"),
    ("nd.load folder", lambda t: mx.nd.load(str(t)), MXNetError, r"nd.load: cannot open"),
    ("nd.load garbage", lambda t: mx.nd.load(_write(str(t / "g.params"), b"garbage!" * 4)),
     MXNetError, r"Invalid NDArray file format"),
    ("nd.load empty file", lambda t: mx.nd.load(_write(str(t / "e.params"), b"")), MXNetError,
     r"Invalid NDArray file format"),
    ("sym.load missing", lambda t: mx.sym.load(MISSING + "/s.json"), FileNotFoundError,
     r"/nonexistent-folder/sub/s.json"),
    ("load_optimizer_states missing", lambda t: _ready().load_optimizer_states(MISSING + "/s"),
     FileNotFoundError, r"/nonexistent-folder/sub/s"),
    ("load_optimizer_states garbage",
     lambda t: _ready().load_optimizer_states(_write(str(t / "g.states"), b"garbage")),
     MXNetError, r"cannot read the optimizer states \(corrupt or not a states pickle\)"),
    ("load_optimizer_states of another net",
     lambda t: (lambda a, f: (a.save_optimizer_states(f), _train_step(_ready(), 5)
                              .load_optimizer_states(f)))(_train_step(_ready(momentum=0.9), 3),
                                                          str(t / "a.states")),
     MXNetError, r"parameter 'fc_(weight|bias)'.*shape \(3.*shape \(5"),
    # --- optimizers ---------------------------------------------------------------------------
    ("optimizer unknown", lambda t: mx.optimizer.create("nosuch"), ValueError,
     r"Cannot find optimizer nosuch"),
    ("learning_rate str", lambda t: mx.optimizer.create("sgd", learning_rate="0.1"), TypeError,
     r"SGD: learning_rate must be a number, got str '0.1'"),
    ("learning_rate NaN", lambda t: mx.optimizer.SGD(learning_rate=float("nan")), MXNetError,
     r"SGD: learning_rate must be finite, got nan"),
    ("wd None", lambda t: mx.optimizer.create("adam", wd=None), TypeError,
     r"Adam: wd must be a number, got None"),
    ("rescale_grad inf", lambda t: mx.optimizer.create("sgd", rescale_grad=float("inf")),
     MXNetError, r"rescale_grad must be finite, got inf"),
    ("momentum str at init_optimizer", lambda t: _ready(momentum="0.9"), TypeError,
     r"SGD: momentum must be a number, got str '0.9'"),
    ("beta1 list", lambda t: mx.optimizer.get_updater(mx.optimizer.create("adam", beta1=[0.9])),
     TypeError, r"Adam: beta1 must be a number, got list \[0.9\]"),
    # --- nd / sym creation --------------------------------------------------------------------
    ("nd.array ragged", lambda t: mx.nd.array([[1, 2], [3]]), TypeError,
     r"source_array must be array like object.*got list"),
    ("nd.array str", lambda t: mx.nd.array("abc"), TypeError, r"array like object.*got str"),
    ("nd.zeros negative", lambda t: mx.nd.zeros((-1, 2)), MXNetError,
     r"shape \(-1, 2\) has a negative dimension"),
    ("nd.ones shape str", lambda t: mx.nd.ones("2,3"), MXNetError,
     r"expected a shape \(int or tuple of int\), got '2,3'"),
    ("nd.full shape float", lambda t: mx.nd.full((2.5, 3), 1.0), MXNetError,
     r"expected a shape.*\(2.5, 3\)"),
    ("nd.zeros dtype", lambda t: mx.nd.zeros((2,), dtype="float7"), MXNetError,
     r"unknown dtype 'float7'"),
    ("nd add shapes", lambda t: mx.nd.ones((2, 3)) + mx.nd.ones((4, 5)), MXNetError,
     r"broadcast_add.*lhs \(2, 3\), rhs \(4, 5\)"),
    ("sym.Variable shape str", lambda t: mx.sym.Variable("x", shape="2,3"), TypeError,
     r"Variable 'x': shape must be a tuple of ints, got '2,3'"),
    ("sym.FullyConnected no num_hidden", lambda t: mx.sym.FullyConnected(mx.sym.Variable("d")),
     MXNetError, r"required attribute 'num_hidden' \(int\) is missing"),
    ("sym.FullyConnected num_hidden str",
     lambda t: mx.sym.FullyConnected(mx.sym.Variable("d"), num_hidden="x"), MXNetError,
     r"invalid value 'x' for attribute 'num_hidden': expected an integer"),
    ("sym.Activation act_type", lambda t: mx.sym.Activation(mx.sym.Variable("d"), act_type="no"),
     MXNetError, r"invalid value 'no' for attribute 'act_type': expected one of"),
]


def _train_step(mod, num_hidden):
    """A module of ``num_hidden`` outputs that ran one update (so its optimizer has states)."""
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.Variable("data"),
                                                     num_hidden=num_hidden, name="fc"),
                               name="softmax")
    fresh = mx.mod.Module(net)
    fresh.bind([("data", (2, 4))], [("softmax_label", (2,))])
    fresh.init_params()
    fresh.init_optimizer(optimizer_params={"momentum": 0.9})
    fresh.forward_backward(_batch(mx.nd.ones((2, 4))))
    fresh.update()
    return fresh


@pytest.mark.parametrize("case, call, error, message", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gives_a_clear_error(tmp_path, case, call, error, message):
    with pytest.raises(error, match=message):
        call(tmp_path)


# ---------------------------------------------------------------------------------------------
# where MXNet defines a result
# ---------------------------------------------------------------------------------------------
def _golden():
    with open(os.path.join(HERE, "fixtures", "special_values_golden.json")) as f:
        golden = json.load(f)
    as_float = lambda values: np.array([float(v) for v in values], np.float32)  # noqa: E731
    return as_float(golden["input"]), {k: as_float(v) for k, v in golden["cases"].items()}


def _run_case(name, x):
    if name.startswith("Activation:"):
        return mx.nd.Activation(x, act_type=name.split(":")[1])
    if name == "relu":
        return mx.nd.relu(x)
    if name == "LeakyReLU:leaky":
        return mx.nd.LeakyReLU(x, act_type="leaky")
    return mx.nd.maximum(x, 0)


@pytest.mark.parametrize("size", [6, 300_000])     # serial and parallel kernels
def test_nan_and_inf_through_activations_as_mxnet(size):
    inputs, cases = _golden()
    x = np.resize(inputs, size)
    for name, expected in cases.items():
        got = _run_case(name, mx.nd.array(x)).asnumpy()
        np.testing.assert_allclose(got, np.resize(expected, size), rtol=1e-6, equal_nan=True,
                                   err_msg=name)


def test_empty_iterators_in_score_and_predict_follow_mxnet():
    # MXNet: score over no batch gives the metric of no sample (nan), predict gives []
    assert np.isnan(dict(_ready().score(_EmptyIter(), "acc"))["accuracy"])
    assert _ready().predict(_EmptyIter()) == []


def test_nan_data_trains_to_nan_parameters_as_in_mxnet():
    mod = _bound()
    mod.fit(_iter(value=np.nan), num_epoch=1, optimizer_params={"learning_rate": 0.1})
    assert np.isnan(mod.get_params()[0]["fc_weight"].asnumpy()).all()


# ---------------------------------------------------------------------------------------------
# the CLI: one line on stderr, exit status 2
# ---------------------------------------------------------------------------------------------
CLI_CASES = [
    ("no command", [], r"the following arguments are required: command"),
    ("unknown command", ["nosuch"], r"invalid choice: 'nosuch'"),
    ("summary without --shape", ["summary", DIGITS + "-symbol.json"],
     r"summary needs the input shapes.*--shape data=1,64"),
    ("summary bad --shape", ["summary", DIGITS + "-symbol.json", "--shape", "data=a,b"],
     r"--shape 'data=a,b': expected NAME=D1,D2"),
    ("summary unknown input", ["summary", DIGITS + "-symbol.json", "--shape", "img=1,64"],
     r"--shape names img, which the symbol does not take"),
    ("summary missing file", ["summary", MISSING + "/s.json", "--shape", "data=1,4"],
     r"symbol file /nonexistent-folder/sub/s.json does not exist"),
    ("inspect missing file", ["inspect", MISSING + "/a.params"],
     r"params file /nonexistent-folder/sub/a.params does not exist"),
    ("inspect a folder", ["inspect", HERE], r"params file .* is not a file"),
    ("inspect not params", ["inspect", os.path.join(HERE, "conftest.py")],
     r"Invalid NDArray file format"),
    ("demo epochs 0", ["demo", "--epochs", "0"], r"--epochs: expected a positive integer"),
    ("demo batch-size text", ["demo", "--batch-size", "big"],
     r"--batch-size: expected a positive integer, got 'big'"),
    ("demo min-accuracy 2", ["demo", "--min-accuracy", "2"], r"expected a number in \[0, 1\]"),
    ("demo missing out folder parent", ["demo", "--epochs", "1", "--no-progress", "--out",
                                        "/proc/no-such-place/x"], r"demo: error: .*no-such"),
    ("run missing script", ["run", MISSING + "/s.py"], r"script /nonexistent-folder/sub/s.py"),
]


@pytest.mark.parametrize("case, argv, message", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_cli_bad_input_is_one_line_and_status_2(capsys, case, argv, message):
    try:
        status = cli.main(argv)
    except SystemExit as exit_:
        status = exit_.code
    err = capsys.readouterr().err
    assert status == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert __import__("re").search(message, lines[0]), lines[0]
