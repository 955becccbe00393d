"""Feature rows that travelled with a sample, decoded into tensors: the client's half of
``proto/node_rows.py`` (``ReceivedRows``)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from gnnstore.common.errors import InvalidRequestError
from gnnstore.common.graph_types import describe, is_edge_group
from gnnstore.proto import graph_pb2
from gnnstore.proto.codec import attr_name_from_wire, group_from_proto
from gnnstore.proto.tensor_codec import ids_from_proto, tensor_from_proto
from gnnstore.proto.wire_dtypes import NARROWED_DTYPES


@dataclass(frozen=True)
class ReceivedRows:
    """Feature rows that travelled with a sample, for one node type or the sampled edges of one
    edge type.

    Attributes:
        group: the node type (``None`` for a homogeneous graph), or for edge attributes the
            edge type (``(None, None)`` for a homogeneous graph's edges).
        ids: global ids, distinct, in order of first appearance in the sample's node (or edge) list.
        rows: attr name → rows, row ``i`` belonging to ``ids[i]``.
        positions: ``None``, or the rows are *aligned*: ``ids[i]`` is node list entry
            ``positions[i]`` (ids repeat where the node list does), each tensor holds a row per
            node list entry, and only the rows at ``positions`` were written.
    """

    group: object
    ids: Tensor
    rows: dict[str, Tensor]
    positions: Tensor | None = None

    @property
    def bytes_unwritten(self) -> int:
        """Bytes of aligned rows left for the client to fill (0 for rows one per id)."""
        if self.positions is None:
            return 0
        return sum((len(t) - self.ids.numel()) * t[0].numel() * t.element_size() for t in self.rows.values() if len(t))

    def widened(self, dtypes: Mapping[str, str], wire_dtype: torch.dtype) -> ReceivedRows:
        """The same rows with those that travelled as ``wire_dtype`` back in their attr's dtype
        (``dtypes``: attr name → stored dtype's name; only float32 and float64 attrs are narrowed)."""
        narrowed = {
            name for name, t in self.rows.items() if t.dtype == wire_dtype and dtypes.get(name) in NARROWED_DTYPES
        }
        rows = {name: t.to(getattr(torch, dtypes[name])) if name in narrowed else t for name, t in self.rows.items()}
        return ReceivedRows(self.group, self.ids, rows, self.positions)

    def compacted(self) -> ReceivedRows:
        """The same rows, one per id (aligned rows gathered out of their positions)."""
        if self.positions is None:
            return self
        return ReceivedRows(self.group, self.ids, {n: r[self.positions] for n, r in self.rows.items()})


def received_rows_from_proto(message: graph_pb2.NodeRows, shared: memoryview | None = None) -> ReceivedRows:
    """Decode the rows of one group (``shared``: the reply segment's bytes, if offered;
    rows there decode as views of it).

    Raises:
        InvalidRequestError: names and tensors do not pair up, row counts differ from ids (from
            the node list for aligned rows), or positions outside it.
    """
    group = group_from_proto(message, "node_type")
    where = f"feature rows of {describe(group)}"
    ids = ids_from_proto(message.ids, f"{where}: ids", shared)
    positions = None
    if message.HasField("positions"):
        positions = ids_from_proto(message.positions, f"{where}: positions", shared)
        if positions.numel() != ids.numel():
            raise InvalidRequestError(f"{where}: {positions.numel()} positions for {ids.numel()} ids")
    if len(message.attr_names) != len(message.rows):
        raise InvalidRequestError(
            f"{where}: {len(message.attr_names)} attr names for {len(message.rows)} row tensors"
        )
    rows = {
        name: tensor_from_proto(t, f"{where}: attr {name!r}", shared)
        for name, t in zip(map(attr_name_from_wire, message.attr_names), message.rows)
    }
    for name, tensor in rows.items():
        if positions is not None:
            if tensor.dim() == 0 or positions.numel() and not (
                0 <= int(positions.min()) and int(positions.max()) < tensor.size(0)
            ):
                raise InvalidRequestError(
                    f"{where}: aligned attr {name!r} of shape {list(tensor.shape)} has no row at "
                    f"some of its {positions.numel()} positions"
                )
        elif tensor.dim() == 0 or tensor.size(0) != ids.numel():
            raise InvalidRequestError(
                f"{where}: attr {name!r} has {list(tensor.shape)} rows for {ids.numel()} ids"
            )
    if positions is not None and is_edge_group(group):
        raise InvalidRequestError(f"{where}: edge rows are never aligned")
    return ReceivedRows(group, ids, rows, positions)
