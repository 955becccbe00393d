"""Arrays and PyG type keys to and from their wire form (``tensor_codec.py`` adds torch tensors).

Arrays travel as raw little-endian bytes with a dtype name and a shape (a ``Tensor`` message).
Encoding costs the one copy protobuf needs to own a ``bytes`` field; decoding costs one copy
into a writable buffer (over a ``bytearray``), because an array viewing the message's immutable
``bytes`` would let a caller's in-place op write into it. A reply may instead place an array's
bytes in the request's shared-memory segment, or in the reply's payload (``segment=`` an
``ArrayWriter``); decoded with ``shared=`` a memoryview of those bytes, such an array is a view
of them, not a copy, with a buffer of its own bytes only (see ``reply_segment.py`` for how long it stays
valid). Node and edge types map PyG's ``None`` to an explicit ``homogeneous`` flag, and
heterogeneous edge types always decode to tuples. A feature group (``set_group`` /
``group_from_proto``) travels as a node type, or for edge attributes in an ``edge_group`` field.
"""
from __future__ import annotations

import math
import sys
from collections.abc import Sequence

import numba
import numpy as np

from gnnstore.common.attr_schema import AttrSchema
from gnnstore.common.dtypes import ITEMSIZE, dtype_name, storage_dtype
from gnnstore.common.errors import InvalidRequestError
from gnnstore.common.graph_types import (
    HOMOGENEOUS_EDGE_GROUP,
    EdgeType,
    NodeType,
    checked_edge_type,
    checked_node_type,
    edge_group_of,
    edge_type_of_group,
    is_edge_group,
)
from gnnstore.common.host_array import host_array

from . import common_pb2 as pb
from .reply_segment import ArrayWriter

if sys.byteorder != "little":  # the wire is little-endian and arrays are decoded in host order
    raise ImportError("gnnstore's tensor codec needs a little-endian host")

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


def array_to_proto(array: np.ndarray, segment: ArrayWriter | None = None, dtype: str | None = None) -> pb.Tensor:
    """Encode a numpy array (any strides) as row-major little-endian bytes.

    ``dtype`` names the dtype the array's elements are when numpy has none for it (a
    ``bfloat16`` array is held as its raw 16-bit words). With ``segment`` the bytes go to the
    reply segment when they fit there, else inline.

    Raises:
        InvalidRequestError: a dtype that cannot travel.
    """
    flat = np.ascontiguousarray(array).reshape(-1)
    name = dtype_name(flat.dtype if dtype is None else dtype)
    if ITEMSIZE[name] != flat.dtype.itemsize:
        raise InvalidRequestError(f"{flat.dtype} elements cannot travel as {name}")
    return encoded(flat.view(np.uint8), name, array.shape, segment)


def encoded(raw: np.ndarray, name: str, shape: Sequence[int], segment: ArrayWriter | None) -> pb.Tensor:
    """The wire tensor of ``raw`` (its bytes, row-major), inline or placed in ``segment``."""
    message = pb.Tensor(dtype=name, shape=list(shape))
    if not raw.size:
        return message
    offset = None if segment is None else segment.place(raw)
    if offset is None:
        message.data = raw.tobytes()
    else:
        message.shared.offset, message.shared.length = offset, raw.size
    return message


def checked_payload(
    message: pb.Tensor, what: str, shared: memoryview | None
) -> tuple[str, tuple[int, ...], bytes | np.ndarray]:
    """The dtype name, shape and bytes (inline, or a view of ``shared``) of a consistent wire
    tensor.

    Raises:
        InvalidRequestError: unknown dtype, negative dimension, a byte count that does not
            match dtype and shape, or a segment slice outside the offered segment or not
            aligned to its dtype.
    """
    name = dtype_name(message.dtype)
    itemsize = ITEMSIZE[name]
    shape = tuple(message.shape)
    if any(dim < 0 for dim in shape):
        raise InvalidRequestError(f"{what} has a negative dimension: shape {list(shape)}")
    data = _payload(message, what, shared)
    if isinstance(data, np.ndarray) and message.shared.offset % itemsize:
        raise InvalidRequestError(
            f"{what}: offset {message.shared.offset} in the reply segment is not a multiple of {itemsize}"
        )
    numel = math.prod(shape)
    if len(data) != numel * itemsize:
        raise InvalidRequestError(
            f"{what} of dtype {message.dtype} and shape {list(shape)} needs "
            f"{numel * itemsize} bytes, got {len(data)}"
        )
    return name, shape, data


def _payload(message: pb.Tensor, what: str, shared: memoryview | None) -> bytes | np.ndarray:
    if not message.HasField("shared"):
        return message.data
    start, length = message.shared.offset, message.shared.length
    if shared is None:
        raise InvalidRequestError(f"{what} points into a reply segment, but none was offered")
    if message.data or start + length > shared.nbytes:
        raise InvalidRequestError(
            f"{what}: bytes {start}..{start + length} lie outside the {shared.nbytes}-byte reply "
            f"segment, or are sent inline as well"
        )
    # An array of its own over the view: it keeps ``shared`` (and what that lends) alive.
    return np.frombuffer(shared, dtype=np.uint8, count=length, offset=start)


def array_from_proto(
    message: pb.Tensor, what: str = "array", shared: memoryview | None = None, words: bool = False
) -> np.ndarray:
    """Decode a tensor into a writable numpy array: a new one, or a view of ``shared``.

    With ``words`` a ``bfloat16`` tensor decodes as its raw 16-bit words (``message.dtype``
    names it); without, it is refused.

    Raises:
        InvalidRequestError: as :func:`checked_payload`, or bfloat16 without ``words``.
    """
    name, shape, data = checked_payload(message, what, shared)
    if name == "bfloat16" and not words:
        raise InvalidRequestError(f"{what} is bfloat16, which this server cannot read; send float32")
    dtype = storage_dtype(name)
    if isinstance(data, np.ndarray):
        return data.view(dtype).reshape(shape)
    return np.frombuffer(bytearray(data), dtype=dtype).reshape(shape)


def id_array_from_proto(message: pb.Tensor, what: str = "ids", shared: memoryview | None = None) -> np.ndarray:
    """Decode a 1-D integer id tensor (int32 or int64 on the wire) as an int64 array (new, or
    a view of ``shared`` for int64 ids there).

    Raises:
        InvalidRequestError: not integer, or not 1-D.
    """
    if message.dtype not in ("int32", "int64"):
        raise InvalidRequestError(f"{what} must be int64 or int32 ids, got dtype {message.dtype}")
    ids = array_from_proto(message, what, shared)
    if ids.ndim != 1:
        raise InvalidRequestError(f"{what} must be 1-D, got shape {list(ids.shape)}")
    return ids if ids.dtype == np.int64 else ids.astype(np.int64)


def ids_to_proto(ids: object, segment: ArrayWriter | None = None) -> pb.Tensor:
    """Encode node or edge ids (an array, a tensor or a sequence) as a 1-D tensor: int32 on the
    wire when every id fits, else int64.

    Ids placed in a reply segment stay int64 (``segment.narrow_ids`` is false): there bytes
    cost nothing to move, and int64 ids decode as views, while narrowing and widening again
    would cost a pass on either side.
    """
    array = host_array(ids)
    ids = (np.asarray(ids) if array is None else array).reshape(-1)
    if ids.dtype != np.int32:
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        if (segment is None or segment.narrow_ids) and ids.size:
            narrow, fits = _as_int32(ids)
            if fits:
                ids = narrow
    return array_to_proto(ids, segment)


@numba.njit(cache=True, nogil=True)
def _as_int32(ids: np.ndarray) -> tuple[np.ndarray, bool]:
    """``ids`` as int32 and True, or False as soon as one does not fit: one pass where a range
    check and a conversion took three (0.9 against 2.0 ms for a batch's row and node ids)."""
    out = np.empty(ids.shape[0], dtype=np.int32)
    for i in range(ids.shape[0]):
        if ids[i] < _INT32_MIN or ids[i] > _INT32_MAX:
            return out, False
        out[i] = ids[i]
    return out, True


def optional_array_to_proto(array: np.ndarray | None) -> pb.OptionalTensor:
    """Encode an array, or PyG's ``None``."""
    if array is None:
        return pb.OptionalTensor(is_none=True)
    return pb.OptionalTensor(value=array_to_proto(array))


def node_type_to_proto(node_type: NodeType | None) -> pb.NodeType:
    """Encode a node type; ``None`` (homogeneous) becomes the explicit flag."""
    if checked_node_type(node_type) is None:
        return pb.NodeType(homogeneous=True)
    return pb.NodeType(name=node_type)


def node_type_from_proto(message: pb.NodeType) -> NodeType | None:
    """Decode a node type to PyG's form: ``None`` or a ``str``.

    Raises:
        InvalidRequestError: both or neither of the flag and the name are set.
    """
    if message.homogeneous:
        if message.name:
            raise InvalidRequestError(
                f"node type {message.name!r} is marked homogeneous; send one or the other"
            )
        return None
    if not message.name:
        raise InvalidRequestError("node type has no name and is not marked homogeneous")
    return message.name


def edge_type_to_proto(edge_type: EdgeType | None) -> pb.EdgeType:
    """Encode an edge type; ``None`` (homogeneous) becomes the explicit flag."""
    if edge_type is None:
        return pb.EdgeType(homogeneous=True)
    src, rel, dst = checked_edge_type(edge_type, what="an edge type (or None)")
    return pb.EdgeType(src=src, rel=rel, dst=dst)


def edge_type_from_proto(message: pb.EdgeType) -> EdgeType | None:
    """Decode an edge type to PyG's form: ``None`` or a ``(src, rel, dst)`` tuple.

    Raises:
        InvalidRequestError: both or neither of the flag and the names are set.
    """
    names = (message.src, message.rel, message.dst)
    if message.homogeneous:
        if any(names):
            raise InvalidRequestError(
                f"edge type {names} is marked homogeneous; send one or the other"
            )
        return None
    if not all(names):
        raise InvalidRequestError(
            f"edge type {names} needs src, rel and dst, or the homogeneous flag"
        )
    return names


def attr_name_to_wire(attr_name: str | None) -> str:
    """An attribute name as every message carries it: PyG's ``attr_name=None`` travels as ''.

    Raises:
        InvalidRequestError: not a non-empty str or None.
    """
    if attr_name is None:
        return ""
    if not isinstance(attr_name, str) or not attr_name:
        raise InvalidRequestError(f"attr_name must be a non-empty str or None, got {attr_name!r}")
    return attr_name


def attr_name_from_wire(text: str) -> str | None:
    """The attribute name a message's string stands for ('' is None)."""
    return text or None


def set_group(message: object, group: object, node_field: str = "group") -> None:
    """Put a feature group into ``message``: a node type into ``node_field``, an edge group (an
    edge type, or ``(None, None)``) into ``edge_group``."""
    if is_edge_group(group):
        if group != HOMOGENEOUS_EDGE_GROUP:
            checked_edge_type(group, what="a feature group")
        message.edge_group.CopyFrom(edge_type_to_proto(edge_type_of_group(group)))
    else:
        getattr(message, node_field).CopyFrom(node_type_to_proto(group))


def group_from_proto(message: object, node_field: str = "group") -> object:
    """The feature group ``set_group`` put into ``message``.

    Raises:
        InvalidRequestError: both a node type and an edge group, or an inconsistent type.
    """
    if message.HasField("edge_group"):
        if message.HasField(node_field):
            raise InvalidRequestError("a feature group is a node type or an edge type, not both")
        return edge_group_of(edge_type_from_proto(message.edge_group))
    return node_type_from_proto(getattr(message, node_field))


def attr_key_to_proto(group_name: object, attr_name: str | None) -> pb.TensorAttrKey:
    """Encode a (group_name, attr_name) pair."""
    key = pb.TensorAttrKey(attr_name=attr_name_to_wire(attr_name))
    set_group(key, group_name)
    return key


def attr_schema_to_proto(schema: AttrSchema) -> pb.TensorSchema:
    """The wire ``TensorSchema`` (key, dtype name, shape)."""
    return pb.TensorSchema(key=attr_key_to_proto(schema.group_name, schema.attr_name),
                           dtype=schema.dtype, shape=list(schema.shape))


def attr_schema_from_proto(message: pb.TensorSchema) -> AttrSchema:
    """Decode a wire ``TensorSchema``.

    Raises:
        InvalidRequestError: an unknown dtype, an empty attr name or a shape without a node dimension.
    """
    return AttrSchema(*attr_key_from_proto(message.key), message.dtype, tuple(message.shape))


def attr_key_from_proto(message: pb.TensorAttrKey) -> tuple[object, str | None]:
    """Decode a (group_name, attr_name) pair.

    Raises:
        InvalidRequestError: an inconsistent node type.
    """
    return group_from_proto(message), attr_name_from_wire(message.attr_name)
