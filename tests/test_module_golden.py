"""Checkpoints across MXNet 1.9.1 and lightmod (fixtures from make_module_golden.py).

Cases: an MLP (SGD-momentum, Adam; one and two devices), a CNN with BatchNorm (aux states) and
an mx.rnn LSTM (RMSProp).

* MXNet -> lightmod: resume MXNet's checkpoint (params + optimizer states) and take the next
  step; it must match MXNet's resumed next step within float32 tolerance.
* lightmod reproduces MXNet's training trajectory from the same initial parameters.
* lightmod -> MXNet: a checkpoint written here resumes in MXNet 1.9.1 (only when the oracle
  venv is present; the rest of the suite never needs MXNet).
"""
import json
import os
import subprocess

import numpy as np
import pytest

import lightmod as mx
from lightmod import nd

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
GOLDEN_DIR = os.path.join(FIXTURES, "module_golden")
GOLDEN = np.load(os.path.join(FIXTURES, "module_golden.npz"))
MXNET_PYTHON = os.environ.get("LIGHTMOD_MXNET_PYTHON", "/work/mxvenv/bin/python")

BATCH = 8
# case -> (optimizer, optimizer_params, number of cpu contexts); see make_module_golden.py
CASES = {
    "mlp_sgd": ("sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.001}, 1),
    "mlp_adam": ("adam", {"learning_rate": 0.01, "wd": 0.001}, 1),
    "mlp_sgd_2dev": ("sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.001}, 2),
    "cnn_bn_sgd": ("sgd", {"learning_rate": 0.05, "momentum": 0.9, "wd": 0.0005}, 1),
    "lstm_rmsprop": ("rmsprop", {"learning_rate": 0.01, "wd": 0.0001}, 1),
}


def contexts(n):
    return [mx.cpu(i) for i in range(n)]


def golden_dict(case, stage):
    prefix = "%s/%s/" % (case, stage)
    return {k[len(prefix):]: GOLDEN[k] for k in GOLDEN.files if k.startswith(prefix)}


def batches(case):
    x, y = GOLDEN["%s/x" % case], GOLDEN["%s/y" % case]
    return [mx.io.DataBatch([nd.array(x[i:i + BATCH])], [nd.array(y[i:i + BATCH])])
            for i in range(0, len(x), BATCH)]


def assert_params(mod, case, stage, rtol=1e-5, atol=1e-6):
    arg, aux = mod.get_params()
    for got, want, what in ((arg, golden_dict(case, stage), ""),
                            (aux, golden_dict(case, stage + "aux"), "aux")):
        assert sorted(got) == sorted(want)
        for name in want:
            np.testing.assert_allclose(got[name].asnumpy(), want[name], rtol=rtol, atol=atol,
                                       err_msg="%s %s%s %s" % (case, stage, what, name))


def bind(mod, case):
    x = GOLDEN["%s/x" % case]
    mod.bind(data_shapes=[("data", (BATCH,) + x.shape[1:])],
             label_shapes=[("softmax_label", (BATCH,))])


def trained_here(case):
    """Train the case here from MXNet's initial parameters, as the fixture script did."""
    optimizer, opt_params, ndev = CASES[case]
    mod = mx.mod.Module(mx.sym.load(os.path.join(GOLDEN_DIR, case + "-symbol.json")),
                        context=contexts(ndev))
    bind(mod, case)
    mod.init_params(arg_params={k: nd.array(v) for k, v in golden_dict(case, "init").items()},
                    aux_params={k: nd.array(v) for k, v in golden_dict(case, "initaux").items()})
    mod.init_optimizer(optimizer=optimizer, optimizer_params=opt_params)
    for b in batches(case):
        mod.forward_backward(b)
        mod.update()
    return mod


@pytest.mark.parametrize("case", sorted(CASES))
def test_resume_mxnet_checkpoint(case):
    optimizer, opt_params, ndev = CASES[case]
    mod = mx.mod.Module.load(os.path.join(GOLDEN_DIR, case), 1, load_optimizer_states=True,
                             context=contexts(ndev))
    bind(mod, case)
    mod.init_optimizer(optimizer=optimizer, optimizer_params=opt_params)
    assert_params(mod, case, "ckpt", rtol=0, atol=0)
    first = batches(case)[0]
    mod.forward(first, is_train=False)
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), GOLDEN["%s/out" % case],
                               rtol=1e-5, atol=1e-6)
    mod.forward_backward(first)
    mod.update()
    assert_params(mod, case, "next")


@pytest.mark.parametrize("case", sorted(CASES))
def test_trajectory_matches_mxnet(case):
    assert_params(trained_here(case), case, "ckpt")


def write_lightmod_checkpoints(directory):
    for case in sorted(CASES):
        trained_here(case).save_checkpoint(os.path.join(directory, case), 1,
                                           save_optimizer_states=True)


def test_lightmod_checkpoint_files_resume_here(tmp_path):
    write_lightmod_checkpoints(str(tmp_path))
    for case, (optimizer, opt_params, ndev) in sorted(CASES.items()):
        mod = mx.mod.Module.load(str(tmp_path / case), 1, load_optimizer_states=True,
                                 context=contexts(ndev))
        bind(mod, case)
        mod.init_optimizer(optimizer=optimizer, optimizer_params=opt_params)
        mod.forward_backward(batches(case)[0])
        mod.update()
        assert_params(mod, case, "next")
    # .params files are MXNet's format: the same names, dtypes and shapes as MXNet's own
    for case in CASES:
        ours = nd.load(str(tmp_path / ("%s-0001.params" % case)))
        theirs = nd.load(os.path.join(GOLDEN_DIR, "%s-0001.params" % case))
        assert sorted(ours) == sorted(theirs)
        for k in ours:
            assert ours[k].shape == theirs[k].shape and ours[k].dtype == theirs[k].dtype


@pytest.mark.skipif(not os.path.exists(MXNET_PYTHON), reason="MXNet 1.9.1 oracle not installed")
def test_lightmod_checkpoint_resumes_in_mxnet(tmp_path):
    write_lightmod_checkpoints(str(tmp_path))
    script = os.path.join(FIXTURES, "make_module_golden.py")
    proc = subprocess.run([MXNET_PYTHON, script, "--verify", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sorted(report) == sorted(CASES)
    for case, diffs in report.items():
        assert diffs["ckpt_max_abs_diff"] < 1e-5, (case, diffs)
        assert diffs["next_max_abs_diff"] < 1e-5, (case, diffs)
