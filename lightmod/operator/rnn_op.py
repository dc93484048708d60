"""The fused ``RNN`` operator (MXNet 1.9.1's name, parameters, packed weights and outputs).

Modes ``lstm``, ``gru``, ``rnn_tanh`` and ``rnn_relu``; ``num_layers`` stacked layers, optionally
bidirectional, with dropout ``p`` on the outputs of every layer but the last (training only).

Inputs: ``data`` (T, N, C), ``parameters`` (one flat vector), ``state`` (L*D, N, H) and, for
LSTM, ``state_cell`` (L*D, N, H). Outputs: ``output`` (T, N, D*H) and, with ``state_outputs``,
the final ``state_output`` (and ``statecell_output`` for LSTM).

Packed parameter layout (MXNet's, shared with cuDNN): for every layer and direction (layer-major,
forward direction first) the input weights (G*H, C_l) then the recurrent weights (G*H, H); after
all weights, for every layer and direction the input bias (G*H,) then the recurrent bias (G*H,).
Gate blocks of H rows are ordered i, f, g, o (LSTM) and r, z, n (GRU); C_0 = C, C_l = D*H.

The layer / direction / time loops run here, against the kernel set ``k``: one big product for
the input side of a whole layer, then per step a product for the recurrent side and one kernel
for the gate math (``kernels/cpu/rnn.py`` / ``kernels/cuda/rnn.py``). Forward keeps the gates,
cell states and hidden states of every step in the node's ``state`` for the backward pass.

Not supported (as in MXNet 1.9.1's own CPU operator, which rejects them): ``projection_size``,
``lstm_state_clip_min/max`` and ``use_sequence_length``; they are rejected with an error that
says so. float16 is rejected too (MXNet's CPU operator has no float16 GEMM).
"""
import numpy as np

from .common import assign_shape, known, zero_grads
from .nn import ElementwiseOp
from .registry import Bool, Enum, Float, Int, Operator, OptFloat, OptInt, Shape, register

__all__ = ["GATES", "GATE_NAMES", "param_layout", "param_size", "packed_pieces",
           "packed_input_size", "RNN", "Reverse"]

# The gate blocks of each mode, in the order the packed weights stack them (the names are the
# suffixes the RNN cells give the per-gate parameters).
GATE_NAMES = {"rnn_relu": ("",), "rnn_tanh": ("",), "lstm": ("_i", "_f", "_c", "_o"),
              "gru": ("_r", "_z", "_o")}
GATES = {mode: len(names) for mode, names in GATE_NAMES.items()}


def param_layout(mode, num_layers, bidirectional, input_size, state_size):
    """Where each layer's and direction's weights and biases sit in the packed vector.

    Returns (entries, total): ``entries[l * D + d]`` is a dict with the input size ``c`` and the
    flat offsets ``wx``, ``wh``, ``bx``, ``bh`` of W_x (G*H, c), W_h (G*H, H), b_x and b_h.
    """
    gh = GATES[mode] * state_size
    dirs = 2 if bidirectional else 1
    entries = []
    pos = 0
    for layer in range(num_layers):
        c = input_size if layer == 0 else dirs * state_size
        for _ in range(dirs):
            entries.append({"c": c, "wx": pos, "wh": pos + gh * c})
            pos += gh * (c + state_size)
    for entry in entries:
        entry["bx"] = pos
        entry["bh"] = pos + gh
        pos += 2 * gh
    return entries, pos


def param_size(mode, num_layers, bidirectional, input_size, state_size):
    """Length of the packed parameter vector."""
    return param_layout(mode, num_layers, bidirectional, input_size, state_size)[1]


def packed_input_size(mode, num_layers, bidirectional, state_size, size):
    """The input width that makes the packed vector ``size`` long (param_size solved for it)."""
    dirs = 2 if bidirectional else 1
    per_input = dirs * GATES[mode] * state_size
    deeper = (num_layers - 1) * (dirs * state_size + state_size + 2)
    return size // per_input - deeper - state_size - 2


def packed_pieces(mode, num_layers, bidirectional, input_size, state_size):
    """Every per-gate piece of the packed vector as ``(name, offset, shape)``, in storage order.

    ``name`` is ``<direction><layer>_<i2h|h2h><gate>_<weight|bias>`` (direction ``l``, or ``r``
    for the reverse one; gate from GATE_NAMES): the names FusedRNNCell.unpack_weights gives.
    Weights are (state_size, input width) row blocks, biases (state_size,).
    """
    entries, _ = param_layout(mode, num_layers, bidirectional, input_size, state_size)
    dirs = 2 if bidirectional else 1
    hidden, gates = state_size, GATE_NAMES[mode]
    weights, biases = [], []
    for index, entry in enumerate(entries):
        layer, direction = divmod(index, dirs)
        stem = "%s%d_" % ("lr"[direction], layer)
        for group, start, columns in (("i2h", entry["wx"], entry["c"]), ("h2h", entry["wh"], hidden)):
            for g, gate in enumerate(gates):
                weights.append((stem + group + gate + "_weight", start + g * hidden * columns,
                                (hidden, columns)))
        for group, start in (("i2h", entry["bx"]), ("h2h", entry["bh"])):
            for g, gate in enumerate(gates):
                biases.append((stem + group + gate + "_bias", start + g * hidden, (hidden,)))
    return sorted(weights + biases, key=lambda piece: piece[1])


@register
class RNN(Operator):
    name = "RNN"
    stateful = True         # dropout between layers draws from the random stream (as MXNet's
                            # RNN is a stateful operator, identical RNN nodes stay apart)
    inputs = ("data", "parameters", "state", "state_cell", "sequence_length")
    params = {
        "state_size": Int(doc="size of the state for each layer"),
        "num_layers": Int(doc="number of stacked layers"),
        "bidirectional": Bool(False, doc="whether to use bidirectional recurrent layers"),
        "mode": Enum("gru", "lstm", "rnn_relu", "rnn_tanh", doc="the type of RNN to compute"),
        "p": Float(0.0, doc="drop rate of the dropout on the outputs of each RNN layer, "
                            "except the last layer"),
        "state_outputs": Bool(False, doc="whether to have the states as symbol outputs"),
        "projection_size": OptInt(None, doc="size of the LSTM projection (not supported)"),
        "lstm_state_clip_min": OptFloat(None, doc="minimum clip value of LSTM states "
                                                  "(not supported)"),
        "lstm_state_clip_max": OptFloat(None, doc="maximum clip value of LSTM states "
                                                  "(not supported)"),
        "lstm_state_clip_nan": Bool(False, doc="whether to clip NaN LSTM states to min/max "
                                               "(ignored without a clipping range)"),
        "use_sequence_length": Bool(False, doc="take an extra sequence_length input "
                                               "(not supported)"),
    }

    # --- declaration ------------------------------------------------------------------------
    def check_params(self, p):
        if p.state_size < 1:
            raise self.error("state_size must be positive, got %d", p.state_size)
        if p.num_layers < 1:
            raise self.error("num_layers must be positive, got %d", p.num_layers)
        if not 0.0 <= p.p < 1.0:
            raise self.error("p (dropout between layers) must be in [0, 1), got %s", p.p)
        if p.projection_size is not None:
            raise self.error("projection_size=%d is not supported (LSTM projection is only "
                             "available with cuDNN in MXNet 1.9.1)", p.projection_size)
        if p.lstm_state_clip_min is not None or p.lstm_state_clip_max is not None:
            raise self.error("lstm_state_clip_min/lstm_state_clip_max are not supported "
                             "(MXNet 1.9.1 clips LSTM states only with cuDNN)")
        if p.use_sequence_length:
            raise self.error("use_sequence_length=True is not supported (MXNet 1.9.1 needs "
                             "cuDNN for it)")

    def list_inputs(self, p):
        if p.mode == "lstm":
            return ["data", "parameters", "state", "state_cell"]
        return ["data", "parameters", "state"]

    def num_outputs(self, p):
        if not p.state_outputs:
            return 1
        return 3 if p.mode == "lstm" else 2

    def list_outputs(self, p):
        return ["output", "state_output", "statecell_output"][:self.num_outputs(p)]

    def infer_shape(self, p, in_shapes):
        shapes = list(in_shapes)
        nout = self.num_outputs(p)
        dshape = shapes[0]
        if not known(dshape):
            return shapes, [None] * nout
        if len(dshape) != 3:
            raise self.error("data should be a rank-3 tensor (sequence length, batch size, "
                             "input size), got shape %s", tuple(dshape))
        seq, batch, width = (int(d) for d in dshape)
        hidden = p.state_size
        dirs = 2 if p.bidirectional else 1
        context = " for data %s" % (tuple(dshape),)
        if width:
            assign_shape(self, shapes, 1, "parameters",
                         (param_size(p.mode, p.num_layers, p.bidirectional, width, hidden),),
                         context)
        for i in range(2, len(shapes)):
            assign_shape(self, shapes, i, self.list_inputs(p)[i],
                         (p.num_layers * dirs, batch, hidden), context)
        if not batch and shapes[2][1]:
            # the batch size is known from the initial state
            batch = shapes[2][1]
            assign_shape(self, shapes, 0, "data", (seq, batch, width), " (batch from state)")
            for i in range(3, len(shapes)):
                assign_shape(self, shapes, i, self.list_inputs(p)[i], shapes[2])
        state_shape = (p.num_layers * dirs, batch, hidden)
        return shapes, [(seq, batch, dirs * hidden)] + [state_shape] * (nout - 1)

    # --- computation ------------------------------------------------------------------------
    def _geometry(self, p, x):
        seq, batch, width = (int(d) for d in x.shape)
        dtype = np.dtype(x.dtype)
        if dtype not in (np.float32, np.float64):
            raise self.error("data type %s is not supported (float32 or float64)", dtype.name)
        return seq, batch, width, dtype

    def _buffers(self, p, k, state, seq, batch, width, dtype):
        """Per-step records and scratch, allocated once per data shape and kept in ``state``."""
        key = (seq, batch, width, dtype.name)
        bufs = state.get("rnn_buffers")
        if bufs is not None and bufs["key"] == key:
            return bufs
        hidden = p.state_size
        dirs = 2 if p.bidirectional else 1
        gh = GATES[p.mode] * hidden
        units = p.num_layers * dirs
        bufs = {"key": key,
                "gx": k.empty((seq, batch, gh), dtype),
                "gh": k.empty((batch, gh), dtype),
                # per layer and direction: hidden states of every step, time order
                "h": [k.empty((seq, batch, hidden), dtype) for _ in range(units)],
                # outputs of every layer but the last, and what the next layer reads
                "y": [k.empty((seq, batch, dirs * hidden), dtype)
                      for _ in range(p.num_layers - 1)],
                "masks": [k.empty((seq, batch, dirs * hidden), dtype) if p.p > 0 else None
                          for _ in range(p.num_layers - 1)],
                "dropped": [k.empty((seq, batch, dirs * hidden), dtype) if p.p > 0 else None
                            for _ in range(p.num_layers - 1)]}
        if p.mode == "lstm":
            bufs["c"] = [k.empty((seq, batch, hidden), dtype) for _ in range(units)]
        if p.mode in ("lstm", "gru"):
            bufs["gates"] = [k.empty((seq, batch, 4 * hidden), dtype) for _ in range(units)]
        state["rnn_buffers"] = bufs
        state.pop("rnn_grad_buffers", None)
        return bufs

    @staticmethod
    def _weights(w, entry, gh, hidden):
        c = entry["c"]
        return (w[entry["wx"]:entry["wx"] + gh * c].reshape(gh, c),
                w[entry["wh"]:entry["wh"] + gh * hidden].reshape(gh, hidden),
                w[entry["bx"]:entry["bx"] + gh], w[entry["bh"]:entry["bh"] + gh])

    def forward(self, p, k, inputs, outputs, is_train, state):
        x, w, hx = inputs[0], inputs[1], inputs[2]
        cx = inputs[3] if p.mode == "lstm" else None
        seq, batch, width, dtype = self._geometry(p, x)
        hidden = p.state_size
        dirs = 2 if p.bidirectional else 1
        gh = GATES[p.mode] * hidden
        entries, _ = param_layout(p.mode, p.num_layers, p.bidirectional, width, hidden)
        bufs = self._buffers(p, k, state, seq, batch, width, dtype)
        dropout = p.p > 0 and is_train
        state["rnn_dropout"] = dropout
        layer_in = x
        for layer in range(p.num_layers):
            last = layer == p.num_layers - 1
            y = outputs[0] if last else bufs["y"][layer]
            c_in = entries[layer * dirs]["c"]
            for d in range(dirs):
                idx = layer * dirs + d
                wx, wh, bx, bh = self._weights(w, entries[idx], gh, hidden)
                k.rnn_gemm(layer_in.reshape(seq * batch, c_in), wx,
                           bufs["gx"].reshape(seq * batch, gh), trans_b=True)
                h_prev = hx[idx]
                c_prev = None if cx is None else cx[idx]
                for t in (range(seq) if d == 0 else range(seq - 1, -1, -1)):
                    h_t = bufs["h"][idx][t]
                    k.rnn_gemm(h_prev, wh, bufs["gh"], trans_b=True)
                    if p.mode == "lstm":
                        c_t = bufs["c"][idx][t]
                        k.rnn_lstm_step(bufs["gx"][t], bufs["gh"], bx, bh, c_prev,
                                        bufs["gates"][idx][t], c_t, h_t, y[t], d * hidden)
                        c_prev = c_t
                    elif p.mode == "gru":
                        k.rnn_gru_step(bufs["gx"][t], bufs["gh"], bx, bh, h_prev,
                                       bufs["gates"][idx][t], h_t, y[t], d * hidden)
                    else:
                        k.rnn_vanilla_step(bufs["gx"][t], bufs["gh"], bx, bh, h_t, y[t],
                                           d * hidden, p.mode == "rnn_relu")
                    h_prev = h_t
                if p.state_outputs:
                    k.copy(outputs[1][idx], h_prev)
                    if p.mode == "lstm":
                        k.copy(outputs[2][idx], c_prev)
            if not last:
                if dropout:
                    from .. import rng as _random
                    u = bufs.get("uniforms")
                    if u is None:
                        u = bufs["uniforms"] = np.empty(tuple(y.shape), np.float32)
                    _random.get_rng().random(out=u, dtype=np.float32)
                    k.dropout_forward(y, u, p.p, bufs["masks"][layer], bufs["dropped"][layer])
                    layer_in = bufs["dropped"][layer]
                else:
                    layer_in = y

    def _grad_buffers(self, p, k, state, seq, batch, width, dtype, param_len):
        grads = state.get("rnn_grad_buffers")
        if grads is not None:
            return grads
        hidden = p.state_size
        dirs = 2 if p.bidirectional else 1
        gh = GATES[p.mode] * hidden
        units = p.num_layers * dirs
        grads = {"dparams": k.empty((param_len,), dtype),
                 "dgx": k.empty((seq, batch, gh), dtype),
                 "dh": k.empty((batch, hidden), dtype),
                 "dc": k.empty((batch, hidden), dtype),
                 "dhx": k.empty((units, batch, hidden), dtype),
                 "dcx": k.empty((units, batch, hidden), dtype),
                 # gradient w.r.t. each layer's input (layer 0: the data)
                 "dx": [k.empty((seq, batch, width if layer == 0 else dirs * hidden), dtype)
                        for layer in range(p.num_layers)],
                 # gradient w.r.t. each non-last layer's output when dropout sits between
                 "dy": [k.empty((seq, batch, dirs * hidden), dtype) if p.p > 0 else None
                        for _ in range(p.num_layers - 1)],
                 "zero_dy": None}
        grads["dgh"] = k.empty((seq, batch, gh), dtype) if p.mode == "gru" else grads["dgx"]
        state["rnn_grad_buffers"] = grads
        return grads

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        x, w, hx = inputs[0], inputs[1], inputs[2]
        seq, batch, width, dtype = self._geometry(p, x)
        hidden = p.state_size
        dirs = 2 if p.bidirectional else 1
        gh = GATES[p.mode] * hidden
        lstm = p.mode == "lstm"
        entries, param_len = param_layout(p.mode, p.num_layers, p.bidirectional, width, hidden)
        bufs = state.get("rnn_buffers")
        if bufs is None or bufs["key"] != (seq, batch, width, dtype.name):
            raise self.error("backward called without a forward pass on data of shape %s",
                             tuple(x.shape))
        grads = self._grad_buffers(p, k, state, seq, batch, width, dtype, param_len)
        dropout = state.get("rnn_dropout", False)
        dy = out_grads[0]
        if dy is None:
            if grads["zero_dy"] is None:
                grads["zero_dy"] = k.zeros((seq, batch, dirs * hidden), dtype)
            dy = grads["zero_dy"]
        dhy = out_grads[1] if p.state_outputs and len(out_grads) > 1 else None
        dcy = out_grads[2] if p.state_outputs and lstm and len(out_grads) > 2 else None
        dparams = grads["dparams"]
        dgx, dgh, dh, dc = grads["dgx"], grads["dgh"], grads["dh"], grads["dc"]
        rows = seq * batch
        for layer in range(p.num_layers - 1, -1, -1):
            layer_in = x if layer == 0 else (bufs["dropped"][layer - 1] if dropout
                                             else bufs["y"][layer - 1])
            c_in = entries[layer * dirs]["c"]
            dx = grads["dx"][layer]
            need_dx = layer > 0 or req[0] != "null"
            for d in range(dirs):
                idx = layer * dirs + d
                wx, wh, _, _ = self._weights(w, entries[idx], gh, hidden)
                dwx, dwh, dbx, dbh = self._weights(dparams, entries[idx], gh, hidden)
                hs = bufs["h"][idx]
                if dhy is not None:
                    k.copy(dh, dhy[idx])
                else:
                    k.fill(dh, 0)
                if lstm:
                    if dcy is not None:
                        k.copy(dc, dcy[idx])
                    else:
                        k.fill(dc, 0)
                forward_steps = range(seq) if d == 0 else range(seq - 1, -1, -1)
                first = forward_steps[0]
                for t in reversed(forward_steps):
                    prev = t - 1 if d == 0 else t + 1
                    h_prev = hx[idx] if t == first else hs[prev]
                    if lstm:
                        c_prev = inputs[3][idx] if t == first else bufs["c"][idx][prev]
                        k.rnn_lstm_step_backward(dy[t], d * hidden, dh, dc,
                                                 bufs["gates"][idx][t], bufs["c"][idx][t],
                                                 c_prev, dgx[t])
                        k.rnn_gemm(dgx[t], wh, dh)
                    elif p.mode == "gru":
                        k.rnn_gru_step_backward(dy[t], d * hidden, dh, bufs["gates"][idx][t],
                                                h_prev, dgx[t], dgh[t])
                        k.rnn_gemm(dgh[t], wh, dh, accumulate=True, scratch=state)
                    else:
                        k.rnn_vanilla_step_backward(dy[t], d * hidden, dh, hs[t], dgx[t],
                                                    p.mode == "rnn_relu")
                        k.rnn_gemm(dgx[t], wh, dh)
                k.copy(grads["dhx"][idx], dh)
                if lstm:
                    k.copy(grads["dcx"][idx], dc)
                # parameter gradients: one product over all steps each
                k.rnn_gemm(dgx.reshape(rows, gh), layer_in.reshape(rows, c_in), dwx,
                           trans_a=True)
                # W_h meets h_prev: h of the previous step, hx at the first step
                if seq > 1:
                    later = slice(1, seq) if d == 0 else slice(0, seq - 1)
                    earlier = slice(0, seq - 1) if d == 0 else slice(1, seq)
                    k.rnn_gemm(dgh[later].reshape(rows - batch, gh),
                               hs[earlier].reshape(rows - batch, hidden), dwh, trans_a=True)
                k.rnn_gemm(dgh[first], hx[idx], dwh, trans_a=True, accumulate=seq > 1,
                           scratch=state)
                k.rnn_column_sum(dgx.reshape(rows, gh), dbx)
                k.rnn_column_sum(dgh.reshape(rows, gh), dbh)
                if need_dx:
                    k.rnn_gemm(dgx.reshape(rows, gh), wx, dx.reshape(rows, c_in),
                               accumulate=d > 0, scratch=state)
            if layer > 0:
                if dropout:
                    k.dropout_backward(bufs["masks"][layer - 1], dx, grads["dy"][layer - 1])
                    dy = grads["dy"][layer - 1]
                else:
                    dy = dx
        if req[0] != "null":
            k.assign(in_grads[0], grads["dx"][0], req[0])
        if req[1] != "null":
            k.assign(in_grads[1], dparams, req[1])
        if req[2] != "null":
            k.assign(in_grads[2], grads["dhx"], req[2])
        if lstm and req[3] != "null":
            k.assign(in_grads[3], grads["dcx"], req[3])


# ---------------------------------------------------------------------------------------------
# reverse / flip: declared here because BidirectionalCell needs it to merge the backward
# direction's outputs (MXNet declares it among its matrix ops)
# ---------------------------------------------------------------------------------------------
@register
class Reverse(ElementwiseOp):
    name = "reverse"
    aliases = ("flip",)
    params = {"axis": Shape(doc="The axis which to reverse elements.")}

    def _axes(self, p, ndim):
        axes = []
        for ax in p.axis:
            if not -ndim <= ax < ndim:
                raise self.error("axis %s out of range for data with %d dimensions",
                                 p.axis, ndim)
            axes.append(ax % ndim)
        return tuple(axes)

    def infer_shape(self, p, in_shapes):
        shape = in_shapes[0]
        if known(shape):
            self._axes(p, len(shape))
        return list(in_shapes), [shape]

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.reverse_axes(inputs[0], outputs[0], self._axes(p, inputs[0].ndim))

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if out_grads[0] is None:
            zero_grads(k, in_grads, req)
        elif req[0] != "null":
            k.reverse_axes(out_grads[0], in_grads[0], self._axes(p, inputs[0].ndim),
                           accumulate=req[0] == "add")
