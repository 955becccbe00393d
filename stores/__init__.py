"""PyG stores over RocksDB, an embedded graph database (LadybugDB or Kùzu), edge files and the
id map; Neo4jGraphStore lives in ``gnnstore.stores.neo4j_graph_store`` ([neo4j] extra)."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gnnstore.common.attr_schema import AttrSchema
    from gnnstore.stores.base import BaseGraphStore
    from gnnstore.stores.data_dir import Stores, open_stores
    from gnnstore.stores.edge_file_graph_store import EdgeFileGraphStore
    from gnnstore.stores.embedded_graph_store import EmbeddedGraphStore
    from gnnstore.stores.id_map import IdMap
    from gnnstore.stores.rocksdb_feature_store import RocksDBFeatureStore

# Imported on first use, so that `gnnstore <command> --help` loads neither torch nor PyG.
_EXPORTS = {
    "AttrSchema": "gnnstore.common.attr_schema",
    "BaseGraphStore": "gnnstore.stores.base",
    "EdgeFileGraphStore": "gnnstore.stores.edge_file_graph_store",
    "EmbeddedGraphStore": "gnnstore.stores.embedded_graph_store",
    "IdMap": "gnnstore.stores.id_map",
    "RocksDBFeatureStore": "gnnstore.stores.rocksdb_feature_store",
    "Stores": "gnnstore.stores.data_dir",
    "open_stores": "gnnstore.stores.data_dir",
}

__all__ = [
    "AttrSchema",
    "BaseGraphStore",
    "EdgeFileGraphStore",
    "EmbeddedGraphStore",
    "IdMap",
    "RocksDBFeatureStore",
    "Stores",
    "open_stores",
]


def __getattr__(name: str) -> object:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
