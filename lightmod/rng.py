"""The seeded generators that every lightmod component draws from.

Initializers, Dropout masks, RReLU slopes, SGLD noise and the random operators
(``nd.random.*``, ``sym.random.*``) all take their numbers from :func:`get_rng`, so
``mx.random.seed(s)`` (which is :func:`seed`) makes the whole sequence reproducible: the same
seed and the same calls give the same numbers.

As in MXNet, each device has its own stream: one for the host (every ``cpu(i)`` shares it) and
one per GPU id. ``seed(s)`` reseeds them all, the stream of GPU ``i`` with ``s + i`` (so two
GPUs draw different numbers); ``seed(s, ctx)`` reseeds only the stream of ``ctx``, with ``s``
itself (so two GPUs seeded that way draw the same numbers). A stream nobody has seeded since
the last ``seed(s)`` starts from ``s`` plus its device id when first used.

This module sits at the bottom of the layers (numpy only), so operators can draw without
importing the array front-end.
"""
import threading

import numpy as np

__all__ = ["seed", "get_rng"]

_lock = threading.Lock()
_global_seed = 0
_streams = {}          # device key -> numpy Generator


def _device(ctx):
    """(stream key, device id) of a context: the host stream for every CPU-side context."""
    if ctx is None:
        return "cpu", 0
    kind = getattr(ctx, "device_type", None)
    if kind is None:
        # a name such as "gpu(1)" or "cpu"
        name, _, rest = str(ctx).partition("(")
        kind, dev_id = name.strip(), int(rest.rstrip(")") or 0)
    else:
        dev_id = int(ctx.device_id)
    if kind == "gpu":
        return ("gpu", dev_id), dev_id
    if kind in ("cpu", "cpu_pinned", "cpu_shared"):
        return "cpu", 0
    raise ValueError("seed: unknown device %r" % (ctx,))


def _as_seed(seed_state):
    # MXNet passes the seed through a C int and on as a 32-bit unsigned number: negative
    # seeds and seeds past 2**31 wrap around instead of failing
    if isinstance(seed_state, (bool, np.bool_)) or not isinstance(seed_state, (int, np.integer)):
        raise ValueError("seed_state must be int, got %r" % (seed_state,))
    return int(seed_state) & 0xFFFFFFFF


def seed(seed_state, ctx="all"):
    """Seed every device's stream (``ctx="all"``) or the stream of one device (see above)."""
    global _global_seed
    value = _as_seed(seed_state)
    with _lock:
        if isinstance(ctx, str) and ctx == "all":
            _global_seed = value
            _streams.clear()
        else:
            key, _ = _device(ctx)
            _streams[key] = np.random.default_rng(value)


def get_rng(ctx=None):
    """The numpy Generator of ``ctx``'s device (the host stream when ``ctx`` is None)."""
    key, dev_id = _device(ctx)
    gen = _streams.get(key)
    if gen is None:
        with _lock:
            gen = _streams.get(key)
            if gen is None:
                gen = _streams[key] = np.random.default_rng((_global_seed + dev_id) & 0xFFFFFFFF)
    return gen
