"""Errors and small helpers shared by every part of lightmod."""
import ctypes
import numbers
import os
import platform
import warnings

import numpy as np

__all__ = ["MXNetError", "MXNetIndexError", "NotBoundError", "NotImplementedForSymbol",
           "string_types", "numeric_types", "integer_types", "py_str", "check_state",
           "mx_real_t", "NDArrayHandle", "SymbolHandle", "mx_uint", "mx_float", "data_dir",
           "data_dir_default"]

string_types = (str,)
numeric_types = (float, int, np.generic)
integer_types = (int, np.integer)

# MXNet's default real type (float32), as user code reads it from mx.base
mx_real_t = np.float32
# The ctypes types MXNet's C API uses. lightmod has no C library: an NDArrayHandle holds an id
# that ``NDArray(handle)`` turns back into the array a monitor callback was given (see
# ndarray.NDArray), so MXNet's ``NDArray(ctypes.cast(arr, NDArrayHandle))`` idiom works.
NDArrayHandle = ctypes.c_void_p
SymbolHandle = ctypes.c_void_p
mx_uint = ctypes.c_uint
mx_float = ctypes.c_float


def data_dir_default():
    """Where MXNet keeps downloaded data unless MXNET_HOME says otherwise: %APPDATA%\\mxnet on
    Windows, ~/.mxnet elsewhere."""
    if platform.system() == "Windows":
        return os.path.join(os.environ.get("APPDATA", ""), "mxnet")
    return os.path.join(os.path.expanduser("~"), ".mxnet")


def data_dir():
    """The data directory: $MXNET_HOME when set, else :func:`data_dir_default`."""
    return os.environ.get("MXNET_HOME", data_dir_default())


class MXNetError(RuntimeError):
    """The error lightmod raises where MXNet 1.9.1 raises ``mxnet.base.MXNetError``."""


class MXNetIndexError(MXNetError, IndexError):
    """An index out of bounds: MXNet reports these as ``IndexError`` (its error messages
    starting with "IndexError" become that Python type)."""


class NotImplementedForSymbol(MXNetError):
    """An NDArray-only operation was tried on a Symbol (``bool(sym)``, ``sym += 1``...)."""

    def __init__(self, function, alias, *args):
        super().__init__()
        self.function = function.__name__
        self.alias = alias
        self.args = [str(type(a)) for a in args]

    def __str__(self):
        msg = "Function %s" % self.function
        if self.alias:
            msg += " (namely operator \"%s\")" % self.alias
        if self.args:
            msg += " with arguments (%s)" % ", ".join(self.args)
        return msg + " is not implemented for Symbol and only available in NDArray."


class NotBoundError(MXNetError, AssertionError):
    """A lifecycle step was skipped (bind before init_params, ...).

    It is an AssertionError too, because MXNet uses bare asserts there and old code catches
    AssertionError; raising it explicitly keeps the check under ``python -O``.
    """


def check_state(condition, message):
    """Raise NotBoundError(message) unless condition holds (MXNet's lifecycle asserts)."""
    if not condition:
        raise NotBoundError(message)


def check_arg(condition, message, exc=MXNetError):
    """Raise exc(message) unless condition holds (MXNet's argument asserts)."""
    if not condition:
        raise exc(message)


def _as_list(obj):
    """``obj`` if it is a list or tuple, else ``[obj]`` (MXNet's helper; user code imports it)."""
    return obj if isinstance(obj, (list, tuple)) else [obj]


_CURRENT_DEPRECATED = ("%s.current has been deprecated. It is advised to use the `with` "
                       "statement with %s.")


def _scope_root(cls):
    """The class of ``cls``'s scope family that holds the thread-local ``_current``."""
    return next(c for c in cls.__mro__ if "_current" in vars(c))


def current_scope(root):
    """The scope of ``root``'s family in force in this thread (a ``root()`` is created the
    first time a thread asks)."""
    scope = getattr(root._current, "value", None)
    if scope is None:
        scope = root._current.value = root()
    return scope


class ThreadScopeMeta(type):
    """Metaclass of the thread-local scopes (AttrScope, NameManager): ``Scope.current`` is a
    (deprecated) property of the class itself, as in MXNet."""

    @property
    def current(cls):
        root = _scope_root(cls)
        warnings.warn(_CURRENT_DEPRECATED % (root.__name__, root.__name__), DeprecationWarning,
                      stacklevel=2)
        return current_scope(root)

    @current.setter
    def current(cls, value):
        root = _scope_root(cls)
        warnings.warn(_CURRENT_DEPRECATED % (root.__name__, root.__name__), DeprecationWarning,
                      stacklevel=2)
        root._current.value = value


def unimplemented_property(message, doc=None):
    """A property of an interface that each subclass defines (``doc`` says what it is):
    reading it where none did raises NotImplementedError(``message % <class name>``)."""

    def missing(self):
        raise NotImplementedError(message % type(self).__name__)

    return property(missing, doc=doc)


def py_str(x):
    return x.decode("utf-8") if isinstance(x, bytes) else x


def is_number(x):
    return isinstance(x, numbers.Number) and not isinstance(x, bool) or isinstance(x, np.generic)


# MXNet's dtype numbers (type_flag), used by `__dtype__` attributes and the .params format.
DTYPE_MX_TO_NP = {0: np.float32, 1: np.float64, 2: np.float16, 3: np.uint8, 4: np.int32,
                  5: np.int8, 6: np.int64, 7: np.bool_, 8: np.int16, 9: np.uint16,
                  10: np.uint32, 11: np.uint64}
DTYPE_NP_TO_MX = {np.dtype(v).name: k for k, v in DTYPE_MX_TO_NP.items()}


def dtype_np(dtype):
    """Normalise a dtype given as a name, numpy type or MXNet type number to np.dtype."""
    if dtype is None:
        return np.dtype(np.float32)
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
        if int(dtype) not in DTYPE_MX_TO_NP:
            raise MXNetError("unknown MXNet dtype number %r" % dtype)
        return np.dtype(DTYPE_MX_TO_NP[int(dtype)])
    try:
        return np.dtype(dtype)
    except TypeError:
        raise MXNetError("unknown dtype %r" % (dtype,)) from None


def atomic_write(fname, data):
    """Write ``data`` (bytes or str) to ``fname`` so that it is never seen half-written.

    The bytes go to a temporary file in the same directory (created with O_EXCL and mode 0o666,
    so the user's umask applies as for a plain ``open``), are flushed to disk, and the file is
    renamed over ``fname`` and the folder is synced, so the rename survives a power cut too.
    A crash leaves either the old file or the new one (and perhaps the temporary file, which
    ``mx.model.write_checkpoint`` deletes at its next save). A missing folder raises
    FileNotFoundError naming ``fname``.
    """
    import os
    import uuid
    if isinstance(data, str):
        data = data.encode("utf-8")
    fname = os.fspath(fname)
    directory = os.path.dirname(os.path.abspath(fname))
    tmp = os.path.join(directory, ".%s.%s.tmp" % (os.path.basename(fname), uuid.uuid4().hex))
    if not os.path.isdir(directory):
        raise FileNotFoundError(2, "cannot write %s: folder %s does not exist" % (fname, directory),
                                fname)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, fname)
        _fsync_folder(directory)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _fsync_folder(directory):
    """fsync a folder (where the OS allows it: not on Windows)."""
    import os
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
