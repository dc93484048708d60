"""``contrib`` operators: quadratic, div_sqrt_dim, allclose, quantize / dequantize and the
interleaved attention products of MXNet 1.9.1 (``mx.nd.contrib.X``, registered as
``_contrib_X``).

The interleaved products read the projections of a transformer layer in the (sequence, batch,
features) layout MXNet's fused attention uses: ``queries_keys_values`` holds, per head, the
query, key and value blocks of ``head_dim`` features one after another (heads * 3 * head_dim
features), ``keys_values`` the key and value blocks (heads * 2 * head_dim), ``queries`` one
block per head. Attention scores are (batch * heads, query length, key length), the batch
outer. They run as strided copies (``k.strided_gather`` / ``k.strided_scatter``) around
batched matrix products (``k.matmul_batched``).
"""
import math

from .common import zero_grads
from .conv import scratch
from .registry import Bool, Enum, Float, Int, Operator, register


class _ContribOp(Operator):
    @property
    def hint(self):
        """Nodes made by ``sym.contrib.X`` are named like MXNet's: X0, X1, ..."""
        return self.name[len("_contrib_"):]


class _SameShapeOp(_ContribOp):
    """One input, one output of its shape and dtype."""

    def infer_shape(self, p, in_shapes):
        return list(in_shapes), [in_shapes[0]]

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        return [in_shapes[0] if in_shapes[0] is not None else out_shapes[0]]


@register
class Quadratic(_SameShapeOp):
    """out = a x^2 + b x + c, element-wise. A csr or row_sparse input keeps its storage type
    when c = 0 (zeros stay zeros)."""
    name = "_contrib_quadratic"
    params = {"a": Float(0.0, doc="Coefficient of the quadratic term in the quadratic "
                                  "function."),
              "b": Float(0.0, doc="Coefficient of the linear term in the quadratic function."),
              "c": Float(0.0, doc="Constant term in the quadratic function.")}

    def infer_storage_type(self, p, in_stypes):
        stype = in_stypes[0]
        return [stype if stype in ("csr", "row_sparse") and p.c == 0.0 else "default"]

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.contrib_quadratic(inputs[0], outputs[0], p.a, p.b, p.c)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if out_grads[0] is None:
            return zero_grads(k, in_grads, req)
        k.contrib_quadratic_backward(inputs[0], out_grads[0], in_grads[0], p.a, p.b, req[0])


@register
class DivSqrtDim(_SameShapeOp):
    """out = data / sqrt(the size of data's last axis)."""
    name = "_contrib_div_sqrt_dim"
    params = {}

    @staticmethod
    def factor(x):
        return 1.0 / math.sqrt(tuple(x.shape)[-1])

    def infer_shape(self, p, in_shapes):
        s = in_shapes[0]
        if s is not None and len(s) == 0:
            raise self.error("data must have at least one dimension, got shape %s", s)
        return list(in_shapes), [s]

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.elemwise_scalar("mul", inputs[0], self.factor(inputs[0]), outputs[0])

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if out_grads[0] is None:
            return zero_grads(k, in_grads, req)
        k.elemwise_scalar_backward("mul", inputs[0], self.factor(inputs[0]), out_grads[0],
                                   in_grads[0], req[0])


@register
class Allclose(_ContribOp):
    """1 (uint8) when every element of a is close to b's (|a - b| <= atol + rtol |b|), else 0,
    as a 0-d array (MXNet 1.9.1's result; its own test formats the value as a scalar). lightmod's
    graphs read an empty shape as "unknown" (MXNet's legacy shape rule), so only the
    imperative ``nd.contrib.allclose`` works: binding the symbol fails."""
    name = "_contrib_allclose"
    inputs = ("a", "b")
    params = {"rtol": Float(1e-05, doc="Relative tolerance."),
              "atol": Float(1e-08, doc="Absolute tolerance."),
              "equal_nan": Bool(True, doc="Whether to compare NaN's as equal. If True, NaN's "
                                          "in A will be considered equal to NaN's in B in the "
                                          "output array.")}

    def infer_shape(self, p, in_shapes):
        a, b = in_shapes
        if a is not None and b is not None and tuple(a) != tuple(b):
            raise self.error("inputs 'a' %s and 'b' %s must have the same shape", tuple(a),
                             tuple(b))
        return [a or b, b or a], [()]

    def infer_type(self, p, in_types):
        return list(in_types), ["uint8"]

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.contrib_allclose(inputs[0], inputs[1], outputs[0], p.rtol, p.atol, p.equal_nan)

    def has_backward(self, p):
        return False

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        zero_grads(k, in_grads, req)


# ---------------------------------------------------------------------------------------------
# quantize, dequantize
# ---------------------------------------------------------------------------------------------
class _Ranged(_ContribOp):
    """data plus its real range as two one-element arrays."""
    inputs = ("data", "min_range", "max_range")

    def check_ranges(self, in_shapes):
        for name, s in zip(self.inputs[1:], in_shapes[1:]):
            if s is not None and tuple(s) != (1,):
                raise self.error("%s must have shape (1,), got %s", name, tuple(s))

    def has_backward(self, p):
        return False

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        zero_grads(k, in_grads, req)


@register
class Quantize(_Ranged):
    """Codes of float32 data for the real range [min_range, max_range]: int8 codes cover
    [-r, r] with r = max(|min_range|, |max_range|) (x * 127 / r, rounded half away from zero),
    uint8 codes [0, r] (x * 255 / r). Outputs the codes and the range they stand for."""
    name = "_contrib_quantize"
    params = {"out_type": Enum("int8", "uint8", default="uint8",
                               doc="Output data type.")}

    def num_outputs(self, p):
        return 3

    def infer_shape(self, p, in_shapes):
        self.check_ranges(in_shapes)
        return [in_shapes[0], (1,), (1,)], [in_shapes[0], (1,), (1,)]

    def infer_type(self, p, in_types):
        for name, t in zip(self.inputs, in_types):
            if t is not None and t != "float32":
                raise self.error("%s must be float32, got %s", name, t)
        return ["float32"] * 3, [p.out_type, "float32", "float32"]

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.contrib_quantize(inputs[0], inputs[1], inputs[2], outputs[0], outputs[1], outputs[2])


@register
class Dequantize(_Ranged):
    """float32 values of int8 / uint8 codes for the range [min_range, max_range]: code *
    max(|min_range|, |max_range|) / 127.5 (int8) or / 255.5 (uint8), as MXNet 1.9.1's CPU
    dequantize computes them."""
    name = "_contrib_dequantize"
    params = {"out_type": Enum("float32", default="float32", doc="Output data type.")}

    def infer_shape(self, p, in_shapes):
        self.check_ranges(in_shapes)
        return [in_shapes[0], (1,), (1,)], [in_shapes[0]]

    def infer_type(self, p, in_types):
        t = in_types[0]
        if t is not None and t not in ("int8", "uint8"):
            raise self.error("data must be int8 or uint8 codes, got %s", t)
        return [t, "float32", "float32"], ["float32"]

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.contrib_dequantize(inputs[0], inputs[1], inputs[2], outputs[0])


# ---------------------------------------------------------------------------------------------
# interleaved attention products
# ---------------------------------------------------------------------------------------------
def _heads_view(seq, batch, heads, blocks, dim, index):
    """(offset, shape, strides) that read block ``index`` of the ``blocks`` per-head blocks of
    a (seq, batch, heads * blocks * dim) array in the order (batch, heads, seq, dim)."""
    row = heads * blocks * dim
    return index * dim, (batch, heads, seq, dim), (row, blocks * dim, batch * row, 1)


class _Interleaved(_ContribOp):
    params = {"heads": Int(doc="Set number of heads")}
    blocks = (3, 3)        # per-head blocks of the first and second input (0: attention)

    def check_params(self, p):
        if p.heads <= 0:
            raise self.error("heads must be positive, got %d", p.heads)

    def projection(self, p, name, s, blocks):
        """(seq, batch, head_dim) of a projection input; raises naming it on a bad shape."""
        if len(s) != 3:
            raise self.error("%s must be 3-dimensional (sequence, batch, features), got %s",
                             name, tuple(s))
        if s[2] % (p.heads * blocks):
            raise self.error("%s has %d features, not a multiple of heads (%d) * %d", name,
                             s[2], p.heads, blocks)
        return s[0], s[1], s[2] // (p.heads * blocks)

    def infer_type(self, p, in_types):
        dtype = next((t for t in in_types if t is not None), None)
        return [dtype] * len(in_types), [dtype]

    def gather(self, k, state, key, x, p, seq, batch, dim, blocks, index):
        offset, shape, strides = _heads_view(seq, batch, p.heads, blocks, dim, index)
        buf = scratch(k, state, key, (batch * p.heads, seq, dim), x.dtype)
        k.strided_gather(buf, x, offset, shape, strides, "write")
        return buf

    def scatter(self, k, dst, src, p, seq, batch, dim, blocks, index, req):
        offset, shape, strides = _heads_view(seq, batch, p.heads, blocks, dim, index)
        k.strided_scatter(dst, src, offset, shape, strides, req)

    @staticmethod
    def clear(k, grad, req):
        """A gradient input whose blocks are written one by one starts from zeros ('write')."""
        if req == "write":
            k.fill(grad, 0.0)
        return "add" if req == "add" else "write"


class _QK(_Interleaved):
    """Attention scores q k^T / sqrt(head_dim) per (batch, head)."""

    # where the queries and the keys are: (input, per-head blocks of that input, block index)
    layout = ()

    def sides(self, p, in_shapes):
        """((seq_q, batch, dim, blocks, index) of the queries, the same of the keys)."""
        return tuple(self.projection(p, self.inputs[i], in_shapes[i], blocks) + (blocks, index)
                     for i, blocks, index in self.layout)

    def infer_shape(self, p, in_shapes):
        if any(s is None for s in in_shapes):
            return list(in_shapes), [None]
        (lq, batch, dim, _, _), (lk, batch_k, dim_k, _, _) = self.sides(p, in_shapes)
        if batch != batch_k or dim != dim_k:
            raise self.error("queries %s and keys %s disagree on batch size or head size",
                             tuple(in_shapes[0]), tuple(in_shapes[-1]))
        return list(in_shapes), [(batch * p.heads, lq, lk)]

    def operands(self, k, state, p, inputs):
        shapes = [tuple(x.shape) for x in inputs]
        q_side, k_side = self.sides(p, shapes)
        q = self.gather(k, state, "q", inputs[0], p, q_side[0], q_side[1], q_side[2],
                        q_side[3], q_side[4])
        key = self.gather(k, state, "k", inputs[-1], p, k_side[0], k_side[1], k_side[2],
                          k_side[3], k_side[4])
        return q, key, q_side, k_side, 1.0 / math.sqrt(q_side[2])

    def forward(self, p, k, inputs, outputs, is_train, state):
        q, key, _, _, scale = self.operands(k, state, p, inputs)
        k.matmul_batched(outputs[0], q, key, False, True, "write")
        k.linalg_axpby(outputs[0], outputs[0], scale, 0.0)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if out_grads[0] is None:
            return zero_grads(k, in_grads, req)
        q, key, q_side, k_side, scale = self.operands(k, state, p, inputs)
        g = out_grads[0]
        dq = scratch(k, state, "dq", q.shape, q.dtype)
        dk = scratch(k, state, "dk", key.shape, key.dtype)
        k.matmul_batched(dq, g, key, False, False, "write")
        k.matmul_batched(dk, g, q, True, False, "write")
        k.linalg_axpby(dq, dq, scale, 0.0)
        k.linalg_axpby(dk, dk, scale, 0.0)
        if len(inputs) == 1:            # queries and keys interleaved in one input
            if req[0] != "null":
                mode = self.clear(k, in_grads[0], req[0])
                self.scatter(k, in_grads[0], dq, p, *q_side, mode)
                self.scatter(k, in_grads[0], dk, p, *k_side, mode)
            return
        if req[0] != "null":
            self.scatter(k, in_grads[0], dq, p, *q_side, req[0])
        if req[1] != "null":
            mode = self.clear(k, in_grads[1], req[1])
            self.scatter(k, in_grads[1], dk, p, *k_side, mode)


class _ValAtt(_Interleaved):
    """Attention-weighted values: out (seq_q, batch, heads * head_dim)."""
    inputs = ("keys_values", "attention")
    blocks_values = 2     # per-head blocks of the first input
    value_index = 1       # the block holding the values

    def infer_shape(self, p, in_shapes):
        values, att = in_shapes
        if values is None or att is None:
            return list(in_shapes), [None]
        lk, batch, dim = self.projection(p, self.inputs[0], values, self.blocks_values)
        if len(att) != 3 or att[0] != batch * p.heads or att[2] != lk:
            raise self.error("attention has shape %s, expected (batch * heads, query length, "
                             "%d) = (%d, ..., %d) for %s %s", tuple(att), lk, batch * p.heads,
                             lk, self.inputs[0], tuple(values))
        return list(in_shapes), [(att[1], batch, p.heads * dim)]

    def geometry(self, p, inputs):
        lk, batch, dim = self.projection(p, self.inputs[0], tuple(inputs[0].shape),
                                         self.blocks_values)
        return lk, batch, dim, tuple(inputs[1].shape)[1]

    def forward(self, p, k, inputs, outputs, is_train, state):
        lk, batch, dim, lq = self.geometry(p, inputs)
        v = self.gather(k, state, "v", inputs[0], p, lk, batch, dim, self.blocks_values,
                        self.value_index)
        o = scratch(k, state, "o", (batch * p.heads, lq, dim), v.dtype)
        k.matmul_batched(o, inputs[1], v, False, False, "write")
        self.scatter(k, outputs[0], o, p, lq, batch, dim, 1, 0, "write")

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if out_grads[0] is None:
            return zero_grads(k, in_grads, req)
        lk, batch, dim, lq = self.geometry(p, inputs)
        v = self.gather(k, state, "v", inputs[0], p, lk, batch, dim, self.blocks_values,
                        self.value_index)
        go = self.gather(k, state, "go", out_grads[0], p, lq, batch, dim, 1, 0)
        if req[1] != "null":
            k.matmul_batched(in_grads[1], go, v, False, True, req[1])
        if req[0] != "null":
            dv = scratch(k, state, "dv", v.shape, v.dtype)
            k.matmul_batched(dv, inputs[1], go, True, False, "write")
            mode = self.clear(k, in_grads[0], req[0])
            self.scatter(k, in_grads[0], dv, p, lk, batch, dim, self.blocks_values,
                         self.value_index, mode)


def _declare_attention(kind, qk_inputs, qk_layout, value_blocks, value_index):
    """Register ``_contrib_interleaved_matmul_<kind>_qk`` (inputs ``qk_inputs``, queries and
    keys where ``qk_layout`` says) and ``..._valatt`` (the last of them, holding the values as
    block ``value_index`` of ``value_blocks`` per head, and the attention)."""
    prefix = "_contrib_interleaved_matmul_%s_" % kind
    register(type("Interleaved%sQK" % kind.title(), (_QK,), {
        "name": prefix + "qk", "inputs": qk_inputs, "layout": qk_layout}))
    register(type("Interleaved%sValAtt" % kind.title(), (_ValAtt,), {
        "name": prefix + "valatt", "inputs": (qk_inputs[-1], "attention"),
        "blocks_values": value_blocks, "value_index": value_index}))


# self-attention: queries, keys and values interleaved per head in one projection
_declare_attention("selfatt", ("queries_keys_values",), ((0, 3, 0), (0, 3, 1)), 3, 2)
# encoder-decoder: the queries alone, keys and values interleaved per head
_declare_attention("encdec", ("queries", "keys_values"), ((0, 1, 0), (1, 2, 0)), 2, 1)

