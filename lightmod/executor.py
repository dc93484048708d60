"""Executor: a symbol bound to arrays; runs forward and backward (MXNet 1.9.1's mx.executor).

Binding (``Symbol.bind`` / ``Symbol.simple_bind``) infers every shape and dtype of the graph
(so an inconsistent node anywhere fails at bind with an error naming it), then plans every
buffer once: operator outputs (hidden ones included), gradient buffers of intermediate results,
cross-device copies. A training step then allocates nothing: ``forward`` walks precomputed
per-node call lists in topological order calling ``op.forward`` with backend arrays, and
``backward`` walks them in reverse calling ``op.backward``.

Gradients: an intermediate result consumed by several operators gets one buffer; the first
writer in backward order uses req 'write' and later ones 'add' (no temporaries). Arguments
honour their ``grad_req`` ('write', 'add' accumulates across backward calls, 'null' gives no
gradient array). Loss heads (``op.is_loss``) ignore head gradients; other heads need one only
when some gradient actually depends on them.
"""
import time

import numpy as np

from . import profiler
from .base import MXNetError, string_types
from .context import Context
from .ndarray import ndarray as _nd
from .ndarray.ndarray import NDArray
from .symbol import graph as _graph

__all__ = ["Executor", "bind", "simple_bind"]

_GRAD_REQS = ("null", "write", "add")
_STYPE_IDS = {0: "default", 1: "row_sparse", 2: "csr"}


def _kernels(ctx):
    from . import kernels
    return kernels.for_context(ctx)


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
    n = int(np.prod(shape, dtype=np.int64))
    data = base._data
    if isinstance(data, np.ndarray):
        view = data.reshape(-1)[:n].reshape(shape)
    else:
        view = data.reshape(data.size)[:n].reshape(*shape) if shape else \
            data.reshape(data.size)[:1]
    return NDArray(view, base.context, base.stype)


def _fits(arr, shape, dtype, ctx):
    return (arr is not None and np.dtype(arr.dtype) == np.dtype(dtype) and arr.context == ctx
            and arr.size >= int(np.prod(shape, dtype=np.int64)))


def _transfer(dst, dst_k, src, req):
    """dst (a backend array) <- src (a backend array on another memory space)."""
    host = src if isinstance(src, np.ndarray) else src.copy_to_host()
    if isinstance(dst, np.ndarray):
        dst_k.assign(dst, host.reshape(dst.shape), req)
    elif req == "write":
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
    """One req per argument from a str, list or dict (dict: unlisted names get 'null')."""
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
    for r in reqs:
        if r not in _GRAD_REQS:
            raise ValueError("grad_req must be in %s, got %r" % (_GRAD_REQS, r))
    return reqs


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
def simple_bind(symbol, ctx, grad_req="write", type_dict=None, stype_dict=None,
                group2ctx=None, shared_arg_names=None, shared_exec=None, shared_buffer=None,
                shapes=None):
    """Allocate arrays for the given input shapes and bind (see ``Symbol.simple_bind``)."""
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
    g = _graph.IndexedGraph(symbol._outputs)
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
        args = "".join("%s: %s\n" % (k, v) for k, v in shapes.items())
        raise MXNetError("simple_bind error. Arguments:\n%s%s" % (args, err)) from None

    arg_names = [g.nodes[n].name for n in g.arg_nids]
    reqs = _grad_req_list(grad_req, arg_names, "simple_bind")
    shared_names = set(shared_arg_names or ())
    stype_dict = stype_dict or {}
    arg_arrays, grad_arrays = [], []
    for nid, name, req in zip(g.arg_nids, arg_names, reqs):
        eid = g.entry_start[nid]
        shape, dtype, actx = entry_shapes[eid], entry_types[eid], node_ctx[nid]
        stype = stype_dict.get(name) or _STYPE_IDS.get(
            int(g.nodes[nid].attrs.get("__storage_type__", "0")), "default")
        if shared_exec is not None and name in shared_names:
            arr = _shared_array(shared_exec.arg_dict, name, shape, dtype, "argument")
            grad = None
            if req != "null":
                grad = _shared_array(shared_exec.grad_dict, name, shape, dtype, "gradient")
        elif shared_buffer is not None and name not in shared_names:
            arr = _from_pool(shared_buffer, name, shape, dtype, actx, stype)
            grad = None if req == "null" else \
                _from_pool(shared_buffer, "grad of " + name, shape, dtype, actx, "default")
        else:
            arr = _zeros(shape, dtype, actx, stype)
            grad = None if req == "null" else _zeros(shape, dtype, actx)
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
               aux_arrays)
    return exe


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
    g = _graph.IndexedGraph(symbol._outputs)
    arg_names = [g.nodes[n].name for n in g.arg_nids]
    aux_names = [g.nodes[n].name for n in g.aux_nids]
    arg_arrays = _as_list(args, arg_names, "args", False)
    grad_arrays = [None] * len(arg_names) if args_grad is None else \
        _as_list(args_grad, arg_names, "args_grad", True)
    aux_arrays = _as_list(aux_states if aux_states is not None else [], aux_names,
                          "aux_states", False)
    reqs = _grad_req_list(grad_req, arg_names, "bind")
    reqs = [r if grad is not None else "null" for r, grad in zip(reqs, grad_arrays)]
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


# ---------------------------------------------------------------------------------------------
# the executor
# ---------------------------------------------------------------------------------------------
class Executor:
    """A bound symbol: arrays for arguments, gradients, auxiliary states and outputs, and the
    precomputed forward / backward call lists."""

    def __init__(self, symbol, ctx, grad_req, group2ctx):
        self._symbol = symbol
        self._ctx = ctx
        self._grad_req = grad_req
        self._group2ctx = group2ctx
        self.arg_arrays = []
        self.grad_arrays = []
        self.aux_arrays = []
        self.outputs = []
        self._arg_dict = None
        self._grad_dict = None
        self._aux_dict = None
        self._output_dict = None
        self._monitor_callback = None
        self._monitor_all = False
        self._total_exec_bytes = 0

        self._forward_done = False

    # --- planning -------------------------------------------------------------------------------
    def _buffer(self, key, shape, dtype, ctx, base_pool):
        """An internal buffer: a view into the base executor's buffer under the same key when
        that one is large enough (reshape shares memory), else a fresh zero array."""
        arr = base_pool.get(key) if base_pool else None
        if _fits(arr, shape, dtype, ctx):
            out = _view(arr, shape) if arr.shape != tuple(shape) else arr
        else:
            out = _zeros(shape, dtype, ctx)
            self._total_exec_bytes += out.size * np.dtype(dtype).itemsize
        self._pool[key] = out
        return out

    def _kern(self, ctx):
        k = self._kernel_sets.get(ctx)
        if k is None:
            k = self._kernel_sets[ctx] = _kernels(ctx)
        return k

    def _setup(self, g, node_ctx, shapes, types, arg_arrays, grad_arrays, reqs, aux_arrays,
               base_pool=None):
        """Plan every buffer and precompute the forward / backward call lists."""
        self._g = g
        self._node_ctx = node_ctx
        self._shapes = shapes
        self._types = types
        self._reqs = list(reqs)
        self._pool = {}
        self._kernel_sets = {}
        self.arg_arrays = list(arg_arrays)
        self.grad_arrays = list(grad_arrays)
        self.aux_arrays = list(aux_arrays)
        n_entries = g.num_entries

        # --- where every entry lives
        entry_nd = [None] * n_entries
        entry_ctx = [None] * n_entries
        for nid in range(len(g.nodes)):
            for j in range(g.num_outputs[nid]):
                entry_ctx[g.entry_start[nid] + j] = node_ctx[nid]
        for nid, arr in zip(g.arg_nids + g.aux_nids, self.arg_arrays + self.aux_arrays):
            entry_nd[g.entry_start[nid]] = arr
        for nid in g.op_nids:
            for j in range(g.num_outputs[nid]):
                eid = g.entry_start[nid] + j
                entry_nd[eid] = self._buffer(("out", eid), shapes[eid], types[eid],
                                             node_ctx[nid], base_pool)
        self._entry_nd = entry_nd

        # --- forward: one step per operator, plus copies where memory spaces differ
        fwd, fwd_nids, fwd_pos, copies = [], [], {}, {}
        node_in_nd = {}
        for nid in g.op_nids:
            ctx = node_ctx[nid]
            ins = []
            for eid in g.node_inputs[nid]:
                if _space(entry_ctx[eid]) == _space(ctx):
                    ins.append(entry_nd[eid])
                    continue
                key = ("copy", eid, _space(ctx))
                if key not in copies:
                    copies[key] = self._buffer(key, shapes[eid], types[eid], ctx, base_pool)
                    fwd.append((None, None, self._kern(ctx), entry_nd[eid], copies[key], None))
                    fwd_nids.append(None)
                ins.append(copies[key])
            node_in_nd[nid] = ins
            start, count = g.entry_start[nid], g.num_outputs[nid]
            fwd_pos[nid] = len(fwd)
            fwd.append((g.nodes[nid].op, g.params[nid], self._kern(ctx), [x._data for x in ins],
                        [o._data for o in entry_nd[start:start + count]], {"context": ctx}))
            fwd_nids.append(nid)
        self._fwd, self._fwd_nids, self._node_in_nd = fwd, fwd_nids, node_in_nd
        self._refresh_threads = _thread_policy() if any(
            c.device_typeid != 2 for c in node_ctx) else None

        # --- which entries need a gradient: those computed from an argument with a gradient
        needs = [False] * n_entries
        var_grad = {}
        for nid, grad, req in zip(g.arg_nids, self.grad_arrays, self._reqs):
            if grad is not None and req != "null":
                eid = g.entry_start[nid]
                needs[eid] = True
                var_grad[eid] = req
        run_bwd = [False] * len(g.nodes)
        for nid in g.op_nids:
            if any(needs[e] for e in g.node_inputs[nid]):
                run_bwd[nid] = True
                for j in range(g.num_outputs[nid]):
                    needs[g.entry_start[nid] + j] = True

        # --- writes into each gradient in backward order: head gradients, then consumers
        writes = [0] * n_entries

        def next_req(eid):
            first = writes[eid] == 0
            writes[eid] += 1
            if eid in var_grad:
                return "write" if first and var_grad[eid] == "write" else "add"
            return "write" if first else "add"

        head_plan = []
        for i, eid in enumerate(g.heads):
            node = g.nodes[g.entry_node[eid]]
            if needs[eid] and not (node.op is not None and
                                   node.op.ignores_head_grad(g.params[g.entry_node[eid]])):
                head_plan.append((i, eid, next_req(eid)))
        order = [nid for nid in reversed(g.op_nids) if run_bwd[nid]]
        slot_reqs = {nid: [next_req(eid) if needs[eid] else "null"
                           for eid in g.node_inputs[nid]] for nid in order}
        grad_nd = [None] * n_entries
        for nid, grad in zip(g.arg_nids, self.grad_arrays):
            if g.entry_start[nid] in var_grad:
                grad_nd[g.entry_start[nid]] = grad
        for eid in range(n_entries):
            if needs[eid] and writes[eid] and grad_nd[eid] is None:
                nid = g.entry_node[eid]
                grad_nd[eid] = self._buffer(("grad", eid), shapes[eid], types[eid],
                                            node_ctx[nid], base_pool)
        self._head_steps = [(i, eid, grad_nd[eid], req, self._kern(entry_ctx[eid]))
                            for i, eid, req in head_plan]

        # --- backward: one step per operator that has a gradient to produce
        bwd, bwd_grad_nd = [], []
        for nid in order:
            node, ctx = g.nodes[nid], node_ctx[nid]
            start, count = g.entry_start[nid], g.num_outputs[nid]
            n_vis = node.num_visible_outputs()
            out_grads = [grad_nd[start + j]._data
                         if j < n_vis and grad_nd[start + j] is not None else None
                         for j in range(count)]
            in_grads, req, after, slot_nd, used = [], [], [], [], set()
            for slot, eid in enumerate(g.node_inputs[nid]):
                r = slot_reqs[nid][slot]
                if r == "null":
                    in_grads.append(None)
                    req.append("null")
                    slot_nd.append(None)
                    continue
                target = grad_nd[eid]
                remote = _space(entry_ctx[eid]) != _space(ctx)
                if remote or eid in used:
                    # the same gradient twice in one call, or one on another device: write a
                    # separate buffer and fold it into the real one after the call
                    scratch = self._buffer(("scratch", nid, slot), shapes[eid], types[eid], ctx,
                                           base_pool)
                    in_grads.append(scratch._data)
                    req.append("write")
                    after.append((scratch._data, target._data, r,
                                  self._kern(entry_ctx[eid]), remote))
                    slot_nd.append(scratch)
                else:
                    in_grads.append(target._data)
                    req.append(r)
                    slot_nd.append(target)
                used.add(eid)
            step = fwd[fwd_pos[nid]]
            bwd.append((node.op, g.params[nid], self._kern(ctx), out_grads, step[3], step[4],
                        in_grads, req, step[5], after))
            bwd_grad_nd.append((nid, slot_nd))
        self._bwd, self._bwd_grad_nd = bwd, bwd_grad_nd
        self.outputs = [entry_nd[eid] for eid in g.heads]
        self._arg_dict = self._grad_dict = self._aux_dict = self._output_dict = None
        self._watched = [(a, a._data) for a in self.arg_arrays + self.aux_arrays +
                         self.grad_arrays if a is not None]

    def _stale(self):
        """True when someone rebound the backend array of an argument / aux / grad NDArray
        (the call lists hold backend arrays, so they are rebuilt then)."""
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
    def forward(self, is_train=False, **kwargs):
        """Run the graph; keyword arrays are first copied into the named arguments."""
        if kwargs:
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
        if self._stale():
            self._replan()
        if self._refresh_threads is not None:
            self._refresh_threads()
        if self._monitor_callback is not None:
            self._forward_monitored(is_train)
        elif profiler.is_running():
            self._forward_profiled(is_train)
        else:
            for op, p, k, ins, outs, state in self._fwd:
                if op is None:
                    _transfer(outs._data, k, ins._data, "write")
                else:
                    op.forward(p, k, ins, outs, is_train, state)
        self._forward_done = True
        return self.outputs

    def _forward_profiled(self, is_train):
        """Forward with one profiler event per operator call (compile time kept apart)."""
        g = self._g
        for nid, (op, p, k, ins, outs, state) in zip(self._fwd_nids, self._fwd):
            start, compiled = time.perf_counter(), profiler.compile_seconds()
            if op is None:
                _transfer(outs._data, k, ins._data, "write")
                name, category = "%s_copy" % g.nodes[nid].name, "copy"
            else:
                op.forward(p, k, ins, outs, is_train, state)
                name, category = g.nodes[nid].name, "forward"
            profiler.record(name, category, start, time.perf_counter(),
                            profiler.compile_seconds() - compiled, {"op": op.name if op else "copy"})

    def _forward_monitored(self, is_train):
        cb, g = self._monitor_callback, self._g
        for nid, (op, p, k, ins, outs, state) in zip(self._fwd_nids, self._fwd):
            if op is None:
                _transfer(outs._data, k, ins._data, "write")
                continue
            node = g.nodes[nid]
            if self._monitor_all:
                for name, arr in zip(op.list_inputs(p), self._node_in_nd[nid]):
                    cb("%s_%s" % (node.name, name), arr)
            op.forward(p, k, ins, outs, is_train, state)
            start = g.entry_start[nid]
            for j, out_name in enumerate(op.list_outputs(p)):
                cb("%s_%s" % (node.name, out_name), self._entry_nd[start + j])

    def backward(self, out_grads=None, is_train=True):
        """Back-propagate the head gradients into the gradient arrays (see the module doc)."""
        if out_grads is None:
            out_grads = []
        elif isinstance(out_grads, NDArray):
            out_grads = [out_grads]
        elif isinstance(out_grads, dict):
            out_grads = [out_grads[k] for k in self._symbol.list_outputs()]
        for obj in out_grads:
            if not isinstance(obj, NDArray):
                raise TypeError("inputs must be NDArray")
        if not self._bwd and not self._head_steps:
            return
        if not self._forward_done:
            raise MXNetError("Executor.backward: call forward(is_train=True) first")
        for i, eid, dst, req, k in self._head_steps:
            if i >= len(out_grads) or out_grads[i] is None:
                raise MXNetError(
                    "Executor.backward: output %d (%s) is not a loss output, so its head "
                    "gradient is required when calling backward (pass out_grads, or make it a "
                    "loss with make_loss)" % (i, self._g.entry_label(eid)))
            grad = out_grads[i]
            if grad.shape != dst.shape:
                raise MXNetError("Executor.backward: head gradient %d has shape %s, output %s "
                                 "has shape %s" % (i, grad.shape, self._g.entry_label(eid),
                                                   dst.shape))
            _store(dst, k, grad, req)
        if self._monitor_callback is not None:
            self._backward_monitored()
            return
        if profiler.is_running():
            self._backward_profiled()
            return
        for op, p, k, ogs, ins, outs, igs, req, state, after in self._bwd:
            op.backward(p, k, ogs, ins, outs, igs, req, state)
            for scratch, target, r, tk, remote in after:
                if remote:
                    _transfer(target, tk, scratch, r)
                else:
                    tk.assign(target, scratch, r)

    def _backward_profiled(self):
        g = self._g
        for (op, p, k, ogs, ins, outs, igs, req, state, after), (nid, _) in \
                zip(self._bwd, self._bwd_grad_nd):
            start, compiled = time.perf_counter(), profiler.compile_seconds()
            op.backward(p, k, ogs, ins, outs, igs, req, state)
            for scratch, target, r, tk, remote in after:
                if remote:
                    _transfer(target, tk, scratch, r)
                else:
                    tk.assign(target, scratch, r)
            profiler.record("%s_backward" % g.nodes[nid].name, "backward", start,
                            time.perf_counter(), profiler.compile_seconds() - compiled,
                            {"op": op.name})

    def _backward_monitored(self):
        cb, g = self._monitor_callback, self._g
        for (op, p, k, ogs, ins, outs, igs, req, state, after), (nid, slot_nd) in \
                zip(self._bwd, self._bwd_grad_nd):
            op.backward(p, k, ogs, ins, outs, igs, req, state)
            for scratch, target, r, tk, remote in after:
                if remote:
                    _transfer(target, tk, scratch, r)
                else:
                    tk.assign(target, scratch, r)
            node = g.nodes[nid]
            aux = set(node.aux_slots())
            slots = [s for s in range(len(slot_nd)) if s not in aux]
            for n, s in enumerate(slots):
                arr = slot_nd[s]
                if arr is None:
                    arr = self._monitor_zeros(nid, s)
                suffix = "output" if len(slots) == 1 else "output%d" % n
                cb("%s_backward_%s" % (node.name, suffix), arr)

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

    # --- dictionaries ---------------------------------------------------------------------------
    @staticmethod
    def _get_dict(names, ndarrays):
        if len(set(names)) != len(names):
            raise ValueError("Duplicate names detected, %s" % str(names))
        return dict(zip(names, ndarrays))

    @property
    def arg_dict(self):
        if self._arg_dict is None:
            self._arg_dict = self._get_dict(self._symbol.list_arguments(), self.arg_arrays)
        return self._arg_dict

    @property
    def grad_dict(self):
        if self._grad_dict is None:
            self._grad_dict = self._get_dict(self._symbol.list_arguments(), self.grad_arrays)
        return self._grad_dict

    @property
    def aux_dict(self):
        if self._aux_dict is None:
            self._aux_dict = self._get_dict(self._symbol.list_auxiliary_states(),
                                            self.aux_arrays)
        return self._aux_dict

    @property
    def output_dict(self):
        if self._output_dict is None:
            self._output_dict = self._get_dict(self._symbol.list_outputs(), self.outputs)
        return self._output_dict

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
            _store(dst, self._kern(dst.context), src, "write")
        else:
            dst[:] = src

    # --- reshape --------------------------------------------------------------------------------
    def reshape(self, partial_shaping=False, allow_up_sizing=False, **kwargs):
        """A new executor for new input shapes that shares the parameter arrays (and their
        gradients) and, where the new arrays are not larger, the memory of this one."""
        g = self._g
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
        exe._setup(g, self._node_ctx, shapes, self._types, args, grads, self._reqs, aux,
                   base_pool=self._pool)
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
        return self._symbol.copy()
