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
from .elemwise import *  # noqa: F401,F403,E402
from .nn import *  # noqa: F401,F403,E402
from .tensor import *  # noqa: F401,F403,E402
from .reduce import *  # noqa: F401,F403,E402
from .optimizer import *  # noqa: F401,F403,E402
from .rnn import *  # noqa: F401,F403,E402
from .conv import *  # noqa: F401,F403,E402
from .pooling import *  # noqa: F401,F403,E402
from .norm import *  # noqa: F401,F403,E402
