"""How PyG node and edge types map onto Neo4j labels and relationship types, checked and quoted.

A node type is a label whose nodes carry a dense ``id`` (``0 .. N-1``) under a uniqueness
constraint; an edge type ``(src, rel, dst)`` is the pattern ``(:src)-[:rel]->(:dst)`` whose
relationships carry a dense ``eid``. The homogeneous node and edge type ``None`` map to reserved
names no user name maps to. A name that is not a plain identifier is hex-encoded, so Cypher
text only ever holds ``[A-Za-z0-9_]`` names, backtick-quoted: user strings are never Cypher.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from gnnstore.common.errors import InvalidRequestError
from gnnstore.common.graph_types import EdgeType

IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")  # user names used as they are
SAFE = re.compile(r"_?[A-Za-z0-9_]+")  # every name that reaches Cypher text
HOMO_LABEL = "_GnnNode"
HOMO_REL = "_GNN_EDGE"
GRAPH_LABEL = "_GnnGraph"  # one node: store uuid and the version counter
NODE_TYPE_LABEL = "_GnnNodeType"  # one node per label: how many nodes it holds
EDGE_TYPE_LABEL = "_GnnEdgeType"  # one node per edge type: layouts, sizes, is_sorted, count


def quote(name: str) -> str:
    """``name`` backtick-quoted; refuses anything ``neo4j_name`` could not have produced."""
    if not SAFE.fullmatch(name):
        raise InvalidRequestError(f"refusing to put {name!r} into Cypher text")
    return f"`{name}`"


def neo4j_name(name: str) -> str:
    """A user's type name as a Neo4j name: itself when a plain identifier, else ``_x<utf-8 hex>``.

    Plain names start with a letter; encoded and reserved ones with ``_x`` and ``_Gnn``, so the
    mapping is one-to-one and never collides with gnnstore's own labels.
    """
    return name if IDENTIFIER.fullmatch(name) else "_x" + name.encode("utf-8").hex()


def _name(edge_type: object, part: object) -> str:
    if not isinstance(part, str) or not part:
        raise InvalidRequestError(
            f"edge type {edge_type!r}: every part must be a non-empty str, got {part!r}"
        )
    return neo4j_name(part)


@dataclass(frozen=True)
class EdgeSchema:
    """One edge type as Neo4j names: ``(:src)-[:rel]->(:dst)``, and its metadata key.

    A plain-string edge type (PyG allows one) is a relation between nodes of the homogeneous
    label, like the homogeneous edge type ``None``.
    """

    edge_type: EdgeType | str | None
    src: str
    rel: str
    dst: str

    @classmethod
    def of(cls, edge_type: object) -> "EdgeSchema":
        """Check and map ``None``, a name, or a ``(src, rel, dst)`` tuple of names.

        Raises:
            InvalidRequestError: another shape, or an empty or non-string name.
        """
        if edge_type is None:
            return cls(None, HOMO_LABEL, HOMO_REL, HOMO_LABEL)
        if isinstance(edge_type, str):
            return cls(edge_type, HOMO_LABEL, _name(edge_type, edge_type), HOMO_LABEL)
        if not isinstance(edge_type, tuple) or len(edge_type) != 3:
            raise InvalidRequestError(
                f"edge type must be None or a (src, rel, dst) tuple of str, got {edge_type!r}"
            )
        src, rel, dst = (_name(edge_type, part) for part in edge_type)
        return cls(edge_type, src, rel, dst)

    @property
    def key(self) -> str:
        """The edge type's metadata key: JSON of the type (``null`` for homogeneous)."""
        value = self.edge_type
        return json.dumps(list(value) if isinstance(value, tuple) else value, ensure_ascii=False)

    @staticmethod
    def from_key(key: str) -> "EdgeSchema":
        """Inverse of ``key``."""
        value = json.loads(key)
        return EdgeSchema.of(tuple(value) if isinstance(value, list) else value)

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
