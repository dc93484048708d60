"""The CPU kernel set: ``k`` for operators on cpu contexts (never imports numba.cuda).

Each family lives in its own file and is re-exported here, one line per family.
"""
import numpy as np

__all__ = ["assign", "device_kind"]
device_kind = "cpu"


def assign(dst, src, req):
    """Store src into dst following a gradient request ('write', 'add', 'null')."""
    if req == "write":
        np.copyto(dst, src, casting="unsafe")
    elif req == "add":
        dst += src
# --- families (one line each) ---
from .conv import *  # noqa: F401,F403,E402
from .pooling import *  # noqa: F401,F403,E402
from .norm import *  # noqa: F401,F403,E402
from .elemwise import *  # noqa: F401,F403,E402
from .nn import *  # noqa: F401,F403,E402
from .optimizer import *  # noqa: F401,F403,E402
from .tensor import *  # noqa: F401,F403,E402
from .reduce import *  # noqa: F401,F403,E402
from .rnn import *  # noqa: F401,F403,E402
from .svm import *  # noqa: F401,F403,E402


# --- float16 staging ----------------------------------------------------------------------
# numba has no half-precision arithmetic on the CPU: a jitted kernel handed float16 arrays
# fails to compile (before it runs, so nothing is half-written). Every kernel of this set is
# wrapped so that such a call is re-run on float32 copies of its float16 arrays, and the
# results are rounded back into them, as MXNet's CPU float16 kernels round their float32 math.
# The happy path costs one extra Python call; a failing dtype signature is remembered, so the
# compile is attempted only once per kernel and signature.
def _install_float16_staging(namespace):
    import functools

    def is_f16(a):
        return isinstance(a, np.ndarray) and a.dtype == np.float16

    def stage(fn):
        needs_staging = set()

        @functools.wraps(fn)
        def signature(args):
            return tuple(a.dtype.char if isinstance(a, np.ndarray) else None for a in args)

        def call(*args, **kwargs):
            # the signature is only built once some float16 call has failed (hot-path cost)
            if not needs_staging or signature(args) not in needs_staging:
                try:
                    return fn(*args, **kwargs)
                except NotImplementedError:  # numba's "float16" lowering error
                    if not any(is_f16(a) for a in args):
                        raise
                    needs_staging.add(signature(args))
            upcast = {}   # one float32 copy per distinct array, so aliased arguments stay aliased
            staged = []
            for a in args:
                if is_f16(a):
                    if id(a) not in upcast:
                        upcast[id(a)] = (a, a.astype(np.float32))
                    staged.append(upcast[id(a)][1])
                else:
                    staged.append(a)
            result = fn(*staged, **kwargs)
            for original, copy in upcast.values():
                np.copyto(original, copy, casting="unsafe")
            return result
        call.__wrapped_kernel__ = fn
        return call

    for name, obj in list(namespace.items()):
        module = getattr(getattr(obj, "py_func", obj), "__module__", "") or ""
        if name.startswith("_") or isinstance(obj, type) or not callable(obj):
            continue
        if module.startswith(__name__ + ".") or module == __name__:
            namespace[name] = stage(obj)


_install_float16_staging(globals())
