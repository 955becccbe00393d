"""PyG's sampler inputs to their wire form, and sampler outputs from it: the client's half of
``proto/sampler_input.py`` and ``proto/sampler_output.py`` (whose docstring says which ids are
global and which local)."""
from __future__ import annotations

from torch import Tensor
from torch_geometric.sampler import (
    EdgeSamplerInput,
    HeteroSamplerOutput,
    NegativeSampling,
    NodeSamplerInput,
    SamplerOutput,
)

from gnnstore.common.errors import InvalidRequestError
from gnnstore.proto import graph_pb2
from gnnstore.proto.codec import (
    edge_type_from_proto,
    edge_type_to_proto,
    ids_to_proto,
    node_type_from_proto,
    node_type_to_proto,
)
from gnnstore.proto.tensor_codec import ids_from_proto, optional_tensor_from_proto, optional_tensor_to_proto


def node_input_to_proto(inputs: NodeSamplerInput) -> graph_pb2.SampleFromNodesRequest:
    """Encode a NodeSamplerInput (global seed ids, seed times if any)."""
    request = graph_pb2.SampleFromNodesRequest(
        input_type=node_type_to_proto(inputs.input_type), node=ids_to_proto(inputs.node)
    )
    _put_input_id(request, inputs.input_id)
    _put_time(request, inputs.time)
    return request


def _put_time(
    request: graph_pb2.SampleFromNodesRequest | graph_pb2.SampleFromEdgesRequest, time: Tensor | None
) -> None:
    """Set the request's seed or link times (integers, as PyG's times are) if there are any.

    Raises:
        InvalidRequestError: floating-point times.
    """
    if time is not None:
        if time.dtype.is_floating_point:
            raise InvalidRequestError(f"seed and link times must be integers, got {time.dtype}")
        request.time.CopyFrom(ids_to_proto(time))


def _put_input_id(
    request: graph_pb2.SampleFromNodesRequest | graph_pb2.SampleFromEdgesRequest, input_id: Tensor | None
) -> None:
    """Set the request's ``input_id`` unless there is none (PyG allows ``None``)."""
    if input_id is not None:
        request.input_id.CopyFrom(ids_to_proto(input_id))


def edge_input_to_proto(
    inputs: EdgeSamplerInput, neg_sampling: NegativeSampling | None
) -> graph_pb2.SampleFromEdgesRequest:
    """Encode an EdgeSamplerInput (global endpoint ids, link times if any) and its negative sampling.

    Raises:
        InvalidRequestError: the negative sampling has weights, or times are not integers.
    """
    request = graph_pb2.SampleFromEdgesRequest(
        input_type=edge_type_to_proto(inputs.input_type),
        row=ids_to_proto(inputs.row),
        col=ids_to_proto(inputs.col),
        label=optional_tensor_to_proto(inputs.label),
    )
    _put_input_id(request, inputs.input_id)
    _put_time(request, inputs.time)
    if neg_sampling is not None:
        if neg_sampling.src_weight is not None or neg_sampling.dst_weight is not None:
            raise InvalidRequestError("weighted negative sampling is not supported yet")
        request.neg_sampling.mode = neg_sampling.mode.value
        request.neg_sampling.amount = float(neg_sampling.amount)
    return request


def output_from_proto(
    response: graph_pb2.SampleResponse, shared: memoryview | None = None
) -> SamplerOutput | HeteroSamplerOutput:
    """Decode a SampleResponse into the SamplerOutput / HeteroSamplerOutput PyG's loaders read
    (``shared``: the bytes of the reply segment the request offered; arrays there decode as
    views of it)."""
    node = {
        node_type_from_proto(n.node_type): ids_from_proto(n.ids, "sampled node ids", shared)
        for n in response.node
    }
    row, col, edge = {}, {}, {}
    for entry in response.edges:
        edge_type = edge_type_from_proto(entry.edge_type)
        row[edge_type] = ids_from_proto(entry.row, "sampled row", shared)
        col[edge_type] = ids_from_proto(entry.col, "sampled col", shared)
        if entry.HasField("edge"):
            edge[edge_type] = ids_from_proto(entry.edge, "sampled edge ids", shared)
    batch = {
        node_type_from_proto(b.node_type): ids_from_proto(b.ids, "batch", shared)
        for b in response.batch
    }
    node_counts = {
        node_type_from_proto(c.node_type): list(c.counts) for c in response.num_sampled_nodes
    }
    edge_counts = {
        edge_type_from_proto(c.edge_type): list(c.counts) for c in response.num_sampled_edges
    }
    metadata = tuple(optional_tensor_from_proto(m) for m in response.metadata)
    if response.hetero:
        return HeteroSamplerOutput(
            node=node,
            row=row,
            col=col,
            edge=edge or None,
            batch=batch or None,
            num_sampled_nodes=node_counts or None,
            num_sampled_edges=edge_counts or None,
            metadata=metadata,
        )
    return SamplerOutput(
        node=node[None],
        row=row[None],
        col=col[None],
        edge=edge.get(None),
        batch=batch.get(None),
        num_sampled_nodes=node_counts.get(None),
        num_sampled_edges=edge_counts.get(None),
        metadata=metadata,
    )
