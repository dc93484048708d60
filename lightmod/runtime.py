"""``mx.runtime``: which of MXNet's build features this lightmod installation actually has.

MXNet reports the options its C++ library was compiled with. lightmod has no compiled library
of its own, so each flag answers the question a script asks with it ("can I use X here?") for
this process:

- ``CUDA``: numba.cuda finds at least one usable GPU (or the CUDA simulator is on). Checked the
  first time ``Features()`` is built, never at ``import lightmod``.
- ``CPU_SSE`` ... ``CPU_AVX2``, ``F16C``: numba compiles every kernel for the host CPU, so these
  are the host's instruction sets as numpy detects them. ``CPU_SSE4A`` (AMD only) is not
  detected and reads False.
- ``BLAS_OPEN`` / ``BLAS_MKL`` / ``BLAS_ATLAS`` / ``BLAS_APPLE``: the BLAS numpy was built
  against (lightmod's matrix products go through numpy's BLAS). ``LAPACK``: numpy.linalg always
  has one (its own lapack_lite at worst).
- ``OPENCV``: the cv2 package is installed (image decoding and mx.image use it).
- ``DIST_KVSTORE``: mpi4py is installed (the dist_* kvstores run on MPI).
- ``PROFILER``: True; mx.profiler records per-operator timings.
- Everything that names a library lightmod never uses (CUDNN, NCCL, CUDA_RTC, TENSORRT, MKLDNN,
  JEMALLOC, CAFFE, TVM_OP), a property of a C++ build (CXX14, DEBUG, SSE as mshadow's own switch,
  OPENMP: numba's parallel loops need not run on OpenMP) or a feature lightmod does not provide
  (SIGNAL_HANDLER) is False. ``INT64_TENSOR_SIZE`` is False too: tensors past 2**31 elements
  are not tested.
"""
import collections
import importlib.util

__all__ = ["Feature", "Features", "feature_list"]

# MXNet 1.9.1's features, in its order (libinfo.h)
_FEATURE_NAMES = (
    "CUDA", "CUDNN", "NCCL", "CUDA_RTC", "TENSORRT", "CPU_SSE", "CPU_SSE2", "CPU_SSE3",
    "CPU_SSE4_1", "CPU_SSE4_2", "CPU_SSE4A", "CPU_AVX", "CPU_AVX2", "OPENMP", "SSE", "F16C",
    "JEMALLOC", "BLAS_OPEN", "BLAS_ATLAS", "BLAS_MKL", "BLAS_APPLE", "LAPACK", "MKLDNN",
    "OPENCV", "CAFFE", "PROFILER", "DIST_KVSTORE", "CXX14", "INT64_TENSOR_SIZE",
    "SIGNAL_HANDLER", "DEBUG", "TVM_OP")

# our feature name -> numpy's name for the instruction set
_CPU_FLAGS = {"CPU_SSE": "SSE", "CPU_SSE2": "SSE2", "CPU_SSE3": "SSE3", "CPU_SSE4_1": "SSE41",
              "CPU_SSE4_2": "SSE42", "CPU_AVX": "AVX", "CPU_AVX2": "AVX2", "F16C": "F16C"}


class Feature:
    """One feature: ``name`` and ``enabled``; prints as MXNet does (``✔ CUDA`` / ``✖ CUDA``)."""

    __slots__ = ("_name", "_enabled")

    def __init__(self, name, enabled):
        self._name = str(name)
        self._enabled = bool(enabled)

    @property
    def name(self):
        return self._name

    @property
    def enabled(self):
        return self._enabled

    def __repr__(self):
        return "%s %s" % ("\u2714" if self._enabled else "\u2716", self._name)


def _host_cpu_features():
    import numpy
    found = getattr(numpy.__config__, "__cpu_features__", None)
    if found is None:   # numpy 1.x keeps the table in its C module
        try:
            from numpy.core._multiarray_umath import __cpu_features__ as found
        except ImportError:
            found = {}
    return found


def _numpy_blas_name():
    """Lower-case name of the BLAS numpy links ('' when numpy does not say)."""
    import numpy
    config = getattr(numpy.__config__, "CONFIG", None)
    if isinstance(config, dict):    # numpy >= 1.26
        blas = config.get("Build Dependencies", {}).get("blas", {})
        return str(blas.get("name", "")).lower()
    for attr in ("blas_opt_info", "blas_ilp64_opt_info", "openblas_info"):
        info = getattr(numpy.__config__, attr, None)
        if info:
            return " ".join(info.get("libraries", [])).lower()
    return ""


def _installed(module):
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _detect():
    from .context import num_gpus
    cpu = _host_cpu_features()
    blas = _numpy_blas_name()
    on = {name: bool(cpu.get(flag, False)) for name, flag in _CPU_FLAGS.items()}
    on.update({
        "CUDA": num_gpus() > 0,
        "BLAS_OPEN": "openblas" in blas,
        "BLAS_MKL": "mkl" in blas,
        "BLAS_ATLAS": "atlas" in blas,
        "BLAS_APPLE": "accelerate" in blas or "veclib" in blas,
        "LAPACK": True,
        "OPENCV": _installed("cv2"),
        "DIST_KVSTORE": _installed("mpi4py"),
        "PROFILER": True,
    })
    return [Feature(name, on.get(name, False)) for name in _FEATURE_NAMES]


def feature_list():
    """The list of :class:`Feature` (every known feature, enabled or not), in MXNet's order."""
    return list(Features().values())


class Features(collections.OrderedDict):
    """Ordered ``{name: Feature}``; one shared instance, built on first use."""

    instance = None

    def __new__(cls):
        if cls.instance is None:
            made = super().__new__(cls)
            collections.OrderedDict.__init__(made, [(f.name, f) for f in _detect()])
            cls.instance = made
        return cls.instance

    def __init__(self):
        pass    # filled once in __new__; a second Features() must not clear it

    def __repr__(self):
        return repr(list(self.values()))

    def is_enabled(self, feature_name):
        """Whether ``feature_name`` (any case) is enabled; RuntimeError for an unknown name."""
        key = str(feature_name).upper()
        if key not in self:
            raise RuntimeError("Feature '%s' is unknown, known features are: %s"
                               % (key, list(self.keys())))
        return self[key].enabled
