"""The CUDA kernels fusion generates compile to PTX with NVVM, without a GPU or a driver.

The specs come from binding real graphs (two-layer LSTM and GRU stacks, a chain of every
element-wise kind) with fusion on; each spec's generated CUDA forward and backward kernels are
compiled with ``numba.cuda.compile_ptx`` for float32 and float64 2-d arrays, contiguous and
strided (slices of the gate matrices are strided views). Needs the ``cuda`` extra's compiler
libraries, as tests/test_cuda_ptx.py does, and skips without them, saying why.
"""
import types as pytypes

import pytest
import test_cuda_ptx
import test_fusion as tf

import lightmod as mx
from lightmod import fusion

pytestmark = pytest.mark.skipif(test_cuda_ptx.MISSING is not None,
                                reason=str(test_cuda_ptx.MISSING))


def _specs(monkeypatch):
    monkeypatch.setenv("LIGHTMOD_FUSION", "1")
    x, o = mx.sym.Variable("x"), mx.sym.Variable("o")
    chain = mx.sym.MakeLoss(mx.sym.Activation(mx.sym.maximum(mx.sym.tanh(x) * 0.9 + o, 0.1) / o,
                                              act_type="softrelu") - mx.sym.relu(x))
    graphs = [(chain, {"x": (3, 4), "o": (3, 4)})] + [
        (tf.rnn_stack_symbol(cell, 2, 3), {"data": (2, 2, 3)}) for cell in ("lstm", "gru")]
    specs = set()
    for sym, shapes in graphs:
        ex = sym.simple_bind(mx.cpu(), **shapes)
        for step in ex._fwd + ex._bwd:
            if isinstance(step.op, fusion.FusedGroup):
                specs.add(step.op.forward_spec)
                specs.add(step.op.backward_spec)
    return sorted(specs, key=repr)


def test_generated_kernels_compile_to_ptx(monkeypatch):
    from numba import cuda, types
    from numba.cuda import dispatcher

    from lightmod.kernels import fused as shared
    from lightmod.kernels.cuda import fused as cuda_fused
    monkeypatch.setattr(dispatcher, "get_current_device", lambda: pytypes.SimpleNamespace(
        compute_capability=test_cuda_ptx.COMPUTE_CAPABILITY))
    specs = _specs(monkeypatch)
    assert len(specs) >= 6
    failures = []
    for spec in specs:
        mod = shared.load_module("cuda", cuda_fused.source(spec))
        for direction in ("forward", "backward"):
            kernel = getattr(mod, direction)
            n_arrays = len(shared.arg_names(spec, direction))
            for dtype in (types.float32, types.float64):
                for layout in ("C", "A"):
                    argtypes = (types.int64, types.int64) + (types.Array(dtype, 2, layout),) * \
                        n_arrays
                    try:
                        ptx, restype = cuda.compile_ptx(kernel.py_func, argtypes,
                                                        cc=test_cuda_ptx.COMPUTE_CAPABILITY)
                    except Exception as err:
                        failures.append("%s %s %s %s: %s" % (spec, direction, dtype, layout,
                                                             str(err)[:500]))
                        continue
                    assert ".visible .entry" in ptx and str(restype) == "none"
    assert not failures, "\n".join(failures)
