"""Feature rows that travel with a sample (``NodeRows``), as the server gathers and encodes them
(the client decodes them with ``client/received_rows.py``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gnnstore.proto.codec import array_to_proto, attr_name_to_wire, ids_to_proto, set_group

from . import graph_pb2
from .reply_segment import ArrayWriter


@dataclass(frozen=True)
class NodeRows:
    """Feature rows to send with a sample, for one node type or the sampled edges of one edge
    type.

    Attributes:
        group: the node type (``None`` for a homogeneous graph), or for edge attributes the
            edge type (``(None, None)`` for a homogeneous graph's edges).
        ids: global ids, distinct, in order of first appearance in the sample's node (or edge) list.
        rows: attr name → rows, row ``i`` belonging to ``ids[i]`` (``bfloat16`` rows as raw words).
        dtypes: attr name → the name of the dtype its rows travel as.
        positions: ``None``, or the rows are *aligned*: ``ids[i]`` is node list entry
            ``positions[i]`` (ids repeat where the node list does), each array holds a row per
            node list entry, and only the rows at ``positions`` were written.
    """

    group: object
    ids: np.ndarray
    rows: dict[str, np.ndarray]
    dtypes: dict[str, str]
    positions: np.ndarray | None = None

    @property
    def bytes_unwritten(self) -> int:
        """Bytes of aligned rows left for the client to fill (0 for rows one per id)."""
        if self.positions is None:
            return 0
        return sum((len(a) - self.ids.size) * a[:1].nbytes for a in self.rows.values() if len(a))


def node_rows_to_proto(rows: NodeRows, segment: ArrayWriter | None = None) -> graph_pb2.NodeRows:
    """Encode the rows of one group (in ``segment`` when given)."""
    message = graph_pb2.NodeRows(
        ids=ids_to_proto(rows.ids, segment),
        attr_names=[attr_name_to_wire(name) for name in rows.rows],
        rows=[array_to_proto(a, segment, rows.dtypes[name]) for name, a in rows.rows.items()],
    )
    set_group(message, rows.group, "node_type")
    if rows.positions is not None:
        message.positions.CopyFrom(ids_to_proto(rows.positions, segment))
    return message
