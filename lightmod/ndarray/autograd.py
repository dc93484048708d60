"""Imperative differentiation (MXNet's ``mx.autograd``): operations on NDArrays recorded on a
tape while ``record()`` is active, then differentiated by ``backward`` / ``grad``.

What is recorded
----------------
An array takes part once it is marked as a variable (``attach_grad``, ``mark_variables``) or
computed, while recording, from one that takes part. Each such computation becomes a tape
node: an operator call made through ``register.invoke`` (every ``mx.nd`` function and NDArray
arithmetic), or a view / copy that NDArray makes itself (indexing, ``reshape``, ``astype``,
``copy``, ``T``...), whose gradient is given by a function of the output's gradient. A node
keeps what its operator's backward reads: the input and output arrays as computed, and the
operator's state (an array changed in place after it was recorded is read as it is then).

Differentiation
---------------
``backward`` walks the nodes reachable from the heads, newest first (a node's inputs were all
made before it, so its output gradients are complete when it is reached), calls each
operator's backward with 'write' into fresh arrays, and adds them up per input. A variable
then receives its total as its ``grad_req`` says ('write' replaces, 'add' accumulates, 'null'
leaves it). An output without a gradient is given None, as the executor does. Unless
``retain_graph`` is set, the nodes are released afterwards: a second backward from the same
head is an error, and an array computed by a released node stands as a constant in what is
recorded later (no gradient flows through it), as in MXNet. Nothing computed during
backward is recorded: higher-order gradients (``create_graph=True``) are not provided.

Recording and training are two switches per thread, as in MXNet: ``record(train_mode=True)``
turns both on, ``pause`` turns recording off; operators run in training mode (Dropout drops,
BatchNorm uses batch statistics) whenever training is on, recording or not.
"""
import heapq
import itertools
import threading

import numpy as np

from .. import kernels
from ..base import MXNetError
from ..grad_req import GradReq

__all__ = ["is_recording", "is_training", "set_recording", "set_training", "record", "pause",
           "train_mode", "predict_mode", "mark_variables", "backward", "grad", "Function"]

# What this module uses of ndarray.py (NDArray, zeros, ones, _to_ctx_buffer), installed by
# ndarray.py when it is imported: that module records views through this one, so this one
# cannot import it back without an import circle.
_ND = {}


def install(**names):
    """Install the names of ndarray.py this module calls."""
    _ND.update(names)


_state = threading.local()
_sequence = itertools.count()       # node numbers: later nodes have larger ones


def is_recording():
    """Whether operations on NDArrays are being recorded (in this thread)."""
    return getattr(_state, "recording", False)


def is_training():
    """Whether operators run in training mode (in this thread)."""
    return getattr(_state, "training", False)


def set_recording(is_recording):
    """Turn recording on or off; returns the previous setting."""
    previous = getattr(_state, "recording", False)
    _state.recording = bool(is_recording)
    return previous


def set_training(train_mode):
    """Turn training mode on or off; returns the previous setting."""
    previous = getattr(_state, "training", False)
    _state.training = bool(train_mode)
    return previous


class _Scope:
    """Sets recording and / or training for a ``with`` block and restores them after it."""

    def __init__(self, recording, training):
        self._wanted = (recording, training)
        self._before = None

    def __enter__(self):
        recording, training = self._wanted
        self._before = (None if recording is None else set_recording(recording),
                        None if training is None else set_training(training))
        return self

    def __exit__(self, *exc):
        recording, training = self._before
        if recording is not None:
            set_recording(recording)
        if training is not None:
            set_training(training)
        return False


def record(train_mode=True):
    """A ``with`` block that records operations (and runs operators in training mode unless
    ``train_mode=False``)."""
    return _Scope(True, train_mode)


def pause(train_mode=False):
    """A ``with`` block that records nothing (operators in predict mode unless
    ``train_mode=True``)."""
    return _Scope(False, train_mode)


def train_mode():
    """A ``with`` block whose operators run in training mode (recording unchanged)."""
    return _Scope(None, True)


def predict_mode():
    """A ``with`` block whose operators run in predict mode (recording unchanged)."""
    return _Scope(None, False)


# ---------------------------------------------------------------------------------------------
# the tape
# ---------------------------------------------------------------------------------------------
class Variable:
    """What a marked array carries: where its gradient goes and how."""
    __slots__ = ("grad", "req")

    def __init__(self, grad, req):
        self.grad = grad
        self.req = req


class _Node:
    """One recorded computation: the tape entries of its inputs (a Variable, a (node, output)
    pair, or None for an input that takes no part), and ``differentiate(out_grads) ->
    gradient per input (NDArray or None)`` with ``out_grads`` an NDArray or None per output."""
    __slots__ = ("number", "sources", "differentiate", "num_outputs", "what")

    def __init__(self, sources, differentiate, num_outputs, what):
        self.number = next(_sequence)
        self.sources = sources
        self.differentiate = differentiate
        self.num_outputs = num_outputs
        self.what = what


def entry_of(arr):
    """The tape entry an NDArray carries (a Variable, a (node, output) pair), or None: also
    for the result of a node an earlier backward released (it stands as a constant)."""
    entry = getattr(arr, "_autograd", None)
    if isinstance(entry, tuple) and entry[0].differentiate is None:
        return None
    return entry


def takes_part(arrays):
    """Whether recording is on and some of ``arrays`` takes part in the tape."""
    return is_recording() and any(entry_of(a) is not None for a in arrays)


def mark_variables(variables, gradients, grad_reqs="write"):
    """Mark ``variables`` (NDArrays) as the arrays gradients are computed for, each into the
    matching array of ``gradients`` with its request ('write', 'add' or 'null')."""
    NDArray = _ND["NDArray"]
    if isinstance(variables, NDArray):
        variables, gradients = [variables], [gradients]
    variables, gradients = list(variables), list(gradients)
    reqs = [grad_reqs] * len(variables) if isinstance(grad_reqs, str) else list(grad_reqs)
    if not len(variables) == len(gradients) == len(reqs):
        raise MXNetError("mark_variables: %d variables, %d gradients and %d grad_reqs (one "
                         "each expected)" % (len(variables), len(gradients), len(reqs)))
    for var, grad, req in zip(variables, gradients, reqs):
        if not isinstance(var, NDArray) or not isinstance(grad, NDArray):
            raise TypeError("mark_variables: variables and gradients must be NDArrays")
        if grad.shape != var.shape:
            raise MXNetError("mark_variables: the gradient of a variable of shape %s has "
                             "shape %s" % (var.shape, grad.shape))
        try:
            req = GradReq(req)
        except ValueError:
            raise MXNetError("mark_variables: grad_req must be 'write', 'add' or 'null', got "
                             "%r" % (req,)) from None
        var._autograd = Variable(grad, req)


def record_operator(op, p, inputs, outputs, visible, state):
    """Put an operator call on the tape (``register.invoke``, while recording): ``inputs`` the
    NDArrays it read, ``outputs`` the backend arrays of every output (hidden ones too), the
    first ``visible`` of which the caller received as ``results`` (set later by the caller
    with :func:`label_outputs`)."""
    sources = [entry_of(x) for x in inputs]
    in_data = [x._data for x in inputs]
    in_meta = [(x.shape, x._data.dtype, x.context) for x in inputs]
    ctx = inputs[0].context if inputs else None

    def differentiate(out_grads):
        NDArray = _ND["NDArray"]
        zeros = _ND["zeros"]
        if not op.differentiable:
            raise MXNetError("Operator %s is non-differentiable (MXNet registers no gradient "
                             "for it): backward cannot pass through it" % op.name)
        if op.blocks_gradient:
            return [None] * len(sources)
        k = kernels.for_context(state.get("context", ctx))
        grads, reqs = [], []
        for src, (shape, dtype, where) in zip(sources, in_meta):
            if src is None:
                grads.append(None)
                reqs.append(GradReq.NULL)
            else:
                grads.append(zeros(shape, ctx=where, dtype=dtype))
                reqs.append(GradReq.WRITE)
        heads = [None if g is None else g._data for g in out_grads]
        op.backward(p, k, heads + [None] * (len(outputs) - len(heads)), in_data, outputs,
                    [None if g is None else g._data for g in grads], reqs, state)
        return [g if isinstance(g, NDArray) else None for g in grads]

    return _Node(sources, differentiate, visible, "operator %s" % op.name)


def label_outputs(node, arrays):
    """Make each of ``arrays`` (the node's visible outputs) carry its tape entry."""
    for j, arr in enumerate(arrays):
        arr._autograd = (node, j)


INPLACE = ("Inplace operations (+=, -=, x[:]=, etc) are not supported when recording with "
            "autograd: %s")


def check_writes(inputs, targets, what):
    """Refuse, while recording, a write into an existing array by an operation on arrays
    that take part in the tape: into one of its own inputs (its old values may still be
    needed by backward), or into an array already on the tape (its history would be lost)."""
    for target in targets:
        for x in inputs:
            if target is x or np.shares_memory(_host_or_none(target), _host_or_none(x)):
                raise MXNetError(INPLACE % what)
        if entry_of(target) is not None:
            raise MXNetError("%s: the target array is already part of a recorded computation; "
                             "assigning to it inside autograd.record() would lose its history "
                             "(call backward first, or assign outside the record block)" % what)


def _host_or_none(arr):
    data = arr._data
    return data if isinstance(data, np.ndarray) else np.empty(0)


def sum_to_shape(grad, shape):
    """``grad`` (an NDArray) summed over the axes that broadcasting ``shape`` to its shape
    added or stretched: the gradient of the broadcast value (the kernels' ``sum_to_shape``)."""
    if grad.shape == tuple(shape):
        return grad
    total = _ND["zeros"](shape, ctx=grad.context, dtype=grad._data.dtype)
    kernels.for_context(grad.context).sum_to_shape(grad._data, total._data)
    return total


def record_view(out, src, gradient_of):
    """Put a view or copy ``out`` of ``src`` on the tape when ``src`` takes part and recording
    is on: ``gradient_of(out_grad)`` gives ``src``'s gradient (computed without recording)."""
    entry = entry_of(src)
    if entry is None or not is_recording():
        return out

    def differentiate(out_grads):
        return [None if out_grads[0] is None else gradient_of(out_grads[0])]

    out._autograd = (_Node([entry], differentiate, 1, "a view or copy"), 0)
    return out


def scatter_gradient(src, key, out_grad, host_key=None):
    """The gradient of ``src[key]`` given that of the result: zeros shaped like ``src`` with
    ``out_grad`` added where the result came from (repeated indices add up)."""
    NDArray = _ND["NDArray"]
    _to_ctx_buffer = _ND["_to_ctx_buffer"]
    dtype = src._data.dtype
    total = np.zeros(src.shape, dtype=dtype)
    values = out_grad.asnumpy().astype(dtype, copy=False)
    if host_key is not None:
        np.add.at(total, host_key, values.reshape(total[host_key].shape))
    else:
        region = total[key]
        if isinstance(region, np.ndarray):
            region += values.reshape(region.shape)
        else:
            total[key] += values.reshape(())
    return NDArray(_to_ctx_buffer(total, src.context), src.context)


# ---------------------------------------------------------------------------------------------
# differentiation
# ---------------------------------------------------------------------------------------------
def _filled_like(arr, value):
    """A new array of ``arr``'s shape, context and dtype holding ``value``."""
    return _ND["full"](arr.shape, value, ctx=arr.context, dtype=arr._data.dtype)


def _differentiate(heads, head_grads, retain_graph):
    """{id(Variable): (Variable, total gradient NDArray)} for the variables reached from
    ``heads``, given ``head_grads`` (None: ones)."""
    NDArray = _ND["NDArray"]
    if isinstance(heads, NDArray):
        heads = [heads]
    heads = list(heads)
    if head_grads is None:
        head_grads = [None] * len(heads)
    elif isinstance(head_grads, NDArray):
        head_grads = [head_grads]
    head_grads = list(head_grads)
    if len(head_grads) != len(heads):
        raise MXNetError("backward: %d heads but %d head gradients" % (len(heads),
                                                                      len(head_grads)))
    totals = {}         # id(node) or id(Variable) -> per-output gradients / [Variable, grad]
    waiting = []        # nodes holding a gradient, newest first (a heap on -number)

    def add(entry, g):
        if g is None:
            return
        if isinstance(entry, Variable):
            slot = totals.setdefault(id(entry), [entry, None])
            slot[1] = g if slot[1] is None else slot[1] + g
            return
        node, j = entry
        if node.differentiate is None:
            # released by an earlier backward: its result now stands as a constant (MXNet
            # detaches such arrays from the graph)
            return
        if id(node) not in totals:
            totals[id(node)] = [None] * node.num_outputs
            heapq.heappush(waiting, (-node.number, id(node), node))
        grads = totals[id(node)]
        grads[j] = g if grads[j] is None else grads[j] + g

    with pause(train_mode=is_training()):
        for head, hg in zip(heads, head_grads):
            entry = getattr(head, "_autograd", None)
            if entry is None:
                raise MXNetError(
                    "backward: the array of shape %s was not computed while recording (no "
                    "variable it depends on was marked with attach_grad, or it was computed "
                    "outside autograd.record())" % (head.shape,))
            if isinstance(entry, tuple) and entry[0].differentiate is None:
                raise MXNetError("backward: the graph was already differentiated and released "
                                 "(the first backward through it needs retain_graph=True to "
                                 "be run again)")
            if hg is not None and hg.shape != head.shape:
                raise MXNetError("backward: a head of shape %s was given a head gradient of "
                                 "shape %s" % (head.shape, hg.shape))
            add(entry, _filled_like(head, 1) if hg is None else hg)
        done = []
        while waiting:
            node = heapq.heappop(waiting)[2]
            out_grads = totals.pop(id(node))
            try:
                in_grads = node.differentiate(out_grads)
            except MXNetError as err:
                raise MXNetError("backward through %s: %s" % (node.what, err)) from None
            for src, g in zip(node.sources, in_grads):
                if src is not None:
                    add(src, g)
            done.append(node)
        if not retain_graph:
            for node in done:
                node.differentiate = None
    return {key: value for key, value in totals.items() if isinstance(value[0], Variable)}


def backward(heads, head_grads=None, retain_graph=False, train_mode=True):
    """Compute the gradients of ``heads`` (NDArrays; their gradient ``head_grads``, ones by
    default) with respect to every marked variable they depend on, into the variables'
    gradient arrays as their ``grad_req`` says."""
    with _Scope(None, train_mode):
        reached = _differentiate(heads, head_grads, retain_graph)
    with pause():
        for var, total in reached.values():
            if var.req is GradReq.WRITE:
                var.grad[:] = total
            elif var.req is GradReq.ADD:
                var.grad[:] = var.grad + total


def grad(heads, variables, head_grads=None, retain_graph=None, create_graph=False,
         train_mode=True):
    """The gradients of ``heads`` with respect to ``variables`` (marked NDArrays), as new
    arrays; the variables' own gradient arrays are not touched. A variable the heads do not
    depend on gets zeros."""
    NDArray = _ND["NDArray"]
    if create_graph:
        raise MXNetError("autograd.grad: create_graph=True (recording the backward pass for "
                         "higher-order gradients) is not provided by lightmod")
    single = isinstance(variables, NDArray)
    variables = [variables] if single else list(variables)
    wanted = []
    for var in variables:
        entry = getattr(var, "_autograd", None)
        if not isinstance(entry, Variable):
            raise MXNetError("autograd.grad: every variable must be marked first "
                             "(attach_grad or mark_variables)")
        wanted.append(entry)
    with _Scope(None, train_mode):
        reached = _differentiate(heads, head_grads, bool(retain_graph))
    out = []
    for var, entry in zip(variables, wanted):
        found = reached.get(id(entry))
        out.append(found[1] if found is not None else _filled_like(var, 0))
    return out[0] if single else out


class Function:
    """A differentiable function written by hand: subclass it with ``forward(*inputs)``
    (NDArrays in, an NDArray or a tuple of them out) and ``backward(*output_grads)`` (one
    gradient per output in, one per input out). ``save_for_backward`` keeps arrays for the
    backward pass in ``saved_tensors``. Calling an instance runs ``forward`` without recording
    and puts the call on the tape as one node."""

    def __init__(self):
        self.saved_tensors = ()

    def save_for_backward(self, *args):
        self.saved_tensors = args

    def __call__(self, *inputs):
        NDArray = _ND["NDArray"]
        for name in ("forward", "backward"):
            if not callable(getattr(self, name, None)):
                raise TypeError("%s is an autograd.Function without %s(): subclass Function "
                                "and define forward and backward" % (type(self).__name__, name))
        recording = takes_part(inputs)
        with pause(train_mode=is_training()):
            outputs = self.forward(*inputs)
        single = isinstance(outputs, NDArray)
        results = [outputs] if single else list(outputs)
        if recording:
            function = self

            def differentiate(out_grads):
                given = [_filled_like(r, 0) if g is None else g
                         for g, r in zip(out_grads, results)]
                in_grads = function.backward(*given)
                in_grads = [in_grads] if isinstance(in_grads, NDArray) else list(in_grads)
                if len(in_grads) != len(inputs):
                    raise MXNetError("%s.backward returned %d gradients for %d inputs"
                                     % (type(function).__name__, len(in_grads), len(inputs)))
                return in_grads

            node = _Node([entry_of(x) for x in inputs], differentiate, len(results),
                         "autograd.Function %s" % type(self).__name__)
            label_outputs(node, results)
        return outputs
