"""PyG's sampler inputs (seed nodes, seed links, negative sampling) to and from their wire form."""
from __future__ import annotations

from torch import Tensor
from torch_geometric.sampler import (
    EdgeSamplerInput,
    NegativeSampling,
    NodeSamplerInput,
)

from gnnstore.common.errors import InvalidRequestError

from . import graph_pb2
from .codec import (
    edge_type_from_proto,
    edge_type_to_proto,
    ids_from_proto,
    ids_to_proto,
    node_type_from_proto,
    node_type_to_proto,
    optional_tensor_from_proto,
    optional_tensor_to_proto,
)


def node_input_to_proto(inputs: NodeSamplerInput) -> graph_pb2.SampleFromNodesRequest:
    """Encode a NodeSamplerInput (global seed ids, seed times if any)."""
    request = graph_pb2.SampleFromNodesRequest(
        input_type=node_type_to_proto(inputs.input_type), node=ids_to_proto(inputs.node)
    )
    _put_input_id(request, inputs.input_id)
    _put_time(request, inputs.time)
    return request


def node_input_from_proto(request: graph_pb2.SampleFromNodesRequest) -> NodeSamplerInput:
    """Decode the seeds of a SampleFromNodes request."""
    node = ids_from_proto(request.node, "seed node ids")
    input_id = _input_id_from_proto(request)
    if input_id is not None and input_id.numel() != node.numel():
        raise InvalidRequestError(
            f"input_id has {input_id.numel()} entries for {node.numel()} seed nodes"
        )
    time = _time_from_proto(request, node.numel(), "seed nodes")
    return NodeSamplerInput(
        input_id=input_id, node=node, time=time, input_type=node_type_from_proto(request.input_type)
    )


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


def _time_from_proto(
    request: graph_pb2.SampleFromNodesRequest | graph_pb2.SampleFromEdgesRequest, count: int, what: str
) -> Tensor | None:
    """The request's times, one per seed or link; ``None`` when unset."""
    if not request.HasField("time"):
        return None
    time = ids_from_proto(request.time, "times")
    if time.numel() != count:
        raise InvalidRequestError(f"time has {time.numel()} entries for {count} {what} (one each)")
    return time


def _put_input_id(
    request: graph_pb2.SampleFromNodesRequest | graph_pb2.SampleFromEdgesRequest, input_id: Tensor | None
) -> None:
    """Set the request's ``input_id`` unless there is none (PyG allows ``None``)."""
    if input_id is not None:
        request.input_id.CopyFrom(ids_to_proto(input_id))


def _input_id_from_proto(
    request: graph_pb2.SampleFromNodesRequest | graph_pb2.SampleFromEdgesRequest,
) -> Tensor | None:
    """The seeds' positions in the loader's list; ``None`` when the caller sent none (PyG allows it)."""
    return ids_from_proto(request.input_id, "input_id") if request.HasField("input_id") else None


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


def edge_input_from_proto(
    request: graph_pb2.SampleFromEdgesRequest,
) -> tuple[EdgeSamplerInput, NegativeSampling | None]:
    """Decode the positive links and negative sampling of a SampleFromEdges request.

    Raises:
        InvalidRequestError: mismatched lengths, or an unknown mode or bad amount.
    """
    row = ids_from_proto(request.row, "row (source ids)")
    col = ids_from_proto(request.col, "col (destination ids)")
    input_id = _input_id_from_proto(request)
    label = optional_tensor_from_proto(request.label, "edge label")
    counts = [row.numel(), col.numel(), *([] if input_id is None else [input_id.numel()])]
    if len(set(counts)) > 1:
        raise InvalidRequestError(
            f"row, col{' and input_id' if input_id is not None else ''} must have one entry per "
            f"link, got {' and '.join(map(str, counts))}"
        )
    if label is not None and (label.dim() == 0 or label.size(0) != row.numel()):
        rows = "a scalar" if label.dim() == 0 else f"{label.size(0)} rows"
        raise InvalidRequestError(f"edge label has {rows} for {row.numel()} links (one row per link)")
    neg_sampling = None
    if request.HasField("neg_sampling"):
        spec = request.neg_sampling
        try:
            neg_sampling = NegativeSampling(spec.mode, _amount(spec))
        except ValueError as exc:
            raise InvalidRequestError(
                f"bad negative sampling (mode {spec.mode!r}, amount {spec.amount}): {exc}"
            ) from None
    inputs = EdgeSamplerInput(
        input_id=input_id,
        row=row,
        col=col,
        label=label,
        time=_time_from_proto(request, row.numel(), "links"),
        input_type=edge_type_from_proto(request.input_type),
    )
    return inputs, neg_sampling


def _amount(spec: graph_pb2.NegativeSamplingSpec) -> int | float:
    """The amount as PyG wants it: an int when it is whole (triplet mode requires that)."""
    if not 0 < spec.amount < float("inf"):
        raise InvalidRequestError(f"negative sampling amount must be > 0 and finite, got {spec.amount}")
    return int(spec.amount) if float(spec.amount).is_integer() else spec.amount
