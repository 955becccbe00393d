"""Opens the three embedded stores of a data directory: graph.kuzu, features/ and idmap/."""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from gnnstore.proto.errors import PreconditionError
from gnnstore.stores.id_map import IdMap
from gnnstore.stores.kuzu_graph_store import KuzuGraphStore
from gnnstore.stores.rocksdb_feature_store import RocksDBFeatureStore

logger = logging.getLogger(__name__)

GRAPH = "graph.kuzu"
FEATURES = "features"
IDMAP = "idmap"
SNAPSHOTS = "snapshots"  # owned by the backend's topology snapshots; never opened here
_INGEST_HINT = "run `gnnstore ingest SOURCE --data-dir DIR` to (re)build it"


@dataclass
class Stores:
    """The stores of one data directory; ``close()`` (or ``with``) releases all three."""

    feature_store: RocksDBFeatureStore
    graph_store: KuzuGraphStore
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


def open_stores(data_dir: str | os.PathLike, *, read_only: bool = False) -> Stores:
    """Open ``data_dir``'s graph store, feature store and id map.

    A writer creates a missing or empty directory with empty stores.

    Raises:
        PreconditionError: the directory is missing (read-only), is not a directory, holds
            only some of the stores or a store that cannot be opened (corrupt, or locked by
            another writer); the message names the part and how to rebuild it.
    """
    root = Path(data_dir)
    if root.exists() and not root.is_dir():
        raise PreconditionError(f"data directory {root} is a file, not a directory")
    present = _present_parts(root)
    if not present and not read_only and (not root.exists() or _is_empty(root)):
        root.mkdir(parents=True, exist_ok=True)
        logger.info("creating data directory %s", root)
    elif len(present) < 3:
        missing = sorted({GRAPH, FEATURES, IDMAP} - set(present))
        state = "does not exist" if not root.exists() else f"is missing {', '.join(missing)}"
        raise PreconditionError(f"data directory {root} {state}; {_INGEST_HINT}")
    opened: list = []
    try:
        opened.append(RocksDBFeatureStore(root / FEATURES, read_only=read_only))
        opened.append(KuzuGraphStore(root / GRAPH, read_only=read_only))
        opened.append(IdMap(root / IDMAP, read_only=read_only))
    except PreconditionError as exc:
        for store in opened:
            store.close()
        raise PreconditionError(f"data directory {root}: {exc}; {_INGEST_HINT}") from exc
    return Stores(*opened)


def _present_parts(root: Path) -> list[str]:
    """The stores that exist; a RocksDB folder without its CURRENT file counts as corrupt."""
    parts = [GRAPH] if (root / GRAPH).is_file() else []
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


def _is_empty(root: Path) -> bool:
    return all(entry.name == SNAPSHOTS for entry in root.iterdir())
