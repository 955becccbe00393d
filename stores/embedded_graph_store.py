"""A graph store over an embedded graph database (LadybugDB or Kùzu, ``graph_engines.py``): one
node table per node type, one rel table per edge layout.

Schema, all named by the store (``n3_paper``, ``r7_cites``: a counter plus the name with every
character outside ``[A-Za-z0-9_]`` dropped), so no user string ever becomes Cypher text:

* ``gnnstore_meta(key STRING PRIMARY KEY, value STRING)`` holds json records: ``version``,
  ``next_table``, ``node:<json node type>`` -> ``{table, num_nodes}`` and
  ``edge:<json [edge type, layout]>`` -> ``{table, size, is_sorted, num_edges, seq}``;
* a node table per node type holds the dense ids ``0 .. N-1`` (``id INT64`` primary key);
* a rel table per stored (edge type, layout) holds the layout's COO expansion with
  ``e_id INT64``, the position in that expansion.

Atomicity: a put writes the edges into a fresh rel table, then switches to it. Kùzu 0.11.3 (and
so, kept to be safe, LadybugDB) can lose the rows of a committed ``COPY`` when the process is
killed before its next checkpoint (the table comes back empty after WAL replay), so the switch
waits for a checkpoint:

1. one transaction extends the node tables, creates the rel table and ``COPY``s the edges;
2. ``CHECKPOINT`` puts those pages in the data file;
3. one transaction drops the old rel table and switches the metadata record and version.

A failure at any point (bad ids, an exception, ``kill -9``) leaves the previous edges readable;
a rel table that no metadata record names (a put killed between 1 and 3) is dropped when the
store is next opened for writing.
"""
from __future__ import annotations

import json
import logging
import os
import re
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from gnnstore.common.errors import PreconditionError
from gnnstore.stores.base import DEFAULT_CHUNK_EDGES, checked_layout
from gnnstore.stores.edge_layout import (
    EdgeTypeKey,
    check_edge_type,
    node_types_of,
    to_coo,
)
from gnnstore.stores.edge_records import RecordedGraphStore, edge_key, edge_records
from gnnstore.stores.graph_engines import DEFAULT_ENGINE, GraphEngine, engine_named, open_failure

logger = logging.getLogger(__name__)

_META = "gnnstore_meta"
_NOT_IDENT = re.compile(r"[^A-Za-z0-9_]")


class EmbeddedGraphStore(RecordedGraphStore):
    """Edges by (edge type, layout), streamed and versioned, in an embedded graph database.

    Args:
        path: the database file (created when missing unless ``read_only``).
        engine: the engine, by name or as a ``GraphEngine`` (default: LadybugDB).
        read_only: open without the write lock; puts and removes raise ``PreconditionError``.
    """

    page_edges = 1 << 22  # edges one query materialises (as Arrow) while streaming

    def __init__(
        self, path: str | os.PathLike, *, engine: str | GraphEngine = DEFAULT_ENGINE, read_only: bool = False
    ) -> None:
        self.path = Path(path)
        self.engine = engine if isinstance(engine, GraphEngine) else engine_named(engine)
        self.read_only = read_only
        if read_only and not self.path.exists():
            raise PreconditionError(f"graph store {self.path} does not exist (run `gnnstore ingest`)")
        module = self.engine.module()
        try:
            self._db = module.Database(str(self.path), read_only=read_only)
            self._conn = module.Connection(self._db)
        except RuntimeError as exc:
            raise open_failure(self.engine, f"graph store {self.path}", exc) from None
        self._lock = threading.RLock()
        if _META not in self._table_names():
            if read_only:
                raise PreconditionError(f"{self.path} is not a gnnstore graph (no {_META} table)")
            with self._transaction():
                self._run(f"CREATE NODE TABLE {_META}(key STRING, value STRING, PRIMARY KEY(key))")
                self._set_meta("version", f"{uuid.uuid4().hex}-0")
                self._set_meta("next_table", 0)
        self._meta = self._load_meta()
        if not read_only:
            self._drop_unnamed_rel_tables()

    # ---- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection and the database (checkpointing a writer's WAL)."""
        if getattr(self, "_conn", None) is not None:
            self._conn.close()
            self._db.close()
            self._conn = self._db = None

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({str(self.path)!r}, engine={self.engine.name!r})"

    # ---- reads -----------------------------------------------------------------------------

    def version(self) -> str:
        """An opaque token that changes on every put and remove and survives reopening."""
        return self._meta["version"]

    def iter_edge_index(
        self, edge_type: EdgeTypeKey, chunk_size: int = DEFAULT_CHUNK_EDGES
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Yield ``(row, col, e_id)`` chunks (global ids) of ``edge_type`` in edge-id order.

        The canonical edge list is the COO layout if one was put, else the first layout put.
        At most ``max(chunk_size, page_edges)`` edges are held in memory at a time.

        Raises:
            NotFoundError: no edges of ``edge_type`` are stored.
            InvalidRequestError: ``chunk_size`` below 1 or a malformed edge type.
        """
        info = self._scan_record(edge_type, chunk_size)
        total, page = info["num_edges"], max(chunk_size, self.page_edges)
        for low in range(0, total, page):
            high = min(total, low + page)
            row, col = self._read_edges(info, low, high)
            for start in range(0, high - low, chunk_size):
                stop = min(high - low, start + chunk_size)
                yield row[start:stop], col[start:stop], np.arange(low + start, low + stop, dtype=np.int64)

    # ---- moving between engines ------------------------------------------------------------

    def dump(self, folder: Path) -> None:
        """Write every record and every table's rows to ``folder`` (``meta.json`` and, per rel
        table, ``<table>.row.npy`` / ``.col.npy`` in edge-id order), a page at a time."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "meta.json").write_text(json.dumps(self._meta))
        for _, _, info in edge_records(self._meta):
            ends = [np.lib.format.open_memmap(folder / f"{info['table']}.{end}.npy", mode="w+", dtype=np.int64,
                                              shape=(info["num_edges"],)) for end in ("row", "col")]
            for low in range(0, info["num_edges"], self.page_edges):
                high = min(info["num_edges"], low + self.page_edges)
                ends[0][low:high], ends[1][low:high] = self._read_edges(info, low, high)
            for array in ends:
                array.flush()

    @classmethod
    def load(cls, folder: Path, path: Path, engine: str | GraphEngine) -> EmbeddedGraphStore:
        """A new database at ``path`` holding what ``dump`` wrote to ``folder``: the same tables,
        records and version, so snapshots built from the dumped store stay valid."""
        meta = json.loads((folder / "meta.json").read_text())
        store = cls(path, engine=engine)
        try:
            with store._transaction():
                for key, info in meta.items():
                    if key.startswith("node:"):
                        store._run(f"CREATE NODE TABLE {info['table']}(id INT64, PRIMARY KEY(id))")
                        ids = pa.table({"id": np.arange(info["num_nodes"], dtype=np.int64)})
                        store._run(f"COPY {info['table']} FROM $ids", {"ids": ids})
                for edge_type, _, info in edge_records(meta):
                    src_type, dst_type = node_types_of(edge_type)
                    src, dst = (meta["node:" + json.dumps(nt)]["table"] for nt in (src_type, dst_type))
                    store._run(f"CREATE REL TABLE {info['table']}(FROM {src} TO {dst}, e_id INT64)")
                    row, col = (np.load(folder / f"{info['table']}.{end}.npy", mmap_mode="r") for end in ("row", "col"))
                    if row.size:
                        frame = pa.table({"from": row, "to": col, "e_id": np.arange(row.size, dtype=np.int64)})
                        store._run(f"COPY {info['table']} FROM $frame", {"frame": frame})
                for key, value in meta.items():
                    store._set_meta(key, value)
            store._run("CHECKPOINT")
        except BaseException:
            store.close()
            raise
        return store

    # ---- writes ----------------------------------------------------------------------------

    def put_edges(
        self, edge_index: object, edge_type: EdgeTypeKey, layout: str,
        size: tuple[int, int] | None = None, is_sorted: bool = False,
    ) -> bool:
        """Store ``edge_index`` as ``edge_type``'s edges in ``layout`` (``BaseGraphStore.put_edges``)."""
        self._check_writable()
        edge_type, layout = check_edge_type(edge_type), checked_layout(layout)
        edges = to_coo(edge_index, edge_type, layout, size, bool(is_sorted))
        key = edge_key(edge_type, layout)
        old = self._meta.get(key)
        src_type, dst_type = node_types_of(edge_type)
        with self._transaction():
            src_table = self._ensure_nodes(src_type, edges.size[0])
            dst_table = self._ensure_nodes(dst_type, edges.size[1])
            rel = edge_type[1] if isinstance(edge_type, tuple) else edge_type or "edges"
            seq = old["seq"] if old is not None else self._meta["next_table"]
            table = self._new_table_name("r", rel)
            self._run(f"CREATE REL TABLE {table}(FROM {src_table} TO {dst_table}, e_id INT64)")
            if edges.row.size:
                frame = pa.table({"from": edges.row, "to": edges.col,
                                  "e_id": np.arange(edges.row.size, dtype=np.int64)})
                self._run(f"COPY {table} FROM $frame", {"frame": frame})
        try:
            self._run("CHECKPOINT")
            with self._transaction():
                if old is not None:
                    self._run(f"DROP TABLE {old['table']}")
                self._set_meta(key, {"table": table, "size": list(edges.size),
                                     "is_sorted": bool(is_sorted),
                                     "num_edges": int(edges.row.size), "seq": seq})
                self._bump_version()
        except BaseException:
            self._drop_unnamed_rel_tables()
            raise
        logger.info("edge type %r (%s): %d edges put into %s", edge_type, layout,
                    edges.row.size, table)
        return True

    def remove_edges(self, edge_type: EdgeTypeKey, layout: str) -> bool:
        """Delete ``edge_type``'s edges in ``layout``; whether they were stored."""
        self._check_writable()
        edge_type, layout = check_edge_type(edge_type), checked_layout(layout)
        key = edge_key(edge_type, layout)
        info = self._meta.get(key)
        if info is None:
            return False
        with self._transaction():
            self._run(f"DROP TABLE {info['table']}")
            self._run(f"MATCH (m:{_META} {{key: $key}}) DELETE m", {"key": key})
            del self._meta[key]
            self._bump_version()
        logger.info("edge type %r (%s) removed", edge_type, layout)
        return True

    # ---- internals -------------------------------------------------------------------------

    def _run(self, query: str, parameters: dict | None = None) -> Any:
        with self._lock:
            return self._conn.execute(query, parameters or {})

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction; on any failure roll back and reload the metadata."""
        with self._lock:
            self._run("BEGIN TRANSACTION")
            try:
                yield
            except BaseException:
                self._run("ROLLBACK")
                self._meta = self._load_meta()
                raise
            self._run("COMMIT")

    def _table_names(self, kind: str | None = None) -> set[str]:
        """Names of the database's tables, only those of ``kind`` ("NODE", "REL") if given."""
        table = self._run("CALL show_tables() RETURN name, type").get_as_arrow()
        return {name for name, type_ in zip(table.column(0).to_pylist(), table.column(1).to_pylist())
                if kind is None or type_ == kind}

    def _drop_unnamed_rel_tables(self) -> None:
        """Drop the rel tables of puts that never switched to them (killed or failed)."""
        named = {info["table"] for info in self._meta.values() if isinstance(info, dict)}
        for table in sorted(self._table_names("REL") - named):
            logger.warning("%s: dropping %s, left by an unfinished put", self.path, table)
            with self._transaction():
                self._run(f"DROP TABLE {table}")

    def _load_meta(self) -> dict:
        table = self._run(f"MATCH (m:{_META}) RETURN m.key, m.value").get_as_arrow()
        return {k: json.loads(v) for k, v in zip(table.column(0).to_pylist(),
                                                 table.column(1).to_pylist())}

    def _set_meta(self, key: str, value: object) -> None:
        self._run(f"MERGE (m:{_META} {{key: $key}}) SET m.value = $value",
                  {"key": key, "value": json.dumps(value)})
        if hasattr(self, "_meta"):
            self._meta[key] = value

    def _bump_version(self) -> None:
        db_id, counter = self._meta["version"].rsplit("-", 1)
        self._set_meta("version", f"{db_id}-{int(counter) + 1}")

    def _new_table_name(self, kind: str, name: str | None) -> str:
        number = self._meta["next_table"]
        self._set_meta("next_table", number + 1)
        return f"{kind}{number}_{_NOT_IDENT.sub('', name or 'homogeneous')[:40]}"

    def _ensure_nodes(self, node_type: str | None, num_nodes: int) -> str:
        """The node table of ``node_type``, grown to hold ids ``0 .. num_nodes-1``."""
        key = "node:" + json.dumps(node_type)
        info = self._meta.get(key)
        if info is None:
            info = {"table": self._new_table_name("n", node_type), "num_nodes": 0}
            self._run(f"CREATE NODE TABLE {info['table']}(id INT64, PRIMARY KEY(id))")
        if num_nodes > info["num_nodes"]:
            ids = pa.table({"id": np.arange(info["num_nodes"], num_nodes, dtype=np.int64)})
            self._run(f"COPY {info['table']} FROM $ids", {"ids": ids})
            info = {**info, "num_nodes": num_nodes}
        self._set_meta(key, info)
        return info["table"]

    def _all_edges(self, info: dict) -> tuple[np.ndarray, np.ndarray]:
        return self._read_edges(info, 0, info["num_edges"])

    def _read_edges(self, info: dict, low: int, high: int) -> tuple[np.ndarray, np.ndarray]:
        """(row, col) of edge ids ``low .. high-1`` in edge-id order, through one Arrow export."""
        n = high - low
        row, col = np.empty(n, np.int64), np.empty(n, np.int64)
        if n == 0:
            return row, col
        where = "" if n == info["num_edges"] else " WHERE r.e_id >= $low AND r.e_id < $high"
        with self._lock:  # one connection: export the result before another query runs
            table = self._run(
                f"MATCH (a)-[r:{info['table']}]->(b){where} RETURN a.id, b.id, r.e_id",
                {"low": low, "high": high} if where else None,
            ).get_as_arrow()
        pos = table.column(2).to_numpy() - low
        if len(pos) != n:
            raise PreconditionError(
                f"graph store {self.path}: table {info['table']} returned {len(pos)} of {n} edges "
                "(the database is corrupt; re-run `gnnstore ingest`)"
            )
        row[pos], col[pos] = table.column(0).to_numpy(), table.column(1).to_numpy()
        return row, col

