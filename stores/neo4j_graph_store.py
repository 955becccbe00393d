"""A graph store over a Neo4j 5 server through the official Bolt driver.

Each edge type is a relationship pattern (``stores/neo4j_schema.py``); its relationships carry
a dense ``eid`` (the position in the edge list as put) and a generation ``gen``, its nodes a
dense ``id`` under a uniqueness constraint. Which layouts were put, ``is_sorted``, the edge
count and the current generation live on one metadata node per edge type; reads see only the
relationships of the current generation. Writes run in batches of ``batch_size`` rows of
parameterised ``UNWIND`` Cypher; Cypher text only ever holds checked, quoted names.

Failure model. A put that replaces an edge type writes the new relationships under a fresh
generation, then switches the metadata (and the store's version, a counter on one graph node)
to it in one transaction, then deletes the other generations. Until the switch readers see the
previous edges; a put that fails or is killed before it leaves them readable, and its partial
relationships are invisible (deleted on failure, or after a kill by the next put that replaces
that edge type). Nodes are created in batches that each record the new node count in the same
transaction, so a re-run after a kill continues where it stopped.
"""
from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from neo4j import READ_ACCESS, Driver, GraphDatabase, NotificationMinimumSeverity, RoutingControl
from neo4j.exceptions import DriverError, Neo4jError
from tqdm import tqdm

from gnnstore.common.errors import NotFoundError, PreconditionError, ServerUnavailableError
from gnnstore.common.graph_types import EdgeType
from gnnstore.stores.base import DEFAULT_CHUNK_EDGES, LAYOUTS, BaseGraphStore, StoredEdgeAttr, checked_layout
from gnnstore.stores.edge_layout import from_coo, to_coo
from gnnstore.stores.neo4j_import import IMPORTED_GENERATION, read_plan
from gnnstore.stores.neo4j_schema import (
    EDGE_TYPE_LABEL,
    GRAPH_LABEL,
    NODE_TYPE_LABEL,
    EdgeSchema,
    eid_index_statement,
    id_constraint_statement,
    quote,
)

logger = logging.getLogger(__name__)

DEFAULT_BATCH_ROWS = 20_000
READ_SESSIONS = 4
"""Pages of edges read at once. 25M edges in pages of 100k, this machine (2 cores, Neo4j beside
the reader): one session 494k edges/s, four 1.20M."""
READ_PAGE_EDGES = 100_000
"""Edges of one page read for a snapshot: small enough that the pages read at once overlap."""
Layout = tuple[bool, tuple[int, int]]  # is_sorted, size as put (or inferred)


class Neo4jGraphStore(BaseGraphStore):
    """A graph store whose edges are relationships in Neo4j; safe to pickle into workers.

    Args:
        uri: the Bolt URI, e.g. ``bolt://127.0.0.1:7687``.
        auth: ``(user, password)``, or ``None`` for a server with auth off. It travels with
            the object when pickled into loader workers.
        database: the database name (default: the server's default database).
        batch_size: rows per ``UNWIND`` batch on writes and per page on reads.
        progress: show a tqdm bar (stderr) while a put writes its relationships.
    """

    def __init__(
        self,
        uri: str,
        auth: tuple[str, str] | None = None,
        *,
        database: str | None = None,
        batch_size: int = DEFAULT_BATCH_ROWS,
        progress: bool = False,
    ) -> None:
        super().__init__()
        self.uri, self.auth, self.database, self.batch_size = uri, auth, database, batch_size
        self.progress = progress
        self._driver: Driver | None = None  # opened lazily, once per process
        self._pid = 0
        self._schema_made: set[str] = set()  # schema statements this object already ran

    # -- connection ------------------------------------------------------------------------

    @property
    def driver(self) -> Driver:
        """This process's driver, opened on first use (a forked child opens its own)."""
        if self._driver is None or self._pid != os.getpid():
            self._driver = GraphDatabase.driver(
                self.uri,
                auth=self.auth,
                # "label does not exist yet" on a fresh database is expected, not news
                notifications_min_severity=NotificationMinimumSeverity.OFF,
            )
            self._pid = os.getpid()
        return self._driver

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_driver": None, "_pid": 0}  # never ship a socket

    def verify(self) -> None:
        """Check that Neo4j answers at ``uri`` and accepts the login, before any work.

        Raises:
            ServerUnavailableError: no answer, or the login is refused; the message names both.
        """
        try:
            self.driver.verify_connectivity()
        except (DriverError, Neo4jError) as exc:
            user = "auth off" if self.auth is None else f"user {self.auth[0]!r}"
            reason = " ".join(str(exc).split())  # the driver's message spans lines
            raise ServerUnavailableError(
                f"Neo4j at {self.uri} ({user}) cannot be used: {reason}; start it, or point "
                "--neo4j-uri / GNNSTORE_NEO4J_URI, GNNSTORE_NEO4J_USER and GNNSTORE_NEO4J_PASSWORD at it"
            ) from None

    def close(self) -> None:
        """Close this process's driver; the next call opens a new one."""
        if self._driver is not None and self._pid == os.getpid():
            self._driver.close()
        self._driver = None

    def _read(self, query: str, **params: Any) -> list[Any]:
        return self.driver.execute_query(
            query, params, database_=self.database, routing_=RoutingControl.READ
        ).records

    def _write(self, query: str, **params: Any) -> list[Any]:
        return self.driver.execute_query(query, params, database_=self.database).records

    def _write_in_transactions(self, query: str, **params: Any) -> None:
        """Run a ``CALL {...} IN TRANSACTIONS`` query (it needs an implicit transaction)."""
        with self.driver.session(database=self.database) as session:
            session.run(query, params).consume()

    # -- metadata --------------------------------------------------------------------------

    def version(self) -> str:
        """``neo4j-<store uuid>-<counter>``; the counter grows on every put and remove."""
        records = self._read(f"MATCH (g:{quote(GRAPH_LABEL)}) RETURN g.uuid AS uuid, g.version AS v")
        if not records:
            return "neo4j-empty"
        return f"neo4j-{records[0]['uuid']}-{records[0]['v']}"

    def _new_generation(self) -> int:
        """A generation number no put of this store has used (a counter on the graph node)."""
        records = self._write(
            f"MERGE (g:{quote(GRAPH_LABEL)}) ON CREATE SET g.uuid = randomUUID(), g.version = 0 "
            "SET g.generations = coalesce(g.generations, 0) + 1 RETURN g.generations AS gen"
        )
        return int(records[0]["gen"])

    def _edge_meta(self, schema: EdgeSchema | None = None) -> dict[str, dict[str, Any]]:
        """Metadata per edge-type key (all, or only ``schema``'s)."""
        where = "" if schema is None else "WHERE t.key = $key"
        records = self._read(
            f"MATCH (t:{quote(EDGE_TYPE_LABEL)}) {where} "
            "RETURN t.key AS key, t.layouts AS layouts, t.sorted AS sorted, t.sizes AS sizes, "
            "t.count AS count, t.gen AS gen",
            key=None if schema is None else schema.key,
        )
        return {r["key"]: dict(r) for r in records}

    @staticmethod
    def _layouts(meta: dict[str, Any]) -> dict[str, Layout]:
        """``layout name -> (is_sorted, size)`` from an edge type's metadata."""
        sizes = meta["sizes"]
        return {
            name: (is_sorted, (sizes[2 * i], sizes[2 * i + 1]))
            for i, (name, is_sorted) in enumerate(zip(meta["layouts"], meta["sorted"]))
        }

    def _node_count(self, node_label: str) -> int:
        records = self._read(
            f"MATCH (t:{quote(NODE_TYPE_LABEL)} {{label: $label}}) RETURN t.count AS count",
            label=node_label,
        )
        return int(records[0]["count"]) if records else 0

    def adopt_import(self, directory: Path) -> None:
        """Make a graph loaded by ``neo4j-admin database import`` (files from
        ``neo4j_import.write_import_files`` in ``directory``) a gnnstore graph: constraints and
        indexes, node counts, and each edge type's metadata pointing at the imported
        relationships (stored as a COO; each edge type's switch bumps the version).

        Running it again after it was cut off finishes it.

        Raises:
            PreconditionError: no plan in ``directory``, the database holds another gnnstore
                graph, or the imported counts differ from the plan's.
        """
        plan = read_plan(directory)
        planned = {e["key"]: e["count"] for e in plan["edges"]}
        for key, meta in self._edge_meta().items():  # an adopt that was cut off may run again
            if planned.get(key) != meta.get("count") or meta.get("gen") != IMPORTED_GENERATION:
                raise PreconditionError(
                    "this Neo4j already holds a gnnstore graph other than this import; adopt an import "
                    "into the new database it was imported into"
                )
        for label, count in plan["nodes"].items():
            self._make_schema(id_constraint_statement(label))
            found = int(self._read(f"MATCH (n:{quote(label)}) RETURN count(n) AS n")[0]["n"])
            if found != count:
                raise PreconditionError(f"label {label!r}: {found} nodes in Neo4j, {count} in the import plan")
            self._write(f"MERGE (t:{quote(NODE_TYPE_LABEL)} {{label: $label}}) SET t.count = $count",
                        label=label, count=count)
        self._write(f"MERGE (g:{quote(GRAPH_LABEL)}) ON CREATE SET g.uuid = randomUUID(), g.version = 0 "
                    "SET g.generations = $gen", gen=IMPORTED_GENERATION)
        schemas = [(EdgeSchema.from_key(entry["key"]), entry) for entry in plan["edges"]]
        per_type: dict[tuple[str, str], int] = {}
        for schema, entry in schemas:
            per_type[schema.src, schema.rel] = per_type.get((schema.src, schema.rel), 0) + entry["count"]
        for (src, rel), count in per_type.items():  # (:label)-[:type]->() is read from Neo4j's count store
            found = int(self._read(f"MATCH (:{quote(src)})-[r:{quote(rel)}]->() RETURN count(r) AS n")[0]["n"])
            if found != count:
                raise PreconditionError(
                    f"relationships {rel!r} from {src!r}: {found} in Neo4j, {count} in the import plan"
                )
        for schema, entry in schemas:
            self._make_schema(eid_index_statement(schema.rel))
            self._commit(schema, {"coo": (False, tuple(entry["size"]))}, entry["count"],
                         IMPORTED_GENERATION)

    # -- edges -----------------------------------------------------------------------------

    def put_edges(
        self, edge_index: object, edge_type: EdgeType | None, layout: str,
        size: tuple[int, int] | None = None, is_sorted: bool = False,
    ) -> bool:
        """Store one layout of an edge type; other layouts of the same edges are kept.

        The edge list (edge-id order) is the COO when one was put, else the first layout put.
        Putting a layout whose edges differ from the stored ones replaces the edge type.
        Everything is validated before the first write, so bad input changes nothing.
        """
        schema, layout = EdgeSchema.of(edge_type), checked_layout(layout)
        edges = to_coo(edge_index, edge_type, layout, size, bool(is_sorted))
        row, col, size = edges.row, edges.col, edges.size
        meta = self._edge_meta(schema).get(schema.key)
        stored = None if meta is None else self._read_all(schema, meta)
        gen = None if meta is None else meta["gen"]
        self._ensure_nodes(schema.src, size[0])
        self._ensure_nodes(schema.dst, size[1])
        if stored is not None and _same_multiset(stored[0], stored[1], row, col):
            layouts = self._layouts(meta)
            in_order = np.array_equal(stored[0], row) and np.array_equal(stored[1], col)
            if layout == "coo" and not in_order:
                gen = self._write_edges(schema, row, col)  # the COO's order is the edge-id order
        else:
            layouts = {}
            gen = self._write_edges(schema, row, col)
        layouts[layout] = (bool(is_sorted), size)
        self._commit(schema, layouts, len(row), gen)
        if meta is None or gen != meta["gen"]:
            self._delete_edges(schema, keep=gen)  # the previous generation, and any left by a kill
        return True

    def edge_index(self, edge_type: EdgeType | None, layout: str) -> tuple[np.ndarray, np.ndarray]:
        """The edge type in ``layout``, derived from the edge list in edge-id order.

        Raises:
            NotFoundError: the edge type, or that layout of it, was never put (or was removed).
        """
        schema, layout = EdgeSchema.of(edge_type), checked_layout(layout)
        meta = self._stored(schema)
        if layout not in meta["layouts"]:
            raise NotFoundError(
                f"edge type {schema.edge_type!r} has no {layout!r} layout (stored: {meta['layouts']})"
            )
        row, col = self._read_all(schema, meta)
        return from_coo(row, col, layout, self._layouts(meta)[layout][1])

    def remove_edges(self, edge_type: EdgeType | None, layout: str) -> bool:
        """Forget one layout; removing the last one deletes the edge type's relationships."""
        schema, layout = EdgeSchema.of(edge_type), checked_layout(layout)
        meta = self._edge_meta(schema).get(schema.key)
        if meta is None or layout not in meta["layouts"]:
            return False
        layouts = self._layouts(meta)
        del layouts[layout]
        if layouts:
            self._commit(schema, layouts, int(meta["count"]), meta["gen"])
        else:
            self._commit(schema, {}, 0, None)
            self._delete_edges(schema)
        return True

    def edge_attrs(self) -> list[StoredEdgeAttr]:
        """One record per stored (edge type, layout), with its size."""
        attrs = []
        for key, meta in sorted(self._edge_meta().items()):
            edge_type = EdgeSchema.from_key(key).edge_type
            stored = self._layouts(meta)
            for layout in LAYOUTS:
                if layout in stored:
                    is_sorted, size = stored[layout]
                    attrs.append(StoredEdgeAttr(edge_type, layout, is_sorted, tuple(size)))
        return attrs

    def iter_edge_index(
        self, edge_type: EdgeType | None, chunk_size: int = DEFAULT_CHUNK_EDGES
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Yield ``(row, col, e_id)`` chunks (global ids) in edge-id order, one page per query
        (at most ``READ_PAGE_EDGES``, several read at once).

        Raises:
            NotFoundError: no edges of ``edge_type`` are stored.
        """
        schema = EdgeSchema.of(edge_type)
        meta = self._stored(schema)
        for lo, hi, row, col in self._pages(schema, meta, min(chunk_size, READ_PAGE_EDGES)):
            yield row, col, np.arange(lo, hi, dtype=np.int64)

    def sample_in_neighbors(
        self, edge_type: EdgeType | None, dst: np.ndarray, k: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """At most ``k`` in-edges per destination (``k < 0``: all), chosen uniformly in Neo4j.

        One round trip for the whole frontier. Returns ``(row, col, e_id)`` as int64 arrays of
        **global** ids: ``row`` the sampled sources, ``col`` their destination from ``dst``.
        """
        schema = EdgeSchema.of(edge_type)
        pick = "ORDER BY rand() LIMIT $k" if k >= 0 else ""
        records = self._read(  # the current generation, read in the same transaction
            f"MATCH (t:{quote(EDGE_TYPE_LABEL)} {{key: $key}}) "
            f"UNWIND $ids AS id MATCH (b:{quote(schema.dst)} {{id: id}}) "
            f"CALL (b, t) {{ MATCH (a:{quote(schema.src)})-[r:{quote(schema.rel)}]->(b) "
            f"WHERE r.gen = t.gen RETURN a.id AS nbr, r.eid AS eid {pick} }} "
            "RETURN collect(nbr) AS row, collect(b.id) AS col, collect(eid) AS eid",
            key=schema.key,
            ids=np.asarray(dst, dtype=np.int64).tolist(),
            k=max(int(k), 0),
        )
        return tuple(np.asarray(records[0][name], dtype=np.int64) for name in ("row", "col", "eid"))

    # -- reads -----------------------------------------------------------------------------

    def _stored(self, schema: EdgeSchema) -> dict[str, Any]:
        meta = self._edge_meta(schema).get(schema.key)
        if meta is None:
            known = [EdgeSchema.from_key(k).edge_type for k in self._edge_meta()]
            raise NotFoundError(f"edge type {schema.edge_type!r} is not stored (stored: {known})")
        return meta

    def _read_all(self, schema: EdgeSchema, meta: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """``(row, col)`` of the current generation in edge-id order, a page per query."""
        pages = list(self._pages(schema, meta, self.batch_size * 5))
        if not pages:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        return np.concatenate([p[2] for p in pages]), np.concatenate([p[3] for p in pages])

    def _pages(
        self, schema: EdgeSchema, meta: dict[str, Any], page: int
    ) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
        """``(lo, hi, row, col)`` of each page of ``page`` edge ids, in order, ``READ_SESSIONS``
        pages read at once (each in its own session); at most that many are held ahead."""
        count = int(meta["count"])
        if count == 0:
            return
        src = _DenseIds(self._internal_ids(schema.src))
        dst = src if schema.dst == schema.src else _DenseIds(self._internal_ids(schema.dst))
        with ThreadPoolExecutor(READ_SESSIONS, thread_name_prefix="gnnstore-neo4j-read") as pool:
            ahead: deque[tuple[int, int, Future]] = deque()
            for lo in range(0, count, page):
                hi = min(lo + page, count)
                read = pool.submit(self._read_page, schema, meta["gen"], lo, hi, src, dst)
                ahead.append((lo, hi, read))
                if len(ahead) == READ_SESSIONS:
                    lo, hi, pending = ahead.popleft()
                    yield lo, hi, *pending.result()
            while ahead:
                lo, hi, pending = ahead.popleft()
                yield lo, hi, *pending.result()

    def _read_page(
        self, schema: EdgeSchema, gen: int, lo: int, hi: int, src: "_DenseIds", dst: "_DenseIds"
    ) -> tuple[np.ndarray, np.ndarray]:
        """Edges of generation ``gen`` with ``lo <= eid < hi``, placed by eid (an index range
        seek, no sort). The ends come as Neo4j's node ids, which ``src`` and ``dst`` map to
        dense ids: reading each end's ``id`` property instead cost Neo4j about 1.7x the CPU."""
        records = self._read(
            f"MATCH {schema.pattern} WHERE r.eid >= $lo AND r.eid < $hi AND r.gen = $gen "
            "RETURN collect(id(a)) AS row, collect(id(b)) AS col, collect(r.eid) AS eid",
            lo=lo,
            hi=hi,
            gen=gen,
        )
        eid = np.asarray(records[0]["eid"], dtype=np.int64) - lo
        if eid.size != hi - lo or np.bincount(eid, minlength=hi - lo).max(initial=1) != 1:
            raise PreconditionError(
                f"edge type {schema.edge_type!r}: edge ids [{lo}, {hi}) are not all present once "
                f"in Neo4j (found {eid.size}); the edge type was replaced while it was read, or "
                "changed outside gnnstore"
            )
        row, col = np.empty(hi - lo, np.int64), np.empty(hi - lo, np.int64)
        row[eid] = src.dense(records[0]["row"], schema.src)
        col[eid] = dst.dense(records[0]["col"], schema.dst)
        return row, col

    def _internal_ids(self, node_label: str) -> tuple[np.ndarray, np.ndarray]:
        """``(neo4j_ids, dense_ids)`` of every node of a label, read in one query.

        ``id()`` is deprecated in favour of ``elementId()``, but element ids are strings:
        mapping 25M of them took 51 s of Python CPU against 7 s for these integers, and the
        export ran at a third of the speed (362k against 1.09M edges/s). Within one export the
        ids are stable, since gnnstore never deletes nodes.
        """
        records = self._read(
            f"MATCH (n:{quote(node_label)}) WHERE n.id IS NOT NULL "
            "RETURN collect(id(n)) AS neo4j, collect(n.id) AS dense"
        )
        return (np.asarray(records[0]["neo4j"], dtype=np.int64),
                np.asarray(records[0]["dense"], dtype=np.int64))  # fmt: skip

    # -- writes ----------------------------------------------------------------------------

    def _ensure_nodes(self, node_label: str, count: int) -> None:
        """Create nodes ``id = have .. count-1`` of a label (constraint first)."""
        have = self._node_count(node_label)
        if count <= have:
            return
        self._make_schema(id_constraint_statement(node_label))
        for lo in range(have, count, self.batch_size * 2):
            hi = min(lo + self.batch_size * 2, count)
            self._write(  # one transaction: the nodes and the count that says they exist
                f"UNWIND range($lo, $hi - 1) AS i CREATE (:{quote(node_label)} {{id: i}}) "
                f"WITH count(*) AS created MERGE (t:{quote(NODE_TYPE_LABEL)} {{label: $label}}) "
                "SET t.count = $hi",
                lo=lo,
                hi=hi,
                label=node_label,
            )

    def _make_schema(self, statement: str) -> None:
        """Run a ``CREATE ... IF NOT EXISTS`` once per object and wait until it is online."""
        if statement in self._schema_made:
            return
        self._write(statement)
        self._write("CALL db.awaitIndexes(300)")
        self._schema_made.add(statement)

    def _write_edges(self, schema: EdgeSchema, rows: np.ndarray, cols: np.ndarray) -> int:
        """Create ``(row, col)`` with ``eid = 0 .. E-1`` under a fresh generation; return it.

        The nodes must exist. Readers keep seeing the current generation until ``_commit``
        switches to this one; on failure the new relationships are deleted and the current
        ones stay as they were.
        """
        self._make_schema(eid_index_statement(schema.rel))
        gen = self._new_generation()
        order = np.argsort(rows, kind="stable")  # by source: about 2x faster (locality, locks)
        src = self._element_ids(schema.src)
        dst = src if schema.dst == schema.src else self._element_ids(schema.dst)
        for label, ends, ids in ((schema.src, rows, src), (schema.dst, cols, dst)):
            lost = np.unique(ends[np.equal(ids[ends], None)])
            if lost.size:
                raise PreconditionError(
                    f"edge type {schema.edge_type!r}: Neo4j has no {label!r} node with id {lost[:5].tolist()} "
                    f"({lost.size} such ids); were nodes deleted outside gnnstore? No edge was written"
                )
        try:
            with tqdm(total=len(rows), unit="edges", unit_scale=True, leave=False,
                      desc=f"neo4j {schema.rel}", disable=not self.progress) as bar:  # fmt: skip
                for lo in range(0, len(rows), self.batch_size):
                    eid = order[lo : lo + self.batch_size]
                    self._write_batch(schema, gen, src[rows[eid]], dst[cols[eid]], eid)
                    bar.update(len(eid))
                    logger.debug("edge type %r: %d of %d edges written", schema.edge_type,
                                 lo + len(eid), len(rows))  # fmt: skip
        except BaseException:
            logger.exception("writing edge type %r failed; its stored edges are unchanged", schema.edge_type)
            try:
                self._delete_edges(schema, gen=gen)
            except Exception:  # noqa: BLE001 - keep the first error; the next put deletes them
                logger.warning("could not delete the partial edges of %r (generation %d); the next "
                               "put of that edge type deletes them", schema.edge_type, gen)  # fmt: skip
            raise
        logger.info("stored %d edges of %r in Neo4j (generation %d)", len(rows), schema.edge_type, gen)
        return gen

    def _element_ids(self, node_label: str) -> np.ndarray:
        """Each node's Neo4j element id (str) at its dense id, ``None`` where Neo4j has no such
        node: writes find a relationship's ends by element id, a direct lookup (about 1.4× the
        edges/s of the ``id`` index's seeks)."""
        ids = np.empty(self._node_count(node_label), dtype=object)
        with self.driver.session(database=self.database, default_access_mode=READ_ACCESS) as session:
            result = session.run(f"MATCH (n:{quote(node_label)}) RETURN n.id AS id, elementId(n) AS element")
            for dense, element in result:
                if 0 <= dense < ids.shape[0]:  # a node past the count is not this graph's (yet)
                    ids[dense] = element
        return ids

    def _write_batch(
        self, schema: EdgeSchema, gen: int, src: np.ndarray, dst: np.ndarray, eid: np.ndarray
    ) -> None:
        """One transaction: relationships between the nodes of element ids ``src[i] -> dst[i]``,
        with ``eid[i]``, of generation ``gen``."""
        self._write(
            "UNWIND range(0, size($src) - 1) AS i "
            "MATCH (a) WHERE elementId(a) = $src[i] MATCH (b) WHERE elementId(b) = $dst[i] "
            f"CREATE (a)-[:{quote(schema.rel)} {{eid: $eid[i], gen: $gen}}]->(b)",
            src=src.tolist(),
            dst=dst.tolist(),
            eid=eid.tolist(),
            gen=gen,
        )

    def _delete_edges(self, schema: EdgeSchema, *, gen: int | None = None, keep: int | None = None) -> None:
        """Delete, in batches, the edge type's relationships of generation ``gen``, or else all
        but those of generation ``keep`` (all when both are ``None``)."""
        if gen is not None:
            where = "WHERE r.gen = $gen"
        else:  # no gen property (written before generations) or another one
            where = "WHERE NOT coalesce(r.gen = $keep, false)"
        self._write_in_transactions(
            f"MATCH {schema.pattern} {where} CALL (r) {{ DELETE r }} IN TRANSACTIONS OF $rows ROWS",
            gen=gen,
            keep=keep,
            rows=self.batch_size,
        )

    def _commit(self, schema: EdgeSchema, layouts: dict[str, Layout], count: int, gen: int | None) -> None:
        """One transaction: point the edge type at ``layouts`` of generation ``gen`` (no layouts:
        forget the edge type) and bump the store's version."""
        names = [layout for layout in LAYOUTS if layout in layouts]
        meta = (
            f"MERGE (t:{quote(EDGE_TYPE_LABEL)} {{key: $key}}) "
            "SET t.layouts = $layouts, t.sorted = $sorted, t.sizes = $sizes, t.count = $count, t.gen = $gen"
            if names
            else f"OPTIONAL MATCH (t:{quote(EDGE_TYPE_LABEL)} {{key: $key}}) DELETE t"
        )
        self._write(
            f"{meta} WITH 1 AS done "
            f"MERGE (g:{quote(GRAPH_LABEL)}) ON CREATE SET g.uuid = randomUUID(), g.version = 0 "
            "SET g.version = g.version + 1",
            key=schema.key,
            layouts=names,
            sorted=[layouts[n][0] for n in names],
            sizes=[int(s) for n in names for s in layouts[n][1]],
            count=count,
            gen=gen,
        )


class _DenseIds:
    """Neo4j's node ids of one label, mapped to gnnstore's dense ids by a hash index."""

    def __init__(self, ids: tuple[np.ndarray, np.ndarray]) -> None:
        self._index, self._dense = pd.Index(ids[0]), ids[1]

    def dense(self, neo4j_ids: list[int], label: str) -> np.ndarray:
        """The dense ids of ``neo4j_ids``.

        Raises:
            PreconditionError: a node was created after the ids were read.
        """
        at = self._index.get_indexer(np.asarray(neo4j_ids, dtype=np.int64))
        if at.size and at.min() < 0:
            raise PreconditionError(
                f"an edge ends at a {label!r} node that had no dense id when the reading began; "
                "it was written outside gnnstore"
            )
        return self._dense[at]


def _same_multiset(row_a: np.ndarray, col_a: np.ndarray, row_b: np.ndarray, col_b: np.ndarray) -> bool:
    """Whether two edge lists hold the same edges, counting repeats, in any order."""
    if row_a.size != row_b.size:
        return False
    if row_a.size == 0:
        return True
    width = int(max(col_a.max(), col_b.max())) + 1
    return np.array_equal(np.sort(row_a * width + col_a), np.sort(row_b * width + col_b))
