"""Executor: a symbol bound to arrays; runs forward and backward (MXNet 1.9.1's mx.executor).

Binding (``Symbol.bind`` / ``Symbol.simple_bind``) infers every shape and dtype of the graph
(so an inconsistent node anywhere fails at bind with an error naming it), then plans every
buffer once: operator outputs (hidden ones included), gradient buffers of intermediate results,
cross-device copies. A training step then allocates nothing: ``forward`` walks precomputed
per-node call lists in topological order calling ``op.forward`` with backend arrays, and
``backward`` walks them in reverse calling ``op.backward``.

Gradients: an intermediate result consumed by several operators gets one buffer; the first
writer in backward order uses req 'write' and later ones 'add' (no temporaries). The gradient
buffers of intermediate results live from their first write to the backward step of the
operator that made the result (the last to read them); a buffer whose gradient is dead is
taken by a gradient first written in a later step, so the gradient memory of a training plan
is what is alive at once, not the sum over the graph. Arguments
honour their ``grad_req`` ('write', 'add' accumulates across backward calls, 'null' gives no
gradient array). Heads whose operator ignores the head gradient (loss heads, BlockGrad, custom
operators without ``need_top_grad``) take no head gradient; other heads need one only when some
gradient actually depends on them.

An operator failing while it computes (``engine.DeferredOperatorError``) does not stop
``forward``: the operators that depend on it are skipped, and the outputs computed from it
carry the failure, reported where they are read (see ``lightmod/engine.py``). ``backward``
after such a forward computes nothing and every gradient array carries the failure.
"""
import bisect
import functools
import gc
import math
import time
from typing import NamedTuple

import numpy as np

from . import engine, fusion, inference_plan, kernels, profiler, sample_split
from .base import MXNetError, string_types
from .context import Context
from .grad_req import GradReq
from .ndarray import ndarray as _nd
from .ndarray.ndarray import NDArray
from .operator import storage as _storage
from .symbol import graph as _graph
from .symbol import stack_fc as _stack_fc
from .symbol import symbol as _symbol

__all__ = ["Executor", "bind", "simple_bind"]

_STYPE_IDS = {0: "default", 1: "row_sparse", 2: "csr"}

# Whether training plans recycle the buffers of dead intermediate gradients (a switch for the
# tests, which compare plans with and without it)
recycle_gradients = True


def _thread_policy():
    """The CPU kernels' thread policy (kernels/threads.py): ``refresh()`` once per forward
    lets numba and OpenBLAS follow the machine's load."""
    from .kernels import threads
    return threads.refresh


def _space(ctx):
    """Contexts sharing one memory space need no copies (every cpu context is host memory)."""
    return ("gpu", ctx.device_id) if ctx.device_typeid == 2 else ("cpu",)


def _zeros(shape, dtype, ctx, stype="default"):
    return _nd.zeros(shape, ctx=ctx, dtype=dtype, stype=stype)


def _view(base, shape):
    """The first prod(shape) elements of ``base`` seen with ``shape`` (memory shared)."""
    n = math.prod(shape)
    data = base._data
    if isinstance(data, np.ndarray):
        view = data.reshape(-1)[:n].reshape(shape)
    else:
        view = data.reshape(data.size)[:n].reshape(*shape) if shape else \
            data.reshape(data.size)[:1]
    return NDArray(view, base.context, base.stype)


def _fits(arr, shape, dtype, ctx):
    # math.prod on the shape tuples: binding asks this for thousands of buffers
    return (arr is not None and np.dtype(arr._data.dtype) == np.dtype(dtype)
            and arr.context == ctx and math.prod(arr._data.shape) >= math.prod(shape))


def _transfer(dst, dst_k, src, req):
    """dst (a backend array) <- src (a backend array on another memory space)."""
    host = src if isinstance(src, np.ndarray) else src.copy_to_host()
    if isinstance(dst, np.ndarray):
        dst_k.assign(dst, host.reshape(dst.shape), req)
    elif req is GradReq.WRITE:
        dst.copy_to_device(np.ascontiguousarray(host.reshape(dst.shape), dtype=dst.dtype))
    else:
        dst_k.assign(dst, dst_k.from_host(np.ascontiguousarray(host, dtype=dst.dtype)), req)


def _store(dst_nd, k, src_nd, req):
    """Write NDArray src into NDArray dst (any contexts / dtypes) following req."""
    src = src_nd._data
    if _space(dst_nd.context) == _space(src_nd.context):
        if isinstance(dst_nd._data, np.ndarray) and src.dtype != dst_nd._data.dtype:
            src = src.astype(dst_nd._data.dtype)
        k.assign(dst_nd._data, src, req)
    else:
        _transfer(dst_nd._data, k, src, req)


def _grad_req_list(grad_req, arg_names, where):
    """One GradReq per argument from MXNet's str, list or dict (dict: unlisted names get
    'null'); the one place where MXNet's spellings are read."""
    if isinstance(grad_req, string_types):
        reqs = [grad_req] * len(arg_names)
    elif isinstance(grad_req, (list, tuple)):
        if len(grad_req) != len(arg_names):
            raise MXNetError("%s: grad_req list has %d entries but the symbol has %d arguments "
                             "%s" % (where, len(grad_req), len(arg_names), arg_names))
        reqs = list(grad_req)
    elif isinstance(grad_req, dict):
        reqs = [grad_req.get(n, "null") for n in arg_names]
    else:
        raise TypeError("%s: grad_req must be a str, list or dict, got %s"
                        % (where, type(grad_req).__name__))
    return [GradReq.parse(r) for r in reqs]


def _node_contexts(g, ctx, group2ctx):
    """The context of every node: its ``__ctx_group__`` mapped through group2ctx; otherwise
    variables take the default context and operators the context of their first input."""
    node_ctx = [None] * len(g.nodes)
    for nid, node in enumerate(g.nodes):
        group = node.attrs.get("__ctx_group__") if group2ctx else None
        if group is not None and group in group2ctx:
            node_ctx[nid] = group2ctx[group]
        elif node.op is None or not node.inputs:
            node_ctx[nid] = ctx
        else:
            node_ctx[nid] = node_ctx[g.entry_node[g.node_inputs[nid][0]]]
    return node_ctx


def _unknown_report(g, values, check):
    bad = []
    for eid, v in enumerate(values):
        if not check(v):
            bad.append("%s: %s" % (g.entry_label(eid), v))
    return bad


def _infer_all(g, known_shapes, known_types, where):
    """Complete shapes and dtypes of every entry, or an MXNetError saying what is missing."""
    shapes = _graph.infer_shapes(g, known_shapes)
    bad = _unknown_report(g, shapes, _graph.shape_known)
    if bad:
        raise MXNetError("%s: cannot infer the shapes of %s (0 = unknown dim); provide the "
                         "input shapes" % (where, ", ".join(bad[:10])))
    types = _graph.infer_types(g, known_types)
    if any(t is None for t in types):
        # inputs nobody could type default to float32, as MXNet's bind does without type_dict
        known = dict(known_types)
        for nid in g.var_nids:
            if types[g.entry_start[nid]] is None:
                known[nid] = "float32"
        types = _graph.infer_types(g, known)
        bad = _unknown_report(g, types, lambda t: t is not None)
        if bad:
            raise MXNetError("%s: cannot infer the dtypes of %s" % (where, ", ".join(bad[:10])))
    return [tuple(s) for s in shapes], types


# ---------------------------------------------------------------------------------------------
# binding
# ---------------------------------------------------------------------------------------------
def _collector_paused(bind_function):
    """Run ``bind_function`` with Python's cyclic garbage collector paused: binding creates
    tens of thousands of small objects (nodes, entries, steps, views) that are all still
    alive at its end, so the collections their allocation triggers (20-30% of binding an
    unrolled LSTM) find nothing to free. The collector is resumed afterwards if it was on."""
    @functools.wraps(bind_function)
    def paused(*args, **kwargs):
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return bind_function(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()
    return paused


@_collector_paused
def simple_bind(symbol, ctx, grad_req="write", type_dict=None, stype_dict=None,
                group2ctx=None, shared_arg_names=None, shared_exec=None, shared_buffer=None,
                shapes=None, stack=True):
    """Allocate arrays for the given input shapes and bind (see ``Symbol.simple_bind``).
    ``stack``: stack the FullyConnected nodes that share a weight (symbol/stack_fc.py)."""
    def unstacked():
        return simple_bind(symbol, ctx, grad_req, type_dict, stype_dict, group2ctx,
                           shared_arg_names, shared_exec, shared_buffer, shapes, stack=False)
    if not isinstance(ctx, Context):
        raise TypeError("Context type error")
    shapes = shapes or {}
    if shared_arg_names is not None and not isinstance(shared_arg_names, list):
        raise ValueError("shared_arg_names in simple_bind must be a list or None")
    if shared_buffer is not None and not isinstance(shared_buffer, dict):
        raise ValueError("shared_buffer in simple_bind must be dict or None")
    if isinstance(grad_req, (list, dict)) and not grad_req:
        raise RuntimeError("grad_req in simple_bind cannot be an empty %s"
                           % type(grad_req).__name__)
    outputs, stacks = _planned_outputs(symbol, stack)
    g = _graph.IndexedGraph(outputs)
    node_ctx = _node_contexts(g, ctx, group2ctx)
    by_name = {}
    for nid in g.var_nids:
        by_name.setdefault(g.nodes[nid].name, []).append(nid)
    known_shapes = {nid: v for k, v in shapes.items() if isinstance(v, tuple)
                    for nid in by_name.get(k, ())}
    if type_dict is None:
        known_types = {}
        for nid in g.var_nids:
            text = g.nodes[nid].attrs.get("__dtype__")
            known_types[nid] = _graph.dtype_attr_name(text) if text else "float32"
    else:
        known_types = {nid: np.dtype(v).name for k, v in type_dict.items()
                       for nid in by_name.get(k, ())}
    try:
        entry_shapes, entry_types = _infer_all(g, known_shapes, known_types, "simple_bind")
    except MXNetError as err:
        if stacks:                  # say what is wrong in terms of the user's graph
            return unstacked()
        args = "".join("%s: %s\n" % (k, v) for k, v in shapes.items())
        raise MXNetError("simple_bind error. Arguments:\n%s%s" % (args, err)) from None
    if stacks and not _stack_fc.stacks_fit(g, entry_shapes, stacks):
        return unstacked()

    arg_names = [g.nodes[n].name for n in g.arg_nids]
    reqs = _grad_req_list(grad_req, arg_names, "simple_bind")
    sparse_grads = _row_sparse_grad_args(g)
    shared_names = set(shared_arg_names or ())
    stype_dict = stype_dict or {}
    arg_arrays, grad_arrays = [], []
    for nid, name, req in zip(g.arg_nids, arg_names, reqs):
        eid = g.entry_start[nid]
        shape, dtype, actx = entry_shapes[eid], entry_types[eid], node_ctx[nid]
        stype = stype_dict.get(name) or _STYPE_IDS.get(
            int(g.nodes[nid].attrs.get("__storage_type__", "0")), "default")
        grad_stype = "row_sparse" if nid in sparse_grads else "default"
        if shared_exec is not None and name in shared_names:
            arr = _shared_array(shared_exec.arg_dict, name, shape, dtype, "argument")
            grad = None
            if req is not GradReq.NULL:
                grad = _shared_array(shared_exec.grad_dict, name, shape, dtype, "gradient")
        elif shared_buffer is not None and name not in shared_names:
            arr = _from_pool(shared_buffer, name, shape, dtype, actx, stype)
            grad = None if req is GradReq.NULL else \
                _from_pool(shared_buffer, "grad of " + name, shape, dtype, actx, grad_stype)
        else:
            arr = _zeros(shape, dtype, actx, stype)
            grad = None if req is GradReq.NULL else _zeros(shape, dtype, actx, grad_stype)
        arg_arrays.append(arr)
        grad_arrays.append(grad)
    aux_arrays = []
    for nid in g.aux_nids:
        eid = g.entry_start[nid]
        name = g.nodes[nid].name
        if shared_exec is not None:
            aux_arrays.append(_shared_array(shared_exec.aux_dict, name, entry_shapes[eid],
                                            entry_types[eid], "auxiliary state"))
        else:
            aux_arrays.append(_zeros(entry_shapes[eid], entry_types[eid], node_ctx[nid]))
    exe = Executor(symbol, ctx, grad_req, group2ctx)
    exe._setup(g, node_ctx, entry_shapes, entry_types, arg_arrays, grad_arrays, reqs,
               aux_arrays, base_pool=None if shared_exec is None else
               _SharedMemory(shared_exec._pool))
    exe._stacks = stacks
    return exe


def _planned_outputs(symbol, stack):
    """The output entries simple_bind plans: the graph after common-subexpression elimination
    and, with ``stack``, shared-weight FullyConnected nodes stacked; and the stacks' Concat
    nodes (None when nothing was stacked)."""
    outputs = _graph.bind_outputs(symbol._outputs)
    if stack and outputs and _stack_fc.enabled():
        owned = outputs[0][0] is not symbol._outputs[0][0]      # a copy made by the elimination
        stacked = _stack_fc.stack_shared_fc(outputs, owned=owned)
        if stacked is not None:
            return stacked
    return outputs, None


class _SharedMemory:
    """The internal buffers of a shared executor, offered to a new executor of another graph
    (a BucketingModule's other buckets bind with the default bucket's executor), as MXNet's
    shared memory pool: each buffer the new plan asks for takes the smallest host buffer left
    that is large enough, so the executors of every bucket use the memory of the largest one
    and binding a bucket allocates (and zeroes) little. Buffers are grouped by the memory
    they view, so no two buffers of the new executor overlap; device buffers are not shared.
    The executors then overwrite each other's intermediate values, which only the one that
    last ran reads (MXNet's buckets do the same)."""

    def __init__(self, pool, free=None):
        self._pool = pool
        if free is None:
            largest = {}
            for arr in pool.values():
                data = arr._data
                if not isinstance(data, np.ndarray) or arr.stype != "default":
                    continue
                root = data
                while isinstance(root.base, np.ndarray):
                    root = root.base
                if root.size and root.flags.c_contiguous and (id(root) not in largest
                                  or largest[id(root)][0].size < root.size):
                    largest[id(root)] = (root, arr.context)
            free = sorted(largest.values(), key=lambda item: item[0].nbytes)
        self._free = list(free)
        self._sizes = [root.nbytes for root, _ in self._free]    # ascending, for bisect

    def fresh(self):
        """The same offer, nothing taken yet (a plan that starts over)."""
        return _SharedMemory(self._pool, self._free)

    def take(self, shape, dtype, ctx):
        """An NDArray of ``shape`` and ``dtype`` viewing the smallest buffer left that holds
        it, or None."""
        if ctx.device_typeid == 2:
            return None
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        if not nbytes:
            return None
        # the first buffer in size order that is large enough (a bisect: binding a bucket
        # asks for thousands of buffers) and on the same device
        for i in range(bisect.bisect_left(self._sizes, nbytes), len(self._free)):
            root, rctx = self._free[i]
            if rctx == ctx:
                del self._free[i]
                del self._sizes[i]
                flat = root.reshape(-1).view(np.uint8)[:nbytes].view(dtype)
                return NDArray(flat.reshape(shape), ctx)
        return None


class _FreeBuffers:
    """Planned buffers whose values are dead, to be taken by later values: ``take`` gives the
    smallest one of the dtype and context that holds the shape (a bisect per dtype and
    context: a plan recycles hundreds of buffers)."""

    def __init__(self):
        self._sizes = {}        # (dtype, context) -> ascending element counts
        self._buffers = {}      # (dtype, context) -> the buffers, in the same order

    def add(self, buf):
        key = (np.dtype(buf._data.dtype), buf.context)
        sizes = self._sizes.setdefault(key, [])
        size = math.prod(buf._data.shape)
        i = bisect.bisect_right(sizes, size)
        sizes.insert(i, size)
        self._buffers.setdefault(key, []).insert(i, buf)

    def take(self, shape, dtype, ctx):
        """The smallest free buffer of ``dtype`` on ``ctx`` with room for ``shape``, removed
        from the free ones; None when there is none."""
        key = (np.dtype(dtype), ctx)
        sizes = self._sizes.get(key)
        if not sizes:
            return None
        i = bisect.bisect_left(sizes, math.prod(shape))
        if i == len(sizes):
            return None
        del sizes[i]
        return self._buffers[key].pop(i)


def _row_sparse_grad_args(g):
    """Argument nodes whose gradient is row_sparse: every consumer computes a row_sparse
    gradient for them (Embedding with sparse_grad, SparseEmbedding); one dense consumer makes
    the gradient dense, as MXNet's storage-type inference falls back."""
    sparse, dense = set(), set()
    arg_nids = set(g.arg_nids)
    for nid in g.op_nids:
        node = g.nodes[nid]
        rsp_slots = set(node.op.row_sparse_grad_inputs(g.params[nid]))
        for slot, eid in enumerate(g.node_inputs[nid]):
            src = g.entry_node[eid]
            if src in arg_nids:
                (sparse if slot in rsp_slots else dense).add(src)
    return sparse - dense


def _shared_array(mapping, name, shape, dtype, what):
    if name not in mapping or mapping[name] is None:
        raise MXNetError("simple_bind: the shared executor has no %s array for '%s'"
                         % (what, name))
    arr = mapping[name]
    if arr.shape != tuple(shape) or np.dtype(arr.dtype) != np.dtype(dtype):
        raise MXNetError("simple_bind: shared %s '%s' has shape %s and dtype %s, but this "
                         "executor needs shape %s and dtype %s" % (what, name, arr.shape,
                                                                   np.dtype(arr.dtype).name,
                                                                   tuple(shape), dtype))
    return arr


def _from_pool(pool, key, shape, dtype, ctx, stype):
    """A view of pool[key] when it is large enough, else a new array stored in the pool."""
    arr = pool.get(key)
    if _fits(arr, shape, dtype, ctx):
        return _view(arr, shape) if arr.shape != tuple(shape) else arr
    arr = _zeros(shape, dtype, ctx, stype)
    pool[key] = arr
    return arr


def _as_list(arrays, names, what, allow_missing):
    """Arrays given as a list or a {name: NDArray} dict, as a list aligned with names."""
    if isinstance(arrays, (list, tuple)):
        if len(arrays) != len(names):
            raise ValueError("Length of %s does not match the number of arguments (%d given, "
                             "%d expected: %s)" % (what, len(arrays), len(names), names))
        out = list(arrays)
    elif isinstance(arrays, dict):
        out = []
        for n in names:
            if n in arrays:
                out.append(arrays[n])
            elif allow_missing:
                out.append(None)
            else:
                raise ValueError("key `%s` is missing in `%s`" % (n, what))
    else:
        raise TypeError("Only accept list of NDArrays or dict of str to NDArray")
    for a in out:
        if a is None and allow_missing:
            continue
        if not isinstance(a, NDArray):
            raise TypeError("Only accept list of NDArrays or dict of str to NDArray")
    return out


def bind(symbol, ctx, args, args_grad=None, grad_req="write", aux_states=None, group2ctx=None,
         shared_exec=None):
    """Bind to given arrays (see ``Symbol.bind``)."""
    if not isinstance(ctx, Context):
        raise TypeError("Context type error")
    g = _graph.IndexedGraph(_graph.bind_outputs(symbol._outputs))
    arg_names = [g.nodes[n].name for n in g.arg_nids]
    aux_names = [g.nodes[n].name for n in g.aux_nids]
    arg_arrays = _as_list(args, arg_names, "args", False)
    grad_arrays = [None] * len(arg_names) if args_grad is None else \
        _as_list(args_grad, arg_names, "args_grad", True)
    aux_arrays = _as_list(aux_states if aux_states is not None else [], aux_names,
                          "aux_states", False)
    reqs = _grad_req_list(grad_req, arg_names, "bind")
    reqs = [r if grad is not None else GradReq.NULL for r, grad in zip(reqs, grad_arrays)]
    node_ctx = _node_contexts(g, ctx, group2ctx)
    known_shapes, known_types = {}, {}
    for nid, arr in zip(g.arg_nids + g.aux_nids, arg_arrays + aux_arrays):
        known_shapes[nid] = arr.shape
        known_types[nid] = np.dtype(arr.dtype).name
    entry_shapes, entry_types = _infer_all(g, known_shapes, known_types, "bind")
    for name, arr, grad in zip(arg_names, arg_arrays, grad_arrays):
        if grad is not None and grad.shape != arr.shape:
            raise MXNetError("bind: the gradient array of '%s' has shape %s, the argument has "
                             "shape %s" % (name, grad.shape, arr.shape))
    exe = Executor(symbol, ctx, grad_req, group2ctx)
    exe._setup(g, node_ctx, entry_shapes, entry_types, arg_arrays, grad_arrays, reqs,
               aux_arrays)
    return exe


def _fused_inside(g, fused, slot_reqs, head_reqs):
    """The entries whose gradient stays inside one fused group's backward kernel: outputs of
    the group's members whose gradient only members of that group write (no head gradient).
    The kernel computes them in registers (fusion.FusedGroup.plan_backward reads the buffer of
    an entry only when something outside the group writes into it), so they get no buffer."""
    if not fused:
        return set()
    group_of = {nid: i for i, group in enumerate(fused) for nid in group.members}
    outside = {eid for _, eid in head_reqs}     # gradients written from outside a group
    writer_group = {}
    for nid, reqs in slot_reqs.items():
        for eid, r in zip(g.node_inputs[nid], reqs):
            if r is GradReq.NULL:
                continue
            grp = group_of.get(nid)
            if grp is None or writer_group.setdefault(eid, grp) != grp:
                outside.add(eid)
    inside = set()
    for eid, grp in writer_group.items():
        if eid not in outside and group_of.get(g.entry_node[eid]) == grp:
            inside.add(eid)
    return inside


# ---------------------------------------------------------------------------------------------
# the planned steps
# ---------------------------------------------------------------------------------------------
class _ForwardStep(NamedTuple):
    """``op.forward(params, kernels, inputs, outputs, is_train, state)`` with backend arrays;
    or, when ``op`` is None, the copy of NDArray ``inputs`` into NDArray ``outputs`` (another
    memory space) that operator ``node_id`` reads."""
    op: object
    params: object
    kernels: object
    inputs: object
    outputs: object
    state: dict
    node_id: int


class _GradFold(NamedTuple):
    """After a backward call: fold the ``scratch`` gradient into ``target`` following ``req``
    (``remote``: the target lives in another memory space, whose kernel set is ``kernels``)."""
    scratch: object
    target: object
    req: GradReq
    kernels: object
    remote: bool


class _BackwardStep(NamedTuple):
    """``op.backward(params, kernels, out_grads, inputs, outputs, in_grads, reqs, state)``,
    then the folds; ``slot_arrays`` are the NDArrays behind ``in_grads`` (for the monitor)."""
    op: object
    params: object
    kernels: object
    out_grads: list
    inputs: list
    outputs: list
    in_grads: list
    reqs: list
    state: dict
    folds: list
    node_id: int
    slot_arrays: list


class _HeadGrad(NamedTuple):
    """Store the head gradient of output ``index`` (graph entry ``entry``) into ``buffer``."""
    index: int
    entry: int
    buffer: object
    req: GradReq
    kernels: object


class _Profiling:
    """Records one profiler event per step (compile time kept apart)."""

    def __init__(self, exe):
        self._nodes = exe._g.nodes

    def before_forward(self, op, nid):
        return time.perf_counter(), profiler.compile_seconds()

    def after_forward(self, op, nid, started):
        if op is None:
            self._record("%s_copy" % self._nodes[nid].name, "copy", "copy", started)
        else:
            self._record(self._nodes[nid].name, "forward", op.name, started)

    def before_backward(self):
        return time.perf_counter(), profiler.compile_seconds()

    def after_backward(self, op, nid, slot_arrays, started):
        self._record("%s_backward" % self._nodes[nid].name, "backward", op.name, started)

    def _record(self, name, category, op_name, started):
        start, compiled = started
        profiler.record(name, category, start, time.perf_counter(),
                        profiler.compile_seconds() - compiled, {"op": op_name})


class _Monitoring:
    """Hands every operator output (and with ``monitor_all`` every input) of forward, and
    every input gradient of backward, to the monitor callback."""

    def __init__(self, exe):
        self._exe = exe
        self._cb = exe._monitor_callback

    def before_forward(self, op, nid):
        exe = self._exe
        if op is not None and exe._monitor_all:
            g = exe._g
            node = g.nodes[nid]
            names = op.monitor_input_names(g.params[nid])
            for name, arr, eid in zip(names, exe._node_in_nd[nid], g.node_inputs[nid]):
                source = g.nodes[g.entry_node[eid]]
                if source.op is None:
                    # a variable input is reported under its own name first, as MXNet does
                    self._cb(source.name, arr)
                self._cb("%s_%s" % (node.name, name), arr)

    def after_forward(self, op, nid, started):
        if op is None:
            return
        exe = self._exe
        node, start = exe._g.nodes[nid], exe._g.entry_start[nid]
        for j, out_name in enumerate(op.list_outputs(exe._g.params[nid])):
            self._cb("%s_%s" % (node.name, out_name), exe._entry_nd[start + j])

    def before_backward(self):
        return None

    def after_backward(self, op, nid, slot_arrays, started):
        exe = self._exe
        node = exe._g.nodes[nid]
        aux = set(node.aux_slots())
        slots = [s for s in range(len(slot_arrays)) if s not in aux]
        for n, s in enumerate(slots):
            arr = slot_arrays[s]
            if arr is None:
                arr = exe._monitor_zeros(nid, s)
            suffix = "output" if len(slots) == 1 else "output%d" % n
            self._cb("%s_backward_%s" % (node.name, suffix), arr)


# ---------------------------------------------------------------------------------------------
# the executor
# ---------------------------------------------------------------------------------------------
class Executor:
    """A bound symbol: arrays for arguments, gradients, auxiliary states and outputs, and the
    precomputed forward / backward call lists."""

    _split_child = False    # a child of a sample split (lightmod/sample_split.py): never split
    _split = None           # the SampleSplit running this executor's passes, if any
    _split_ran = False      # whether the last forward ran on the split's training children

    def __init__(self, symbol, ctx, grad_req, group2ctx):
        self._symbol = symbol
        self._ctx = ctx
        self._grad_req = grad_req
        self._group2ctx = group2ctx
        self.arg_arrays = []
        self.grad_arrays = []
        self.aux_arrays = []
        self.outputs = []
        self._dicts = {}
        self._monitor_callback = None
        self._monitor_all = False
        self._total_exec_bytes = 0
        self._unfused = False   # set when a bound array is one the fused kernels cannot view
        self._fused = False     # whether the current plan fuses anything

        self._forward_done = False
        self._failure = None        # the PendingError of the last forward or backward, if any
        self._stacks = None         # the Concat nodes of stacked FullyConnected nodes, if any

    # --- planning -------------------------------------------------------------------------------
    def _buffer(self, key, shape, dtype, ctx, base_pool, stype="default"):
        """An internal buffer: a view into the base executor's buffer under the same key when
        that one is large enough (reshape shares memory), else a fresh zero array."""
        if isinstance(base_pool, _SharedMemory):
            arr = base_pool.take(shape, dtype, ctx)
        else:
            arr = base_pool.get(key) if base_pool else None
        if _fits(arr, shape, dtype, ctx):
            out = _view(arr, shape) if arr.shape != tuple(shape) else arr
            out = out if out.stype == stype else NDArray(out._data, ctx, stype)
        else:
            out = _zeros(shape, dtype, ctx, stype)
            self._total_exec_bytes += out.size * np.dtype(dtype).itemsize
        self._pool[key] = out
        return out

    def _setup(self, g, node_ctx, shapes, types, arg_arrays, grad_arrays, reqs, aux_arrays,
               base_pool=None):
        """Plan every buffer and the forward / backward steps (a training step then only runs
        them)."""
        total = self._total_exec_bytes
        try:
            self._plan(g, node_ctx, shapes, types, arg_arrays, grad_arrays, reqs, aux_arrays,
                       base_pool.fresh() if isinstance(base_pool, _SharedMemory) else base_pool)
        except fusion.NotFusible:
            self._unfused = True
            self._total_exec_bytes = total
            self._plan(g, node_ctx, shapes, types, arg_arrays, grad_arrays, reqs, aux_arrays,
                       base_pool.fresh() if isinstance(base_pool, _SharedMemory) else base_pool)
        self._split = None if self._split_child else sample_split.attach(self)

    def _plan(self, g, node_ctx, shapes, types, arg_arrays, grad_arrays, reqs, aux_arrays,
              base_pool):
        self._g = g
        self._node_ctx = node_ctx
        self._shapes = shapes
        self._types = types
        self._reqs = list(reqs)
        # the buffers this plan made or took, one memory each (a later plan of this executor,
        # or a reshaped one, looks its buffers up here by key), and the values planned in
        # the memory of a buffer whose value was dead (kept apart: looked up by key, two of
        # them could be one memory in a plan where both are alive at once)
        self._pool = {}
        self._recycled = {}
        self.arg_arrays = list(arg_arrays)
        self.grad_arrays = list(grad_arrays)
        self.aux_arrays = list(aux_arrays)
        entry_ctx = [node_ctx[g.entry_node[eid]] for eid in range(g.num_entries)]
        # storage types label the outputs (values stay dense) and pick sparse dispatches
        self._stypes = _storage.infer_graph_stypes(g, {
            nid: a.stype for nid, a in zip(g.arg_nids + g.aux_nids, arg_arrays + aux_arrays)},
            shapes)
        needs, var_req = self._gradient_entries()
        # Without a backward pass no operator output is read after its last consumer ran, so
        # intermediate buffers are recycled. Such an executor is not fused: a fused kernel
        # reads and writes its members' buffers in one pass (they must not alias), and
        # fusion's gain is in the backward pass.
        forward_only = not any(self._runs_backward(nid, needs) for nid in g.op_nids)
        groups = [] if forward_only else self._fusion_groups()
        node_order = fusion.unit_order(g, groups) if groups else list(g.op_nids)
        order = [nid for nid in reversed(node_order) if self._runs_backward(nid, needs)]
        self._entry_nd = self._place_entries(base_pool, node_order, recycle=forward_only)
        self._fwd, self._node_in_nd = self._plan_forward(entry_ctx, base_pool, node_order)
        fwd_of = {step.node_id: step for step in self._fwd if step.op is not None}
        fused = self._fused_groups(groups)
        self._fused = bool(fused)
        # a layer's bias and activation in the pass over its product (inference_plan.py)
        self._layer_fusion = fusion.enabled()
        self._refresh_threads = _thread_policy() if any(
            c.device_typeid != 2 for c in node_ctx) else None
        # arguments whose gradient is requested but that no gradient reaches (behind
        # BlockGrad) get zeros, as 'write' promises
        self._zero_grad_args = [(kernels.for_context(node_ctx[nid]), grad)
                                for nid, grad, req in zip(g.arg_nids, grad_arrays, reqs)
                                if req is GradReq.WRITE and grad is not None
                                and not needs[g.entry_start[nid]]]
        head_reqs, slot_reqs = self._write_order(needs, var_req, order)
        grad_nd = self._gradient_buffers(needs, var_req, head_reqs, slot_reqs, base_pool,
                                         _fused_inside(g, fused, slot_reqs, head_reqs),
                                         order, fused)
        self._head_steps = [_HeadGrad(i, eid, grad_nd[eid], req,
                                      kernels.for_context(entry_ctx[eid]))
                            for (i, eid), req in head_reqs.items()]
        # a fused group's members get a stand-in step: _fuse_steps replaces them all by the
        # group's one step (or none), so their own calls are never planned
        members = self._fused_members = {nid for group in fused for nid in group.members}
        self._bwd = [_BackwardStep(None, None, None, None, None, None, None, None, None, [],
                                   nid, []) if nid in members else
                     self._plan_backward_step(nid, fwd_of[nid], slot_reqs[nid], grad_nd,
                                              entry_ctx, base_pool) for nid in order]
        if fused:
            self._fuse_steps(fused, grad_nd, slot_reqs, head_reqs)
        self.outputs = [self._entry_nd[eid] for eid in g.heads]
        self._dicts = {}
        self._watched = [(a, a._data) for a in self.arg_arrays + self.aux_arrays +
                         self.grad_arrays if a is not None]

    def _place_entries(self, base_pool, node_order, recycle=False):
        """The NDArray of every graph entry: bound arguments / aux states, and one planned
        buffer per operator output (hidden outputs included). With ``recycle`` an output
        other than a graph output takes the memory of one whose last reader already ran
        (``node_order`` is the order the forward steps run in)."""
        g = self._g
        entry_nd = [None] * g.num_entries
        for nid, arr in zip(g.arg_nids + g.aux_nids, self.arg_arrays + self.aux_arrays):
            entry_nd[g.entry_start[nid]] = arr
        last_reader = {}
        for pos, nid in enumerate(node_order):
            for eid in g.node_inputs[nid]:
                last_reader[eid] = pos
        heads = set(g.heads)
        free = _FreeBuffers()   # buffers whose entries are no longer read
        owner = {}              # entry -> the buffer its array views
        for pos, nid in enumerate(node_order):
            ctx = self._node_ctx[nid]
            outs = range(g.entry_start[nid], g.entry_start[nid] + g.num_outputs[nid])
            for eid in outs:
                shape, dtype = self._shapes[eid], self._types[eid]
                base = None
                if recycle and eid not in heads and self._stypes[eid] == "default":
                    base = free.take(shape, dtype, ctx)
                if base is None:
                    entry_nd[eid] = self._buffer(("out", eid), shape, dtype, ctx, base_pool,
                                                 self._stypes[eid])
                    owner[eid] = entry_nd[eid]
                else:
                    owner[eid] = base
                    entry_nd[eid] = self._recycled[("out", eid)] = \
                        base if base.shape == tuple(shape) else _view(base, shape)
            if recycle:
                for eid in list(g.node_inputs[nid]) + list(outs):
                    if (eid in owner and eid not in heads and last_reader.get(eid, -1) <= pos
                            and self._stypes[eid] == "default"):
                        free.add(owner.pop(eid))
        return entry_nd

    def _plan_forward(self, entry_ctx, base_pool, node_order):
        """One step per operator in ``node_order`` (topological), preceded by a copy step for
        each input that lives in another memory space (made once, shared by every consumer)."""
        g, entry_nd = self._g, self._entry_nd
        steps, copies, node_in_nd = [], {}, {}
        for nid in node_order:
            ctx = self._node_ctx[nid]
            k = kernels.for_context(ctx)
            ins = []
            for eid in g.node_inputs[nid]:
                if _space(entry_ctx[eid]) == _space(ctx):
                    ins.append(entry_nd[eid])
                    continue
                key = ("copy", eid, _space(ctx))
                if key not in copies:
                    copies[key] = self._buffer(key, self._shapes[eid], self._types[eid], ctx,
                                               base_pool)
                    steps.append(_ForwardStep(None, None, k, entry_nd[eid], copies[key], None,
                                              nid))
                ins.append(copies[key])
            node_in_nd[nid] = ins
            start, count = g.entry_start[nid], g.num_outputs[nid]
            steps.append(_ForwardStep(g.nodes[nid].op, g.params[nid], k, [x._data for x in ins],
                                      [o._data for o in entry_nd[start:start + count]],
                                      {"context": ctx, "in_stypes": [
                                          self._stypes[e] for e in g.node_inputs[nid]]}, nid))
        return steps, node_in_nd

    # --- element-wise fusion (lightmod/fusion.py) -----------------------------------------------
    def _fusion_groups(self):
        """The groups to fuse: none when fusion is off, a monitor watches, or the graph spans
        several devices (groups then need no copies between memory spaces)."""
        if not fusion.enabled() or self._monitor_callback is not None or self._unfused:
            return []
        if len({(c.device_typeid, c.device_id) for c in self._node_ctx}) > 1:
            return []
        return fusion.find_groups(self._g, self._shapes, self._types)

    def _fused_groups(self, groups):
        """A FusedGroup per group whose arrays allow it; each group's forward steps replaced
        by one fused step where forward fusion pays (one pass over the steps)."""
        g, fused, replaced = self._g, [], {}
        readers = set(g.heads)      # entries something reads, per reading group (None: outside)
        reader_groups = {}
        member_of = {nid: i for i, members in enumerate(groups) for nid in members}
        for nid in g.op_nids:
            for e in g.node_inputs[nid]:
                reader_groups.setdefault(e, set()).add(member_of.get(nid))
        for i, members in enumerate(groups):
            ctx = self._node_ctx[members[0]]
            k = kernels.for_context(ctx)
            try:
                group = fusion.FusedGroup(g, members, self._entry_nd, k)
            except fusion.NotFusible:
                continue
            fused.append(group)
            if not group.plan_forward(on_gpu=ctx.device_typeid == 2):
                continue
            # a SliceChannel member still runs when something outside the group reads its output
            for nid in members:
                outs = range(g.entry_start[nid], g.entry_start[nid] + g.num_outputs[nid])
                if nid in group.slices and any(e in readers or reader_groups.get(e, set()) - {i}
                                               for e in outs):
                    continue
                replaced[nid] = (group, members[-1], k)
        if replaced:
            steps = []
            for step in self._fwd:
                found = replaced.get(step.node_id) if step.op is not None else None
                if found is None:
                    steps.append(step)
                elif step.node_id == found[1]:
                    steps.append(_ForwardStep(found[0], None, found[2], None, None, None,
                                              step.node_id))
            self._fwd = steps
        return fused

    def _fuse_steps(self, fused, grad_nd, slot_reqs, head_reqs):
        """Replace each group's backward steps (adjacent in backward order) by one fused step."""
        g = self._g
        writers = {}
        for nid, reqs in slot_reqs.items():
            for e, r in zip(g.node_inputs[nid], reqs):
                if r is not GradReq.NULL:
                    writers.setdefault(e, set()).add(nid)
        head_written = {eid for _, eid in head_reqs}
        group_of = {}
        for group in fused:
            def external_writes(eid, members=group.member_set):
                return eid in head_written or bool(writers.get(eid, set()) - members)
            runs = group.plan_backward(g, grad_nd, slot_reqs, external_writes)
            for nid in group.members:
                group_of[nid] = group if runs else None
        steps, placed = [], set()
        for step in self._bwd:
            if step.node_id not in group_of:
                steps.append(step)
                continue
            group = group_of[step.node_id]
            if group is not None and id(group) not in placed:
                steps.append(_BackwardStep(group, None, group.k, None, None, None, None, None,
                                           None, [], group.members[-1], []))
                placed.add(id(group))
        self._bwd = steps

    def _gradient_entries(self):
        """(needs, var_req): whether each entry needs a gradient (it is computed from an
        argument that has one) and the request of each argument entry that has one."""
        g = self._g
        needs = [False] * g.num_entries
        var_req = {}
        for nid, grad, req in zip(g.arg_nids, self.grad_arrays, self._reqs):
            if grad is not None and req is not GradReq.NULL:
                needs[g.entry_start[nid]] = True
                var_req[g.entry_start[nid]] = req
        for nid in g.op_nids:
            if any(needs[e] for e in g.node_inputs[nid]):
                for j in range(g.num_outputs[nid]):
                    needs[g.entry_start[nid] + j] = True
        reached = self._gradient_reach()
        if var_req:
            self._check_differentiable(reached)
        return [n and r for n, r in zip(needs, reached)], var_req

    def _gradient_reach(self):
        """Whether some gradient reaches each entry: from a head taking a head gradient, or
        from an operator making its own (a loss), through operators that pass gradients on
        (not BlockGrad). Behind BlockGrad every gradient is zero, so nothing is computed
        there."""
        g = self._g
        reached = [False] * g.num_entries
        for eid in g.heads:
            nid = g.entry_node[eid]
            op = g.nodes[nid].op
            reached[eid] = op is None or not op.ignores_head_grad(g.params[nid])
        for nid in reversed(g.op_nids):
            op, p = g.nodes[nid].op, g.params[nid]
            start = g.entry_start[nid]
            if op.blocks_gradient or not (op.ignores_head_grad(p) or any(
                    reached[start:start + g.num_outputs[nid]])):
                continue
            for e in g.node_inputs[nid]:
                reached[e] = True
        return reached

    def _check_differentiable(self, reached):
        """Raise MXNetError when a gradient reaches an operator that has none.

        As in MXNet, any requested gradient makes the backward graph cover everything a head
        gradient reaches, whether or not the operator's own inputs need one; only
        BlockGrad/stop_gradient after the operator (or no gradient at all) avoids it."""
        g = self._g
        heads = set(g.heads)    # every head is given a gradient, whatever its operator
        for nid in g.op_nids:
            op = g.nodes[nid].op
            outs = range(g.entry_start[nid], g.entry_start[nid] + g.num_outputs[nid])
            if not op.differentiable and any(reached[e] or e in heads for e in outs):
                raise MXNetError(
                    "Operator %s is non-differentiable (MXNet registers no gradient for it), "
                    "but a gradient reaches node '%s'. Put stop_gradient (BlockGrad) after it "
                    "or bind without gradients (grad_req='null')."
                    % (op.name, g.nodes[nid].name))

    def _runs_backward(self, nid, needs):
        """Whether operator ``nid`` has a backward step: an input needs a gradient and one
        comes out (a gradient reaches an output, or the operator makes its own)."""
        g = self._g
        op, start = g.nodes[nid].op, g.entry_start[nid]
        return (not op.blocks_gradient and any(needs[e] for e in g.node_inputs[nid])
                and (op.ignores_head_grad(g.params[nid])
                     or any(needs[start:start + g.num_outputs[nid]])))

    def _write_order(self, needs, var_req, order):
        """The request of every write into a gradient buffer, in backward order: head
        gradients first, then each consumer. The first write into an intermediate gradient
        overwrites it and later ones add to it; an argument asking for 'add' is only added to.

        Returns ({(head index, entry): req}, {node id: [req per input slot]})."""
        g = self._g
        writes = [0] * g.num_entries

        def next_req(eid):
            first = writes[eid] == 0
            writes[eid] += 1
            overwrite = first and var_req.get(eid, GradReq.WRITE) is GradReq.WRITE
            return GradReq.WRITE if overwrite else GradReq.ADD

        head_reqs = {}
        for i, eid in enumerate(g.heads):
            node = g.nodes[g.entry_node[eid]]
            takes_head_grad = node.op is None or \
                not node.op.ignores_head_grad(g.params[g.entry_node[eid]])
            if needs[eid] and takes_head_grad:
                head_reqs[(i, eid)] = next_req(eid)
        slot_reqs = {nid: [next_req(eid) if needs[eid] else GradReq.NULL
                           for eid in g.node_inputs[nid]] for nid in order}
        return head_reqs, slot_reqs

    def _gradient_buffers(self, needs, var_req, head_reqs, slot_reqs, base_pool, inside=(),
                          order=(), fused=()):
        """The NDArray each entry's gradient goes to: the bound gradient array of an argument,
        else a planned buffer for every entry something writes a gradient into, except the
        entries in ``inside`` (None: a fused kernel keeps their gradient to itself).

        Planned buffers are recycled along the backward steps (``order``, a fused group
        counting as all of its members' steps at once): a gradient takes the memory of one
        whose last access came in an earlier step (never the same step, so no call sees one
        memory as two arrays). The first write of an intermediate gradient is a 'write'
        (``_write_order``), so whatever the memory held before is never read."""
        g = self._g
        written = {eid for _, eid in head_reqs}
        for nid, reqs in slot_reqs.items():
            written.update(eid for eid, r in zip(g.node_inputs[nid], reqs)
                           if r is not GradReq.NULL)
        grad_nd = [None] * g.num_entries
        for nid, grad in zip(g.arg_nids, self.grad_arrays):
            if g.entry_start[nid] in var_req:
                grad_nd[g.entry_start[nid]] = grad
        planned = [eid for eid in sorted(written)
                   if needs[eid] and grad_nd[eid] is None and eid not in inside]
        if recycle_gradients and self._monitor_callback is None:
            first, last = self._gradient_lifetimes(head_reqs, slot_reqs, order, fused)
        else:   # every gradient alive throughout: each keeps a buffer of its own
            first = {eid: 0 for eid in planned}
            last = {eid: len(order) + 1 for eid in planned}
        ending = {}
        for eid in planned:
            ending.setdefault(last[eid], []).append(eid)
        free = _FreeBuffers()   # buffers whose gradients were last accessed in an earlier step
        root = {}               # entry -> the buffer its gradient array views
        planned.sort(key=lambda eid: first[eid])
        i = 0
        for step in range(len(order) + 2):
            while i < len(planned) and first[planned[i]] == step:
                eid = planned[i]
                i += 1
                shape, dtype = self._shapes[eid], self._types[eid]
                ctx = self._node_ctx[g.entry_node[eid]]
                base = free.take(shape, dtype, ctx)
                if base is None:
                    grad_nd[eid] = root[eid] = self._buffer(("grad", eid), shape, dtype, ctx,
                                                            base_pool)
                else:
                    grad_nd[eid] = self._recycled[("grad", eid)] = \
                        base if base.shape == tuple(shape) else _view(base, shape)
                    root[eid] = base
            for eid in ending.get(step, ()):
                free.add(root[eid])
        return grad_nd

    def _gradient_lifetimes(self, head_reqs, slot_reqs, order, fused):
        """({entry: first step}, {entry: last step}) of the gradient accesses in backward:
        step 0 stores the head gradients, step i + 1 is the backward step of ``order[i]``,
        which writes the gradients of its inputs and reads those of its outputs. The members
        of a fused group run as one kernel: each of them counts as the group's whole span."""
        g = self._g
        pos = {nid: i + 1 for i, nid in enumerate(order)}
        span = {}
        for group in fused:
            steps = [pos[nid] for nid in group.members if nid in pos]
            if steps:
                for nid in group.members:
                    span[nid] = (min(steps), max(steps))
        first, last = {}, {}

        def touch(eid, lo, hi):
            if eid not in first or lo < first[eid]:
                first[eid] = lo
            if eid not in last or hi > last[eid]:
                last[eid] = hi

        for _, eid in head_reqs:
            touch(eid, 0, 0)
        for nid in order:
            lo, hi = span.get(nid, (pos[nid], pos[nid]))
            for eid, req in zip(g.node_inputs[nid], slot_reqs[nid]):
                if req is not GradReq.NULL:
                    touch(eid, lo, hi)
            start = g.entry_start[nid]
            for eid in range(start, start + g.num_outputs[nid]):
                if eid in first:    # its gradient exists (written in an earlier step)
                    touch(eid, lo, hi)
        return first, last

    def _plan_backward_step(self, nid, fwd, reqs, grad_nd, entry_ctx, base_pool):
        """The backward step of operator ``nid``: its gradient buffers per input slot. A
        gradient wanted twice by one call, or living on another device, is written to a
        scratch buffer and folded into the real one after the call."""
        g = self._g
        node, ctx = g.nodes[nid], self._node_ctx[nid]
        start, n_vis = g.entry_start[nid], node.num_visible_outputs()
        out_grads = [grad_nd[start + j]._data
                     if j < n_vis and grad_nd[start + j] is not None else None
                     for j in range(g.num_outputs[nid])]
        in_grads, call_reqs, folds, slot_nd, used = [], [], [], [], set()
        for slot, (eid, req) in enumerate(zip(g.node_inputs[nid], reqs)):
            if req is GradReq.NULL:
                target = None
            elif eid in used or _space(entry_ctx[eid]) != _space(ctx):
                target = self._buffer(("scratch", nid, slot), self._shapes[eid],
                                      self._types[eid], ctx, base_pool)
                folds.append(_GradFold(target._data, grad_nd[eid]._data, req,
                                       kernels.for_context(entry_ctx[eid]),
                                       _space(entry_ctx[eid]) != _space(ctx)))
                req = GradReq.WRITE
            else:
                target = grad_nd[eid]
            in_grads.append(None if target is None else target._data)
            call_reqs.append(req)
            slot_nd.append(target)
            if req is not GradReq.NULL:
                used.add(eid)
        return _BackwardStep(node.op, fwd.params, fwd.kernels, out_grads, fwd.inputs,
                             fwd.outputs, in_grads, call_reqs, fwd.state, folds, nid, slot_nd)

    def _stale(self):
        """True when someone rebound the backend array of an argument / aux / grad NDArray
        (the steps hold backend arrays, so they are rebuilt then)."""
        for arr, data in self._watched:
            if arr._data is not data:
                return True
        return False

    def _replan(self):
        total = self._total_exec_bytes
        self._setup(self._g, self._node_ctx, self._shapes, self._types, self.arg_arrays,
                    self.grad_arrays, self._reqs, self.aux_arrays, base_pool=self._pool)
        self._total_exec_bytes = total

    # --- running --------------------------------------------------------------------------------
    def _observer(self):
        """What watches the steps this run: the monitor, the profiler, or nothing."""
        if self._monitor_callback is not None:
            return _Monitoring(self)
        if profiler.is_running():
            return _Profiling(self)
        return None

    def forward(self, is_train=False, **kwargs):
        """Run the graph; keyword arrays are first copied into the named arguments."""
        self._split_ran = False
        if kwargs:
            self._copy_keyword_inputs(kwargs)
        if self._stale():
            self._replan()
        if self._refresh_threads is not None:
            self._refresh_threads()
        if self._failure is not None:
            self._forget_failure()
        if engine.any_uncleared() and self._failed_arguments():
            self._forward_after_failure(0, self._failed_arguments(), is_train)
            self._forward_done = True
            return self.outputs
        watch = self._observer()
        if (self._split is not None and watch is None and not getattr(self, "_plain_forward",
                                                                      False)
                and self._split.forward(self, is_train)):
            # the children each ran a slice of the batch into views of our outputs
            self._split_ran = self._split.trains
            self._forward_done = True if self._split.trains else inference_plan.PLANNED
            return self.outputs
        if not is_train and watch is None:
            try:
                planned = inference_plan.run(self, _transfer)
            except engine.DeferredOperatorError:
                planned = False     # the plain walk below records where the failure is read
            if planned:
                self._forward_done = inference_plan.PLANNED     # (see inference_plan.py)
                return self.outputs
        steps = self._fwd
        if is_train and watch is None:
            steps = inference_plan.training_steps(self)
        step = None
        try:
            for step in steps:
                op, p, k, ins, outs, state, nid = step
                if watch is not None:
                    started = watch.before_forward(op, nid)
                if op is None:
                    _transfer(outs._data, k, ins._data, GradReq.WRITE)
                else:
                    op.forward(p, k, ins, outs, is_train, state)
                if watch is not None:
                    watch.after_forward(op, nid, started)
        except engine.DeferredOperatorError as err:
            cell = engine.defer(err)
            failed = self._node_outputs(step.node_id, cell)
            if isinstance(step.op, inference_plan.TrainingLayer):
                failed.update(self._node_outputs(step.op.first, cell))
            # the plain walk goes on after the failed step's node (a fused layer's last one)
            after = next(i for i, s in enumerate(self._fwd) if s.node_id == step.node_id
                         and (s.op is None) == (step.op is None))
            self._forward_after_failure(after + 1, failed, is_train)
        self._forward_done = True
        return self.outputs

    # --- failures reported where they are read (lightmod/engine.py) ----------------------------
    def _node_outputs(self, nid, cell):
        start = self._g.entry_start[nid]
        return {eid: cell for eid in range(start, start + self._g.num_outputs[nid])}

    def _failed_arguments(self):
        """{entry: PendingError} of the bound arguments and aux states holding a failure."""
        g = self._g
        return {g.entry_start[nid]: arr._error
                for nid, arr in zip(g.arg_nids + g.aux_nids, self.arg_arrays + self.aux_arrays)
                if engine.pending_of([arr]) is not None}

    def _forward_after_failure(self, first, failed, is_train):
        """Run the steps from index ``first`` on, given ``failed`` ({entry: PendingError}):
        an operator reading a failed entry is skipped and its outputs fail the same way."""
        g = self._g
        for op, p, k, ins, outs, state, nid in self._fwd[first:]:
            if op is None:
                _transfer(outs._data, k, ins._data, GradReq.WRITE)
                continue
            cell = next((failed[e] for e in g.node_inputs[nid] if e in failed), None)
            if cell is None:
                try:
                    op.forward(p, k, ins, outs, is_train, state)
                    continue
                except engine.DeferredOperatorError as err:
                    cell = engine.defer(err)
            failed.update(self._node_outputs(nid, cell))
        for eid, out in zip(g.heads, self.outputs):
            if eid in failed:
                out._error = failed[eid]
        self._failure = next(iter(failed.values()))

    def _fail_gradients(self, cell):
        for grad in self.grad_arrays:
            if grad is not None:
                grad._error = cell
        self._failure = cell

    def _forget_failure(self):
        """A new forward pass recomputes what the last failure left behind."""
        for arr in self.outputs + self.grad_arrays:
            if arr is not None:
                arr._error = None
        self._failure = None

    def _copy_keyword_inputs(self, kwargs):
        arg_dict = self.arg_dict
        for name, array in kwargs.items():
            if not isinstance(array, (NDArray, np.ndarray)):
                raise ValueError("only accept keyword argument of NDArrays and "
                                 "numpy.ndarray")
            if name not in arg_dict:
                raise TypeError("Unknown argument %s" % name)
            if arg_dict[name].shape != array.shape:
                raise ValueError("Shape not match! Argument %s, need: %s, received: %s"
                                 % (name, str(arg_dict[name].shape), str(array.shape)))
            arg_dict[name][:] = array

    def _head_gradients(self, out_grads):
        """``out_grads`` as given to backward (None, one NDArray, a list, or a dict by output
        name) as a list in output order."""
        if out_grads is None:
            return ()
        if isinstance(out_grads, NDArray):
            return (out_grads,)
        if isinstance(out_grads, dict):
            out_grads = [out_grads[name] for name in self._symbol.list_outputs()]
        for head in out_grads:
            if not isinstance(head, NDArray):
                raise TypeError("inputs must be NDArray")
        return out_grads

    def backward(self, out_grads=None, is_train=True):
        """Back-propagate the head gradients into the gradient arrays (see the module doc)."""
        heads = self._head_gradients(out_grads)
        if not self._forward_done and self._split is not None and self._split.trains and (
                self._bwd or self._head_steps):
            self.forward(is_train=True)
        if self._split_ran:
            # the children hold the forward values: each back-propagates its slice
            for i, eid, dst, _, _ in self._head_steps:
                self._check_head(heads, i, eid, dst)
            self._split.backward(self, heads)
            return
        for k, grad in self._zero_grad_args:
            k.fill(grad._data, 0)
        if not self._bwd and not self._head_steps:
            return
        if not self._forward_done:
            # MXNet lets backward run before any forward (ops like repeat need no forward
            # values); running the forward pass first gives every op the values it reads
            self.forward(is_train=True)
        if self._forward_done is inference_plan.PLANNED:
            inference_plan.replay_plain_forward(self)
        for i, eid, dst, req, k in self._head_steps:
            self._check_head(heads, i, eid, dst)
            _store(dst, k, heads[i], req)
        failure = self._failure if self._failure is not None else engine.pending_of(heads)
        if failure is not None and failure.error is not None:
            # gradients of a failed forward pass (or of a failed head) are failures too
            self._fail_gradients(failure)
            return
        watch = self._observer()
        try:
            for op, p, k, ogs, ins, outs, igs, req, state, folds, nid, slot_nd in self._bwd:
                if watch is not None:
                    started = watch.before_backward()
                op.backward(p, k, ogs, ins, outs, igs, req, state)
                for scratch, target, r, tk, remote in folds:
                    if remote:
                        _transfer(target, tk, scratch, r)
                    else:
                        tk.assign(target, scratch, r)
                if watch is not None:
                    watch.after_backward(op, nid, slot_nd, started)
        except engine.DeferredOperatorError as err:
            self._fail_gradients(engine.defer(err))

    def _check_head(self, heads, i, eid, dst):
        """The head gradient of output ``i`` is given and has the output's shape."""
        if i >= len(heads) or heads[i] is None:
            raise MXNetError(
                "Executor.backward: output %d (%s) is not a loss output, so its head "
                "gradient is required when calling backward (pass out_grads, or make it a "
                "loss with make_loss)" % (i, self._g.entry_label(eid)))
        if heads[i].shape != dst.shape:
            raise MXNetError("Executor.backward: head gradient %d has shape %s, output %s "
                             "has shape %s" % (i, heads[i].shape, self._g.entry_label(eid),
                                               dst.shape))

    def _monitor_zeros(self, nid, slot):
        """Zeros standing in for a gradient nobody requested (the monitor still reports it)."""
        key = ("monitor", nid, slot)
        arr = self._pool.get(key)
        if arr is None:
            eid = self._g.node_inputs[nid][slot]
            arr = self._pool[key] = _zeros(self._shapes[eid], self._types[eid],
                                           self._node_ctx[nid])
        return arr

    def set_monitor_callback(self, callback, monitor_all=False):
        """callback(name, NDArray) for every operator output in forward and backward
        (``monitor_all`` adds every operator's inputs in forward)."""
        self._monitor_callback = callback
        self._monitor_all = bool(monitor_all)
        if callback is not None and self._stacks:
            self._unstack()     # the monitor reports the nodes of the user's graph
        if self._fused and callback is not None:
            self._replan()      # the monitor reports every operator: plan without fusion

    # --- dictionaries ---------------------------------------------------------------------------
    def _by_name(self, kind):
        """{name: NDArray} of the executor's arguments, gradients, auxiliary states or outputs
        (built on first use after each plan)."""
        found = self._dicts.get(kind)
        if found is None:
            listing = {"arg": self._symbol.list_arguments, "grad": self._symbol.list_arguments,
                       "aux": self._symbol.list_auxiliary_states,
                       "output": self._symbol.list_outputs}[kind]()
            if len(set(listing)) != len(listing):
                raise ValueError("Duplicate names detected, %s" % str(listing))
            arrays = {"arg": self.arg_arrays, "grad": self.grad_arrays, "aux": self.aux_arrays,
                      "output": self.outputs}[kind]
            found = self._dicts[kind] = dict(zip(listing, arrays))
        return found

    arg_dict = property(lambda self: self._by_name("arg"), doc="Arguments by name.")
    grad_dict = property(lambda self: self._by_name("grad"), doc="Gradient arrays by name.")
    aux_dict = property(lambda self: self._by_name("aux"), doc="Auxiliary states by name.")
    output_dict = property(lambda self: self._by_name("output"), doc="Outputs by name.")

    def copy_params_from(self, arg_params, aux_params=None, allow_extra_params=False):
        """Copy values into the argument (and aux) arrays by name; dtypes are converted."""
        for name, array in arg_params.items():
            if name in self.arg_dict:
                self._copy_into(self.arg_dict[name], array, name)
            elif not allow_extra_params:
                raise ValueError('Find name "%s" that is not in the arguments' % name)
        if aux_params is None:
            return
        for name, array in aux_params.items():
            if name in self.aux_dict:
                self._copy_into(self.aux_dict[name], array, name)
            elif not allow_extra_params:
                raise ValueError("Find name %s that is not in the auxiliary states" % name)

    def _copy_into(self, dst, src, name):
        if src.shape != dst.shape:
            raise MXNetError("copy_params_from: '%s' has shape %s, the executor's array has "
                             "shape %s" % (name, tuple(src.shape), dst.shape))
        if isinstance(src, NDArray):
            _store(dst, kernels.for_context(dst.context), src, GradReq.WRITE)
        else:
            dst[:] = src

    # --- reshape --------------------------------------------------------------------------------
    # --- stacked FullyConnected nodes (symbol/stack_fc.py) ------------------------------------------
    def _stacks_fit(self, new_shapes):
        """Whether the stacked graph still holds for these input shapes (every stack's data of
        one shape)."""
        g = self._g
        known = {nid: new_shapes[g.nodes[nid].name] for nid in g.var_nids
                 if isinstance(new_shapes.get(g.nodes[nid].name), tuple)}
        try:
            shapes = _graph.infer_shapes(g, known)
        except MXNetError:
            return False
        return _stack_fc.stacks_fit(g, shapes, self._stacks)

    def _plain_graph(self):
        """(graph, node contexts, entry dtypes) of the symbol without stacking; its arguments
        come in the same order (stacking never changes it)."""
        g = _graph.IndexedGraph(_graph.bind_outputs(self._symbol._outputs))
        node_ctx = _node_contexts(g, self._ctx, self._group2ctx)
        types = _graph.infer_types(g, {nid: np.dtype(a.dtype).name for nid, a in zip(
            g.arg_nids + g.aux_nids, self.arg_arrays + self.aux_arrays)})
        return g, node_ctx, types

    def _unstack(self):
        """Plan the graph without stacking, so that every node of the user's graph runs (and
        a monitor sees its outputs)."""
        g, node_ctx, types = self._plain_graph()
        shapes = _graph.infer_shapes(g, {nid: a.shape for nid, a in zip(
            g.arg_nids + g.aux_nids, self.arg_arrays + self.aux_arrays)})
        total = self._total_exec_bytes
        self._stacks = None
        self._setup(g, node_ctx, [tuple(s) for s in shapes], types, self.arg_arrays,
                    self.grad_arrays, self._reqs, self.aux_arrays, base_pool=self._pool)
        self._total_exec_bytes = total

    def reshape(self, partial_shaping=False, allow_up_sizing=False, **kwargs):
        """A new executor for new input shapes that shares the parameter arrays (and their
        gradients) and, where the new arrays are not larger, the memory of this one."""
        g, node_ctx, types = self._g, self._node_ctx, self._types
        if self._stacks and not self._stacks_fit(kwargs):
            g, node_ctx, types = self._plain_graph()
        known = {}
        for nid in g.var_nids:
            name = g.nodes[nid].name
            if name in kwargs and isinstance(kwargs[name], tuple):
                known[nid] = kwargs[name]
        shapes = _graph.infer_shapes(g, known)
        bad = _unknown_report(g, shapes, _graph.shape_known)
        if bad:
            raise MXNetError("reshape: cannot infer the shapes of %s" % ", ".join(bad[:10]))
        shapes = [tuple(s) for s in shapes]

        def resized(arr, nid, kind):
            new_shape = shapes[g.entry_start[nid]]
            name = g.nodes[nid].name
            if arr is None or arr.shape == new_shape:
                return arr
            if not (partial_shaping or name in kwargs):
                raise MXNetError("Shape of unspecified array %s:%s changed. This can cause the "
                                 "new executor to not share parameters with the old one. Please "
                                 "check for error in network. If this is intended, set "
                                 "partial_shaping=True to suppress this warning." % (kind, name))
            if int(np.prod(new_shape, dtype=np.int64)) > arr.size:
                if not allow_up_sizing:
                    raise MXNetError(
                        "New shape of %s: %s larger than original. First making a big executor "
                        "and then down sizing it is more efficient than the reverse. If you "
                        "really want to up size, set allow_up_sizing=True to enable allocation "
                        "of new arrays." % (kind, name))
                return _zeros(new_shape, arr.dtype, arr.context, arr.stype)
            return _view(arr, new_shape)

        args = [resized(a, nid, "arg") for a, nid in zip(self.arg_arrays, g.arg_nids)]
        grads = [resized(a, nid, "arg") for a, nid in zip(self.grad_arrays, g.arg_nids)]
        aux = [resized(a, nid, "aux") for a, nid in zip(self.aux_arrays, g.aux_nids)]
        exe = Executor(self._symbol, self._ctx, self._grad_req, self._group2ctx)
        exe._setup(g, node_ctx, shapes, types, args, grads, self._reqs, aux,
                   base_pool=self._pool)
        exe._stacks = self._stacks if g is self._g else None
        if self._monitor_callback is not None:
            exe.set_monitor_callback(self._monitor_callback, self._monitor_all)
        return exe

    # --- introspection --------------------------------------------------------------------------
    def debug_str(self):
        """The symbol's listing plus the memory this executor planned (MXNet's last lines)."""
        mb = (self._total_exec_bytes + (1 << 20) - 1) >> 20
        return "%sTotal %d MB allocated\nTotal %d TempSpace resource requested\n" \
            % (self._symbol.debug_str(), mb, 0)

    def get_optimized_symbol(self):
        """A copy of the graph this executor runs (after common-subexpression elimination)."""
        return _symbol.Symbol(self._g.outputs).copy()


_symbol.install_hooks(bind=bind, simple_bind=simple_bind)
