"""PyG's APIs over a data directory's stores (which are numpy), for tests that check what
an ingest or a server stored as tensors."""
from __future__ import annotations

from gnnstore.stores.data_dir import Stores
from gnnstore.stores.pyg_graph_store import PyGGraphStore
from gnnstore.stores.rocksdb_feature_store import RocksDBFeatureStore


def features_of(stores: Stores) -> RocksDBFeatureStore:
    """PyG's FeatureStore over ``stores``' feature rows."""
    return RocksDBFeatureStore.over(stores.feature_store)


def graph_of(stores: Stores) -> PyGGraphStore:
    """PyG's GraphStore over ``stores``' graph."""
    return PyGGraphStore(stores.graph_store)
