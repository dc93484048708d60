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
        from mxnet.module.base_module import BaseModule
        import mxnet.ndarray as nd
        assert mxnet is lightmod
        assert BaseModule is lightmod.module.base_module.BaseModule
        assert nd is lightmod.ndarray
    finally:
        uninstall_as_mxnet()
    assert "mxnet" not in sys.modules


def test_run_executes_an_unmodified_mxnet_script(tmp_path):
    script = os.path.join(HERE, "fixtures", "legacy_mxnet_script.py")
    proc = subprocess.run([sys.executable, "-m", "lightmod.cli", "run", script, "--flag", "x"],
                          capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "legacy script accuracy" in proc.stdout
    assert "['--flag', 'x']" in proc.stdout


def test_info_reports_versions(capsys):
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert lightmod.__version__ in out and "numba" in out and "cuda" in out


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
