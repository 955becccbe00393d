"""How PyG node and edge types map onto Neo4j labels and relationship types, checked and quoted.

A node type is a label whose nodes carry a dense ``id`` (``0 .. N-1``) under a uniqueness
constraint; an edge type ``(src, rel, dst)`` is the pattern ``(:src)-[:rel]->(:dst)`` whose
relationships carry a dense ``eid``. The homogeneous node and edge type ``None`` map to reserved
names a user name cannot take (user names must start with a letter; reserved ones start with
``_``). Cypher is only ever built from names that passed ``IDENTIFIER``, and backtick-quoted.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from torch_geometric.typing import EdgeType, NodeType

from gnnstore.proto.errors import InvalidRequestError

IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
HOMO_LABEL = "_GnnNode"
HOMO_REL = "_GNN_EDGE"
GRAPH_LABEL = "_GnnGraph"  # one node: store uuid and the version counter
NODE_TYPE_LABEL = "_GnnNodeType"  # one node per label: how many nodes it holds
EDGE_TYPE_LABEL = "_GnnEdgeType"  # one node per edge type: layouts, is_sorted, edge count


def quote(name: str) -> str:
    """``name`` backtick-quoted, for a name already checked against ``IDENTIFIER``."""
    return f"`{name}`"


def label(node_type: NodeType | None) -> str:
    """The Neo4j label of a node type.

    Raises:
        InvalidRequestError: the name is not a plain identifier (letters, digits, ``_``).
    """
    if node_type is None:
        return HOMO_LABEL
    return _checked("node type", node_type)


def _checked(what: str, name: object) -> str:
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
        raise InvalidRequestError(
            f"{what} {name!r} cannot be a Neo4j name: use 1-64 letters, digits or '_', "
            "starting with a letter"
        )
    return name


@dataclass(frozen=True)
class EdgeSchema:
    """One edge type as Neo4j names: ``(:src)-[:rel]->(:dst)``, and its metadata key."""

    edge_type: EdgeType | None
    src: str
    rel: str
    dst: str

    @classmethod
    def of(cls, edge_type: object) -> "EdgeSchema":
        """Check and map ``None`` or a ``(src, rel, dst)`` tuple of names.

        Raises:
            InvalidRequestError: another shape, or a name that is not a plain identifier.
        """
        if edge_type is None:
            return cls(None, HOMO_LABEL, HOMO_REL, HOMO_LABEL)
        if not isinstance(edge_type, tuple) or len(edge_type) != 3:
            raise InvalidRequestError(
                f"edge type must be None or a (src, rel, dst) tuple of str, got {edge_type!r}"
            )
        src, rel, dst = edge_type
        return cls(edge_type, label(src), _checked("relation", rel), label(dst))

    @property
    def key(self) -> str:
        """The edge type's metadata key: JSON of the tuple, ``null`` for homogeneous."""
        return json.dumps(None if self.edge_type is None else list(self.edge_type))

    @staticmethod
    def from_key(key: str) -> "EdgeSchema":
        """Inverse of ``key``."""
        value = json.loads(key)
        return EdgeSchema.of(None if value is None else tuple(value))

    @property
    def pattern(self) -> str:
        """``(a:src)-[r:rel]->(b:dst)``, quoted."""
        return f"(a:{quote(self.src)})-[r:{quote(self.rel)}]->(b:{quote(self.dst)})"


def id_constraint_statement(node_label: str) -> str:
    """``id`` unique per label: the index every edge write and neighbour read seeks on."""
    name = quote(f"gnnstore_{node_label}_id")
    return f"CREATE CONSTRAINT {name} IF NOT EXISTS FOR (n:{quote(node_label)}) REQUIRE n.id IS UNIQUE"


def eid_index_statement(rel: str) -> str:
    """A range index on ``eid`` of a relationship type, for paging edges in edge-id order."""
    name = quote(f"gnnstore_{rel}_eid")
    return f"CREATE INDEX {name} IF NOT EXISTS FOR ()-[r:{quote(rel)}]-() ON (r.eid)"
