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

Several processes share these cache folders (pytest-xdist workers, training jobs, a dist
kvstore's ranks on one machine). numba's own cache file is not safe for that: an entry is
written as a read-modify-write of one index per function (``<function>.nbi``), which maps each
signature to a data file numbered by the first free number *in the index this process read*.
Two processes storing two signatures of one function at the same time both read the same
index, both pick ``.1.nbc`` and each writes its own index: one signature is lost, and the index
left behind can name the data file of the other signature, so the next process loads a kernel
compiled for other types (a typing error, an unboxing error, or the wrong machine code run on
the arrays). An index written for a new stamp also names data files still holding the old
stamp's code until each is rewritten. numba's dispatchers therefore build their caches from
:class:`EntryFunctionCache` (installed with the locator), which for the kernels of a
registered root and the generated modules of a registered folder (``kernels/fused.py``) uses
:class:`EntryCacheFile`: one data file per entry, named by its signature and target, holding
the stamp and the full key next to the code; written whole under a temporary name and renamed;
loaded only when stamp and key match (anything else, or a file that does not read, is a miss:
numba compiles and rewrites it). No index is shared, so no write can lose or misdirect another.
Storing an entry that fails (numba's serialization, a full disk) only skips the disk copy: the
compiled kernel is already in use. Every other function keeps numba's cache unchanged.
"""
import hashlib
import logging
import os
import pickle
import threading

__all__ = ["tree_digest", "package_digest", "register_root", "register_generated_folder",
           "installed"]

_log = logging.getLogger(__name__)

_ROOT = os.path.dirname(os.path.abspath(__file__))
_roots = {}             # root folder (absolute, with a trailing separator) -> digest or None
_generated = set()      # folders of generated modules (absolute, trailing separator)
_lock = threading.Lock()
_stamped_classes = {}   # (kind, numba locator class) -> its subclass for our functions
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


def _in_generated_folder(path):
    path = os.path.abspath(path)
    return any(path.startswith(folder) for folder in _generated)


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
    digest to the file's own stamp (and whose functions use :class:`EntryCacheFile`)."""
    key = ("stamped", base)
    cls = _stamped_classes.get(key)
    if cls is None:
        def get_source_stamp(self):
            return (base.get_source_stamp(self), _digest_of(self._lightmod_root))
        cls = type("PackageStamped" + base.__name__, (base,),
                   {"get_source_stamp": get_source_stamp, "lightmod_entries": True})
        _stamped_classes[key] = cls
    return cls


def _generated_locator(base):
    """The subclass of numba locator class ``base`` for a generated module: numba's own stamp
    (the module's name already carries the package digest), :class:`EntryCacheFile`."""
    key = ("generated", base)
    cls = _stamped_classes.get(key)
    if cls is None:
        cls = type("Generated" + base.__name__, (base,), {"lightmod_entries": True})
        _stamped_classes[key] = cls
    return cls


class PackageStampLocator:
    """Put first in numba's locator list: defers to the locator numba would pick, for files
    under a registered root or generated folder only, and re-classes what it returns."""

    @classmethod
    def from_function(cls, py_func, py_file):
        root = _root_of(py_file)
        if root is None and not _in_generated_folder(py_file):
            return None
        from numba.core.caching import CacheImpl
        for other in CacheImpl._locator_classes:
            if other is cls:
                continue
            locator = other.from_function(py_func, py_file)
            if locator is not None:
                if root is None:
                    locator.__class__ = _generated_locator(type(locator))
                else:
                    locator.__class__ = _stamped(type(locator))
                    locator._lightmod_root = root
                return locator
        return None


def _ready_for_machine_code(target_context):
    """Prepare numba's CPU target for loading cached machine code, without a refresh.

    numba refreshes the whole target context before every cache load. The first refresh of a
    process imports and installs every registry of numba's own implementations (lists, dicts,
    unicode, random, linalg, datetime, ...): about 0.3 s, most of a warm first training pass.
    A cached kernel needs none of them: it is machine code, linked against numba's C helpers
    (in the symbol table from the context's creation) and its runtime (NRT), whose symbols are
    registered by ``rtsys.initialize``, the one part of the refresh done here. Compiling
    anything still refreshes the context first (numba's compiler does that itself)."""
    try:
        from numba.core.runtime import rtsys
    except ImportError:     # another numba: its own full preparation
        target_context.refresh()
        return
    rtsys.initialize(target_context)    # once per process; later calls return at once


def _entry_classes():
    """(EntryCacheFile, EntryFunctionCache), built on numba's classes when first needed."""
    from numba.core import caching

    class EntryCacheFile(caching.IndexDataCacheFile):
        """numba's cache file without the shared index: one file per entry, named by a digest
        of the entry's signature and target (``<function>.<digest>.nbc``; a new stamp or an
        edited function rewrites the same file), holding numba's version, then the pickled
        (stamp, key, compiled code). Written under a unique temporary name and renamed into
        place (numba's ``_open_for_write``), so a reader sees a whole file or none."""

        def _entry_name(self, key):
            sig, target = key[0], key[1]
            text = repr((sig, target)).encode()
            return "%s.%s.nbc" % (self._index_name[:-len(".nbi")],
                                  hashlib.sha256(text).hexdigest()[:20])

        def save(self, key, data):
            payload = self._dump((self._source_stamp, key, data))
            with self._open_for_write(self._data_path(self._entry_name(key))) as f:
                pickle.dump(self._version, f, protocol=-1)
                f.write(payload)

        def load(self, key):
            path = self._data_path(self._entry_name(key))
            try:
                with open(path, "rb") as f:
                    if pickle.load(f) != self._version:
                        return None     # another numba wrote it: its pickles may not load
                    stamp, stored_key, data = pickle.loads(f.read())
            except FileNotFoundError:
                return None
            except Exception as exc:    # truncated, foreign or unreadable: compile again
                _log.debug("unreadable cache entry %s (%s): recompiling", path, exc)
                return None
            if stamp != self._source_stamp or stored_key != key:
                return None             # older code, or another entry: compile again
            return data

        def flush(self):
            prefix = self._index_name[:-len("nbi")]
            try:
                names = os.listdir(self._cache_path)
            except OSError:
                return
            for name in names:
                if name.startswith(prefix) and name.endswith(".nbc"):
                    try:
                        os.unlink(os.path.join(self._cache_path, name))
                    except OSError:
                        pass

    class EntryFunctionCache(caching.FunctionCache):
        """numba's per-function cache; for the functions of lightmod's locators, with
        :class:`EntryCacheFile` and a store that never fails the call."""

        def __init__(self, py_func):
            super().__init__(py_func)
            if getattr(self._impl.locator, "lightmod_entries", False):
                numbered = self._cache_file
                self._cache_file = EntryCacheFile(self._cache_path, self._impl.filename_base,
                                                  numbered._source_stamp)

        def load_overload(self, sig, target_context):
            if not isinstance(self._cache_file, EntryCacheFile):
                return super().load_overload(sig, target_context)
            try:
                _ready_for_machine_code(target_context)
                with self._guard_against_spurious_io_errors():
                    return self._load_overload(sig, target_context)
            except Exception as exc:    # an entry that does not rebuild: compile it again
                _log.warning("numba cache: %s not loaded (%s: %s); compiling it",
                             self._name, type(exc).__name__, exc)
                return None

        def save_overload(self, sig, data):
            if not isinstance(self._cache_file, EntryCacheFile):
                return super().save_overload(sig, data)
            # the kernel is compiled and in use already: a failed store only loses its disk
            # copy (the next process compiles it again)
            try:
                super().save_overload(sig, data)
            except Exception as exc:
                _log.warning("numba cache: %s not stored (%s: %s)",
                             self._name, type(exc).__name__, exc)

    return EntryCacheFile, EntryFunctionCache


EntryCacheFile = EntryFunctionCache = None     # numba's subclasses, once installed


def _install():
    """Insert the locator in numba's list and the entry cache in numba's dispatcher (once).
    False when this numba lacks either (its caching internals changed): numba's own per-file
    stamps and cache files then apply, and tests/test_cache_stamp.py says so."""
    global _installed, EntryCacheFile, EntryFunctionCache
    if _installed:
        return True
    try:
        from numba.core import dispatcher
        from numba.core.caching import CacheImpl, FunctionCache
        classes = CacheImpl._locator_classes
        EntryCacheFile, EntryFunctionCache = _entry_classes()
    except (ImportError, AttributeError):
        return False
    if PackageStampLocator not in classes:
        classes.insert(0, PackageStampLocator)
    # the dispatcher builds its cache from this name; replaced only while it is numba's own
    # (another library's replacement stays, and our functions keep numba's cache file)
    if dispatcher.FunctionCache is FunctionCache:
        dispatcher.FunctionCache = EntryFunctionCache
    _installed = True
    return True


def register_root(root):
    """Stamp every cached function defined under folder ``root`` with that folder's digest
    (this package registers itself on import; tests register a folder of their own)."""
    key = os.path.join(os.path.abspath(root), "")
    with _lock:
        _roots.setdefault(key, None)
    return _install()


def register_generated_folder(folder):
    """Give the cached functions of the generated modules under ``folder`` the entry cache
    (their own stamp: a generated module's name carries the package digest)."""
    key = os.path.join(os.path.abspath(folder), "")
    with _lock:
        _generated.add(key)
    return _install()


def installed():
    """Whether the package stamp and the entry cache are active (numba's locator list and
    dispatcher accepted them)."""
    return _installed


register_root(_ROOT)
