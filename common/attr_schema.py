"""``AttrSchema``: one stored feature attribute's node type, name, dtype and full shape.

The one record every room uses for it: the RocksDB store's ``tensor_schema()``, the wire's
``TensorSchema`` message (``proto.codec.attr_schema_to_proto`` / ``_from_proto``), the client's
``RemoteFeatureStore.schema()`` and the feature cache's slots.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gnnstore.common.dtypes import ITEMSIZE, dtype_name
from gnnstore.common.errors import InvalidRequestError
from gnnstore.common.graph_types import is_edge_group


@dataclass(frozen=True)
class AttrSchema:
    """Group, attr name, dtype and full shape ``[N, *row]``.

    The group is a node type (``None`` when homogeneous) for node attributes, an edge type for
    a heterogeneous graph's edge attributes and ``(None, None)`` for a homogeneous one's; ``N``
    counts the group's nodes or edges.

    ``dtype`` is the dtype's name (``"float32"``; ``getattr(torch, schema.dtype)`` is the torch
    dtype), and may be given as a torch or numpy dtype; ``shape`` as any sequence of ints.

    Raises:
        InvalidRequestError: an unknown dtype or a shape without a node dimension.
    """

    group_name: Any
    attr_name: str
    dtype: str
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.shape) < 1:
            raise InvalidRequestError(
                f"attr ({self.group_name!r}, {self.attr_name!r}) needs a shape [num_nodes, *row]; "
                f"got {self.shape!r}"
            )
        object.__setattr__(self, "dtype", dtype_name(self.dtype))
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))

    @property
    def is_edge(self) -> bool:
        """Whether rows are edges (the group is an edge type or ``(None, None)``), not nodes."""
        return is_edge_group(self.group_name)

    @property
    def row_bytes(self) -> int:
        """Bytes of one node's (or edge's) row."""
        return math.prod(self.shape[1:]) * ITEMSIZE[self.dtype]
