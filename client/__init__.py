"""The trainer SDK: PyG stores and a sampler whose work happens on a gnnstore server.

``connect("host:port")`` gives ``(RemoteFeatureStore, RemoteGraphStore)``; pass them as PyG's
``data`` and build a ``RemoteNeighborSampler(fs, num_neighbors, feature_store=fs)``. In every
batch ``n_id`` holds **global** node ids and every index (``edge_index``, ``edge_label_index``,
``src_index``, ``dst_pos_index``, ``dst_neg_index``) is **local**: ``n_id[dst_neg_index]`` are
the negatives' global ids.
"""
from gnnstore.client.admin import MethodStats, ServerInfo, server_info, server_stats, wait_until_serving
from gnnstore.client.channel import Connection
from gnnstore.client.connect import connect
from gnnstore.client.feature_exchange import FeatureExchange
from gnnstore.client.ranks import split_for_rank
from gnnstore.client.remote_feature_store import AttrSchema, RemoteFeatureStore
from gnnstore.client.remote_graph_store import RemoteGraphStore
from gnnstore.client.remote_id_map import RemoteIdMap
from gnnstore.client.remote_sampler import RemoteNeighborSampler

__all__ = [
    "AttrSchema",
    "Connection",
    "FeatureExchange",
    "MethodStats",
    "RemoteFeatureStore",
    "RemoteGraphStore",
    "RemoteIdMap",
    "RemoteNeighborSampler",
    "ServerInfo",
    "connect",
    "server_info",
    "server_stats",
    "split_for_rank",
    "wait_until_serving",
]
