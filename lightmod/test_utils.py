"""Testing helpers with MXNet 1.9.1's names and behaviour (``mxnet.test_utils``).

Comparisons (``assert_almost_equal``, ``almost_equal``, ``same_array``), random data
(``rand_ndarray``, ``rand_shape_2d/3d/nd``, ``random_arrays``), gradient and output checks on
symbols (``check_numeric_gradient``, ``check_symbolic_forward``, ``check_symbolic_backward``,
``check_consistency``, ``check_speed``, ``simple_forward``), the default test context
(``default_context``, ``set_default_context``) and ``environment`` (set environment variables
for the length of a ``with`` block).

Tolerances follow MXNet: when ``rtol``/``atol`` are None, ``assert_almost_equal`` uses the
larger of the two operands' per-dtype defaults (float16 1e-2/1e-1, float32 1e-4/1e-3,
float64 1e-5/1e-20, integers and bool exact); ``almost_equal`` uses the float64 defaults.

Like MXNet's module, this one has no ``__all__``: MXNet's test files do
``from mxnet.test_utils import *`` and then use what it imported (``np``, ``mx``, ``sys``,
``os``, ``time`` ...), so those names are importable from here too. Random draws use numpy's
global generator (``np.random``), as MXNet's helpers do, so ``np.random.seed`` fixes them.

This module imports neither hypothesis nor numba; the property-testing toolkit lives in
:mod:`lightmod.testing`.
"""
# pylint: disable=invalid-name
import errno  # noqa: F401  (re-exported: MXNet's star import provides it)
import json
import logging  # noqa: F401
import numbers
import os
import sys
import time
import traceback
from collections import OrderedDict
from contextlib import contextmanager

import numpy as np
import numpy.random as rnd
import numpy.testing as npt

# MXNet's data-set download helpers (offline when the files are already local)
from ._datasets import download, get_cifar10, get_mnist, get_mnist_iterator, get_mnist_pkl, get_mnist_ubyte  # noqa: F401  # noqa: F401
from .context import Context, current_context
from .ndarray import NDArray, array
from .symbol import Symbol

# The package object, exported as ``mx`` to star-importers. Taken from sys.modules, not
# imported: a package is loaded before its submodules, and importing it from here would tie
# the package and this module into an import circle.
mx = sys.modules[__name__.rpartition(".")[0]]


# ---------------------------------------------------------------------------------------------
# defaults: context, dtype, tolerances
# ---------------------------------------------------------------------------------------------
def default_context():
    """The context tests run on: the current context (``cpu(0)`` unless changed)."""
    return current_context()


def set_default_context(ctx):
    """Make ``ctx`` the current (and so the default test) context of this thread."""
    Context._default_ctx.value = ctx


def default_dtype():
    """The dtype test data is created with (float32)."""
    return np.float32


_FLOAT_RTOLS = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-4,
                np.dtype(np.float64): 1e-5}
_FLOAT_ATOLS = {np.dtype(np.float16): 1e-1, np.dtype(np.float32): 1e-3,
                np.dtype(np.float64): 1e-20}
_EXACT_DTYPES = (np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                 np.int64, np.uint64)


def default_rtols():
    """{dtype: default relative tolerance} (integers and bool compare exactly)."""
    tols = dict(_FLOAT_RTOLS)
    tols.update({np.dtype(t): 0 for t in _EXACT_DTYPES})
    return tols


def default_atols():
    """{dtype: default absolute tolerance} (integers and bool compare exactly)."""
    tols = dict(_FLOAT_ATOLS)
    tols.update({np.dtype(t): 0 for t in _EXACT_DTYPES})
    return tols


def default_numeric_eps():
    """{dtype: finite-difference step}; powers of two, so adding them loses no bits."""
    return {np.dtype(np.float16): 1.0 / 2 ** 6,
            np.dtype(np.float32): 1.0 / 2 ** 9,
            np.dtype(np.float64): 1.0 / 2 ** 14}


def effective_dtype(dat):
    """The dtype whose tolerances apply to ``dat`` (its own dtype: no reduced-precision math
    mode changes it here)."""
    return np.dtype(dat.dtype)


def get_tolerance(dat, tol, default_tol):
    """``tol`` itself when it is a number; else the entry for ``dat``'s dtype in the dict
    ``tol`` (when given and present) or in ``default_tol``."""
    if isinstance(tol, numbers.Number):
        return tol
    dtype = effective_dtype(dat)
    tol = {} if tol is None else tol
    return tol.get(dtype, default_tol[dtype])


def get_tols(x, y, rtol, atol):
    """(rtol, atol) for comparing ``x`` with ``y``: the looser default of the two dtypes
    wherever a tolerance is not given."""
    if isinstance(x, numbers.Number):
        x = np.array(x)
    if isinstance(y, numbers.Number):
        y = np.array(y)
    rtol = max(get_tolerance(x, rtol, default_rtols()), get_tolerance(y, rtol, default_rtols()))
    atol = max(get_tolerance(x, atol, default_atols()), get_tolerance(y, atol, default_atols()))
    return rtol, atol


def get_atol(atol=None, dtype=np.dtype(np.float64)):
    """``atol``, or the default absolute tolerance of ``dtype`` (float64: 1e-20)."""
    return default_atols()[np.dtype(dtype)] if atol is None else atol


def get_rtol(rtol=None, dtype=np.dtype(np.float64)):
    """``rtol``, or the default relative tolerance of ``dtype`` (float64: 1e-5)."""
    return default_rtols()[np.dtype(dtype)] if rtol is None else rtol


def get_etol(etol=None):
    """``etol`` (the tolerated fraction of mismatching elements), 0 by default."""
    return 0 if etol is None else etol


# ---------------------------------------------------------------------------------------------
# random data
# ---------------------------------------------------------------------------------------------
def random_arrays(*shapes):
    """Standard-normal float32 numpy arrays, one per shape (one array when one shape)."""
    arrays = [np.array(np.random.randn(), dtype=default_dtype()) if len(s) == 0
              else np.random.randn(*s).astype(default_dtype()) for s in shapes]
    return arrays[0] if len(arrays) == 1 else arrays


def random_uniform_arrays(*shapes, **kwargs):
    """Uniform numpy arrays, one per shape; keywords ``low`` (0), ``high`` (1), ``dtype``."""
    low = kwargs.pop('low', 0.0)
    high = kwargs.pop('high', 1.0)
    dtype = kwargs.pop('dtype', default_dtype())
    if kwargs:
        raise TypeError('Got unexpected argument/s : ' + str(kwargs.keys()))
    return [np.random.uniform(low, high, size=s).astype(dtype) for s in shapes]


def random_sample(population, k):
    """``k`` distinct elements of the list ``population`` in random order."""
    if not 0 <= k <= len(population):
        raise ValueError("random_sample: k=%d is outside [0, %d]" % (k, len(population)))
    shuffled = population[:]
    np.random.shuffle(shuffled)
    return shuffled[:k]


def _sorted_items(d):
    """The (key, value) pairs of ``d`` sorted by key (a reproducible order for random fills)."""
    return sorted(d.items(), key=lambda item: item[0])


def _sorted_dict(d):
    return OrderedDict(_sorted_items(d))


def rand_sparse_ndarray(shape, stype, density=None, dtype=None, distribution=None,
                        data_init=None, rsp_indices=None, modifier_func=None,
                        shuffle_csr_indices=False, ctx=None):
    """A random sparse NDArray; returns ``(array, parts)``.

    ``stype`` 'row_sparse': each row is kept with probability ``density`` (or exactly the rows
    ``rsp_indices``); parts are ``(values, row_indices)``. 'csr' (2-D): each element is kept
    with probability ``density``; parts are ``(indptr, indices, data)``. ``data_init`` fills
    the kept values with one number; ``modifier_func`` maps each kept value.
    """
    ctx = ctx if ctx else default_context()
    density = rnd.rand() if density is None else density
    dtype = default_dtype() if dtype is None else dtype
    distribution = "uniform" if distribution is None else distribution
    if not 0 <= density <= 1:
        raise ValueError("density has to be between 0 and 1")
    if distribution != "uniform":
        raise ValueError("rand_sparse_ndarray: only the 'uniform' distribution is available, "
                         "got %r" % (distribution,))
    if stype == 'row_sparse':
        if rsp_indices is not None:
            indices = np.asarray(rsp_indices, dtype=np.int64)
            if len(indices) > shape[0]:
                raise ValueError("rand_sparse_ndarray: %d row indices for %d rows"
                                 % (len(indices), shape[0]))
        else:
            indices = np.argwhere(rnd.rand(shape[0]) < density).flatten()
        if indices.shape[0] == 0:
            result = mx.nd.zeros(shape, stype='row_sparse', dtype=dtype, ctx=ctx)
            return result, (np.array([], dtype=dtype), np.array([]))
        values = rnd.rand(indices.shape[0], *shape[1:]).astype(dtype)
        if data_init is not None:
            values.fill(data_init)
        if modifier_func is not None:
            values = np.vectorize(modifier_func)(values).astype(dtype)
        arr = mx.nd.sparse.row_sparse_array((values, indices), shape=shape, dtype=dtype,
                                            ctx=ctx)
        return arr, (values, indices)
    if stype == 'csr':
        if len(shape) != 2:
            raise ValueError("rand_sparse_ndarray: a csr array is 2-D, got shape %s"
                             % (tuple(shape),))
        dense = rnd.rand(*shape)
        dense = np.where(rnd.rand(*shape) < density, dense, 0.0).astype(dtype)
        if data_init is not None:
            dense[dense != 0] = data_init
        if modifier_func is not None:
            mask = dense != 0
            dense[mask] = np.vectorize(modifier_func)(dense[mask])
        # column indices come out sorted; shuffle_csr_indices is accepted for compatibility
        csr = mx.nd.array(dense, ctx=ctx, dtype=dtype).tostype('csr')
        return csr, (csr.indptr, csr.indices, csr.data)
    raise ValueError("rand_sparse_ndarray: unknown storage type %r" % (stype,))


def rand_ndarray(shape, stype='default', density=None, dtype=None, modifier_func=None,
                 shuffle_csr_indices=False, distribution=None, ctx=None):
    """A random NDArray: standard-normal values for 'default' storage, else a random sparse
    array (see :func:`rand_sparse_ndarray`)."""
    ctx = ctx if ctx else default_context()
    if stype == 'default':
        return mx.nd.array(random_arrays(shape), dtype=dtype, ctx=ctx)
    arr, _ = rand_sparse_ndarray(shape, stype, density=density, modifier_func=modifier_func,
                                 dtype=dtype, shuffle_csr_indices=shuffle_csr_indices,
                                 distribution=distribution, ctx=ctx)
    return arr


def _random_dims(highs, allow_zero_size):
    """One ``rnd.randint`` draw per entry of ``highs``, in order: a size in [1, high], or in
    [0, high] when ``allow_zero_size``."""
    low = 0 if allow_zero_size else 1
    return tuple(rnd.randint(low, high + 1) for high in highs)


def rand_shape_2d(dim0=10, dim1=10, allow_zero_size=False):
    """A random 2-D shape with dims in [1, dimN] ([0, dimN] with ``allow_zero_size``)."""
    return _random_dims((dim0, dim1), allow_zero_size)


def rand_shape_3d(dim0=10, dim1=10, dim2=10, allow_zero_size=False):
    """A random 3-D shape with dims in [1, dimN] ([0, dimN] with ``allow_zero_size``)."""
    return _random_dims((dim0, dim1, dim2), allow_zero_size)


def rand_shape_nd(num_dim, dim=10, allow_zero_size=False):
    """A random ``num_dim``-D shape (a tuple) with dims in [1, dim], from a single draw."""
    return tuple(rnd.randint(0 if allow_zero_size else 1, dim + 1, size=num_dim))


def rand_coord_2d(x_low, x_high, y_low, y_high):
    """A random integer point with x in [x_low, x_high) and y in [y_low, y_high)."""
    return tuple(np.random.randint(low, high, dtype=np.int64)
                 for low, high in ((x_low, x_high), (y_low, y_high)))


def np_reduce(dat, axis, keepdims, numpy_reduce_func):
    """Apply ``numpy_reduce_func(x, axis=k)`` for every axis ``k`` of ``axis`` (an int, a
    sequence, or None for all), highest axis first so the others keep their numbers; with
    ``keepdims`` the reduced axes come back with length 1."""
    if axis is None:
        axes = list(range(len(dat.shape)))
    else:
        axes = [axis] if isinstance(axis, int) else list(axis)
    reduced = dat
    for k in sorted(axes, reverse=True):
        reduced = numpy_reduce_func(reduced, axis=k)
    if not keepdims:
        return reduced
    kept_shape = list(dat.shape)
    for k in axes:
        kept_shape[k] = 1
    return reduced.reshape(tuple(kept_shape))


# ---------------------------------------------------------------------------------------------
# comparisons
# ---------------------------------------------------------------------------------------------
def _as_numpy(x):
    return x.asnumpy() if isinstance(x, NDArray) else x


def _find_max_violation(a, b, rtol, atol):
    """(index, ratio) of the element that exceeds ``atol + rtol*|b|`` the most."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    a, b = np.broadcast_arrays(a, b)
    with np.errstate(invalid='ignore'):
        # equal infinities count as equal, as in np.allclose
        absdiff = np.where(np.equal(a, b), 0, np.abs(a - b))
        violation = absdiff / (atol + rtol * np.abs(b) + 1e-20)
    violation = np.where(np.isnan(violation), np.inf, violation)
    loc = int(np.argmax(violation))
    idx = tuple(int(i) for i in np.unravel_index(loc, violation.shape))
    return idx, float(np.max(violation))


def same(a, b):
    """True when the two arrays have the same shape and elements."""
    return np.array_equal(_as_numpy(a), _as_numpy(b))


def checkShapes(a, b):
    """Raise AssertionError unless ``a`` and ``b`` have the same shape."""
    if a.shape != b.shape:
        msg = npt.build_err_msg(
            [a, b], err_msg=f"a.shape = {a.shape} and b.shape = {b.shape} are not equal")
        raise AssertionError(msg)


def almost_equal(a, b, rtol=None, atol=None, equal_nan=False, use_broadcast=True):
    """True when ``|a - b| <= atol + rtol*|b|`` everywhere (float64 defaults: 1e-5, 1e-20)."""
    if not use_broadcast:
        checkShapes(a, b)
    return np.allclose(_as_numpy(a), _as_numpy(b), rtol=get_rtol(rtol), atol=get_atol(atol),
                       equal_nan=equal_nan)


def locationError(a, b, index, names, maxError=False):
    """A line naming one mismatching element: its index and both values."""
    maximum = "maximum " if maxError else ""
    return "Location of %serror: %s, %s=%.8f, %s=%.8f" % (
        maximum, str(index), names[0], a[index], names[1], b[index])


def _successive_violations(a, b, worst, rtol, atol, equal_nan, limit):
    """Mismatching elements from the worst down: ``worst`` (an ``(index, ratio)`` pair of
    ``a``/``b``), then the worst of the rest once each one found is zeroed in float64 copies
    of both arrays. Stops when the remaining elements agree, or once ``limit`` of them are
    listed (``limit`` <= 0: no limit). Returns the list and whether the limit stopped it."""
    found = [worst]
    rest_a, rest_b = a.astype(np.float64, copy=True), b.astype(np.float64, copy=True)
    while len(found) <= a.size:
        where = found[-1][0]
        rest_a[where] = rest_b[where] = 0
        if almost_equal(rest_a, rest_b, rtol, atol, equal_nan=equal_nan):
            break
        if 0 < limit <= len(found):
            return found, True
        found.append(_find_max_violation(rest_a, rest_b, rtol, atol))
    return found, False


def assert_almost_equal(a, b, rtol=None, atol=None, names=('a', 'b'), equal_nan=False,
                        use_broadcast=True, mismatches=(10, 10)):
    """Raise AssertionError unless ``a`` and ``b`` agree within ``atol + rtol*|b|``.

    ``a``/``b`` are numpy arrays, NDArrays or numbers. ``rtol``/``atol``: a number, a
    ``{dtype: tol}`` dict, or None for the dtype defaults (the looser of the two operands').
    ``names`` label the operands in the message, which lists up to ``mismatches[0]`` of the
    worst elements (searching at most ``mismatches[1]``). bool arrays must be equal.
    """
    if not use_broadcast:
        checkShapes(a, b)
    rtol, atol = get_tols(a, b, rtol, atol)
    a = _as_numpy(a)
    b = _as_numpy(b)
    if getattr(a, 'dtype', None) == np.bool_ and getattr(b, 'dtype', None) == np.bool_:
        np.testing.assert_equal(a, b)
        return
    if almost_equal(a, b, rtol, atol, equal_nan=equal_nan):
        return

    a = np.asarray(a)
    b = np.asarray(b)
    a_b, b_b = np.broadcast_arrays(a, b) if a.shape != b.shape else (a, b)
    worst = _find_max_violation(a_b, b_b, rtol, atol)
    if worst[0] == ():
        err = "Error %f exceeds tolerance rtol=%e, atol=%e.\n" % (worst[1], rtol, atol)
    else:
        found, cut_short = _successive_violations(a_b, b_b, worst, rtol, atol, equal_nan,
                                                  mismatches[1])
        # a search cut short counts one more mismatch than it listed, and says "at least"
        count = len(found) + 1 if cut_short else len(found)
        listed = ["%3d: Error %f  %s" % (rank, ratio, locationError(a_b, b_b, where, names))
                  for rank, (where, ratio) in enumerate(found[:max(mismatches[0], 0)], 1)]
        heading = '*** Maximum errors for vector of size %d:  rtol=%g, atol=%g' % (a_b.size,
                                                                                 rtol, atol)
        err = "Error %f exceeds tolerance rtol=%e, atol=%e (mismatch %s%f%%).\n%s\n%s" % (
            worst[1], rtol, atol, "at least " if cut_short else "", 100.0 * count / a_b.size,
            locationError(a_b, b_b, worst[0], names, maxError=True),
            "\n".join([heading] + listed))
    with np.printoptions(threshold=4, suppress=True):
        msg = npt.build_err_msg([a, b], err_msg=err, names=tuple(names))
    raise AssertionError(msg)


def assert_allclose(a, b, rtol=1e-07, atol=0, equal_nan=True):
    """:func:`assert_almost_equal` with numpy's ``assert_allclose`` defaults."""
    assert_almost_equal(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def assert_almost_equal_with_err(a, b, rtol=None, atol=None, etol=None, names=('a', 'b'),
                                 equal_nan=False, mismatches=(10, 10)):
    """Like :func:`assert_almost_equal`, but tolerate a fraction ``etol`` of mismatching
    elements."""
    etol = get_etol(etol)
    if etol <= 0:
        assert_almost_equal(a, b, rtol=rtol, atol=atol, names=names, equal_nan=equal_nan,
                            mismatches=mismatches)
        return
    rtol, atol = get_tols(a, b, rtol, atol)
    a = _as_numpy(a)
    b = _as_numpy(b)
    close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    err = 1 - np.count_nonzero(close) / close.size
    if err > etol:
        index, ratio = _find_max_violation(a, b, rtol, atol)
        msg = ("Error rate %f exceeds etol=%f (rtol=%e, atol=%e); worst error %f.\n%s"
               % (err, etol, rtol, atol, ratio,
                  locationError(a, b, index, names, maxError=True)))
        raise AssertionError(npt.build_err_msg([a, b], err_msg=msg, names=tuple(names)))


def assert_almost_equal_ignore_nan(a, b, rtol=None, atol=None, names=('a', 'b')):
    """:func:`assert_almost_equal` where a NaN in either operand masks that element."""
    a = np.copy(_as_numpy(a))
    b = np.copy(_as_numpy(b))
    nan_mask = np.logical_or(np.isnan(a), np.isnan(b))
    a[nan_mask] = 0
    b[nan_mask] = 0
    assert_almost_equal(a, b, rtol, atol, names)


def assert_exception(f, exception_type, *args, **kwargs):
    """Raise AssertionError unless ``f(*args, **kwargs)`` raises ``exception_type``."""
    try:
        f(*args, **kwargs)
    except exception_type:
        return
    raise AssertionError("%s did not raise %s" % (getattr(f, "__name__", f),
                                                  exception_type.__name__))


def retry(n):
    """Decorator: run a stochastic test up to ``n`` times until it passes."""
    if n <= 0:
        raise ValueError("retry(n) needs n > 0")

    def decorate(f):
        def wrapper(*args, **kwargs):
            for i in range(n):
                try:
                    f(*args, **kwargs)
                    return
                except AssertionError:
                    if i == n - 1:
                        raise
                    mx.nd.waitall()
        wrapper.__name__ = f.__name__
        wrapper.__doc__ = f.__doc__
        return wrapper
    return decorate


def same_array(array1, array2):
    """True when the two NDArrays share memory: a change written through ``array1`` shows in
    ``array2`` (``array1`` is restored afterwards)."""
    array1[:] += 1
    if not same(array1.asnumpy(), array2.asnumpy()):
        array1[:] -= 1
        return False
    array1[:] -= 1
    return same(array1.asnumpy(), array2.asnumpy())


def _leaf_pairs(t1, t2):
    """Corresponding leaves of two nested tuples; a pair with None on a side is left out."""
    if t1 is not None and t2 is not None:
        if not isinstance(t1, tuple):
            yield t1, t2
            return
        for parts in zip(t1, t2):
            yield from _leaf_pairs(*parts)


def compare_ndarray_tuple(t1, t2, rtol=None, atol=None):
    """assert_almost_equal over (nested tuples of) arrays; None on either side is skipped."""
    for leaf1, leaf2 in _leaf_pairs(t1, t2):
        assert_almost_equal(leaf1, leaf2, rtol=rtol, atol=atol)


def compare_optimizer(opt1, opt2, shape, dtype, w_stype='default', g_stype='default',
                      rtol=1e-4, atol=1e-5, compare_states=True):
    """One update of two optimizers from the same random weight and gradient: their states
    and new weights must agree."""
    def make(stype):
        if stype == 'default':
            return mx.nd.array(np.random.uniform(size=shape), ctx=default_context(),
                               dtype=dtype)
        if stype in ('row_sparse', 'csr'):
            return rand_ndarray(shape, stype, density=1, dtype=dtype)
        raise ValueError("compare_optimizer: storage type %r is not supported" % (stype,))

    def dense_and_typed(stype):
        """The same random values as a dense array (for opt1) and as ``stype`` (for opt2)."""
        typed = make(stype)
        return typed.copyto(default_context()).tostype('default'), typed

    weights, grads = dense_and_typed(w_stype), dense_and_typed(g_stype)
    opts = (opt1, opt2)
    states = [opt.create_state_multi_precision(0, w) for opt, w in zip(opts, weights)]
    if compare_states:
        compare_ndarray_tuple(*states)
    for opt, w, g, state in zip(opts, weights, grads, states):
        opt.update_multi_precision(0, w, g, state)
    if compare_states:
        compare_ndarray_tuple(*states, rtol=rtol, atol=atol)
    assert_almost_equal(weights[0], weights[1], rtol=rtol, atol=atol)


def same_symbol_structure(sym1, sym2):
    """True when the two symbols' JSON graphs have the same operator at every node."""
    nodes1 = json.loads(sym1.tojson())["nodes"]
    nodes2 = json.loads(sym2.tojson())["nodes"]
    return all(n1["op"] == n2["op"] for n1, n2 in zip(nodes1, nodes2))


def collapse_sum_like(a, shape):
    """Sum ``a`` (numpy) down to ``shape``, the inverse of broadcasting to a.shape."""
    if len(shape) > a.ndim:
        raise ValueError("collapse_sum_like: shape %s has more dims than %s"
                         % (tuple(shape), a.shape))
    if not shape:
        return np.sum(a)
    lead = a.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape)
                                      if d == 1 and a.shape[lead + i] != 1)
    return np.sum(a, axis=axes).reshape(shape)


# ---------------------------------------------------------------------------------------------
# symbols: forward, numeric and symbolic gradients
# ---------------------------------------------------------------------------------------------
def simple_forward(sym, ctx=None, is_train=False, **inputs):
    """Bind ``sym`` to the numpy ``inputs`` (by argument name), run forward and return the
    output as numpy (a list when there are several)."""
    ctx = ctx or default_context()
    inputs = {k: array(v) for k, v in inputs.items()}
    exe = sym.bind(ctx, args=inputs)
    exe.forward(is_train=is_train)
    outputs = [x.asnumpy() for x in exe.outputs]
    return outputs[0] if len(outputs) == 1 else outputs


def _check_dtype_arg(dtype, allow_asnumpy=True):
    allowed = (np.float16, np.float32, np.float64)
    if not ((allow_asnumpy and isinstance(dtype, str) and dtype == "asnumpy")
            or dtype in allowed or (not isinstance(dtype, str)
                                    and np.dtype(dtype) in map(np.dtype, allowed))):
        raise ValueError("dtype must be %snp.float16, np.float32 or np.float64, got %r"
                         % ("'asnumpy', " if allow_asnumpy else "", dtype))


def _nd_from(v, ctx, dtype):
    if isinstance(v, np.ndarray) or np.isscalar(v):
        v = np.asarray(v)
        return mx.nd.array(v, ctx=ctx, dtype=v.dtype if dtype == "asnumpy" else dtype)
    return v


def _check_same_names(given, names, message):
    """ValueError ``message % (names, given keys)`` (as sets) unless the dict ``given`` has
    exactly the keys ``names``."""
    if set(given) != set(names):
        raise ValueError(message % (str(set(names)), str(set(given))))


def _parse_location(sym, location, ctx, dtype=default_dtype()):
    """``location`` (a list in ``list_arguments()`` order, or a complete dict) as an
    OrderedDict name -> NDArray, sorted by name; numpy values are converted to ``dtype``
    (or keep their own with ``dtype="asnumpy"``)."""
    if not isinstance(location, (dict, list, tuple)):
        raise TypeError("location must be a list, tuple or dict, got %s"
                        % type(location).__name__)
    _check_dtype_arg(dtype)
    arg_names = sym.list_arguments()
    if isinstance(location, dict):
        _check_same_names(location, arg_names, "Symbol arguments and keys of the given location do "
                          "not match.symbol args:%s, location.keys():%s")
    else:
        location = dict(zip(arg_names, location))
    return _sorted_dict({k: _nd_from(v, ctx, dtype) for k, v in location.items()})


def _parse_aux_states(sym, aux_states, ctx, dtype=default_dtype()):
    """``aux_states`` (list in ``list_auxiliary_states()`` order or complete dict) as a dict
    name -> NDArray, or None."""
    _check_dtype_arg(dtype)
    if aux_states is None:
        return None
    aux_names = sym.list_auxiliary_states()
    if isinstance(aux_states, dict):
        _check_same_names(aux_states, aux_names, "Symbol aux_states names and given aux_states do "
                          "not match.symbol aux_names:%s, aux_states.keys:%s")
    elif isinstance(aux_states, (list, tuple)):
        aux_states = dict(zip(aux_names, aux_states))
    return {k: _nd_from(v, ctx, dtype) for k, v in aux_states.items()}


def numeric_grad(executor, location, aux_states=None, eps=1e-4, use_forward_train=True,
                 dtype=default_dtype()):
    """Central-difference gradient of ``sum(executor.outputs[0])`` w.r.t. every floating
    argument in ``location`` ({name: numpy array}); aux states are reset before each forward.

    Each element is moved by ``+-eps/2``, so the step between the two evaluations is ``eps``.
    """
    _check_dtype_arg(dtype, allow_asnumpy=False)
    approx = {k: np.zeros(v.shape, dtype=dtype) for k, v in location.items()}
    for k, v in location.items():
        if executor.arg_dict[k].stype == 'default':
            executor.arg_dict[k][:] = np.asarray(v, dtype=dtype)
    for k in location:
        location[k] = np.array(location[k], order='C')

    def reset_aux():
        if aux_states is not None:
            for key, val in aux_states.items():
                executor.aux_dict[key][:] = val

    def total(values, k):
        executor.arg_dict[k][:] = mx.nd.array(values, dtype=dtype).tostype(
            executor.arg_dict[k].stype)
        reset_aux()
        executor.forward(is_train=use_forward_train)
        return executor.outputs[0].asnumpy().astype(np.float64).sum()

    for k, v in location.items():
        if v.dtype.kind != 'f':
            continue
        original = v.copy()
        flat = v.reshape(-1)
        for i in range(flat.size):
            flat[i] = original.flat[i] + eps / 2.0
            f_plus = total(v, k)
            flat[i] = original.flat[i] - eps / 2.0
            f_minus = total(v, k)
            approx[k].reshape(-1)[i] = (f_plus - f_minus) / eps
            flat[i] = original.flat[i]
        executor.arg_dict[k][:] = mx.nd.array(original, dtype=dtype).tostype(
            executor.arg_dict[k].stype)
    return approx


def check_numeric_gradient(sym, location, aux_states=None, numeric_eps=None, rtol=None,
                           atol=None, grad_nodes=None, use_forward_train=True, ctx=None,
                           grad_stype_dict=None, dtype=default_dtype()):
    """Compare ``sym``'s backward pass with finite differences.

    The symbol's (single) output is multiplied by a random projection and wrapped in
    ``make_loss``, so one scalar's gradient is checked for every argument in ``grad_nodes``
    (default: all; a list means req 'write', a dict gives each node's req: with 'add' the
    gradient is added to a random initial value, with 'null' the gradient array must be left
    untouched). ``location``/``aux_states``: numpy values, a list in argument order or a dict.
    ``numeric_eps`` defaults by dtype (float32 2^-9, float64 2^-14).
    """
    _check_dtype_arg(dtype, allow_asnumpy=False)
    if ctx is None:
        ctx = default_context()
    if len(sym.list_outputs()) != 1:
        raise ValueError("check_numeric_gradient: the symbol has %d outputs %s; check one "
                         "at a time (sym[i])" % (len(sym.list_outputs()), sym.list_outputs()))

    location = _parse_location(sym=sym, location=location, ctx=ctx, dtype=dtype)
    location_npy = {k: v.asnumpy() for k, v in location.items()}
    aux_states = _parse_aux_states(sym=sym, aux_states=aux_states, ctx=ctx, dtype=dtype)
    aux_states_npy = None if aux_states is None else \
        {k: v.asnumpy() for k, v in aux_states.items()}

    # grad_nodes: the arguments to check, all by default; a dict also gives their grad_req
    if grad_nodes is None:
        grad_nodes = sym.list_arguments()
    if isinstance(grad_nodes, dict):
        grad_req, grad_nodes = grad_nodes.copy(), list(grad_nodes)
    elif isinstance(grad_nodes, (list, tuple)):
        grad_nodes = list(grad_nodes)
        grad_req = dict.fromkeys(grad_nodes, 'write')
    else:
        raise ValueError("grad_nodes must be None, a list or a dict, got %s"
                         % type(grad_nodes).__name__)

    input_shape = {k: v.shape for k, v in location.items()}
    _, out_shape, _ = sym.infer_shape(**input_shape)
    proj = mx.sym.Variable("__random_proj")
    out = mx.sym.make_loss(sym * proj)

    # projection weights away from zero, so no element's contribution is lost in rounding
    location = dict(list(location.items()) + [
        ("__random_proj", mx.nd.array(np.random.rand(*out_shape[0]) + 0.1, ctx=ctx,
                                      dtype=dtype))])
    args_grad_npy = dict([(k, np.random.normal(0, 0.01, size=location[k].shape))
                          for k in grad_nodes]
                         + [("__random_proj", np.random.normal(0, 0.01, size=out_shape[0]))])
    args_grad = {k: mx.nd.array(v, ctx=ctx, dtype=dtype) for k, v in args_grad_npy.items()}
    if grad_stype_dict is not None:
        if not isinstance(grad_stype_dict, dict):
            raise TypeError("grad_stype_dict must be a dict")
        for k, v in grad_stype_dict.items():
            if k in args_grad and v != 'default':
                args_grad[k] = mx.nd.zeros(args_grad[k].shape, args_grad[k].context,
                                           args_grad[k].dtype, v)

    executor = out.bind(ctx, grad_req=grad_req, args=location, args_grad=args_grad,
                        aux_states=aux_states)
    if len(executor.arg_arrays) != len(location):
        raise ValueError("Executor arg_arrays and and location len do not match."
                         "Got %d inputs and %d locations"
                         % (len(executor.arg_arrays), len(location)))
    executor.forward(is_train=True)
    eps = get_tolerance(executor.outputs[0], numeric_eps, default_numeric_eps())
    if np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.float16)) and eps < 1e-5:
        raise ValueError("check_numeric_gradient: numeric_eps=%g is too small for %s"
                         % (eps, np.dtype(dtype).name))
    executor.backward()
    symbolic_grads = executor.grad_dict

    numeric_gradients = numeric_grad(executor, location_npy, aux_states_npy, eps=eps,
                                     use_forward_train=use_forward_train, dtype=dtype)
    for name in grad_nodes:
        fd_grad = numeric_gradients[name]
        orig_grad = args_grad_npy[name]
        sym_grad = symbolic_grads[name]
        labels = ("NUMERICAL_%s" % name, "BACKWARD_%s" % name)
        if grad_req[name] == 'write':
            assert_almost_equal(fd_grad, sym_grad, rtol, atol, labels)
        elif grad_req[name] == 'add':
            assert_almost_equal(fd_grad, _as_numpy(sym_grad) - orig_grad, rtol, atol, labels)
        elif grad_req[name] == 'null':
            assert_almost_equal(orig_grad, sym_grad, rtol, atol, labels)
        else:
            raise ValueError("Invalid grad_req %s for argument %s" % (grad_req[name], name))


def check_symbolic_forward(sym, location, expected, rtol=None, atol=None, aux_states=None,
                           ctx=None, equal_nan=False, dtype=default_dtype()):
    """Run ``sym`` forward (is_train=False) at ``location`` and compare every output with
    ``expected`` (a list in output order or a dict by output name); returns the outputs."""
    _check_dtype_arg(dtype)
    if ctx is None:
        ctx = default_context()
    location = _parse_location(sym=sym, location=location, ctx=ctx, dtype=dtype)
    aux_states = _parse_aux_states(sym=sym, aux_states=aux_states, ctx=ctx, dtype=dtype)
    if isinstance(expected, dict):
        expected = [expected[k] for k in sym.list_outputs()]
    args_grad = {k: mx.nd.zeros(v.shape, ctx=ctx, dtype=v.dtype if dtype == "asnumpy"
                                else dtype) for k, v in location.items()}
    executor = sym.bind(ctx=ctx, args=location, args_grad=args_grad, aux_states=aux_states)
    executor.forward(is_train=False)
    for output_name, expect, output in zip(sym.list_outputs(), expected, executor.outputs):
        assert_almost_equal(expect, output, rtol, atol,
                            ("EXPECTED_%s" % output_name, "FORWARD_%s" % output_name),
                            equal_nan=equal_nan)
    return executor.outputs


def check_symbolic_backward(sym, location, out_grads, expected, rtol=None, atol=None,
                            aux_states=None, grad_req='write', ctx=None, grad_stypes=None,
                            equal_nan=False, dtype=default_dtype()):
    """Run ``sym`` forward (is_train=True) and backward with head gradients ``out_grads``
    and compare the argument gradients with ``expected`` (list in argument order or dict).

    Gradient buffers start from random values: 'write' must overwrite them, 'add' must add
    to them, 'null' must leave them alone. Returns the gradient arrays by name.
    """
    _check_dtype_arg(dtype)
    if ctx is None:
        ctx = default_context()
    location = _parse_location(sym=sym, location=location, ctx=ctx, dtype=dtype)
    aux_states = _parse_aux_states(sym=sym, aux_states=aux_states, ctx=ctx, dtype=dtype)
    if isinstance(expected, (list, tuple)):
        expected = dict(zip(sym.list_arguments(), expected))

    # deterministic "dirty" gradient buffers, so req handling is observable
    args_grad_npy = {k: np.random.normal(size=np.shape(v)) for k, v in _sorted_items(expected)}
    args_grad_data = {}
    for k, v in args_grad_npy.items():
        stype = None if grad_stypes is None else grad_stypes.get(k)
        if stype is not None and stype != 'default':
            args_grad_data[k] = mx.nd.zeros(v.shape, ctx=ctx, stype=stype,
                                            dtype=np.float32 if dtype == "asnumpy" else dtype)
        else:
            args_grad_data[k] = mx.nd.array(
                v, ctx=ctx, dtype=np.asarray(expected[k]).dtype if dtype == "asnumpy"
                else dtype)

    if isinstance(grad_req, str):
        grad_req = {k: grad_req for k in sym.list_arguments()}
    elif isinstance(grad_req, (list, tuple)):
        grad_req = dict(zip(sym.list_arguments(), grad_req))

    executor = sym.bind(ctx=ctx, args=location, args_grad=args_grad_data,
                        aux_states=aux_states, grad_req=grad_req)
    executor.forward(is_train=True)

    if isinstance(out_grads, (tuple, list)):
        out_grads = [_nd_from(arr, ctx, dtype) for arr in out_grads]
    elif isinstance(out_grads, dict):
        out_grads = {k: _nd_from(v, ctx, dtype) for k, v in out_grads.items()}
    elif out_grads is not None:
        raise TypeError("out_grads must be None, a list or a dict, got %s"
                        % type(out_grads).__name__)
    executor.backward(out_grads)

    for name in expected:
        labels = ("EXPECTED_%s" % name, "BACKWARD_%s" % name)
        req = grad_req.get(name, 'null')
        if req == 'write':
            assert_almost_equal(expected[name], args_grad_data[name], rtol, atol, labels,
                                equal_nan=equal_nan)
        elif req == 'add':
            assert_almost_equal(expected[name],
                                args_grad_data[name].asnumpy() - args_grad_npy[name],
                                rtol, atol, labels, equal_nan=equal_nan)
        elif req == 'null':
            assert_almost_equal(args_grad_npy[name], args_grad_data[name], rtol, atol,
                                labels, equal_nan=equal_nan)
        else:
            raise ValueError("Invalid grad_req %s for argument %s" % (req, name))
    return args_grad_data


def check_speed(sym, location=None, ctx=None, N=20, grad_req=None, typ="whole", **kwargs):
    """Seconds per run of ``sym``: forward+backward (``typ="whole"``) or forward only
    (``typ="forward"``), averaged over ``N`` runs after one warm-up (which also compiles).

    ``location`` ({name: numpy array}) gives the inputs; without it, ``kwargs`` are the input
    shapes for ``simple_bind`` and the inputs are standard-normal.
    """
    if ctx is None:
        ctx = default_context()
    if grad_req is None:
        grad_req = 'write'
    if location is None:
        exe = sym.simple_bind(grad_req=grad_req, ctx=ctx, **kwargs)
        location = {k: np.random.normal(size=arr.shape, scale=1.0)
                    for k, arr in exe.arg_dict.items()}
    else:
        if not isinstance(location, dict):
            raise TypeError('Expect dict, get "location"=%s' % str(location))
        exe = sym.simple_bind(grad_req=grad_req, ctx=ctx,
                              **{k: v.shape for k, v in location.items()})
    for name, iarr in location.items():
        exe.arg_dict[name][:] = iarr.astype(exe.arg_dict[name].dtype)

    if typ == "whole":
        exe.forward(is_train=True)
        exe.backward(out_grads=exe.outputs)
        mx.nd.waitall()
        tic = time.time()
        for _ in range(N):
            exe.forward(is_train=True)
            exe.backward(out_grads=exe.outputs)
        mx.nd.waitall()
        return (time.time() - tic) / N
    if typ == "forward":
        exe.forward(is_train=False)
        mx.nd.waitall()
        tic = time.time()
        for _ in range(N):
            exe.forward(is_train=False)
        mx.nd.waitall()
        return (time.time() - tic) / N
    raise ValueError('typ can only be "whole" or "forward".')


def check_consistency(sym, ctx_list, scale=1.0, grad_req='write', arg_params=None,
                      aux_params=None, rtol=None, atol=None, raise_on_err=True,
                      ground_truth=None, equal_nan=False, use_uniform=False,
                      rand_type=np.float64):
    """Check that ``sym`` computes the same outputs and gradients on every entry of
    ``ctx_list``.

    Each entry is a dict of ``simple_bind`` keywords: ``ctx``, input shapes by name and
    optionally ``type_dict``. Inputs are random (normal with std ``scale``, or uniform with
    ``use_uniform``) unless given in ``arg_params``; aux states start at 0 unless given. The
    reference is the first executor with the most precise output dtype (or ``ground_truth``);
    tolerances default to the dtypes'. Returns the reference dict (outputs and gradients).
    """
    if len(ctx_list) <= 1:
        raise ValueError("check_consistency needs at least two entries in ctx_list")
    if isinstance(sym, Symbol):
        sym = [sym] * len(ctx_list)
    elif len(sym) != len(ctx_list):
        raise ValueError("check_consistency: %d symbols for %d contexts"
                         % (len(sym), len(ctx_list)))

    output_names = sym[0].list_outputs()
    arg_names = sym[0].list_arguments()
    exe_list = []
    for s, ctx in zip(sym, ctx_list):
        if s.list_arguments() != arg_names or s.list_outputs() != output_names:
            raise ValueError("check_consistency: the symbols differ in arguments or outputs")
        exe_list.append(s.simple_bind(grad_req=grad_req, **ctx))

    arg_params = {} if arg_params is None else arg_params
    aux_params = {} if aux_params is None else aux_params

    def smaller_dtype(dt1, dt2):
        """The less precise of two dtypes."""
        return dt1 if dt2 is None or np.dtype(dt1).itemsize < np.dtype(dt2).itemsize else dt2

    def draw(shape):
        if use_uniform:
            return np.random.uniform(low=-0.92 * scale, high=0.92 * scale, size=shape)
        return np.random.normal(size=shape, scale=scale)

    # missing inputs are drawn in sorted name order, so that a seed reproduces them
    for name, arr in _sorted_items(exe_list[0].arg_dict):
        if name not in arg_params:
            arg_params[name] = draw(arr.shape).astype(rand_type)
    aux_params.update((name, 0) for name in list(exe_list[0].aux_dict) if name not in aux_params)
    for exe in exe_list:
        for name, arr in exe.arg_dict.items():
            arr[:] = arg_params[name]
        for name, arr in exe.aux_dict.items():
            arr[:] = aux_params[name]
        if grad_req == "add":
            for arr in exe.grad_arrays:
                if arr is not None:
                    arr[:] = 0

    dtypes = [np.dtype(exe.outputs[0].dtype) for exe in exe_list]
    gt_idx = int(np.argmax([d.itemsize for d in dtypes]))
    gt = ground_truth
    if gt is None:
        gt = exe_list[gt_idx].output_dict.copy()
        if grad_req != 'null':
            gt.update(exe_list[gt_idx].grad_dict)

    def compare(arr, gtarr, rt, at, what):
        try:
            assert_almost_equal(arr, gtarr, rtol=rt, atol=at, equal_nan=equal_nan)
        except AssertionError as err:
            print(what)
            traceback.print_exc()
            if raise_on_err:
                raise err
            print(str(err))

    for exe in exe_list:
        exe.forward(is_train=False)
    for i, exe in enumerate(exe_list):
        if i == gt_idx:
            continue
        for name, arr in zip(output_names, exe.outputs):
            compare(arr, gt[name], rtol, atol,
                    'Predict Err: ctx %d vs ctx %d at %s' % (i, gt_idx, name))

    if grad_req != 'null':
        for exe in exe_list:
            exe.forward(is_train=True)
        # one head gradient for all: the first executor's outputs at the least precise dtype
        least_precise = [out.dtype for out in exe_list[0].outputs]
        for exe in exe_list:
            least_precise = [smaller_dtype(out.dtype, dt)
                             for out, dt in zip(exe.outputs, least_precise)]
        golden = [out.astype(dt).asnumpy()
                  for out, dt in zip(exe_list[0].outputs, least_precise)]
        for exe in exe_list:
            exe.backward([mx.nd.array(g, ctx=exe._ctx, dtype=out.dtype)
                          for g, out in zip(golden, exe.outputs)])
        for i, exe in enumerate(exe_list):
            if i == gt_idx:
                continue
            for name, arr in zip(output_names + arg_names, exe.outputs + exe.grad_arrays):
                if gt[name] is None:
                    if arr is not None:
                        raise AssertionError("check_consistency: %s has a gradient on ctx %d "
                                             "but not in the reference" % (name, i))
                    continue
                gtarr = gt[name]
                rt, at = rtol, atol
                # a float32 gradient next to float16 data is held to float16 tolerances
                small_arr = smaller_dtype(arr.dtype, dtypes[i])
                small_gt = smaller_dtype(gtarr.dtype, dtypes[gt_idx])
                if small_arr != arr.dtype or small_gt != gtarr.dtype:
                    rt, at = get_tols(arr.astype(small_arr), gtarr.astype(small_gt), rtol, atol)
                compare(arr, gtarr, rt, at, 'Train Err: %s %s ctx %d vs %s %s ctx %d at %s' % (
                    np.dtype(arr.dtype).name, arr.context, i, np.dtype(gtarr.dtype).name,
                    gtarr.context, gt_idx, name))
    return gt


def list_gpus():
    """The ids of the CUDA devices numba can see (empty without a GPU)."""
    return list(range(mx.context.num_gpus()))


# ---------------------------------------------------------------------------------------------
# environment variables
# ---------------------------------------------------------------------------------------------
@contextmanager
def environment(*args):
    """Set environment variables for the body of a ``with`` block, then restore them.

    ``environment('NAME', 'value')`` or ``environment({'A': '1', 'B': None})``; a value of
    None unsets the variable. Previous values (or absence) come back even if the body raises.
    """
    if len(args) == 1 and isinstance(args[0], dict):
        env_vars = args[0]
    elif len(args) == 2:
        env_vars = {args[0]: args[1]}
    else:
        raise ValueError('Expecting one dict arg or two args: env var name and value')

    def apply(values):
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    snapshot = {name: os.environ.get(name) for name in env_vars}
    apply(env_vars)
    try:
        yield
    finally:
        mx.nd.waitall()
        apply(snapshot)
