"""The executor's plan for inference: ``forward(is_train=False)`` with layers fused.

An executor's forward steps call one operator after another, each writing its own output
buffer. For inference a shorter walk gives the same outputs:

* **BatchNorm folded into the layer before it.** A Convolution or FullyConnected whose only
  consumer is a BatchNorm over its channel axis runs with BatchNorm's moving statistics as a
  per-channel scale and shift of its output (``BN(y + b) = y * s + t`` with
  ``s = gamma / sqrt(var + eps)`` and ``t = beta + (b - mean) * s``). ``s`` and ``t`` are
  computed from the live parameter and auxiliary arrays at every call (a few operations per
  channel), so ``set_params``, ``update``, ``load`` or any write into the arrays is seen at
  once and nothing can go stale; the arrays themselves are only read (``fix_gamma`` writes 1
  into gamma, as BatchNorm's own forward does).
* **Epilogues.** The bias, the folded BatchNorm and a following Activation (its only
  consumer) are applied in the convolution's output pass (``Convolution.forward_epilogue``)
  or in one pass over a fully connected layer's product.
* **Channel-last between convolutions (CPU).** The row-layout convolution works on
  channel-last data, ``(N, *spatial, C)``. An intermediate result that only convolutions,
  same-shape element-wise operators (the residual add, an activation) and a global pooling
  read stays in that layout, in its own buffer: the convolutions then skip the transposes
  in and out of it, the element-wise steps do not care, and the global pooling reduces it
  with the channels contiguous (``channel_last_pool``).
* **Feature-major between fully connected layers (CPU).** A fully connected layer's 2-D
  output that only other fully connected layers read (as their data) is kept transposed,
  ``(hidden, rows)``, in its own buffer: the producer computes ``w @ x^T`` and the reader
  ``w @ x`` or, writing a row-major result, ``x^T @ w^T``. OpenBLAS runs those forms faster
  than the row-major ``x @ w^T`` of every layer (measured here, float32, 2 threads: an MLP
  784-512-256-10 at batch 128 spends 0.84 ms in its three products row-major and 0.75 ms
  feature-major). The epilogue then works per row of the transposed result (``rows_to_batch`` in place).
* Dropout keeps its own step, which in inference is a copy (the operator decides what
  inference means for it; a plan that skipped it would hide a Dropout that dropped anyway).

**Training forward.** ``forward(is_train=True)`` gets the same epilogues
(:func:`training_steps`): a Convolution or FullyConnected layer whose only consumer is an
Activation runs as one step with it, the bias and the activation applied in the layer's
output pass, written straight into the Activation's output. The layer's own output (the
pre-activation) is then never written: nothing reads it, since the Activation's backward takes
its slope from its output (relu, sigmoid, tanh, softrelu; softsign, which needs the input, is
left unfused) and a layer's backward reads its data and weight only. An Activation inside a
fused element-wise group (``fusion.py``) is left to its group. BatchNorm is not folded there:
in training it normalises with the batch's own statistics.

Nothing else changes: no gradient buffer is touched, the outputs are the graph outputs the
plain walk writes (within float32 rounding: the folded form rounds in another order), and
intermediate results the plan skips are internal buffers nobody sees. The plan is not used
while a monitor or the profiler watches the steps (they want every operator's output), nor
for float16 layers. ``backward`` after a planned forward first re-runs the plain walk, so the
saved-for-backward buffers it reads are the ones the plain inference forward writes.
"""
import numpy as np

from . import profiler
from .grad_req import GradReq

__all__ = ["PLANNED", "run", "replay_plain_forward", "training_steps"]

# the executor's _forward_done after a planned forward: backward re-runs the plain walk
PLANNED = "planned inference"

_FUSABLE = ("Convolution", "FullyConnected")


class _Step:
    """One operator call of the plan (an unfused step with its inputs resolved)."""
    __slots__ = ("op", "params", "kernels", "inputs", "outputs", "state")

    def __init__(self, op, params, k, inputs, outputs, state):
        self.op, self.params, self.kernels = op, params, k
        self.inputs, self.outputs, self.state = inputs, outputs, state

    def __call__(self):
        self.op.forward(self.params, self.kernels, self.inputs, self.outputs, False, self.state)


class _Copy:
    """A copy between memory spaces (the executor's own transfer step)."""
    __slots__ = ("transfer", "src", "dst", "kernels")

    def __init__(self, transfer, src, dst, k):
        self.transfer, self.src, self.dst, self.kernels = transfer, src, dst, k

    def __call__(self):
        self.transfer(self.dst, self.kernels, self.src, GradReq.WRITE)


class _GlobalPoolLast:
    """Global max / avg / sum pooling of a channel-last entry into its (N, C, 1, ...) output."""
    __slots__ = ("kernels", "src", "out", "pool_type")

    def __init__(self, k, src, out, pool_type):
        n, c = src.shape[0], src.shape[1]
        self.kernels, self.pool_type = k, pool_type
        self.src = src.reshape(n, src.size // (n * c), c)
        self.out = out.reshape(n, c)

    def __call__(self):
        self.kernels.channel_last_pool(self.src, self.out, self.pool_type)


class _FusedLayer:
    """Convolution / FullyConnected + optional BatchNorm (moving statistics) + optional
    Activation, written into the last one's output buffer (a convolution may read and write
    channel-last data: ``x_last`` / ``y_last``)."""
    __slots__ = ("op", "params", "kernels", "x", "w", "bias", "bn", "act", "act_after", "out",
                 "result", "state", "scale", "shift", "x_last", "y_last", "x_fm", "y_fm",
                 "keep_rows")

    def __init__(self, op, params, k, x, w, bias, bn, act, act_codes, out, own_out, state):
        self.op, self.params, self.kernels = op, params, k
        # The plain walk may give the last fused operator's output the memory of the first
        # one's input, dead by then; a product reads its input while it writes, so such a layer
        # computes into the first operator's own output buffer (a different one: the plain
        # walk writes it while reading x) and copies the result over.
        self.result = own_out if k.shares_memory(out, x) else out
        self.x, self.w, self.bias, self.bn = x, w, bias, bn
        self.x_last = self.y_last = False
        self.x_fm = self.y_fm = False   # a fully connected layer's data / output feature-major
        self.keep_rows = False          # a training forward's convolution (training_steps)
        # tanh runs after the output pass in place, through the kernel set's activation
        # (a vectorised library tanh is several times faster than a scalar one per element);
        # the others go into the output pass
        self.act_after = act if act == "tanh" else None
        self.act = act_codes[act] if act is not None and act != "tanh" else -1
        self.out, self.state = out, state
        self.scale = self.shift = None
        if bn is not None:
            channels = w.shape[0]
            self.scale = k.empty((channels,), w.dtype)
            self.shift = k.empty((channels,), w.dtype)

    def __call__(self):
        k = self.kernels
        scale, shift = None, self.bias
        if self.bn is not None:
            gamma, beta, mean, var, eps, fix_gamma = self.bn
            if fix_gamma:
                k.fill(gamma, 1.0)
            k.bn_fold(gamma, beta, mean, var, self.bias, self.scale, self.shift, eps, fix_gamma)
            scale, shift = self.scale, self.shift
        result = self.result
        if self.op.name == "Convolution":
            self.op.forward_epilogue(self.params, k, self.x, self.w, scale, shift, self.act,
                                     result, self.state, self.x_last, self.y_last,
                                     self.keep_rows)
        elif self.x_fm or self.y_fm:
            self._feature_major(k, result, scale, shift)
        else:
            hidden = self.w.shape[0]
            rows = result.size // hidden
            out2 = result.reshape(rows, hidden)
            k.fc_forward(self.x.reshape(rows, self.x.size // rows), self.w, None, out2,
                         self.state)
            k.affine_act_rows(out2, scale, shift, self.act)
        if self.act_after is not None:
            k.activation_forward(result, result, self.act_after)
        if result is not self.out:
            k.copy(self.out, result)

    def _feature_major(self, k, result, scale, shift):
        """The product and epilogue of a fully connected layer whose data or output is
        feature-major (``x_fm``: x holds (K, rows); ``y_fm``: result gets (hidden, rows))."""
        w = self.w
        hidden, depth = w.shape
        rows = result.size // hidden
        if self.x_fm:
            x = self.x.reshape(depth, rows)
        else:
            x = self.x.reshape(rows, depth)
        if self.y_fm:
            out = result.reshape(hidden, rows)
            k.conv_gemm(w, x, out, trans_b=not self.x_fm)
            # per channel (row) in place: the (F, n*O) -> (n, F, O) pass with n = 1
            k.rows_to_batch(out, out.reshape(1, hidden, rows), shift, scale=scale, act=self.act)
        else:
            out = result.reshape(rows, hidden)
            k.conv_gemm(x, w, out, trans_a=True, trans_b=True)
            k.affine_act_rows(out, scale, shift, self.act)


class InferencePlan:
    """The fused steps of one executor plan (rebuilt when the executor re-plans)."""

    def __init__(self, exe, transfer):
        from .kernels.scalar_nn import ACTIVATIONS  # (imports numba: only when planning)
        g = exe._g
        self.source = exe._fwd
        uses = [0] * g.num_entries
        consumers = [[] for _ in range(g.num_entries)]
        for nid in g.op_nids:
            for slot, eid in enumerate(g.node_inputs[nid]):
                uses[eid] += 1
                consumers[eid].append((nid, slot))
        heads = set(g.heads)

        def only_consumer(eid, op_name):
            """The node that alone consumes entry eid (at slot 0) when it is an op_name."""
            if uses[eid] != 1 or eid in heads:
                return None
            nid, slot = consumers[eid][0]
            node = g.nodes[nid]
            if slot != 0 or node.op is None or node.op.name != op_name:
                return None
            return nid

        # nodes with a step of their own: a node run inside a fused element-wise group (see
        # fusion.py) is left to its group
        steps = {step.node_id: step for step in exe._fwd
                 if step.op is not None and step.op is g.nodes[step.node_id].op}
        entry = exe._entry_nd
        absorbed = set()    # nodes run inside a fused layer
        fused = {}          # first node -> _FusedLayer
        fused_out = {}      # output entry of a fused layer -> its first node
        self.fused_count = 0
        for nid in g.op_nids:
            node, p = g.nodes[nid], g.params[nid]
            name = node.op.name
            out_eid = g.entry_start[nid]
            dtype = np.dtype(self._dtype(entry[out_eid]))
            if (name not in _FUSABLE or nid in absorbed or nid not in steps
                    or dtype not in (np.float32, np.float64)):
                continue
            last, bn, act = nid, None, None
            bn_nid = only_consumer(out_eid, "BatchNorm")
            bn_nid = bn_nid if bn_nid in steps else None
            out_ndim = len(exe._shapes[out_eid])
            if bn_nid is not None:
                bp = g.params[bn_nid]
                axis = bp.axis + out_ndim if bp.axis < 0 else bp.axis
                channel_axis = 1 if name == "Convolution" else out_ndim - 1
                hidden_used = any(uses[g.entry_start[bn_nid] + j] for j in (1, 2))
                if axis == channel_axis and not bp.output_mean_var and not hidden_used:
                    ins = [entry[e]._data for e in g.node_inputs[bn_nid]]
                    bn = (ins[1], ins[2], ins[3], ins[4], bp.eps, bp.fix_gamma)
                    absorbed.add(bn_nid)
                    last = bn_nid
            act_nid = only_consumer(g.entry_start[last], "Activation")
            if act_nid in steps and g.params[act_nid].act_type in ACTIVATIONS:
                act = g.params[act_nid].act_type
                absorbed.add(act_nid)
                last = act_nid
            if last == nid:
                continue            # nothing to fuse: the operator's own step is as good
            step = steps[nid]
            ins = step.inputs
            bias = None if p.no_bias else ins[2]
            fused[nid] = _FusedLayer(node.op, p, step.kernels, ins[0], ins[1], bias, bn, act,
                                     ACTIVATIONS, entry[g.entry_start[last]]._data,
                                     entry[out_eid]._data, step.state)
            fused_out[g.entry_start[last]] = nid
            self.fused_count += 1

        self.feature_major_count = self._feature_major(exe, fused, fused_out, absorbed, steps,
                                                       consumers, heads, ACTIVATIONS)
        last = self._channel_last_entries(exe, fused, fused_out, absorbed, steps, consumers,
                                          heads)
        pools = {}
        for nid, layer in fused.items():
            layer.x_last = g.node_inputs[nid][0] in last
        for eid, nid in fused_out.items():
            fused[nid].y_last = eid in last
        for eid in last:
            for nid, _ in consumers[eid]:
                if g.nodes[nid].op.name == "Pooling":
                    step = steps[nid]
                    pools[nid] = _GlobalPoolLast(step.kernels, step.inputs[0],
                                                 step.outputs[0], g.params[nid].pool_type)
        self.channel_last_count = len(last)

        self.steps = []
        for step in exe._fwd:
            nid = step.node_id
            if step.op is None:
                self.steps.append(_Copy(transfer, step.inputs._data, step.outputs._data,
                                        step.kernels))
            elif nid in fused:
                self.steps.append(fused[nid])
            elif nid in pools and step.op is g.nodes[nid].op:
                self.steps.append(pools[nid])
            elif nid not in absorbed:
                self.steps.append(_Step(step.op, step.params, step.kernels, step.inputs,
                                        step.outputs, step.state))
        self.useful = self.fused_count > 0 or self.feature_major_count > 0

    @staticmethod
    def _feature_major(exe, fused, fused_out, absorbed, steps, consumers, heads, activations):
        """Mark the 2-D outputs of fully connected layers that the plan keeps feature-major
        (see the module doc) and return how many. Such an output must not be a graph output,
        and every reader must be a fully connected layer taking it as its data. A fully
        connected operator with nothing to fuse becomes a layer of its own (bias only) when
        it reads or writes a feature-major entry; ``fused`` and ``fused_out`` get it then."""
        g, shapes, entry = exe._g, exe._shapes, exe._entry_nd
        plain = {}
        for nid in g.op_nids:
            node = g.nodes[nid]
            if (node.op.name != "FullyConnected" or nid in fused or nid in absorbed
                    or nid not in steps):
                continue
            out = entry[g.entry_start[nid]]._data
            if np.dtype(out.dtype) not in (np.float32, np.float64):
                continue
            step, p = steps[nid], g.params[nid]
            ins = step.inputs
            plain[nid] = _FusedLayer(node.op, p, step.kernels, ins[0], ins[1],
                                     None if p.no_bias else ins[2], None, None, activations,
                                     out, out, step.state)
        layers = dict(fused)
        layers.update(plain)
        out_entry = {nid: e for e, nid in fused_out.items()}
        out_entry.update({nid: g.entry_start[nid] for nid in plain})

        def on_cpu(nid):
            layer = layers.get(nid)
            return (layer is not None and layer.op.name == "FullyConnected"
                    and getattr(layer.kernels, "device_kind", None) == "cpu")

        chosen = set()
        for nid, e in out_entry.items():
            readers = consumers[e]
            if (on_cpu(nid) and e not in heads and len(shapes[e]) == 2 and readers
                    and all(slot == 0 and on_cpu(reader) for reader, slot in readers)):
                chosen.add(e)
        for nid, e in out_entry.items():
            layer = layers[nid]
            layer.y_fm = e in chosen
            layer.x_fm = layer.op.name == "FullyConnected" and g.node_inputs[nid][0] in chosen
            if nid in plain and (layer.x_fm or layer.y_fm):
                fused[nid] = layer
                fused_out[e] = nid
        return len(chosen)

    @staticmethod
    def _channel_last_entries(exe, fused, fused_out, absorbed, steps, consumers, heads):
        """The entries the plan keeps channel-last (see the module doc).

        Same-shape element-wise nodes tie their inputs and output into one set (they compute
        in whatever layout all of them share); a set goes channel-last when each of its
        entries is written by a fused convolution that can write channel-last or by one of
        those element-wise nodes, is not a graph output, and is read only by such nodes, by
        fused convolutions that can read channel-last (as their data) and by global max /
        avg / sum poolings that have a step of their own."""
        g, shapes = exe._g, exe._shapes
        parent = list(range(g.num_entries))

        def find(e):
            while parent[e] != e:
                parent[e] = parent[parent[e]]
                e = parent[e]
            return e

        def channel_last_conv(nid):
            layer = fused.get(nid)
            return (layer is not None and layer.op.name == "Convolution"
                    and layer.op.supports_channel_last(layer.params, layer.kernels))

        pointwise = set()
        for nid in g.op_nids:
            node = g.nodes[nid]
            if nid in absorbed or g.num_outputs[nid] != 1:
                continue
            desc = node.op.pointwise(g.params[nid])
            out = g.entry_start[nid]
            if desc is None or desc[0] == "slice" or \
                    any(tuple(shapes[e]) != tuple(shapes[out]) for e in g.node_inputs[nid]):
                continue
            pointwise.add(nid)
            for e in g.node_inputs[nid]:
                parent[find(e)] = find(out)

        def entry_ok(e):
            if e in heads or len(shapes[e]) < 3:
                return False
            if e in fused_out:
                if not channel_last_conv(fused_out[e]):
                    return False
            elif g.entry_node[e] not in pointwise:
                return False
            for nid, slot in consumers[e]:
                if nid in pointwise:
                    continue
                if slot == 0 and channel_last_conv(nid):
                    continue
                node, p = g.nodes[nid], g.params[nid]
                if (slot == 0 and node.op.name == "Pooling" and p.global_pool
                        and p.pool_type in ("max", "avg", "sum") and nid in steps
                        and getattr(steps[nid].kernels, "device_kind", None) == "cpu"):
                    continue
                return False
            return True

        members = {}
        for e in range(g.num_entries):
            members.setdefault(find(e), []).append(e)
        last = set()
        for group in members.values():
            if any(e in fused_out for e in group) and all(entry_ok(e) for e in group):
                last.update(group)
        return last

    @staticmethod
    def _dtype(nd):
        return nd.dtype

    def run(self):
        for step in self.steps:
            step()


def run(exe, transfer):
    """Run ``exe``'s inference plan; False when the plain walk should run instead (a monitor
    or the profiler is watching, a replay for backward, or the plan would change nothing)."""
    if exe._monitor_callback is not None or profiler.is_running() or \
            getattr(exe, "_plain_forward", False):
        return False
    plan = getattr(exe, "_inference_plan", None)
    if plan is None or plan.source is not exe._fwd:
        plan = exe._inference_plan = InferencePlan(exe, transfer)
    if not plan.useful:
        return False
    plan.run()
    return True


def replay_plain_forward(exe):
    """Re-run the plain ``forward(is_train=False)`` walk (before a backward that follows a
    planned forward: backward reads the intermediate outputs the plan skipped)."""
    exe._plain_forward = True
    try:
        exe.forward(is_train=False)
    finally:
        exe._plain_forward = False


class TrainingLayer:
    """A forward step of the training walk that runs a fused layer (the executor calls
    ``forward`` with the step's fields, which the layer does not need). ``first`` and
    ``last`` are the fused nodes' ids."""
    __slots__ = ("layer", "first", "last")

    def __init__(self, layer, first, last):
        self.layer, self.first, self.last = layer, first, last

    def forward(self, p, k, inputs, outputs, is_train, state):
        self.layer()


def _training_walk(exe):
    from .kernels.scalar_nn import ACTIVATIONS  # (imports numba: only when planning)
    g, entry = exe._g, exe._entry_nd
    heads = set(g.heads)
    readers = [[] for _ in range(g.num_entries)]
    for nid in g.op_nids:
        for slot, eid in enumerate(g.node_inputs[nid]):
            readers[eid].append((nid, slot))
    own = {step.node_id: step for step in exe._fwd
           if step.op is not None and step.op is g.nodes[step.node_id].op}
    grouped = getattr(exe, "_fused_members", ())
    layers = {}         # Activation node -> the fused step replacing its own
    absorbed = set()    # FullyConnected nodes run inside such a step
    for nid in g.op_nids:
        if g.nodes[nid].op.name not in _FUSABLE or nid not in own:
            continue
        out_eid = g.entry_start[nid]
        if out_eid in heads or len(readers[out_eid]) != 1:
            continue
        act_nid, slot = readers[out_eid][0]
        act = g.params[act_nid].act_type if g.nodes[act_nid].op.name == "Activation" else None
        if (slot != 0 or act not in ACTIVATIONS or act == "softsign" or act_nid not in own
                or act_nid in grouped
                or np.dtype(entry[out_eid].dtype) not in (np.float32, np.float64)):
            continue
        step, p = own[nid], g.params[nid]
        ins = step.inputs
        layer = _FusedLayer(g.nodes[nid].op, p, step.kernels, ins[0], ins[1],
                            None if p.no_bias else ins[2], None, act, ACTIVATIONS,
                            entry[g.entry_start[act_nid]]._data, entry[out_eid]._data,
                            step.state)
        layer.keep_rows = True
        layers[act_nid] = TrainingLayer(layer, nid, act_nid)
        absorbed.add(nid)
    if not layers:
        return exe._fwd
    walk = []
    for step in exe._fwd:
        if step.node_id in absorbed and step.op is not None:
            continue
        fused = layers.get(step.node_id) if step.op is not None else None
        walk.append(step if fused is None else step._replace(op=fused))
    return walk


def training_steps(exe):
    """The forward steps ``forward(is_train=True)`` walks (see the module doc): the
    executor's own list when nothing fuses or fusion is off (``LIGHTMOD_FUSION=0`` at bind).
    Made at the first training forward after each (re-)plan."""
    if not exe._layer_fusion:
        return exe._fwd
    cached = getattr(exe, "_training_walk", None)
    if cached is None or cached[0] is not exe._fwd:
        cached = exe._training_walk = (exe._fwd, _training_walk(exe))
    return cached[1]
