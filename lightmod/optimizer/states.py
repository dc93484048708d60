"""Optimizer-state pickles (``.states`` files) in MXNet 1.9.1's layout, read safely.

MXNet's ``Updater.get_states`` pickles the states dict (or ``(states, optimizer)``); NDArrays
pickle as ``mxnet.ndarray.ndarray.NDArray`` rebuilt from ``{'handle': <raw array record>}``.
``dumps_states`` writes exactly that (lightmod's NDArrays, optimizers and schedulers are named by
their MXNet class paths), so MXNet 1.9.1 loads the bytes, and ``loads_states`` reads MXNet's.

Reading never runs arbitrary code: the unpickler resolves only the globals such a file can
legitimately name (numpy's array reconstruction, NDArray under MXNet's or lightmod's path,
registered optimizers and lightmod's learning-rate schedulers under either path, a few
builtins), then checks the structure. Anything else raises MXNetError.
"""
import copyreg
import io
import pickle

import numpy as np

from .. import lr_scheduler as _lr_scheduler
from ..base import MXNetError
from ..ndarray import NDArray
from .optimizer import Optimizer

__all__ = ["dumps_states", "loads_states", "check_state_fits", "check_states_fit"]

_SCHEDULERS = {name: getattr(_lr_scheduler, name) for name in _lr_scheduler.__all__}
_OWN_OPTIMIZER_MODULE = "lightmod.optimizer.optimizer"


# ---------------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------------
def _mxnet_name(obj):
    """The (module, name) MXNet knows ``obj`` by, or None to pickle it normally."""
    if isinstance(obj, type):
        if issubclass(obj, NDArray):
            return "mxnet.ndarray.ndarray", "NDArray"
        if obj.__module__ == _OWN_OPTIMIZER_MODULE and issubclass(obj, Optimizer):
            return "mxnet.optimizer.optimizer", obj.__name__
        if obj.__module__ == _lr_scheduler.__name__ and _SCHEDULERS.get(obj.__name__) is obj:
            return "mxnet.lr_scheduler", obj.__name__
    module = getattr(obj, "__module__", None) or ""
    if module.startswith("numpy._core"):
        # numpy 2 names its internals numpy._core; numpy 1.x (MXNet's) only knows numpy.core
        return "numpy.core" + module[len("numpy._core"):], obj.__name__
    return None


class _MXNetPickler(pickle._Pickler):
    """The reference pickler with two substitutions: NDArrays reduce like MXNet's
    (``NDArray(None)`` + the raw record as state) and globals get their MXNet names."""

    def reducer_override(self, obj):
        if isinstance(obj, NDArray):
            return NDArray, (None,), obj.__getstate__()
        return NotImplemented

    def save_global(self, obj, name=None):
        target = _mxnet_name(obj)
        if target is None:
            return super().save_global(obj, name)
        module, qualname = target
        if self.proto >= 4:
            self.save(module)
            self.save(qualname)
            self.write(pickle.STACK_GLOBAL)
        else:
            self.write(pickle.GLOBAL + (module + "\n" + qualname + "\n").encode("utf-8"))
        self.memoize(obj)
        return None


def dumps_states(obj, protocol=4):
    """Pickle optimizer states (or ``(states, optimizer)``) so that MXNet 1.9.1 can load them."""
    buf = io.BytesIO()
    _MXNetPickler(buf, protocol=protocol).dump(obj)
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------------------------
def _latin1_bytes(text, encoding="latin1"):
    """``_codecs.encode`` as protocol-2 pickles use it for bytes (latin1 only)."""
    if encoding not in ("latin1", "latin-1") or not isinstance(text, str):
        raise MXNetError("unexpected _codecs.encode(%r) in a states pickle" % (encoding,))
    return text.encode("latin1")


def _reconstructor(cls, base, state):
    """``copyreg._reconstructor`` (protocol 0/1 objects), for optimizers and schedulers only."""
    if base is not object or not isinstance(cls, type) or not (
            issubclass(cls, Optimizer) or issubclass(cls, _lr_scheduler.LRScheduler)):
        raise MXNetError("unexpected object reconstruction of %r in a states pickle" % (cls,))
    return copyreg._reconstructor(cls, base, state)


def _numpy_global(name):
    for module in ("numpy._core.multiarray", "numpy.core.multiarray", "numpy._core.numeric",
                   "numpy.core.numeric"):
        try:
            mod = __import__(module, fromlist=[name])
            return getattr(mod, name)
        except (ImportError, AttributeError):
            continue
    raise MXNetError("numpy has no %s" % name)


_NUMPY_GLOBALS = {
    ("multiarray", "_reconstruct"), ("multiarray", "scalar"), ("numeric", "_frombuffer")}
_BUILTINS = {"set": set, "frozenset": frozenset, "bytearray": bytearray, "bytes": bytes,
             "complex": complex, "object": object}


def _allowed_global(module, name):
    """The object a states pickle may name as ``module.name``, or None."""
    if module == "builtins":
        return _BUILTINS.get(name)
    if module == "_codecs" and name == "encode":
        return _latin1_bytes
    if module == "copyreg" and name == "_reconstructor":
        return _reconstructor
    if module == "numpy" and name in ("ndarray", "dtype"):
        return getattr(np, name)
    if module.startswith(("numpy.core.", "numpy._core.")):
        if (module.rsplit(".", 1)[1], name) in _NUMPY_GLOBALS:
            return _numpy_global(name)
        return None
    if name in ("NDArray", "RowSparseNDArray", "CSRNDArray") and module in (
            "mxnet.ndarray.ndarray", "mxnet.ndarray", "mxnet.ndarray.sparse",
            "lightmod.ndarray.ndarray", "lightmod.ndarray", "lightmod.ndarray.sparse"):
        return NDArray
    if module in ("mxnet.lr_scheduler", _lr_scheduler.__name__):
        return _SCHEDULERS.get(name)
    if module in ("mxnet.optimizer.optimizer", "mxnet.optimizer", _OWN_OPTIMIZER_MODULE,
                  "lightmod.optimizer"):
        own = getattr(__import__(_OWN_OPTIMIZER_MODULE, fromlist=[name]), name, None)
        if isinstance(own, type) and issubclass(own, Optimizer):
            return own
    # optimizers registered by the user, named by their own module path
    for klass in list(Optimizer.opt_registry.values()):
        if klass.__module__ == module and klass.__qualname__ == name:
            return klass
    return None


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        obj = _allowed_global(module, name)
        if obj is None:
            raise MXNetError("a states pickle may not reference %s.%s" % (module, name))
        return obj


_PLAIN = (type(None), bool, int, float, complex, str, bytes, np.generic, np.ndarray)


def _check_value(value, where):
    """States hold None, NDArrays, numbers/numpy values and tuples/lists/dicts of them;
    NDArrays come back as the subclass of their storage type."""
    if isinstance(value, NDArray):
        data = getattr(value, "_data", None)
        if not isinstance(data, np.ndarray):
            raise MXNetError("%s: an NDArray in the pickle has no array data" % where)
        if value.stype != "default" and type(value) is NDArray:
            return NDArray(value._data, value._ctx, value._stype)
        return value
    if isinstance(value, (tuple, list)):
        items = [_check_value(v, where) for v in value]
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, dict):
        return {k: _check_value(v, where) for k, v in value.items()}
    if isinstance(value, _PLAIN):
        return value
    raise MXNetError("%s: unexpected %s in optimizer states" % (where, type(value).__name__))


def _check_states(states, where):
    if not isinstance(states, dict):
        raise MXNetError("%s: expected a dict of states, got %s" % (where, type(states).__name__))
    for key in states:
        if not isinstance(key, (int, str, bytes)):
            raise MXNetError("%s: unexpected state key %r" % (where, key))
    return {k: _check_value(v, where) for k, v in states.items()}


def loads_states(data, where="Updater.set_states"):
    """Unpickle optimizer states: a dict, or ``(dict, optimizer)``; MXNetError otherwise."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise MXNetError("%s: expected the bytes of a states pickle, got %s"
                         % (where, type(data).__name__))
    try:
        loaded = _RestrictedUnpickler(io.BytesIO(bytes(data)), encoding="latin1").load()
    except MXNetError as err:
        raise MXNetError("%s: refusing the optimizer states: %s" % (where, err)) from None
    except Exception as err:   # corrupt input fails in many ways (EOF, bad opcode, ...)
        raise MXNetError("%s: cannot read the optimizer states (corrupt or not a states "
                         "pickle): %s: %s" % (where, type(err).__name__, err)) from None
    if isinstance(loaded, tuple) and len(loaded) == 2:
        states, optimizer = loaded
        if not isinstance(optimizer, Optimizer):
            raise MXNetError("%s: the pickle pairs the states with a %s, not an Optimizer"
                             % (where, type(optimizer).__name__))
        return _check_states(states, where), optimizer
    return _check_states(loaded, where)


# ---------------------------------------------------------------------------------------------
# loaded states against the parameters they will update
# ---------------------------------------------------------------------------------------------
def _describe(value):
    if isinstance(value, NDArray):
        return "an array of shape %s and dtype %s" % (tuple(value.shape),
                                                      np.dtype(value.dtype).name)
    if value is None:
        return "no state"
    if isinstance(value, (tuple, list)):
        return "a %s of %d states" % (type(value).__name__, len(value))
    return "a %s" % type(value).__name__


def _compare_state(loaded, expected, path):
    """The first difference between a loaded state and the one the optimizer creates for its
    weight, as (path, loaded, expected), or None. Only arrays are compared (shape, dtype) and
    the nesting around them; plain numbers may differ."""
    if isinstance(expected, NDArray):
        if (not isinstance(loaded, NDArray) or tuple(loaded.shape) != tuple(expected.shape)
                or np.dtype(loaded.dtype) != np.dtype(expected.dtype)):
            return path, loaded, expected
        return None
    if isinstance(expected, (tuple, list)):
        if not isinstance(loaded, (tuple, list)) or len(loaded) != len(expected):
            return path, loaded, expected
        for i, (got, want) in enumerate(zip(loaded, expected)):
            found = _compare_state(got, want, "%s[%d]" % (path, i))
            if found:
                return found
        return None
    if expected is None and loaded is not None:
        return path, loaded, expected
    return None


def check_state_fits(updater, key, weight, name=None, where="optimizer states"):
    """Raise MXNetError unless ``updater.states[key]`` has the layout (array shapes, dtypes)
    ``updater.optimizer`` creates for ``weight``: a loaded states file of another network must
    not reach the update kernels."""
    expected = updater.optimizer.create_state_multi_precision(key, weight)
    found = _compare_state(updater.states[key], expected, "state")
    if found is None:
        return
    path, loaded, wanted = found
    if name is None:
        name = getattr(updater.optimizer, "idx2name", {}).get(key, key)
    raise MXNetError(
        "%s: the %s of parameter %r (key %r) is %s, but a parameter of shape %s and dtype %s "
        "needs %s (states saved for another network or optimizer?)"
        % (where, path, name, key, _describe(loaded), tuple(weight.shape),
           np.dtype(weight.dtype).name, _describe(wanted)))


def check_states_fit(updater, weights, names, where="load_optimizer_states"):
    """Check every loaded state against its weight (``weights``/``names``: key -> parameter
    array / name); a state whose key names no parameter is refused too."""
    for key in updater.states:
        if key not in weights:
            raise MXNetError(
                "%s: the states file holds a state for key %r, but the model's parameters have "
                "the keys %s (states saved for a larger network?)"
                % (where, key, sorted(weights, key=str)))
        check_state_fits(updater, key, weights[key], names[key], where)
