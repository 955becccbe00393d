"""Sampler inputs (seed nodes, seed links, negative sampling) from their wire form into numpy
records (``common/sample.py``): what the server decodes. The client encodes them from PyG's
types (``client/sampler_wire.py``)."""
from __future__ import annotations

import numpy as np

from gnnstore.common.errors import InvalidRequestError
from gnnstore.common.sample import Links, Negatives, SeedNodes

from . import graph_pb2
from .codec import (
    array_from_proto,
    edge_type_from_proto,
    id_array_from_proto,
    node_type_from_proto,
)


def node_input_from_proto(request: graph_pb2.SampleFromNodesRequest) -> SeedNodes:
    """Decode the seeds of a SampleFromNodes request.

    Raises:
        InvalidRequestError: ids that are not 1-D integers, or counts that differ.
    """
    node = id_array_from_proto(request.node, "seed node ids")
    input_id = _input_id_from_proto(request)
    if input_id is not None and input_id.size != node.size:
        raise InvalidRequestError(f"input_id has {input_id.size} entries for {node.size} seed nodes")
    time = _time_from_proto(request, node.size, "seed nodes")
    return SeedNodes(node, node_type_from_proto(request.input_type), time, input_id)


def _time_from_proto(
    request: graph_pb2.SampleFromNodesRequest | graph_pb2.SampleFromEdgesRequest, count: int, what: str
) -> np.ndarray | None:
    """The request's times, one per seed or link; ``None`` when unset."""
    if not request.HasField("time"):
        return None
    time = id_array_from_proto(request.time, "times")
    if time.size != count:
        raise InvalidRequestError(f"time has {time.size} entries for {count} {what} (one each)")
    return time


def _input_id_from_proto(
    request: graph_pb2.SampleFromNodesRequest | graph_pb2.SampleFromEdgesRequest,
) -> np.ndarray | None:
    """The seeds' positions in the loader's list; ``None`` when the caller sent none (PyG allows it)."""
    return id_array_from_proto(request.input_id, "input_id") if request.HasField("input_id") else None


def edge_input_from_proto(request: graph_pb2.SampleFromEdgesRequest) -> tuple[Links, Negatives | None]:
    """Decode the positive links and negative sampling of a SampleFromEdges request.

    Raises:
        InvalidRequestError: mismatched lengths, or an unknown mode or bad amount.
    """
    row = id_array_from_proto(request.row, "row (source ids)")
    col = id_array_from_proto(request.col, "col (destination ids)")
    input_id = _input_id_from_proto(request)
    label = None if request.label.is_none else array_from_proto(request.label.value, "edge label")
    counts = [row.size, col.size, *([] if input_id is None else [input_id.size])]
    if len(set(counts)) > 1:
        raise InvalidRequestError(
            f"row, col{' and input_id' if input_id is not None else ''} must have one entry per "
            f"link, got {' and '.join(map(str, counts))}"
        )
    if label is not None and (label.ndim == 0 or label.shape[0] != row.size):
        rows = "a scalar" if label.ndim == 0 else f"{label.shape[0]} rows"
        raise InvalidRequestError(f"edge label has {rows} for {row.size} links (one row per link)")
    negatives = _negatives(request.neg_sampling) if request.HasField("neg_sampling") else None
    time = _time_from_proto(request, row.size, "links")
    return Links(row, col, label, time, edge_type_from_proto(request.input_type), input_id), negatives


def _negatives(spec: graph_pb2.NegativeSamplingSpec) -> Negatives:
    """The request's negative sampling, checked as PyG's ``NegativeSampling`` checks it: mode
    ``binary`` or ``triplet``, an amount > 0 (whole in triplet mode).

    Raises:
        InvalidRequestError: another mode, or a bad amount.
    """
    if spec.mode not in ("binary", "triplet"):
        raise InvalidRequestError(
            f"bad negative sampling (mode {spec.mode!r}, amount {spec.amount}): the mode is 'binary' or 'triplet'"
        )
    if not 0 < spec.amount < float("inf"):
        raise InvalidRequestError(f"negative sampling amount must be > 0 and finite, got {spec.amount}")
    whole = float(spec.amount).is_integer()
    if spec.mode == "triplet" and not whole:
        raise InvalidRequestError(
            f"bad negative sampling (mode 'triplet', amount {spec.amount}): triplet negatives come in whole numbers"
        )
    return Negatives(spec.mode == "triplet", int(spec.amount) if whole else spec.amount)
