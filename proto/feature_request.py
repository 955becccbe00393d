"""Which rows a sample should bring back and which the client holds (``FeatureRequest``),
to and from their wire form."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numba
import numpy as np

from gnnstore.common.errors import InvalidRequestError
from gnnstore.common.graph_types import NodeType
from gnnstore.common.host_array import host_array

from . import graph_pb2
from .codec import (
    attr_key_from_proto,
    attr_key_to_proto,
    group_from_proto,
    id_array_from_proto,
    ids_to_proto,
    node_type_from_proto,
    node_type_to_proto,
    set_group,
)
from .wire_dtypes import wire_dtype_name


@dataclass(frozen=True, eq=False)
class IdBitmap:
    """A set of ids as bits: bit ``i`` of ``bits`` (little-endian within each byte) is id
    ``start + i``; what a client names known ids with when that is smaller than a list."""

    start: int
    bits: np.ndarray  # uint8

    @classmethod
    def of(cls, ids: np.ndarray) -> IdBitmap:
        """The bitmap of ``ids`` (non-empty), from its smallest id to its largest."""
        start = int(ids.min())
        bits = np.zeros((int(ids.max()) - start) // 8 + 1, dtype=np.uint8)
        _set_bits(ids, start, bits)
        return cls(start, bits)

    @property
    def last_byte_start(self) -> int:
        """The first id the bitmap's last byte names (ids past the set's largest pad that byte)."""
        return self.start + 8 * (self.bits.size - 1)

    def holds(self, ids: np.ndarray) -> np.ndarray:
        """Which of ``ids`` are in the set (a mask); costs a pass over ``ids``, not the bitmap."""
        at = ids - self.start
        inside = (at >= 0) & (at < 8 * self.bits.size)
        held = np.zeros(ids.shape[0], dtype=bool)
        at = at[inside]
        held[inside] = (self.bits[at >> 3] >> (at & 7)) & 1 != 0
        return held


@numba.njit(cache=True, nogil=True)
def _set_bits(ids: np.ndarray, start: int, bits: np.ndarray) -> None:
    for i in range(ids.shape[0]):
        at = ids[i] - start
        bits[at >> 3] |= np.uint8(1 << (at & 7))


def compact_ids(ids: object) -> object:
    """``ids`` (non-empty: an array or a CPU tensor) as they are or as a bitmap, whichever is
    smaller on the wire (a list of int32 ids takes 32 bits an id, a bitmap one bit per id of
    their range)."""
    array = host_array(ids)
    span = int(array.max()) - int(array.min()) + 1
    return IdBitmap.of(array) if span < 32 * array.size else ids


@dataclass(frozen=True)
class HotPrefix:
    """The client holds the rows of the first ``count`` ids of the HotNodes ranking of snapshot
    ``snapshot_id``."""

    count: int
    snapshot_id: str


@dataclass(frozen=True)
class RowRequest:
    """Which rows a sample should bring back, and which the client already holds.

    Attributes:
        attrs: (node type, attr) pairs whose rows come back for the sampled nodes.
        known: node type (or edge group) → global node (or edge) ids the client holds for
            every requested attr of that group, as a list or a bitmap.
        hot: node type → the prefix of the server's hot ranking the client holds.
        aligned: rows at their node list positions, if they fit in the reply segment.
        wire_dtype: the name of a 16-bit float dtype rows of wider float attrs travel as (lossy;
            ``None``: as stored).
    """

    attrs: list[tuple[object, str]]
    known: dict[object, np.ndarray | IdBitmap]
    hot: dict[NodeType | None, HotPrefix]
    aligned: bool = False
    wire_dtype: str | None = None


def feature_request_to_proto(
    attrs: Sequence[tuple[object, str]],
    known: Mapping[object, np.ndarray | IdBitmap],
    hot: Mapping[NodeType | None, HotPrefix] | None = None,
    wire_dtype: object = None,
) -> graph_pb2.FeatureRequest:
    """Encode which attributes to return and, per node type or edge group, the ids not to send
    (give them through ``compact_ids``: a bitmap when that is smaller), and the dtype rows of
    float attrs travel as (``wire_dtype``, one of ``WIRE_DTYPES`` by name or as a torch dtype; lossy)."""
    return graph_pb2.FeatureRequest(
        attrs=[attr_key_to_proto(group, name) for group, name in attrs],
        known=[_known_ids_to_proto(group, ids) for group, ids in known.items()],
        hot=[
            graph_pb2.HotPrefix(node_type=node_type_to_proto(nt), count=p.count, snapshot_id=p.snapshot_id)
            for nt, p in (hot or {}).items()
        ],
        wire_dtype="" if wire_dtype is None else wire_dtype_name(wire_dtype),
    )


def feature_request_from_proto(request: graph_pb2.FeatureRequest) -> RowRequest:
    """Decode the attrs, known ids, hot prefixes and wire dtype of a FeatureRequest.

    Raises:
        InvalidRequestError: a negative hot prefix count, or a wire dtype other than a 16-bit float.
    """
    hot = {}
    for prefix in request.hot:
        if prefix.count < 0:
            raise InvalidRequestError(f"hot prefix count must be >= 0, got {prefix.count}")
        hot[node_type_from_proto(prefix.node_type)] = HotPrefix(prefix.count, prefix.snapshot_id)
    return RowRequest(
        attrs=[attr_key_from_proto(a) for a in request.attrs],
        known={group_from_proto(k, "node_type"): _known_ids_from_proto(k) for k in request.known},
        hot=hot,
        aligned=request.aligned,
        wire_dtype=wire_dtype_name(request.wire_dtype) if request.wire_dtype else None,
    )


def _known_ids_to_proto(group: object, ids: np.ndarray | IdBitmap) -> graph_pb2.KnownIds:
    message = graph_pb2.KnownIds()
    set_group(message, group, "node_type")
    if isinstance(ids, IdBitmap):
        message.bitmap, message.bitmap_start = ids.bits.tobytes(), ids.start
    else:
        message.ids.CopyFrom(ids_to_proto(ids))
    return message


def _known_ids_from_proto(message: graph_pb2.KnownIds) -> np.ndarray | IdBitmap:
    """Known ids as sent: a list, or a bitmap.

    Raises:
        InvalidRequestError: both a list and a bitmap.
    """
    if not message.bitmap:
        return id_array_from_proto(message.ids, "known ids")
    if message.HasField("ids"):
        raise InvalidRequestError("known ids come as a list or as a bitmap, not both")
    return IdBitmap(message.bitmap_start, np.frombuffer(message.bitmap, dtype=np.uint8))
