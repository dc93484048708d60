"""The ``mxnet`` alias of child processes: ``import mxnet`` gives lightmod where asked for.

lightmod installs ``lightmod-mxnet-alias.pth`` next to its packages. Python runs that line at
every start-up; it does nothing unless the environment variable ``LIGHTMOD_MXNET_ALIAS`` is
``1``, and then calls :func:`install`, which puts a finder at the front of ``sys.meta_path``.
The finder imports nothing by itself: the first ``import mxnet`` (or ``import mxnet.x``)
imports lightmod and resolves the name to it (with ``lightmod.compat``'s alias finder).

``lightmod run script.py`` sets the variable, so every process the script starts -- a
``multiprocessing`` child (spawn, forkserver or fork) or a ``subprocess`` running this Python --
inherits the alias. ``LIGHTMOD_MXNET_ALIAS=1 python script.py`` does the same without the
command. This module lives outside the lightmod package so that start-up never imports
lightmod.
"""
import sys

__all__ = ["ENV_VAR", "install", "installed"]

ENV_VAR = "LIGHTMOD_MXNET_ALIAS"


class _LazyMXNetFinder:
    """Turns the first ``import mxnet`` into lightmod's alias (see the module docstring)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "mxnet" and not fullname.startswith("mxnet."):
            return None
        from lightmod import compat
        # From now on lightmod's own alias finder answers. It must not be given
        # sys.modules["mxnet"] here (as install_as_mxnet does): a module registered during
        # find_spec makes the import system load that module's own spec again, i.e. run
        # lightmod/__init__.py a second time.
        if compat._finder not in sys.meta_path:
            sys.meta_path.insert(0, compat._finder)
        return compat._finder.find_spec(fullname, path, target)

    def invalidate_caches(self):
        pass


_finder = _LazyMXNetFinder()


def install():
    """Put the lazy ``mxnet`` finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _LazyMXNetFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _finder)


def installed():
    """Whether this process has the lazy finder."""
    return any(isinstance(f, _LazyMXNetFinder) for f in sys.meta_path)
