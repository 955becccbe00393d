"""PyG stores over RocksDB, an embedded graph database (LadybugDB or Kùzu), edge files and the
id map; Neo4jGraphStore lives in ``gnnstore.stores.neo4j_graph_store`` ([neo4j] extra)."""
from gnnstore.common.attr_schema import AttrSchema
from gnnstore.stores.base import BaseGraphStore
from gnnstore.stores.data_dir import Stores, open_stores
from gnnstore.stores.edge_file_graph_store import EdgeFileGraphStore
from gnnstore.stores.embedded_graph_store import EmbeddedGraphStore
from gnnstore.stores.id_map import IdMap
from gnnstore.stores.rocksdb_feature_store import RocksDBFeatureStore

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
