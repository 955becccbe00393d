"""AdminService: what the server holds (Info) and how it is doing (Stats)."""
from __future__ import annotations

from collections.abc import Callable, Sized

import grpc

from gnnstore import __version__
from gnnstore.backend.engine.topology import edge_ends
from gnnstore.backend.features.tiered_feature_store import TieredFeatureStore
from gnnstore.backend.service.error_translation import translate_errors
from gnnstore.backend.service.feature_service import schema_to_proto
from gnnstore.backend.service.metrics import Metrics
from gnnstore.backend.service.served_graph import GraphSummary
from gnnstore.proto import admin_pb2, admin_pb2_grpc
from gnnstore.proto.codec import edge_type_to_proto, node_type_to_proto


class AdminServicer(admin_pb2_grpc.AdminServiceServicer):
    """AdminService over the served graph's summary, feature store and metrics.

    Args:
        summary: the newest node and edge counts and the versions sampling reads.
        feature_store: the feature store (for its schema).
        metrics: the counters the metrics interceptor fills.
        graph_backend: what the graph is kept in (``ServedData.graph_backend``).
        max_message_bytes: the server's message limit, for clients to mirror.
        segments: the clients' reply segments the server maps (their count is in Stats).
    """

    def __init__(
        self,
        summary: Callable[[], GraphSummary],
        feature_store: TieredFeatureStore,
        metrics: Metrics,
        *,
        graph_backend: str,
        max_message_bytes: int,
        segments: Sized = (),
    ) -> None:
        self._summary = summary
        self._features = feature_store
        self._metrics = metrics
        self._graph_backend = graph_backend
        self._max_message_bytes = max_message_bytes
        self._segments = segments

    def Info(
        self, request: admin_pb2.InfoRequest, context: grpc.ServicerContext
    ) -> admin_pb2.InfoResponse:
        """Node types, edge types, counts, feature schema and the graph version sampling reads."""
        with translate_errors(context, "AdminService.Info"):
            summary = self._summary()
            reply = admin_pb2.InfoResponse(
                server_version=__version__,
                graph_backend=self._graph_backend,
                features=schema_to_proto(self._features),
                snapshot_id=summary.snapshot_id,
                max_message_bytes=self._max_message_bytes,
                graph_version=summary.graph_version,
            )
            for node_type, count in summary.num_nodes.items():
                reply.node_types.add(node_type=node_type_to_proto(node_type), num_nodes=count)
            for edge_type, count in summary.num_edges.items():
                src, dst = edge_ends(edge_type)
                reply.edge_types.add(
                    edge_type=edge_type_to_proto(edge_type),
                    num_edges=count,
                    num_src_nodes=summary.num_nodes.get(src, 0),
                    num_dst_nodes=summary.num_nodes.get(dst, 0),
                )
            return reply

    def Stats(
        self, request: admin_pb2.StatsRequest, context: grpc.ServicerContext
    ) -> admin_pb2.StatsResponse:
        """Request counts, latency percentiles and bytes per method, and counts per client, since start-up."""
        with translate_errors(context, "AdminService.Stats"):
            reply = admin_pb2.StatsResponse(
                uptime_s=self._metrics.uptime_s(), reply_segments_mapped=len(self._segments)
            )
            for method, record in sorted(self._metrics.snapshot().items()):
                reply.methods.add(
                    method=method,
                    requests=record.requests,
                    errors=record.errors,
                    latency_p50_ms=record.percentile_ms(50),
                    latency_p99_ms=record.percentile_ms(99),
                    latency_mean_ms=record.mean_ms(),
                    bytes_received=record.bytes_received,
                    bytes_sent=record.bytes_sent,
                    bytes_shared=record.bytes_shared,
                    retries=record.retries,
                )
            for client, counts in sorted(self._metrics.clients().items()):
                reply.clients.add(
                    client=client,
                    role=counts.role,
                    requests=counts.requests,
                    errors=counts.errors,
                    bytes_received=counts.bytes_received,
                    bytes_sent=counts.bytes_sent,
                    retries=counts.retries,
                )
            return reply
