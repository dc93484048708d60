"""Atomic operations on int64 array elements, and the address of an element, for numba code
that threads share without the GIL (kernels/cpu/gemm.py's team).

numba has no atomics for CPU code; these are ``@intrinsic`` functions that emit LLVM's atomic
instructions. An atomic load also keeps the compiler from hoisting a read out of a polling loop.
Every read-modify-write is sequentially consistent, so a flag set with :func:`exchange` and a
value published with :func:`store_release` order as the code reads.
"""
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["load_acquire", "store_release", "exchange", "fetch_add", "compare_exchange",
           "address_of"]


def _element(context, builder, array_type, array, index):
    view = context.make_array(array_type)(context, builder, array)
    return cgutils.get_item_pointer(context, builder, array_type, view, [index])


def _alignment(context, array_type):
    return context.get_abi_sizeof(context.get_data_type(array_type.dtype))


@intrinsic
def load_acquire(typingctx, array, index):
    """``array[index]`` read with an acquire load."""
    def codegen(context, builder, sig, args):
        pointer = _element(context, builder, sig.args[0], args[0], args[1])
        return builder.load_atomic(pointer, "acquire", _alignment(context, sig.args[0]))
    return array.dtype(array, index), codegen


@intrinsic
def store_release(typingctx, array, index, value):
    """``array[index] = value`` with a release store: what this thread wrote before is seen by
    a thread that reads ``value`` with an acquire load."""
    def codegen(context, builder, sig, args):
        pointer = _element(context, builder, sig.args[0], args[0], args[1])
        stored = context.cast(builder, args[2], sig.args[2], sig.args[0].dtype)
        builder.store_atomic(stored, pointer, "release", _alignment(context, sig.args[0]))
        return context.get_dummy_value()
    return types.void(array, index, value), codegen


def _read_modify_write(operation):
    def typer(typingctx, array, index, value):
        def codegen(context, builder, sig, args):
            pointer = _element(context, builder, sig.args[0], args[0], args[1])
            operand = context.cast(builder, args[2], sig.args[2], sig.args[0].dtype)
            return builder.atomic_rmw(operation, pointer, operand, "seq_cst")
        return array.dtype(array, index, value), codegen
    typer.__name__ = "atomic_" + operation
    return typer


exchange = intrinsic(_read_modify_write("xchg"))
exchange.__doc__ = "Set ``array[index] = value``; return the value it held."
fetch_add = intrinsic(_read_modify_write("add"))
fetch_add.__doc__ = "Add ``value`` to ``array[index]``; return the value it held."


@intrinsic
def compare_exchange(typingctx, array, index, expected, value):
    """Set ``array[index] = value`` if it holds ``expected``; whether it did."""
    def codegen(context, builder, sig, args):
        pointer = _element(context, builder, sig.args[0], args[0], args[1])
        dtype = sig.args[0].dtype
        old = context.cast(builder, args[2], sig.args[2], dtype)
        new = context.cast(builder, args[3], sig.args[3], dtype)
        result = builder.cmpxchg(pointer, old, new, "seq_cst", "seq_cst")
        return builder.extract_value(result, 1)
    return types.boolean(array, index, expected, value), codegen


@intrinsic
def address_of(typingctx, array, index):
    """The address of ``array[index]`` (a typed pointer, for C functions)."""
    def codegen(context, builder, sig, args):
        return _element(context, builder, sig.args[0], args[0], args[1])
    return types.CPointer(array.dtype)(array, index), codegen
