"""Packaging rules: every package is declared, `kernels` is only reachable as lightmod.kernels,
and importing lightmod compiles nothing and never imports numba."""
import configparser
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _declared_packages():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "setup.cfg"))
    return {p.strip() for p in cfg["options"]["packages"].split() if p.strip()}


def _tracked_packages():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    found = set()
    for path in files:
        if not path.endswith("__init__.py"):
            continue
        parts = path.split("/")[:-1]
        if parts[0] == "lightmod":
            found.add(".".join(parts))
        elif parts[0] == "kernels":
            found.add(".".join(["lightmod"] + parts))
    return found


def test_every_package_is_declared_in_setup_cfg():
    if not os.path.isdir(os.path.join(ROOT, ".git")):
        return  # an sdist or installed copy: the list was checked where it was built
    declared = _declared_packages()
    tracked = _tracked_packages()
    assert tracked - declared == set(), "packages missing from setup.cfg"
    assert declared - tracked == set(), "setup.cfg lists packages that do not exist"


def test_kernels_is_not_importable_on_its_own():
    code = ("import importlib.util, lightmod.kernels; "
            "assert importlib.util.find_spec('kernels') is None")
    subprocess.run([sys.executable, "-c", code], check=True, cwd="/")


def test_import_is_cheap():
    code = ("import sys, lightmod; "
            "bad = [m for m in sys.modules if m == 'numba' or m.startswith('numba.') "
            "or m == 'hypothesis' or m == 'matplotlib']; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd="/")


def test_version_string_takes_the_modern_branch_of_legacy_checks():
    import lightmod
    assert lightmod.__version__ >= "1.3.0"
    assert lightmod.__version__ >= "1.9.1"
    assert lightmod.__version__ < "2"
