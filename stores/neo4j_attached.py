"""The user's own Neo4j graph, as ``gnnstore attach neo4j`` read it, sampled live in its own schema.

An attach leaves ``attached-neo4j.json`` in the data directory: each label's key property
(``null``: Neo4j's element id) and the relationship types served as edge types. With it,
``gnnstore serve --graph-backend neo4j --neo4j-sampling live`` samples the user's graph as it is
now: each hop sends the frontier's keys (from the id map) in one query that picks the in-edges
in Neo4j, and the sources' keys come back to the id map. Nodes created after the attach have
no id yet and are left out (attach again to add them); relationships have no dense edge id in
the user's schema, so ``e_id`` is -1 (edge features need snapshot sampling). The graph is only
read.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import neo4j
import numpy as np
from neo4j import GraphDatabase
from neo4j.exceptions import DriverError, Neo4jError

from gnnstore.common.durable_file import write_durably
from gnnstore.common.errors import NotFoundError, PreconditionError, ServerUnavailableError
from gnnstore.common.graph_types import EdgeType
from gnnstore.stores.base import DEFAULT_CHUNK_EDGES, BaseGraphStore, StoredEdgeAttr
from gnnstore.stores.id_map import IdMap

ATTACHED_SCHEMA = "attached-neo4j.json"


@dataclass(frozen=True)
class AttachedSchema:
    """What an attach read: each label's key property (``None``: the element id) and the
    relationship types as edge types ``(from_label, TYPE, to_label)``."""

    keys: dict[str, str | None]
    relationships: list[EdgeType]

    def save(self, data_dir: Path) -> None:
        """Write it into ``data_dir`` atomically."""
        schema = {"keys": self.keys, "relationships": [list(r) for r in self.relationships]}
        write_durably(Path(data_dir) / ATTACHED_SCHEMA, json.dumps(schema).encode())

    @staticmethod
    def forget(data_dir: Path) -> None:
        """Remove the schema from ``data_dir`` (an ingest makes it another graph's)."""
        (Path(data_dir) / ATTACHED_SCHEMA).unlink(missing_ok=True)

    @classmethod
    def load(cls, data_dir: Path) -> AttachedSchema | None:
        """The schema an attach left in ``data_dir``, or ``None`` (not an attached directory).

        Raises:
            PreconditionError: the file is there but unreadable.
        """
        path = Path(data_dir) / ATTACHED_SCHEMA
        if not path.exists():
            return None
        try:
            raw = json.loads(path.read_text())
            return cls(dict(raw["keys"]), [tuple(r) for r in raw["relationships"]])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise PreconditionError(
                f"{ATTACHED_SCHEMA} in the data directory cannot be read ({type(exc).__name__}); "
                "run `gnnstore attach neo4j` again"
            ) from None


class AttachedNeo4jGraph(BaseGraphStore):
    """The attached graph in Neo4j, read-only, its node ids from the data directory's id map.

    Args:
        uri, auth, database: where the user's Neo4j answers (reader credentials are enough).
        schema: what the attach read.
        id_map: the data directory's id map (keys ↔ dense ids per label); may be set once the
            data directory is open, before the first read.
    """

    def __init__(
        self, uri: str, auth: tuple[str, str] | None, schema: AttachedSchema, id_map: IdMap | None = None, *,
        database: str | None = None,
    ) -> None:
        self.uri = uri
        self.schema = schema
        self.id_map = id_map
        self._database = database
        self._driver = GraphDatabase.driver(
            uri, auth=auth, notifications_min_severity=neo4j.NotificationMinimumSeverity.OFF
        )

    def verify(self) -> None:
        """Check that Neo4j answers.

        Raises:
            ServerUnavailableError: it does not, or refuses the login.
        """
        try:
            self._driver.verify_connectivity()
        except (DriverError, Neo4jError) as exc:
            raise ServerUnavailableError(f"Neo4j at {self.uri} cannot be read: {' '.join(str(exc).split())}") from None

    def close(self) -> None:
        self._driver.close()

    def version(self) -> str:
        """The attach's node counts: they change only when the data directory is attached again."""
        return "attached:" + ",".join(f"{label}={self._count(label)}" for label in sorted(self.schema.keys))

    def edge_attrs(self) -> list[StoredEdgeAttr]:
        """One COO entry per relationship type, sized by the labels' ids."""
        return [
            StoredEdgeAttr(et, "coo", False, (self._count(et[0]), self._count(et[-1])))
            for et in self.schema.relationships
        ]

    def sample_in_neighbors(self, edge_type: EdgeType, dst: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """At most ``k`` in-edges per destination (``k < 0``: all), chosen uniformly in Neo4j.

        Returns ``(row, col, e_id)`` as int64 arrays of **global** ids (``e_id`` -1); sources
        the id map does not know yet (created after the attach) are left out.

        Raises:
            NotFoundError: ``edge_type`` was not attached.
        """
        if edge_type not in self.schema.relationships:
            raise NotFoundError(f"edge type {edge_type!r} was not attached (attached: {self.schema.relationships})")
        src, rel, dst_label = edge_type
        dst = np.asarray(dst, dtype=np.int64)
        keys = self.id_map.to_keys(dst_label, dst)
        pick = "ORDER BY rand() LIMIT $k" if k >= 0 else ""
        query = (
            f"UNWIND range(0, size($keys) - 1) AS i MATCH (b:{quoted(dst_label)}) "
            f"WHERE {key_of(self.schema.keys[dst_label], 'b')} = $keys[i] "
            f"CALL (b) {{ MATCH (a:{quoted(src)})-[:{quoted(rel)}]->(b) "
            f"RETURN {key_of(self.schema.keys[src], 'a')} AS nbr {pick} }} "
            "RETURN collect(nbr) AS row, collect(i) AS at"
        )
        try:
            records, _, _ = self._driver.execute_query(
                query, keys=keys, k=max(int(k), 0), database_=self._database, routing_=neo4j.RoutingControl.READ
            )
        except (DriverError, Neo4jError) as exc:
            raise ServerUnavailableError(f"Neo4j at {self.uri} cannot be read: {' '.join(str(exc).split())}") from None
        row = self.id_map.lookup(src, _key_array(records[0]["row"]))
        col = dst[np.asarray(records[0]["at"], dtype=np.int64)]
        known = row >= 0
        return row[known], col[known], np.full(int(known.sum()), -1, np.int64)

    def iter_edge_index(
        self, edge_type: EdgeType | None, chunk_size: int = DEFAULT_CHUNK_EDGES
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        raise PreconditionError(_SNAPSHOT_ADVICE)

    def edge_index(self, edge_type: Any, layout: str) -> tuple[np.ndarray, np.ndarray]:
        raise PreconditionError(_SNAPSHOT_ADVICE)

    def put_edges(self, edge_index: object, edge_type: Any, layout: str, size: Any = None, is_sorted: bool = False) -> bool:
        raise PreconditionError("the attached Neo4j graph is only read; write it in Neo4j and attach again")

    def remove_edges(self, edge_type: Any, layout: str) -> bool:
        raise PreconditionError("the attached Neo4j graph is only read; write it in Neo4j and attach again")

    def _count(self, label: str) -> int:
        return self.id_map.num_nodes(label) if label in self.id_map.node_types() else 0


_SNAPSHOT_ADVICE = (
    "the attached Neo4j graph is sampled live; its whole edge list is served from the data "
    "directory's snapshot: serve it with the default graph backend (embedded)"
)


def key_of(key: str | None, variable: str) -> str:
    """The Cypher expression of a node's key: a property, or (``None``) its element id."""
    return f"elementId({variable})" if key is None else f"{variable}.{quoted(key)}"


def quoted(name: str) -> str:
    """A label, type or property name as a Cypher identifier, whatever characters it holds."""
    return "`" + name.replace("`", "``") + "`"


def _key_array(keys: list[Any]) -> np.ndarray:
    """Keys as the id map takes them: int64 when all are integers, else objects."""
    if all(isinstance(k, int) and not isinstance(k, bool) for k in keys):
        return np.asarray(keys, dtype=np.int64)
    array = np.empty(len(keys), dtype=object)
    array[:] = keys
    return array
