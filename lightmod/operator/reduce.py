"""The reduction family: axis reductions (sum, mean, max, min, prod, nansum, nanprod, norm,
_square_sum), matrix products (dot, batch_dot) and broadcasting to a shape.

A reduction is run on a collapsed view of its input (``tensor.reduce_plan``) by
``k.reduce_axes``; its gradient is one fused kernel, ``k.reduce_axes_backward``, that
broadcasts the head gradient and multiplies by the per-element derivative (MXNet's rules: max
and min send it to every element equal to the result, prod uses out / x). Matrix products are
``k.matmul_batched`` on 3-d views (batch, rows, cols); transposes are flags, never copies.
"""
from .common import data_grad_needed, zero_grads
from .registry import Bool, Dtype, Enum, Int, Shape, register
from .tensor import _TensorOp, contiguous_strides, reduce_plan, shape_size

__all__ = []

# reduction kinds: the codes of kernels/scalar_tensor.py (R_*), repeated here because operators
# may not import kernels at module level; tests check that the two agree.
R_SUM, R_MEAN, R_PROD, R_MAX, R_MIN, R_NANSUM, R_NANPROD, R_SUMSQ, R_NORM1, R_NORM2, \
    R_NONFINITE = range(11)


# ---------------------------------------------------------------------------------------------
# axis reductions
# ---------------------------------------------------------------------------------------------
class _Reduce(_TensorOp):
    kind = R_SUM
    params = {"axis": Shape(None, doc="Axes to reduce (None or (): all of them)"),
              "keepdims": Bool(False, doc="Keep the reduced axes as size-1 dims"),
              "exclude": Bool(False, doc="Reduce over every axis NOT in axis")}

    def axes_param(self, p):
        """The axes as given (the parameter is ``axis`` here, ``axes`` in moments)."""
        return p.axis

    def reduced_axes(self, p, shape):
        """The sorted tuple of reduced axes of an input of ``shape`` (errors name axis)."""
        nd = len(shape)
        given = self.axes_param(p)
        if not given:
            return tuple(range(nd))
        axes = []
        for a in given:
            if a is None or not -nd <= a < nd:
                raise self.error("reduction axis %s exceeds the dims of input of shape %s",
                                 a, tuple(shape))
            axes.append(a + nd if a < 0 else a)
        if len(set(axes)) != len(axes):
            raise self.error("reduction axes have duplicates: axis=%s (input shape %s)",
                             given, tuple(shape))
        if p.get("exclude"):
            axes = [a for a in range(nd) if a not in axes]
        return tuple(sorted(axes))

    def infer_shape(self, p, in_shapes):
        s = in_shapes[0]
        if s is None:
            return [None], [None]
        axes = self.reduced_axes(p, s)
        if p.keepdims:
            out = tuple(1 if i in axes else d for i, d in enumerate(s))
        else:
            out = tuple(d for i, d in enumerate(s) if i not in axes)
        return [s], [out or (1,)]

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        s, out = in_shapes[0], out_shapes[0]
        if s is None or out is None:
            return in_shapes
        axes = self.reduced_axes(p, s)
        kept = [i for i in range(len(s)) if i not in axes]
        if p.keepdims:
            vals = [out[i] for i in kept] if len(out) == len(s) else None
        else:
            vals = list(out) if len(out) == len(kept) else None
        if vals is None:
            return in_shapes
        back = list(s)
        for i, d in zip(kept, vals):
            back[i] = d
        return [self.merge(s, tuple(back), "input 'data' vs the reduced output")]

    def kind_for(self, p):
        return self.kind

    def plan(self, p, shape):
        return reduce_plan(tuple(shape), self.reduced_axes(p, shape))

    def forward(self, p, k, inputs, outputs, is_train, state):
        cshape, raxes = self.plan(p, inputs[0].shape)
        k.reduce_axes(outputs[0], inputs[0], cshape, raxes, self.kind_for(p), "write")

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if not data_grad_needed(k, out_grads, in_grads, req):
            return
        cshape, raxes = self.plan(p, inputs[0].shape)
        k.reduce_axes_backward(in_grads[0], out_grads[0], inputs[0], outputs[0], cshape, raxes,
                               self.kind_for(p), req[0])


def _declare(name, kind, aliases=()):
    cls = type("_op_" + name.strip("_"), (_Reduce,),
               dict(name=name, kind=kind, aliases=tuple(aliases)))
    register(cls)
    return cls


_declare("sum", R_SUM, ("sum_axis",))
_declare("mean", R_MEAN)
_declare("max", R_MAX, ("max_axis",))
_declare("min", R_MIN, ("min_axis",))
_declare("prod", R_PROD)
_declare("nansum", R_NANSUM)
_declare("nanprod", R_NANPROD)
_declare("_square_sum", R_SUMSQ)


@register
class Norm(_Reduce):
    name = "norm"
    params = {"ord": Int(2, doc="Order of the norm (1 or 2)"),
              "axis": Shape(None, doc="Axes to reduce (None: all of them)"),
              "out_dtype": Dtype(None, none_ok=True, doc="Type of the result (None: the input's)"),
              "keepdims": Bool(False, doc="Keep the reduced axes as size-1 dims")}

    def check_params(self, p):
        if p.ord not in (1, 2):
            raise self.error("ord=%d is not supported: norm only supports ord=1 and ord=2",
                             p.ord)

    def kind_for(self, p):
        return R_NORM1 if p.ord == 1 else R_NORM2

    def infer_type(self, p, in_types):
        t = in_types[0]
        return [t], [p.out_dtype or t]


# ---------------------------------------------------------------------------------------------
# dot, batch_dot
# ---------------------------------------------------------------------------------------------
class _Product(_TensorOp):
    inputs = ("lhs", "rhs")
    params = {"transpose_a": Bool(False, doc="Use the transpose of lhs"),
              "transpose_b": Bool(False, doc="Use the transpose of rhs"),
              "forward_stype": Enum("csr", "default", "row_sparse", default=None, none_ok=True,
                                    doc="Storage type of the output (dense here)")}

    def shape_error(self, a, b, p, why):
        return self.error("shape mismatch (%s): lhs %s X rhs %s, transpose_a=%s, "
                          "transpose_b=%s", why, a, b, p.transpose_a, p.transpose_b)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if out_grads[0] is None:
            return zero_grads(k, in_grads, req)
        a, b, g = self.views(p, inputs[0], inputs[1], out_grads[0])
        ta, tb = self.flags(p, inputs[0], inputs[1])
        # c = op(a) op(b):  da = g op(b)^T (or op(b) g^T when a is transposed), likewise db
        if req[0] != "null":
            da = self.view_like(in_grads[0], a)
            if ta:
                k.matmul_batched(da, b, g, tb, True, req[0])
            else:
                k.matmul_batched(da, g, b, False, not tb, req[0])
        if req[1] != "null":
            db = self.view_like(in_grads[1], b)
            if tb:
                k.matmul_batched(db, g, a, True, ta, req[1])
            else:
                k.matmul_batched(db, a, g, not ta, False, req[1])

    @staticmethod
    def view_like(arr, like):
        return arr.reshape(like.shape)

    def forward(self, p, k, inputs, outputs, is_train, state):
        a, b, c = self.views(p, inputs[0], inputs[1], outputs[0])
        ta, tb = self.flags(p, inputs[0], inputs[1])
        k.matmul_batched(c, a, b, ta, tb, "write")


@register
class Dot(_Product):
    name = "dot"

    def _sides(self, p, a, b):
        """(kept dims of a, contracted dim of a, contracted dim of b, kept dims of b)."""
        if len(a) == 1 and len(b) == 1 and (p.transpose_a or p.transpose_b):
            raise self.error("cannot transpose vectors: lhs %s, rhs %s", a, b)
        if len(a) == 1:
            ka, ca = (), a[0]
        elif p.transpose_a:
            ka, ca = a[1:], a[0]
        else:
            ka, ca = a[:-1], a[-1]
        if len(b) == 1:
            cb, kb = b[0], ()
        elif p.transpose_b:
            cb, kb = b[-1], b[:-1]
        else:
            cb, kb = b[0], b[1:]
        return ka, ca, cb, kb

    def infer_shape(self, p, in_shapes):
        a, b = in_shapes
        if a is None or b is None:
            return list(in_shapes), [None]
        if len(a) == 0 or len(b) == 0:
            raise self.error("inputs must have at least one dim: lhs %s, rhs %s", a, b)
        ka, ca, cb, kb = self._sides(p, a, b)
        if ca and cb and ca != cb:
            raise self.shape_error(a, b, p, "contracted dims %d vs %d" % (ca, cb))
        n = ca or cb
        if n:   # fill an unknown contracted dim from the other side
            a = self._set_contracted(p, a, n, lhs=True)
            b = self._set_contracted(p, b, n, lhs=False)
        out = tuple(ka) + tuple(kb)
        return [a, b], [out or (1,)]

    def _set_contracted(self, p, s, n, lhs):
        if len(s) == 1:
            return (n,)
        first = p.transpose_a if lhs else not p.transpose_b
        return (n,) + s[1:] if first else s[:-1] + (n,)

    def flags(self, p, a, b):
        return (p.transpose_a and len(a.shape) > 1), (p.transpose_b and len(b.shape) > 1)

    def views(self, p, a, b, c):
        """lhs, rhs and out as 3-d (1, rows, cols) arrays for k.matmul_batched."""
        sa, sb = tuple(a.shape), tuple(b.shape)
        if len(sa) == 1:
            a3 = a.reshape(1, 1, sa[0])
        elif p.transpose_a:
            a3 = a.reshape(1, sa[0], shape_size(sa[1:]))
        else:
            a3 = a.reshape(1, shape_size(sa[:-1]), sa[-1])
        if len(sb) == 1:
            b3 = b.reshape(1, sb[0], 1)
        elif p.transpose_b:
            b3 = b.reshape(1, shape_size(sb[:-1]), sb[-1])
        else:
            b3 = b.reshape(1, sb[0], shape_size(sb[1:]))
        rows = a3.shape[2] if (p.transpose_a and len(sa) > 1) else a3.shape[1]
        cols = b3.shape[1] if (p.transpose_b and len(sb) > 1) else b3.shape[2]
        return a3, b3, c.reshape(1, rows, cols)


@register
class BatchDot(_Product):
    name = "batch_dot"

    def infer_shape(self, p, in_shapes):
        a, b = in_shapes
        if a is None or b is None:
            return list(in_shapes), [None]
        if len(a) < 3 or len(a) != len(b):
            raise self.error("only N-D x N-D inputs with the same N >= 3 are supported: lhs %s, "
                             "rhs %s", a, b)
        batch = []
        for i, (x, y) in enumerate(zip(a[:-2], b[:-2])):
            if x and y and x != y:
                raise self.shape_error(a, b, p, "batch dim %d: %d vs %d" % (i, x, y))
            batch.append(x or y)
        m, ka = (a[-1], a[-2]) if p.transpose_a else (a[-2], a[-1])
        kb, n = (b[-1], b[-2]) if p.transpose_b else (b[-2], b[-1])
        if ka and kb and ka != kb:
            raise self.shape_error(a, b, p, "contracted dims %d vs %d" % (ka, kb))
        # As MXNet: an unknown contracted dim leaves the output unknown, and neither input is
        # completed from the other (x=(0, 3, 4), y=(0, 0, 5) stay as they are)
        if not (ka and kb):
            return [a, b], [None]
        return [a, b], [tuple(batch) + (m, n)]

    def flags(self, p, a, b):
        return p.transpose_a, p.transpose_b

    def views(self, p, a, b, c):
        sa, sb, sc = tuple(a.shape), tuple(b.shape), tuple(c.shape)
        nb = shape_size(sa[:-2])
        return (a.reshape(nb, sa[-2], sa[-1]), b.reshape(nb, sb[-2], sb[-1]),
                c.reshape(nb, sc[-2], sc[-1]))


# ---------------------------------------------------------------------------------------------
# broadcast_to, broadcast_axis, broadcast_like
# ---------------------------------------------------------------------------------------------
class _BroadcastTo(_TensorOp):
    """out = data repeated along its size-1 axes; the gradient is summed back over them.

    Subclasses define ``target(p, data_shape, other_shapes)``: the output shape (0 = unknown).
    """

    def check_axes(self, p, s, out):
        for i, (d, o) in enumerate(zip(s, out)):
            if d and o and d != o and d != 1:
                raise self.error("input of shape %s cannot be broadcast to %s (axis %d has "
                                 "size %d, not 1 or %d)", s, out, i, d, o)

    def forward(self, p, k, inputs, outputs, is_train, state):
        x, out = inputs[0], outputs[0]
        st = contiguous_strides(x.shape)
        strides = tuple(0 if d == 1 else s for d, s in zip(x.shape, st))
        k.strided_gather(out, x, 0, out.shape, strides, "write")

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if not data_grad_needed(k, out_grads, in_grads, req):
            return
        x, out = inputs[0], outputs[0]
        axes = tuple(i for i, (d, o) in enumerate(zip(x.shape, out.shape)) if d == 1 and o != 1)
        cshape, raxes = reduce_plan(tuple(out.shape), axes)
        k.reduce_axes(in_grads[0], out_grads[0], cshape, raxes, R_SUM, req[0])


@register
class BroadcastTo(_BroadcastTo):
    name = "broadcast_to"
    params = {"shape": Shape((), doc="Target shape (0: keep the input's dim)")}

    def infer_shape(self, p, in_shapes):
        s = in_shapes[0]
        if s is None:
            return [None], [None]
        if len(s) != len(p.shape):
            raise self.error("input of shape %s cannot be broadcast to shape=%s (different "
                             "number of dims)", s, p.shape)
        out = tuple(d if t == 0 else t for d, t in zip(s, p.shape))
        self.check_axes(p, s, out)
        return [s], [out]

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        s, out = in_shapes[0], out_shapes[0]
        if out is None or len(out) != len(p.shape):
            return in_shapes
        back = tuple(o if t == 0 else 0 for o, t in zip(out, p.shape))
        return [self.merge(s, back, "input 'data' vs the output")]


@register
class BroadcastAxis(_BroadcastTo):
    name = "broadcast_axis"
    aliases = ("broadcast_axes",)
    params = {"axis": Shape((), doc="Axes to broadcast along"),
              "size": Shape((), doc="Target size of each axis")}

    def check_params(self, p):
        if len(p.axis) != len(p.size):
            raise self.error("axis=%s and size=%s must have the same length", p.axis, p.size)

    def infer_shape(self, p, in_shapes):
        s = in_shapes[0]
        if s is None:
            return [None], [None]
        out = list(s)
        for a, n in zip(p.axis, p.size):
            i = self.axis(a, len(s), shape=s)
            if s[i] not in (0, 1):
                raise self.error("axis %d of input of shape %s has size %d: broadcasting axes "
                                 "must have size 1", a, s, s[i])
            out[i] = n
        return [s], [tuple(out)]

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        s, out = in_shapes[0], out_shapes[0]
        if out is None:
            return in_shapes
        axes = {self.axis(a, len(out), shape=out) for a in p.axis}
        back = tuple(1 if i in axes else o for i, o in enumerate(out))
        return [self.merge(s, back, "input 'data' vs the output")]


@register
class BroadcastLike(_BroadcastTo):
    name = "broadcast_like"
    inputs = ("lhs", "rhs")
    params = {"lhs_axes": Shape(None, doc="Axes of lhs to broadcast (None: all)"),
              "rhs_axes": Shape(None, doc="Axes of rhs giving the sizes (None: all)")}

    def check_params(self, p):
        if (p.lhs_axes is None) != (p.rhs_axes is None) or \
                (p.lhs_axes is not None and len(p.lhs_axes) != len(p.rhs_axes)):
            raise self.error("lhs_axes=%s and rhs_axes=%s must both be given with the same "
                             "length, or both be None", p.lhs_axes, p.rhs_axes)
        if p.lhs_axes == ():
            raise self.error("lhs_axes=() and rhs_axes=() name no axis: give at least one "
                             "axis, or leave both None to broadcast like all of rhs")

    def infer_shape(self, p, in_shapes):
        s, like = in_shapes
        if s is None or like is None:
            return list(in_shapes), [None]
        if p.lhs_axes is None:
            if len(s) != len(like):
                raise self.error("input 'lhs' of shape %s cannot be broadcast like 'rhs' of "
                                 "shape %s (different number of dims)", s, like)
            out = tuple(like)
        else:
            out = list(s)
            for la, ra in zip(p.lhs_axes, p.rhs_axes):
                out[self.axis(la, len(s), "lhs_axes", s)] = \
                    like[self.axis(ra, len(like), "rhs_axes", like)]
            out = tuple(out)
        self.check_axes(p, s, out)
        return [s, like], [out]


# ---------------------------------------------------------------------------------------------
# all_finite, multi_all_finite
# ---------------------------------------------------------------------------------------------
class _Finiteness(_TensorOp):
    """A (1,) float32 flag: 1 when no input element is inf or nan, else 0. With
    ``init_output=False`` the flag can only be cleared: a 0 already in the output stays."""
    head_grad_unused = True

    def infer_shape(self, p, in_shapes):
        return list(in_shapes), [(1,)]

    def infer_type(self, p, in_types):
        return list(in_types), ["float32"]

    def forward(self, p, k, inputs, outputs, is_train, state):
        count = state.get("count")
        if count is None:
            count = state["count"] = k.empty((1,), "float32")
        for i, x in enumerate(inputs):
            cshape, raxes = reduce_plan(tuple(x.shape), tuple(range(len(x.shape))))
            k.reduce_axes(count, x, cshape, raxes, R_NONFINITE, "write" if i == 0 else "add")
        if not inputs:
            k.fill(count, 0)
        out = outputs[0]
        if p.init_output:
            k.elemwise_scalar("equal", count, 0.0, out)
        else:
            k.elemwise_scalar("equal", count, 0.0, count)
            k.elemwise_binary("mul", out, count, out)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        zero_grads(k, in_grads, req)


@register
class AllFinite(_Finiteness):
    name = "all_finite"
    differentiable = False     # MXNet registers no gradient
    params = {"init_output": Bool(True, doc="Set the output to 1 before checking")}


@register
class MultiAllFinite(_Finiteness):
    name = "multi_all_finite"
    differentiable = False     # MXNet registers no gradient
    variadic = "num_arrays"
    params = {"num_arrays": Int(1, doc="Number of arrays checked"),
              "init_output": Bool(True, doc="Set the output to 1 before checking")}

    def check_params(self, p):
        if p.num_arrays < 1:
            raise self.error("num_arrays=%d must be at least 1", p.num_arrays)


# ---------------------------------------------------------------------------------------------
# moments
# ---------------------------------------------------------------------------------------------
@register
class Moments(_Reduce):
    """Mean and (biased) variance over ``axes``: two outputs shaped like a reduction."""
    name = "moments"
    params = {"axes": Shape(None, doc="Axes to reduce (None: all of them)"),
              "keepdims": Bool(False, doc="Keep the reduced axes as size-1 dims")}

    def axes_param(self, p):
        return p.axes

    def num_outputs(self, p):
        return 2

    def infer_shape(self, p, in_shapes):
        ins, outs = super().infer_shape(p, in_shapes)
        return ins, outs * 2

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        return super().infer_shape_backward(p, in_shapes, out_shapes[:1])

    def _geometry(self, p, shape):
        """(collapsed plan, count of reduced elements, the kept-dims shape of the outputs)."""
        axes = self.reduced_axes(p, shape)
        kshape = tuple(1 if i in axes else d for i, d in enumerate(shape))
        return reduce_plan(tuple(shape), axes), max(shape_size(shape) // max(
            shape_size(kshape), 1), 1), kshape

    def _centered(self, k, state, x, mean_keep):
        buf = state.get("centered")
        if buf is None or tuple(buf.shape) != tuple(x.shape):
            buf = state["centered"] = k.empty(tuple(x.shape), x.dtype)
        k.elemwise_binary("sub", x, mean_keep, buf)
        return buf

    def forward(self, p, k, inputs, outputs, is_train, state):
        x = inputs[0]
        mean, var = outputs
        (cshape, raxes), count, kshape = self._geometry(p, x.shape)
        k.reduce_axes(mean, x, cshape, raxes, R_MEAN, "write")
        centered = self._centered(k, state, x, mean.reshape(kshape))
        k.reduce_axes(var, centered, cshape, raxes, R_SUMSQ, "write")
        k.elemwise_scalar("div", var, float(count), var)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[0] == "null":
            return
        g_mean, g_var = out_grads[:2]
        if g_mean is None and g_var is None:
            return zero_grads(k, in_grads, req)
        x = inputs[0]
        (_, _), count, kshape = self._geometry(p, x.shape)
        # d/dx = (g_mean + 2 (x - mean) g_var) / count
        grad = self._centered(k, state, x, outputs[0].reshape(kshape))
        if g_var is not None:
            k.elemwise_binary("mul", grad, g_var.reshape(kshape), grad)
            k.elemwise_scalar("mul", grad, 2.0, grad)
        else:
            k.fill(grad, 0)
        if g_mean is not None:
            k.elemwise_binary("add", grad, g_mean.reshape(kshape), grad)
        k.elemwise_scalar("div", grad, float(count), grad)
        k.assign(in_grads[0], grad, req[0])

