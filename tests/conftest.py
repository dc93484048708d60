"""Test-suite set-up: the suite tests the *installed* lightmod.

`lightmod.kernels` only exists in an installed copy (setup.cfg maps the top-level kernels/
folder onto it), so a `lightmod` imported from the checkout itself cannot run. Run the suite
with the `pytest` command (which does not put the current directory on sys.path), after
`pip install .` or `pip install -e .`.
"""
import os

# Python 3.11+: interpreters started by tests (subprocesses: examples, the CLI, mpiexec
# workers) must not put their working directory first on sys.path either.
os.environ.setdefault("PYTHONSAFEPATH", "1")

import lightmod  # noqa: E402

try:
    import lightmod.kernels  # noqa: F401,E402
except ImportError as err:  # pragma: no cover - a set-up error, reported once
    raise ImportError(
        "lightmod was imported from %s, which has no kernels: run the tests with the "
        "`pytest` command against an installed lightmod (pip install -e .), not "
        "`python -m pytest` from the checkout" % os.path.dirname(lightmod.__file__)) from err
