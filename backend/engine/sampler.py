"""PyG's samplers over gnnstore's: ``SnapshotNeighborSampler`` and ``Neo4jLiveSampler``.

Each is a PyG ``BaseSampler`` that plugs into ``NodeLoader``, ``LinkLoader``,
``NeighborLoader(neighbor_sampler=...)`` and ``LinkNeighborLoader(neighbor_sampler=...)``: it
hands PyG's sampler inputs to the numpy sampler it wraps (``SnapshotSampler``, ``LiveSampler``)
through ``seeds.sample_nodes`` / ``seeds.sample_links`` (PyG's ``node_sample`` /
``edge_sample``, step for step), and the :class:`~gnnstore.common.sample.Sample` back as PyG's
output (:func:`to_pyg`, no copies). So batches are built exactly as with PyG's
``NeighborSampler``: ``n_id`` global, ``edge_index`` and every label index
(``edge_label_index``, ``src_index``, ``dst_pos_index``, ``dst_neg_index``) **local**, the
global id of a negative is ``n_id[dst_neg_index]``, and ``e_id`` are the graph store's edge
ids (``edge_permutation`` is ``None``). Negatives come from ``NegativeSampling.sample``, so
from torch's generator, as in PyG.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import Tensor
from torch_geometric.sampler import (
    BaseSampler,
    EdgeSamplerInput,
    HeteroSamplerOutput,
    NegativeSampling,
    NodeSamplerInput,
    NumNeighbors,
    SamplerOutput,
)

from gnnstore.backend.engine import seeds
from gnnstore.backend.engine.neo4j_live_sampling import LiveSampler
from gnnstore.backend.engine.sampling_engine import Fanouts, SamplingEngine
from gnnstore.backend.engine.snapshot_sampler import SnapshotSampler
from gnnstore.backend.engine.temporal_index import TemporalIndex
from gnnstore.backend.engine.topology import TopologySnapshot
from gnnstore.backend.engine.weight_index import WeightIndex
from gnnstore.common.graph_types import EdgeType, NodeType
from gnnstore.common.sample import Links, MakeIds, Negatives, Sample, SeedNodes

__all__ = ["Fanouts", "Neo4jLiveSampler", "SamplingEngine", "SnapshotNeighborSampler", "to_pyg"]

Output = SamplerOutput | HeteroSamplerOutput


class _PygSampler(BaseSampler):
    """PyG's ``BaseSampler`` over a numpy sampler (``self.core``)."""

    core: seeds.SeedSampler

    @property
    def num_nodes(self) -> int | dict[NodeType, int]:
        """Node count (homogeneous) or node type → count: the range negatives are drawn from."""
        return self.core.num_nodes

    @property
    def edge_permutation(self) -> None:
        """``None``: ``edge`` already holds the graph store's edge ids."""
        return None

    def sample_from_nodes(self, index: NodeSamplerInput, **kwargs: object) -> Output:
        """Sample around the seed nodes of ``index`` (**global** ids); metadata ``(input_id, time)``.

        Raises:
            NotFoundError: ``index.input_type`` is not a node type of the graph.
            InvalidRequestError: a seed id out of range, or seed times without a time attribute.
        """
        nodes = SeedNodes(_numpy(index.node), index.input_type, _numpy(index.time), _numpy(index.input_id))
        return to_pyg(seeds.sample_nodes(self.core, nodes))

    def sample_from_edges(self, index: EdgeSamplerInput, neg_sampling: NegativeSampling | None = None) -> Output:
        """Sample around the endpoints of seed links (and negatives, uniform over the dense id range).

        Raises:
            NotFoundError: an endpoint type of ``index.input_type`` is not a node type.
            InvalidRequestError: an endpoint id out of range, or link times without a time
                attribute (or a time attribute without link times).
        """
        links = Links(_numpy(index.row), _numpy(index.col), _numpy(index.label), _numpy(index.time),
                      index.input_type, _numpy(index.input_id))
        if neg_sampling is None:
            return to_pyg(seeds.sample_links(self.core, links))

        def draw(count: int, endpoint: str, num_nodes: int) -> np.ndarray:
            return neg_sampling.sample(count, endpoint, num_nodes).numpy()

        negatives = Negatives(neg_sampling.is_triplet(), neg_sampling.amount)
        return to_pyg(seeds.sample_links(self.core, links, negatives, draw))


class SnapshotNeighborSampler(_PygSampler):
    """Uniform (temporal, or weighted) neighbour sampling over a topology snapshot, with PyG's
    ``NeighborSampler`` output: a :class:`SnapshotSampler` (its arguments), for PyG's loaders.

    ``num_neighbors`` may also be PyG's ``NumNeighbors``. ``seed=None`` draws each call's
    random seed from torch's global generator, as PyG does, so ``torch.manual_seed`` repeats a
    run; negatives are always drawn from it.
    """

    def __init__(
        self,
        engine_or_snapshot: SamplingEngine | TopologySnapshot,
        num_neighbors: Sequence[int] | Mapping | NumNeighbors,
        *,
        replace: bool = False,
        disjoint: bool = False,
        seed: int | None = None,
        make_ids: MakeIds | None = None,
        temporal: TemporalIndex | None = None,
        temporal_strategy: str = "uniform",
        weights: WeightIndex | None = None,
    ) -> None:
        if isinstance(engine_or_snapshot, TopologySnapshot):
            engine_or_snapshot = SamplingEngine(engine_or_snapshot)
        edge_types = engine_or_snapshot.edge_types if isinstance(engine_or_snapshot, SamplingEngine) else []
        self.core = SnapshotSampler(
            engine_or_snapshot, _plain_fanouts(num_neighbors, edge_types), replace=replace, disjoint=disjoint,
            seed=seed, fresh_seed=_torch_seed, make_ids=make_ids, temporal=temporal,
            temporal_strategy=temporal_strategy, weights=weights,
        )  # fmt: skip

    @property
    def fanouts(self) -> Fanouts:
        """The validated fanouts."""
        return self.core.fanouts


class Neo4jLiveSampler(_PygSampler):
    """Uniform neighbour sampling inside Neo4j, batch by batch: a :class:`LiveSampler` (its
    arguments), for PyG's loaders."""

    def __init__(self, graph_store: object, num_neighbors: Sequence[int] | Mapping[EdgeType, Sequence[int]]) -> None:
        self.core = LiveSampler(graph_store, num_neighbors)


def to_pyg(sample: Sample) -> Output:
    """``sample`` as PyG's output type, its tensors viewing the arrays."""
    node, row, col, edge = (_tensors(field) for field in (sample.node, sample.row, sample.col, sample.edge))
    batch = None if sample.batch is None else _tensors(sample.batch)
    metadata = tuple(None if m is None else _tensor(m) for m in sample.metadata)
    if sample.hetero:
        return HeteroSamplerOutput(
            node=node, row=row, col=col, edge=edge, batch=batch,
            num_sampled_nodes=sample.num_sampled_nodes, num_sampled_edges=sample.num_sampled_edges,
            metadata=metadata,
        )  # fmt: skip
    return SamplerOutput(
        node=node[None], row=row[None], col=col[None], edge=edge[None],
        batch=None if batch is None else batch[None],
        num_sampled_nodes=sample.num_sampled_nodes[None], num_sampled_edges=sample.num_sampled_edges[None],
        metadata=metadata,
    )  # fmt: skip


def _torch_seed() -> int:
    return int(torch.randint(1 << 62, ()))


def _plain_fanouts(num_neighbors: Sequence[int] | Mapping | NumNeighbors, edge_types: list) -> Sequence[int] | Mapping:
    """PyG's ``NumNeighbors`` as the list or dict the engine takes (a dict's ``default`` filling
    the edge types it leaves out)."""
    if not isinstance(num_neighbors, NumNeighbors):
        return num_neighbors
    if isinstance(num_neighbors.values, dict) and num_neighbors.default is not None:
        values = {k.to_tuple() if hasattr(k, "to_tuple") else k: v for k, v in num_neighbors.values.items()}
        return {et: values.get(et, num_neighbors.default) for et in edge_types}
    return num_neighbors.get_values()


def _numpy(tensor: Tensor | None) -> np.ndarray | None:
    return None if tensor is None else tensor.detach().cpu().numpy()


def _tensors(arrays: dict) -> dict[object, Tensor]:
    return {key: _tensor(a) for key, a in arrays.items()}


def _tensor(array: np.ndarray) -> Tensor:
    return torch.from_numpy(np.ascontiguousarray(array))
