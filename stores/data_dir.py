"""Opens the stores of a data directory (the graph, features/, idmap/) and names its other entries.

The graph is an embedded database: LadybugDB (graph.lbug, the default for a new directory) or
Kùzu (graph.kuzu, what directories made before LadybugDB hold), or, where it was created so (an
attach of a large Neo4j graph), plain edge files (graph.edges/, written and read in bounded
memory). A directory keeps the kind it was made with; graph-engine.json says which engine (and
version) made it. With the graph kept elsewhere (Neo4j), the directory holds only features/ and
idmap/ and the caller hands in the graph store; this module stays the one place that knows the
layout.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from gnnstore.common.durable_file import sync_directory, write_durably
from gnnstore.common.errors import PreconditionError
from gnnstore.stores.base import BaseGraphStore
from gnnstore.stores.edge_file_graph_store import META_FILE as EDGE_FILES_META
from gnnstore.stores.edge_file_graph_store import EdgeFileGraphStore
from gnnstore.stores.embedded_graph_store import EmbeddedGraphStore
from gnnstore.stores.graph_engines import DEFAULT_ENGINE, ENGINES, GraphEngine, engine_named
from gnnstore.stores.id_map import IdMap
from gnnstore.stores.rocksdb_rows import RocksDBRows

logger = logging.getLogger(__name__)

GRAPH = "graph"  # the part: graph.lbug, graph.kuzu or graph.edges/, whichever the directory holds
GRAPH_EDGES = "graph.edges"  # the graph as edge files instead of a database
EDGE_FILES = "edge-files"  # the kind of graph those are
GRAPH_ENGINE = "graph-engine.json"  # which engine (and version) made the graph database
FEATURES = "features"
IDMAP = "idmap"
SNAPSHOTS = "snapshots"  # owned by the backend's topology snapshots; never opened here
FEATURE_TIER = "feature_tier"  # owned by the backend's read tier; never opened here
GRAPH_WRITES = "graph_writes"  # owned by the backend's graph write log; never opened here
INGEST_RECORD = "ingest-record.json"  # what the last finished ingest read; absent mid-ingest
_INGEST_HINT = "run `gnnstore ingest SOURCE --data-dir DIR` to (re)build it"


@dataclass
class Stores:
    """The stores of one data directory, in numpy (PyG's APIs over them: ``RocksDBFeatureStore``
    and ``PyGGraphStore``); ``close()`` (or ``with``) releases all three."""

    feature_store: RocksDBRows
    graph_store: BaseGraphStore
    id_map: IdMap

    def close(self) -> None:
        """Close every store (each one flushes or checkpoints what it wrote)."""
        self.graph_store.close()
        self.feature_store.close()
        self.id_map.close()

    def __enter__(self) -> "Stores":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_stores(
    data_dir: str | os.PathLike,
    *,
    read_only: bool = False,
    follow: bool = False,
    graph_store: BaseGraphStore | None = None,
    edge_files: bool = False,
    engine: str | None = None,
) -> Stores:
    """Open ``data_dir``'s graph store, feature store and id map.

    A writer creates a missing or empty directory with empty stores.

    Args:
        data_dir: the data directory.
        read_only: open every store without the write lock.
        follow: read-only, and the feature store and id map follow the writes of the process
            that has them open for writing (``catch_up``): a replica beside its primary.
        edge_files: a graph created here is kept as edge files (``EdgeFileGraphStore``), not
            in a database; a directory that has a graph keeps the kind it has.
        engine: the graph database (``"ladybug"`` or ``"kuzu"``) a graph created here is made
            with, and the one an existing graph must have been made with (``None``: whichever
            it was made with; LadybugDB for a new one).
        graph_store: a graph store kept outside the directory (e.g. a ``Neo4jGraphStore``);
            then ``data_dir`` holds only the features and the id map (a graph database there
            is ignored). The returned ``Stores`` owns it: it is closed with the others, and
            when opening them fails.

    Raises:
        PreconditionError: the directory is missing (read-only), is not a directory, holds
            only some of the stores or a store that cannot be opened (corrupt, or locked by
            another writer), or its graph was made by another engine than ``engine``; the
            message names the part and what to run.
    """
    root = Path(data_dir)
    read_only = read_only or follow
    parts = (FEATURES, IDMAP) if graph_store is not None else (GRAPH, FEATURES, IDMAP)
    owned: list = [] if graph_store is None else [graph_store]
    try:
        _check_parts(root, parts, read_only)
        try:
            features = RocksDBRows(root / FEATURES, read_only=read_only, follow=follow)
            owned.append(features)
            graph = graph_store
            if graph is None:
                graph = _open_graph(root, read_only, edge_files, engine)
                owned.append(graph)
            id_map = IdMap(root / IDMAP, read_only=read_only, follow=follow)
        except PreconditionError as exc:
            # No advice to re-ingest: the store may be healthy and only locked or unreadable here.
            raise PreconditionError(f"data directory {root}: {exc}") from exc
    except BaseException:
        for store in owned:
            store.close()
        raise
    return Stores(features, graph, id_map)


def graph_kind(data_dir: str | os.PathLike) -> str | None:
    """What ``data_dir``'s graph is kept in: an engine's name, ``EDGE_FILES``, or ``None`` (no graph).

    The engine graph-engine.json names, if its file is there; else edge files, else the file of
    the engine present (a directory made before the record holds ``graph.kuzu``).
    """
    root = Path(data_dir)
    recorded = _recorded_engine(root)
    if recorded in ENGINES and (root / ENGINES[recorded].file_name).is_file():
        return recorded
    if _has_edge_files(root):
        return EDGE_FILES
    return next((e.name for e in (ENGINES["kuzu"], *ENGINES.values()) if (root / e.file_name).is_file()), None)


def record_engine(data_dir: str | os.PathLike, engine: GraphEngine) -> None:
    """Note, durably, that ``engine`` (at its installed version) made ``data_dir``'s graph."""
    record = {"engine": engine.name, "version": engine.version()}
    write_durably(Path(data_dir) / GRAPH_ENGINE, json.dumps(record, sort_keys=True).encode())


def recorded_engine_version(data_dir: str | os.PathLike) -> str | None:
    """The engine version graph-engine.json names (``None``: no record, or none in it)."""
    return _read_engine_record(Path(data_dir)).get("version")


def _recorded_engine(root: Path) -> str | None:
    return _read_engine_record(root).get("engine")


def _read_engine_record(root: Path) -> dict:
    try:
        record = json.loads((root / GRAPH_ENGINE).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _open_graph(root: Path, read_only: bool, edge_files: bool, engine: str | None) -> BaseGraphStore:
    """The directory's own graph store, created with ``engine`` (or as edge files) when it has none."""
    kind = graph_kind(root)
    if kind is None:
        if edge_files:
            return EdgeFileGraphStore(root / GRAPH_EDGES, read_only=read_only)
        chosen = DEFAULT_ENGINE if engine is None else engine_named(engine)
        store = EmbeddedGraphStore(root / chosen.file_name, engine=chosen, read_only=read_only)
        if not read_only:
            record_engine(root, chosen)
        return store
    if kind == EDGE_FILES:
        return EdgeFileGraphStore(root / GRAPH_EDGES, read_only=read_only)
    found = ENGINES[kind]
    if engine is not None and engine != kind:
        raise PreconditionError(
            f"its graph was made with {found.label} ({found.file_name}), not {engine_named(engine).label}: "
            f"serve it with --graph-backend {kind} (or embedded), or convert it with "
            f"`gnnstore migrate --data-dir {root} --to {engine}`"
        )
    try:
        return EmbeddedGraphStore(root / found.file_name, engine=found, read_only=read_only)
    except PreconditionError as exc:
        recorded = recorded_engine_version(root)
        if recorded is not None and recorded != found.version():
            raise PreconditionError(
                f"{exc} (graph-engine.json says {found.label} {recorded} made it; this install has "
                f"{found.version()}: install {found.package}=={recorded}, or re-ingest)"
            ) from None
        raise


def _check_parts(root: Path, parts: tuple[str, ...], read_only: bool) -> None:
    """Create a missing or empty directory for a writer; refuse one that lacks some ``parts``."""
    if root.exists() and not root.is_dir():
        raise PreconditionError(f"data directory {root} is a file, not a directory")
    present = [part for part in _present_parts(root) if part in parts]
    if not present and not read_only and (not root.exists() or _is_empty(root, parts)):
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PreconditionError(f"cannot create data directory {root}: {exc.strerror}") from None
        logger.info("creating data directory %s", root)
    elif len(present) < len(parts):
        missing = sorted(set(parts) - set(present))
        state = "does not exist" if not root.exists() else f"is missing {', '.join(missing)}"
        raise PreconditionError(f"data directory {root} {state}; {_INGEST_HINT}")


def missing_parts(data_dir: str | os.PathLike, *, graph_elsewhere: bool = False) -> list[str]:
    """The stores ``data_dir`` lacks, all of them when it is not a directory."""
    root = Path(data_dir)
    parts = (FEATURES, IDMAP) if graph_elsewhere else (GRAPH, FEATURES, IDMAP)
    if not root.is_dir():
        return list(parts)
    present = _present_parts(root)
    return [part for part in parts if part not in present]


def _has_edge_files(root: Path) -> bool:
    return (root / GRAPH_EDGES / EDGE_FILES_META).is_file()


def _present_parts(root: Path) -> list[str]:
    """The stores that exist (the graph as ``GRAPH``, whichever its kind); a RocksDB folder
    without its CURRENT file counts as corrupt."""
    parts = [GRAPH] if graph_kind(root) is not None else []
    for name in (FEATURES, IDMAP):
        folder = root / name
        if folder.is_dir() and not (folder / "CURRENT").is_file():
            raise PreconditionError(
                f"data directory {root}: {name}/ is not a RocksDB database (no CURRENT file); "
                f"{_INGEST_HINT}"
            )
        if folder.is_dir():
            parts.append(name)
    return parts


def _is_empty(root: Path, parts: tuple[str, ...]) -> bool:
    """No entry but snapshots and, with the graph elsewhere, a left-over graph."""
    graphs = {GRAPH_EDGES, GRAPH_ENGINE, *(e.file_name for e in ENGINES.values())}
    ignored = {SNAPSHOTS, FEATURE_TIER, INGEST_RECORD, *(graphs if GRAPH not in parts else ())}
    return all(entry.name in ignored for entry in root.iterdir())


def read_ingest_record(data_dir: str | os.PathLike) -> dict | None:
    """The record the last finished ingest left in ``data_dir``, or ``None`` (none, or unreadable)."""
    try:
        record = json.loads((Path(data_dir) / INGEST_RECORD).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def clear_ingest_record(data_dir: str | os.PathLike) -> None:
    """Forget the last ingest: called before an ingest's first write, so a crash leaves none."""
    record = Path(data_dir) / INGEST_RECORD
    if record.exists():
        record.unlink()
        sync_directory(record.parent)  # the removal is durable before any write follows it


def write_ingest_record(data_dir: str | os.PathLike, record: dict) -> None:
    """Note, atomically, what the ingest that just committed every write read."""
    write_durably(Path(data_dir) / INGEST_RECORD, json.dumps(record, sort_keys=True).encode())


def discard_graph_writes(data_dir: str | os.PathLike) -> int:
    """Remove the graph writes logged over the previous graph (a new ingest replaces it);
    returns how many there were."""
    folder = Path(data_dir) / GRAPH_WRITES
    if not folder.is_dir():
        return 0
    count = sum(1 for f in folder.iterdir() if f.suffix == ".npz")
    shutil.rmtree(folder)
    return count
