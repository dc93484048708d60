"""Symbolic recurrent cells (``mx.rnn``) whose graphs are node for node MXNet 1.9.1's.

Calling a cell, ``cell(inputs, states)``, adds one time step to the graph and returns the step's
output and new states; ``cell.unroll(length, inputs)`` adds a whole sequence. Everything is
named the way MXNet names it, so symbol JSON, checkpoints and the dictionaries of
``unpack_weights``/``pack_weights`` can be exchanged with MXNet:

* the weights of a cell are ``<prefix>i2h_weight``, ``<prefix>i2h_bias``, ``<prefix>h2h_weight``
  and ``<prefix>h2h_bias`` (one vector ``<prefix>parameters`` for ``FusedRNNCell``);
* step ``i`` creates nodes ``<prefix>t<i>_i2h``, ``..._h2h``, ``..._slice``, ``..._i``...,
  ``..._state`` and ``..._out`` (the GRU's nodes are ``<prefix>t<i>__i2h``, ``..._r_act``...);
* initial states are ``<prefix>begin_state_<n>``, of shape ``(0, H)`` with
  ``__layout__='NC'``; shape inference supplies the batch size.

Nodes that get automatic names (``_plus0``, ``_mul1``, ``activation0``, ``split0``) are numbered
in creation order, so each cell creates its symbols in the order MXNet's does.

The three recurrences (Elman, LSTM, GRU) are written once each, in ``_ElmanRule``, ``_LSTMRule``
and ``_GRURule``; a dense cell (``RNNCell``...) and a convolutional cell (``ConvRNNCell``...)
differ only in how they project the input and the hidden state (FullyConnected or Convolution).
"""
import warnings
from contextlib import contextmanager

import numpy as np

from .. import initializer as init
from .. import ndarray, symbol
from ..base import numeric_types, string_types
from ..operator.rnn_op import GATE_NAMES, packed_input_size, packed_pieces, param_size

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


@contextmanager
def _unlocked(cell):
    """Let a modifier use the cell it wraps for the length of a ``with`` block."""
    cell._modified = False
    yield cell
    cell._modified = True


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
    """The weight variables of one or more cells, looked up by name so that cells can share them.

    ``get(name, **kwargs)`` gives the variable ``<prefix><name>``; the first request creates it
    with ``symbol.Variable(<prefix><name>, **kwargs)``, later ones return that same variable.
    """

    def __init__(self, prefix=""):
        self._prefix = prefix
        self._params = {}

    def get(self, name, **kwargs):
        full_name = self._prefix + name
        if full_name not in self._params:
            self._params[full_name] = symbol.Variable(full_name, **kwargs)
        return self._params[full_name]


class BaseRNNCell:
    """Common ground of the cells: naming, begin states, unrolling and weight (un)packing.

    ``prefix`` starts the names of the cell's nodes, and of its weights unless ``params`` (an
    ``RNNParams`` shared with other cells) supplies them. A cell counts the steps and begin
    states it has created; ``reset()`` starts both counts again.
    """

    def __init__(self, prefix="", params=None):
        # the cell owns its parameters only while it made them and nobody has asked for them
        self._own_params = params is None
        self._params = RNNParams(prefix) if params is None else params
        self._prefix = prefix
        self._modified = False
        self.reset()

    def reset(self):
        """Restart step and begin-state numbering before building another graph."""
        self._counter = self._init_counter = -1
        for child in getattr(self, "_cells", ()):
            child.reset()

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
        The keyword arguments of one state carry over to the next (as in MXNet).
        """
        _require(not self._modified, _MODIFIED)

        def make(info):
            self._init_counter += 1
            if info is not None:
                kwargs.update(info)
            return func(name="%sbegin_state_%d" % (self._prefix, self._init_counter), **kwargs)

        return [make(info) for info in self.state_info]

    def _param_name(self, group, gate, kind):
        return "%s%s%s_%s" % (self._prefix, group, gate, kind)

    def unpack_weights(self, args):
        """Split the gate-stacked i2h/h2h weights and biases into one entry per gate.

        ``args`` maps names to NDArrays (``Module.get_params()[0]``); a new dict is returned in
        which ``<prefix>i2h_weight`` became ``<prefix>i2h_i_weight``, ``..._f_weight``...
        """
        args = args.copy()
        gates = self._gate_names
        if gates:
            size = self._num_hidden
            for group in ("i2h", "h2h"):
                stacked = {kind: args.pop(self._param_name(group, "", kind))
                           for kind in ("weight", "bias")}
                for k, gate in enumerate(gates):
                    for kind in ("weight", "bias"):
                        block = stacked[kind][k * size:(k + 1) * size]
                        args[self._param_name(group, gate, kind)] = block.copy()
        return args

    def pack_weights(self, args):
        """The inverse of ``unpack_weights``."""
        args = args.copy()
        for group in ("i2h", "h2h"):
            for kind in ("weight", "bias"):
                if self._gate_names:
                    blocks = [args.pop(self._param_name(group, gate, kind))
                              for gate in self._gate_names]
                    args[self._param_name(group, "", kind)] = ndarray.concatenate(blocks)
        return args

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None):
        """Build ``length`` steps.

        ``inputs``: one symbol laid out as ``layout`` ('NTC' or 'TNC'), or a list of per-step
        symbols (N, ...). ``merge_outputs``: True gives one symbol (steps stacked along T),
        False a list, None whichever is at hand. Returns (outputs, final states).
        """
        self.reset()
        steps, _ = _normalize_sequence(length, inputs, layout, False)
        states = self.begin_state() if begin_state is None else begin_state
        outputs = []
        for t in range(length):
            step_output, states = self(steps[t], states)
            outputs.append(step_output)
        return _normalize_sequence(length, outputs, layout, merge_outputs)[0], states

    def _get_activation(self, inputs, activation, **kwargs):
        """``Activation(act_type=activation)`` for a string, else ``activation(inputs)``."""
        if isinstance(activation, string_types):
            return symbol.Activation(inputs, act_type=activation, **kwargs)
        return activation(inputs, **kwargs)


# ---------------------------------------------------------------------------------------------
# the recurrences, shared by the dense and the convolutional cells
# ---------------------------------------------------------------------------------------------
class _ElmanRule:
    """``h' = act(i2h + h2h)``."""

    _gate_names = ("",)
    _state_count = 1

    def _combine(self, i2h, h2h, states, name):
        output = self._get_activation(i2h + h2h, self._activation, name="%sout" % name)
        return output, [output]


class _LSTMRule:
    """Gates i, f, o (sigmoid) and the candidate c (the cell's activation) are the four slices
    of ``i2h + h2h``; ``c' = f*c + i*candidate`` and ``h' = o * act(c')``."""

    _gate_names = GATE_NAMES["lstm"]
    _state_count = 2
    _gate_axis = None  # the axis the slices are cut along (None: the operator's default)

    def _combine(self, i2h, h2h, states, name):
        along = {} if self._gate_axis is None else {"axis": self._gate_axis}
        parts = symbol.SliceChannel(i2h + h2h, num_outputs=4, name="%sslice" % name, **along)
        sig = {letter: symbol.Activation(parts[k], act_type="sigmoid", name=name + letter)
               for k, letter in ((0, "i"), (1, "f"))}
        candidate = self._get_activation(parts[2], self._activation, name="%sc" % name)
        sig["o"] = symbol.Activation(parts[3], act_type="sigmoid", name="%so" % name)
        cell = symbol._internal._plus(sig["f"] * states[1], sig["i"] * candidate,
                                      name="%sstate" % name)
        hidden = symbol._internal._mul(sig["o"], self._get_activation(cell, self._activation),
                                       name="%sout" % name)
        return hidden, [hidden, cell]


class _GRURule:
    """cuDNN's GRU: reset and update gates from the first two slices of i2h and h2h; the reset
    gate scales the hidden projection inside the candidate; ``h' = (1-z)*candidate + z*h``."""

    _gate_names = GATE_NAMES["gru"]
    _state_count = 1

    def _combine(self, i2h, h2h, states, name):
        from_input = symbol.SliceChannel(i2h, num_outputs=3, name="%s_i2h_slice" % name)
        from_hidden = symbol.SliceChannel(h2h, num_outputs=3, name="%s_h2h_slice" % name)
        reset, update = [symbol.Activation(from_input[k] + from_hidden[k], act_type="sigmoid",
                                           name="%s_%s_act" % (name, letter))
                         for k, letter in ((0, "r"), (1, "z"))]
        candidate = self._get_activation(from_input[2] + reset * from_hidden[2],
                                         self._activation, name="%s_h_act" % name)
        hidden = symbol._internal._plus((1. - update) * candidate, update * states[0],
                                        name="%sout" % name)
        return hidden, [hidden]


class _StepCell(BaseRNNCell):
    """A cell whose step is two projections (input to hidden, state to hidden) of width
    ``num_hidden * len(_gate_names)`` combined by one of the rules above."""

    _state_count = 1

    def _project(self, inputs, states, name):
        raise NotImplementedError("%s is an abstract cell class" % type(self).__name__)

    def _combine(self, i2h, h2h, states, name):
        raise NotImplementedError("%s is an abstract cell class" % type(self).__name__)

    def __call__(self, inputs, states):
        self._counter += 1
        name = "%st%d_" % (self._prefix, self._counter)
        i2h, h2h = self._project(inputs, states, name)
        return self._combine(i2h, h2h, states, name)


class _DenseStep(_StepCell):
    """Projections by FullyConnected layers; the states are (batch, num_hidden) matrices."""

    _activation = "tanh"   # the candidate's activation (RNNCell lets the user choose)
    _node_infix = ""        # MXNet's GRUCell names its projections t<i>__i2h

    def __init__(self, num_hidden, prefix, params, i2h_bias_init=None):
        super().__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        weights = self.params
        self._iW = weights.get("i2h_weight")
        self._iB = (weights.get("i2h_bias") if i2h_bias_init is None
                    else weights.get("i2h_bias", init=i2h_bias_init))
        self._hW = weights.get("h2h_weight")
        self._hB = weights.get("h2h_bias")

    @property
    def state_info(self):
        return [{"shape": (0, self._num_hidden), "__layout__": "NC"}
                for _ in range(self._state_count)]

    def _project(self, inputs, states, name):
        width = self._num_hidden * len(self._gate_names)
        node = name + self._node_infix
        return tuple(symbol.FullyConnected(data=data, weight=weight, bias=bias,
                                           num_hidden=width, name=node + which)
                     for data, weight, bias, which in ((inputs, self._iW, self._iB, "i2h"),
                                                       (states[0], self._hW, self._hB, "h2h")))


class RNNCell(_ElmanRule, _DenseStep):
    """Elman RNN cell: ``h' = activation(W_i x + b_i + W_h h + b_h)``.

    ``activation``: 'tanh' (default), 'relu' or a callable on a symbol.
    """

    def __init__(self, num_hidden, activation="tanh", prefix="rnn_", params=None):
        super().__init__(num_hidden, prefix, params)
        self._activation = activation


class LSTMCell(_LSTMRule, _DenseStep):
    """LSTM cell (gates i, f, c, o stacked in the i2h/h2h weights, in that order).

    ``forget_bias`` initialises the forget-gate part of ``i2h_bias`` (through the
    ``LSTMBias`` initializer attached to the variable), so the forget gate starts open.
    """

    def __init__(self, num_hidden, prefix="lstm_", params=None, forget_bias=1.0):
        super().__init__(num_hidden, prefix, params,
                         i2h_bias_init=init.LSTMBias(forget_bias=forget_bias))


class GRUCell(_GRURule, _DenseStep):
    """GRU cell in cuDNN's form (gates r, z, o; the reset gate scales ``W_h h + b_h``)."""

    _node_infix = "_"

    def __init__(self, num_hidden, prefix="gru_", params=None):
        super().__init__(num_hidden, prefix, params)




class FusedRNNCell(BaseRNNCell):
    """Several RNN layers over the whole sequence in one fused ``RNN`` operator.

    ``mode``: 'lstm', 'gru', 'rnn_tanh' or 'rnn_relu'; ``dropout`` between layers (training
    only); ``get_next_state`` makes ``unroll`` return the final states; weights live in one
    packed vector ``<prefix>parameters`` (MXNet's layout, initialised by ``init.FusedRNN``).
    The prefix defaults to ``'<mode>_'``.
    """

    def __init__(self, num_hidden, num_layers=1, mode="lstm", bidirectional=False,
                 dropout=0., get_next_state=False, forget_bias=1.0, prefix=None, params=None):
        super().__init__(prefix="%s_" % mode if prefix is None else prefix, params=params)
        self._num_hidden, self._num_layers = num_hidden, num_layers
        self._mode, self._bidirectional = mode, bidirectional
        self._dropout, self._get_next_state = dropout, get_next_state
        self._directions = ["l", "r"] if bidirectional else ["l"]
        packed_init = init.FusedRNN(None, num_hidden, num_layers, mode, bidirectional,
                                    forget_bias)
        self._parameter = self.params.get("parameters", init=packed_init)

    @property
    def _num_states(self):
        return 2 if self._mode == "lstm" else 1

    @property
    def state_info(self):
        layers = (self._bidirectional + 1) * self._num_layers
        return [{"shape": (layers, 0, self._num_hidden), "__layout__": "LNC"}
                for _ in range(self._num_states)]

    @property
    def _gate_names(self):
        return list(GATE_NAMES[self._mode])

    def _views(self, packed, num_input):
        """Views into ``packed``, one per gate piece, named as ``unpack_weights`` names them."""
        expected = param_size(self._mode, self._num_layers, self._bidirectional, num_input,
                              self._num_hidden)
        _require(expected == packed.size, "Invalid parameters size for FusedRNNCell: %d values "
                                          "for %d expected" % (packed.size, expected))
        views = {}
        for name, offset, shape in packed_pieces(self._mode, self._num_layers,
                                                 self._bidirectional, num_input, self._num_hidden):
            piece = packed[offset:offset + int(np.prod(shape))]
            views[self._prefix + name] = piece.reshape(shape) if len(shape) == 2 else piece
        return views

    def unpack_weights(self, args):
        args = args.copy()
        packed = args.pop(self._parameter.name)
        num_input = packed_input_size(self._mode, self._num_layers, self._bidirectional,
                                      self._num_hidden, packed.size)
        args.update((name, view.copy()) for name, view in self._views(packed, num_input).items())
        return args

    def pack_weights(self, args):
        args = args.copy()
        first = args["%sl0_i2h%s_weight" % (self._prefix, self._gate_names[0])]
        num_input = first.shape[1]
        size = param_size(self._mode, self._num_layers, self._bidirectional, num_input,
                          self._num_hidden)
        packed = ndarray.zeros((size,), ctx=first.context, dtype=first.dtype)
        for name, view in self._views(packed, num_input).items():
            view[:] = args.pop(name)
        args[self._parameter.name] = packed
        return args

    def __call__(self, inputs, states):
        raise NotImplementedError("FusedRNNCell cannot be stepped. Please use unroll")

    @staticmethod
    def _time_major(length, inputs, layout):
        """The whole sequence as one (T, N, ...) symbol, and whether it was swapped from
        batch-major to get there (the RNN operator wants time first)."""
        sequence, time_axis = _normalize_sequence(length, inputs, layout, True)
        if time_axis != 1:
            _require(time_axis == 0, "Unsupported layout %s" % layout)
            return sequence, False
        warnings.warn("NTC layout detected. Consider using TNC for FusedRNNCell for faster "
                      "speed", stacklevel=2)
        return symbol.swapaxes(sequence, dim1=0, dim2=1), True

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None):
        self.reset()
        inputs, swapped = self._time_major(length, inputs, layout)
        begin = self.begin_state() if begin_state is None else begin_state
        # the RNN operator takes the hidden state, and for an LSTM the cell state as well
        state_keys = ("state", "state_cell")[:self._num_states]
        state_inputs = {key: begin[k] for k, key in enumerate(state_keys)}
        fused = symbol.RNN(data=inputs, parameters=self._parameter, state_size=self._num_hidden,
                           num_layers=self._num_layers, bidirectional=self._bidirectional,
                           p=self._dropout, state_outputs=self._get_next_state, mode=self._mode,
                           name=self._prefix + "rnn", **state_inputs)
        outputs, final_states = fused, []
        if self._get_next_state:
            outputs = fused[0]
            final_states = [fused[k] for k in range(1, self._num_states + 1)]
            for state in final_states:
                state._set_attr(__layout__="LNC")
        if swapped:
            outputs = symbol.swapaxes(outputs, dim1=0, dim2=1)
        return _normalize_sequence(length, outputs, layout, merge_outputs)[0], final_states

    def unfuse(self):
        """The same network as a SequentialRNNCell of per-step cells (same parameter names
        after ``unpack_weights``: ``<prefix>l0_i2h_weight``...)."""
        size = self._num_hidden
        makers = {"rnn_relu": lambda p: RNNCell(size, activation="relu", prefix=p),
                  "rnn_tanh": lambda p: RNNCell(size, activation="tanh", prefix=p),
                  "lstm": lambda p: LSTMCell(size, prefix=p)}
        make = makers.get(self._mode, lambda p: GRUCell(size, prefix=p))
        stack = SequentialRNNCell()
        for layer in range(self._num_layers):
            forward = make("%sl%d_" % (self._prefix, layer))
            if self._bidirectional:
                stack.add(BidirectionalCell(forward, make("%sr%d_" % (self._prefix, layer)),
                                            output_prefix="%sbi_l%d_" % (self._prefix, layer)))
            else:
                stack.add(forward)
            if self._dropout > 0 and layer + 1 < self._num_layers:
                stack.add(DropoutCell(self._dropout,
                                      prefix="%s_dropout%d_" % (self._prefix, layer)))
        return stack


class _CellGroup(BaseRNNCell):
    """A cell made of the cells in ``self._cells``: its states are theirs, one after the other,
    and so are its weights."""

    def _share_params_with(self, children, who):
        """Merge the children's parameters with this cell's, as MXNet does: with ``params``
        given to this cell, each child gets them too (and must not have been given others)."""
        if self._override_cell_params:
            _require(all(child._own_params for child in children),
                     "Either specify params for %s or child cells, not both." % who)
            for child in children:
                child.params._params.update(self.params._params)
        for child in children:
            self.params._params.update(child.params._params)

    @property
    def state_info(self):
        return [info for child in self._cells for info in child.state_info]

    def begin_state(self, **kwargs):
        _require(not self._modified, _MODIFIED)
        return [state for child in self._cells for state in child.begin_state(**kwargs)]

    def unpack_weights(self, args):
        for child in self._cells:
            args = child.unpack_weights(args)
        return args

    def pack_weights(self, args):
        for child in self._cells:
            args = child.pack_weights(args)
        return args

    def _with_states(self, states):
        """Each child with its own part of the flat list ``states``."""
        start = 0
        for child in self._cells:
            stop = start + len(child.state_info)
            yield child, states[start:stop]
            start = stop


class SequentialRNNCell(_CellGroup):
    """A stack of cells: each one's outputs are the next one's inputs."""

    def __init__(self, params=None):
        super().__init__(prefix="", params=params)
        self._override_cell_params = params is not None
        self._cells = []

    def add(self, cell):
        """Append a cell to the stack."""
        self._cells.append(cell)
        self._share_params_with([cell], "SequentialRNNCell")

    def __call__(self, inputs, states):
        self._counter += 1
        new_states = []
        for child, own in self._with_states(states):
            _require(not isinstance(child, BidirectionalCell),
                     "a SequentialRNNCell holding a BidirectionalCell cannot be stepped")
            inputs, child_states = child(inputs, own)
            new_states += child_states
        return inputs, new_states

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None):
        self.reset()
        begin = self.begin_state() if begin_state is None else begin_state
        top = len(self._cells) - 1
        final_states = []
        for depth, (child, own) in enumerate(self._with_states(begin)):
            # only the top of the stack formats the outputs as asked
            inputs, child_states = child.unroll(
                length, inputs=inputs, begin_state=own, layout=layout,
                merge_outputs=merge_outputs if depth == top else None)
            final_states += child_states
        return inputs, final_states


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
        dropped = symbol.Dropout(data=inputs, p=self.dropout) if self.dropout > 0 else inputs
        return dropped, states

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None):
        self.reset()
        inputs, _ = _normalize_sequence(length, inputs, layout, merge_outputs)
        if not isinstance(inputs, symbol.Symbol):
            return super().unroll(length, inputs, begin_state=begin_state, layout=layout,
                                  merge_outputs=merge_outputs)
        # a merged sequence is dropped out in one go
        return self(inputs, [])


class ModifierCell(BaseRNNCell):
    """Base class of cells that wrap another cell (``base_cell``) and change what it does.

    Once wrapped, the base cell must not be used directly any more.
    """

    def __init__(self, base_cell):
        super().__init__()
        self.base_cell = base_cell
        base_cell._modified = True  # from now on only through this modifier

    # states and weights are the wrapped cell's
    state_info = property(lambda self: self.base_cell.state_info)

    def unpack_weights(self, args):
        return self.base_cell.unpack_weights(args)

    def pack_weights(self, args):
        return self.base_cell.pack_weights(args)

    @property
    def params(self):
        self._own_params = False
        return self.base_cell.params

    def begin_state(self, init_sym=symbol.zeros, **kwargs):
        _require(not self._modified, _MODIFIED)
        with _unlocked(self.base_cell) as wrapped:
            return wrapped.begin_state(init_sym, **kwargs)

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


def _plus_residual(output, inputs):
    return symbol.elemwise_add(output, inputs, name="%s_plus_residual" % output.name)


class ResidualCell(ModifierCell):
    """Adds the cell's input to its output (Wu et al. 2016)."""

    def __init__(self, base_cell):
        super().__init__(base_cell)

    def __call__(self, inputs, states):
        output, states = self.base_cell(inputs, states)
        return _plus_residual(output, inputs), states

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None):
        self.reset()
        with _unlocked(self.base_cell) as wrapped:
            outputs, states = wrapped.unroll(length, inputs=inputs, begin_state=begin_state,
                                             layout=layout, merge_outputs=merge_outputs)
        # the inputs are brought to the form the outputs came in
        merged = isinstance(outputs, symbol.Symbol) if merge_outputs is None else merge_outputs
        inputs, _ = _normalize_sequence(length, inputs, layout, merged)
        if merged:
            return _plus_residual(outputs, inputs), states
        return [_plus_residual(out, inp) for out, inp in zip(outputs, inputs)], states


class BidirectionalCell(_CellGroup):
    """Runs ``l_cell`` forward and ``r_cell`` backward over the sequence and concatenates their
    outputs (``<output_prefix>t<i>`` per step, or ``<output_prefix>out`` merged)."""

    def __init__(self, l_cell, r_cell, params=None, output_prefix="bi_"):
        super().__init__("", params=params)
        self._output_prefix = output_prefix
        self._override_cell_params = params is not None
        self._share_params_with([l_cell, r_cell], "BidirectionalCell")
        self._cells = [l_cell, r_cell]

    def __call__(self, inputs, states):
        raise NotImplementedError("Bidirectional cannot be stepped. Please use unroll")

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None):
        self.reset()
        inputs, axis = _normalize_sequence(length, inputs, layout, False)
        begin = self.begin_state() if begin_state is None else begin_state
        forward, backward = self._cells
        split = len(forward.state_info)
        fwd_out, fwd_states = forward.unroll(length, inputs=inputs, begin_state=begin[:split],
                                             layout=layout, merge_outputs=merge_outputs)
        bwd_out, bwd_states = backward.unroll(length, inputs=list(reversed(inputs)),
                                              begin_state=begin[split:], layout=layout,
                                              merge_outputs=merge_outputs)

        def per_step(outputs):
            if not isinstance(outputs, symbol.Symbol):
                return outputs
            return list(symbol.SliceChannel(outputs, axis=axis, num_outputs=length,
                                            squeeze_axis=1))

        if merge_outputs is None:
            merge_outputs = all(isinstance(o, symbol.Symbol) for o in (fwd_out, bwd_out))
            if not merge_outputs:
                fwd_out = per_step(fwd_out)
                bwd_out = per_step(bwd_out)
        prefix = self._output_prefix
        if merge_outputs:
            # the backward outputs are flipped back into time order before joining
            joined = symbol.Concat(fwd_out, symbol.reverse(bwd_out, axis=axis), dim=2,
                                   name="%sout" % prefix)
        else:
            joined = [symbol.Concat(f, b, dim=1, name="%st%d" % (prefix, t))
                      for t, (f, b) in enumerate(zip(fwd_out, reversed(bwd_out)))]
        return joined, [fwd_states, bwd_states]


class BaseConvRNNCell(_StepCell):
    """Base class of the convolutional RNN cells: i2h and h2h are Convolutions.

    ``input_shape`` is the shape of one step's input (N, C, H, W); the state shape is what the
    i2h convolution produces for it (batch left to inference). ``h2h_kernel`` must be odd (the
    h2h convolution pads to keep the state's spatial size).
    """

    _state_count = 2

    def __init__(self, input_shape, num_hidden, h2h_kernel, h2h_dilate, i2h_kernel, i2h_stride,
                 i2h_pad, i2h_dilate, i2h_weight_initializer, h2h_weight_initializer,
                 i2h_bias_initializer, h2h_bias_initializer, activation, prefix="", params=None,
                 conv_layout="NCHW"):
        super().__init__(prefix=prefix, params=params)
        _require(all(h2h_kernel[k] % 2 == 1 for k in (0, 1)),
                 "Only support odd number, get h2h_kernel= %s" % str(h2h_kernel))
        self._num_hidden, self._input_shape = num_hidden, input_shape
        self._conv_layout, self._activation = conv_layout, activation
        i2h_conv = dict(kernel=i2h_kernel, stride=i2h_stride, pad=i2h_pad, dilate=i2h_dilate)
        self._i2h_kernel, self._i2h_stride = i2h_kernel, i2h_stride
        self._i2h_pad, self._i2h_dilate = i2h_pad, i2h_dilate
        self._h2h_kernel, self._h2h_dilate = h2h_kernel, h2h_dilate
        # "same" padding, so the state keeps its height and width from step to step
        self._h2h_pad = tuple(h2h_dilate[k] * (h2h_kernel[k] - 1) // 2 for k in (0, 1))
        # the state has the shape the i2h convolution gives one step's input
        probe = symbol.Convolution(data=symbol.Variable("data"), num_filter=num_hidden,
                                   layout=conv_layout, **i2h_conv)
        self._state_shape = (0,) + tuple(probe.infer_shape(data=input_shape)[1][0][1:])
        self._iW = self.params.get("i2h_weight", init=i2h_weight_initializer)
        self._hW = self.params.get("h2h_weight", init=h2h_weight_initializer)
        self._iB = self.params.get("i2h_bias", init=i2h_bias_initializer)
        self._hB = self.params.get("h2h_bias", init=h2h_bias_initializer)

    @property
    def state_info(self):
        return [{"shape": self._state_shape, "__layout__": self._conv_layout}
                for _ in range(self._state_count)]

    def _project(self, inputs, states, name):
        filters = self._num_hidden * len(self._gate_names)
        i2h = symbol.Convolution(name="%si2h" % name, data=inputs, num_filter=filters,
                                 kernel=self._i2h_kernel, stride=self._i2h_stride,
                                 pad=self._i2h_pad, dilate=self._i2h_dilate, weight=self._iW,
                                 bias=self._iB, layout=self._conv_layout)
        h2h = symbol.Convolution(name="%sh2h" % name, data=states[0], num_filter=filters,
                                 kernel=self._h2h_kernel, dilate=self._h2h_dilate,
                                 pad=self._h2h_pad, stride=(1, 1), weight=self._hW,
                                 bias=self._hB, layout=self._conv_layout)
        return i2h, h2h


def _LEAKY(inputs, **kwargs):
    """The conv cells' default activation: LeakyReLU(act_type='leaky', slope=0.2).

    (A function rather than MXNet's functools.partial, so that importing lightmod does not
    create the operator functions.)"""
    return symbol.LeakyReLU(inputs, act_type="leaky", slope=0.2, **kwargs)


def _conv_cell_init(default_prefix):
    """The ``__init__`` of a convolutional cell: BaseConvRNNCell's arguments, in its order,
    with the defaults MXNet gives all three cells (only the prefix differs), passed on
    unchanged."""

    def __init__(self, input_shape, num_hidden, h2h_kernel=(3, 3), h2h_dilate=(1, 1),
                 i2h_kernel=(3, 3), i2h_stride=(1, 1), i2h_pad=(1, 1), i2h_dilate=(1, 1),
                 i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros",
                 activation=_LEAKY, prefix=default_prefix, params=None, conv_layout="NCHW"):
        BaseConvRNNCell.__init__(self, input_shape, num_hidden, h2h_kernel, h2h_dilate,
                                 i2h_kernel, i2h_stride, i2h_pad, i2h_dilate,
                                 i2h_weight_initializer, h2h_weight_initializer,
                                 i2h_bias_initializer, h2h_bias_initializer, activation, prefix,
                                 params, conv_layout)

    return __init__


class ConvRNNCell(_ElmanRule, BaseConvRNNCell):
    """Convolutional Elman cell (activation: leaky ReLU with slope 0.2 by default)."""

    __init__ = _conv_cell_init("ConvRNN_")


class ConvLSTMCell(_LSTMRule, BaseConvRNNCell):
    """Convolutional LSTM cell (Shi et al. 2015); gates i, f, c, o along the channel axis,
    with the cell's activation (not tanh) for the candidate and the new cell state."""

    _gate_axis = property(lambda self: self._conv_layout.find("C"))
    __init__ = _conv_cell_init("ConvLSTM_")


class ConvGRUCell(_GRURule, BaseConvRNNCell):
    """Convolutional GRU cell; gates r, z, o (sliced along axis 1, as MXNet does whatever the
    layout)."""

    __init__ = _conv_cell_init("ConvGRU_")
