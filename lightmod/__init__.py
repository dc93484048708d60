"""lightmod: Apache MXNet 1.x's Module API on numpy and numba.

``import lightmod as mx`` gives the MXNet-shaped namespace: nd, sym/symbol, mod/module, io,
init/initializer, optimizer, kv/kvstore, metric, callback, mon/monitor, model, rnn, test_utils,
cpu(), gpu(), AttrScope, rnd/random, runtime, log, util, error... Importing compiles nothing
and never imports numba.cuda.
"""
from ._version import __version__
from . import base
from .base import MXNetError
from . import context
from .context import Context, cpu, gpu, cpu_pinned, current_context, num_gpus
from . import random
from . import random as rnd
from . import error
from . import log
from . import util
from . import runtime
# --- submodules (one line per part; keep the order: later parts import earlier ones) ---
from . import ndarray, ndarray as nd  # noqa: E402
from .compat import install_as_mxnet
from . import visualization
from . import visualization as viz
from . import profiler
from . import engine
from . import io
from . import recordio
from . import image
from . import image as img
from . import initializer
from . import initializer as init
from . import metric
from . import callback
from . import lr_scheduler
from . import optimizer
from . import kvstore
from . import kvstore as kv
from . import name
from . import attribute
from .attribute import AttrScope
from . import symbol
from . import symbol as sym
from . import contrib
from . import executor
from . import model
from . import module
from . import module as mod
from . import monitor
from . import monitor as mon
from . import rnn
from . import gluon
from . import autograd
from .cached_op import CachedOp as _CachedOp
ndarray.CachedOp = _CachedOp     # mx.nd.CachedOp: it binds executors, a layer above ndarray


# Imported on first use (``mx.test_utils``, ``from lightmod import test_utils``): mx.onnx needs
# the optional onnx package; mx.test_utils, the testing helpers, imports numpy.testing and the
# dataset downloaders, a tenth of the import that training scripts never use.
_ON_FIRST_USE = ("onnx", "test_utils")


def __getattr__(attr):
    if attr in _ON_FIRST_USE:
        import importlib
        return importlib.import_module("." + attr, __name__)
    raise AttributeError("module %r has no attribute %r" % (__name__, attr))
