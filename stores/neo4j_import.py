"""A new graph into an empty Neo4j through Neo4j's own offline importer.

The online path writes relationships through Cypher (about 20k edges/s here: Neo4j's own
work per relationship). For a database that does not exist yet, ``neo4j-admin database
import full`` writes the store files directly. gnnstore's side:

1. ``write_import_files(edges, num_nodes, directory)`` (or an ingest into an
   ``ImportFilesGraphStore``: ``gnnstore ingest --neo4j-import-dir``) writes gnnstore's schema
   as CSV (one file of ``id`` per node label, one of ``(source id, destination id, eid, gen)``
   per edge type) and a plan (``import-plan.json``);
2. the user (or a test) runs ``neo4j-admin`` with ``admin_import_args(directory)`` on the
   stopped database, then starts it;
3. ``Neo4jGraphStore.adopt_import(directory)`` adds what gnnstore reads by: the ``id``
   constraints, the ``eid`` indexes, the node counts, and each edge type's metadata (the
   imported relationships are generation 1).
"""
from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv

from gnnstore.common.errors import InvalidRequestError, PreconditionError
from gnnstore.common.graph_types import EdgeType, NodeType
from gnnstore.common.host_array import host_array
from gnnstore.stores.base import DEFAULT_CHUNK_EDGES, BaseGraphStore, StoredEdgeAttr, checked_layout
from gnnstore.stores.neo4j_schema import EdgeSchema

PLAN = "import-plan.json"
IMPORTED_GENERATION = 1
"""The generation the imported relationships carry (the graph's generation counter starts there)."""


class ImportFilesGraphStore(BaseGraphStore):
    """A write-only graph store that writes ``neo4j-admin`` import files instead of a database:
    each put writes its edge type's file at once; ``finish()`` writes the node files (the node
    counts are the largest sizes put) and the plan. An ingest's graph target for
    ``--neo4j-import-dir``.

    Raises:
        PreconditionError: ``directory`` exists and is not empty.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        if self.directory.exists() and any(self.directory.iterdir()):
            raise PreconditionError(f"the import directory {self.directory} is not empty")
        self.directory.mkdir(parents=True, exist_ok=True)
        self._labels: dict[str, int] = {}
        self._edges: dict[str, dict[str, Any]] = {}  # metadata key -> plan entry
        self._attrs: dict[str, StoredEdgeAttr] = {}

    def put_edges(
        self, edge_index: object, edge_type: EdgeType | None, layout: str,
        size: tuple[int, int] | None = None, is_sorted: bool = False,
    ) -> bool:
        """Write ``edge_type``'s import file (a COO with its size)."""
        schema = EdgeSchema.of(edge_type)
        if checked_layout(layout) != "coo" or size is None:
            raise InvalidRequestError(f"edge type {edge_type!r}: import files take a COO with its size")
        row, col = (np.ascontiguousarray(host_array(t), dtype=np.int64) for t in edge_index)
        if row.shape != col.shape or row.ndim != 1:
            raise InvalidRequestError(f"edge type {edge_type!r}: row and col must be 1-D of one length")
        for end, ids, bound in (("source", row, size[0]), ("destination", col, size[1])):
            if ids.size and (ids.min() < 0 or ids.max() >= bound):
                raise InvalidRequestError(f"edge type {edge_type!r}: a {end} id is outside [0, {bound})")
        count = int(row.shape[0])
        entry = self._edges.setdefault(schema.key, {"key": schema.key, "rel": schema.rel,
                                                    "file": f"edges-{len(self._edges)}.csv"})
        _write_csv(self.directory / entry["file"],
                   f":START_ID({schema.src}),:END_ID({schema.dst}),eid:long,gen:long",
                   [row, col, np.arange(count, dtype=np.int64), np.full(count, IMPORTED_GENERATION, np.int64)])
        entry.update(count=count, size=[int(size[0]), int(size[1])])
        for label, nodes in ((schema.src, size[0]), (schema.dst, size[1])):
            self._labels[label] = max(self._labels.get(label, 0), int(nodes))
        self._attrs[schema.key] = StoredEdgeAttr(edge_type, "coo", False, tuple(entry["size"]))
        return True

    def edge_index(self, edge_type: EdgeType | None, layout: str) -> tuple[np.ndarray, np.ndarray]:
        raise PreconditionError("import files are written, not read: import them into Neo4j first")

    def remove_edges(self, edge_type: EdgeType | None, layout: str) -> bool:
        raise PreconditionError("import files are written, not changed: write a new import directory")

    def edge_attrs(self) -> list[StoredEdgeAttr]:
        """The edge types put so far, as COOs."""
        return list(self._attrs.values())

    def iter_edge_index(
        self, edge_type: EdgeType | None, chunk_size: int = DEFAULT_CHUNK_EDGES
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        raise PreconditionError("import files are written, not read: import them into Neo4j first")

    def version(self) -> str:
        """Fixed: the files are not a graph yet."""
        return "neo4j-import-files"

    def finish(self) -> None:
        """Write the node files and the plan, once every edge type is put. Until then the
        directory holds no plan, so a failed ingest's files are never imported by mistake."""
        for i, (label, count) in enumerate(self._labels.items()):
            _write_csv(self.directory / f"nodes-{i}.csv", f"id:ID({label})", [np.arange(count, dtype=np.int64)])
        plan = {"nodes": self._labels, "edges": list(self._edges.values())}
        (self.directory / PLAN).write_text(json.dumps(plan))


def write_import_files(
    edges: Mapping[EdgeType | None, tuple[np.ndarray, np.ndarray]],
    num_nodes: Mapping[NodeType | None, int],
    directory: Path,
) -> dict[str, Any]:
    """Write the import files of a whole graph into ``directory`` (created; must be empty).

    Args:
        edges: edge type → ``(row, col)`` global ids (arrays or tensors); the edge ids are the positions.
        num_nodes: node type → count (ids ``0 .. count-1``); every endpoint type must be here.

    Returns:
        The plan: node label → count, and per edge type its key, count, size and file.

    Raises:
        InvalidRequestError: a node type missing from ``num_nodes``, an id out of range, or
            ``row`` and ``col`` of different lengths.
        PreconditionError: ``directory`` exists and is not empty.
    """
    store = ImportFilesGraphStore(directory)
    for edge_type, (row, col) in edges.items():
        src, dst = (edge_type[0], edge_type[-1]) if isinstance(edge_type, tuple) else (None, None)
        missing = [end for end, nt in (("source", src), ("destination", dst)) if nt not in num_nodes]
        if missing:
            raise InvalidRequestError(f"edge type {edge_type!r}: its {missing[0]} node type has no count in num_nodes")
        store.put_edges((row, col), edge_type, "coo", (num_nodes[src], num_nodes[dst]))
    store.finish()
    return read_plan(directory)


def read_plan(directory: Path) -> dict[str, Any]:
    """The plan ``write_import_files`` left in ``directory``.

    Raises:
        PreconditionError: there is none.
    """
    path = Path(directory) / PLAN
    if not path.is_file():
        raise PreconditionError(f"no {PLAN} in {directory}: write the files with write_import_files first")
    return json.loads(path.read_text())


def admin_import_args(directory: Path, database: str = "neo4j") -> list[str]:
    """The arguments after ``neo4j-admin`` that import ``directory``'s files into ``database``."""
    directory = Path(directory).resolve()
    plan = read_plan(directory)
    nodes = [f"--nodes={label}={directory / f'nodes-{i}.csv'}" for i, label in enumerate(plan["nodes"])]
    rels = [f"--relationships={e['rel']}={directory / e['file']}" for e in plan["edges"]]
    report = f"--report-file={directory / 'import.report'}"  # not the working directory's
    return ["database", "import", "full", database, "--id-type=integer", report, *nodes, *rels]


def _write_csv(path: Path, header: str, columns: list[np.ndarray]) -> None:
    """A header line, then the integer columns, written by Arrow (fast, no Python loop)."""
    table = pa.table({str(i): pa.array(c) for i, c in enumerate(columns)})
    with path.open("wb") as out:
        out.write(header.encode() + b"\n")
        pa_csv.write_csv(table, out, pa_csv.WriteOptions(include_header=False))
