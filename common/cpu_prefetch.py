"""``prefetch(array, index)``: ask the CPU for an array element's cache line before it is read.

A loop over random positions of a large array (feature rows, a CSC's neighbour lists) waits
on memory once per element unless the elements it reads a few steps later are already on
their way. Calling ``prefetch`` for those from a numba kernel emits LLVM's ``llvm.prefetch``:
a hint that never faults and costs one instruction. ``index`` is an integer (1-D arrays) or a
tuple of integers, one per dimension; it must lie inside the array.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def prefetch(typingctx, array, index):  # noqa: ARG001 - numba's intrinsic signature
    """Hint the CPU to load the cache line of ``array[index]`` into every cache level."""
    dims = 1 if isinstance(index, types.Integer) else len(index)
    if not isinstance(array, types.Array) or array.ndim != dims:
        return None

    def codegen(context, builder, signature, args):
        array_type, index_type = signature.args
        view = context.make_array(array_type)(context, builder, args[0])
        if isinstance(index_type, types.Integer):
            indices = [context.cast(builder, args[1], index_type, types.intp)]
        else:
            items = cgutils.unpack_tuple(builder, args[1], len(index_type))
            indices = [context.cast(builder, v, t, types.intp) for v, t in zip(items, index_type)]
        pointer = cgutils.get_item_pointer2(
            context, builder, view.data, cgutils.unpack_tuple(builder, view.shape),
            cgutils.unpack_tuple(builder, view.strides), array_type.layout, indices,
        )
        # One declaration per module serves every dtype: the pointer goes in as bytes.
        byte_pointer = builder.bitcast(pointer, ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        hint = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer.type, i32, i32, i32]), "llvm.prefetch.p0"
        )
        # read, keep in every cache level, data (not instructions)
        builder.call(hint, [byte_pointer, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(array, index), codegen
