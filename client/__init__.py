"""The trainer SDK: PyG stores and a sampler whose work happens on a gnnstore server.

``connect("host:port")`` gives ``(RemoteFeatureStore, RemoteGraphStore)``; pass them as PyG's
``data`` and build a ``RemoteNeighborSampler(fs, num_neighbors, feature_store=fs)``. In every
batch ``n_id`` holds **global** node ids and every index (``edge_index``, ``edge_label_index``,
``src_index``, ``dst_pos_index``, ``dst_neg_index``) is **local**: ``n_id[dst_neg_index]`` are
the negatives' global ids.

``connect(..., cache_bytes=N)`` keeps feature rows on the trainer (``fs.cache``, a
``FeatureCache`` warmed with the server's hot nodes) so only misses travel, and
``Prefetcher(loader, depth=2)`` makes batches ahead while the trainer computes, measuring the
trainer's stall per epoch. ``transform=EdgeFeatures(fs)`` adds the stored edge attributes of each
batch's ``e_id`` (``batch.edge_attr``), brought with the sample (``EdgeFeatures(fs,
cache_bytes=N)`` caches them too). ``GraphWriter(fs)`` adds nodes
and adds or removes edges while trainers sample: each write is a new graph version, which a
sampler reads from its next epoch (``RemoteNeighborSampler.switch_version``).
"""
from gnnstore.client.admin import (
    ClientStats,
    MethodStats,
    ServerInfo,
    client_stats,
    server_info,
    server_stats,
    wait_until_serving,
)
from gnnstore.client.channel import Connection
from gnnstore.client.connect import connect
from gnnstore.client.edge_features import EdgeFeatures
from gnnstore.client.feature_cache import POLICY_NAMES, CacheStats, FeatureCache
from gnnstore.client.feature_exchange import FeatureExchange
from gnnstore.client.graph_writer import GraphWrite, GraphWriter
from gnnstore.client.hot_set import warm_hot_set
from gnnstore.client.prefetch import EpochTiming, Prefetcher
from gnnstore.client.ranks import split_for_rank
from gnnstore.client.remote_feature_store import AttrSchema, RemoteFeatureStore
from gnnstore.client.remote_graph_store import RemoteGraphStore
from gnnstore.client.remote_id_map import RemoteIdMap
from gnnstore.client.remote_sampler import RemoteNeighborSampler
from gnnstore.client.training_report import EpochRecord, TrainingReport

__all__ = [
    "POLICY_NAMES",
    "AttrSchema",
    "CacheStats",
    "ClientStats",
    "Connection",
    "EdgeFeatures",
    "EpochRecord",
    "EpochTiming",
    "FeatureCache",
    "FeatureExchange",
    "GraphWrite",
    "GraphWriter",
    "MethodStats",
    "Prefetcher",
    "RemoteFeatureStore",
    "RemoteGraphStore",
    "RemoteIdMap",
    "RemoteNeighborSampler",
    "TrainingReport",
    "ServerInfo",
    "client_stats",
    "connect",
    "server_info",
    "server_stats",
    "split_for_rank",
    "wait_until_serving",
    "warm_hot_set",
]
