"""Opt-in aliasing of ``mxnet`` to ``lightmod`` for unmodified legacy scripts.

``lightmod.install_as_mxnet()`` (or ``lightmod run script.py``) makes ``import mxnet`` and
``from mxnet.module.base_module import BaseModule`` resolve to the lightmod modules of the same
name. Nothing is aliased unless one of the two is used.
"""
import importlib
import importlib.abc
import importlib.util
import sys

__all__ = ["install_as_mxnet", "uninstall_as_mxnet"]


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target):
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module):
        """The lightmod module is already executed; nothing more to run."""


class _MXNetAliasFinder(importlib.abc.MetaPathFinder):
    """Resolves ``mxnet`` / ``mxnet.x.y`` to ``lightmod`` / ``lightmod.x.y``."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "mxnet" and not fullname.startswith("mxnet."):
            return None
        real = "lightmod" + fullname[len("mxnet"):]
        if importlib.util.find_spec(real) is None:
            return None
        is_pkg = hasattr(importlib.import_module(real), "__path__")
        return importlib.util.spec_from_loader(fullname, _AliasLoader(real), is_package=is_pkg)


_finder = _MXNetAliasFinder()


def install_as_mxnet():
    """Make ``import mxnet`` (and its submodules) resolve to lightmod. Returns lightmod."""
    lightmod = sys.modules[__name__.rpartition(".")[0]]   # the loaded package, not re-imported
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
    sys.modules["mxnet"] = lightmod
    return lightmod


def uninstall_as_mxnet():
    """Undo :func:`install_as_mxnet` (aliases already imported by user code stay valid)."""
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    for name in [n for n in sys.modules if n == "mxnet" or n.startswith("mxnet.")]:
        if getattr(sys.modules[name], "__name__", "").startswith("lightmod"):
            del sys.modules[name]
