"""``AttrSchema``: one stored feature attribute's node type, name, dtype and full shape.

The one record every room uses for it: the RocksDB store's ``tensor_schema()``, the wire's
``TensorSchema`` message (``proto.codec.attr_schema_to_proto`` / ``_from_proto``), the client's
``RemoteFeatureStore.schema()`` and the feature cache's slots. ``DTYPES`` names every dtype an
attribute may have.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from gnnstore.common.errors import InvalidRequestError
from gnnstore.common.graph_types import is_edge_group

DTYPES: dict[str, torch.dtype] = {
    name: getattr(torch, name)
    for name in (
        "bool", "uint8", "int8", "int16", "int32", "int64",
        "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
    )
}


def dtype_from_name(name: str) -> torch.dtype:
    """The torch dtype of a name (``"float32"`` -> ``torch.float32``).

    Raises:
        InvalidRequestError: unknown name.
    """
    try:
        return DTYPES[name]
    except KeyError:
        raise InvalidRequestError(
            f"unknown tensor dtype {name!r} (supported: {sorted(DTYPES)})"
        ) from None


@dataclass(frozen=True)
class AttrSchema:
    """Group, attr name, dtype and full shape ``[N, *row]``.

    The group is a node type (``None`` when homogeneous) for node attributes, an edge type for
    a heterogeneous graph's edge attributes and ``(None, None)`` for a homogeneous one's; ``N``
    counts the group's nodes or edges.

    ``dtype`` may be given by its name (``"float32"``); ``shape`` as any sequence of ints.

    Raises:
        InvalidRequestError: an unknown dtype or a shape without a node dimension.
    """

    group_name: Any
    attr_name: str
    dtype: torch.dtype
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        dtype = dtype_from_name(self.dtype) if isinstance(self.dtype, str) else self.dtype
        if not isinstance(dtype, torch.dtype) or len(self.shape) < 1:
            raise InvalidRequestError(
                f"attr ({self.group_name!r}, {self.attr_name!r}) needs a torch dtype and a shape "
                f"[num_nodes, *row]; got dtype={self.dtype!r} shape={self.shape!r}"
            )
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))

    @property
    def is_edge(self) -> bool:
        """Whether rows are edges (the group is an edge type or ``(None, None)``), not nodes."""
        return is_edge_group(self.group_name)

    @property
    def row_bytes(self) -> int:
        """Bytes of one node's (or edge's) row."""
        return math.prod(self.shape[1:]) * self.dtype.itemsize
