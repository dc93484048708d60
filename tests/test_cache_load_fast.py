"""A kernel loaded from lightmod's entry cache runs without numba's full target refresh.

numba refreshes its CPU target before each cache load, which the first time imports and installs
every registry of numba's own implementations (~0.3 s of a warm first training pass).
kernels/cache_stamp.py's entry cache only starts numba's runtime (NRT) before loading machine
code. These tests run a cached kernel in a fresh process and check that it allocates, returns
and raises as it did when compiled, that the registries were never loaded, and that compiling
something new afterwards still works (numba's compiler refreshes the target itself).
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba.core.caching")

_KERNEL = textwrap.dedent("""
    import numpy as np
    from numba import njit

    @njit(cache=True)
    def scaled_copy(a, k):
        if k < 0:
            raise ValueError("negative scale")
        out = np.empty(a.size, a.dtype)     # an allocation: needs numba's runtime
        for i in range(a.size):
            out[i] = a[i] * k
        return out
""")

_JOB = textwrap.dedent(r"""
    import json, sys
    import numpy as np
    from lightmod.kernels import cache_stamp
    assert cache_stamp.register_root(sys.argv[1])
    sys.path.insert(0, sys.argv[1])
    import kern
    report = {}
    out = kern.scaled_copy(np.arange(5, dtype=np.float32), 3.0)
    report["values"] = out.tolist()
    report["dtype"] = str(out.dtype)
    try:
        kern.scaled_copy(np.arange(5, dtype=np.float32), -1.0)
    except ValueError as exc:
        report["error"] = str(exc)
    report["misses"] = sum(kern.scaled_copy.stats.cache_misses.values())
    report["hits"] = sum(kern.scaled_copy.stats.cache_hits.values())
    report["registries_loaded"] = "numba.typed.listobject" in sys.modules
    if sys.argv[2] == "compile-after":
        from numba import njit

        @njit
        def fresh(n):       # a typed list: needs the registries a load skipped
            items = [0.5]
            for i in range(n):
                items.append(i * 2.0)
            return sum(items)
        report["fresh"] = fresh(4)
    print(json.dumps(report))
""")


def _run(tmp_path, mode):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba_cache"))
    env.pop("NUMBA_DISABLE_JIT", None)
    proc = subprocess.run([sys.executable, "-c", _JOB, str(tmp_path / "pkg"), mode],
                          capture_output=True, text=True, env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def package(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "kern.py").write_text(_KERNEL)
    return tmp_path


def test_cached_kernel_runs_without_the_registries(package):
    cold = _run(package, "plain")
    assert cold["misses"] == 1 and cold["hits"] == 0
    warm = _run(package, "plain")
    assert warm["misses"] == 0 and warm["hits"] == 1
    assert warm["values"] == [0.0, 3.0, 6.0, 9.0, 12.0] == cold["values"]
    assert warm["dtype"] == "float32"
    assert warm["error"] == "negative scale" == cold["error"]
    assert cold["registries_loaded"] is True     # compiling loads them
    assert warm["registries_loaded"] is False    # a cache load does not


def test_compiling_after_a_fast_load_refreshes_the_target(package):
    _run(package, "plain")
    warm = _run(package, "compile-after")
    assert warm["hits"] == 1 and warm["misses"] == 0
    assert warm["values"] == [0.0, 3.0, 6.0, 9.0, 12.0]
    assert warm["fresh"] == pytest.approx(0.5 + 2.0 * (0 + 1 + 2 + 3))
