"""The mxnet alias in the processes a program starts under ``lightmod run``.

``lightmod run`` sets LIGHTMOD_MXNET_ALIAS=1; the ``lightmod-mxnet-alias.pth`` start-up line
installed with lightmod then gives every child Python a finder that resolves ``import mxnet``
to lightmod on first import (lightmod_mxnet_alias.py). The script below checks, from inside
the program, that nothing was imported for it, then imports mxnet in a multiprocessing child
of every start method and in a subprocess.
"""
import os
import site
import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent('''
    import multiprocessing
    import subprocess
    import sys

    # nothing imported on the program's behalf (in the program and in spawned children,
    # which run this file again as __mp_main__)
    assert "mxnet" not in sys.modules, "mxnet imported before the program asked"


    def child_view(_):
        import mxnet
        return "%s %s" % (mxnet.__name__, mxnet.nd.ones((2,)).asnumpy().sum())


    if __name__ == "__main__":
        multiprocessing.set_start_method(sys.argv[1])     # still free to choose
        import mxnet
        print("parent", mxnet.__name__)
        with multiprocessing.Pool(1) as pool:
            print("pool", pool.map(child_view, [0])[0])
        code = "import mxnet, sys; print(mxnet.__name__, 'mxnet' in sys.modules)"
        print("subprocess", subprocess.run([sys.executable, "-c", code], capture_output=True,
                                           text=True, check=True).stdout.strip())
''')


def _pth_installed():
    dirs = site.getsitepackages() + [site.getusersitepackages()]
    return any(os.path.exists(os.path.join(d, "lightmod-mxnet-alias.pth")) for d in dirs)


def test_the_start_up_line_is_installed():
    # installing lightmod (pip install / pip install -e) writes it next to the packages
    assert _pth_installed(), "lightmod-mxnet-alias.pth missing: reinstall lightmod"


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_children_of_a_program_under_lightmod_run_get_lightmod(tmp_path, method):
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if k != "LIGHTMOD_MXNET_ALIAS"}
    proc = subprocess.run([sys.executable, "-m", "lightmod.cli", "run", str(script), method],
                          capture_output=True, text=True, timeout=300, cwd=str(tmp_path),
                          env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines == ["parent lightmod", "pool lightmod 2.0", "subprocess lightmod True"]


def test_without_the_variable_mxnet_is_not_aliased(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "LIGHTMOD_MXNET_ALIAS"}
    code = ("import importlib.util, sys; import lightmod; "
            "print(importlib.util.find_spec('mxnet') is None, 'mxnet' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=str(tmp_path), env=env, check=True)
    assert proc.stdout.split() == ["True", "False"]


def test_with_the_variable_the_first_import_brings_lightmod(tmp_path):
    env = dict(os.environ, LIGHTMOD_MXNET_ALIAS="1")
    code = ("import sys; before = [m for m in ('mxnet', 'lightmod') if m in sys.modules]; "
            "from mxnet.module.base_module import BaseModule; import lightmod, mxnet; "
            "print(before, mxnet is lightmod, "
            "BaseModule is lightmod.module.base_module.BaseModule)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=str(tmp_path), env=env, check=True)
    assert proc.stdout.strip() == "[] True True"
