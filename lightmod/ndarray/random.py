"""``nd.random``: random arrays drawn from lightmod's one generator (``lightmod/rng.py``).

Distribution parameters may be numbers (one sample array of ``shape``) or NDArrays (one
``shape``-sized block per parameter element, result shape ``param.shape + shape``), as in
MXNet. ``seed`` is ``mx.random.seed``.
"""
import numpy as np

from .. import rng as _random
from ..base import MXNetError, dtype_np
from .ndarray import NDArray, _as_ctx, _to_ctx_buffer

__all__ = ["seed", "uniform", "normal", "randn", "randint", "shuffle", "exponential",
           "gamma", "poisson", "negative_binomial", "multinomial"]

seed = _random.seed


def _shape(shape):
    if shape is None:
        return ()
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(d) for d in shape)


def _emit(host, ctx, dtype, out, like=None):
    if like is not None and ctx is None:
        ctx = like.context
    if out is not None:
        if out.shape != host.shape:
            raise MXNetError("random: out= has shape %s, the sample has shape %s"
                             % (out.shape, host.shape))
        out[:] = host.astype(out.dtype)
        return out
    ctx = _as_ctx(ctx)
    host = np.asarray(host, dtype=dtype_np(dtype), order="C")
    return NDArray(_to_ctx_buffer(host, ctx), ctx)


def _draw(draw, params, shape, dtype, ctx, out):
    """Sample with scalar or NDArray parameters (NDArrays: one block of `shape` per element)."""
    arrays = [p for p in params if isinstance(p, NDArray)]
    shape = _shape(shape)
    if arrays:
        base = arrays[0].shape
        host = [p._host_view().astype(np.float64).reshape(base + (1,) * len(shape))
                if isinstance(p, NDArray) else p for p in params]
        full = base + shape
        dtype = dtype if dtype is not None else arrays[0].dtype
        return _emit(np.asarray(draw(*host, full)), ctx, dtype, out, like=arrays[0])
    if not shape:
        shape = out.shape if out is not None else (1,)
    return _emit(np.asarray(draw(*params, shape)), ctx,
                 dtype if dtype is not None else np.float32, out)


def uniform(low=0, high=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from U[low, high)."""
    rng = _random.get_rng()
    return _draw(lambda lo, hi, s: rng.uniform(lo, hi, s), (low, high), shape, dtype, ctx, out)


def normal(loc=0, scale=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from N(loc, scale**2)."""
    rng = _random.get_rng()
    return _draw(lambda m, sd, s: rng.normal(m, sd, s), (loc, scale), shape, dtype, ctx, out)


def randn(*shape, **kwargs):
    """Standard normal samples of the given shape (``loc``/``scale`` keywords allowed)."""
    return normal(kwargs.pop("loc", 0), kwargs.pop("scale", 1), shape or None, **kwargs)


def randint(low, high, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Integers uniformly from [low, high) (dtype int32 by default)."""
    rng = _random.get_rng()
    return _draw(lambda lo, hi, s: rng.integers(int(lo), int(hi), s), (low, high), shape,
                 dtype if dtype is not None else np.int32, ctx, out)


def exponential(scale=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    rng = _random.get_rng()
    return _draw(lambda sc, s: rng.exponential(sc, s), (scale,), shape, dtype, ctx, out)


def gamma(alpha=1, beta=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    rng = _random.get_rng()
    return _draw(lambda a, b, s: rng.gamma(a, b, s), (alpha, beta), shape, dtype, ctx, out)


def poisson(lam=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    rng = _random.get_rng()
    return _draw(lambda lm, s: rng.poisson(lm, s), (lam,), shape, dtype, ctx, out)


def negative_binomial(k=1, p=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    rng = _random.get_rng()
    return _draw(lambda kk, pp, s: rng.negative_binomial(kk, pp, s), (k, p), shape, dtype, ctx,
                 out)


def multinomial(data, shape=None, get_prob=False, out=None, dtype="int32", **kwargs):
    """Draw category indices from the probability rows of ``data`` (last axis)."""
    rng = _random.get_rng()
    probs = data._host_view().astype(np.float64)
    n = int(np.prod(_shape(shape))) if shape else 1
    flat = probs.reshape(-1, probs.shape[-1])
    cum = np.cumsum(flat, axis=1)
    u = rng.random((flat.shape[0], n)) * cum[:, -1:]
    idx = np.minimum((u[:, :, None] >= cum[:, None, :]).sum(axis=2), flat.shape[1] - 1)
    res_shape = probs.shape[:-1] + (_shape(shape) if shape else ())
    result = _emit(idx.reshape(res_shape), None, dtype, out, like=data)
    if get_prob:
        logp = np.log(np.take_along_axis(flat, idx, axis=1)).reshape(res_shape)
        return result, _emit(logp, None, data.dtype, None, like=data)
    return result


def shuffle(data, **kwargs):
    """A copy of ``data`` with its rows (axis 0) randomly permuted."""
    host = data.asnumpy()
    _random.get_rng().shuffle(host, axis=0)
    return NDArray(_to_ctx_buffer(host, data.context), data.context)
