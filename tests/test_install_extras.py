"""What each install extra brings: the test extra no CUDA toolkit wheels (they are hundreds of
MB and only the real CUDA compiler needs them), the cuda extra all of them, and the PTX test
skips with a reason, not an error, where they are absent."""
import configparser
import os
import re
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# pip distributions of NVIDIA's CUDA toolkit (compilers, runtime, linker), or meta packages and
# extras that pull them in
_TOOLKIT = re.compile(r"^(cuda-toolkit|nvidia-[\w-]+)|\[.*\bcu1\d\b.*\]")


def _extras():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "setup.cfg"))
    section = cfg["options.extras_require"]
    return {name: [line.strip() for line in section[name].splitlines()
                   if line.strip() and not line.strip().startswith("#")]
            for name in section}


def test_test_extra_needs_no_cuda_toolkit_wheels():
    test = _extras()["test"]
    assert [req for req in test if _TOOLKIT.search(req)] == []
    # what the CUDA simulator tests do need stays in
    assert "numba-cuda" in test and "pytest" in test and "tqdm" in test


def test_cuda_extra_brings_the_compiler_wheels():
    cuda = _extras()["cuda"]
    assert any(req.startswith("numba-cuda[cu13]") for req in cuda)
    assert any(req.startswith("cuda-toolkit[") and "nvvm" in req and "nvrtc" in req
               for req in cuda)


def test_ptx_test_skips_with_a_reason_without_nvvm(tmp_path):
    # NVVM made unavailable: numba-cuda reports it missing; the test module must skip saying so
    hide = textwrap.dedent('''
        import numba.cuda.cudadrv.nvvm as nvvm
        nvvm.is_available = lambda: False
    ''')
    (tmp_path / "sitecustomize.py").write_text(hide)
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH",
                                                                                   ""),
               PYTHONSAFEPATH="1")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           os.path.join(ROOT, "tests", "test_cuda_ptx.py")],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "FAILED" not in out and "ERROR" not in out and "Traceback" not in out, out[-3000:]
    assert re.search(r"SKIPPED .*(libNVVM was not found|numba-cuda is not installed)", out), \
        out[-3000:]
