"""The CUDA kernel set: ``k`` for operators on gpu contexts (the only place importing numba.cuda).

Tested without a GPU under NUMBA_ENABLE_CUDASIM=1. Each family lives in its own file and is
re-exported here, one line per family.
"""
device_kind = "cuda"
# --- families (one line each) ---
from .elemwise import *  # noqa: F401,F403,E402
from .memory import *  # noqa: F401,F403,E402
from .nn import *  # noqa: F401,F403,E402
from .optimizer import *  # noqa: F401,F403,E402
from .tensor import *  # noqa: F401,F403,E402
from .reduce import *  # noqa: F401,F403,E402
from .rnn import *  # noqa: F401,F403,E402
from .conv import *  # noqa: F401,F403,E402
from .conv_implicit import *  # noqa: F401,F403,E402
from .pooling import *  # noqa: F401,F403,E402
from .norm import *  # noqa: F401,F403,E402
from .svm import *  # noqa: F401,F403,E402
from .linalg import *  # noqa: F401,F403,E402
from .contrib import *  # noqa: F401,F403,E402
from .ctc import *  # noqa: F401,F403,E402
from .sequence import *  # noqa: F401,F403,E402
from .spatial import *  # noqa: F401,F403,E402
from .detection import *  # noqa: F401,F403,E402
from .fused import *  # noqa: F401,F403,E402
