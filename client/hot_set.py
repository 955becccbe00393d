"""Fill a feature cache's static tier with the server's hot nodes: those of highest out-degree.

``warm_hot_set(fs)`` asks the server (GraphService.HotNodes) for the top nodes of each cached
node type, as many as the static tier holds, reads their rows in bulk MultiGets past the cache,
and warms the cache with them, noting the ranking's snapshot. The exchange then names the hot set
in every sampling request by its length and that snapshot, so the server leaves those rows out.
"""
from __future__ import annotations

import logging

import torch
from torch import Tensor
from torch_geometric.data import TensorAttr
from torch_geometric.typing import NodeType

from gnnstore.client.channel import Connection
from gnnstore.client.feature_cache import FeatureCache
from gnnstore.client.remote_feature_store import RemoteFeatureStore
from gnnstore.common.errors import InvalidRequestError, PreconditionError
from gnnstore.common.graph_types import is_edge_group
from gnnstore.proto import graph_pb2
from gnnstore.proto.codec import node_type_to_proto
from gnnstore.proto.feature_request import HotPrefix
from gnnstore.proto.tensor_codec import ids_from_proto

logger = logging.getLogger(__name__)

WARM_CHUNK_BYTES = 16 << 20
"""Feature bytes a warm-up MultiGet asks for at most: the hot set streams in replies this small,
so neither side holds more than a few of them at once however big the hot set is (a server
under a tight memory limit builds each reply two or three times over)."""


def ranks_nodes(connection: Connection, node_type: NodeType | None) -> bool:
    """Whether the server ranks the nodes of ``node_type`` by out-degree (one HotNodes call for
    one node); a server sampling live from Neo4j has no ranking."""
    request = graph_pb2.HotNodesRequest(node_type=node_type_to_proto(node_type), k=1)
    try:
        connection.call("GraphService", "HotNodes", request)
    except PreconditionError:
        return False
    return True


def warm_hot_set(fs: RemoteFeatureStore) -> dict[NodeType | None, HotPrefix]:
    """Warm ``fs.cache``'s static tier from the server's out-degree ranking; return what it holds
    (the cache keeps it too: ``hot_prefix``).

    A server without a topology snapshot (live Neo4j sampling) has no ranking: the static tier
    stays empty, a warning is logged, and the dynamic tier still caches.

    Raises:
        InvalidRequestError: ``fs`` has no :class:`FeatureCache`.
    """
    cache = fs.cache
    if not isinstance(cache, FeatureCache):
        raise InvalidRequestError(f"warm_hot_set needs fs.cache to be a FeatureCache, got {cache!r}")
    hot: dict[NodeType | None, HotPrefix] = {}
    for group in cache.groups():
        k = cache.static_capacity(group)
        if not k or is_edge_group(group):  # the ranking is of nodes
            continue
        request = graph_pb2.HotNodesRequest(node_type=node_type_to_proto(group), k=k)
        try:
            reply = fs.connection.call("GraphService", "HotNodes", request)
        except PreconditionError as exc:
            logger.warning("no hot set for node type %r: %s", group, exc)
            continue
        ids = ids_from_proto(reply.ids, "hot node ids")
        names = cache.attr_names(group)
        cache.warm(group, ids, dict(zip(names, _rows(fs, group, names, ids))), ranking=reply.snapshot_id)
        prefix = cache.hot_prefix(group)
        if prefix is not None:
            hot[group] = prefix
            logger.info("hot set of node type %r: %d nodes (ranking of snapshot %s)", group, prefix.count, reply.snapshot_id)
    return hot


def _rows(fs: RemoteFeatureStore, group: NodeType | None, names: list[str], ids: Tensor) -> list[Tensor]:
    """Rows of ``names`` for ``ids``, in MultiGets of at most ``WARM_CHUNK_BYTES`` (or half the
    message limit, if lower)."""
    row_bytes = sum(s.row_bytes for s in fs.schema() if s.group_name == group and s.attr_name in names)
    chunk = min(WARM_CHUNK_BYTES, fs.connection.max_message_bytes // 2)
    per_call = max(1, chunk // max(row_bytes, 1))
    parts = [
        fs.fetch_rows([TensorAttr(group, name, chunk) for name in names])
        for chunk in ids.split(per_call)
    ]
    return [torch.cat([part[i] for part in parts]) for i in range(len(names))]
