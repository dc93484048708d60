"""An executor bound with ``shared_exec`` for another graph (a BucketingModule's other buckets)
plans its internal buffers in the shared executor's memory, never two of its own buffers in
the same memory, and computes what an executor of its own memory computes. (Values planned in
the memory of a dead one, ``Executor._recycled``, are views of the executor's own buffers.)"""
import numpy as np

import lightmod as mx


def _net(length):
    data = mx.sym.Variable("data")
    w, b = mx.sym.var("w"), mx.sym.var("b")
    parts = mx.sym.SliceChannel(data, num_outputs=length, axis=1, squeeze_axis=True)
    h = None
    for t in range(length):
        x = mx.sym.FullyConnected(parts[t], num_hidden=6, weight=w, bias=b)
        h = mx.sym.tanh(x if h is None else x + h)
    return mx.sym.MakeLoss(mx.sym.sum(h * h))


def _run(exe, rng_seed=0):
    rng = np.random.RandomState(rng_seed)
    for arr in exe.arg_dict.values():
        arr[:] = rng.uniform(-1, 1, arr.shape)
    exe.forward(is_train=True)
    exe.backward()
    return exe.outputs[0].asnumpy(), {n: g.asnumpy() for n, g in exe.grad_dict.items()}


def _buffers(exe):
    return [arr._data for arr in exe._pool.values() if isinstance(arr._data, np.ndarray)]


def test_shared_memory_between_graphs():
    base = _net(8).simple_bind(mx.cpu(), data=(4, 8, 5))
    own = _net(3).simple_bind(mx.cpu(), data=(4, 3, 5))
    shared = _net(3).simple_bind(mx.cpu(), data=(4, 3, 5), shared_exec=base,
                                 shared_arg_names=["w", "b"])
    base_buffers, shared_buffers = _buffers(base), _buffers(shared)
    assert any(np.shares_memory(a, b) for a in shared_buffers for b in base_buffers)
    for i, a in enumerate(shared_buffers):
        for b in shared_buffers[i + 1:]:
            assert not np.shares_memory(a, b)
    _run(base, 1)
    out_own, grads_own = _run(own)
    out_shared, grads_shared = _run(shared)
    np.testing.assert_array_equal(out_own, out_shared)
    for name in grads_own:
        np.testing.assert_array_equal(grads_own[name], grads_shared[name])
    assert shared._total_exec_bytes < own._total_exec_bytes
