"""Devices: Context, cpu(), gpu(), current_context()."""
import threading
import warnings

from .base import MXNetError

__all__ = ["Context", "cpu", "gpu", "cpu_pinned", "current_context", "num_gpus", "gpu_memory_info"]


_DEFAULT_CTX_DEPRECATED = ("Context.default_ctx is deprecated: read the default context with "
                           "mx.current_context(), set it with test_utils.set_default_context "
                           "or 'with ctx:'")


class _ClassProperty:
    """A read-only property seen from instances (``ctx.default_ctx``)."""

    def __init__(self, getter):
        self._getter = getter

    def __get__(self, obj, owner):
        return self._getter(owner)


class _ContextMeta(type):
    """``Context.default_ctx`` read and assigned on the class itself: this thread's default
    context, as in MXNet (deprecated there, so both warn)."""

    @property
    def default_ctx(cls):
        warnings.warn(_DEFAULT_CTX_DEPRECATED, DeprecationWarning, stacklevel=2)
        return current_context()

    @default_ctx.setter
    def default_ctx(cls, ctx):
        warnings.warn(_DEFAULT_CTX_DEPRECATED, DeprecationWarning, stacklevel=2)
        Context._default_ctx.value = ctx


class Context(metaclass=_ContextMeta):
    """A device: ``Context('cpu', 0)``, ``Context('gpu', 1)``.

    Several ``cpu(i)`` contexts share host memory but behave as separate replicas: arrays
    created on ``cpu(1)`` report that context, and data-parallel code treats them as devices.
    """
    devtype2str = {1: "cpu", 2: "gpu", 3: "cpu_pinned", 5: "cpu_shared"}
    devstr2type = {"cpu": 1, "gpu": 2, "cpu_pinned": 3, "cpu_shared": 5}
    _default_ctx = threading.local()   # MXNet's name: test helpers set it directly

    def __init__(self, device_type, device_id=0):
        if isinstance(device_type, Context):
            self.device_typeid = device_type.device_typeid
            self.device_id = device_type.device_id
        else:
            if isinstance(device_type, int):
                if device_type not in self.devtype2str:
                    raise MXNetError("unknown device type id %r" % device_type)
                self.device_typeid = device_type
            else:
                if device_type not in self.devstr2type:
                    raise MXNetError("unknown device type %r (expected one of %s)"
                                     % (device_type, sorted(self.devstr2type)))
                self.device_typeid = self.devstr2type[device_type]
            self.device_id = int(device_id)
        self._old_ctx = None
        self._entered_over = []   # the contexts each open ``with self`` replaced, innermost last

    @property
    def device_type(self):
        return self.devtype2str[self.device_typeid]

    @property
    def is_gpu(self):
        return self.device_typeid == 2

    def __hash__(self):
        return hash((self.device_typeid, self.device_id))

    def __eq__(self, other):
        return (isinstance(other, Context) and self.device_typeid == other.device_typeid
                and self.device_id == other.device_id)

    def __ne__(self, other):
        return not self == other

    def __str__(self):
        return "%s(%d)" % (self.device_type, self.device_id)

    __repr__ = __str__

    def __enter__(self):
        # the same object may be entered again inside its own ``with`` (custom operators do
        # this): each exit restores what its own entry replaced
        self._old_ctx = current_context()
        self._entered_over.append(self._old_ctx)
        Context._default_ctx.value = self
        return self

    def __exit__(self, *exc):
        Context._default_ctx.value = self._entered_over.pop()

    @_ClassProperty
    def default_ctx(cls):
        """The current default context (MXNet's deprecated spelling of current_context())."""
        return current_context()

    def empty_cache(self):
        """Release cached device memory (nothing is cached on the CPU)."""


def cpu(device_id=0):
    return Context("cpu", device_id)


def cpu_pinned(device_id=0):
    return Context("cpu_pinned", device_id)


def gpu(device_id=0):
    return Context("gpu", device_id)


def current_context():
    ctx = getattr(Context._default_ctx, "value", None)
    return ctx if ctx is not None else Context("cpu", 0)


def num_gpus():
    """Number of CUDA devices numba can see (0 without numba-cuda or a driver)."""
    try:
        from .kernels import cuda_support
        return cuda_support.num_gpus()
    except MXNetError:
        return 0


def gpu_memory_info(device_id=0):
    from .kernels import cuda_support
    return cuda_support.memory_info(device_id)
