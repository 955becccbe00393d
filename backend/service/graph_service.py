"""GraphService: edge attributes, the edge list in chunks, and sampling with features in one reply."""
from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import grpc
import numpy as np

from gnnstore.backend.service.data_port import DataPort
from gnnstore.backend.service.error_translation import translate_errors
from gnnstore.backend.service.fair_scheduler import SamplingPools
from gnnstore.backend.service.metrics import SERVICE_PREFIX, Metrics
from gnnstore.backend.service.reply_segments import ReplySegments
from gnnstore.backend.service.row_gathering import RowGatherer
from gnnstore.backend.service.sample_job import SampleJob, SampleRequest, decode_sample_job
from gnnstore.backend.service.sampling_runner import SamplingRunner
from gnnstore.backend.service.served_graph import UNKNOWN_EDGE_COUNT, GraphSummary
from gnnstore.backend.service.write_applier import WriteApplier
from gnnstore.backend.versions.graph_versions import GraphVersions, GraphView
from gnnstore.common.errors import InvalidRequestError, NotFoundError, PreconditionError
from gnnstore.common.graph_types import describe
from gnnstore.common.sample import Sample
from gnnstore.proto import graph_pb2, graph_pb2_grpc
from gnnstore.proto.codec import array_to_proto, edge_type_from_proto, edge_type_to_proto, node_type_from_proto
from gnnstore.proto.limits import DEFAULT_CHUNK_BYTES
from gnnstore.proto.node_rows import node_rows_to_proto
from gnnstore.proto.reply_payload import PayloadWriter, ReplyWithPayload
from gnnstore.proto.reply_segment import ReplyWriter
from gnnstore.proto.sampler_output import output_to_proto
from gnnstore.stores.base import BaseGraphStore
from gnnstore.stores.edge_layout import from_coo

logger = logging.getLogger(__name__)

_LAYOUTS = ("coo", "csr", "csc")


class GraphServicer(graph_pb2_grpc.GraphServiceServicer):
    """GraphService over a graph store (edge lists) and a sampling runner (mini-batches).

    Args:
        graph_store: the graph store; its calls are serialised (database handles are not
            shared between threads).
        runner: samples.
        rows: gathers the feature rows that ride with a sample.
        sampling: the threads a sampling call's work runs on, clients in turn (a client is a
            connection), while the call's own thread waits (see ``ServerConfig.sampling_threads``
            for why so few); bulk work on threads of its own at a lower priority.
        summary: node and edge counts of the served graph.
        metrics: where the bytes replies write into clients' reply segments are counted.
        segments: the clients' reply segments, mapped for reuse.
        data_port: where large payloads wait for their client (``None``: none travels apart).
        writer: applies graph writes (``None``: this server takes none, e.g. live Neo4j sampling).
        versions: the graph versions writes made, whose edges ``GetEdgeIndex`` and
            ``ListEdgeAttrs`` report (``None``: only the graph store's, live sampling).
    """

    def __init__(
        self,
        graph_store: BaseGraphStore,
        runner: SamplingRunner,
        rows: RowGatherer,
        sampling: SamplingPools,
        summary: GraphSummary,
        metrics: Metrics | None = None,
        segments: ReplySegments | None = None,
        data_port: DataPort | None = None,
        writer: WriteApplier | None = None,
        versions: GraphVersions | None = None,
    ) -> None:
        self._graph = graph_store
        self._versions = versions
        self._graph_lock = threading.Lock()
        self._runner = runner
        self._rows = rows
        self._sampling = sampling
        self._summary = summary
        self._segments = ReplySegments() if segments is None else segments
        self._metrics = metrics
        self._data_port = data_port
        self._writer = writer

    def ListEdgeAttrs(
        self, request: graph_pb2.ListEdgeAttrsRequest, context: grpc.ServicerContext
    ) -> graph_pb2.ListEdgeAttrsResponse:
        """Every stored (edge type, layout) with its size and edge count in a graph version
        (the newest unless the request names one)."""
        with translate_errors(context, "GraphService.ListEdgeAttrs"):
            with self._graph_lock:
                attrs = self._graph.edge_attrs()
            written = self._written_version(request.graph_version if request.HasField("graph_version") else None)
            reply = graph_pb2.ListEdgeAttrsResponse(graph_version=0 if written is None else written.graph_version)
            for attr in attrs:
                num_src, num_dst = attr.size
                num_edges = self._summary.num_edges.get(attr.edge_type, UNKNOWN_EDGE_COUNT)
                topology = None if written is None else written.snapshot.edges.get(attr.edge_type)
                if topology is not None:
                    num_src, num_dst, num_edges = topology.num_src, topology.num_dst, topology.num_edges
                reply.edge_attrs.add(
                    edge_type=edge_type_to_proto(attr.edge_type),
                    layout=attr.layout,
                    is_sorted=attr.is_sorted,
                    num_src_nodes=num_src,
                    num_dst_nodes=num_dst,
                    num_edges=num_edges,
                )
            return reply

    def GetEdgeIndex(
        self, request: graph_pb2.GetEdgeIndexRequest, context: grpc.ServicerContext
    ) -> Iterator[graph_pb2.EdgeIndexChunk]:
        """The edge index of one edge type and layout in a graph version, in chunks (coo:
        edge-id order): a written version's from its topology, version 0's from the graph store."""
        with translate_errors(context, "GraphService.GetEdgeIndex"):
            edge_type = edge_type_from_proto(request.edge_type)
            layout = request.layout or "coo"
            self._check_layout(edge_type, layout)
            chunk = request.chunk_elements or DEFAULT_CHUNK_BYTES // 8
            if chunk < 1:
                raise InvalidRequestError(f"chunk_elements must be >= 1, got {chunk}")
            written = self._written_version(request.graph_version if request.HasField("graph_version") else None)
            topology = None if written is None else written.snapshot.edges.get(edge_type)
            if topology is not None:
                size = (topology.num_src, topology.num_dst)
                yield from _chunks(*from_coo(*topology.coo(), layout, size), chunk)
                return
            if layout == "coo":
                pieces = self._graph.iter_edge_index(edge_type, chunk)
                while True:
                    with self._graph_lock:  # held per chunk, never while the client reads
                        piece = next(pieces, None)
                    if piece is None:
                        return
                    row, col, _ = piece
                    yield graph_pb2.EdgeIndexChunk(first=array_to_proto(row), second=array_to_proto(col))
            with self._graph_lock:
                first, second = self._graph.edge_index(edge_type, layout)
            yield from _chunks(first, second, chunk)

    def SampleFromNodes(
        self, request: graph_pb2.SampleFromNodesRequest, context: grpc.ServicerContext
    ) -> graph_pb2.SampleResponse | ReplyWithPayload:
        """PyG's sample_from_nodes, with the sampled nodes' rows when asked."""
        with translate_errors(context, "GraphService.SampleFromNodes"):
            return self._sample(request, context)

    def SampleFromEdges(
        self, request: graph_pb2.SampleFromEdgesRequest, context: grpc.ServicerContext
    ) -> graph_pb2.SampleResponse | ReplyWithPayload:
        """PyG's sample_from_edges (negatives included), with the sampled nodes' rows when asked."""
        with translate_errors(context, "GraphService.SampleFromEdges"):
            return self._sample(request, context)

    def HotNodes(
        self, request: graph_pb2.HotNodesRequest, context: grpc.ServicerContext
    ) -> graph_pb2.HotNodesResponse:
        """The k nodes of a node type with the highest out-degree, and the ranking's version."""
        with translate_errors(context, "GraphService.HotNodes"):
            ranking = self._rows.ranking
            if ranking is None:
                raise PreconditionError(
                    "this server samples live from Neo4j and has no topology snapshot to rank "
                    "nodes by degree; serve with neo4j_sampling = 'snapshot' for a hot set"
                )
            ids = ranking.top(node_type_from_proto(request.node_type), request.k)
            return graph_pb2.HotNodesResponse(ids=array_to_proto(ids), snapshot_id=ranking.snapshot_id)

    def WriteGraph(
        self, request: graph_pb2.WriteGraphRequest, context: grpc.ServicerContext
    ) -> graph_pb2.WriteGraphResponse:
        """Add nodes and add or remove edges atomically and durably: the next graph version."""
        with translate_errors(context, "GraphService.WriteGraph"):
            if self._writer is None:
                raise PreconditionError(
                    "this server samples live from Neo4j and takes no graph writes; write to Neo4j itself"
                )
            return self._writer.write(request)

    def _sample(
        self, request: SampleRequest, context: grpc.ServicerContext
    ) -> graph_pb2.SampleResponse | ReplyWithPayload:
        """Decode and check (a refused request never waits for a thread), then sample, gather
        rows and reply on the sampling threads of the job's size, clients in turn."""
        peer, metadata = context.peer(), tuple(context.invocation_metadata() or ())
        job = decode_sample_job(request, peer, self._runner.sampled_version, self._segments)
        pool = self._sampling.for_work(self._runner.check(job))
        return pool.run(peer, lambda: self._reply(job, self._runner.sample(job), metadata))

    def _reply(
        self, job: SampleJob, out: Sample, metadata: tuple[tuple[str, str], ...]
    ) -> graph_pb2.SampleResponse | ReplyWithPayload:
        """The sample's reply to the job's client, its arrays in the job's reply segment when
        there is one, else in a payload after it or, for a large one, on the data port (read
        only while the call's token, in ``metadata``, stays valid)."""
        segment = job.writer
        reply = output_to_proto(out, segment)
        reply.graph_version = job.graph.graph_version
        rows = self._rows.gather(out, job.rows, job.graph, segment) if job.rows.attrs else []
        reply.features.extend(node_rows_to_proto(r, segment) for r in rows)
        if isinstance(segment, ReplyWriter):
            reply.reply_segment.CopyFrom(segment.use())
            if self._metrics is not None:
                method_name = f"{SERVICE_PREFIX}GraphService/{job.method}"
                # rows the client's cache fills were reserved in the segment, never written
                self._metrics.record_shared(method_name, segment.placed_bytes - sum(r.bytes_unwritten for r in rows))
        elif job.refused:
            reply.reply_segment.refused = job.refused
        if not isinstance(segment, PayloadWriter):
            return reply
        ticket = None
        if job.accept_data_port and self._data_port is not None:
            ticket = self._data_port.hold(segment, job.peer, metadata)
            reply.data_port_full = ticket is None and self._data_port.full_for(job.peer)
        if ticket is None:
            return ReplyWithPayload(reply, segment)
        reply.data_port_ticket.CopyFrom(ticket)
        return reply

    def _written_version(self, version: int | None) -> GraphView | None:
        """Graph version ``version`` (``None``: the newest) when writes made it, else ``None``:
        version 0 is the graph store's own edges.

        Raises:
            NotFoundError: no such version.
        """
        if self._versions is None:
            if version:
                raise NotFoundError(f"graph version {version} does not exist: this server takes no graph writes")
            return None
        view = self._versions.view(version)
        return view if view.graph_version else None

    def _check_layout(self, edge_type: object, layout: str) -> None:
        if layout not in _LAYOUTS:
            raise InvalidRequestError(f"layout must be one of {_LAYOUTS}, got {layout!r}")
        with self._graph_lock:
            stored = {(a.edge_type, a.layout) for a in self._graph.edge_attrs()}
        if (edge_type, layout) not in stored:
            raise NotFoundError(
                f"edge type {describe(edge_type)} is not stored in layout {layout!r} "
                f"(stored: {sorted(stored, key=str)})"
            )


def _chunks(first: np.ndarray, second: np.ndarray, size: int) -> Iterator[graph_pb2.EdgeIndexChunk]:
    """Both arrays of a layout cut into pieces of ``size`` elements (the shorter ends first)."""
    longest = max(first.size, second.size, 1)
    for start in range(0, longest, size):
        yield graph_pb2.EdgeIndexChunk(
            first=array_to_proto(first[start : start + size]),
            second=array_to_proto(second[start : start + size]),
        )
