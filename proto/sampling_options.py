"""Sampling options (fanouts, replacement, seed, weights, time) to and from their wire form."""
from __future__ import annotations

from collections.abc import Mapping

from gnnstore.common.errors import InvalidRequestError
from gnnstore.common.graph_types import EdgeType
from gnnstore.common.temporal import TEMPORAL_STRATEGIES, TemporalOptions

from . import graph_pb2
from .codec import (
    edge_type_from_proto,
    edge_type_to_proto,
)

NeighborCounts = list[int] | dict[EdgeType, list[int]]


def options_to_proto(
    num_neighbors: NeighborCounts,
    *,
    replace: bool,
    disjoint: bool,
    seed: int | None,
    time_attr: str | None = None,
    temporal_strategy: str = "uniform",
    weight_attr: str | None = None,
) -> graph_pb2.SamplingOptions:
    """Encode PyG's ``num_neighbors`` (list or per-edge-type dict) and the sampler options."""
    options = graph_pb2.SamplingOptions(replace=replace, disjoint=disjoint, seed=seed, weight_attr=weight_attr or "")
    if time_attr is not None:
        options.time_attr, options.temporal_strategy = time_attr, temporal_strategy
    if isinstance(num_neighbors, Mapping):
        for edge_type, hops in num_neighbors.items():
            options.per_edge_type.add(
                edge_type=edge_type_to_proto(edge_type), num_neighbors=[int(k) for k in hops]
            )
    else:
        options.num_neighbors.extend(int(k) for k in num_neighbors)
        options.no_hops = not options.num_neighbors  # an empty repeated field is also an unsent one
    return options


def num_neighbors_from_proto(options: graph_pb2.SamplingOptions) -> NeighborCounts:
    """Decode ``num_neighbors`` as PyG takes it: a list, or a dict keyed by edge-type tuples.

    Raises:
        InvalidRequestError: both forms or neither were sent, or hops beside ``no_hops``.
    """
    if options.per_edge_type and options.num_neighbors:
        raise InvalidRequestError("send num_neighbors as a list or per edge type, not both")
    if options.no_hops:
        if options.per_edge_type or options.num_neighbors:
            raise InvalidRequestError("no_hops is set, but num_neighbors lists hops")
        return []
    if options.per_edge_type:
        return {
            edge_type_from_proto(f.edge_type): list(f.num_neighbors) for f in options.per_edge_type
        }
    if not options.num_neighbors:
        raise InvalidRequestError("num_neighbors was not sent (set no_hops for the seeds alone)")
    return list(options.num_neighbors)


def weight_attr_from_proto(options: graph_pb2.SamplingOptions) -> str | None:
    """The edge attribute the request samples by weight, or ``None`` (uniform).

    Raises:
        InvalidRequestError: together with temporal sampling.
    """
    if options.weight_attr and options.time_attr:
        raise InvalidRequestError("weighted and temporal sampling cannot be combined; choose one")
    return options.weight_attr or None


def temporal_from_proto(options: graph_pb2.SamplingOptions) -> TemporalOptions | None:
    """The request's temporal sampling, or ``None``.

    Raises:
        InvalidRequestError: a strategy without a time attribute, or an unknown strategy.
    """
    if not options.time_attr:
        if options.temporal_strategy:
            raise InvalidRequestError("temporal_strategy is set, but no time_attr to sample by")
        return None
    strategy = options.temporal_strategy or "uniform"
    if strategy not in TEMPORAL_STRATEGIES:
        raise InvalidRequestError(f"temporal_strategy must be one of {TEMPORAL_STRATEGIES}, got {strategy!r}")
    return TemporalOptions(options.time_attr, strategy)
