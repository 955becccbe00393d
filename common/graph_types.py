"""PyG's node and edge type keys, checked the one way every room checks them.

A node type is ``None`` (homogeneous) or a non-empty ``str``; an edge type is ``None`` or a
``(src, rel, dst)`` tuple of non-empty ``str`` (a list is accepted and made a tuple).
"""
from __future__ import annotations

from gnnstore.common.errors import InvalidRequestError

NodeType = str
"""A node type's name: PyG's ``torch_geometric.typing.NodeType``, here so serving needs no PyG."""
EdgeType = tuple[str, str, str]
"""``(src, rel, dst)``: PyG's ``torch_geometric.typing.EdgeType``."""


def checked_node_type(node_type: object) -> NodeType | None:
    """``node_type`` itself when it is ``None`` or a non-empty str.

    Raises:
        InvalidRequestError: anything else.
    """
    if node_type is None or (isinstance(node_type, str) and node_type):
        return node_type
    raise InvalidRequestError(f"a node type is a non-empty str or None, got {node_type!r}")


def checked_edge_type(edge_type: object, *, what: str = "an edge type") -> EdgeType:
    """``edge_type`` as a ``(src, rel, dst)`` tuple of non-empty str (``None`` is not one).

    Args:
        what: how the error names the value, e.g. "a num_neighbors key".

    Raises:
        InvalidRequestError: anything else.
    """
    if isinstance(edge_type, (tuple, list)) and len(edge_type) == 3 and all(
        isinstance(part, str) and part for part in edge_type
    ):
        return tuple(edge_type)
    raise InvalidRequestError(f"{what} is a (src, rel, dst) tuple of non-empty str, got {edge_type!r}")


HOMOGENEOUS_EDGE_GROUP = (None, None)
"""The feature group of a homogeneous graph's edge attributes, as PyG's ``LocalFeatureStore``
names it (``group_name=(None, None)``); a heterogeneous edge attribute's group is its edge type."""


def is_edge_group(group: object) -> bool:
    """Whether a feature group names edge attributes (an edge type, or ``(None, None)``)."""
    return isinstance(group, tuple)


def edge_group_of(edge_type: EdgeType | None) -> tuple:
    """The feature group of ``edge_type``'s attributes."""
    return HOMOGENEOUS_EDGE_GROUP if edge_type is None else tuple(edge_type)


def edge_type_of_group(group: tuple) -> EdgeType | None:
    """The edge type whose attributes ``group`` holds (``None`` for ``(None, None)``)."""
    return None if group == HOMOGENEOUS_EDGE_GROUP else group


def describe(key: NodeType | EdgeType | None) -> str:
    """A node or edge type (or feature group) as a message names it (``None`` reads 'the
    homogeneous graph')."""
    if key == HOMOGENEOUS_EDGE_GROUP:
        return "the homogeneous graph's edges"
    return "the homogeneous graph" if key is None else repr(key)
