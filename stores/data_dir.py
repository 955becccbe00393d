"""Opens the stores of a data directory (the graph, features/, idmap/) and names its other entries.

The graph is a Kùzu database (graph.kuzu, the default) or, where it was created so (an attach
of a large Neo4j graph), plain edge files (graph.edges/, written and read in bounded memory).
With the graph kept elsewhere (Neo4j), the directory holds only features/ and idmap/ and the
caller hands in the graph store; this module stays the one place that knows the layout.
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
from gnnstore.stores.id_map import IdMap
from gnnstore.stores.kuzu_graph_store import KuzuGraphStore
from gnnstore.stores.rocksdb_feature_store import RocksDBFeatureStore

logger = logging.getLogger(__name__)

GRAPH = "graph.kuzu"
GRAPH_EDGES = "graph.edges"  # the graph as edge files instead of Kùzu
FEATURES = "features"
IDMAP = "idmap"
SNAPSHOTS = "snapshots"  # owned by the backend's topology snapshots; never opened here
FEATURE_TIER = "feature_tier"  # owned by the backend's read tier; never opened here
GRAPH_WRITES = "graph_writes"  # owned by the backend's graph write log; never opened here
INGEST_RECORD = "ingest-record.json"  # what the last finished ingest read; absent mid-ingest
_INGEST_HINT = "run `gnnstore ingest SOURCE --data-dir DIR` to (re)build it"


@dataclass
class Stores:
    """The stores of one data directory; ``close()`` (or ``with``) releases all three."""

    feature_store: RocksDBFeatureStore
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
    graph_store: BaseGraphStore | None = None,
    edge_files: bool = False,
) -> Stores:
    """Open ``data_dir``'s graph store, feature store and id map.

    A writer creates a missing or empty directory with empty stores.

    Args:
        data_dir: the data directory.
        read_only: open every store without the write lock.
        edge_files: a graph created here is kept as edge files (``EdgeFileGraphStore``), not
            in Kùzu; a directory that has a graph keeps the kind it has.
        graph_store: a graph store kept outside the directory (e.g. a ``Neo4jGraphStore``);
            then ``data_dir`` holds only the features and the id map (a ``graph.kuzu`` there
            is ignored). The returned ``Stores`` owns it: it is closed with the others, and
            when opening them fails.

    Raises:
        PreconditionError: the directory is missing (read-only), is not a directory, holds
            only some of the stores or a store that cannot be opened (corrupt, or locked by
            another writer); the message names the part and how to rebuild it.
    """
    root = Path(data_dir)
    parts = (FEATURES, IDMAP) if graph_store is not None else (GRAPH, FEATURES, IDMAP)
    owned: list = [] if graph_store is None else [graph_store]
    try:
        _check_parts(root, parts, read_only)
        try:
            features = RocksDBFeatureStore(root / FEATURES, read_only=read_only)
            owned.append(features)
            graph = graph_store
            if graph is None:
                if edge_files and not (root / GRAPH).exists() or _has_edge_files(root):
                    graph = EdgeFileGraphStore(root / GRAPH_EDGES, read_only=read_only)
                else:
                    graph = KuzuGraphStore(root / GRAPH, read_only=read_only)
                owned.append(graph)
            id_map = IdMap(root / IDMAP, read_only=read_only)
        except PreconditionError as exc:
            # No advice to re-ingest: the store may be healthy and only locked or unreadable here.
            raise PreconditionError(f"data directory {root}: {exc}") from exc
    except BaseException:
        for store in owned:
            store.close()
        raise
    return Stores(features, graph, id_map)


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
    parts = [GRAPH] if (root / GRAPH).is_file() or _has_edge_files(root) else []
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
    ignored = {SNAPSHOTS, FEATURE_TIER, INGEST_RECORD, *({GRAPH, GRAPH_EDGES} if GRAPH not in parts else ())}
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
