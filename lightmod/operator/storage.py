"""Storage-type inference: which storage type ('default', 'row_sparse', 'csr') each operator
output gets from the storage types of its inputs, as MXNet 1.9.1 decides it.

lightmod keeps the values of every array dense, so a storage type is a label: it picks the
array class (``CSRNDArray``, ``RowSparseNDArray``), what ``indices``/``indptr`` report, how
``.params`` files store the array, and the dispatch of the few operators whose result depends
on it (lazy optimizer updates, ``_sparse_retain``, the ``_scatter_*`` operators). The rules
are MXNet's: an operator keeps a sparse storage type only where its result is zero wherever
the sparse input is (``square`` of a csr array is csr, ``exp`` is dense), and everything else
falls back to 'default'. ``tests/fixtures/sparse_stype_golden.json`` holds MXNet's answers
for every rule below.

An operator may declare its own ``infer_storage_type(p, in_stypes)``; otherwise the tables
here decide, and an operator found in none of them gives 'default' outputs. A rule raises
MXNetError where MXNet refuses the combination (``BatchNorm(fix_gamma=True)`` on sparse
inputs, ``clip`` of a sparse array whose range excludes 0, ``broadcast_div`` of a csr array by
a dense one of the same shape).
"""
import operator as _operator

from ..base import MXNetError

__all__ = ["output_stypes", "infer_graph_stypes"]

DEFAULT, ROW_SPARSE, CSR = "default", "row_sparse", "csr"
_SPARSE = (ROW_SPARSE, CSR)

# zero in, zero out (one array input, scalars aside): a sparse input keeps its storage type
_KEEPS_INPUT_STYPE = frozenset([
    "abs", "sign", "round", "rint", "ceil", "floor", "trunc", "fix", "square", "sqrt", "relu",
    "sin", "tan", "sinh", "tanh", "arcsin", "arctan", "arcsinh", "arctanh", "expm1", "log1p",
    "degrees", "radians", "cbrt", "negative", "zeros_like", "_copy", "BlockGrad",
    "_scatter_plus_scalar", "_scatter_minus_scalar", "_mul_scalar", "_div_scalar"])

# x op scalar stays sparse when 0 op scalar is 0 (false, for a comparison)
_COMPARE_SCALAR = {"_equal_scalar": _operator.eq, "_not_equal_scalar": _operator.ne,
                   "_greater_scalar": _operator.gt, "_greater_equal_scalar": _operator.ge,
                   "_lesser_scalar": _operator.lt, "_lesser_equal_scalar": _operator.le}


def _first_sparse(in_stypes):
    return in_stypes[0] if in_stypes and in_stypes[0] in _SPARSE else DEFAULT


def _keep(op, p, in_stypes):
    return _first_sparse(in_stypes)


def _additive_scalar(op, p, in_stypes):
    return _first_sparse(in_stypes) if p.scalar == 0 else DEFAULT


def _compare_scalar(op, p, in_stypes):
    zero_result = _COMPARE_SCALAR[op.name](0.0, p.scalar)
    return DEFAULT if zero_result else _first_sparse(in_stypes)


def _clip(op, p, in_stypes):
    stype = _first_sparse(in_stypes)
    if stype != DEFAULT and not p.a_min <= 0 <= p.a_max:
        raise MXNetError("clip: a %s input needs a_min <= 0 <= a_max so that its zeros stay "
                         "zero, got a_min=%s, a_max=%s" % (stype, p.a_min, p.a_max))
    return stype


def _both_same_sparse(op, p, in_stypes):
    # rsp + rsp and csr + csr stay sparse (also max, min, hypot); a dense operand: dense
    lhs, rhs = in_stypes
    return lhs if lhs == rhs and lhs in _SPARSE else DEFAULT


def _elemwise_mul(op, p, in_stypes):
    # the product is zero wherever either factor is: one sparse factor is enough
    lhs, rhs = in_stypes
    if lhs in _SPARSE and rhs in (lhs, DEFAULT):
        return lhs
    if rhs in _SPARSE and lhs == DEFAULT:
        return rhs
    return DEFAULT


def _scatter_div(op, p, in_stypes):
    # only a row_sparse left operand scatters; its rows decide the result's
    return ROW_SPARSE if in_stypes[0] == ROW_SPARSE else DEFAULT


def _broadcast_mul_div(op, p, in_stypes):
    # csr (*|/) dense row, column or scalar: zero stays zero
    lhs, rhs = in_stypes
    return CSR if lhs == CSR and rhs == DEFAULT else DEFAULT


def _add_n(op, p, in_stypes):
    return ROW_SPARSE if in_stypes and all(s == ROW_SPARSE for s in in_stypes) else DEFAULT


def _square_sum(op, p, in_stypes):
    # lightmod also sums dense and csr input (MXNet refuses them); their result is dense
    axis = tuple(p.axis) if p.axis is not None else None
    if in_stypes[0] == ROW_SPARSE and axis in ((1,), (-1,)) and p.keepdims:
        return ROW_SPARSE
    return DEFAULT


def _dot(op, p, in_stypes):
    lhs, rhs = in_stypes
    if lhs == CSR and rhs == DEFAULT and p.transpose_a:
        return ROW_SPARSE          # csr.T . dense: only the columns csr uses are non-zero
    if lhs == DEFAULT and rhs == CSR and not p.transpose_a:
        return CSR
    return DEFAULT


def _slice(op, p, in_stypes):
    unit_steps = all(s in (None, 1) for s in (p.step or ()))
    return CSR if in_stypes[0] == CSR and unit_steps else DEFAULT


def _take(op, p, in_stypes):
    return CSR if in_stypes[0] == CSR and p.axis == 0 else DEFAULT


def _concat(op, p, in_stypes):
    return CSR if in_stypes and all(s == CSR for s in in_stypes) and p.dim == 0 else DEFAULT


def _batch_norm(op, p, in_stypes):
    if p.fix_gamma and any(s != DEFAULT for s in in_stypes):
        raise MXNetError("BatchNorm: fix_gamma=True is not supported for sparse inputs "
                         "(input storage types: %s)" % ", ".join(in_stypes))
    return DEFAULT


_RULES = {"_plus_scalar": _additive_scalar, "_minus_scalar": _additive_scalar,
          "clip": _clip, "elemwise_add": _both_same_sparse, "elemwise_sub": _both_same_sparse,
          "_maximum": _both_same_sparse, "_minimum": _both_same_sparse,
          "_hypot": _both_same_sparse,
          "elemwise_mul": _elemwise_mul, "_scatter_elemwise_div": _scatter_div,
          "broadcast_mul": _broadcast_mul_div, "broadcast_div": _broadcast_mul_div,
          "add_n": _add_n, "_square_sum": _square_sum, "dot": _dot, "slice": _slice,
          "take": _take, "Concat": _concat,
          "BatchNorm": _batch_norm}
_RULES.update((name, _keep) for name in _KEEPS_INPUT_STYPE)
_RULES.update((name, _compare_scalar) for name in _COMPARE_SCALAR)


def output_stypes(op, p, in_stypes, in_shapes=None):
    """The storage type of every output of ``op`` (parsed parameters ``p``) for inputs of
    storage types ``in_stypes``; ``in_shapes`` lets a rule refuse a shape combination."""
    n = op.num_outputs(p)
    hook = getattr(op, "infer_storage_type", None)
    if hook is not None:
        stypes = list(hook(p, list(in_stypes)))
        return stypes + [DEFAULT] * (n - len(stypes))
    rule = _RULES.get(op.name)
    first = rule(op, p, list(in_stypes)) if rule is not None else DEFAULT
    if (op.name == "broadcast_div" and first == CSR and in_shapes is not None
            and tuple(in_shapes[0]) == tuple(in_shapes[1])):
        raise MXNetError("broadcast_div: a csr array divided by a dense array of the same "
                         "shape %s: use elemwise_div" % (tuple(in_shapes[0]),))
    return [first] + [DEFAULT] * (n - 1)


def infer_graph_stypes(g, var_stypes, shapes=None):
    """The storage type of every entry of an indexed graph ``g`` (the executor's
    ``IndexedGraph``), given ``{variable node id: stype}`` and optionally every entry's shape.
    An operator that refuses its input storage types raises MXNetError naming the node."""
    stypes = [DEFAULT] * g.num_entries
    for nid, stype in var_stypes.items():
        stypes[g.entry_start[nid]] = stype
    for nid in g.op_nids:
        node = g.nodes[nid]
        ins = [stypes[e] for e in g.node_inputs[nid]]
        in_shapes = None if shapes is None else [shapes[e] for e in g.node_inputs[nid]]
        try:
            outs = output_stypes(node.op, g.params[nid], ins, in_shapes)
        except MXNetError as err:
            raise MXNetError("Error in operator %s: %s" % (node.name, err)) from None
        start = g.entry_start[nid]
        stypes[start:start + len(outs)] = outs
    return stypes
