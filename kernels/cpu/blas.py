"""``out += a @ b`` in one BLAS call (GEMM with beta = 1), through numpy's own OpenBLAS.

``np.matmul`` has no accumulating form: a gradient request 'add' (a weight shared by the time
steps of an unrolled RNN, an input read by two operators) otherwise costs a product into a
scratch buffer and a second pass adding it in. The CBLAS ``?gemm`` of the OpenBLAS bundled
with numpy (the library ``np.matmul`` calls and ``kernels/threads.py`` sets the thread count of)
adds the product into the destination while it computes it. Only numpy's own copy will do:
scipy's (loaded by numba's start-up) keeps another thread pool, whose threads would fight ours.

:func:`gemm_accumulate` returns False where it cannot be used (no such library, another dtype,
a layout CBLAS cannot describe without a copy); the caller then takes the numpy path.
"""
import ctypes
import os

import numpy as np

from .. import threads as _threads

__all__ = ["gemm_accumulate", "gemm_function", "gemm_address"]

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
# (function name suffixes of numpy's OpenBLAS builds, integer type of their dimensions)
_FLAVOURS = (("scipy_cblas_%sgemm64_", ctypes.c_int64), ("cblas_%sgemm64_", ctypes.c_int64),
             ("scipy_cblas_%sgemm", ctypes.c_int), ("cblas_%sgemm", ctypes.c_int))
_gemm = None        # {dtype: ctypes function} once looked up ({} when there is none)
_compiled_gemm = {}  # {dtype: ctypes function for compiled callers, or None}


def _numpy_blas_paths():
    """The OpenBLAS libraries bundled with numpy (never another one the process loaded, such
    as scipy's, which keeps its own thread pool)."""
    import numpy
    root = os.path.dirname(os.path.dirname(os.path.abspath(numpy.__file__)))
    folders = (os.path.join(root, "numpy.libs"), os.path.join(root, "numpy", ".dylibs"))
    return [path for path in _threads._blas_candidates()
            if os.path.dirname(os.path.abspath(path)) in folders]


def _load():
    found = {}
    for path in _numpy_blas_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for pattern, dim in _FLAVOURS:
            for letter, dtype, scalar in (("s", np.float32, ctypes.c_float),
                                          ("d", np.float64, ctypes.c_double)):
                fn = getattr(lib, pattern % letter, None)
                if fn is None or np.dtype(dtype) in found:
                    continue
                fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, dim, dim, dim, scalar,
                               ctypes.c_void_p, dim, ctypes.c_void_p, dim, scalar,
                               ctypes.c_void_p, dim]
                fn.restype = None
                fn.dim_type = dim
                found[np.dtype(dtype)] = fn
        if found:
            break
    return found


def _operand(x):
    """(transpose flag, leading dimension) of a 2-d operand CBLAS reads in place, or None."""
    item = x.itemsize
    rows, cols = x.shape
    s0, s1 = x.strides
    if s1 == item or cols == 1:             # row-major: rows s0 apart
        ld = s0 // item if rows > 1 else cols
        if s0 % item == 0 and ld >= max(1, cols):
            return _NO_TRANS, max(1, ld)
    if s0 == item or rows == 1:             # the transpose of a row-major matrix
        ld = s1 // item if cols > 1 else rows
        if s1 % item == 0 and ld >= max(1, rows):
            return _TRANS, max(1, ld)
    return None


def gemm_accumulate(a, b, out):
    """out (M, N) += a (M, K) @ b (K, N) in one GEMM call; False (nothing done) when the
    arrays do not allow it."""
    global _gemm
    if _gemm is None:
        _gemm = _load()
    fn = _gemm.get(out.dtype)
    if fn is None or a.dtype != out.dtype or b.dtype != out.dtype or out.size == 0:
        return False
    op_a, op_b, op_out = _operand(a), _operand(b), _operand(out)
    if op_a is None or op_b is None or op_out is None or op_out[0] != _NO_TRANS:
        return False
    m, k = a.shape
    n = b.shape[1]
    if k == 0:
        return True
    fn(_ROW_MAJOR, op_a[0], op_b[0], m, n, k, 1.0, a.ctypes.data, op_a[1], b.ctypes.data,
       op_b[1], 1.0, out.ctypes.data, op_out[1])
    return True


def gemm_function(dtype):
    """numpy's OpenBLAS ``cblas_?gemm`` of ``dtype`` as a ctypes function that numba-compiled
    kernels take as an argument and call with the GIL released (a chunk loop of products
    without a return to Python between them), its pointer arguments passed as integers
    (``arr.ctypes.data``); None when there is none (or another dtype).

    Arguments: (101 row-major, transa, transb (111 no / 112 yes), M, N, K, alpha, A, lda, B,
    ldb, beta, C, ldc)."""
    global _gemm
    dtype = np.dtype(dtype)
    if dtype in _compiled_gemm:
        return _compiled_gemm[dtype]
    if _gemm is None:
        _gemm = _load()
    fn = _gemm.get(dtype)
    found = None
    if fn is not None:
        scalar = ctypes.c_float if dtype == np.float32 else ctypes.c_double
        dim, address = fn.dim_type, ctypes.c_size_t
        prototype = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_int, ctypes.c_int, dim, dim,
                                     dim, scalar, address, dim, address, dim, scalar, address,
                                     dim)
        found = prototype(ctypes.cast(fn, ctypes.c_void_p).value)
    _compiled_gemm[dtype] = found
    return found


def gemm_address(dtype):
    """The address of numpy's OpenBLAS ``cblas_?gemm`` of ``dtype`` when its dimensions are
    64-bit integers (the builds numpy's wheels bundle), for compiled code that calls it
    through a pointer (kernels/cpu/gemm.py); None otherwise."""
    global _gemm
    if _gemm is None:
        _gemm = _load()
    fn = _gemm.get(np.dtype(dtype))
    if fn is None or fn.dim_type is not ctypes.c_int64:
        return None
    return ctypes.cast(fn, ctypes.c_void_p).value
