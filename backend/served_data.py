"""Everything a server serves from one data directory: stores, topology snapshot, read tier.

A missing or unreadable data directory stops the server here with a message that says what to
do, before any port is bound.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from gnnstore.backend.config import ServerConfig
from gnnstore.backend.feature_tier import FeatureTier
from gnnstore.backend.snapshot_builder import build_snapshot
from gnnstore.backend.tiered_feature_store import TieredFeatureStore
from gnnstore.backend.topology import TopologySnapshot
from gnnstore.proto.errors import GnnStoreError, PreconditionError
from gnnstore.stores.data_dir import open_stores

logger = logging.getLogger(__name__)

SNAPSHOTS_DIR = "snapshots"
FEATURE_TIER_DIR = "feature_tier"
REQUIRED = ("graph.kuzu", "features", "idmap")


@dataclass
class ServedData:
    """The open stores, the snapshot the engine samples and the feature reads' front door.

    Attributes:
        stores: what ``open_stores`` returned (feature store, graph store, id map).
        snapshot: the topology snapshot of the graph store's current version.
        feature_reader: reads from the memory-mapped tier, writes through to RocksDB.
    """

    stores: Any
    snapshot: TopologySnapshot
    feature_reader: TieredFeatureStore

    @property
    def feature_store(self) -> Any:
        """The durable feature store (RocksDB)."""
        return self.stores.feature_store

    @property
    def graph_store(self) -> Any:
        """The graph store the snapshot was built from."""
        return self.stores.graph_store

    @property
    def id_map(self) -> Any:
        """The persistent key <-> id map."""
        return self.stores.id_map

    def close(self) -> None:
        """Close the stores."""
        self.stores.close()


def open_served_data(config: ServerConfig) -> ServedData:
    """Open the stores of ``config.data_dir``, then build or reuse the snapshot and the tier.

    Raises:
        PreconditionError: the directory is missing, incomplete or unreadable; the message
            says to run ``gnnstore ingest``.
    """
    data_dir = config.data_dir
    hint = f"create it with `gnnstore ingest <source> --data-dir {data_dir}`"
    if not data_dir.is_dir():
        raise PreconditionError(f"data directory {data_dir} does not exist; {hint}")
    missing = [name for name in REQUIRED if not (data_dir / name).exists()]
    if missing:
        raise PreconditionError(
            f"data directory {data_dir} lacks {', '.join(missing)}: it was not written by "
            f"`gnnstore ingest` or the ingest did not finish; {hint}"
        )
    try:
        stores = open_stores(data_dir, read_only=config.read_only)
    except GnnStoreError:
        raise  # the stores' own message names the part and the fix
    except Exception as exc:  # a corrupt database raises the database's own error type
        raise PreconditionError(
            f"data directory {data_dir} cannot be opened ({type(exc).__name__}: {exc}); it may be "
            f"corrupt: {hint} into a fresh directory"
        ) from exc
    try:
        snapshot = build_snapshot(
            stores.graph_store, data_dir / SNAPSHOTS_DIR, num_nodes=_node_counts(stores)
        )
        tier = FeatureTier(data_dir / FEATURE_TIER_DIR)
        tier.refresh(stores.feature_store)
    except BaseException:
        stores.close()
        raise
    return ServedData(stores, snapshot, TieredFeatureStore(stores.feature_store, tier))


def _node_counts(stores: Any) -> dict[Any, int]:
    """Node count per node type from the id map and the feature rows (types may lack edges)."""
    counts = {nt: stores.id_map.num_nodes(nt) for nt in stores.id_map.node_types()}
    for schema in stores.feature_store.tensor_schema():
        if schema.group_name is None or isinstance(schema.group_name, str):
            counts[schema.group_name] = max(counts.get(schema.group_name, 0), schema.shape[0])
    return counts
