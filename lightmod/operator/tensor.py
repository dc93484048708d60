"""The tensor family: shape manipulation, joining and splitting, indexing, fills and casts.

Most of these ops move elements without arithmetic. Each one describes what it reads as a
strided view of its input (element offset, shape, element strides: 0 broadcasts, negative
walks backwards) and calls ``k.strided_gather`` / ``k.strided_scatter``; gradients go the other
way through the same view. Ops that repeat elements (tile, repeat, broadcast_*) sum their
gradient back with ``k.reduce_axes`` over a collapsed view (``reduce_plan``). Shape inference
follows MXNet 1.9.1, including the 0-means-unknown convention and filling unknown input dims
from known output shapes (``infer_shape_backward``) where MXNet does.
"""
import functools
import math

import numpy as np

from .. import engine
from ..base import MXNetIndexError
from .common import cleared_data_grad, data_grad_needed, zero_grads
from .conv import scratch
from .registry import (
    Bool,
    Dtype,
    Enum,
    Float,
    FloatTuple,
    Int,
    Operator,
    OptFloat,
    OptInt,
    Shape,
    Str,
    merge_shape,
    register,
    shape_is_known,
)

__all__ = ["contiguous_strides", "reduce_plan", "shape_size"]

# reduction code of a plain sum (kernels/scalar_tensor.py R_SUM; importing kernels here is not
# allowed, so the number is repeated, and checked by the tests)
R_SUM = 0


# ---------------------------------------------------------------------------------------------
# layout helpers shared with reduce.py
# ---------------------------------------------------------------------------------------------
def contiguous_strides(shape):
    """Element strides of a C-contiguous array of ``shape``."""
    st, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        st[i] = acc
        acc *= shape[i]
    return tuple(st)


def shape_size(shape):
    """Number of elements; 0 when a dim is unknown (0)."""
    n = 1
    for d in shape:
        n *= d
    return n


@functools.lru_cache(maxsize=4096)
def reduce_plan(shape, reduced):
    """Collapse ``shape`` for a reduction over the axes in ``reduced`` (a tuple).

    Size-1 axes are dropped and adjacent axes of the same kind (kept / reduced) merged, so a
    sum over axis 1 of (N, C, H, W) becomes (N, C, H*W) reducing axis 1. Returns
    ``(cshape, raxes)``; the output is contiguous over the kept axes in order.
    """
    cshape, kinds = [], []
    for axis, n in enumerate(shape):
        if n == 1:
            continue
        red = axis in reduced
        if kinds and kinds[-1] == red:
            cshape[-1] *= n
        else:
            cshape.append(n)
            kinds.append(red)
    if not cshape:
        return (1,), ()
    return tuple(cshape), tuple(i for i, r in enumerate(kinds) if r)


def _unknown_count(shape):
    return sum(1 for d in shape if not d)


def _fill_one_unknown(shape, total):
    """If exactly one dim of shape is unknown, set it so the sizes match ``total``."""
    if shape is None or not total or _unknown_count(shape) != 1:
        return shape
    known = shape_size(tuple(d for d in shape if d))
    if known == 0 or total % known:
        return shape
    return tuple(d if d else total // known for d in shape)


# ---------------------------------------------------------------------------------------------
# bases
# ---------------------------------------------------------------------------------------------
class _TensorOp(Operator):
    """Helpers for ops of this family: axis normalisation and merges with named errors."""

    def axis(self, value, ndim, arg="axis", shape=None, extra=0):
        """``value`` normalised into [0, ndim + extra); errors name the argument and shape."""
        n = ndim + extra
        a = value + n if value < 0 else value
        if not 0 <= a < n:
            raise self.error("%s=%d is out of range for input of shape %s (valid: %d to %d)",
                             arg, value, shape, -n, n - 1)
        return a

    def merge(self, a, b, what):
        try:
            return merge_shape(a, b)
        except ValueError:
            raise self.error("%s: shape %s does not match %s", what, a, b) from None


class _OneInput(_TensorOp):
    """One input: nothing is inferred until its shape is known; ``out_shape`` then gives the
    output's shape (and raises on an input the op cannot take)."""

    def infer_shape(self, p, in_shapes):
        s = in_shapes[0]
        if s is None:
            return [None], [None]
        return [s], [self.out_shape(p, s)]

    def out_shape(self, p, s):
        raise NotImplementedError


class _CountedOutputs(_TensorOp):
    """Ops whose ``num_outputs`` parameter (at least 1) is their number of outputs."""

    def check_params(self, p):
        if p.num_outputs < 1:
            raise self.error("num_outputs=%d must be at least 1", p.num_outputs)

    def num_outputs(self, p):
        return p.num_outputs


class _SameShape(_TensorOp):
    """Output shape == input 0's shape; known output shapes flow back to the input."""

    def infer_shape(self, p, in_shapes):
        return list(in_shapes), [in_shapes[0]]

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        filled = list(in_shapes)
        filled[0] = self.merge(in_shapes[0], out_shapes[0],
                               "input 'data' vs its output")
        return filled


class _FlatCopy(_TensorOp):
    """Ops that keep the elements in order and only change the shape (a flat copy)."""

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.assign(outputs[0], inputs[0].reshape(outputs[0].shape), "write")

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if not data_grad_needed(k, out_grads, in_grads, req):
            return
        k.assign(in_grads[0], out_grads[0].reshape(in_grads[0].shape), req[0])


# ---------------------------------------------------------------------------------------------
# Flatten, Reshape, expand_dims, squeeze
# ---------------------------------------------------------------------------------------------
@register
class Flatten(_OneInput, _FlatCopy):
    name = "Flatten"
    aliases = ("flatten",)

    def out_shape(self, p, s):
        if len(s) == 0:
            raise self.error("input 'data' must have at least one dim, got shape %s", s)
        rest = shape_size(s[1:]) if len(s) > 1 else 1
        return (s[0], rest)

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        s, out = in_shapes[0], out_shapes[0]
        if s is None or out is None:
            return in_shapes
        s = self.merge(s, (out[0],) + (0,) * (len(s) - 1), "input 'data' vs its output")
        if len(s) > 1 and out[1]:
            s = (s[0],) + (_fill_one_unknown(s[1:], out[1]))
        return [s]


@register
class Reshape(_FlatCopy):
    name = "Reshape"
    aliases = ("reshape",)
    params = {
        "shape": Shape((), doc="The target shape (codes 0, -1, -2, -3, -4)"),
        "reverse": Bool(False, doc="Infer the special values from right to left"),
        "target_shape": Shape(None, doc="(Deprecated) target shape; one 0 dim is inferred"),
        "keep_highest": Bool(False, doc="(Deprecated) keep the first dim of the input"),
    }

    def _fail(self, p, dshape, message, *args):
        return self.error("cannot reshape input of shape %s with shape=%s%s: " + message,
                          dshape, p.shape, ", reverse=True" if p.reverse else "", *args)

    def target(self, p, dshape):
        """The output shape for input ``dshape`` (0 where it depends on unknown input dims)."""
        spec, src = list(p.shape), list(dshape)
        if p.reverse:
            spec.reverse()
            src.reverse()
        out, inferred, si, i = [], -1, 0, 0
        while i < len(spec):
            code = spec[i]
            if code is None or code < -4:
                raise self._fail(p, dshape, "invalid code %s at position %d", code, i)
            if code == 0:                       # copy one input dim
                if si >= len(src):
                    raise self._fail(p, dshape, "code 0 at position %d has no input dim "
                                     "left to copy", i)
                out.append(src[si])
                si += 1
            elif code == -1:                    # inferred from the total size
                if inferred >= 0:
                    raise self._fail(p, dshape, "only one dim can be inferred (-1)")
                inferred = len(out)
                out.append(1)
                si += 1
            elif code == -2:                    # copy all remaining input dims
                out.extend(src[si:])
                si = len(src)
            elif code == -3:                    # merge two input dims
                if si + 1 >= len(src):
                    raise self._fail(p, dshape, "code -3 at position %d needs two input dims",
                                     i)
                d1, d2 = src[si], src[si + 1]
                out.append(d1 * d2)
                si += 2
            elif code == -4:                    # split one input dim into the next two codes
                if i + 2 >= len(spec):
                    raise self._fail(p, dshape, "code -4 at position %d must be followed by "
                                     "two dims", i)
                if si >= len(src):
                    raise self._fail(p, dshape, "code -4 at position %d has no input dim "
                                     "left to split", i)
                d0, d1, d2 = src[si], spec[i + 1], spec[i + 2]
                si += 1
                i += 2
                if d1 == -1 and d2 == -1:
                    raise self._fail(p, dshape, "split dims cannot both be -1")
                if d1 is None or d2 is None or d1 < -1 or d2 < -1 or d1 == 0 or d2 == 0:
                    raise self._fail(p, dshape, "split dims must be positive or -1, got "
                                     "%s, %s", d1, d2)
                if d0:
                    if d1 == -1:
                        d1 = d0 // d2
                    if d2 == -1:
                        d2 = d0 // d1
                    if d1 * d2 != d0:
                        raise self._fail(p, dshape, "split dims %d, %d do not divide input "
                                         "dim %d", d1, d2, d0)
                out.extend([max(d1, 0), max(d2, 0)])
            else:                               # a new dim
                out.append(code)
                si += 1
            i += 1
        if inferred >= 0:
            if shape_is_known(dshape):
                rest, total = shape_size(out), shape_size(dshape)
                if rest <= 0 or total % rest:
                    raise self._fail(p, dshape, "the input size %d is not a multiple of %d, "
                                     "the size of the other dims, so -1 cannot be inferred",
                                     total, rest)
                out[inferred] = total // rest
            else:
                out[inferred] = 0
        if p.reverse:
            out.reverse()
        return tuple(out)

    def legacy_target(self, p, dshape):
        out = list(p.target_shape)
        start = 1 if p.keep_highest else 0
        if p.keep_highest and out:
            out[0] = dshape[0]
        zeros = [i for i in range(start, len(out)) if out[i] == 0]
        if len(zeros) == 1 and shape_is_known(dshape):
            out[zeros[0]] = 1
            rest = shape_size(out)
            out[zeros[0]] = shape_size(dshape) // rest if rest else 0
        return tuple(out)

    def infer_shape(self, p, in_shapes):
        dshape = in_shapes[0]
        if dshape is None:
            return [None], [None]
        if p.shape:
            out = self.target(p, dshape)
        elif p.target_shape:
            out = self.legacy_target(p, dshape)
        else:
            return [dshape], [None]
        if shape_is_known(out):
            dshape = _fill_one_unknown(dshape, shape_size(out))
        if shape_is_known(dshape) and shape_is_known(out) and \
                shape_size(dshape) != shape_size(out):
            raise self.error("target shape size is different to source. Target: %s, "
                             "Source: %s (shape=%s%s)", out, dshape,
                             p.shape if p.shape else p.target_shape,
                             ", reverse=True" if p.reverse else "")
        return [dshape], [out]

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        out = out_shapes[0]
        if in_shapes[0] is None or not shape_is_known(out):
            return in_shapes
        return [_fill_one_unknown(in_shapes[0], shape_size(out))]


def _axis_range(op, arg_begin, begin, arg_end, end, ndim, side):
    """[begin, end) of a ``*_begin``/``*_end`` pair: None is the start / the end, negative
    values count from the end; errors name the argument and the input's rank."""
    def bound(arg, value, default):
        if value is None:
            return default
        at = value + ndim if value < 0 else value
        if not 0 <= at <= ndim:
            raise op.error("%s=%d is out of range for %s with %d dims", arg, value, side, ndim)
        return at
    lo, hi = bound(arg_begin, begin, 0), bound(arg_end, end, ndim)
    if lo > hi:
        raise op.error("%s=%s comes after %s=%s for %s with %d dims", arg_begin, begin, arg_end,
                       end, side, ndim)
    return lo, hi


@register
class ReshapeLike(_FlatCopy):
    """lhs's elements in a shape where lhs's axes [lhs_begin, lhs_end) are replaced by rhs's
    axes [rhs_begin, rhs_end) (all of both shapes by default). rhs only gives its shape: it
    receives a zero gradient and may have any dtype."""
    name = "reshape_like"
    inputs = ("lhs", "rhs")
    params = {"lhs_begin": OptInt(None, doc="First lhs axis to replace (default 0)"),
              "lhs_end": OptInt(None, doc="End of the lhs axes to replace (default: ndim)"),
              "rhs_begin": OptInt(None, doc="First rhs axis to use (default 0)"),
              "rhs_end": OptInt(None, doc="End of the rhs axes to use (default: ndim)")}

    def infer_shape(self, p, in_shapes):
        lhs, rhs = in_shapes
        if lhs is None or rhs is None:
            return list(in_shapes), [None]
        lb, le = _axis_range(self, "lhs_begin", p.lhs_begin, "lhs_end", p.lhs_end, len(lhs), "lhs")
        rb, re = _axis_range(self, "rhs_begin", p.rhs_begin, "rhs_end", p.rhs_end, len(rhs), "rhs")
        out = tuple(lhs[:lb]) + tuple(rhs[rb:re]) + tuple(lhs[le:])
        if shape_is_known(lhs) and shape_is_known(out) and shape_size(lhs) != shape_size(out):
            raise self.error("cannot reshape lhs of shape %s (%d elements) into %s (%d elements) "
                             "taken from rhs of shape %s", lhs, shape_size(lhs), out,
                             shape_size(out), rhs)
        return list(in_shapes), [out]

    def infer_type(self, p, in_types):
        return list(in_types), [in_types[0]]

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[1] == "write":
            k.fill(in_grads[1], 0)
        super().backward(p, k, out_grads, inputs, outputs, in_grads[:1], req[:1], state)


class _ShapeInfo(_TensorOp):
    """int64 facts about the input's shape; nothing flows back to the input, so a head made
    by one needs no head gradient (any given is ignored)."""
    head_grad_unused = True

    def infer_type(self, p, in_types):
        return list(in_types), ["int64"]

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        zero_grads(k, in_grads, req)

    def values(self, shape):
        raise NotImplementedError

    def forward(self, p, k, inputs, outputs, is_train, state):
        # one fill per value keeps this device-neutral (a few elements at most)
        for i, value in enumerate(self.values(tuple(inputs[0].shape))):
            k.fill(outputs[0][i:i + 1], value)


@register
class ShapeArray(_ShapeInfo):
    """The input's shape as a 1-D int64 array."""
    name = "shape_array"

    def infer_shape(self, p, in_shapes):
        s = in_shapes[0]
        return list(in_shapes), [None if s is None else (len(s),)]

    def values(self, shape):
        return shape


@register
class SizeArray(_ShapeInfo):
    """The input's number of elements as a 1-element int64 array."""
    name = "size_array"

    def infer_shape(self, p, in_shapes):
        return list(in_shapes), [(1,)]

    def values(self, shape):
        return (shape_size(shape),)


@register
class ExpandDims(_OneInput, _FlatCopy):
    name = "expand_dims"
    params = {"axis": Int(doc="Position of the new axis, in [-ndim-1, ndim]")}

    def out_shape(self, p, s):
        a = self.axis(p.axis, len(s), shape=s, extra=1)
        return s[:a] + (1,) + s[a:]

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        out = out_shapes[0]
        if out is None:
            return in_shapes
        a = self.axis(p.axis, len(out) - 1, shape=in_shapes[0], extra=1)
        return [self.merge(in_shapes[0], out[:a] + out[a + 1:], "input 'data' vs its output")]


@register
class Squeeze(_FlatCopy):
    name = "squeeze"
    params = {"axis": Shape(None, doc="Size-1 axes to remove (None: all of them)")}

    def _axes(self, p, s):
        if p.axis is None:
            return None
        axes = [self.axis(a, len(s), shape=s) for a in p.axis]
        if len(set(axes)) != len(axes):
            raise self.error("duplicate value in axis=%s for input of shape %s", p.axis, s)
        for a in axes:
            if s[a] not in (0, 1):
                raise self.error("cannot squeeze out axis %d of input of shape %s: its size "
                                 "is %d, not 1", a, s, s[a])
        return axes

    def infer_shape(self, p, in_shapes):
        s = in_shapes[0]
        if s is None:
            return [None], [None]
        axes = self._axes(p, s)
        if axes is None:
            if not shape_is_known(s):
                return [s], [None]
            out = tuple(d for d in s if d != 1)
        else:
            s = tuple(1 if i in axes else d for i, d in enumerate(s))
            out = tuple(d for i, d in enumerate(s) if i not in axes)
        return [s], [out or (1,)]

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        s, out = in_shapes[0], out_shapes[0]
        if s is None or out is None or p.axis is None:
            return in_shapes
        axes = self._axes(p, s)
        kept = [i for i in range(len(s)) if i not in axes]
        if not kept or len(kept) != len(out):
            return in_shapes
        filled = list(s)
        for i, d in zip(kept, out):
            filled[i] = d
        return [self.merge(s, tuple(filled), "input 'data' vs its output")]


# ---------------------------------------------------------------------------------------------
# transpose, SwapAxis
# ---------------------------------------------------------------------------------------------
class _Permute(_OneInput):
    """out = data with its axes permuted; the gradient is the inverse permutation.

    Subclasses define ``perm(p, shape)``: the input axis read by each output axis."""

    def out_shape(self, p, s):
        perm = self.perm(p, s)
        return tuple(s[a] for a in perm)

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        out = out_shapes[0]
        if out is None:
            return in_shapes
        perm = self.perm(p, in_shapes[0] if in_shapes[0] is not None else out)
        back = [0] * len(out)
        for i, a in enumerate(perm):
            back[a] = out[i]
        return [self.merge(in_shapes[0], tuple(back), "input 'data' vs its output")]

    def forward(self, p, k, inputs, outputs, is_train, state):
        x = inputs[0]
        st = contiguous_strides(x.shape)
        k.strided_gather(outputs[0], x, 0, outputs[0].shape,
                         tuple(st[a] for a in self.perm(p, x.shape)), "write")

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if not data_grad_needed(k, out_grads, in_grads, req):
            return
        perm = self.perm(p, inputs[0].shape)
        ost = contiguous_strides(outputs[0].shape)
        inv = [0] * len(perm)
        for i, a in enumerate(perm):
            inv[a] = i
        k.strided_gather(in_grads[0], out_grads[0], 0, in_grads[0].shape,
                         tuple(ost[inv[j]] for j in range(len(perm))), req[0])


@register
class Transpose(_Permute):
    name = "transpose"
    params = {"axes": Shape((), doc="Target axis order (default: reversed)")}

    def perm(self, p, s):
        nd = len(s)
        if not p.axes:
            return tuple(range(nd - 1, -1, -1))
        if len(p.axes) != nd:
            raise self.error("axes=%s must name every axis of the input of shape %s",
                             p.axes, tuple(s))
        axes = tuple(self.axis(a, nd, "axes", tuple(s)) for a in p.axes)
        if sorted(axes) != list(range(nd)):
            raise self.error("axes=%s is not a permutation of the axes of the input of "
                             "shape %s", p.axes, tuple(s))
        return axes


@register
class SwapAxis(_Permute):
    name = "SwapAxis"
    aliases = ("swapaxes",)
    params = {"dim1": Int(0, doc="The first axis to swap"),
              "dim2": Int(0, doc="The second axis to swap")}

    def perm(self, p, s):
        a = self.axis(p.dim1, len(s), "dim1", tuple(s))
        b = self.axis(p.dim2, len(s), "dim2", tuple(s))
        perm = list(range(len(s)))
        perm[a], perm[b] = b, a
        return tuple(perm)


# ---------------------------------------------------------------------------------------------
# Concat, stack, SliceChannel
# ---------------------------------------------------------------------------------------------
class _Join(_TensorOp):
    """Shared by Concat and stack: input i occupies a block of the output.

    Subclasses define ``blocks(p, in_shapes, out_shape)``: for each input, the element offset
    of its block in the output and the output strides over the block."""
    variadic = "num_args"

    def check_params(self, p):
        if p.num_args < 1:
            raise self.error("num_args=%d must be at least 1", p.num_args)

    def forward(self, p, k, inputs, outputs, is_train, state):
        out = outputs[0]
        for x, (offset, strides) in zip(inputs, self.blocks(p, [a.shape for a in inputs],
                                                            out.shape)):
            k.strided_scatter(out, x, offset, x.shape, strides, "write")

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if out_grads[0] is None:
            return zero_grads(k, in_grads, req)
        for g, r, x, (offset, strides) in zip(
                in_grads, req, inputs,
                self.blocks(p, [a.shape for a in inputs], outputs[0].shape)):
            if r != "null":
                k.strided_gather(g, out_grads[0], offset, x.shape, strides, r)


@register
class Concat(_Join):
    name = "Concat"
    aliases = ("concat",)
    params = {"num_args": Int(doc="Number of inputs to concatenate"),
              "dim": Int(1, doc="The axis to concatenate along")}

    def _common(self, p, in_shapes):
        ndim = next((len(s) for s in in_shapes if s is not None), None)
        if ndim is None:
            return None, None
        dim = self.axis(p.dim, ndim, "dim", next(s for s in in_shapes if s is not None))
        common = (0,) * ndim
        for name, s in zip(self.list_inputs(p), in_shapes):
            if s is None:
                continue
            if len(s) != ndim:
                raise self.error("input '%s' has shape %s, expected %d dims like the other "
                                 "inputs (%s)", name, s, ndim, common)
            masked = s[:dim] + (0,) + s[dim + 1:]
            try:
                common = merge_shape(common, masked)
            except ValueError:
                raise self.error("input '%s' has shape %s, expected %s (inputs must agree on "
                                 "every axis but dim=%d)", name, s, common, p.dim) from None
        return dim, common

    def infer_shape(self, p, in_shapes):
        dim, common = self._common(p, in_shapes)
        if common is None:
            return list(in_shapes), [None]
        filled = [common if s is None else merge_shape(s, common) for s in in_shapes]
        sizes = [s[dim] for s in filled]
        total = sum(sizes) if all(sizes) else 0
        return filled, [common[:dim] + (total,) + common[dim + 1:]]

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        out = out_shapes[0]
        if out is None:
            return in_shapes
        dim, common = self._common(p, in_shapes)
        if common is None:
            dim = self.axis(p.dim, len(out), "dim", out)
            common = (0,) * len(out)
        elif len(out) != len(common):
            raise self.error("the output has shape %s but the inputs have %d dims", out,
                             len(common))
        try:
            common = merge_shape(common, out[:dim] + (0,) + out[dim + 1:])
        except ValueError:
            raise self.error("the output has shape %s but the inputs agree on %s", out,
                             common) from None
        masked = common[:dim] + (0,) + common[dim + 1:]
        filled = [masked if s is None else merge_shape(s, masked) for s in in_shapes]
        unknown = [i for i, s in enumerate(filled) if not s[dim]]
        if len(unknown) == 1 and out[dim]:
            rest = out[dim] - sum(s[dim] for s in filled)
            if rest <= 0:
                raise self.error("the output has %d along dim=%d but the known inputs "
                                 "already have %d", out[dim], p.dim, out[dim] - rest)
            i = unknown[0]
            filled[i] = filled[i][:dim] + (rest,) + filled[i][dim + 1:]
        return filled

    def blocks(self, p, in_shapes, out_shape):
        dim = self.axis(p.dim, len(out_shape), "dim", tuple(out_shape))
        ost = contiguous_strides(out_shape)
        offset, result = 0, []
        for s in in_shapes:
            result.append((offset * ost[dim], ost))
            offset += s[dim]
        return result


@register
class Stack(_Join):
    name = "stack"
    params = {"axis": Int(0, doc="The axis of the new dim in the result"),
              "num_args": Int(doc="Number of inputs to stack")}

    def infer_shape(self, p, in_shapes):
        s = self.same_shape(p, in_shapes)
        if s is None:
            return list(in_shapes), [None]
        a = self.axis(p.axis, len(s), shape=s, extra=1)
        return [s] * len(in_shapes), [s[:a] + (p.num_args,) + s[a:]]

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        out = out_shapes[0]
        if out is None:
            return in_shapes
        a = self.axis(p.axis, len(out) - 1, shape=out, extra=1)
        s = self.merge(self.same_shape(p, in_shapes), out[:a] + out[a + 1:],
                       "inputs vs the output without axis=%d" % p.axis)
        return [s] * len(in_shapes)

    def blocks(self, p, in_shapes, out_shape):
        a = self.axis(p.axis, len(out_shape) - 1, shape=tuple(out_shape), extra=1)
        ost = contiguous_strides(out_shape)
        strides = ost[:a] + ost[a + 1:]
        return [(i * ost[a], strides) for i in range(len(in_shapes))]


@register
class SliceChannel(_CountedOutputs):
    name = "SliceChannel"
    aliases = ("split",)
    params = {"num_outputs": Int(doc="Number of splits; must divide the axis evenly"),
              "axis": Int(1, doc="Axis along which to split"),
              "squeeze_axis": Bool(False, doc="Remove the split axis (its parts must be 1)")}

    def infer_shape(self, p, in_shapes):
        s = in_shapes[0]
        n = p.num_outputs
        if s is None:
            return [None], [None] * n
        a = self.axis(p.axis, len(s), shape=s)
        d = s[a]
        if p.squeeze_axis:
            if d and d != n:
                raise self.error("squeeze_axis=True needs the split axis to have exactly "
                                 "num_outputs=%d elements: input shape=%s, axis=%d", n, s,
                                 p.axis)
            return [s[:a] + (n,) + s[a + 1:]], [s[:a] + s[a + 1:]] * n
        if d % n:
            raise self.error("cannot split axis %d of input of shape %s into num_outputs=%d "
                             "evenly sized chunks (%d does not divide %d)", p.axis, s, n, n, d)
        return [s], [s[:a] + (d // n,) + s[a + 1:]] * n

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        n = p.num_outputs
        part = None
        for i, o in enumerate(out_shapes):
            part = self.merge(part, o, "output %d vs the other outputs" % i)
        if part is None:
            return in_shapes
        s = in_shapes[0]
        nd = len(part) + (1 if p.squeeze_axis else 0)
        a = self.axis(p.axis, nd, shape=s if s is not None else part)
        if p.squeeze_axis:
            whole = part[:a] + (n,) + part[a:]
        else:
            whole = part[:a] + (part[a] * n,) + part[a + 1:]
        return [self.merge(s, whole, "input 'data' vs its outputs")]

    def pointwise(self, p):
        return ("slice", (p.axis, p.num_outputs, p.squeeze_axis), False)

    def _chunk(self, p, shape):
        a = self.axis(p.axis, len(shape), shape=tuple(shape))
        size = shape[a] // p.num_outputs
        st = contiguous_strides(shape)
        return a, size, st, tuple(shape[:a]) + (size,) + tuple(shape[a + 1:])

    def forward(self, p, k, inputs, outputs, is_train, state):
        x = inputs[0]
        a, size, st, chunk = self._chunk(p, x.shape)
        for j in range(p.num_outputs):
            k.strided_gather(outputs[j], x, j * size * st[a], chunk, st, "write")

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[0] == "null":
            return
        g = in_grads[0]
        a, size, st, chunk = self._chunk(p, g.shape)
        if req[0] == "write" and any(og is None for og in out_grads[:p.num_outputs]):
            k.fill(g, 0)
        mode = "write" if req[0] == "write" else "add"
        for j, og in enumerate(out_grads[:p.num_outputs]):
            if og is not None:
                k.strided_scatter(g, og, j * size * st[a], chunk, st, mode)


# ---------------------------------------------------------------------------------------------
# slice, slice_axis
# ---------------------------------------------------------------------------------------------
class _Slice(_OneInput):
    """out = a strided window of data; the gradient is scattered back (zeros elsewhere).

    Subclasses define ``window(p, shape)``: per axis (start, length, step); unknown (0) dims
    give length 0 (unknown)."""

    def out_shape(self, p, s):
        return tuple(n for _, n, _ in self.window(p, s))

    def _view(self, p, shape):
        st = contiguous_strides(shape)
        win = self.window(p, shape)
        offset = sum(start * st[i] for i, (start, _, _) in enumerate(win))
        return offset, tuple(n for _, n, _ in win), tuple(step * st[i]
                                                           for i, (_, _, step) in enumerate(win))

    def forward(self, p, k, inputs, outputs, is_train, state):
        offset, shape, strides = self._view(p, inputs[0].shape)
        k.strided_gather(outputs[0], inputs[0], offset, shape, strides, "write")

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        g = cleared_data_grad(k, in_grads, req)
        if g is not None and out_grads[0] is not None:
            offset, shape, strides = self._view(p, g.shape)
            k.strided_scatter(g, out_grads[0], offset, shape, strides, req[0])


@register
class Slice(_Slice):
    name = "slice"
    aliases = ("crop",)
    params = {"begin": Shape(doc="Start indices (None entries: from the start)"),
              "end": Shape(doc="End indices, exclusive (None entries: to the end)"),
              "step": Shape((), doc="Steps (None entries: 1; negative walks backwards)")}

    def check_params(self, p):
        if len(p.begin) != len(p.end):
            raise self.error("begin=%s and end=%s must have the same length", p.begin, p.end)
        if p.step and len(p.step) != len(p.begin):
            raise self.error("step=%s must have the same length as begin=%s", p.step, p.begin)
        for i, s in enumerate(p.step):
            if s == 0:
                raise self.error("step[%d] cannot be 0 (step=%s)", i, p.step)

    def window(self, p, shape):
        if len(p.begin) > len(shape):
            raise self.error("begin=%s has more entries than the input of shape %s has dims",
                             p.begin, tuple(shape))
        win = []
        for i, n in enumerate(shape):
            if i >= len(p.begin):
                win.append((0, n, 1))
                continue
            step = p.step[i] if p.step and p.step[i] is not None else 1
            if not n:
                win.append((0, 0, step))
                continue
            start, stop, step = slice(p.begin[i], p.end[i], step).indices(n)
            win.append((start, len(range(start, stop, step)), step))
        return win


@register
class SliceAxis(_Slice):
    name = "slice_axis"
    params = {"axis": Int(doc="Axis along which to slice"),
              "begin": Int(doc="Start index (negative counts from the end)"),
              "end": OptInt(doc="End index, exclusive (None: to the end)")}

    def window(self, p, shape):
        shape = tuple(shape)
        a = self.axis(p.axis, len(shape), shape=shape)
        n = shape[a]
        win = [(0, d, 1) for d in shape]
        if not n:
            return win
        begin = p.begin + n if p.begin < 0 else p.begin
        end = n if p.end is None else (p.end + n if p.end < 0 else p.end)
        if not 0 <= begin < n:
            raise self.error("begin=%d is out of range for axis %d of size %d (input shape "
                             "%s)", p.begin, p.axis, n, shape)
        if end > n:
            raise self.error("end=%s is out of range for axis %d of size %d (input shape %s)",
                             p.end, p.axis, n, shape)
        if begin >= end:
            raise self.error("begin=%d must come before end=%s on axis %d of size %d (input "
                             "shape %s)", p.begin, p.end, p.axis, n, shape)
        win[a] = (begin, end - begin, 1)
        return win


# ---------------------------------------------------------------------------------------------
# take, pick, one_hot, where
# ---------------------------------------------------------------------------------------------
def _outer_inner(shape, axis):
    return shape_size(shape[:axis]), shape[axis], shape_size(shape[axis + 1:])


class _IndexTypes(_TensorOp):
    """Index inputs keep their own dtype (unknown: the data's); data and output share one."""
    index_inputs = ()

    def infer_type(self, p, in_types):
        names = self.list_inputs(p)
        data_t = next((t for n, t in zip(names, in_types)
                       if n not in self.index_inputs and t is not None), None)
        filled = [t if t is not None else data_t for t in in_types]
        return filled, [data_t]


class _AlongAxis(_IndexTypes):
    """take and pick: read the data along ``p.axis`` at the positions of an index input (as
    outer x n x inner); the gradient is scattered back by ``scatter_kernel(k)``."""

    def _geometry(self, p, shape):
        return _outer_inner(shape, self.axis(p.axis, len(shape), shape=tuple(shape)))

    def scatter_kernel(self, k):
        raise NotImplementedError

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if not data_grad_needed(k, out_grads, in_grads, req):
            return
        outer, n, inner = self._geometry(p, inputs[0].shape)
        self.scatter_kernel(k)(in_grads[0], out_grads[0], inputs[1], outer, n, inner,
                               p.mode == "wrap", req[0])


@register
class Take(_AlongAxis):
    name = "take"
    inputs = ("a", "indices")
    index_inputs = ("indices",)
    params = {"axis": Int(0, doc="The axis of the input to take from"),
              "mode": Enum("clip", "raise", "wrap", default="clip",
                           doc="Out-of-range indices: clip, wrap around, or raise")}

    def infer_shape(self, p, in_shapes):
        a, idx = in_shapes
        if a is None:
            return list(in_shapes), [None]
        ax = self.axis(p.axis, len(a), shape=a)
        if idx is None:
            return list(in_shapes), [None]
        return list(in_shapes), [a[:ax] + tuple(idx) + a[ax + 1:]]

    def forward(self, p, k, inputs, outputs, is_train, state):
        a, idx = inputs
        outer, n, inner = self._geometry(p, a.shape)
        if p.mode == "raise" and not k.indices_in_range(idx, n):
            # found while computing: as MXNet, reported where the result is read
            raise engine.DeferredOperatorError(str(self.error(
                "input 'indices' contains indices out of bound [0, %d) for axis %d of input "
                "'a' of shape %s (mode='raise')", n, p.axis, tuple(a.shape))))
        k.take_forward(outputs[0], a, idx, outer, n, inner, p.mode == "wrap")

    def scatter_kernel(self, k):
        return k.take_backward


@register
class IndexCopy(_IndexTypes):
    """contrib.index_copy: a copy of ``old_tensor`` whose rows (axis 0) ``index_vector[j]``
    are replaced by ``new_tensor[j]``. An index out of [0, rows) fails the forward pass (read
    where the result is read); a repeated index keeps the last of its rows. Gradients: the
    head gradient for old_tensor with the replaced rows zeroed, its rows at the indices for
    new_tensor, none for the indices."""
    name = "_contrib_index_copy"
    hint = "index_copy"
    inputs = ("old_tensor", "index_vector", "new_tensor")
    index_inputs = ("index_vector",)

    def infer_shape(self, p, in_shapes):
        old, idx, new = in_shapes
        if old is not None and len(old) == 0:
            raise self.error("input 'old_tensor' must have at least one dimension, got ()")
        if idx is not None and len(idx) != 1:
            raise self.error("input 'index_vector' must be 1-D, got shape %s", tuple(idx))
        if old is None or idx is None:
            return list(in_shapes), [None if old is None else tuple(old)]
        expected = (idx[0],) + tuple(old[1:])
        if new is not None and tuple(new) != expected:
            raise self.error("input 'new_tensor' has shape %s, expected %s (one row of "
                             "'old_tensor' %s per index of 'index_vector' %s)", tuple(new),
                             expected, tuple(old), tuple(idx))
        return [tuple(old), tuple(idx), expected], [tuple(old)]

    @staticmethod
    def _rows(x):
        n = int(x.shape[0])
        return n, (int(x.size) // n if n else 0)

    def forward(self, p, k, inputs, outputs, is_train, state):
        old, idx, new = inputs
        n, inner = self._rows(old)
        if not k.indices_in_range(idx, n):
            raise engine.DeferredOperatorError(str(self.error(
                "input 'index_vector' holds an index outside [0, %d) (the rows of "
                "'old_tensor' %s)", n, tuple(old.shape))))
        k.copy(outputs[0], old)
        k.put_rows(outputs[0], new, idx, n, inner)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        zero_grads(k, in_grads[1:2], req[1:2])
        dy = out_grads[0]
        if dy is None:
            zero_grads(k, in_grads, req)
            return
        old, idx, new = inputs
        n, inner = self._rows(old)
        if req[0] != "null":
            dst = in_grads[0] if req[0] == "write" else \
                scratch(k, state, "old_grad", old.shape, old.dtype)
            k.copy(dst, dy)
            k.zero_rows(dst, idx, n, inner)
            if dst is not in_grads[0]:
                k.assign(in_grads[0], dst, "add")
        if req[2] != "null":
            dst = in_grads[2] if req[2] == "write" else \
                scratch(k, state, "new_grad", new.shape, new.dtype)
            k.take_forward(dst, dy, idx, 1, n, inner, False)
            if dst is not in_grads[2]:
                k.assign(in_grads[2], dst, "add")


@register
class Pick(_AlongAxis):
    name = "pick"
    inputs = ("data", "index")
    index_inputs = ("index",)
    params = {"axis": OptInt(-1, doc="The axis to pick along"),
              "keepdims": Bool(False, doc="Keep the picked axis as a size-1 dim"),
              "mode": Enum("clip", "wrap", default="clip",
                           doc="Out-of-range indices: clip or wrap around")}

    def check_params(self, p):
        if p.axis is None:
            raise self.error("axis=None is not supported by pick: specify an axis")

    def infer_shape(self, p, in_shapes):
        data, idx = in_shapes
        if data is None:
            return list(in_shapes), [None]
        a = self.axis(p.axis, len(data), shape=data)
        plain = data[:a] + data[a + 1:] or (1,)      # 1-D data: MXNet's shapes are (1,)
        out = data[:a] + (1,) + data[a + 1:] if p.keepdims else plain
        if idx is None:
            idx = plain
        elif shape_is_known(idx) and shape_is_known(plain) and \
                shape_size(idx) != shape_size(plain):
            raise self.error("input 'index' has shape %s, expected %s (input 'data' %s "
                             "without axis %d)", idx, plain, data, p.axis)
        return [data, idx], [out]

    def forward(self, p, k, inputs, outputs, is_train, state):
        outer, n, inner = self._geometry(p, inputs[0].shape)
        k.pick_forward(outputs[0], inputs[0], inputs[1], outer, n, inner, p.mode == "wrap")

    def scatter_kernel(self, k):
        return k.pick_backward


@register
class OneHot(_TensorOp):
    name = "one_hot"
    head_grad_unused = True   # the gradient is zero: MXNet never reads the head gradient
    inputs = ("indices",)
    params = {"depth": Int(doc="Size of the one-hot dimension"),
              "on_value": Float(1.0, doc="Value at the index"),
              "off_value": Float(0.0, doc="Value elsewhere"),
              "dtype": Dtype("float32", doc="Output type")}

    def check_params(self, p):
        if p.depth < 1:
            raise self.error("depth=%d must be positive", p.depth)

    def infer_shape(self, p, in_shapes):
        s = in_shapes[0]
        return [s], [None if s is None else tuple(s) + (p.depth,)]

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        out = out_shapes[0]
        if out is None:
            return in_shapes
        return [self.merge(in_shapes[0], out[:-1], "input 'indices' vs the output")]

    def infer_type(self, p, in_types):
        return list(in_types), [p.dtype]

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.one_hot_forward(outputs[0], inputs[0], p.depth, p.on_value, p.off_value)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        zero_grads(k, in_grads, req)


@register
class Where(_IndexTypes):
    name = "where"
    inputs = ("condition", "x", "y")
    index_inputs = ("condition",)

    def infer_shape(self, p, in_shapes):
        cond, x, y = in_shapes
        if not cond or not shape_is_known(cond):
            # as MXNet: nothing is inferred (x and y not even unified) until the condition's
            # shape is fully known
            return list(in_shapes), [None]
        try:
            xy = merge_shape(x, y)
        except ValueError:
            raise self.error("inputs 'x' and 'y' must have the same shape, got %s and %s",
                             x, y) from None
        if cond is not None and xy is not None:
            if len(cond) == len(xy):
                try:
                    merge_shape(cond, xy)
                except ValueError:
                    raise self.error("input 'condition' has shape %s, expected %s (like 'x') "
                                     "or (%s,)", cond, xy, xy[0]) from None
            elif len(cond) != 1 or (cond[0] and xy[0] and cond[0] != xy[0]):
                raise self.error("input 'condition' has shape %s, expected %s (like 'x') or "
                                 "(%s,)", cond, xy, xy[0])
        return [cond, xy, xy], [xy]

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        out = out_shapes[0]
        cond, x, y = in_shapes
        if not cond or not shape_is_known(cond):
            return list(in_shapes)
        return [cond, self.merge(x, out, "input 'x' vs the output"),
                self.merge(y, out, "input 'y' vs the output")]

    @staticmethod
    def _inner(cond, x):
        """How many elements of x share one condition entry."""
        if tuple(cond.shape) == tuple(x.shape):
            return 1
        return shape_size(x.shape[1:])

    def forward(self, p, k, inputs, outputs, is_train, state):
        cond, x, y = inputs
        k.where_forward(outputs[0], cond, x, y, self._inner(cond, x))

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        zero_grads(k, in_grads[:1], req[:1])
        if out_grads[0] is None:
            return zero_grads(k, in_grads[1:], req[1:])
        cond, x, _ = inputs
        k.where_backward(in_grads[1], in_grads[2], cond, out_grads[0], self._inner(cond, x),
                         req[1], req[2])


# ---------------------------------------------------------------------------------------------
# Cast, fills, add_n
# ---------------------------------------------------------------------------------------------
@register
class Cast(_SameShape, _FlatCopy):
    name = "Cast"
    aliases = ("cast",)
    params = {"dtype": Dtype(doc="Output data type")}

    def infer_type(self, p, in_types):
        return list(in_types), [p.dtype]


_AMP_FLOATS = ("float16", "float32", "float64")


@register
class AmpCast(Cast):
    """``amp_cast`` (inserted by mixed precision): Cast for floating-point inputs; any other
    input passes through with its own type. The gradient comes back in the input's type."""
    name = "amp_cast"
    aliases = ()
    params = {"dtype": Dtype(doc="Output type (for floating-point inputs)")}

    def infer_type(self, p, in_types):
        t = in_types[0]
        if t is not None and t not in _AMP_FLOATS:
            return list(in_types), [t]
        return list(in_types), [p.dtype]


@register
class AmpMulticast(_CountedOutputs):
    """``amp_multicast``: casts its ``num_outputs`` inputs to their widest floating type (the
    narrowest with ``cast_narrow``); output i is input i cast, gradients come back in each
    input's type."""
    name = "amp_multicast"
    variadic = "num_outputs"
    params = {"num_outputs": Int(doc="Number of inputs (and outputs)"),
              "cast_narrow": Bool(False, doc="Cast to the narrowest instead of the widest type")}

    def infer_shape(self, p, in_shapes):
        return list(in_shapes), list(in_shapes)

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        return [self.merge(i, o, "input %d vs output %d" % (n, n))
                for n, (i, o) in enumerate(zip(in_shapes, out_shapes))]

    def infer_type(self, p, in_types):
        floats = [t for t in in_types if t in _AMP_FLOATS]
        if len(floats) < len(in_types) and any(t is None for t in in_types):
            return list(in_types), [None] * p.num_outputs
        if not floats:
            return list(in_types), list(in_types)
        pick = min if p.cast_narrow else max
        target = pick(floats, key=_AMP_FLOATS.index)
        return list(in_types), [target if t in _AMP_FLOATS else t for t in in_types]

    def forward(self, p, k, inputs, outputs, is_train, state):
        for x, y in zip(inputs, outputs):
            k.assign(y, x, "write")

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        for dy, dx, r in zip(out_grads, in_grads, req):
            if r == "null":
                continue
            if dy is None:
                zero_grads(k, [dx], [r])
            else:
                k.assign(dx, dy, r)


@register
class CastStorage(_SameShape, _FlatCopy):
    """The values unchanged, reported with storage type ``stype``. lightmod keeps every array
    dense, so this is a copy whose storage label changes; the gradient passes through."""
    name = "cast_storage"
    aliases = ("_sparse_cast_storage",)
    params = {"stype": Enum("default", "row_sparse", "csr", doc="Output storage type")}

    def infer_shape(self, p, in_shapes):
        shape = in_shapes[0]
        if p.stype == "csr" and shape is not None and len(shape) != 2:
            raise self.error("stype='csr' needs a 2-dimensional input, got shape %s", shape)
        if p.stype == "row_sparse" and shape is not None and len(shape) < 1:
            raise self.error("stype='row_sparse' needs at least 1 dimension, got shape %s", shape)
        return list(in_shapes), [shape]

    def infer_storage_type(self, p, in_stypes):
        return [p.stype]


class _Fill(_TensorOp):
    """No inputs: an array of ``shape`` filled with one value (0 dims: filled by consumers)."""
    inputs = ()
    value = 0.0

    def infer_shape(self, p, in_shapes):
        return [], [tuple(p.shape) if p.shape is not None else None]

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        return []

    def infer_type(self, p, in_types):
        return [], [p.dtype]

    def fill_value(self, p):
        return self.value

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.fill(outputs[0], self.fill_value(p))

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        return None       # no inputs, nothing flows back

    def has_backward(self, p):
        return False


def _fill_params(**extra):
    params = {"shape": Shape((), doc="Shape of the result (0 dims: inferred)"),
              "ctx": Str("", doc="Context (ignored: the executor's context is used)"),
              "dtype": Dtype("float32", doc="Type of the result")}
    params.update(extra)
    return params


@register
class Zeros(_Fill):
    name = "_zeros"
    params = _fill_params()
    value = 0.0


@register
class Ones(_Fill):
    name = "_ones"
    params = _fill_params()
    value = 1.0


@register
class Full(_Fill):
    name = "_full"
    params = _fill_params(value=Float(doc="Value to fill with"))

    def fill_value(self, p):
        return p.value


@register
class AddN(_TensorOp):
    name = "add_n"
    aliases = ("ElementWiseSum",)
    variadic = "num_args"
    params = {"num_args": Int(doc="Number of inputs to add")}

    def check_params(self, p):
        if p.num_args < 1:
            raise self.error("num_args=%d must be at least 1", p.num_args)

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        return [self.merge(s, out_shapes[0], "input '%s' vs the output" % name)
                for name, s in zip(self.list_inputs(p), in_shapes)]

    def forward(self, p, k, inputs, outputs, is_train, state):
        out = outputs[0]
        k.assign(out, inputs[0], "write")
        for x in inputs[1:]:
            k.assign(out, x, "add")

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if out_grads[0] is None:
            return zero_grads(k, in_grads, req)
        for g, r in zip(in_grads, req):
            if r != "null":
                k.assign(g, out_grads[0], r)


# ---------------------------------------------------------------------------------------------
# tile, repeat
# ---------------------------------------------------------------------------------------------
class _Repeating(_OneInput):
    """Ops whose output reads each input element several times.

    Subclasses define ``view(p, shape)``: (view shape, input element strides over it, the
    view's repeat axes); the output is that view copied, the gradient its sum over the repeat
    axes."""

    def forward(self, p, k, inputs, outputs, is_train, state):
        vshape, vstrides, _ = self.view(p, inputs[0].shape)
        k.strided_gather(outputs[0], inputs[0], 0, vshape, vstrides, "write")

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if not data_grad_needed(k, out_grads, in_grads, req):
            return
        vshape, _, raxes = self.view(p, inputs[0].shape)
        cshape, craxes = reduce_plan(tuple(vshape), tuple(raxes))
        k.reduce_axes(in_grads[0], out_grads[0], cshape, craxes, R_SUM, req[0])


@register
class Tile(_Repeating):
    name = "tile"
    params = {"reps": Shape(doc="Repetitions per axis (padded with 1s on the left)")}

    def check_params(self, p):
        for r in p.reps:
            if r is None or r < 1:
                raise self.error("reps=%s must contain positive integers", p.reps)

    def _pad(self, p, shape):
        nd = max(len(shape), len(p.reps))
        return ((1,) * (nd - len(shape)) + tuple(shape),
                (1,) * (nd - len(p.reps)) + tuple(p.reps))

    def out_shape(self, p, s):
        shape, reps = self._pad(p, s)
        return tuple(d * r for d, r in zip(shape, reps))

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        s, out = in_shapes[0], out_shapes[0]
        if s is None or out is None:
            return in_shapes
        _, reps = self._pad(p, s)
        extra = len(out) - len(s)
        back = tuple(out[i + extra] // reps[i + extra]
                     if out[i + extra] and out[i + extra] % reps[i + extra] == 0 else 0
                     for i in range(len(s)))
        return [self.merge(s, back, "input 'data' vs the output divided by reps")]

    def view(self, p, shape):
        shape, reps = self._pad(p, shape)
        st = contiguous_strides(shape)
        vshape, vstrides = [], []
        for d, r, s in zip(shape, reps, st):
            vshape += [r, d]
            vstrides += [0, s]
        return tuple(vshape), tuple(vstrides), tuple(range(0, len(vshape), 2))


@register
class Repeat(_Repeating):
    name = "repeat"
    params = {"repeats": Int(doc="Repetitions of each element"),
              "axis": OptInt(None, doc="Axis to repeat along (None: the flattened input)")}

    def check_params(self, p):
        if p.repeats < 0:
            raise self.error("repeats=%d cannot be a negative number", p.repeats)

    def out_shape(self, p, s):
        if p.axis is None:
            return (shape_size(s) * p.repeats,)
        a = self.axis(p.axis, len(s), shape=s)
        return s[:a] + (s[a] * p.repeats,) + s[a + 1:]

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        s, out = in_shapes[0], out_shapes[0]
        if out is None or p.axis is None or p.repeats == 0:
            return in_shapes
        a = self.axis(p.axis, len(out), shape=out)
        back = out[:a] + (out[a] // p.repeats if out[a] % p.repeats == 0 else 0,) + out[a + 1:]
        return [self.merge(s, back, "input 'data' vs the output divided by repeats")]

    def view(self, p, shape):
        if p.axis is None:
            pre, d, post = 1, shape_size(shape), 1
        else:
            pre, d, post = _outer_inner(shape, self.axis(p.axis, len(shape),
                                                         shape=tuple(shape)))
        return (pre, d, p.repeats, post), (d * post, post, 0, 1), (2,)


# ---------------------------------------------------------------------------------------------
# argmax, argmin
# ---------------------------------------------------------------------------------------------
class _ArgReduce(_OneInput):
    head_grad_unused = True   # the gradient is zero: MXNet never reads the head gradient
    is_max = True
    params = {"axis": OptInt(None, doc="The axis (None: the flattened input)"),
              "keepdims": Bool(False, doc="Keep the reduced axis as a size-1 dim")}

    def out_shape(self, p, s):
        if p.axis is None:
            return (1,) * len(s) if p.keepdims else (1,)
        a = self.axis(p.axis, len(s), shape=s)
        out = s[:a] + (1,) + s[a + 1:] if p.keepdims else s[:a] + s[a + 1:]
        return out or (1,)

    def forward(self, p, k, inputs, outputs, is_train, state):
        x = inputs[0]
        if p.axis is None:
            outer, n, inner = 1, shape_size(x.shape), 1
        else:
            outer, n, inner = _outer_inner(x.shape, self.axis(p.axis, len(x.shape),
                                                              shape=tuple(x.shape)))
        k.arg_reduce(outputs[0], x, outer, n, inner, self.is_max)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        zero_grads(k, in_grads, req)


@register
class ArgMax(_ArgReduce):
    name = "argmax"
    is_max = True


@register
class ArgMin(_ArgReduce):
    name = "argmin"
    is_max = False


@register
class ArgMaxChannel(_OneInput):
    """``argmax_channel``: the position of the largest value along axis 1 (the first one on
    ties), as float; the output drops that axis. Data needs at least 2 dimensions."""
    name = "argmax_channel"
    differentiable = False     # MXNet registers no gradient
    params = {}

    def out_shape(self, p, s):
        if len(s) < 2:
            raise self.error("data must have at least 2 dimensions (argmax runs along axis 1), "
                             "got shape %s", tuple(s))
        return s[:1] + s[2:]

    def forward(self, p, k, inputs, outputs, is_train, state):
        x = inputs[0]
        outer, n, inner = _outer_inner(x.shape, 1)
        k.arg_reduce(outputs[0], x, outer, n, inner, True)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        zero_grads(k, in_grads, req)


# ---------------------------------------------------------------------------------------------
# topk, sort, argsort
# ---------------------------------------------------------------------------------------------
class _Sorting(_TensorOp):
    """Ops built on the stable rank of every element along ``axis`` (None: the flattened input).

    ``k.axis_ranks`` ranks each line; the outputs are selections by rank (values, positions or
    a mask of the k first); the gradient of selected values goes back to their positions.
    Subclasses define ``settings(p)``: (k, ret_typ, is_ascend, index dtype)."""

    def _k(self, p, n):
        k = self.settings(p)[0]
        if k > n:
            raise self.error("k=%d must not exceed the %d elements along the axis", k, n)
        return n if k <= 0 else k

    def _geometry(self, p, shape):
        shape = tuple(shape)
        if p.axis is None:
            return 1, shape_size(shape), 1
        return _outer_inner(shape, self.axis(p.axis, len(shape), shape=shape))

    def num_outputs(self, p):
        return 2 if self.settings(p)[1] == "both" else 1

    def infer_shape(self, p, in_shapes):
        s = in_shapes[0]
        if s is None:
            return [None], [None] * self.num_outputs(p)
        ret = self.settings(p)[1]
        if ret == "mask":
            # the mask keeps the input's shape, but k is checked here as MXNet does
            n = shape_size(s) if p.axis is None else s[self.axis(p.axis, len(s), shape=s)]
            if n:
                self._k(p, n)
            return [s], [s]
        if p.axis is None:
            n = shape_size(s)
            out = (self._k(p, n) if n else 0,)
        else:
            a = self.axis(p.axis, len(s), shape=s)
            out = s[:a] + ((self._k(p, s[a]) if s[a] else 0),) + s[a + 1:]
        return [s], [out] * self.num_outputs(p)

    def infer_type(self, p, in_types):
        t = in_types[0]
        ret, index_dtype = self.settings(p)[1], self.settings(p)[3]
        outs = {"value": [t], "mask": [t], "indices": [index_dtype], "both": [t, index_dtype]}
        return [t], outs[ret]

    def forward(self, p, k, inputs, outputs, is_train, state):
        x = inputs[0]
        outer, n, inner = self._geometry(p, x.shape)
        kk = self._k(p, n)
        _, ret, ascend, _ = self.settings(p)
        ranks = state.get("ranks")
        if ranks is None or tuple(ranks.shape) != tuple(x.shape):
            ranks = state["ranks"] = k.empty(tuple(x.shape), "int64")
        k.axis_ranks(ranks, x, outer, n, inner, ascend)
        if ret == "mask":
            k.rank_mask(outputs[0], ranks, kk)
        else:
            values = outputs[0] if ret in ("value", "both") else None
            indices = outputs[-1] if ret in ("indices", "both") else None
            k.rank_select(values, indices, x, ranks, outer, n, inner, kk)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if req[0] == "null":
            return
        if self.settings(p)[1] not in ("value", "both") or out_grads[0] is None:
            return zero_grads(k, in_grads, req)
        outer, n, inner = self._geometry(p, inputs[0].shape)
        k.rank_select_backward(in_grads[0], out_grads[0], state["ranks"], outer, n, inner,
                               self._k(p, n), req[0])


@register
class TopK(_Sorting):
    name = "topk"
    params = {"axis": OptInt(-1, doc="Axis to select along (None: the flattened input)"),
              "k": Int(1, doc="Number of elements to select (<= 0: all of them)"),
              "ret_typ": Enum("both", "indices", "mask", "value", default="indices",
                              doc="What to return"),
              "is_ascend": Bool(False, doc="Select the smallest instead of the largest"),
              "dtype": Dtype("float32", doc="Type of the returned indices")}

    def settings(self, p):
        return p.k, p.ret_typ, p.is_ascend, p.dtype


@register
class Sort(_Sorting):
    name = "sort"
    params = {"axis": OptInt(-1, doc="Axis to sort along (None: the flattened input)"),
              "is_ascend": Bool(True, doc="Ascending order")}

    def settings(self, p):
        return 0, "value", p.is_ascend, None


@register
class ArgSort(_Sorting):
    name = "argsort"
    head_grad_unused = True   # the gradient is zero: MXNet never reads the head gradient
    params = {"axis": OptInt(-1, doc="Axis to sort along (None: the flattened input)"),
              "is_ascend": Bool(True, doc="Ascending order"),
              "dtype": Dtype("float32", doc="Type of the returned indices")}

    def settings(self, p):
        return 0, "indices", p.is_ascend, p.dtype


# ---------------------------------------------------------------------------------------------
# ops that read one strided view of their input: diag, depth_to_space, space_to_depth,
# slice_like, split_v2
# ---------------------------------------------------------------------------------------------
class _ViewRead(_OneInput):
    """out = a strided view of data (element offset, shape, strides over data); the gradient
    goes back through the same view (zeros where the view does not reach).

    Subclasses define ``view(p, shape)``; ``covers_input`` says the view reads every input
    element exactly once (a permutation), so a 'write' gradient needs no clearing first."""
    covers_input = False

    def forward(self, p, k, inputs, outputs, is_train, state):
        offset, vshape, vstrides = self.view(p, tuple(inputs[0].shape))
        k.strided_gather(outputs[0], inputs[0], offset, vshape, vstrides, "write")

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        zero_grads(k, in_grads[1:], req[1:])
        if req[0] == "null":
            return
        g = in_grads[0]
        if out_grads[0] is None:
            return zero_grads(k, [g], req[:1])
        if req[0] == "write" and not self.covers_input:
            k.fill(g, 0)
            mode = "add"
        else:
            mode = req[0]
        offset, vshape, vstrides = self.view(p, tuple(g.shape))
        k.strided_scatter(g, out_grads[0], offset, vshape, vstrides, mode)


def _diag_length(shape1, shape2, k):
    """Length of the k-th diagonal of a (shape1, shape2) matrix (negative: none)."""
    return min(shape1 + min(k, 0), shape2 - max(k, 0))


@register
class Diag(_ViewRead):
    """``diag``: a 1-D input becomes the square matrix with it on diagonal ``k``; an input of 2
    or more dims gives its k-th diagonal over ``axis1``/``axis2`` (those axes dropped, the
    diagonal appended last), as numpy's ``diag`` / ``diagonal``."""
    name = "diag"
    params = {"k": Int(0, doc="Diagonal: 0 the main one, > 0 above it, < 0 below it"),
              "axis1": Int(0, doc="First axis of the 2-D planes the diagonal is taken from"),
              "axis2": Int(1, doc="Second axis of the 2-D planes the diagonal is taken from")}

    def _axes(self, p, s):
        a1 = self.axis(p.axis1, len(s), "axis1", s)
        a2 = self.axis(p.axis2, len(s), "axis2", s)
        if a1 == a2:
            raise self.error("axis1=%d and axis2=%d name the same axis of the input of shape %s",
                             p.axis1, p.axis2, s)
        return a1, a2

    def out_shape(self, p, s):
        if len(s) == 0:
            raise self.error("input 'data' must have at least 1 dim, got shape %s", s)
        if len(s) == 1:
            n = s[0] + abs(p.k) if s[0] else 0
            return (n, n)
        a1, a2 = self._axes(p, s)
        rest = tuple(d for i, d in enumerate(s) if i not in (a1, a2))
        if not (s[a1] and s[a2]):
            return rest + (0,)
        length = _diag_length(s[a1], s[a2], p.k)
        if length <= 0:
            raise self.error("k=%d is out of range for axes %d and %d of the input of shape %s "
                             "(the diagonal would be empty)", p.k, a1, a2, s)
        return rest + (length,)

    def _diagonal_view(self, p, mshape, st, a1, a2):
        """(offset, shape, strides) of diagonal k of an array of shape mshape / strides st."""
        rest = [i for i in range(len(mshape)) if i not in (a1, a2)]
        offset = p.k * st[a2] if p.k >= 0 else -p.k * st[a1]
        length = _diag_length(mshape[a1], mshape[a2], p.k)
        return (offset, tuple(mshape[i] for i in rest) + (length,),
                tuple(st[i] for i in rest) + (st[a1] + st[a2],))

    def view(self, p, shape):
        a1, a2 = self._axes(p, shape)
        return self._diagonal_view(p, shape, contiguous_strides(shape), a1, a2)

    def forward(self, p, k, inputs, outputs, is_train, state):
        if len(inputs[0].shape) > 1:
            return super().forward(p, k, inputs, outputs, is_train, state)
        out = outputs[0]        # 1-D input: write it on the diagonal of a zero matrix
        k.fill(out, 0)
        offset, vshape, vstrides = self._diagonal_view(p, tuple(out.shape),
                                                       contiguous_strides(out.shape), 0, 1)
        k.strided_scatter(out, inputs[0], offset, vshape, vstrides, "write")

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if len(inputs[0].shape) > 1:
            return super().backward(p, k, out_grads, inputs, outputs, in_grads, req, state)
        if not data_grad_needed(k, out_grads, in_grads, req):
            return
        og = out_grads[0]
        offset, vshape, vstrides = self._diagonal_view(p, tuple(og.shape),
                                                       contiguous_strides(og.shape), 0, 1)
        k.strided_gather(in_grads[0], og, offset, vshape, vstrides, req[0])


class _BlockMove(_ViewRead):
    """depth_to_space / space_to_depth on NCHW data: a permutation of the elements."""
    params = {"block_size": Int(doc="Edge of the square blocks moved between depth and space")}
    covers_input = True

    def check_params(self, p):
        if p.block_size < 1:
            raise self.error("block_size=%d must be a positive integer", p.block_size)

    def checked(self, s):
        if len(s) != 4:
            raise self.error("input 'data' must have 4 dims (N, C, H, W), got shape %s", s)
        if any(d == 0 for d in s[1:]):
            raise self.error("input 'data' of shape %s has an empty dim", s)

    def forward(self, p, k, inputs, outputs, is_train, state):
        self.checked(tuple(inputs[0].shape))
        super().forward(p, k, inputs, outputs, is_train, state)


@register
class DepthToSpace(_BlockMove):
    """(N, C, H, W) -> (N, C / b^2, H * b, W * b): channel (i * b + j) * C / b^2 + c moves to
    the position (i, j) of the b x b block that replaces each pixel of channel c."""
    name = "depth_to_space"

    def out_shape(self, p, s):
        self.checked(s)
        b = p.block_size
        if s[1] % (b * b):
            raise self.error("the channels of input 'data' (shape %s) must be a multiple of "
                             "block_size^2 = %d", s, b * b)
        return (s[0], s[1] // (b * b), s[2] * b, s[3] * b)

    def view(self, p, shape):
        n, c, h, w = shape
        b = p.block_size
        cb = c // (b * b)
        # the output as (n, cb, h, i, w, j) reading input channel (i * b + j) * cb + c
        return 0, (n, cb, h, b, w, b), (c * h * w, h * w, w, b * cb * h * w, 1, cb * h * w)


@register
class SpaceToDepth(_BlockMove):
    """(N, C, H, W) -> (N, C * b^2, H / b, W / b), the inverse of depth_to_space."""
    name = "space_to_depth"

    def out_shape(self, p, s):
        self.checked(s)
        b = p.block_size
        if s[2] % b or s[3] % b:
            raise self.error("the height and width of input 'data' (shape %s) must be "
                             "multiples of block_size=%d", s, b)
        return (s[0], s[1] * b * b, s[2] // b, s[3] // b)

    def view(self, p, shape):
        n, c, h, w = shape
        b = p.block_size
        ho, wo = h // b, w // b
        # the output as (n, i, j, c, ho, wo) reading input (n, c, ho * b + i, wo * b + j)
        return 0, (n, b, b, c, ho, wo), (c * h * w, w, 1, h * w, b * w, b)


@register
class SliceLike(_TensorOp):
    """data[:m0, :m1, ...] where m are the sizes of ``shape_like`` on ``axes`` (all axes when
    empty). shape_like only gives its shape: it may have any dtype and gets a zero gradient."""
    name = "slice_like"
    inputs = ("data", "shape_like")
    params = {"axes": Shape((), doc="Axes to slice (empty: all of them)")}

    def infer_shape(self, p, in_shapes):
        data, like = in_shapes
        if data is None or like is None:
            return list(in_shapes), [None]
        if not p.axes:
            if len(data) != len(like):
                raise self.error("without axes, shape_like (shape %s) must have as many dims "
                                 "as data (shape %s)", like, data)
            axes = range(len(data))
        else:
            axes = []
            for a in p.axes:
                ax = self.axis(a, len(data), "axes", data)
                if ax >= len(like):
                    raise self.error("axes=%s: axis %d does not exist in shape_like of shape %s",
                                     p.axes, a, like)
                axes.append(ax)
        out = list(data)
        for ax in axes:
            if data[ax] and like[ax] and like[ax] > data[ax]:
                raise self.error("axis %d of shape_like (shape %s) is longer than that of data "
                                 "(shape %s)", ax, like, data)
            out[ax] = like[ax] if data[ax] else 0
        return list(in_shapes), [tuple(out)]

    def infer_type(self, p, in_types):
        return list(in_types), [in_types[0]]

    def forward(self, p, k, inputs, outputs, is_train, state):
        out = outputs[0]        # the window starts at 0 and keeps data's strides
        k.strided_gather(out, inputs[0], 0, out.shape, contiguous_strides(inputs[0].shape),
                         "write")

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        g = cleared_data_grad(k, in_grads, req)
        if g is not None and out_grads[0] is not None:
            k.strided_scatter(g, out_grads[0], 0, outputs[0].shape, contiguous_strides(g.shape),
                              "add")


class _Split(_TensorOp):
    """Splits along ``axis`` into parts given by ``parts(p)``: (start indices beginning with
    0, or an empty tuple, and a count of equal sections, or 0); ``squeeze_axis`` drops the
    axis of parts of length 1."""

    def num_outputs(self, p):
        starts, sections = self.parts(p)
        return sections if sections > 0 else len(starts)

    def _bounds(self, p, n):
        """[start, end) of every part along an axis of length n."""
        starts, sections = self.parts(p)
        if sections > 0:
            if n % sections:
                raise self.error("%d sections do not divide the axis of length %d evenly",
                                 sections, n)
            size = n // sections
            return [(i * size, (i + 1) * size) for i in range(sections)]
        ends = list(starts[1:]) + [n]
        for lo, hi in zip(starts, ends):
            if not 0 <= lo <= hi <= n:
                raise self.error("split indices %s must increase within the axis of length %d",
                                 tuple(starts[1:]), n)
        return list(zip(starts, ends))

    def infer_shape(self, p, in_shapes):
        s = in_shapes[0]
        count = self.num_outputs(p)
        if s is None:
            return [None], [None] * count
        a = self.axis(p.axis, len(s), shape=s)
        if not s[a]:
            return [s], [s[:a] + (0,) + s[a + 1:]] * count
        outs = []
        for lo, hi in self._bounds(p, s[a]):
            if p.squeeze_axis and hi - lo == 1:
                outs.append(s[:a] + s[a + 1:])
            else:
                outs.append(s[:a] + (hi - lo,) + s[a + 1:])
        return [s], outs

    def _views(self, p, shape):
        a = self.axis(p.axis, len(shape), shape=tuple(shape))
        st = contiguous_strides(shape)
        for lo, hi in self._bounds(p, shape[a]):
            yield lo * st[a], tuple(shape[:a]) + (hi - lo,) + tuple(shape[a + 1:]), st

    def forward(self, p, k, inputs, outputs, is_train, state):
        x = inputs[0]
        for out, (offset, vshape, st) in zip(outputs, self._views(p, x.shape)):
            k.strided_gather(out, x, offset, vshape, st, "write")

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        g = cleared_data_grad(k, in_grads, req)
        if g is None:
            return
        for og, (offset, vshape, st) in zip(out_grads, self._views(p, g.shape)):
            if og is not None:
                k.strided_scatter(g, og, offset, vshape, st, "add")


@register
class SplitV2(_Split):
    """``_split_v2``: data cut along ``axis`` at ``indices`` (the first is 0), or into
    ``sections`` equal parts when sections > 0."""
    name = "_split_v2"
    params = {"indices": Shape((), doc="Start of every part along the axis (the first is 0)"),
              "axis": Int(1, doc="Axis to split along"),
              "squeeze_axis": Bool(False, doc="Drop the split axis from parts of length 1"),
              "sections": Int(0, doc="Number of equal parts (used when > 0)")}

    def check_params(self, p):
        if p.sections < 0:
            raise self.error("sections=%d must not be negative", p.sections)
        if p.sections == 0 and not p.indices:
            raise self.error("either sections or indices must be given")

    def parts(self, p):
        return tuple(p.indices), p.sections


class _IntOrShape(Shape):
    """An int (a count) or a tuple of ints."""
    type_name = "int or tuple of int"

    def parse(self, value):
        try:
            return Int().parse(value)
        except ValueError:
            return super().parse(value)


@register
class SplitV2Frontend(_Split):
    """``split_v2`` as numpy's ``split``: ``indices_or_sections`` is a number of equal parts,
    or the tuple of indices where the parts after the first start."""
    name = "split_v2"
    params = {"indices_or_sections": _IntOrShape(doc="Number of equal parts, or split indices"),
              "axis": Int(0, doc="Axis to split along"),
              "squeeze_axis": Bool(False, doc="Drop the split axis from parts of length 1")}

    def check_params(self, p):
        if isinstance(p.indices_or_sections, int) and p.indices_or_sections < 1:
            raise self.error("indices_or_sections=%d must be a positive number of parts",
                             p.indices_or_sections)

    def parts(self, p):
        if isinstance(p.indices_or_sections, int):
            return (), p.indices_or_sections
        return (0,) + tuple(p.indices_or_sections), 0


# ---------------------------------------------------------------------------------------------
# one element per row: batch_take, choose_element_0index, fill_element_0index
# ---------------------------------------------------------------------------------------------
class _RowPick(_IndexTypes):
    """out[i] = data[i, index[i]] for data seen as (len(index), rest) (indices clipped into
    range); the gradient goes back to the picked elements."""
    index_inputs = ("indices",)

    def infer_shape(self, p, in_shapes):
        data, idx = in_shapes
        if data is None:
            return list(in_shapes), [idx]
        if len(data) < 2:
            raise self.error("input '%s' must have at least 2 dims, got shape %s",
                             self.inputs[0], data)
        rows = (data[0],)
        if idx is not None and shape_is_known(idx) and data[0] and \
                shape_size(idx) != data[0]:
            raise self.error("input '%s' has shape %s, expected %d indices (one per row of "
                             "input '%s' of shape %s)", self.inputs[1], idx, data[0],
                             self.inputs[0], data)
        return [data, idx if idx is not None else rows], [idx if idx is not None else rows]

    def _geometry(self, shape):
        return shape[0], shape_size(shape[1:])

    def forward(self, p, k, inputs, outputs, is_train, state):
        rows, n = self._geometry(inputs[0].shape)
        k.pick_forward(outputs[0], inputs[0], inputs[1], rows, n, 1, False)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if not data_grad_needed(k, out_grads, in_grads, req):
            return
        rows, n = self._geometry(inputs[0].shape)
        k.pick_backward(in_grads[0], out_grads[0], inputs[1], rows, n, 1, False, req[0])


@register
class BatchTake(_RowPick):
    name = "batch_take"
    differentiable = False     # MXNet registers no gradient
    inputs = ("a", "indices")


@register
class ChooseElement0Index(_RowPick):
    name = "choose_element_0index"
    inputs = ("lhs", "rhs")
    index_inputs = ("rhs",)
    extra_attributes_ignored = False    # MXNet's has parameters (pick's): others are errors


@register
class FillElement0Index(_IndexTypes):
    """out = lhs with out[i, rhs[i]] = mhs[i] (indices clipped into range). The gradient of lhs
    is the head gradient without the filled elements, that of mhs the filled ones."""
    name = "fill_element_0index"
    inputs = ("lhs", "mhs", "rhs")
    index_inputs = ("rhs",)

    def infer_shape(self, p, in_shapes):
        lhs, mhs, rhs = in_shapes
        if lhs is not None and len(lhs) != 2:
            raise self.error("input 'lhs' must have 2 dims, got shape %s", lhs)
        rows = None if lhs is None else (lhs[0],)
        mhs = self.merge(mhs, rows, "input 'mhs' vs one value per row of 'lhs'")
        rhs = self.merge(rhs, rows, "input 'rhs' vs one index per row of 'lhs'")
        return [lhs, mhs, rhs], [lhs]

    def infer_type(self, p, in_types):
        lhs, mhs, rhs = in_types
        return [lhs, mhs if mhs is not None else lhs, rhs if rhs is not None else lhs], [lhs]

    def forward(self, p, k, inputs, outputs, is_train, state):
        lhs, mhs, rhs = inputs
        out = outputs[0]
        if out is not lhs:
            k.assign(out, lhs, "write")
        k.pick_assign(out, mhs, rhs, lhs.shape[0], lhs.shape[1], 1, False)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        zero_grads(k, in_grads[2:], req[2:])
        og = out_grads[0]
        if og is None:
            return zero_grads(k, in_grads[:2], req[:2])
        lhs, mhs, rhs = inputs
        rows, n = lhs.shape
        if req[1] == "write":
            k.pick_forward(in_grads[1], og, rhs, rows, n, 1, False)
        elif req[1] == "add":
            picked = state.get("picked")
            if picked is None:
                picked = state["picked"] = k.empty((rows,), og.dtype)
            k.pick_forward(picked, og, rhs, rows, n, 1, False)
            k.assign(in_grads[1], picked, "add")
        if req[0] != "null":
            masked = state.get("masked")
            if masked is None:
                masked = state["masked"] = k.empty(tuple(og.shape), og.dtype)
                state["zeros"] = k.zeros((rows,), og.dtype)
            k.assign(masked, og, "write")
            k.pick_assign(masked, state["zeros"], rhs, rows, n, 1, False)
            k.assign(in_grads[0], masked, req[0])



# ---------------------------------------------------------------------------------------------
# sequences without inputs: _arange, _linspace, _eye
# ---------------------------------------------------------------------------------------------
class _Sequence(_Fill):
    """Values computed from their position: ``k.range_fill`` writes start + (i // repeat) *
    step in double precision, rounded into the output's dtype."""

    def forward(self, p, k, inputs, outputs, is_train, state):
        start, step, repeat = self.progression(p)
        k.range_fill(outputs[0], start, step, repeat)


@register
class Arange(_Sequence):
    """Evenly spaced values in [start, stop) (stop None: [0, start)), each repeated ``repeat``
    times. As in MXNet, start and step are first cast to the output dtype (an int32 range
    from 1.3 in steps of 1.3 counts 1, 2, 3 ...); the length is ceil((stop - start) / step).
    With ``infer_range`` and no stop, the length comes from the consumers' shapes."""
    name = "_arange"
    aliases = ("arange",)
    params = {"start": Float(doc="Start of the interval"),
              "stop": OptFloat(None, doc="End of the interval, excluded (None: start, and "
                                         "start is 0)"),
              "step": Float(1.0, doc="Spacing between values"),
              "repeat": Int(1, doc="Times each value is repeated"),
              "infer_range": Bool(False, doc="Infer stop from the output shape"),
              "ctx": Str("", doc="Context (ignored: the executor's context is used)"),
              "dtype": Dtype("float32", doc="Type of the result")}

    def check_params(self, p):
        if p.step == 0:
            raise self.error("step=0 is not allowed: the range would never end")
        if p.repeat < 1:
            raise self.error("repeat=%d must be at least 1", p.repeat)
        if p.stop is not None or not p.infer_range:
            start, stop = (p.start, p.stop) if p.stop is not None else (0.0, p.start)
            if math.ceil((stop - start) / p.step) <= 0:
                raise self.error("the range from start=%s to stop=%s with step=%s is empty",
                                 start, stop, p.step)

    def infer_shape(self, p, in_shapes):
        if p.stop is None and p.infer_range:
            return [], [None]
        start, stop = (p.start, p.stop) if p.stop is not None else (0.0, p.start)
        return [], [(int(math.ceil((stop - start) / p.step)) * p.repeat,)]

    def progression(self, p):
        start = p.start if p.stop is not None or p.infer_range else 0.0
        if p.dtype not in ("float16", "float32", "float64"):
            start, step = float(int(start)), float(int(p.step))
        else:
            start, step = float(np.dtype(p.dtype).type(start)), float(
                np.dtype(p.dtype).type(p.step))
        return start, step, p.repeat


@register
class Linspace(_Sequence):
    """``num`` evenly spaced values from start to stop (stop included when ``endpoint``),
    computed in double precision and then rounded into the dtype."""
    name = "_linspace"
    aliases = ("linspace",)
    params = {"start": Float(doc="First value"),
              "stop": Float(doc="Last value (or the end of the interval without endpoint)"),
              "num": Int(doc="Number of values"),
              "endpoint": Bool(True, doc="Include stop as the last value"),
              "ctx": Str("", doc="Context (ignored: the executor's context is used)"),
              "dtype": Dtype("float32", doc="Type of the result")}

    def check_params(self, p):
        if p.num < 0:
            raise self.error("num=%d must not be negative", p.num)

    def infer_shape(self, p, in_shapes):
        return [], [(p.num,)]

    def progression(self, p):
        parts = p.num - 1 if p.endpoint else p.num
        return p.start, (p.stop - p.start) / parts if parts > 0 else 0.0, 1

    def forward(self, p, k, inputs, outputs, is_train, state):
        super().forward(p, k, inputs, outputs, is_train, state)
        if p.endpoint and p.num > 1:       # exactly stop, whatever the rounding of the steps
            k.fill(outputs[0][p.num - 1:], p.stop)


@register
class Eye(_Fill):
    """An N x M matrix (M = 0: square) of zeros with ones on diagonal ``k``."""
    name = "_eye"
    aliases = ("eye",)
    params = {"N": Int(doc="Number of rows"),
              "M": Int(0, doc="Number of columns (0: N)"),
              "k": Int(0, doc="Diagonal: 0 the main one, > 0 above it, < 0 below it"),
              "ctx": Str("", doc="Context (ignored: the executor's context is used)"),
              "dtype": Dtype("float32", doc="Type of the result")}

    def check_params(self, p):
        if p.N < 1 or p.M < 0:
            raise self.error("N=%d must be positive and M=%d not negative", p.N, p.M)

    def infer_shape(self, p, in_shapes):
        return [], [(p.N, p.M or p.N)]

    def forward(self, p, k, inputs, outputs, is_train, state):
        out = outputs[0]
        k.fill(out, 0)
        rows, cols = out.shape
        length = _diag_length(rows, cols, p.k)
        if length <= 0:
            return
        ones = state.get("ones")
        if ones is None:
            ones = state["ones"] = k.full((length,), 1, out.dtype)
        offset = p.k if p.k >= 0 else -p.k * cols
        k.strided_scatter(out, ones, offset, (length,), (cols + 1,), "write")


# ---------------------------------------------------------------------------------------------
# slice assignment: _slice_assign (_crop_assign), _slice_assign_scalar (_crop_assign_scalar)
# ---------------------------------------------------------------------------------------------
class _SliceAssignBase(Slice):
    """out = lhs with the window begin:end:step (as ``slice``) replaced; the gradient of lhs
    is the head gradient with the window zeroed."""
    aliases = ()

    def infer_shape(self, p, in_shapes):
        lhs = in_shapes[0]
        if lhs is None:
            return list(in_shapes), [None]
        return list(in_shapes), [lhs]

    def infer_shape_backward(self, p, in_shapes, out_shapes):
        filled = list(in_shapes)
        filled[0] = self.merge(in_shapes[0], out_shapes[0], "input 'lhs' vs its output")
        return filled

    def forward(self, p, k, inputs, outputs, is_train, state):
        out = outputs[0]
        if out is not inputs[0]:
            k.assign(out, inputs[0], "write")
        self.write_window(p, k, inputs, out, state)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        og = out_grads[0]
        if og is None:
            return zero_grads(k, in_grads, req)
        offset, shape, strides = self._view(p, tuple(og.shape))
        if len(in_grads) > 1 and req[1] != "null":
            k.strided_gather(in_grads[1], og, offset, shape, strides, req[1])
        if req[0] == "null":
            return
        masked = state.get("masked")
        if masked is None:
            masked = state["masked"] = k.empty(tuple(og.shape), og.dtype)
            state["window_zeros"] = k.zeros(shape, og.dtype)
        k.assign(masked, og, "write")
        k.strided_scatter(masked, state["window_zeros"], offset, shape, strides, "write")
        k.assign(in_grads[0], masked, req[0])


@register
class SliceAssign(_SliceAssignBase):
    name = "_slice_assign"
    aliases = ("_crop_assign",)
    inputs = ("lhs", "rhs")

    def infer_shape(self, p, in_shapes):
        lhs, rhs = in_shapes
        if lhs is None:
            return list(in_shapes), [None]
        window = tuple(n for _, n, _ in self.window(p, lhs))
        if any(d and not n for d, n in zip(lhs, window)):
            raise self.error("the window begin=%s, end=%s, step=%s of input 'lhs' of shape %s "
                             "is empty", p.begin, p.end, p.step, lhs)
        if rhs is not None and shape_is_known(window) and shape_is_known(rhs) and \
                tuple(rhs) != window:
            raise self.error("input 'rhs' has shape %s, expected %s (the window begin=%s, "
                             "end=%s of input 'lhs' of shape %s)", rhs, window, p.begin, p.end,
                             lhs)
        return [lhs, window if rhs is None else rhs], [lhs]

    def write_window(self, p, k, inputs, out, state):
        offset, shape, strides = self._view(p, tuple(out.shape))
        k.strided_scatter(out, inputs[1], offset, shape, strides, "write")


@register
class SliceAssignScalar(_SliceAssignBase):
    name = "_slice_assign_scalar"
    aliases = ("_crop_assign_scalar",)
    params = dict(Slice.params, scalar=Float(0.0, doc="The value written into the window"))

    def write_window(self, p, k, inputs, out, state):
        offset, shape, strides = self._view(p, tuple(out.shape))
        values = state.get("values")
        if values is None or tuple(values.shape) != tuple(shape):
            values = state["values"] = k.full(shape, p.scalar, out.dtype)
        k.strided_scatter(out, values, offset, shape, strides, "write")


# ---------------------------------------------------------------------------------------------
# gather_nd, scatter_nd
# ---------------------------------------------------------------------------------------------
def _nd_geometry(indices_shape, full_shape):
    """(dims, strides, inner) of indices (m, ...) addressing the first m axes of full_shape."""
    m = indices_shape[0]
    inner = shape_size(full_shape[m:])
    strides = contiguous_strides(full_shape)[:m]
    return tuple(full_shape[:m]), strides, inner


class _IndexedND(_IndexTypes):
    index_inputs = ("indices",)

    def check_indices(self, indices, full):
        if len(indices) < 1:
            raise self.error("input 'indices' must have at least 1 dim, got shape %s", indices)
        if indices[0] and indices[0] > len(full):
            raise self.error("input 'indices' of shape %s addresses %d axes, but the array of "
                             "shape %s has %d", indices, indices[0], full, len(full))


@register
class GatherND(_IndexedND):
    """out[y...] = data[indices[0, y...], ..., indices[m-1, y...], :]: indices (m, Y...)
    select along data's first m axes; the output is Y + data.shape[m:]. Negative indices
    count from the end; others out of bounds raise IndexError. The gradient is scattered
    back (repeated indices add up)."""
    name = "gather_nd"
    inputs = ("data", "indices")

    def infer_shape(self, p, in_shapes):
        data, idx = in_shapes
        if data is None or idx is None:
            return list(in_shapes), [None]
        self.check_indices(idx, data)
        # one element picked from every axis: MXNet's shapes are never empty, so (1,)
        return list(in_shapes), [tuple(idx[1:]) + tuple(data[idx[0]:]) or (1,)]

    def forward(self, p, k, inputs, outputs, is_train, state):
        data, idx = inputs
        dims, strides, inner = _nd_geometry(tuple(idx.shape), tuple(data.shape))
        if not k.nd_indices_in_range(idx, dims):
            raise MXNetIndexError("Operator gather_nd: input 'indices' has an index out of "
                                  "bounds for the axes %s of input 'data' (shape %s)"
                                  % (dims, tuple(data.shape)))
        k.gather_nd(outputs[0], data, idx, dims, strides, inner)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        g = cleared_data_grad(k, in_grads, req)
        if g is not None and out_grads[0] is not None:
            dims, strides, inner = _nd_geometry(tuple(inputs[1].shape), tuple(g.shape))
            k.scatter_nd(g, out_grads[0], inputs[1], dims, strides, inner, "add")


@register
class ScatterND(_IndexedND):
    """An array of ``shape``, zeros except out[indices[:, y...]] = data[y...] (when indices
    repeat, one of the values is kept). The gradient of data gathers the head gradient."""
    name = "scatter_nd"
    inputs = ("data", "indices")
    params = {"shape": Shape(doc="Shape of the output")}

    def infer_shape(self, p, in_shapes):
        data, idx = in_shapes
        out = tuple(p.shape)
        if idx is not None:
            self.check_indices(idx, out)
            want = tuple(idx[1:]) + out[idx[0]:]
            if data is not None and shape_is_known(data) and shape_is_known(idx) and \
                    tuple(data) != want:
                raise self.error("input 'data' has shape %s, expected %s (indices %s into "
                                 "shape=%s)", data, want, idx, out)
            data = want if data is None else data
        return [data, idx], [out]

    def forward(self, p, k, inputs, outputs, is_train, state):
        data, idx = inputs
        out = outputs[0]
        dims, strides, inner = _nd_geometry(tuple(idx.shape), tuple(out.shape))
        if not k.nd_indices_in_range(idx, dims):
            raise MXNetIndexError("Operator scatter_nd: input 'indices' has an index out of "
                                  "bounds for the axes %s of shape=%s" % (dims, tuple(p.shape)))
        k.fill(out, 0)
        k.scatter_nd(out, data, idx, dims, strides, inner, "write")

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        if not data_grad_needed(k, out_grads, in_grads, req):
            return
        idx = inputs[1]
        dims, strides, inner = _nd_geometry(tuple(idx.shape), tuple(outputs[0].shape))
        if req[0] == "write":
            k.gather_nd(in_grads[0], out_grads[0], idx, dims, strides, inner)
        else:
            picked = state.get("picked")
            if picked is None:
                picked = state["picked"] = k.empty(tuple(in_grads[0].shape), in_grads[0].dtype)
            k.gather_nd(picked, out_grads[0], idx, dims, strides, inner)
            k.assign(in_grads[0], picked, "add")


# ---------------------------------------------------------------------------------------------
# ravel_multi_index, unravel_index
# ---------------------------------------------------------------------------------------------
class _IndexConversion(_OneInput):
    """Between coordinates (m, N) in an array of ``shape`` and flat C-order indices (N,). The
    first dim of shape may be -1 (open: it does not change the strides). No gradient flows."""
    params = {"shape": Shape(doc="Shape of the array the indices address (the first dim may "
                                 "be -1)")}
    head_grad_unused = True

    def check_params(self, p):
        if not p.shape or any(d is None or d < 1 for d in p.shape[1:]) or \
                p.shape[0] is None or p.shape[0] == 0 or p.shape[0] < -1:
            raise self.error("shape=%s must hold positive dims (the first may be -1)", p.shape)

    @staticmethod
    def strides(p):
        # the first dim never enters the strides, so an open -1 there is harmless
        return contiguous_strides((1,) + tuple(p.shape[1:]))

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        zero_grads(k, in_grads, req)


@register
class RavelMultiIndex(_IndexConversion):
    name = "_ravel_multi_index"
    aliases = ("ravel_multi_index",)

    def out_shape(self, p, s):
        if len(s) != 2 or (s[0] and s[0] != len(p.shape)):
            raise self.error("input 'data' must have shape (%d, N) (one row per dim of shape=%s)"
                             ", got %s", len(p.shape), p.shape, s)
        return (s[1],)

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.ravel_index(outputs[0], inputs[0], self.strides(p))


@register
class UnravelIndex(_IndexConversion):
    name = "_unravel_index"
    aliases = ("unravel_index",)

    def out_shape(self, p, s):
        if len(s) != 1:
            raise self.error("input 'data' must be 1-D (flat indices), got shape %s", s)
        return (len(p.shape), s[0])

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.unravel_index(outputs[0], inputs[0], p.shape, self.strides(p))


# ---------------------------------------------------------------------------------------------
# histogram
# ---------------------------------------------------------------------------------------------
@register
class Histogram(_TensorOp):
    """``_histogram``: counts of the flattened data in ``bin_cnt`` equal bins over ``range``,
    or in the bins between the edges given as input ``bins`` (the last bin closed, values
    outside ignored, as numpy's histogram). Outputs the int64 counts and the bin edges."""
    name = "_histogram"
    differentiable = False     # MXNet registers no gradient
    inputs = ("data",)
    optional_inputs = ("bins",)
    params = {"bin_cnt": OptInt(None, doc="Number of equal bins (None: input 'bins' gives "
                                          "the edges)"),
              "range": FloatTuple(None, doc="(lower, upper) bounds of the equal bins")}
    head_grad_unused = True

    def check_params(self, p):
        if p.bin_cnt is None:
            return
        if p.bin_cnt < 1:
            raise self.error("bin_cnt=%d must be at least 1", p.bin_cnt)
        if p.range is None or len(p.range) != 2 or not p.range[0] <= p.range[1]:
            raise self.error("range=%s must be (lower, upper) with lower <= upper when "
                             "bin_cnt is given", p.range)

    def list_inputs(self, p):
        return ["data"] if p.bin_cnt is not None else ["data", "bins"]

    def num_outputs(self, p):
        return 2

    def infer_shape(self, p, in_shapes):
        if p.bin_cnt is not None:
            return list(in_shapes), [(p.bin_cnt,), (p.bin_cnt + 1,)]
        bins = in_shapes[1]
        if bins is None:
            return list(in_shapes), [None, None]
        if len(bins) != 1 or (bins[0] and bins[0] < 2):
            raise self.error("input 'bins' must be 1-D with at least 2 edges, got shape %s",
                             bins)
        return list(in_shapes), [(bins[0] - 1 if bins[0] else 0,), bins]

    def infer_type(self, p, in_types):
        edges = in_types[0] if p.bin_cnt is not None else in_types[1]
        return list(in_types), ["int64", edges]

    def forward(self, p, k, inputs, outputs, is_train, state):
        counts, edges = outputs
        if p.bin_cnt is not None:
            lo, hi = p.range
            k.histogram_count(counts, inputs[0], None, lo, hi)
            k.range_fill(edges, lo, (hi - lo) / p.bin_cnt, 1)
            k.fill(edges[p.bin_cnt:], hi)
        else:
            k.histogram_count(counts, inputs[0], inputs[1], 0.0, 0.0)
            k.assign(edges, inputs[1], "write")

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        zero_grads(k, in_grads, req)


@register
class ArangeLike(_OneInput):
    """``contrib.arange_like``: start, start + step, ... shaped like ``data`` (or as long as
    its axis ``axis``), each value repeated ``repeat`` times; data only gives its shape."""
    name = "_contrib_arange_like"
    params = {"start": Float(0.0, doc="First value"),
              "step": Float(1.0, doc="Spacing between values"),
              "repeat": Int(1, doc="Times each value is repeated"),
              "ctx": Str("", doc="Context (ignored: the input's context is used)"),
              "axis": OptInt(None, doc="Axis of data giving the length (None: data's shape)")}
    head_grad_unused = True

    def check_params(self, p):
        if p.repeat < 1:
            raise self.error("repeat=%d must be at least 1", p.repeat)

    def out_shape(self, p, s):
        if p.axis is None:
            return s
        return (s[self.axis(p.axis, len(s), shape=s)],)

    def forward(self, p, k, inputs, outputs, is_train, state):
        k.range_fill(outputs[0], p.start, p.step, p.repeat)

    def backward(self, p, k, out_grads, inputs, outputs, in_grads, req, state):
        zero_grads(k, in_grads, req)
