"""Symbol: a handle on the outputs of a graph of operators (MXNet 1.9.1's ``mx.sym.Symbol``).

A Symbol is a list of output entries ``(node, index, version)`` of a graph of ``Node`` objects
(see ``graph.py``). Symbols share nodes the way MXNet's handles share graph nodes: composing
builds new operator nodes on top of existing ones, ``copy`` duplicates the whole graph,
``_set_attr`` changes one node for every symbol that contains it.

Naming and attributes follow MXNet: operators created without ``name=`` are named by the
current ``NameManager``; ``AttrScope`` attributes reach every new symbol; the hidden keys
(``lr_mult``, ``ctx_group``, ...) are stored as ``__key__``; missing operator inputs become
variables ``<op name>_<input name>`` that copy the operator's attributes.
"""
import numbers
import warnings

import numpy as np

from .. import attribute as _attribute
from .. import name as _name
from ..base import DTYPE_NP_TO_MX, MXNetError, NotImplementedForSymbol, atomic_write, string_types
from ..context import current_context
from ..operator import registry
from . import _json
from . import graph as _graph
from ._json import HIDDEN_KEYS

__all__ = ["Symbol", "var", "Variable", "Group", "load", "load_json", "pow", "power",
           "maximum", "minimum", "hypot", "zeros", "ones", "full", "NotImplementedForSymbol",
           "histogram",
           "create_op_symbol"]

_STORAGE_TYPE_STR_TO_ID = {"undefined": -1, "default": 0, "row_sparse": 1, "csr": 2}
_STORAGE_TYPE_ID_TO_STR = {v: k for k, v in _STORAGE_TYPE_STR_TO_ID.items()}

# Functions this module calls but does not own, installed by their owners when imported
# (``import lightmod`` imports them all): ``bind`` / ``simple_bind`` from lightmod.executor, one
# layer up, and ``op_function`` (the generated ``sym.<op>`` functions) from symbol/register.py,
# which builds on this module. So this module imports neither.
_HOOKS = {}


def install_hooks(**functions):
    """Install functions ``Symbol`` calls: ``bind``, ``simple_bind``, ``op_function``."""
    _HOOKS.update(functions)


def _entry_of(sym, what):
    """The single output entry of ``sym`` (an input to an operator must have one output)."""
    if not isinstance(sym, Symbol):
        raise TypeError("%s must be a Symbol, got %s" % (what, type(sym).__name__))
    if len(sym._outputs) != 1:
        raise MXNetError("%s is a tuple with %d elements, but a single value is required"
                         % (what, len(sym._outputs)))
    node, index, _ = sym._outputs[0]
    return (node, index, node.version if node.op is None else 0)


def _hidden_key(key):
    """A plain hidden key ('lr_mult') in its stored form ('__lr_mult__')."""
    return "__%s__" % key if key in HIDDEN_KEYS else key


def _op_attr_key(key, value):
    """How an operator keyword is stored: hidden keys get underscores, and a keyword that
    merely ends with one ('weight_lr_mult') is refused, as in MXNet."""
    for hidden in HIDDEN_KEYS:
        pos = key.rfind(hidden)
        if pos == 0:
            return "__%s__" % key
        if pos > 0 and pos == len(key) - len(hidden):
            raise MXNetError("setting variable attributes with %s is deprecated. please instead "
                             "use\nw = Variable(%s=%s)\nsym = YourSymbolName(%s=w)"
                             % (key, hidden, value, key[:pos - 1]))
    return key


class Symbol:
    """Symbolic outputs of a computation graph (see the module docstring)."""
    __slots__ = ("_outputs", "__weakref__")
    __array_priority__ = 1000.0

    def __init__(self, outputs):
        self._outputs = list(outputs)

    # ----------------------------------------------------------------------------------------
    # basics
    # ----------------------------------------------------------------------------------------
    def __repr__(self):
        name = self.name
        if name is None:
            return "<%s group [%s]>" % (type(self).__name__, ", ".join(s.name for s in self))
        return "<%s %s>" % (type(self).__name__, name)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __len__(self):
        return len(self._outputs)

    def __bool__(self):
        raise NotImplementedForSymbol(self.__bool__, "bool")

    __hash__ = object.__hash__

    def __getstate__(self):
        return {"handle": self.tojson()}

    def __setstate__(self, state):
        handle = state.get("handle")
        self._outputs = [] if handle is None else _json.loads(handle)

    def __copy__(self):
        return self.__deepcopy__(None)

    def __deepcopy__(self, _memo):
        return Symbol(_copy_graph(self._outputs))

    def copy(self):
        return self.__deepcopy__(None)

    def _single_node(self):
        """The node behind every output, or None when outputs come from different nodes."""
        if not self._outputs:
            return None
        node = self._outputs[0][0]
        for other, _, _ in self._outputs:
            if other is not node:
                return None
        return node

    @property
    def name(self):
        node = self._single_node()
        return None if node is None else node.name

    def as_nd_ndarray(self):
        return self

    # ----------------------------------------------------------------------------------------
    # attributes
    # ----------------------------------------------------------------------------------------
    def attr(self, key):
        """The attribute ``key`` of this (single-node) symbol, or None."""
        node = self._single_node()
        if node is None:
            return None
        if key == "name":
            return node.name
        if key == "op_name":
            return "null" if node.op is None else node.op.name
        return node.attrs.get(_hidden_key(key))

    def list_attr(self, recursive=False):
        """The attributes of the first output's node (hidden keys also plainly)."""
        if recursive:
            raise DeprecationWarning("Symbol.list_attr with recursive=True has been deprecated. "
                                     "Please use attr_dict instead.")
        if not self._outputs:
            return {}
        return _with_plain_keys(self._outputs[0][0].attrs)

    def attr_dict(self):
        """{node name: its attributes} for every node that has attributes."""
        out = {}
        for node in _graph.topo_order(self._outputs):
            if node.attrs:
                out.setdefault(node.name, {}).update(_with_plain_keys(node.attrs))
        return out

    def _set_attr(self, **kwargs):
        """Set string attributes on the node(s) of this symbol."""
        if not all(isinstance(value, string_types) for value in kwargs.values()):
            raise ValueError("Set Attr only accepts string values")
        node = self._single_node()
        if node is None:
            raise MXNetError("Symbol.SetAttrs only works for non-grouped symbol")
        old = dict(node.attrs)
        for key, value in kwargs.items():
            if key == "name":
                node.name = value
            else:
                node.attrs[_hidden_key(key)] = value
        if node.op is not None:
            node.reset_params()
            try:
                node.params()
            except MXNetError:
                node.attrs = old
                node.reset_params()
                raise

    # ----------------------------------------------------------------------------------------
    # structure
    # ----------------------------------------------------------------------------------------
    def __getitem__(self, index):
        count = len(self._outputs)
        if isinstance(index, slice):
            return Group([self[i] for i in range(*index.indices(count))])
        if isinstance(index, string_types):
            names = self.list_outputs()
            found = [i for i, n in enumerate(names) if n == index]
            if len(found) > 1:
                raise ValueError('There are multiple outputs with name "%s"' % index)
            if not found:
                raise ValueError('Cannot find output that matches name "%s"' % index)
            index = found[0]
        if not isinstance(index, (int, np.integer)):
            raise TypeError("Symbol only support integer index to fetch i-th output")
        index = int(index)
        if index < 0:
            index += count
        if not 0 <= index < count:
            raise IndexError("output index %d out of range (%d outputs)" % (index, count))
        return Symbol([self._outputs[index]])

    def _gen_atomic_symbol(self):
        """A new operator node with this symbol's operator and attributes but no inputs and no
        name yet; calling it (``atomic(*inputs, name=...)``) attaches inputs as ``sym.<op>``
        does. Every output must come from one operator node."""
        node = self._single_node()
        if node is None:
            raise MXNetError("Generating atomic symbol from other symbol is not supported!")
        if node.op is None:
            raise MXNetError("Generating atomic symbol from a Variable (%s) is not supported"
                             % node.name)
        atomic = _graph.Node(node.op, "", dict(node.attrs))
        return Symbol([(atomic, i, 0) for i in range(atomic.num_visible_outputs())])

    def get_internals(self):
        """A group of every visible output of every node, in graph order."""
        entries = []
        for node in _graph.topo_order(self._outputs):
            entries.extend((node, i, 0) for i in range(node.num_visible_outputs()))
        return Symbol(entries)

    def get_children(self):
        """The inputs of this symbol's output nodes as a group, or None for a variable."""
        entries, seen = [], set()
        for node, _, _ in self._outputs:
            if id(node) not in seen:
                seen.add(id(node))
                entries.extend(node.inputs)
        return Symbol(entries) if entries else None

    def _split_inputs(self):
        """(argument nodes, auxiliary nodes, all variable nodes) in graph order."""
        order = _graph.topo_order(self._outputs)
        mutable = set()
        for node in order:
            for slot in node.aux_slots():
                mutable.add(id(node.inputs[slot][0]))
        variables = [n for n in order if n.op is None]
        args = [n for n in variables if id(n) not in mutable]
        aux = [n for n in variables if id(n) in mutable]
        return args, aux, variables

    def list_arguments(self):
        return [n.name for n in self._split_inputs()[0]]

    def _argument_and_aux_names(self):
        """(list_arguments(), list_auxiliary_states()) from one walk of the graph (the module
        layer asks for both at every bind)."""
        args, aux, _ = self._split_inputs()
        return [n.name for n in args], [n.name for n in aux]

    def list_auxiliary_states(self):
        return [n.name for n in self._split_inputs()[1]]

    def list_inputs(self):
        return [n.name for n in self._split_inputs()[2]]

    def list_outputs(self):
        return [node.output_name(i) for node, i, _ in self._outputs]

    # ----------------------------------------------------------------------------------------
    # composition
    # ----------------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        """A copy of this symbol with free variables replaced: ``net(data=other, name=...)``."""
        s = self.__copy__()
        s._compose(*args, **kwargs)
        return s

    def _compose(self, *args, **kwargs):
        """Replace free variables (by keyword) in place; ``name`` renames the output node."""
        name = kwargs.pop("name", None)
        if args and kwargs:
            raise TypeError("compose only accept input Symbols either as positional or "
                            "keyword arguments, not both")
        for value in list(args) + list(kwargs.values()):
            if not isinstance(value, Symbol):
                raise TypeError("Compose expect `Symbol` as arguments")
        for key, value in kwargs.items():
            _entry_of(value, "Keyword argument %s" % key)
        head = self._outputs[0][0]
        if head.op is None:
            raise MXNetError("Symbol.Compose: a Variable cannot be composed")
        if _is_atomic(self._outputs):
            # an operator not yet given inputs (``_gen_atomic_symbol``): inputs by position,
            # then by input name, the rest become new variables, as sym.<op>(...) does
            if name:
                head.name = name
            _attach_inputs(head, args, kwargs)
            return
        if args:
            raise MXNetError("Symbol.Compose: general composition only supports keyword "
                             "arguments (got %d positional)" % len(args))
        order = _graph.topo_order(self._outputs)
        matched = {n.name for n in order if n.op is None and n.name in kwargs}
        if len(matched) != len(kwargs):
            _keyword_mismatch("Symbol.Compose", kwargs, [n.name for n in order if n.op is None])
        if name:
            head.name = name
        for node in order:
            changed = False
            for slot, (src, _, _) in enumerate(node.inputs):
                if src.op is None and src.name in kwargs:
                    node.inputs[slot] = _entry_of(kwargs[src.name], "Keyword argument")
                    changed = True
            if changed:
                _update_versions(node)
        self._outputs = [_entry_of(kwargs[n.name], "Keyword argument")
                         if n.op is None and n.name in kwargs else (n, i, v)
                         for n, i, v in self._outputs]

    # ----------------------------------------------------------------------------------------
    # operators
    # ----------------------------------------------------------------------------------------
    def _binary(self, other, op_sym, hint_sym, op_scalar, hint_scalar):
        if isinstance(other, Symbol):
            return create_op_symbol(op_sym, hint_sym, [self, other])
        if isinstance(other, numbers.Number):
            return create_op_symbol(op_scalar, hint_scalar, [self], {"scalar": other})
        raise TypeError("type %s not supported" % str(type(other)))

    def _rscalar(self, other, op_scalar, hint_scalar):
        if isinstance(other, numbers.Number):
            return create_op_symbol(op_scalar, hint_scalar, [self], {"scalar": other})
        raise TypeError("type %s not supported" % str(type(other)))

    # The arithmetic and comparison operators (``+``, ``<``, ``+=`` ...) are added after the
    # class, from the tables there.

    def __radd__(self, other):
        return self.__add__(other)

    def __rmul__(self, other):
        return self.__mul__(other)

    def __neg__(self):
        return self.__mul__(-1.0)

    def __abs__(self):
        return self.abs()

    # Fluent methods (``x.reshape(...)``, ``x.sum(...)``...) are added after the class.

    def astype(self, *args, **kwargs):
        return _op_call("Cast", self, *args, **kwargs)

    def flatten(self, inplace=False, **kwargs):
        return _op_call("Flatten", self, **kwargs)

    def expand_dims(self, axis, inplace=False, **kwargs):
        return _op_call("expand_dims", self, axis=axis, **kwargs)

    def squeeze(self, axis=None, inplace=False, **kwargs):
        return _op_call("squeeze", self, axis=axis, **kwargs)

    # ----------------------------------------------------------------------------------------
    # inference
    # ----------------------------------------------------------------------------------------
    def _known_inputs(self, g, args, kwargs, what, convert):
        """{variable nid: value} from positional (argument order) or keyword values."""
        if args and kwargs:
            raise ValueError("Can only specify known argument %ss either by positional or "
                             "kwargs way." % what)
        known = {}
        if args:
            if len(args) > len(g.arg_nids):
                raise MXNetError("Infer%s: %d positional values given but the symbol has %d "
                                 "arguments %s" % (what.capitalize(), len(args), len(g.arg_nids),
                                                   [g.nodes[i].name for i in g.arg_nids]))
            for nid, value in zip(g.arg_nids, args):
                if value is not None:
                    known[nid] = convert(value, g.nodes[nid].name)
            return known
        by_name = {}
        for nid in g.var_nids:
            by_name.setdefault(g.nodes[nid].name, []).append(nid)
        for key, value in kwargs.items():
            if key not in by_name:
                names = "".join("\n\t[%d]%s" % (i, g.nodes[n].name)
                                for i, n in enumerate(g.var_nids))
                raise MXNetError("Infer%sKeyword argument name %s not found.\nCandidate "
                                 "arguments:%s" % (what.capitalize(), key, names))
            if value is None:
                continue
            for nid in by_name[key]:
                known[nid] = convert(value, key)
        return known

    def infer_shape(self, *args, **kwargs):
        """(arg_shapes, out_shapes, aux_shapes), or (None, None, None) when incomplete."""
        try:
            res = self._infer_shape_impl(False, *args, **kwargs)
        except MXNetError:
            print("infer_shape error. Arguments:")
            for i, arg in enumerate(args):
                print("  #%d: %s" % (i, arg))
            for k, v in kwargs.items():
                print("  %s: %s" % (k, v))
            raise
        if res[1] is None:
            arg_shapes, _, _ = self._infer_shape_impl(True, *args, **kwargs)
            unknowns = []
            for name, shape in zip(self.list_arguments(), arg_shapes):
                if not shape or 0 in shape:
                    if len(unknowns) >= 10:
                        unknowns.append("...")
                        break
                    unknowns.append("%s: %s" % (name, shape))
            warnings.warn("Cannot decide shape for the following arguments (0s in shape means "
                          "unknown dimensions). Consider providing them as input:\n\t"
                          + "\n\t".join(unknowns), stacklevel=2)
        return res

    def infer_shape_partial(self, *args, **kwargs):
        """Like infer_shape, with () for unknown shapes and 0 for unknown dims."""
        return self._infer_shape_impl(True, *args, **kwargs)

    def _infer_shape_impl(self, partial, *args, **kwargs):
        return self._infer_impl("shape", partial, args, kwargs)

    def infer_type(self, *args, **kwargs):
        """(arg_types, out_types, aux_types) as numpy types, or (None, None, None)."""
        res = self._infer_type_impl(False, *args, **kwargs)
        if res[1] is None:
            arg_types, _, _ = self._infer_type_impl(True, *args, **kwargs)
            unknowns = ["%s: %s" % (name, t) for name, t in zip(self.list_arguments(), arg_types)
                        if t is None]
            warnings.warn("Cannot decide type for the following arguments. Consider providing "
                          "them as input:\n\t" + "\n\t".join(unknowns), stacklevel=2)
        return res

    def infer_type_partial(self, *args, **kwargs):
        return self._infer_type_impl(True, *args, **kwargs)

    def _infer_type_impl(self, partial, *args, **kwargs):
        return self._infer_impl("type", partial, args, kwargs)

    def _infer_impl(self, what, partial, args, kwargs):
        """(arguments, outputs, auxiliary states) of ``what`` ("shape" or "type") inferred
        from the given inputs; (None, None, None) when some stay unknown, unless ``partial``
        (they are then reported as unknown)."""
        check, infer, is_known, report = _INFERENCE[what]
        g = _graph.IndexedGraph(self._outputs)
        values = infer(g, self._known_inputs(g, args, kwargs, what, check))
        if not partial and not all(is_known(v) for v in values):
            return None, None, None
        return ([report(values[g.entry_start[n]]) for n in g.arg_nids],
                [report(values[e]) for e in g.heads],
                [report(values[g.entry_start[n]]) for n in g.aux_nids])

    # ----------------------------------------------------------------------------------------
    # serialisation
    # ----------------------------------------------------------------------------------------
    def tojson(self, remove_amp_cast=True):
        """The graph as MXNet 1.9.1 writes it (byte-compatible). With ``remove_amp_cast`` the
        casts mixed precision inserted (``amp_cast``, ``amp_multicast``) are left out: each
        consumer reads the cast's input instead, as MXNet writes such a graph."""
        text = _json.dumps(self._outputs)
        if remove_amp_cast and '"op": "amp_' in text:
            return _json.dumps(_without_amp_casts(text)._outputs)
        return text

    def save(self, fname, remove_amp_cast=True):
        if not isinstance(fname, string_types):
            raise TypeError("fname must be a string")
        # written atomically: a crash never leaves a half-written -symbol.json
        atomic_write(fname, self.tojson(remove_amp_cast))

    def debug_str(self):
        """A readable listing of the graph (outputs, variables, operators and attributes)."""
        g = _graph.IndexedGraph(self._outputs)
        lines = ["Symbol Outputs:"]
        for i, (node, idx, _) in enumerate(self._outputs):
            lines.append("\toutput[%d]=%s(%d)" % (i, node.name, idx))
        for _nid, node in enumerate(g.nodes):
            if node.op is None:
                lines.append("Variable:%s" % node.name)
                continue
            lines.append("--------------------")
            lines.append("Op:%s, Name=%s" % (node.op.name, node.name))
            lines.append("Inputs:")
            for slot, (src, idx, ver) in enumerate(node.inputs):
                extra = " version=%d" % ver if src.op is None else ""
                lines.append("\targ[%d]=%s(%d)%s" % (slot, src.name, idx, extra))
            params = {k: v for k, v in node.attrs.items()}
            if params:
                lines.append("Attrs:")
                for k in sorted(params):
                    lines.append("\t%s=%s" % (k, params[k]))
        return "\n".join(lines) + "\n"

    # ----------------------------------------------------------------------------------------
    # binding
    # ----------------------------------------------------------------------------------------
    def simple_bind(self, ctx, grad_req="write", type_dict=None, stype_dict=None,
                    group2ctx=None, shared_arg_names=None, shared_exec=None,
                    shared_buffer=None, **kwargs):
        """Bind with arrays allocated from the given input shapes; returns an Executor."""
        return _HOOKS["simple_bind"](self, ctx, grad_req=grad_req, type_dict=type_dict,
                           stype_dict=stype_dict, group2ctx=group2ctx,
                           shared_arg_names=shared_arg_names, shared_exec=shared_exec,
                           shared_buffer=shared_buffer, shapes=kwargs)

    def bind(self, ctx, args, args_grad=None, grad_req="write", aux_states=None,
             group2ctx=None, shared_exec=None):
        """Bind to the given argument (and gradient / aux) arrays; returns an Executor."""
        return _HOOKS["bind"](self, ctx, args, args_grad=args_grad, grad_req=grad_req,
                    aux_states=aux_states, group2ctx=group2ctx, shared_exec=shared_exec)

    def eval(self, ctx=None, **kwargs):
        """Bind to the keyword arrays and run forward; returns the outputs."""
        if ctx is None:
            ctx = current_context()
        return self.bind(ctx, kwargs).forward()

    def gradient(self, wrt):
        raise MXNetError("Symbol.gradient is not supported (it is not implemented in MXNet "
                         "1.9.1 either); bind the symbol and call Executor.backward")


def _check_shape_arg(value, name):
    if not isinstance(value, tuple):
        raise TypeError("Arguments need to be shapes (tuple), but '%s' is %s."
                        % (name, type(value)))
    return value


def _check_dtype_arg(value, name):
    try:
        dt = np.dtype(value)
    except TypeError:
        raise TypeError("Argument %s: %r is not a dtype" % (name, value)) from None
    if dt.name not in DTYPE_NP_TO_MX:
        raise TypeError("Argument need to be one of %s" % sorted(DTYPE_NP_TO_MX))
    return dt.name


# what _infer_impl needs per inferred property: (check of a given value, graph inference,
# "is this one known", how a value is reported: shape tuple with () for unknown, numpy type)
_INFERENCE = {
    "shape": (_check_shape_arg, _graph.infer_shapes, _graph.shape_known,
              lambda shape: () if shape is None else tuple(shape)),
    "type": (_check_dtype_arg, _graph.infer_types, lambda dtype: dtype is not None,
             lambda dtype: None if dtype is None else np.dtype(dtype).type),
}


def _with_plain_keys(attrs):
    """The attributes with every hidden '__key__' also reported as 'key'."""
    out = dict(attrs)
    for key in HIDDEN_KEYS:
        dunder = "__%s__" % key
        if dunder in attrs:
            out[key] = attrs[dunder]
    return out


def _keyword_mismatch(where, kwargs, candidates):
    missing = [k for k in kwargs if k not in candidates]
    names = "".join("\n\t[%d]%s" % (i, n) for i, n in enumerate(candidates))
    raise MXNetError("%sKeyword argument name %s not found.\nCandidate arguments:%s"
                     % (where, ", ".join(missing), names))


def _copy_graph(outputs):
    """Deep copy of the graph under ``outputs``; returns the copied output entries."""
    memo = {}
    for node in _graph.topo_order(outputs):
        new = _graph.Node(node.op, node.name, dict(node.attrs))
        new.version = node.version
        new._p = node._p
        new.inputs = [(memo[id(src)], i, v) for src, i, v in node.inputs]
        new.control_deps = [memo[id(d)] for d in node.control_deps]
        memo[id(node)] = new
    return [(memo[id(n)], i, v) for n, i, v in outputs]


def _is_atomic(outputs):
    """True for the outputs of one operator node that has not been given its inputs."""
    node = outputs[0][0]
    return (node.op is not None and not node.inputs and len(node.input_names()) > 0
            and all(other is node for other, _, _ in outputs))


def _update_versions(node):
    """Record variable versions on the node's inputs; mutated (aux) inputs bump the version."""
    for slot, (src, i, _) in enumerate(node.inputs):
        if src.op is None:
            node.inputs[slot] = (src, i, src.version)
    for slot in node.aux_slots():
        src, i, _ = node.inputs[slot]
        if src.op is not None:
            raise MXNetError("Operator %s (node '%s'): input '%s' is mutated (an auxiliary "
                             "state), so it must be a Variable, not the output of %s"
                             % (node.op.name, node.name, node.input_names()[slot], src.name))
        src.version += 1
        node.inputs[slot] = (src, i, src.version)


def create_op_symbol(op_name, hint, args=(), params=None, kwargs=None, name=None, attr=None):
    """Create an operator node the way MXNet's generated ``sym.<op>`` functions do.

    ``args``: input symbols by position; ``kwargs``: input symbols by input name; ``params``:
    attribute values (stored as ``str(value)``; hidden keys dunder-ised); ``attr``: extra
    string attributes merged over the current AttrScope (they win over ``params``).
    """
    op = registry.get(op_name) if isinstance(op_name, str) else op_name
    kwargs = kwargs or {}
    values = dict(params or {})
    values.update(_attribute.current().get(attr))
    attrs = {}
    for key, value in values.items():
        attrs[_op_attr_key(key, value)] = _attr_text(op, key, value)
    if args and kwargs:
        raise TypeError("Operators with variable length input can only accept input Symbols "
                        "either as positional or keyword arguments, not both")
    node_name = _name.current().get(name, hint)
    node = _graph.Node(op, node_name, attrs)
    _attach_inputs(node, args, kwargs)
    return Symbol([(node, i, 0) for i in range(op.num_visible_outputs(node.params()))])


def _attach_inputs(node, args, kwargs):
    """Connect an operator node to its inputs: the symbols ``args`` in input order, then the
    symbols ``kwargs`` by input name; a missing input becomes a variable '<node name>_<input>'
    (or '<input>' for an unnamed node) that copies the node's attributes."""
    op = node.op
    names = op.list_inputs(node.params())
    if len(args) > len(names):
        raise MXNetError("Operator %s (node '%s'): too many inputs, requires %d (%s), provided "
                         "%d" % (op.name, node.name, len(names), ", ".join(names), len(args)))
    inputs = [_entry_of(s, "Argument %s(%d)" % (names[i], i)) for i, s in enumerate(args)]
    matched = 0
    for arg in names[len(args):]:
        given = kwargs.get(arg)
        if given is not None:
            inputs.append(_entry_of(given, "Argument %s" % arg))
            matched += 1
        else:
            var_name = "%s_%s" % (node.name, arg) if node.name else arg
            inputs.append((_graph.Node(None, var_name, dict(node.attrs)), 0, 0))
    if matched != len(kwargs):
        _keyword_mismatch("Symbol.Compose", kwargs, names[len(args):])
    node.inputs = inputs
    _update_versions(node)
    if op.input_init:
        for slot, arg in enumerate(names):
            init = op.input_init.get(arg)
            src = inputs[slot][0]
            if init is not None and src.op is None and "__init__" not in src.attrs:
                src.attrs["__init__"] = init


def _attr_text(op, key, value):
    """An attribute value as MXNet stores it: ``str(value)``, dtype names normalised, and
    numpy numbers written as the Python numbers they hold (numpy 2 would write
    ``(np.int64(0),)`` for a tuple of them where MXNet wrote ``(0,)``)."""
    if isinstance(value, string_types):
        return value
    decl = op.params.get(key)
    if isinstance(decl, registry.Dtype) and value is not None:
        try:
            return np.dtype(value).name
        except TypeError:
            return str(value)
    if isinstance(value, np.generic):
        return str(value.item())
    if isinstance(value, (tuple, list)):
        return str(type(value)(v.item() if isinstance(v, np.generic) else v for v in value))
    return str(value)


def _op_call(op_name, *args, **kwargs):
    """Call the generated ``sym.<op_name>`` function."""
    return _HOOKS["op_function"](op_name)(*args, **kwargs)


# ---------------------------------------------------------------------------------------------
# fluent methods: x.reshape(...) == sym.reshape(x, ...)
# ---------------------------------------------------------------------------------------------
_FLUENT = ("reshape", "reshape_like", "zeros_like", "ones_like", "broadcast_axes", "repeat",
           "pad", "swapaxes", "split", "split_v2", "slice", "slice_axis", "slice_like", "take",
           "one_hot", "pick", "sort", "topk", "argsort", "argmax", "argmax_channel", "argmin",
           "clip", "abs", "sign", "shape_array", "size_array", "broadcast_to", "broadcast_like",
           "tile", "transpose", "flip", "depth_to_space", "space_to_depth", "diag", "sum",
           "nansum", "prod", "nanprod", "mean", "max", "min", "norm", "round", "rint", "fix",
           "floor", "ceil", "trunc", "sin", "cos", "tan", "arcsin", "arccos", "arctan",
           "degrees", "radians", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "exp",
           "expm1", "log", "log10", "log2", "log1p", "sqrt", "rsqrt", "cbrt", "rcbrt", "square",
           "reciprocal", "relu", "sigmoid", "softmax", "log_softmax", "softmin")


def _make_fluent(op_name):
    def method(self, *args, **kwargs):
        return _op_call(op_name, self, *args, **kwargs)
    method.__name__ = op_name
    method.__doc__ = "Convenience fluent method for :py:func:`%s`." % op_name
    return method


for _fluent_name in _FLUENT:
    setattr(Symbol, _fluent_name, _make_fluent(_fluent_name))


def _ndarray_only(name):
    """A Symbol method for an NDArray method that has no meaning on a graph node."""
    def method(self):
        raise NotImplementedForSymbol(getattr(self, name), None)
    method.__name__ = name
    method.__doc__ = "Available on NDArray only; raises NotImplementedForSymbol."
    return method


for _nd_method in ("wait_to_read", "asnumpy", "asscalar", "as_in_context", "detach", "backward"):
    setattr(Symbol, _nd_method, _ndarray_only(_nd_method))
del _nd_method


# Binary operators: method -> (operator with a Symbol operand, its name hint, operator with a
# number operand, its name hint); reflected ones (``2 - x``) take only a number.
_BINARY_OPERATORS = {
    "__add__": ("elemwise_add", "_plus", "_plus_scalar", "_plusscalar"),
    "__sub__": ("elemwise_sub", "_minus", "_minus_scalar", "_minusscalar"),
    "__mul__": ("elemwise_mul", "_mul", "_mul_scalar", "_mulscalar"),
    "__truediv__": ("elemwise_div", "_div", "_div_scalar", "_divscalar"),
    "__mod__": ("_mod", "_mod", "_mod_scalar", "_modscalar"),
    "__pow__": ("_power", "_power", "_power_scalar", "_powerscalar"),
    "__eq__": ("_equal", "_equal", "_equal_scalar", "_equal_scalar"),
    "__ne__": ("_not_equal", "_not_equal", "_not_equal_scalar", "_not_equal_scalar"),
    "__gt__": ("_greater", "_greater", "_greater_scalar", "_greater_scalar"),
    "__ge__": ("_greater_equal", "_greater_equal", "_greater_equal_scalar",
               "_greater_equal_scalar"),
    "__lt__": ("_lesser", "_lesser", "_lesser_scalar", "_lesser_scalar"),
    "__le__": ("_lesser_equal", "_lesser_equal", "_lesser_equal_scalar", "_lesser_equal_scalar"),
}
_REFLECTED_OPERATORS = {
    "__rsub__": ("_rminus_scalar", "_rminusscalar"),
    "__rtruediv__": ("_rdiv_scalar", "_rdivscalar"),
    "__rmod__": ("_rmod_scalar", "_rmodscalar"),
    "__rpow__": ("_rpower_scalar", "_rpower_scalar"),
}
# In-place operators: a Symbol is immutable, so each raises NotImplementedForSymbol.
_IN_PLACE_OPERATORS = {"__iadd__": "+=", "__isub__": "-=", "__imul__": "*=",
                       "__itruediv__": "/=", "__imod__": "%="}


def _operator_method(name, body):
    body.__name__ = name
    body.__qualname__ = "Symbol." + name
    setattr(Symbol, name, body)


def _binary_operator(ops):
    return lambda self, other: self._binary(other, *ops)


def _reflected_operator(ops):
    return lambda self, other: self._rscalar(other, *ops)


def _in_place_operator(name, text):
    def refuse(self, other):
        raise NotImplementedForSymbol(getattr(self, name), text, other, 1)
    return refuse


for _method, _ops in _BINARY_OPERATORS.items():
    _operator_method(_method, _binary_operator(_ops))
for _method, _ops in _REFLECTED_OPERATORS.items():
    _operator_method(_method, _reflected_operator(_ops))
for _method, _text in _IN_PLACE_OPERATORS.items():
    _operator_method(_method, _in_place_operator(_method, _text))
Symbol.__div__ = Symbol.__truediv__
Symbol.__rdiv__ = Symbol.__rtruediv__
del _method, _ops, _text


# ---------------------------------------------------------------------------------------------
# module-level functions
# ---------------------------------------------------------------------------------------------
def var(name, attr=None, shape=None, lr_mult=None, wd_mult=None, dtype=None, init=None,
        stype=None, **kwargs):
    """A variable (a free input of a graph), with optional shape/dtype/init attributes."""
    if not isinstance(name, string_types):
        raise TypeError("Expect a string for variable `name`")
    node = _graph.Node(None, name)
    ret = Symbol([(node, 0, 0)])
    attr = _attribute.current().get(attr)
    if shape is not None:
        # a bare int is a 1-D shape, as MXNet reads it (``shape=(1)`` is common in user code)
        dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
        if not isinstance(dims, (tuple, list)) or not all(
                isinstance(d, (int, np.integer)) for d in dims):
            raise TypeError("Variable %r: shape must be a tuple of ints, got %r" % (name, shape))
        attr["__shape__"] = str(shape)
    if lr_mult is not None:
        attr["__lr_mult__"] = str(lr_mult)
    if wd_mult is not None:
        attr["__wd_mult__"] = str(wd_mult)
    if dtype is not None:
        attr["__dtype__"] = str(DTYPE_NP_TO_MX[np.dtype(dtype).name])
    if init is not None:
        if not isinstance(init, string_types):
            init = init.dumps()
        attr["__init__"] = init
    if stype is not None:
        if stype not in _STORAGE_TYPE_STR_TO_ID:
            raise MXNetError("unknown storage type %r (expected one of default, row_sparse, "
                             "csr)" % (stype,))
        attr["__storage_type__"] = str(_STORAGE_TYPE_STR_TO_ID[stype])
    for key, value in kwargs.items():
        if key.startswith("__") and key.endswith("__"):
            attr[key] = str(value)
        else:
            raise ValueError("Attribute name=%s is not supported. Additional attributes must "
                             "start and end with double underscores, e.g, __yourattr__" % key)
    ret._set_attr(**attr)
    return ret


Variable = var


def Group(symbols, create_fn=Symbol):
    """One symbol whose outputs are the outputs of ``symbols`` in order."""
    if not symbols or any(not isinstance(s, Symbol) for s in symbols):
        raise TypeError("Expected a list of symbols as input")
    outputs = []
    for s in symbols:
        outputs.extend(s._outputs)
    return create_fn(outputs)


def load_json(json_str):
    """A symbol from its JSON text (any MXNet version's layout)."""
    if not isinstance(json_str, string_types):
        raise TypeError("fname required to be string")
    return Symbol(_json.loads(json_str))


def load(fname):
    """A symbol from a JSON file written by ``save`` (or by MXNet)."""
    if not isinstance(fname, string_types):
        raise TypeError("fname need to be string")
    with open(fname, encoding="utf-8") as f:
        return load_json(f.read())


def _ufunc(lhs, rhs, op_sym, hint_sym, op_scalar, hint_scalar, op_rscalar, hint_rscalar,
           py_fn):
    if isinstance(lhs, Symbol) and isinstance(rhs, Symbol):
        return create_op_symbol(op_sym, hint_sym, [lhs, rhs])
    if isinstance(lhs, Symbol) and isinstance(rhs, numbers.Number):
        return create_op_symbol(op_scalar, hint_scalar, [lhs], {"scalar": rhs})
    if isinstance(lhs, numbers.Number) and isinstance(rhs, Symbol):
        return create_op_symbol(op_rscalar, hint_rscalar, [rhs], {"scalar": lhs})
    if isinstance(lhs, numbers.Number) and isinstance(rhs, numbers.Number):
        return py_fn(lhs, rhs)
    raise TypeError("types (%s, %s) not supported" % (type(lhs), type(rhs)))


def pow(base, exp):  # noqa: A001  (MXNet's name)
    """base ** exp for symbols and/or numbers."""
    return _ufunc(base, exp, "_power", "_power", "_power_scalar", "_powerscalar",
                  "_rpower_scalar", "_rpowerscalar", lambda a, b: a ** b)


def power(base, exp):
    return pow(base, exp)


def maximum(left, right):
    return _ufunc(left, right, "_maximum", "_maximum", "_maximum_scalar", "_maximumscalar",
                  "_maximum_scalar", "_maximumscalar", lambda a, b: a if a > b else b)


def minimum(left, right):
    return _ufunc(left, right, "_minimum", "_minimum", "_minimum_scalar", "_minimumscalar",
                  "_minimum_scalar", "_minimumscalar", lambda a, b: a if a < b else b)


def hypot(left, right):
    return _ufunc(left, right, "_hypot", "_hypot", "_hypot_scalar", "_hypotscalar",
                  "_hypot_scalar", "_hypotscalar", lambda a, b: float(np.hypot(a, b)))


def zeros(shape, dtype=None, **kwargs):
    """A symbol of zeros (``_zeros``); 0 dims are filled by shape inference."""
    if dtype is None:
        dtype = np.float32
    return _op_call("_zeros", shape=shape, dtype=dtype, **kwargs)


def ones(shape, dtype=None, **kwargs):
    if dtype is None:
        dtype = np.float32
    return _op_call("_ones", shape=shape, dtype=dtype, **kwargs)


def full(shape, val, dtype=None, **kwargs):
    if dtype is None:
        dtype = np.float32
    return _op_call("_full", shape=shape, dtype=dtype, value=float(val), **kwargs)


def histogram(a, bins=10, range=None, **kwargs):  # noqa: A002 (MXNet's argument name)
    """(counts, bin edges) of the flattened ``a`` (``_histogram``): ``bins`` equal bins over
    ``range`` (required here), or the bins between the edges in the Symbol ``bins``."""
    if isinstance(bins, Symbol):
        return _op_call("_histogram", data=a, bins=bins, **kwargs)
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, bool):
        if range is None:
            raise ValueError("null range is not supported in symbol mode")
        return _op_call("_histogram", data=a, bin_cnt=int(bins), range=range, **kwargs)
    raise ValueError("bins argument should be either an integer or a Symbol")


def _without_amp_casts(text):
    """The Symbol of JSON graph ``text`` with its amp_cast/amp_multicast nodes bypassed."""
    import json
    graph = json.loads(text)
    nodes = graph["nodes"]
    source = {}                    # (node, output) of a cast -> the entry it passes on
    kept, new_id = [], {}

    def resolve(entry):
        key = (entry[0], entry[1])
        while key in source:
            key = source[key]
        return key

    for nid, node in enumerate(nodes):
        if node["op"] in ("amp_cast", "amp_multicast"):
            for i, inp in enumerate(node["inputs"]):
                source[(nid, i if node["op"] == "amp_multicast" else 0)] = resolve(inp)
            continue
        node = dict(node, inputs=[[new_id[k[0]], k[1], 0] for k in map(resolve, node["inputs"])])
        new_id[nid] = len(kept)
        kept.append(node)
    heads = [[new_id[k[0]], k[1], 0] for k in map(resolve, graph["heads"])]
    out = {"nodes": kept, "arg_nodes": [i for i, n in enumerate(kept) if n["op"] == "null"],
           "heads": heads, "attrs": graph.get("attrs", {})}
    return load_json(json.dumps(out))
