"""One source stamp for every kernel numba caches on disk: the whole ``kernels`` package.

numba's ``cache=True`` keys a compiled function by the content of the file that defines it, and
by nothing else. Most kernels here inline math from other files (``scalar*.py``,
``*_math.py``, helpers of another family); after such a file changes (an upgrade of lightmod
over an old install, a checkout of another commit, an edit) the callers' cache entries still
match their own unchanged files, and numba would keep running the old machine code.

Importing this module (each kernel module does, before it decorates anything: the stamp is read
when ``njit(cache=True)`` builds the function's cache) puts a locator in front of numba's: for
a file inside a registered root it takes the location numba would have chosen, but stamps the
entry with the file's own stamp *and* a digest of every ``.py`` file under the root. Any change
anywhere in the package then makes every entry stale, and numba recompiles and overwrites it.
Files elsewhere keep numba's own behaviour.

The digest (SHA-256 over the sorted relative paths and contents, ~650 kB) is computed once per
process, when the first kernel is decorated: a few milliseconds.
"""
import hashlib
import os
import threading

__all__ = ["tree_digest", "package_digest", "register_root", "installed"]

_ROOT = os.path.dirname(os.path.abspath(__file__))
_roots = {}             # root folder (absolute, with a trailing separator) -> digest or None
_lock = threading.Lock()
_stamped_classes = {}   # numba locator class -> its subclass with the package stamp
_installed = False


def tree_digest(root):
    """Hex digest of the ``.py`` files under ``root``: their paths relative to it and their
    contents, in sorted order (``__pycache__`` folders skipped)."""
    h = hashlib.sha256()
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            h.update(os.path.relpath(path, root).replace(os.sep, "/").encode() + b"\0")
            with open(path, "rb") as f:
                h.update(f.read())
            h.update(b"\0")
    return h.hexdigest()[:32]


def _root_of(path):
    path = os.path.abspath(path)
    for root in _roots:
        if path.startswith(root):
            return root
    return None


def _digest_of(root):
    with _lock:
        if _roots[root] is None:
            _roots[root] = tree_digest(root)
        return _roots[root]


def package_digest():
    """The digest of this ``kernels`` package (the stamp every cached kernel carries)."""
    return _digest_of(_ROOT + os.sep)


def _stamped(base):
    """The subclass of numba locator class ``base`` whose source stamp adds the root's
    digest to the file's own stamp."""
    cls = _stamped_classes.get(base)
    if cls is None:
        def get_source_stamp(self):
            return (base.get_source_stamp(self), _digest_of(self._lightmod_root))
        cls = type("PackageStamped" + base.__name__, (base,),
                   {"get_source_stamp": get_source_stamp})
        _stamped_classes[base] = cls
    return cls


class PackageStampLocator:
    """Put first in numba's locator list: defers to the locator numba would pick, for files
    under a registered root only, and re-stamps what it returns."""

    @classmethod
    def from_function(cls, py_func, py_file):
        root = _root_of(py_file)
        if root is None:
            return None
        from numba.core.caching import CacheImpl
        for other in CacheImpl._locator_classes:
            if other is cls:
                continue
            locator = other.from_function(py_func, py_file)
            if locator is not None:
                locator.__class__ = _stamped(type(locator))
                locator._lightmod_root = root
                return locator
        return None


def _install():
    """Insert the locator in numba's list (once). False when this numba has no such list
    (its caching internals changed): numba's own per-file stamps then apply, and
    tests/test_cache_stamp.py says so."""
    global _installed
    if _installed:
        return True
    try:
        from numba.core.caching import CacheImpl
        classes = CacheImpl._locator_classes
    except (ImportError, AttributeError):
        return False
    if PackageStampLocator not in classes:
        classes.insert(0, PackageStampLocator)
    _installed = True
    return True


def register_root(root):
    """Stamp every cached function defined under folder ``root`` with that folder's digest
    (this package registers itself on import; tests register a folder of their own)."""
    key = os.path.join(os.path.abspath(root), "")
    with _lock:
        _roots.setdefault(key, None)
    return _install()


def installed():
    """Whether the package stamp is active (numba's locator list accepted it)."""
    return _installed


register_root(_ROOT)
