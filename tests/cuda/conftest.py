"""Set-up for the CUDA tests (run on numba's simulator: NUMBA_ENABLE_CUDASIM=1).

With ``LIGHTMOD_RECORD_CUDA_SIGNATURES=<path>`` every kernel launch's argument types are
recorded into ``<path>.<pid>`` (one JSON file per pytest process) when the session ends; that is how
``tests/fixtures/make_cuda_signatures.py`` builds the signatures the PTX test compiles.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_RECORD_PATH = os.environ.get("LIGHTMOD_RECORD_CUDA_SIGNATURES")
_recorder = None


def pytest_configure(config):
    global _recorder
    if not _RECORD_PATH:
        return
    from lightmod.kernels import cuda_support
    if not cuda_support.simulator_enabled():
        raise RuntimeError("recording kernel signatures needs NUMBA_ENABLE_CUDASIM=1")
    import cuda_kernels
    from numba.cuda.simulator import kernel as simkernel
    _recorder = cuda_kernels.Recorder()
    launch = simkernel.FakeCUDAKernel.__call__

    def recording_call(self, *args):
        result = launch(self, *args)
        if not self._device and not simkernel._kernel_context:
            _recorder.record(self, args)      # only launches that worked
        return result

    simkernel.FakeCUDAKernel.__call__ = recording_call


def pytest_sessionfinish(session, exitstatus):
    if _recorder is not None:
        _recorder.dump("%s.%d" % (_RECORD_PATH, os.getpid()))


# ---------------------------------------------------------------------------------------------
# two simulated GPUs that check device affinity
# ---------------------------------------------------------------------------------------------
class _SimulatedGPU:
    """Stands in for the simulator's one device: ``with gpus[i]`` makes GPU i current."""
    compute_capability = (5, 2)

    def __init__(self, devnum, stack):
        self.id = devnum
        self._stack = stack

    @property
    def device(self):
        return self

    def __enter__(self):
        self._stack.append(self.id)

    def __exit__(self, *exc):
        assert self._stack.pop() == self.id, "CUDA contexts popped out of order"

    def get_memory_info(self):
        return (1 << 30, 1 << 30)

    def reset(self):
        pass


class DeviceAffinity:
    """Tags every device allocation with the GPU current at the time and records kernel
    launches whose array arguments live on another GPU than the current one."""

    def __init__(self):
        self.stack = []
        self.owner = {}         # id(root buffer) -> (root buffer, device)
        self.violations = []
        self.launches = {0: 0, 1: 0}

    @property
    def current(self):
        return self.stack[-1] if self.stack else 0

    @staticmethod
    def _root(array):
        host = getattr(array, "_ary", None)
        if host is None:
            return None
        while getattr(host, "base", None) is not None and hasattr(host.base, "shape"):
            host = host.base
        return host

    def tag(self, array):
        root = self._root(array)
        if root is not None:
            self.owner[id(root)] = (root, self.current)
        return array

    def device_of(self, array):
        root = self._root(array)
        entry = self.owner.get(id(root)) if root is not None else None
        return None if entry is None else entry[1]

    def check_launch(self, kernel, args):
        here = self.current
        self.launches[here] = self.launches.get(here, 0) + 1
        for pos, a in enumerate(args):
            where = self.device_of(a)
            if where is not None and where != here:
                self.violations.append("%s: argument %d lives on GPU %d, launched on GPU %d"
                                       % (kernel.py_func.__name__, pos, where, here))


def _reset_kernel_set_caches():
    from lightmod import kernels
    from lightmod.kernels import cuda_support
    cuda_support._checked.clear()
    kernels._kernel_sets.clear()


@pytest.fixture
def two_gpus(monkeypatch):
    """numba's simulator with two GPUs (it simulates one); yields the DeviceAffinity checker,
    and fails the test if a kernel ran on one GPU with arrays of the other."""
    from lightmod.kernels import cuda_support
    if not cuda_support.simulator_enabled():
        pytest.skip("two GPUs are simulated only under NUMBA_ENABLE_CUDASIM=1")
    from numba import cuda
    from numba.cuda.simulator import kernel as simkernel
    from numba.cuda.simulator.cudadrv import devices

    affinity = DeviceAffinity()
    monkeypatch.setattr(devices.gpus, "lst",
                        tuple(_SimulatedGPU(i, affinity.stack) for i in range(2)))
    monkeypatch.setattr(cuda, "get_current_device", lambda: devices.gpus[affinity.current])
    for name in ("device_array", "to_device"):
        create = getattr(cuda, name)
        monkeypatch.setattr(cuda, name, lambda *a, _create=create, **kw:
                            affinity.tag(_create(*a, **kw)))
    launch = simkernel.FakeCUDAKernel.__call__

    def checked_launch(self, *args):
        if not self._device and not simkernel._kernel_context:
            affinity.check_launch(self, args)
        return launch(self, *args)

    monkeypatch.setattr(simkernel.FakeCUDAKernel, "__call__", checked_launch)
    _reset_kernel_set_caches()
    try:
        yield affinity
    finally:
        _reset_kernel_set_caches()
    assert not affinity.violations, "kernels ran on the wrong GPU:\n" + "\n".join(
        sorted(set(affinity.violations)))
