"""Processes sharing numba's cache folders and the generated-source folder never break each other
(kernels/cache_stamp.py's entry cache, kernels/fused.py's renamed writes).

numba's own cache file keeps one index per function, rewritten whole by whichever process stores
an entry: processes storing different signatures of one function at the same time lose each
other's entries and can leave the index naming another signature's data file (the next process
then fails to unbox its arguments, or runs code compiled for other types). These tests start
several processes on a cold, private cache, each compiling its own signature of one function at
the same moment, then check that a fresh process finds every entry and gets the right values.
"""
import os
import subprocess
import sys
import textwrap
import time

import pytest

from lightmod.kernels import cache_stamp, fused

pytest.importorskip("numba.core.caching")

_KERNEL = textwrap.dedent("""
    from numba import njit

    @njit(cache=True)
    def total(a, k):
        s = a[0] * 0
        for i in range(a.size):
            s += a[i] * k
        return s
""")

# one process: wait for the common start, call total for each dtype named, print
# "dtype value cache-misses-so-far" per call
_JOB = textwrap.dedent(r"""
    import os, sys, time
    mode, where, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
    import numpy as np
    from lightmod.kernels import cache_stamp, fused
    if mode == "root":
        assert cache_stamp.register_root(where)
        sys.path.insert(0, where)
        import kern
    else:
        kern = fused.load_module("race_probe", open(where).read())
    time.sleep(max(0.0, start - time.time()))
    for name in sys.argv[4:]:
        value = kern.total(np.arange(1, 6, dtype=name), 3)
        print(name, float(value), sum(kern.total.stats.cache_misses.values()))
""")

_DTYPES = ["float32", "float64", "int32", "int64", "int16", "uint16", "uint32", "uint8"]


def _env(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba_cache"),
               LIGHTMOD_CACHE_DIR=str(tmp_path / "lightmod_cache"))
    env.pop("NUMBA_DISABLE_JIT", None)
    return env


def _setup(tmp_path, mode):
    if mode == "root":
        where = tmp_path / "pkg"
        where.mkdir()
        (where / "kern.py").write_text(_KERNEL)
    else:
        where = tmp_path / "kern_source.py"
        where.write_text(_KERNEL)
    return str(where)


def _start(mode, where, env, start, names):
    return subprocess.Popen([sys.executable, "-c", _JOB, mode, where, repr(start)] + names,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _results(proc):
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-3000:]
    rows = [line.split() for line in out.split("\n") if line.strip()]
    return {name: (float(value), int(misses)) for name, value, misses in rows}


@pytest.mark.parametrize("mode", ["root", "generated"])
def test_processes_compiling_signatures_at_once_keep_every_entry(tmp_path, mode):
    where = _setup(tmp_path, mode)
    env = _env(tmp_path)
    # numba and lightmod load in ~1-2 s per process; all call at the same moment after that
    start = time.time() + 2.0 + 0.5 * len(_DTYPES)
    procs = [_start(mode, where, env, start, [name]) for name in _DTYPES]
    for name, proc in zip(_DTYPES, procs):
        assert _results(proc) == {name: (45.0, 1)}          # compiled (cold cache)
    # a later process finds every signature on disk (no miss), each with its own code
    later = _results(_start(mode, where, env, 0.0, _DTYPES))
    assert later == {name: (45.0, 0) for name in _DTYPES}


_CALL = textwrap.dedent(r"""
    import sys
    import numpy as np
    from lightmod.kernels import cache_stamp
    assert cache_stamp.register_root(sys.argv[1])
    sys.path.insert(0, sys.argv[1])
    import kern
    value = kern.total(np.arange(1, 6, dtype=sys.argv[2]), 3)
    print(float(value), sum(kern.total.stats.cache_hits.values()))
""")


def _call(root, env, dtype):
    proc = subprocess.run([sys.executable, "-c", _CALL, root, dtype], capture_output=True,
                          text=True, env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    value, hits = proc.stdout.split()
    return float(value), int(hits)


def _entries(env):
    folder = env["NUMBA_CACHE_DIR"]
    return sorted(os.path.join(d, n) for d, _, names in os.walk(folder) for n in names
                  if n.endswith(".nbc"))


def test_an_entry_holding_another_signature_or_cut_short_is_compiled_again(tmp_path):
    root = _setup(tmp_path, "root")
    env = _env(tmp_path)
    assert _call(root, env, "float32") == (45.0, 0)
    [f32_entry] = _entries(env)
    assert _call(root, env, "float64") == (45.0, 0)
    [f64_entry] = [e for e in _entries(env) if e != f32_entry]
    with open(f32_entry, "rb") as f:
        f32_bytes = f.read()
    # the float64 entry now holds the float32 code (what numba's shared index could leave)
    with open(f64_entry, "wb") as f:
        f.write(f32_bytes)
    assert _call(root, env, "float64") == (45.0, 0)         # not loaded: compiled again
    assert _call(root, env, "float64") == (45.0, 1)         # and stored again
    # an entry cut short (a crashed writer of another tool, a full disk)
    with open(f64_entry, "wb") as f:
        f.write(f32_bytes[:len(f32_bytes) // 2])
    assert _call(root, env, "float64") == (45.0, 0)
    assert _call(root, env, "float64") == (45.0, 1)
    assert _call(root, env, "float32") == (45.0, 1)         # the other entry untouched


_FAILING_STORE = textwrap.dedent(r"""
    import sys
    import numpy as np
    from numba.core import codegen
    from lightmod.kernels import cache_stamp
    def refuse(self):
        raise RuntimeError("no compiled object yet for %s" % (self,))
    codegen.CPUCodeLibrary.serialize_using_object_code = refuse
    assert cache_stamp.register_root(sys.argv[1])
    sys.path.insert(0, sys.argv[1])
    import kern
    print(float(kern.total(np.arange(1, 6, dtype=np.float64), 3)))
""")


def test_a_store_that_fails_does_not_fail_the_call(tmp_path):
    """numba's "no compiled object yet" (seen once while another process compiled the same
    generated kernel) is raised while storing an entry: the kernel is compiled by then, so the
    call goes on and only the disk copy is missing."""
    root = _setup(tmp_path, "root")
    env = _env(tmp_path)
    proc = subprocess.run([sys.executable, "-c", _FAILING_STORE, root], capture_output=True,
                          text=True, env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["45.0"]
    assert "not stored" in proc.stderr
    assert _entries(env) == []
    assert _call(root, env, "float64") == (45.0, 0)


def test_the_entry_cache_serves_the_package_and_generated_modules_only():
    from numba import njit
    from numba.core import dispatcher
    from numba.core.caching import IndexDataCacheFile

    from lightmod.kernels.cpu import conv_direct
    assert dispatcher.FunctionCache is cache_stamp.EntryFunctionCache
    assert isinstance(conv_direct.place._cache._cache_file, cache_stamp.EntryCacheFile)
    mod = fused.load_module("entry_probe", "from numba import njit\n"
                                           "@njit(cache=_CACHE)\ndef one():\n    return 1\n")
    assert isinstance(mod.one._cache._cache_file, cache_stamp.EntryCacheFile)

    def other():
        return 2
    # a function of this test file keeps numba's own cache file
    assert type(njit(cache=True)(other)._cache._cache_file) is IndexDataCacheFile


def test_a_generated_source_cut_short_is_rewritten(tmp_path, monkeypatch):
    monkeypatch.setenv("LIGHTMOD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(fused, "_folder", None)
    source = "VALUE = 40 + 2\n"
    name = "lightmod_cut_%s" % fused.source_digest(source)
    folder = fused._cache_dir()
    with open(os.path.join(folder, name + ".py"), "w") as f:
        f.write("VALUE = 4")                             # what a writer killed midway leaves
    mod = fused.load_module("cut", source)
    assert mod.VALUE == 42
    with open(os.path.join(folder, name + ".py")) as f:
        assert f.read() == source
    assert [n for n in os.listdir(folder) if n.endswith(".tmp")] == []
