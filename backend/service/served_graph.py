"""What one sampling request reads of the served graph (a graph version's bounds and sampler
factory) and what Info reports about it: the records the service's modules pass each other."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gnnstore.backend.engine.seeds import SeedSampler
from gnnstore.backend.engine.work_budget import GraphBounds
from gnnstore.common.graph_types import EdgeType, NodeType
from gnnstore.common.sample import MakeIds
from gnnstore.common.temporal import TemporalOptions
from gnnstore.proto.sampling_options import NeighborCounts

UNKNOWN_EDGE_COUNT = -1
"""Edge count reported when live sampling has no snapshot to count from."""

@dataclass(frozen=True)
class SamplerRequest:
    """The sampler one request asks for.

    Attributes:
        num_neighbors: PyG's fanouts (a list, or a dict per edge type).
        replace, disjoint: PyG's sampling flags.
        seed: the request's random seed (``None``: a fresh draw).
        make_ids: makes the output id arrays where the sampler can (``None``: ``np.empty``).
        temporal: temporal sampling (``None``: none).
        weight_attr: the edge attribute to sample by weight (``None``: uniform).
    """

    num_neighbors: NeighborCounts
    replace: bool
    disjoint: bool
    seed: int | None
    make_ids: MakeIds | None = None
    temporal: TemporalOptions | None = None
    weight_attr: str | None = None


SamplerFactory = Callable[[SamplerRequest], SeedSampler]
"""The sampler of one request."""


@dataclass(frozen=True)
class SampledVersion:
    """One graph version as sampling requests read it.

    Attributes:
        graph_version: the graph version (0: the snapshot as built; each graph write makes the next).
        bounds: the sizes a request's work bound is computed from.
        make_sampler: builds the sampler of one request from its options.
        newest: whether it is the newest version (a client that switched back to an older one
            may hold rows of nodes and edges this one lacks).
    """

    graph_version: int
    bounds: GraphBounds
    make_sampler: SamplerFactory
    newest: bool = True


VersionLookup = Callable[[int | None], SampledVersion]
"""The graph version a request names (``None``: the newest)."""


@dataclass(frozen=True)
class GraphSummary:
    """What Info and the start-up line report about the served graph.

    Attributes:
        num_nodes: node type → count (global ids are ``0 .. count-1``).
        num_edges: edge type → count (``UNKNOWN_EDGE_COUNT`` under live sampling).
        snapshot_id: the topology snapshot sampling reads (its graph store's content id, or the live store's).
        sampling: ``"snapshot"`` or ``"live"``.
        graph_version: the newest version graph writes made (0: none).
    """

    num_nodes: dict[NodeType | None, int]
    num_edges: dict[EdgeType | None, int]
    snapshot_id: str
    sampling: str
    graph_version: int = 0
