"""A sampling request decoded once: what to sample, on which graph version, where the reply's
arrays go and which feature rows ride with it.

Both sampling RPCs become a ``SampleJob`` before any work; the runner samples it, the row
gatherer reads its rows and the servicer writes its reply, none of them touching the request
again.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from gnnstore.backend.service.reply_segments import ReplySegments
from gnnstore.backend.service.served_graph import SampledVersion
from gnnstore.common.sample import Links, MakeIds, Negatives, SeedNodes
from gnnstore.common.temporal import TemporalOptions
from gnnstore.proto import graph_pb2
from gnnstore.proto.feature_request import RowRequest, feature_request_from_proto
from gnnstore.proto.reply_payload import PayloadWriter
from gnnstore.proto.reply_segment import ArrayWriter, SegmentRefused
from gnnstore.proto.sampler_input import edge_input_from_proto, node_input_from_proto
from gnnstore.proto.sampling_options import (
    NeighborCounts,
    num_neighbors_from_proto,
    temporal_from_proto,
    weight_attr_from_proto,
)

logger = logging.getLogger(__name__)

SampleRequest = graph_pb2.SampleFromNodesRequest | graph_pb2.SampleFromEdgesRequest


@dataclass(frozen=True)
class SampleJob:
    """One sampling request.

    Attributes:
        method: the RPC's name (``SampleFromNodes`` or ``SampleFromEdges``).
        peer: the calling client.
        inputs: seed nodes, or seed links.
        negatives: negatives to draw for seed links (``None``: none).
        num_neighbors, replace, disjoint, seed, temporal, weight_attr: PyG's sampling options.
        graph: the graph version sampled.
        writer: where the reply's arrays go: the client's reply segment, a payload after the
            message, or ``None`` (in the message).
        refused: why the client's reply segment was refused, if it was.
        rows: the feature rows to send with the sample.
        accept_data_port: whether a large payload may wait on the data port.
    """

    method: str
    peer: str
    inputs: SeedNodes | Links
    negatives: Negatives | None
    num_neighbors: NeighborCounts
    replace: bool
    disjoint: bool
    seed: int | None
    temporal: TemporalOptions | None
    weight_attr: str | None
    graph: SampledVersion
    writer: ArrayWriter | None
    refused: str
    rows: RowRequest
    accept_data_port: bool

    @property
    def make_ids(self) -> MakeIds | None:
        """Makes the sample's id arrays where the reply's arrays go, when they go apart."""
        return None if self.writer is None else self.writer.ids


def decode_sample_job(
    request: SampleRequest,
    peer: str,
    version_of: Callable[[int | None], SampledVersion],
    segments: ReplySegments,
) -> SampleJob:
    """``request`` as a job for ``peer``; ``version_of`` finds the graph version it names.

    Raises:
        InvalidRequestError: malformed seeds, options or feature request.
        NotFoundError: a graph version that does not exist.
    """
    options = request.options
    if isinstance(request, graph_pb2.SampleFromEdgesRequest):
        method, (inputs, negatives) = "SampleFromEdges", edge_input_from_proto(request)
    else:
        method, inputs, negatives = "SampleFromNodes", node_input_from_proto(request), None
    decoded = dict(
        method=method,
        peer=peer,
        inputs=inputs,
        negatives=negatives,
        num_neighbors=num_neighbors_from_proto(options),
        replace=options.replace,
        disjoint=options.disjoint,
        seed=options.seed if options.HasField("seed") else None,
        temporal=temporal_from_proto(options),
        weight_attr=weight_attr_from_proto(options),
        graph=version_of(options.graph_version if options.HasField("graph_version") else None),
        rows=feature_request_from_proto(request.features),
        accept_data_port=request.accept_data_port,
    )
    writer, refused = _reply_writer(request, segments)  # last: the request is valid by now
    return SampleJob(**decoded, writer=writer, refused=refused)


def _reply_writer(request: SampleRequest, segments: ReplySegments) -> tuple[ArrayWriter | None, str]:
    """Where the reply's arrays go, and why the request's reply segment was refused if it was:
    into that segment (the sampler writes its id tensors there at once), else into a payload
    after the message if the request accepts one, else into the message."""
    refused = ""
    if request.HasField("reply_segment"):
        try:
            return segments.writer(request.reply_segment), ""
        except SegmentRefused as exc:
            logger.info("reply segment refused: %s", exc)
            refused = str(exc)
    return (PayloadWriter() if request.accept_payload else None), refused
