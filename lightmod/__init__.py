"""lightmod: Apache MXNet 1.x's Module API on numpy and numba.

``import lightmod as mx`` gives the MXNet-shaped namespace: nd, sym/symbol, mod/module, io,
init/initializer, optimizer, kv/kvstore, metric, callback, mon/monitor, model, rnn, test_utils,
cpu(), gpu(), AttrScope... Importing compiles nothing and never imports numba.cuda.
"""
# --- submodules (one line per part; keep the order: later parts import earlier ones) ---
from . import (  # noqa: E402
    attribute,
    base,
    callback,
    context,
    contrib,
    executor,
    image,
    initializer,
    io,
    kvstore,
    lr_scheduler,
    metric,
    model,
    module,
    monitor,
    name,
    ndarray,
    optimizer,
    profiler,
    random,
    recordio,
    rnn,
    symbol,
    test_utils,
    visualization,
)
from . import image as img
from . import initializer as init
from . import kvstore as kv
from . import module as mod
from . import monitor as mon
from . import ndarray as nd
from . import symbol as sym
from . import visualization as viz
from ._version import __version__
from .attribute import AttrScope
from .base import MXNetError
from .compat import install_as_mxnet
from .context import Context, cpu, cpu_pinned, current_context, gpu, num_gpus
