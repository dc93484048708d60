"""Helpers every operator family shares: sizes of shapes, merging a shape into an input with
a named error, and the steps that open a ``backward`` (which gradients are wanted, zeros where
nothing flows back)."""
from .registry import merge_shape

__all__ = ["prod", "known", "assign_shape", "zero_grads", "no_head_gradient",
           "data_grad_needed", "cleared_data_grad"]


def prod(dims):
    """The product of ``dims`` (the number of elements of a shape; 0 when a dim is 0)."""
    out = 1
    for d in dims:
        out *= int(d)
    return out


def known(shape):
    """True when the shape has a known rank (dims themselves may still be 0 = unknown)."""
    return shape is not None and len(shape) > 0


def assign_shape(op, shapes, index, name, expected, context=""):
    """Merge ``expected`` into shapes[index]; on a conflict raise an error naming the input."""
    try:
        shapes[index] = merge_shape(shapes[index], tuple(expected))
    except ValueError:
        raise op.error("%s has shape %s, expected %s%s", name, tuple(shapes[index]),
                       tuple(expected), context) from None


def zero_grads(k, in_grads, req):
    """Write zeros into every gradient requested with 'write' (nothing flows back; 'add'
    leaves the buffer as it is)."""
    for g, r in zip(in_grads, req):
        if g is not None and r == "write":
            k.fill(g, 0)


def no_head_gradient(k, out_grads, in_grads, req):
    """True, after giving every input a zero gradient, when the output has no head gradient
    (nothing downstream reads it)."""
    if out_grads[0] is None:
        zero_grads(k, in_grads, req)
        return True
    return False


def data_grad_needed(k, out_grads, in_grads, req):
    """For ops where only the first input has a gradient (the others are indices, shapes or
    lengths): give the others zeros, then say whether the first one's gradient still has to
    be computed. False when it is not requested, or when there is no head gradient (it has
    been given zeros then)."""
    zero_grads(k, in_grads[1:], req[1:])
    if req[0] == "null":
        return False
    return not no_head_gradient(k, out_grads, in_grads[:1], req[:1])


def cleared_data_grad(k, in_grads, req):
    """For a backward that adds pieces into the first input's gradient (the other inputs have
    none: they are given zeros): that gradient's buffer, zeroed when requested with 'write';
    None when it is not requested."""
    zero_grads(k, in_grads[1:], req[1:])
    if req[0] == "null":
        return None
    if req[0] == "write":
        k.fill(in_grads[0], 0)
    return in_grads[0]
