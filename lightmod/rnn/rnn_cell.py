"""Symbolic RNN cells (``mx.rnn``), as in MXNet 1.9.1.

A cell builds the graph of one time step (``cell(inputs, states)``) or of a whole sequence
(``cell.unroll(length, inputs)``). Node and parameter names are MXNet's, so graphs, checkpoints
and ``unpack_weights``/``pack_weights`` dictionaries interchange with MXNet:

* parameters ``<prefix>i2h_weight``, ``<prefix>i2h_bias``, ``<prefix>h2h_weight``,
  ``<prefix>h2h_bias`` (``<prefix>parameters`` for ``FusedRNNCell``);
* step nodes ``<prefix>t<i>_i2h``, ``..._h2h``, ``..._slice``, ``..._i/_f/_c/_o``,
  ``..._state``, ``..._out`` (GRU: ``<prefix>t<i>__i2h``, ``..._r_act``...);
* begin states ``<prefix>begin_state_<n>`` with shape ``(0, H)`` and ``__layout__='NC'``,
  whose batch dimension shape inference fills in.

The order in which every cell composes its symbols follows MXNet's, so the auto-named nodes
(``_plus0``, ``_mul1``, ``activation0``, ``split0``) come out with the same numbers.
"""
import warnings

from .. import initializer as init, ndarray, symbol
from ..base import string_types, numeric_types

__all__ = ["RNNParams", "BaseRNNCell", "RNNCell", "LSTMCell", "GRUCell", "FusedRNNCell",
           "SequentialRNNCell", "DropoutCell", "ModifierCell", "ZoneoutCell", "ResidualCell",
           "BidirectionalCell", "BaseConvRNNCell", "ConvRNNCell", "ConvLSTMCell",
           "ConvGRUCell"]


def _require(condition, message):
    """MXNet checks these with ``assert``; keep the AssertionError type (and survive -O)."""
    if not condition:
        raise AssertionError(message)


_MODIFIED = ("After applying modifier cells (e.g. DropoutCell) the base cell cannot be "
             "called directly. Call the modifier cell instead.")


def _cells_state_info(cells):
    return [info for cell in cells for info in cell.state_info]


def _cells_begin_state(cells, **kwargs):
    return [state for cell in cells for state in cell.begin_state(**kwargs)]


def _cells_unpack_weights(cells, args):
    for cell in cells:
        args = cell.unpack_weights(args)
    return args


def _cells_pack_weights(cells, args):
    for cell in cells:
        args = cell.pack_weights(args)
    return args


def _normalize_sequence(length, inputs, layout, merge, in_layout=None):
    """Bring ``inputs`` to the requested form.

    ``merge=False``: a list of per-step symbols (a single symbol is split along its T axis,
    squeezing it); ``merge=True``: one symbol with the steps stacked along T (a list is joined
    with ``expand_dims`` + ``Concat``); ``merge=None``: leave it as it is. A symbol whose T axis
    (from ``in_layout``) differs from ``layout``'s is swapped into place. Returns
    ``(inputs, t_axis)``.
    """
    _require(inputs is not None, "unroll(inputs=None) has been deprecated. Please create "
                                 "input variables outside unroll.")
    axis = layout.find("T")
    in_axis = in_layout.find("T") if in_layout is not None else axis
    if isinstance(inputs, symbol.Symbol):
        if merge is False:
            _require(len(inputs.list_outputs()) == 1,
                     "unroll doesn't allow grouped symbol as input. Please convert to list "
                     "with list(inputs) first or let unroll handle splitting.")
            inputs = list(symbol.split(inputs, axis=in_axis, num_outputs=length,
                                       squeeze_axis=1))
    else:
        _require(length is None or len(inputs) == length,
                 "unroll: got %d inputs for length %s" % (len(inputs), length))
        if merge is True:
            expanded = [symbol.expand_dims(step, axis=axis) for step in inputs]
            inputs = symbol.Concat(*expanded, dim=axis)
            in_axis = axis
    if isinstance(inputs, symbol.Symbol) and axis != in_axis:
        inputs = symbol.swapaxes(inputs, dim0=axis, dim1=in_axis)
    return inputs, axis


class RNNParams:
    """Holds the weight variables of cells, so that several cells can share them.

    ``get(name, **kwargs)`` returns the variable ``<prefix><name>``, creating it (with
    ``symbol.Variable(**kwargs)``) the first time.
    """

    def __init__(self, prefix=""):
        self._prefix = prefix
        self._params = {}

    def get(self, name, **kwargs):
        name = self._prefix + name
        if name not in self._params:
            self._params[name] = symbol.Variable(name, **kwargs)
        return self._params[name]


class BaseRNNCell:
    """Base class of the RNN cells.

    ``prefix`` names the cell's nodes (and its weights when ``params`` is None); ``params`` is
    an ``RNNParams`` to share weights with other cells.
    """

    def __init__(self, prefix="", params=None):
        if params is None:
            params = RNNParams(prefix)
            self._own_params = True
        else:
            self._own_params = False
        self._prefix = prefix
        self._params = params
        self._modified = False
        self.reset()

    def reset(self):
        """Restart step and begin-state numbering before building another graph."""
        self._init_counter = -1
        self._counter = -1
        for cell in getattr(self, "_cells", ()):
            cell.reset()

    def __call__(self, inputs, states):
        """One time step: returns (output, new states). Each cell type defines it."""
        raise NotImplementedError("%s cannot be stepped" % type(self).__name__)

    @property
    def params(self):
        """The cell's RNNParams (reading it marks the parameters as shared)."""
        self._own_params = False
        return self._params

    @property
    def state_info(self):
        """One dict per state: its ``shape`` (0 = filled by inference) and ``__layout__``."""
        raise NotImplementedError("%s does not describe its states" % type(self).__name__)

    @property
    def state_shape(self):
        return [info["shape"] for info in self.state_info]

    @property
    def _gate_names(self):
        return ()

    def begin_state(self, func=symbol.zeros, **kwargs):
        """Symbols for the initial states, ``func(name='<prefix>begin_state_<n>', **info)``.

        ``func`` is ``symbol.zeros`` by default; ``symbol.Variable`` makes the states inputs.
        """
        _require(not self._modified, _MODIFIED)
        states = []
        for info in self.state_info:
            self._init_counter += 1
            if info is not None:
                kwargs.update(info)
            states.append(func(name="%sbegin_state_%d" % (self._prefix, self._init_counter),
                               **kwargs))
        return states

    def unpack_weights(self, args):
        """Split the gate-stacked i2h/h2h weights and biases into one entry per gate.

        ``args`` maps names to NDArrays (``Module.get_params()[0]``); a new dict is returned in
        which ``<prefix>i2h_weight`` became ``<prefix>i2h_i_weight``, ``..._f_weight``...
        """
        args = args.copy()
        if not self._gate_names:
            return args
        hidden = self._num_hidden
        for group in ("i2h", "h2h"):
            weight = args.pop("%s%s_weight" % (self._prefix, group))
            bias = args.pop("%s%s_bias" % (self._prefix, group))
            for j, gate in enumerate(self._gate_names):
                rows = slice(j * hidden, (j + 1) * hidden)
                args["%s%s%s_weight" % (self._prefix, group, gate)] = weight[rows].copy()
                args["%s%s%s_bias" % (self._prefix, group, gate)] = bias[rows].copy()
        return args

    def pack_weights(self, args):
        """The inverse of ``unpack_weights``."""
        args = args.copy()
        if not self._gate_names:
            return args
        for group in ("i2h", "h2h"):
            weights = [args.pop("%s%s%s_weight" % (self._prefix, group, gate))
                       for gate in self._gate_names]
            biases = [args.pop("%s%s%s_bias" % (self._prefix, group, gate))
                      for gate in self._gate_names]
            args["%s%s_weight" % (self._prefix, group)] = ndarray.concatenate(weights)
            args["%s%s_bias" % (self._prefix, group)] = ndarray.concatenate(biases)
        return args

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None):
        """Build ``length`` steps.

        ``inputs``: one symbol laid out as ``layout`` ('NTC' or 'TNC'), or a list of per-step
        symbols (N, ...). ``merge_outputs``: True gives one symbol (steps stacked along T),
        False a list, None whichever is at hand. Returns (outputs, final states).
        """
        self.reset()
        inputs, _ = _normalize_sequence(length, inputs, layout, False)
        if begin_state is None:
            begin_state = self.begin_state()
        states = begin_state
        outputs = []
        for i in range(length):
            output, states = self(inputs[i], states)
            outputs.append(output)
        outputs, _ = _normalize_sequence(length, outputs, layout, merge_outputs)
        return outputs, states

    def _get_activation(self, inputs, activation, **kwargs):
        """``Activation(act_type=activation)`` for a string, else ``activation(inputs)``."""
        if isinstance(activation, string_types):
            return symbol.Activation(inputs, act_type=activation, **kwargs)
        return activation(inputs, **kwargs)


class RNNCell(BaseRNNCell):
    """Elman RNN cell: ``h' = activation(W_i x + b_i + W_h h + b_h)``.

    ``activation``: 'tanh' (default), 'relu' or a callable on a symbol.
    """

    def __init__(self, num_hidden, activation="tanh", prefix="rnn_", params=None):
        super().__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        self._activation = activation
        self._iW = self.params.get("i2h_weight")
        self._iB = self.params.get("i2h_bias")
        self._hW = self.params.get("h2h_weight")
        self._hB = self.params.get("h2h_bias")

    @property
    def state_info(self):
        return [{"shape": (0, self._num_hidden), "__layout__": "NC"}]

    @property
    def _gate_names(self):
        return ("",)

    def __call__(self, inputs, states):
        self._counter += 1
        name = "%st%d_" % (self._prefix, self._counter)
        i2h = symbol.FullyConnected(data=inputs, weight=self._iW, bias=self._iB,
                                    num_hidden=self._num_hidden, name="%si2h" % name)
        h2h = symbol.FullyConnected(data=states[0], weight=self._hW, bias=self._hB,
                                    num_hidden=self._num_hidden, name="%sh2h" % name)
        output = self._get_activation(i2h + h2h, self._activation, name="%sout" % name)
        return output, [output]


class LSTMCell(BaseRNNCell):
    """LSTM cell (gates i, f, c, o stacked in the i2h/h2h weights, in that order).

    ``forget_bias`` initialises the forget-gate part of ``i2h_bias`` (through the
    ``LSTMBias`` initializer attached to the variable).
    """

    def __init__(self, num_hidden, prefix="lstm_", params=None, forget_bias=1.0):
        super().__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        self._iW = self.params.get("i2h_weight")
        self._hW = self.params.get("h2h_weight")
        # the forget gate starts open: LSTMBias sets its quarter of i2h_bias
        self._iB = self.params.get("i2h_bias", init=init.LSTMBias(forget_bias=forget_bias))
        self._hB = self.params.get("h2h_bias")

    @property
    def state_info(self):
        return [{"shape": (0, self._num_hidden), "__layout__": "NC"},
                {"shape": (0, self._num_hidden), "__layout__": "NC"}]

    @property
    def _gate_names(self):
        return ["_i", "_f", "_c", "_o"]

    def __call__(self, inputs, states):
        self._counter += 1
        name = "%st%d_" % (self._prefix, self._counter)
        i2h = symbol.FullyConnected(data=inputs, weight=self._iW, bias=self._iB,
                                    num_hidden=self._num_hidden * 4, name="%si2h" % name)
        h2h = symbol.FullyConnected(data=states[0], weight=self._hW, bias=self._hB,
                                    num_hidden=self._num_hidden * 4, name="%sh2h" % name)
        gates = symbol.SliceChannel(i2h + h2h, num_outputs=4, name="%sslice" % name)
        in_gate = symbol.Activation(gates[0], act_type="sigmoid", name="%si" % name)
        forget_gate = symbol.Activation(gates[1], act_type="sigmoid", name="%sf" % name)
        in_transform = symbol.Activation(gates[2], act_type="tanh", name="%sc" % name)
        out_gate = symbol.Activation(gates[3], act_type="sigmoid", name="%so" % name)
        next_c = symbol._internal._plus(forget_gate * states[1], in_gate * in_transform,
                                        name="%sstate" % name)
        next_h = symbol._internal._mul(out_gate, symbol.Activation(next_c, act_type="tanh"),
                                       name="%sout" % name)
        return next_h, [next_h, next_c]


class GRUCell(BaseRNNCell):
    """GRU cell in cuDNN's form (gates r, z, o; the reset gate scales ``W_h h + b_h``)."""

    def __init__(self, num_hidden, prefix="gru_", params=None):
        super().__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        self._iW = self.params.get("i2h_weight")
        self._iB = self.params.get("i2h_bias")
        self._hW = self.params.get("h2h_weight")
        self._hB = self.params.get("h2h_bias")

    @property
    def state_info(self):
        return [{"shape": (0, self._num_hidden), "__layout__": "NC"}]

    @property
    def _gate_names(self):
        return ["_r", "_z", "_o"]

    def __call__(self, inputs, states):
        self._counter += 1
        # MXNet names these nodes '<prefix>t<i>__i2h' (note the double underscore)
        name = "%st%d_" % (self._prefix, self._counter)
        prev_h = states[0]
        i2h = symbol.FullyConnected(data=inputs, weight=self._iW, bias=self._iB,
                                    num_hidden=self._num_hidden * 3, name="%s_i2h" % name)
        h2h = symbol.FullyConnected(data=prev_h, weight=self._hW, bias=self._hB,
                                    num_hidden=self._num_hidden * 3, name="%s_h2h" % name)
        i2h_r, i2h_z, i2h = symbol.SliceChannel(i2h, num_outputs=3, name="%s_i2h_slice" % name)
        h2h_r, h2h_z, h2h = symbol.SliceChannel(h2h, num_outputs=3, name="%s_h2h_slice" % name)
        reset_gate = symbol.Activation(i2h_r + h2h_r, act_type="sigmoid",
                                       name="%s_r_act" % name)
        update_gate = symbol.Activation(i2h_z + h2h_z, act_type="sigmoid",
                                        name="%s_z_act" % name)
        candidate = symbol.Activation(i2h + reset_gate * h2h, act_type="tanh",
                                      name="%s_h_act" % name)
        next_h = symbol._internal._plus((1. - update_gate) * candidate, update_gate * prev_h,
                                        name="%sout" % name)
        return next_h, [next_h]


class FusedRNNCell(BaseRNNCell):
    """Several RNN layers over the whole sequence in one fused ``RNN`` operator.

    ``mode``: 'lstm', 'gru', 'rnn_tanh' or 'rnn_relu'; ``dropout`` between layers (training
    only); ``get_next_state`` makes ``unroll`` return the final states; weights live in one
    packed vector ``<prefix>parameters`` (MXNet's layout, initialised by ``init.FusedRNN``).
    The prefix defaults to ``'<mode>_'``.
    """

    def __init__(self, num_hidden, num_layers=1, mode="lstm", bidirectional=False,
                 dropout=0., get_next_state=False, forget_bias=1.0, prefix=None, params=None):
        if prefix is None:
            prefix = "%s_" % mode
        super().__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        self._num_layers = num_layers
        self._mode = mode
        self._bidirectional = bidirectional
        self._dropout = dropout
        self._get_next_state = get_next_state
        self._directions = ["l", "r"] if bidirectional else ["l"]
        initializer = init.FusedRNN(None, num_hidden, num_layers, mode, bidirectional,
                                    forget_bias)
        self._parameter = self.params.get("parameters", init=initializer)

    @property
    def state_info(self):
        copies = self._bidirectional + 1
        count = (self._mode == "lstm") + 1
        return [{"shape": (copies * self._num_layers, 0, self._num_hidden),
                 "__layout__": "LNC"} for _ in range(count)]

    @property
    def _gate_names(self):
        return {"rnn_relu": [""], "rnn_tanh": [""], "lstm": ["_i", "_f", "_c", "_o"],
                "gru": ["_r", "_z", "_o"]}[self._mode]

    @property
    def _num_gates(self):
        return len(self._gate_names)

    def _slice_weights(self, arr, li, lh):
        """Views of the packed vector ``arr`` per layer, direction, group and gate:
        ``<prefix><l|r><layer>_<i2h|h2h><gate>_<weight|bias>``."""
        args = {}
        gates = self._gate_names
        dirs = len(self._directions)
        pos = 0
        for layer in range(self._num_layers):
            width = li if layer == 0 else dirs * lh
            for direction in self._directions:
                for gate in gates:
                    name = "%s%s%d_i2h%s_weight" % (self._prefix, direction, layer, gate)
                    args[name] = arr[pos:pos + lh * width].reshape((lh, width))
                    pos += lh * width
                for gate in gates:
                    name = "%s%s%d_h2h%s_weight" % (self._prefix, direction, layer, gate)
                    args[name] = arr[pos:pos + lh * lh].reshape((lh, lh))
                    pos += lh * lh
        for layer in range(self._num_layers):
            for direction in self._directions:
                for group in ("i2h", "h2h"):
                    for gate in gates:
                        name = "%s%s%d_%s%s_bias" % (self._prefix, direction, layer, group,
                                                     gate)
                        args[name] = arr[pos:pos + lh]
                        pos += lh
        _require(pos == arr.size, "Invalid parameters size for FusedRNNCell: %d values for "
                                  "%d expected" % (arr.size, pos))
        return args

    def unpack_weights(self, args):
        args = args.copy()
        arr = args.pop(self._parameter.name)
        dirs = len(self._directions)
        gates = self._num_gates
        hidden = self._num_hidden
        # solve the packed size for the input width
        num_input = (arr.size // dirs // hidden // gates
                     - (self._num_layers - 1) * (hidden + dirs * hidden + 2) - hidden - 2)
        for name, view in self._slice_weights(arr, num_input, hidden).items():
            args[name] = view.copy()
        return args

    def pack_weights(self, args):
        args = args.copy()
        dirs = self._bidirectional + 1
        gates = self._num_gates
        hidden = self._num_hidden
        first = args["%sl0_i2h%s_weight" % (self._prefix, self._gate_names[0])]
        num_input = first.shape[1]
        total = ((num_input + hidden + 2) * hidden * gates * dirs
                 + (self._num_layers - 1) * gates * hidden * (hidden + dirs * hidden + 2) * dirs)
        arr = ndarray.zeros((total,), ctx=first.context, dtype=first.dtype)
        for name, view in self._slice_weights(arr, num_input, hidden).items():
            view[:] = args.pop(name)
        args[self._parameter.name] = arr
        return args

    def __call__(self, inputs, states):
        raise NotImplementedError("FusedRNNCell cannot be stepped. Please use unroll")

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None):
        self.reset()
        inputs, axis = _normalize_sequence(length, inputs, layout, True)
        if axis == 1:
            warnings.warn("NTC layout detected. Consider using TNC for FusedRNNCell for faster "
                          "speed")
            inputs = symbol.swapaxes(inputs, dim1=0, dim2=1)
        else:
            _require(axis == 0, "Unsupported layout %s" % layout)
        if begin_state is None:
            begin_state = self.begin_state()
        if self._mode == "lstm":
            states = {"state": begin_state[0], "state_cell": begin_state[1]}
        else:
            states = {"state": begin_state[0]}
        rnn = symbol.RNN(data=inputs, parameters=self._parameter, state_size=self._num_hidden,
                         num_layers=self._num_layers, bidirectional=self._bidirectional,
                         p=self._dropout, state_outputs=self._get_next_state, mode=self._mode,
                         name=self._prefix + "rnn", **states)
        if not self._get_next_state:
            outputs, states = rnn, []
        else:
            count = 2 if self._mode == "lstm" else 1
            for i in range(1, count + 1):
                rnn[i]._set_attr(__layout__="LNC")
            outputs, states = rnn[0], [rnn[i] for i in range(1, count + 1)]
        if axis == 1:
            outputs = symbol.swapaxes(outputs, dim1=0, dim2=1)
        outputs, _ = _normalize_sequence(length, outputs, layout, merge_outputs)
        return outputs, states

    def unfuse(self):
        """The same network as a SequentialRNNCell of per-step cells (same parameter names
        after ``unpack_weights``: ``<prefix>l0_i2h_weight``...)."""
        def make(cell_prefix):
            if self._mode == "rnn_relu":
                return RNNCell(self._num_hidden, activation="relu", prefix=cell_prefix)
            if self._mode == "rnn_tanh":
                return RNNCell(self._num_hidden, activation="tanh", prefix=cell_prefix)
            if self._mode == "lstm":
                return LSTMCell(self._num_hidden, prefix=cell_prefix)
            return GRUCell(self._num_hidden, prefix=cell_prefix)

        stack = SequentialRNNCell()
        for i in range(self._num_layers):
            if self._bidirectional:
                stack.add(BidirectionalCell(make("%sl%d_" % (self._prefix, i)),
                                            make("%sr%d_" % (self._prefix, i)),
                                            output_prefix="%sbi_l%d_" % (self._prefix, i)))
            else:
                stack.add(make("%sl%d_" % (self._prefix, i)))
            if self._dropout > 0 and i != self._num_layers - 1:
                stack.add(DropoutCell(self._dropout, prefix="%s_dropout%d_" % (self._prefix, i)))
        return stack


class SequentialRNNCell(BaseRNNCell):
    """A stack of cells: each one's outputs are the next one's inputs."""

    def __init__(self, params=None):
        super().__init__(prefix="", params=params)
        self._override_cell_params = params is not None
        self._cells = []

    def add(self, cell):
        """Append a cell to the stack."""
        self._cells.append(cell)
        if self._override_cell_params:
            _require(cell._own_params, "Either specify params for SequentialRNNCell or child "
                                       "cells, not both.")
            cell.params._params.update(self.params._params)
        self.params._params.update(cell.params._params)

    @property
    def state_info(self):
        return _cells_state_info(self._cells)

    def begin_state(self, **kwargs):
        _require(not self._modified, _MODIFIED)
        return _cells_begin_state(self._cells, **kwargs)

    def unpack_weights(self, args):
        return _cells_unpack_weights(self._cells, args)

    def pack_weights(self, args):
        return _cells_pack_weights(self._cells, args)

    def __call__(self, inputs, states):
        self._counter += 1
        next_states = []
        pos = 0
        for cell in self._cells:
            _require(not isinstance(cell, BidirectionalCell),
                     "a SequentialRNNCell holding a BidirectionalCell cannot be stepped")
            count = len(cell.state_info)
            inputs, state = cell(inputs, states[pos:pos + count])
            pos += count
            next_states.extend(state)
        return inputs, next_states

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None):
        self.reset()
        if begin_state is None:
            begin_state = self.begin_state()
        pos = 0
        next_states = []
        last = len(self._cells) - 1
        for i, cell in enumerate(self._cells):
            count = len(cell.state_info)
            inputs, states = cell.unroll(length, inputs=inputs,
                                         begin_state=begin_state[pos:pos + count], layout=layout,
                                         merge_outputs=merge_outputs if i == last else None)
            pos += count
            next_states.extend(states)
        return inputs, next_states


class DropoutCell(BaseRNNCell):
    """Dropout on the inputs (no state); ``dropout`` is the drop probability."""

    def __init__(self, dropout, prefix="dropout_", params=None):
        super().__init__(prefix, params)
        _require(isinstance(dropout, numeric_types), "dropout probability must be a number")
        self.dropout = dropout

    @property
    def state_info(self):
        return []

    def __call__(self, inputs, states):
        if self.dropout > 0:
            inputs = symbol.Dropout(data=inputs, p=self.dropout)
        return inputs, states

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None):
        self.reset()
        inputs, _ = _normalize_sequence(length, inputs, layout, merge_outputs)
        if isinstance(inputs, symbol.Symbol):
            return self(inputs, [])
        return super().unroll(length, inputs, begin_state=begin_state, layout=layout,
                              merge_outputs=merge_outputs)


class ModifierCell(BaseRNNCell):
    """Base class of cells that wrap another cell (``base_cell``) and change what it does.

    Once wrapped, the base cell must not be used directly any more.
    """

    def __init__(self, base_cell):
        super().__init__()
        base_cell._modified = True
        self.base_cell = base_cell

    @property
    def params(self):
        self._own_params = False
        return self.base_cell.params

    @property
    def state_info(self):
        return self.base_cell.state_info

    def begin_state(self, init_sym=symbol.zeros, **kwargs):
        _require(not self._modified, _MODIFIED)
        self.base_cell._modified = False
        begin = self.base_cell.begin_state(init_sym, **kwargs)
        self.base_cell._modified = True
        return begin

    def unpack_weights(self, args):
        return self.base_cell.unpack_weights(args)

    def pack_weights(self, args):
        return self.base_cell.pack_weights(args)

    def __call__(self, inputs, states):
        raise NotImplementedError("%s does not define a step" % type(self).__name__)


class ZoneoutCell(ModifierCell):
    """Zoneout: in training, each unit of the output / states keeps its previous value with
    probability ``zoneout_outputs`` / ``zoneout_states``."""

    def __init__(self, base_cell, zoneout_outputs=0., zoneout_states=0.):
        _require(not isinstance(base_cell, FusedRNNCell),
                 "FusedRNNCell doesn't support zoneout. Please unfuse first.")
        _require(not isinstance(base_cell, BidirectionalCell),
                 "BidirectionalCell doesn't support zoneout since it doesn't support step. "
                 "Please add ZoneoutCell to the cells underneath instead.")
        _require(not isinstance(base_cell, SequentialRNNCell)
                 or not getattr(base_cell, "_bidirectional", False),
                 "Bidirectional SequentialRNNCell doesn't support zoneout. Please add "
                 "ZoneoutCell to the cells underneath instead.")
        super().__init__(base_cell)
        self.zoneout_outputs = zoneout_outputs
        self.zoneout_states = zoneout_states
        self.prev_output = None

    def reset(self):
        super().reset()
        self.prev_output = None

    def __call__(self, inputs, states):
        cell, p_outputs, p_states = self.base_cell, self.zoneout_outputs, self.zoneout_states
        next_output, next_states = cell(inputs, states)

        def mask(p, like):
            # 1 where the new value is kept (a Dropout of ones: 0 or 1/(1-p) in training)
            return symbol.Dropout(symbol.ones_like(like), p=p)

        prev_output = self.prev_output if self.prev_output is not None \
            else symbol.zeros((0, 0))
        output = (symbol.where(mask(p_outputs, next_output), next_output, prev_output)
                  if p_outputs != 0. else next_output)
        states = ([symbol.where(mask(p_states, new), new, old)
                   for new, old in zip(next_states, states)]
                  if p_states != 0. else next_states)
        self.prev_output = output
        return output, states


class ResidualCell(ModifierCell):
    """Adds the cell's input to its output (Wu et al. 2016)."""

    def __init__(self, base_cell):
        super().__init__(base_cell)

    def __call__(self, inputs, states):
        output, states = self.base_cell(inputs, states)
        output = symbol.elemwise_add(output, inputs, name="%s_plus_residual" % output.name)
        return output, states

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None):
        self.reset()
        self.base_cell._modified = False
        outputs, states = self.base_cell.unroll(length, inputs=inputs, begin_state=begin_state,
                                                layout=layout, merge_outputs=merge_outputs)
        self.base_cell._modified = True
        if merge_outputs is None:
            merge_outputs = isinstance(outputs, symbol.Symbol)
        inputs, _ = _normalize_sequence(length, inputs, layout, merge_outputs)
        if merge_outputs:
            outputs = symbol.elemwise_add(outputs, inputs,
                                          name="%s_plus_residual" % outputs.name)
        else:
            outputs = [symbol.elemwise_add(out, inp, name="%s_plus_residual" % out.name)
                       for out, inp in zip(outputs, inputs)]
        return outputs, states


class BidirectionalCell(BaseRNNCell):
    """Runs ``l_cell`` forward and ``r_cell`` backward over the sequence and concatenates their
    outputs (``<output_prefix>t<i>`` per step, or ``<output_prefix>out`` merged)."""

    def __init__(self, l_cell, r_cell, params=None, output_prefix="bi_"):
        super().__init__("", params=params)
        self._output_prefix = output_prefix
        self._override_cell_params = params is not None
        if self._override_cell_params:
            _require(l_cell._own_params and r_cell._own_params,
                     "Either specify params for BidirectionalCell or child cells, not both.")
            l_cell.params._params.update(self.params._params)
            r_cell.params._params.update(self.params._params)
        self.params._params.update(l_cell.params._params)
        self.params._params.update(r_cell.params._params)
        self._cells = [l_cell, r_cell]

    def unpack_weights(self, args):
        return _cells_unpack_weights(self._cells, args)

    def pack_weights(self, args):
        return _cells_pack_weights(self._cells, args)

    def __call__(self, inputs, states):
        raise NotImplementedError("Bidirectional cannot be stepped. Please use unroll")

    @property
    def state_info(self):
        return _cells_state_info(self._cells)

    def begin_state(self, **kwargs):
        _require(not self._modified, _MODIFIED)
        return _cells_begin_state(self._cells, **kwargs)

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None):
        self.reset()
        inputs, axis = _normalize_sequence(length, inputs, layout, False)
        if begin_state is None:
            begin_state = self.begin_state()
        l_cell, r_cell = self._cells
        n_left = len(l_cell.state_info)
        l_outputs, l_states = l_cell.unroll(length, inputs=inputs,
                                            begin_state=begin_state[:n_left], layout=layout,
                                            merge_outputs=merge_outputs)
        r_outputs, r_states = r_cell.unroll(length, inputs=list(reversed(inputs)),
                                            begin_state=begin_state[n_left:], layout=layout,
                                            merge_outputs=merge_outputs)
        if merge_outputs is None:
            merge_outputs = (isinstance(l_outputs, symbol.Symbol)
                             and isinstance(r_outputs, symbol.Symbol))
            if not merge_outputs:
                if isinstance(l_outputs, symbol.Symbol):
                    l_outputs = list(symbol.SliceChannel(l_outputs, axis=axis,
                                                         num_outputs=length, squeeze_axis=1))
                if isinstance(r_outputs, symbol.Symbol):
                    r_outputs = list(symbol.SliceChannel(r_outputs, axis=axis,
                                                         num_outputs=length, squeeze_axis=1))
        if merge_outputs:
            l_outputs = [l_outputs]
            r_outputs = [symbol.reverse(r_outputs, axis=axis)]
        else:
            r_outputs = list(reversed(r_outputs))
        outputs = [symbol.Concat(l_o, r_o, dim=1 + merge_outputs,
                                 name=("%sout" % self._output_prefix if merge_outputs
                                       else "%st%d" % (self._output_prefix, i)))
                   for i, (l_o, r_o) in enumerate(zip(l_outputs, r_outputs))]
        if merge_outputs:
            outputs = outputs[0]
        return outputs, [l_states, r_states]


class BaseConvRNNCell(BaseRNNCell):
    """Base class of the convolutional RNN cells: i2h and h2h are Convolutions.

    ``input_shape`` is the shape of one step's input (N, C, H, W); the state shape is what the
    i2h convolution produces for it (batch left to inference). ``h2h_kernel`` must be odd (the
    h2h convolution pads to keep the state's spatial size).
    """

    def __init__(self, input_shape, num_hidden, h2h_kernel, h2h_dilate, i2h_kernel, i2h_stride,
                 i2h_pad, i2h_dilate, i2h_weight_initializer, h2h_weight_initializer,
                 i2h_bias_initializer, h2h_bias_initializer, activation, prefix="", params=None,
                 conv_layout="NCHW"):
        super().__init__(prefix=prefix, params=params)
        self._h2h_kernel = h2h_kernel
        _require(h2h_kernel[0] % 2 == 1 and h2h_kernel[1] % 2 == 1,
                 "Only support odd number, get h2h_kernel= %s" % str(h2h_kernel))
        self._h2h_pad = (h2h_dilate[0] * (h2h_kernel[0] - 1) // 2,
                         h2h_dilate[1] * (h2h_kernel[1] - 1) // 2)
        self._h2h_dilate = h2h_dilate
        self._i2h_kernel = i2h_kernel
        self._i2h_stride = i2h_stride
        self._i2h_pad = i2h_pad
        self._i2h_dilate = i2h_dilate
        self._num_hidden = num_hidden
        self._input_shape = input_shape
        self._conv_layout = conv_layout
        self._activation = activation
        probe = symbol.Convolution(data=symbol.Variable("data"), num_filter=num_hidden,
                                   kernel=i2h_kernel, stride=i2h_stride, pad=i2h_pad,
                                   dilate=i2h_dilate, layout=conv_layout)
        state_shape = probe.infer_shape(data=input_shape)[1][0]
        self._state_shape = (0,) + tuple(state_shape[1:])
        self._iW = self.params.get("i2h_weight", init=i2h_weight_initializer)
        self._hW = self.params.get("h2h_weight", init=h2h_weight_initializer)
        self._iB = self.params.get("i2h_bias", init=i2h_bias_initializer)
        self._hB = self.params.get("h2h_bias", init=h2h_bias_initializer)

    @property
    def _num_gates(self):
        return len(self._gate_names)

    @property
    def state_info(self):
        return [{"shape": self._state_shape, "__layout__": self._conv_layout},
                {"shape": self._state_shape, "__layout__": self._conv_layout}]

    def _conv_forward(self, inputs, states, name):
        i2h = symbol.Convolution(name="%si2h" % name, data=inputs,
                                 num_filter=self._num_hidden * self._num_gates,
                                 kernel=self._i2h_kernel, stride=self._i2h_stride,
                                 pad=self._i2h_pad, dilate=self._i2h_dilate, weight=self._iW,
                                 bias=self._iB, layout=self._conv_layout)
        h2h = symbol.Convolution(name="%sh2h" % name, data=states[0],
                                 num_filter=self._num_hidden * self._num_gates,
                                 kernel=self._h2h_kernel, dilate=self._h2h_dilate,
                                 pad=self._h2h_pad, stride=(1, 1), weight=self._hW,
                                 bias=self._hB, layout=self._conv_layout)
        return i2h, h2h

    def __call__(self, inputs, states):
        raise NotImplementedError("BaseConvRNNCell is abstract class for convolutional RNN")


def _LEAKY(inputs, **kwargs):
    """The conv cells' default activation: LeakyReLU(act_type='leaky', slope=0.2).

    (A function rather than MXNet's functools.partial, so that importing lightmod does not
    create the operator functions.)"""
    return symbol.LeakyReLU(inputs, act_type="leaky", slope=0.2, **kwargs)


class ConvRNNCell(BaseConvRNNCell):
    """Convolutional Elman cell (activation: leaky ReLU with slope 0.2 by default)."""

    def __init__(self, input_shape, num_hidden, h2h_kernel=(3, 3), h2h_dilate=(1, 1),
                 i2h_kernel=(3, 3), i2h_stride=(1, 1), i2h_pad=(1, 1), i2h_dilate=(1, 1),
                 i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros",
                 activation=_LEAKY, prefix="ConvRNN_", params=None, conv_layout="NCHW"):
        super().__init__(input_shape=input_shape, num_hidden=num_hidden,
                         h2h_kernel=h2h_kernel, h2h_dilate=h2h_dilate, i2h_kernel=i2h_kernel,
                         i2h_stride=i2h_stride, i2h_pad=i2h_pad, i2h_dilate=i2h_dilate,
                         i2h_weight_initializer=i2h_weight_initializer,
                         h2h_weight_initializer=h2h_weight_initializer,
                         i2h_bias_initializer=i2h_bias_initializer,
                         h2h_bias_initializer=h2h_bias_initializer, activation=activation,
                         prefix=prefix, params=params, conv_layout=conv_layout)

    @property
    def _gate_names(self):
        return ("",)

    @property
    def state_info(self):
        return [{"shape": self._state_shape, "__layout__": self._conv_layout}]

    def __call__(self, inputs, states):
        self._counter += 1
        name = "%st%d_" % (self._prefix, self._counter)
        i2h, h2h = self._conv_forward(inputs, states, name)
        output = self._get_activation(i2h + h2h, self._activation, name="%sout" % name)
        return output, [output]


class ConvLSTMCell(BaseConvRNNCell):
    """Convolutional LSTM cell (Shi et al. 2015); gates i, f, c, o along the channel axis."""

    def __init__(self, input_shape, num_hidden, h2h_kernel=(3, 3), h2h_dilate=(1, 1),
                 i2h_kernel=(3, 3), i2h_stride=(1, 1), i2h_pad=(1, 1), i2h_dilate=(1, 1),
                 i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros",
                 activation=_LEAKY, prefix="ConvLSTM_", params=None, conv_layout="NCHW"):
        super().__init__(input_shape=input_shape, num_hidden=num_hidden,
                         h2h_kernel=h2h_kernel, h2h_dilate=h2h_dilate, i2h_kernel=i2h_kernel,
                         i2h_stride=i2h_stride, i2h_pad=i2h_pad, i2h_dilate=i2h_dilate,
                         i2h_weight_initializer=i2h_weight_initializer,
                         h2h_weight_initializer=h2h_weight_initializer,
                         i2h_bias_initializer=i2h_bias_initializer,
                         h2h_bias_initializer=h2h_bias_initializer, activation=activation,
                         prefix=prefix, params=params, conv_layout=conv_layout)

    @property
    def _gate_names(self):
        return ["_i", "_f", "_c", "_o"]

    def __call__(self, inputs, states):
        self._counter += 1
        name = "%st%d_" % (self._prefix, self._counter)
        i2h, h2h = self._conv_forward(inputs, states, name)
        gates = symbol.SliceChannel(i2h + h2h, num_outputs=4,
                                    axis=self._conv_layout.find("C"), name="%sslice" % name)
        in_gate = symbol.Activation(gates[0], act_type="sigmoid", name="%si" % name)
        forget_gate = symbol.Activation(gates[1], act_type="sigmoid", name="%sf" % name)
        in_transform = self._get_activation(gates[2], self._activation, name="%sc" % name)
        out_gate = symbol.Activation(gates[3], act_type="sigmoid", name="%so" % name)
        next_c = symbol._internal._plus(forget_gate * states[1], in_gate * in_transform,
                                        name="%sstate" % name)
        next_h = symbol._internal._mul(out_gate, self._get_activation(next_c, self._activation),
                                       name="%sout" % name)
        return next_h, [next_h, next_c]


class ConvGRUCell(BaseConvRNNCell):
    """Convolutional GRU cell; gates r, z, o along the channel axis."""

    def __init__(self, input_shape, num_hidden, h2h_kernel=(3, 3), h2h_dilate=(1, 1),
                 i2h_kernel=(3, 3), i2h_stride=(1, 1), i2h_pad=(1, 1), i2h_dilate=(1, 1),
                 i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros",
                 activation=_LEAKY, prefix="ConvGRU_", params=None, conv_layout="NCHW"):
        super().__init__(input_shape=input_shape, num_hidden=num_hidden,
                         h2h_kernel=h2h_kernel, h2h_dilate=h2h_dilate, i2h_kernel=i2h_kernel,
                         i2h_stride=i2h_stride, i2h_pad=i2h_pad, i2h_dilate=i2h_dilate,
                         i2h_weight_initializer=i2h_weight_initializer,
                         h2h_weight_initializer=h2h_weight_initializer,
                         i2h_bias_initializer=i2h_bias_initializer,
                         h2h_bias_initializer=h2h_bias_initializer, activation=activation,
                         prefix=prefix, params=params, conv_layout=conv_layout)

    @property
    def _gate_names(self):
        return ["_r", "_z", "_o"]

    @property
    def state_info(self):
        return [{"shape": self._state_shape, "__layout__": self._conv_layout}]

    def __call__(self, inputs, states):
        self._counter += 1
        name = "%st%d_" % (self._prefix, self._counter)
        i2h, h2h = self._conv_forward(inputs, states, name)
        i2h_r, i2h_z, i2h = symbol.SliceChannel(i2h, num_outputs=3, name="%s_i2h_slice" % name)
        h2h_r, h2h_z, h2h = symbol.SliceChannel(h2h, num_outputs=3, name="%s_h2h_slice" % name)
        reset_gate = symbol.Activation(i2h_r + h2h_r, act_type="sigmoid",
                                       name="%s_r_act" % name)
        update_gate = symbol.Activation(i2h_z + h2h_z, act_type="sigmoid",
                                        name="%s_z_act" % name)
        candidate = self._get_activation(i2h + reset_gate * h2h, self._activation,
                                         name="%s_h_act" % name)
        next_h = symbol._internal._plus((1. - update_gate) * candidate,
                                        update_gate * states[0], name="%sout" % name)
        return next_h, [next_h]
