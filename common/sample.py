"""Sampling's records in numpy: the seeds a batch asks for (PyG's ``NodeSamplerInput`` and
``EdgeSamplerInput``, with ``NegativeSampling``) and the subgraph it gets (PyG's
``SamplerOutput`` / ``HeteroSamplerOutput``), the same fields without torch. The engine and the
server pass these; ``backend/engine/sampler.py`` converts them to and from PyG's types."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from gnnstore.common.graph_types import EdgeType, NodeType


@dataclass(frozen=True)
class SeedNodes:
    """A batch of seed nodes.

    Attributes:
        node: their global ids.
        input_type: their node type (``None``: a homogeneous graph).
        time: their times (temporal sampling), else ``None``.
        input_id: their positions in the loader's input, handed back in the metadata.
    """

    node: np.ndarray
    input_type: NodeType | None = None
    time: np.ndarray | None = None
    input_id: np.ndarray | None = None


@dataclass(frozen=True)
class Links:
    """A batch of seed links (global ids).

    Attributes:
        row, col: the links' source and destination ids.
        label: their labels (``None``: none given).
        time: their times (temporal sampling), else ``None``.
        input_type: their edge type (``None``: a homogeneous graph).
        input_id: their positions in the loader's input, handed back in the metadata.
    """

    row: np.ndarray
    col: np.ndarray
    label: np.ndarray | None = None
    time: np.ndarray | None = None
    input_type: EdgeType | None = None
    input_id: np.ndarray | None = None


@dataclass(frozen=True)
class Negatives:
    """Negatives to draw for a batch of links: PyG's ``NegativeSampling`` without weights.

    Attributes:
        triplet: ``'triplet'`` mode (negative destinations per source) instead of ``'binary'``.
        amount: negatives per positive link (an int in triplet mode).
    """

    triplet: bool
    amount: float


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
