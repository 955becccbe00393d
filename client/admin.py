"""What a server holds and how it is doing: ``server_info``, ``server_stats``, ``client_stats``,
``wait_until_serving``."""
from __future__ import annotations

import time
from dataclasses import dataclass

from torch_geometric.typing import EdgeType, NodeType

from gnnstore.client.channel import Connection, as_connection
from gnnstore.client.remote_feature_store import AttrSchema
from gnnstore.common.errors import ServerUnavailableError
from gnnstore.proto import admin_pb2
from gnnstore.proto.codec import attr_schema_from_proto, edge_type_from_proto, node_type_from_proto


@dataclass(frozen=True)
class ServerInfo:
    """A server's graph: node and edge counts per type (of its newest graph version), feature
    schema, snapshot id and newest graph version (0 until a graph write)."""

    server_version: str
    graph_backend: str
    num_nodes: dict[NodeType | None, int]
    num_edges: dict[EdgeType | None, int]
    features: list[AttrSchema]
    snapshot_id: str
    max_message_bytes: int
    graph_version: int = 0


@dataclass(frozen=True)
class MethodStats:
    """One RPC method's counters since the server started."""

    requests: int
    errors: int
    latency_p50_ms: float
    latency_p99_ms: float
    latency_mean_ms: float
    bytes_received: int
    bytes_sent: int
    bytes_shared: int
    retries: int


@dataclass(frozen=True)
class ClientStats:
    """One client identity's counters since the server started (its token's name and role)."""

    role: str
    requests: int
    errors: int
    bytes_received: int
    bytes_sent: int
    retries: int


def server_info(connection: Connection | str) -> ServerInfo:
    """The AdminService's Info, decoded to PyG's type conventions."""
    connection = as_connection(connection)
    reply = connection.call("AdminService", "Info", admin_pb2.InfoRequest())
    return ServerInfo(
        server_version=reply.server_version,
        graph_backend=reply.graph_backend,
        num_nodes={node_type_from_proto(n.node_type): n.num_nodes for n in reply.node_types},
        num_edges={edge_type_from_proto(e.edge_type): e.num_edges for e in reply.edge_types},
        features=[attr_schema_from_proto(f) for f in reply.features],
        snapshot_id=reply.snapshot_id,
        max_message_bytes=reply.max_message_bytes,
        graph_version=reply.graph_version,
    )


def server_stats(connection: Connection | str) -> dict[str, MethodStats]:
    """The AdminService's Stats: method name (``/gnnstore.v1.Service/Method``) → counters."""
    connection = as_connection(connection)
    reply = connection.call("AdminService", "Stats", admin_pb2.StatsRequest())
    return {
        m.method: MethodStats(
            m.requests,
            m.errors,
            m.latency_p50_ms,
            m.latency_p99_ms,
            m.latency_mean_ms,
            m.bytes_received,
            m.bytes_sent,
            m.bytes_shared,
            m.retries,
        )
        for m in reply.methods
    }


def client_stats(connection: Connection | str) -> dict[str, ClientStats]:
    """The AdminService's Stats per client: token name (``anonymous`` without tokens) → counters.

    Needs an admin token on a server with tokens.
    """
    connection = as_connection(connection)
    reply = connection.call("AdminService", "Stats", admin_pb2.StatsRequest())
    return {
        c.client: ClientStats(c.role, c.requests, c.errors, c.bytes_received, c.bytes_sent, c.retries)
        for c in reply.clients
    }


def wait_until_serving(connection: Connection | str, timeout: float = 60.0) -> None:
    """Poll the health service until the server answers SERVING.

    Raises:
        ServerUnavailableError: not serving within ``timeout`` seconds.
    """
    connection = as_connection(connection)
    deadline = time.monotonic() + timeout
    while not connection.is_serving(timeout=min(2.0, max(timeout, 0.1))):
        if time.monotonic() > deadline:
            raise ServerUnavailableError(
                f"gnnstore server at {connection.address} was not serving within {timeout:g} s"
            )
        time.sleep(0.1)
