"""How much work a sampling request can cause, bounded before anything is allocated for it.

A request is a few hundred bytes; the sample it asks for can be billions of edges (50k seeds
with fanout 10000 and replacement, or fanout -1 over eight hops). ``sampled_edges_bound``
walks the hops with counts only: per edge type ``(src, rel, dst)``, the frontier of ``dst``
nodes times the fanout (``-1`` and sampling without replacement are capped by the edge type's
largest in-degree, when the topology snapshot knows it), capped by the edge type's edge count
when a node is sampled at most once per hop (no replacement, not disjoint); the next frontier
of ``src`` nodes is what was sampled, capped by the node count unless disjoint (where every
seed keeps a subgraph of its own). The bound is an upper bound: a request under it never
causes more work, a request over it is refused by the caller, in microseconds.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from gnnstore.backend.engine.topology import TopologySnapshot, edge_ends
from gnnstore.common.graph_types import EdgeType, NodeType


@dataclass(frozen=True)
class GraphBounds:
    """The sizes the bound needs: node and edge counts and, from a snapshot, largest in-degrees.

    ``num_edges`` of an edge type is negative where unknown (live Neo4j sampling), and
    ``max_in_degree`` is ``None`` without a snapshot; ``unknown_degree`` then stands for the
    neighbours of one node (the server's fanout limit). ``num_edge_ids``: edge ids given per
    edge type (more than ``num_edges`` once graph writes removed edges), ``None`` where unknown.
    """

    num_nodes: Mapping[NodeType | None, int]
    num_edges: Mapping[EdgeType | None, int]
    max_in_degree: Mapping[EdgeType | None, int] | None = None
    unknown_degree: int = 10_000
    num_edge_ids: Mapping[EdgeType | None, int] | None = None

    @classmethod
    def of_snapshot(cls, snapshot: TopologySnapshot) -> "GraphBounds":
        """Counts and largest in-degrees of a topology snapshot (one pass over each ``colptr``)."""
        degrees = {
            et: int(np.diff(topo.colptr).max()) if topo.num_dst else 0 for et, topo in snapshot.edges.items()
        }
        return cls(
            dict(snapshot.num_nodes), {et: topo.num_edges for et, topo in snapshot.edges.items()}, degrees,
            num_edge_ids={et: topo.num_edge_ids for et, topo in snapshot.edges.items()},
        )

    def edge_count(self, edge_type: EdgeType | None) -> int | None:
        """The edge type's edge count, ``None`` where unknown."""
        count = self.num_edges.get(edge_type, -1)
        return count if count >= 0 else None

    def edge_id_count(self, edge_type: EdgeType | None) -> int | None:
        """Edge ids the edge type has given, ``None`` where unknown."""
        return None if self.num_edge_ids is None else self.num_edge_ids.get(edge_type, 0)


def sampled_edges_bound(
    frontier: Mapping[NodeType | None, int],
    num_neighbors: Mapping[EdgeType | None, list[int]],
    bounds: GraphBounds,
    *,
    replace: bool,
    disjoint: bool,
) -> int:
    """An upper bound of the edges a multi-hop sample from ``frontier`` (seed count per node
    type) can hold, for fanouts per edge type (homogeneous: the edge type ``None``)."""
    hops = max((len(k) for k in num_neighbors.values()), default=0)
    frontier = dict(frontier)
    total = 0
    for hop in range(hops):
        reached: dict[NodeType | None, int] = {}
        for edge_type, fanouts in num_neighbors.items():
            if hop >= len(fanouts) or fanouts[hop] == 0:
                continue
            src, dst = edge_ends(edge_type)
            per_node = _per_node(fanouts[hop], edge_type, bounds, replace)
            edges = frontier.get(dst, 0) * per_node
            count = bounds.edge_count(edge_type)
            if not replace and not disjoint and count is not None:
                edges = min(edges, count)
            total += edges
            reached[src] = reached.get(src, 0) + edges
        if not disjoint:
            reached = {nt: min(n, bounds.num_nodes.get(nt, n)) for nt, n in reached.items()}
        frontier = reached
    return total


def _per_node(fanout: int, edge_type: EdgeType | None, bounds: GraphBounds, replace: bool) -> int:
    """Neighbours one node may get in one hop along ``edge_type``."""
    degree = None if bounds.max_in_degree is None else bounds.max_in_degree.get(edge_type)
    if fanout < 0:  # every neighbour
        return degree if degree is not None else bounds.unknown_degree
    if not replace and degree is not None:
        return min(fanout, degree)
    return fanout
