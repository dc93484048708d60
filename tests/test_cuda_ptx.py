"""Every CUDA kernel compiles to PTX with NVVM, without a GPU or a driver.

numba's CUDA simulator runs kernels as Python, so it accepts code the real compiler rejects
(a typing error, a float64 shared array written with a tuple, an unsupported atomic). This
test compiles each kernel of ``lightmod.kernels.cuda.*`` with ``numba.cuda.compile_ptx`` for
the argument types the simulator tests really launch it with (recorded in
``tests/fixtures/cuda_kernel_signatures.json``; regenerate with
``python tests/fixtures/make_cuda_signatures.py`` after adding or changing a kernel), and for
their twins in the other floating dtype (lightmod runs every operator in float32 and float64;
the simulator tests often use one of them only).

It runs in the main (non-simulator) pytest process and needs NVVM and NVRTC, which only the
``cuda`` extra installs (pip wheels ``nvidia-nvvm``, ``nvidia-cuda-nvrtc``: ``pip install
".[test,cuda]"`` runs it); without them it skips, saying which library is missing and how to
get it (the ``test`` extra leaves the CUDA toolkit wheels out).
"""
import re
import types as pytypes

import cuda_kernels
import pytest

from lightmod.kernels import cuda_support

# the oldest architecture CUDA 13's NVRTC targets: code that compiles here compiles for newer
COMPUTE_CAPABILITY = (7, 5)


def _toolchain_missing():
    """Why PTX cannot be compiled here, or None when it can."""
    if cuda_support.simulator_enabled():
        return "NUMBA_ENABLE_CUDASIM is set: compile_ptx needs numba's real CUDA target"
    if not cuda_support.numba_cuda_installed():
        return "numba-cuda is not installed (pip install 'lightmod[cuda]')"
    try:
        from numba.cuda.cudadrv import nvrtc, nvvm
        if not nvvm.is_available():
            return "libNVVM was not found (pip install 'lightmod[cuda]' installs nvidia-nvvm)"
        nvvm.NVVM()
        nvrtc.get_supported_ccs()
    except Exception as err:  # a library numba-cuda loads lazily is absent
        return "the CUDA compiler libraries are missing (pip install 'lightmod[cuda]'): %s" % (
            str(err).splitlines()[0],)
    return None


MISSING = _toolchain_missing()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=str(MISSING))

SIGNATURES = cuda_kernels.load_signatures()


def _shape_free(signature):
    # tuples of shapes/strides of different lengths compile the same code: one of them is enough
    return tuple(re.sub(r"UniTuple\((\w+), \d+\)", r"UniTuple(\1, n)", t) for t in signature)


def signatures_to_compile(recorded):
    """The recorded signatures (one per tuple-length class) and their float32/float64 twins."""
    chosen = {}
    for sig in sorted(recorded):
        chosen.setdefault(_shape_free(sig), sig)
    for sig in list(chosen.values()):
        twin = cuda_kernels.float_twin(sig)
        chosen.setdefault(_shape_free(twin), twin)
    return list(chosen.values())


@pytest.fixture(scope="module")
def kernels():
    return cuda_kernels.discover()


@pytest.fixture(scope="module")
def no_device(monkeypatch_module):
    """numba compiles a kernel's device functions for the *current* device's architecture;
    without a GPU, name the target architecture instead."""
    import numba.cuda.dispatcher as dispatcher
    monkeypatch_module.setattr(dispatcher, "get_current_device",
                               lambda: pytypes.SimpleNamespace(
                                   compute_capability=COMPUTE_CAPABILITY))


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_every_kernel_has_recorded_signatures(kernels):
    unrecorded = sorted(set(kernels) - set(SIGNATURES))
    assert not unrecorded, (
        "CUDA kernels never launched by the simulator tests (add a test in tests/cuda, then run "
        "python tests/fixtures/make_cuda_signatures.py): %s" % unrecorded)
    gone = sorted(set(SIGNATURES) - set(kernels))
    assert not gone, ("recorded kernels that no longer exist (run "
                      "python tests/fixtures/make_cuda_signatures.py): %s" % gone)


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_kernel_compiles_to_ptx(name, kernels, no_device):
    from numba import cuda
    kernel = kernels.get(name)
    if kernel is None:
        pytest.fail("%s was recorded but is not a kernel any more" % name)
    failures = []
    for sig in signatures_to_compile(SIGNATURES[name]):
        argtypes = tuple(cuda_kernels.parse_type(t) for t in sig)
        try:
            ptx, restype = cuda.compile_ptx(kernel.py_func, argtypes, cc=COMPUTE_CAPABILITY,
                                            fastmath=kernel.targetoptions.get("fastmath",
                                                                              False))
        except Exception as err:
            failures.append("(%s): %s: %s" % (", ".join(sig), type(err).__name__,
                                              str(err)[:2000]))
            continue
        assert str(restype) == "none"
        assert ".visible .entry" in ptx
    assert not failures, "%s does not compile:\n%s" % (name, "\n".join(failures))


def test_compiler_check_passes_with_a_working_compiler(monkeypatch):
    monkeypatch.delitem(cuda_support._checked, "compiler", raising=False)
    cuda_support.check_compiler()
    assert cuda_support._checked["compiler"] is True


def test_compiler_check_names_the_versions_when_numba_cuda_cannot_compile(monkeypatch):
    import numpy as np
    from numba import cuda

    import lightmod as mx

    def broken(*args, **kwargs):     # what numba-cuda 0.30 does with numpy 2.5
        raise AttributeError("module 'numpy' has no attribute 'row_stack'")

    monkeypatch.delitem(cuda_support._checked, "compiler", raising=False)
    monkeypatch.setattr(cuda, "compile_ptx", broken)
    with pytest.raises(mx.MXNetError, match="numba-cuda cannot compile") as err:
        cuda_support.check_compiler()
    assert "row_stack" in str(err.value) and np.__version__ in str(err.value)
    assert "compiler" not in cuda_support._checked
