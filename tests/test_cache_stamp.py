"""Cached kernels carry a digest of the whole kernels package (kernels/cache_stamp.py): numba
alone keys an on-disk entry by its own file, so a kernel whose inlined math lives in another
file would keep stale machine code after that file changed."""
import importlib
import os
import pkgutil
import subprocess
import sys
import textwrap

import pytest

from lightmod.kernels import cache_stamp, fused

numba_caching = pytest.importorskip("numba.core.caching")


def test_the_locator_is_installed_first():
    assert cache_stamp.installed()
    assert numba_caching.CacheImpl._locator_classes[0] is cache_stamp.PackageStampLocator


def _kernel_modules():
    import lightmod.kernels as K
    names = [K.__name__ + "." + m.name for m in pkgutil.walk_packages(K.__path__)
             if ".cuda" not in "." + m.name]
    mods = []
    for name in names:
        if name.endswith(("cuda_support", "float16")) or ".cuda." in name:
            continue
        try:
            mods.append(importlib.import_module(name))
        except ImportError:
            continue
    return mods


def _dispatchers(value):
    from numba.core.dispatcher import Dispatcher
    if isinstance(value, Dispatcher):
        yield value
    for attr in ("serial", "parallel"):      # jit.ParallelLoop's two builds
        inner = getattr(type(value), "__slots__", ()) and getattr(value, attr, None)
        if isinstance(inner, Dispatcher):
            yield inner


def test_every_cached_kernel_of_the_package_is_stamped():
    seen, unstamped = 0, []
    for mod in _kernel_modules():
        for name, value in vars(mod).items():
            for disp in _dispatchers(value):
                impl = getattr(disp._cache, "_impl", None)
                if impl is None or disp.py_func.__module__ != mod.__name__:
                    continue            # not cached, or imported from another module
                seen += 1
                locator = impl._locator
                if not type(locator).__name__.startswith("PackageStamped"):
                    unstamped.append("%s.%s" % (mod.__name__, name))
                else:
                    stamp = locator.get_source_stamp()
                    assert stamp[1] == cache_stamp.package_digest()
    assert seen > 100
    assert unstamped == []


def _write(folder, name, text):
    with open(os.path.join(folder, name), "w") as f:
        f.write(textwrap.dedent(text))


def test_tree_digest_follows_contents_and_paths_only(tmp_path):
    root = str(tmp_path)
    _write(root, "a.py", "x = 1\n")
    os.makedirs(os.path.join(root, "sub", "__pycache__"))
    _write(os.path.join(root, "sub"), "b.py", "y = 2\n")
    first = cache_stamp.tree_digest(root)
    assert cache_stamp.tree_digest(root) == first
    _write(os.path.join(root, "sub", "__pycache__"), "junk.py", "z = 3\n")
    _write(root, "notes.txt", "not python\n")
    os.utime(os.path.join(root, "a.py"), (1, 1))
    assert cache_stamp.tree_digest(root) == first       # caches, other files, times: no
    _write(root, "a.py", "x = 2\n")
    changed = cache_stamp.tree_digest(root)
    assert changed != first
    os.rename(os.path.join(root, "sub", "b.py"), os.path.join(root, "sub", "c.py"))
    assert cache_stamp.tree_digest(root) not in (first, changed)


_RUN = textwrap.dedent(r"""
    import sys
    root, stamp = sys.argv[1], sys.argv[2] == "stamp"
    if stamp:
        from lightmod.kernels import cache_stamp
        assert cache_stamp.register_root(root)
    sys.path.insert(0, root)
    import caller
    print(caller.twice(3.0), sum(caller.twice.stats.cache_hits.values()))
""")


def _run(root, mode, cache_dir):
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    env.pop("NUMBA_DISABLE_JIT", None)
    proc = subprocess.run([sys.executable, "-c", _RUN, root, mode], capture_output=True,
                          text=True, env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    value, hits = proc.stdout.split()
    return float(value), int(hits)


@pytest.mark.parametrize("mode", ["stamp", "plain"])
def test_an_edit_of_inlined_math_in_another_file_recompiles_the_caller(tmp_path, mode):
    root = str(tmp_path / "pkg")
    os.makedirs(root)
    _write(root, "callee.py", """
        from numba import njit
        @njit(inline="always")
        def scale(x):
            return x * 2.0
    """)
    _write(root, "caller.py", """
        from numba import njit
        from callee import scale
        @njit(cache=True)
        def twice(x):
            return scale(x) + 0.5
    """)
    cache_dir = str(tmp_path / "numba_cache")
    assert _run(root, mode, cache_dir) == (6.5, 0)      # compiled and stored
    assert _run(root, mode, cache_dir) == (6.5, 1)      # loaded from the cache
    _write(root, "callee.py", """
        from numba import njit
        @njit(inline="always")
        def scale(x):
            return x * 10.0
    """)
    value, hits = _run(root, mode, cache_dir)
    if mode == "stamp":
        assert (value, hits) == (30.5, 0)               # the new math, recompiled
        assert _run(root, mode, cache_dir) == (30.5, 1)
    else:
        # numba's own stamp sees only caller.py, unchanged: the stale machine code runs. This
        # is what the package stamp exists for (if numba ever tracks callees, this flips).
        assert (value, hits) == (6.5, 1)


def test_generated_sources_are_keyed_by_the_package(monkeypatch):
    source = "x = 1\n"
    first = fused.source_digest(source)
    assert fused.source_digest(source) == first
    assert fused.source_digest(source + "\n") != first
    monkeypatch.setattr(cache_stamp, "package_digest", lambda: "another version")
    assert fused.source_digest(source) != first


def test_generated_sources_live_in_a_folder_per_package_version(tmp_path, monkeypatch):
    monkeypatch.setenv("LIGHTMOD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(fused, "_folder", None)
    old = tmp_path / "fused" / "v-0000000000000000"
    old.mkdir(parents=True)
    os.utime(old, (1, 1))                               # unused for decades
    folder = fused._cache_dir()
    assert folder == str(tmp_path / "fused" / ("v-" + cache_stamp.package_digest()[:16]))
    assert os.path.isdir(folder) and not old.exists()
    mod = fused.load_module("probe", "VALUE = 41 + 1\n")
    assert mod.VALUE == 42 and os.path.dirname(mod.__file__) == folder
    assert fused._cache_dir() == folder                 # decided once per process


def test_pruning_removes_only_stale_version_folders(tmp_path):
    root = tmp_path
    now = 10 ** 9
    stale = fused.STALE_FOLDER_SECONDS
    for name, age in [("v-stale", stale + 60), ("v-recent", stale - 60), ("v-mine", stale * 3),
                      ("other", stale * 3)]:
        (root / name / "__pycache__").mkdir(parents=True)
        (root / name / "m.py").write_text("x = 1\n")
        os.utime(root / name, (now - age, now - age))
    (root / "v-file").write_text("not a folder")
    os.utime(root / "v-file", (1, 1))
    fused._prune(str(root), "v-mine", now)
    assert sorted(os.listdir(root)) == ["other", "v-file", "v-mine", "v-recent"]
    fused._prune(str(root / "missing"), "v-mine", now)  # no folder: nothing to do
