"""mx.runtime, mx.log, mx.util, mx.error and mx.rnd: the small MXNet modules beside the Module
API, checked against MXNet 1.9.1's documented behaviour (python/mxnet/runtime.py, log.py,
util.py, error.py and tests/python/unittest/test_runtime.py, test_base.py)."""
import logging
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

import lightmod as mx
from lightmod.base import MXNetError

# MXNet 1.9.1's feature names, in its order
MXNET_FEATURES = [
    "CUDA", "CUDNN", "NCCL", "CUDA_RTC", "TENSORRT", "CPU_SSE", "CPU_SSE2", "CPU_SSE3",
    "CPU_SSE4_1", "CPU_SSE4_2", "CPU_SSE4A", "CPU_AVX", "CPU_AVX2", "OPENMP", "SSE", "F16C",
    "JEMALLOC", "BLAS_OPEN", "BLAS_ATLAS", "BLAS_MKL", "BLAS_APPLE", "LAPACK", "MKLDNN",
    "OPENCV", "CAFFE", "PROFILER", "DIST_KVSTORE", "CXX14", "INT64_TENSOR_SIZE",
    "SIGNAL_HANDLER", "DEBUG", "TVM_OP"]


# ---------------------------------------------------------------------------------------------
# mx.runtime
# ---------------------------------------------------------------------------------------------
def test_features_names_order_and_singleton():
    features = mx.runtime.Features()
    assert list(features) == MXNET_FEATURES
    assert mx.runtime.Features() is features
    assert [f.name for f in mx.runtime.feature_list()] == MXNET_FEATURES
    for name, feature in features.items():
        assert isinstance(feature, mx.runtime.Feature)
        assert feature.name == name
        assert features.is_enabled(name) is feature.enabled
        assert features.is_enabled(name.lower()) is feature.enabled   # any case, as in MXNet
        assert repr(feature) == ("\u2714 " if feature.enabled else "\u2716 ") + name
    assert repr(features) == repr(list(features.values()))


def test_unknown_feature_raises_runtime_error_naming_it():
    with pytest.raises(RuntimeError, match="Feature 'THIS GIRL IS ON FIRE' is unknown"):
        mx.runtime.Features().is_enabled("this girl is on fire")


def test_features_report_this_installation():
    features = mx.runtime.Features()
    assert features.is_enabled("CUDA") == (mx.context.num_gpus() > 0)
    cpu = np.__config__.__cpu_features__ if hasattr(np.__config__, "__cpu_features__") else None
    if cpu is not None:
        assert features.is_enabled("CPU_AVX2") == cpu.get("AVX2", False)
        assert features.is_enabled("CPU_SSE2") == cpu.get("SSE2", False)
    assert features.is_enabled("LAPACK")
    for absent in ("CUDNN", "NCCL", "CUDA_RTC", "TENSORRT", "MKLDNN", "CAFFE", "TVM_OP",
                   "SIGNAL_HANDLER", "DEBUG", "CXX14", "JEMALLOC"):
        assert not features.is_enabled(absent), absent
    blas = [n for n in ("BLAS_OPEN", "BLAS_MKL", "BLAS_ATLAS", "BLAS_APPLE")
            if features.is_enabled(n)]
    assert len(blas) <= 1


def test_import_lightmod_builds_no_features_and_imports_no_numba():
    code = ("import sys, lightmod as mx; "
            "assert mx.runtime.Features.instance is None; "
            "assert 'numba' not in sys.modules, 'numba imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------------------------------------
# mx.log
# ---------------------------------------------------------------------------------------------
def test_log_levels_are_the_logging_levels():
    assert (mx.log.CRITICAL, mx.log.ERROR, mx.log.WARNING, mx.log.INFO, mx.log.DEBUG,
            mx.log.NOTSET) == (logging.CRITICAL, logging.ERROR, logging.WARNING, logging.INFO,
                               logging.DEBUG, logging.NOTSET)


def test_get_logger_stderr_format(capsys, monkeypatch):
    # records also reach the root logger's handlers; one that an earlier test left on a
    # stream now closed would print its own error here
    monkeypatch.setattr(logging.root, "handlers", [])
    logger = mx.log.get_logger("lightmod_test_log_stderr", level=mx.log.INFO)
    logger.debug("hidden")            # below INFO
    logger.info("hello %d", 7)
    logger.warning("careful")
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    pid = os.getpid()
    site = r"%s:test_get_logger_stderr_format:\d+" % re.escape(__file__)
    assert re.fullmatch(r"\x1b\[32mI\d{4} \d\d:\d\d:\d\d %d %s\]\x1b\[0m hello 7" % (pid, site),
                        err[0]), err[0]
    assert re.fullmatch(r"\x1b\[31mW\d{4} \d\d:\d\d:\d\d %d %s\]\x1b\[0m careful" % (pid, site),
                        err[1]), err[1]


def test_get_logger_sets_up_once_and_leaves_root_alone():
    first = mx.log.get_logger("lightmod_test_log_once", level=mx.log.DEBUG)
    again = mx.log.get_logger("lightmod_test_log_once", level=mx.log.ERROR)
    assert again is first
    assert len(first.handlers) == 1 and first.level == mx.log.DEBUG
    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    assert mx.log.get_logger() is root
    assert (list(root.handlers), root.level) == before


def test_get_logger_to_file(tmp_path):
    path = tmp_path / "run.log"
    logger = mx.log.get_logger("lightmod_test_log_file", filename=str(path), filemode="w")
    logger.warning("to file")
    logger.info("below WARNING, the default level")
    for h in logger.handlers:
        h.flush()
    assert path.read_text() == "to file\n"


def test_getLogger_is_deprecated():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logger = mx.log.getLogger("lightmod_test_log_deprecated")
    assert logger is logging.getLogger("lightmod_test_log_deprecated")
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)


# ---------------------------------------------------------------------------------------------
# mx.util, mx.error, mx.rnd
# ---------------------------------------------------------------------------------------------
def test_util_getenv_setenv_round_trip(monkeypatch):
    name = "MXNET_LIGHTMOD_TEST_ENV"
    monkeypatch.delenv(name, raising=False)
    assert mx.util.getenv(name) is None
    mx.util.setenv(name, "42")
    assert os.environ[name] == "42" and mx.util.getenv(name) == "42"
    mx.util.setenv(name, None)
    assert name not in os.environ and mx.util.getenv(name) is None


def test_util_gpu_queries():
    assert mx.util.get_gpu_count() == mx.context.num_gpus()
    if mx.util.get_gpu_count() == 0:
        with pytest.raises(MXNetError):
            mx.util.get_gpu_memory(0)
    with pytest.raises(MXNetError):
        mx.util.get_gpu_memory(mx.util.get_gpu_count() + 5)


def test_util_has_no_numpy_interface_switches():
    for name in ("np_shape", "use_np", "set_np", "is_np_array"):
        assert not hasattr(mx.util, name), name


def test_error_classes():
    assert mx.error.MXNetError is MXNetError
    err = mx.error.InternalError("broken invariant")
    assert isinstance(err, MXNetError)
    assert str(err).startswith("broken invariant\n") and "report it" in str(err)

    # the three spellings of MXNet's register all hand the class back unchanged
    @mx.error.register
    class MyError(MXNetError):
        pass

    @mx.error.register("Named")
    class OtherError(MXNetError):
        pass
    assert MyError.__name__ == "MyError" and issubclass(OtherError, MXNetError)
    assert mx.error.register("Renamed", MyError) is MyError
    with pytest.raises(MyError, match="raised"):
        raise MyError("raised")


def test_rnd_is_random():
    assert mx.rnd is mx.random
    mx.rnd.seed(3)
    a = mx.nd.random.uniform(shape=(4,)).asnumpy()
    mx.random.seed(3)
    b = mx.nd.random.uniform(shape=(4,)).asnumpy()
    np.testing.assert_array_equal(a, b)


def test_data_dir_follows_mxnet_home(monkeypatch):
    monkeypatch.delenv("MXNET_HOME", raising=False)
    if sys.platform != "win32":
        assert mx.base.data_dir_default() == os.path.join(os.path.expanduser("~"), ".mxnet")
    assert mx.base.data_dir() == mx.base.data_dir_default()
    monkeypatch.setenv("MXNET_HOME", "/tmp/mxnet_data")
    assert mx.base.data_dir() == "/tmp/mxnet_data"


def test_context_default_ctx_class_property_is_per_thread():
    # MXNet's test_thread_local.py::test_context: read and assigned on the class, per thread
    import threading

    from lightmod.context import Context
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        before = Context.default_ctx

        def other_thread():
            Context.default_ctx = mx.gpu(11)
            seen.append(Context.default_ctx)
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
        assert seen == [mx.gpu(11)]
        assert Context.default_ctx == before == mx.current_context()
        try:
            Context.default_ctx = mx.cpu(4)
            assert mx.current_context() == mx.cpu(4) and mx.cpu().default_ctx == mx.cpu(4)
            with mx.cpu(2):
                assert Context.default_ctx == mx.cpu(2)
            assert Context.default_ctx == mx.cpu(4)
        finally:
            Context.default_ctx = before
    with pytest.warns(DeprecationWarning, match="default_ctx is deprecated"):
        Context.default_ctx
