"""The `lightmod` command and the opt-in mxnet aliasing."""
import os
import subprocess
import sys

import pytest

import lightmod
from lightmod import cli
from lightmod.compat import install_as_mxnet, uninstall_as_mxnet

HERE = os.path.dirname(os.path.abspath(__file__))


def test_install_as_mxnet_aliases_submodules():
    assert "mxnet" not in sys.modules or sys.modules["mxnet"] is lightmod
    try:
        install_as_mxnet()
        import mxnet
        import mxnet.ndarray as nd
        from mxnet.module.base_module import BaseModule
        assert mxnet is lightmod
        assert BaseModule is lightmod.module.base_module.BaseModule
        assert nd is lightmod.ndarray
    finally:
        uninstall_as_mxnet()
    assert "mxnet" not in sys.modules


@pytest.mark.parametrize("module", ["lightmod.cli", "lightmod"])
def test_run_executes_an_unmodified_mxnet_script(tmp_path, module):
    script = os.path.join(HERE, "fixtures", "legacy_mxnet_script.py")
    proc = subprocess.run([sys.executable, "-m", module, "run", script, "--flag", "x"],
                          capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "legacy script accuracy" in proc.stdout
    assert "['--flag', 'x']" in proc.stdout


def test_info_reports_versions(capsys):
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert lightmod.__version__ in out and "numba" in out and "cuda" in out
    assert "products   " in out


def test_demo_trains_saves_and_plots(tmp_path, capsys):
    status = cli.main(["demo", "--epochs", "4", "--out", str(tmp_path), "--no-progress",
                       "--min-accuracy", "0.9"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "Final validation accuracy" in out
    assert (tmp_path / "digits-mlp-symbol.json").exists()
    assert (tmp_path / "digits-mlp-0004.params").exists()
    png = tmp_path / "training-curves.png"
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_inspect_and_summary(tmp_path, capsys):
    prefix = os.path.join(os.path.dirname(HERE), "examples", "data", "mxnet-digits")
    assert cli.main(["inspect", prefix + "-0005.params"]) == 0
    out = capsys.readouterr().out
    assert "arg:fc1_weight" in out and "(64, 64)" in out
    assert cli.main(["summary", prefix + "-symbol.json", "--shape", "data=1,64"]) == 0
    out = capsys.readouterr().out
    assert "fc1(FullyConnected)" in out and "Total params: 4810" in out


def test_bad_subcommand_exits_with_usage():
    with pytest.raises(SystemExit):
        cli.main(["no-such-command"])


# ---------------------------------------------------------------------------------------------
# the demo: reproducible, honest, readable
# ---------------------------------------------------------------------------------------------
def _demo_run(tmp_path, capsys, seed, name):
    out_dir = tmp_path / name
    assert cli.main(["demo", "--epochs", "2", "--out", str(out_dir), "--no-progress",
                     "--seed", str(seed), "--min-accuracy", "0"]) == 0
    out = capsys.readouterr().out
    final = [line for line in out.splitlines() if line.startswith("Final")][0]
    return final.split(" (")[0], (out_dir / "digits-mlp-0002.params").read_bytes()


def test_demo_same_seed_gives_the_same_numbers(tmp_path, capsys):
    import numpy as np
    first = _demo_run(tmp_path, capsys, 3, "a")
    np.random.rand(5)     # whatever ran before must not matter
    second = _demo_run(tmp_path, capsys, 3, "b")
    assert first == second
    assert _demo_run(tmp_path, capsys, 4, "c")[1] != first[1]


def test_demo_help_and_success_check(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "a few seconds" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["demo", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default 0.8:" in text, text


def test_demo_below_the_accuracy_floor_says_so(tmp_path, capsys):
    status = cli.main(["demo", "--epochs", "1", "--out", str(tmp_path), "--no-progress",
                       "--min-accuracy", "1.0"])
    err = capsys.readouterr().err
    assert status == 1 and "below --min-accuracy 1.00" in err


def test_progress_bar_leaves_one_readable_line_per_epoch():
    import io
    import re
    pytest.importorskip("tqdm")
    from lightmod import fit_callbacks
    from lightmod.model import BatchEndParam
    stream = io.StringIO()
    bar = fit_callbacks.TqdmProgressBar(total=3, stream=stream, force_tqdm=True)
    for epoch in range(2):
        for nbatch in range(3):
            bar(BatchEndParam(epoch, nbatch, None, {"train_data": None}))
    bar.close()
    # what a terminal shows at the end: the last carriage-return segment of every line
    screen = [line.split("\r")[-1] for line in stream.getvalue().split("\n")]
    shown = [line for line in screen if line.strip()]
    assert len(shown) == 2, screen
    assert re.match(r"Epoch 0: 100%.*3/3", shown[0]) and re.match(r"Epoch 1: 100%.*3/3", shown[1])


def test_plot_x_axis_counts_epochs_like_the_log():
    pytest.importorskip("matplotlib")
    from lightmod import fit_callbacks
    history = fit_callbacks.History()
    for epoch, acc in enumerate([0.5, 0.7, 0.9]):
        history.history.setdefault("train-accuracy", []).append(acc)
        history.epochs.append(epoch)
    fig = fit_callbacks.plot_history(history)
    line = fig.axes[0].lines[0]
    assert list(line.get_xdata()) == [0, 1, 2]
    assert "Epoch[N]" in fig.axes[0].get_xlabel()


def test_a_closed_pipe_ends_quietly():
    """``lightmod info | head -1``: the command stops without an error message once the
    reader has gone."""
    proc = subprocess.Popen([sys.executable, "-m", "lightmod", "info"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()                 # the reader goes away after one line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) in (0, 1)
    assert first.startswith(b"lightmod")
    assert "error" not in err and "Traceback" not in err, err
