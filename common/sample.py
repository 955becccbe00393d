"""A sampled subgraph as numpy arrays per node and edge type: what the engine and the live
Neo4j sampler make, what the server sends, and what ``pyg_sampling`` turns into PyG's
``SamplerOutput`` / ``HeteroSamplerOutput`` (the same fields, without torch)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from gnnstore.common.graph_types import EdgeType, NodeType

MakeIds = Callable[[int], np.ndarray]
"""Makes an uninitialised int64 array of ``n`` ids (``np.empty`` by default; the server's
makes it in a reply segment, so a sample is written where the reply is read)."""


@dataclass
class Sample:
    """One sampled subgraph; a homogeneous graph's arrays are keyed ``None``.

    Attributes:
        node: node type → global ids, the seeds first and in order.
        row, col: edge type → each sampled edge's source and destination, **local** (positions
            in ``node`` of their types).
        edge: edge type → the sampled edges' ids in the graph store.
        batch: node type → the seed each node was sampled for (disjoint sampling), else ``None``.
        num_sampled_nodes: node type → nodes per hop (the seeds first).
        num_sampled_edges: edge type → edges per hop.
        metadata: PyG's metadata: ``(input_id, time)`` for seed nodes, the label indices for
            seed links (``link_seeds.LinkPlan.labels``).
    """

    node: dict[NodeType | None, np.ndarray]
    row: dict[EdgeType | None, np.ndarray]
    col: dict[EdgeType | None, np.ndarray]
    edge: dict[EdgeType | None, np.ndarray]
    batch: dict[NodeType | None, np.ndarray] | None
    num_sampled_nodes: dict[NodeType | None, list[int]]
    num_sampled_edges: dict[EdgeType | None, list[int]]
    metadata: tuple[np.ndarray | None, ...] = field(default=())

    @property
    def hetero(self) -> bool:
        """Whether the graph has node types (its keys are types, not ``None``)."""
        return None not in self.node
