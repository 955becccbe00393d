"""The stores over RocksDB, an embedded graph database (LadybugDB or Kùzu), edge files and the id
map, in numpy (what the server runs on); ``RocksDBFeatureStore`` and ``PyGGraphStore`` put PyG's
APIs over them (the ``train`` extra). Neo4jGraphStore lives in
``gnnstore.stores.neo4j_graph_store`` ([neo4j] extra)."""
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
    from gnnstore.stores.pyg_graph_store import PyGGraphStore
    from gnnstore.stores.rocksdb_feature_store import RocksDBFeatureStore
    from gnnstore.stores.rocksdb_rows import RocksDBRows

# Imported on first use: `gnnstore <command> --help` and the server load neither torch nor PyG.
_EXPORTS = {
    "AttrSchema": "gnnstore.common.attr_schema",
    "BaseGraphStore": "gnnstore.stores.base",
    "EdgeFileGraphStore": "gnnstore.stores.edge_file_graph_store",
    "EmbeddedGraphStore": "gnnstore.stores.embedded_graph_store",
    "IdMap": "gnnstore.stores.id_map",
    "PyGGraphStore": "gnnstore.stores.pyg_graph_store",
    "RocksDBFeatureStore": "gnnstore.stores.rocksdb_feature_store",
    "RocksDBRows": "gnnstore.stores.rocksdb_rows",
    "Stores": "gnnstore.stores.data_dir",
    "open_stores": "gnnstore.stores.data_dir",
}

__all__ = [
    "AttrSchema",
    "BaseGraphStore",
    "EdgeFileGraphStore",
    "EmbeddedGraphStore",
    "IdMap",
    "PyGGraphStore",
    "RocksDBFeatureStore",
    "RocksDBRows",
    "Stores",
    "open_stores",
]


def __getattr__(name: str) -> object:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
