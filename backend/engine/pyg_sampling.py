"""PyG's ``node_sample`` and ``edge_sample`` for the in-process samplers, over :mod:`seeds`.

``SnapshotNeighborSampler`` and ``Neo4jLiveSampler`` hand PyG's sampler inputs to the numpy
``seeds.sample_nodes`` / ``seeds.sample_links`` around their sampling function, and the
:class:`~gnnstore.common.sample.Sample` back as the ``SamplerOutput`` / ``HeteroSamplerOutput``
a PyG loader reads (no copies: the tensors share the arrays' memory). Negatives come from
``NegativeSampling.sample``, so from torch's generator, as in PyG.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor
from torch_geometric.sampler import (
    EdgeSamplerInput,
    HeteroSamplerOutput,
    NegativeSampling,
    NodeSamplerInput,
    SamplerOutput,
)

from gnnstore.backend.engine import seeds
from gnnstore.common.graph_types import NodeType
from gnnstore.common.sample import Sample

Output = SamplerOutput | HeteroSamplerOutput


def sample_nodes(inputs: NodeSamplerInput, sample: seeds.SampleFn) -> Output:
    """PyG's ``node_sample``: ``sample`` around the seed nodes; metadata ``(input_id, time)``."""
    return to_pyg(seeds.sample_nodes(
        sample, _numpy(inputs.node), inputs.input_type, _numpy(inputs.time), _numpy(inputs.input_id)
    ))


def sample_links(
    inputs: EdgeSamplerInput,
    sample: seeds.SampleFn,
    num_nodes: int | dict[NodeType, int],
    disjoint: bool,
    node_time: np.ndarray | dict[NodeType, np.ndarray] | None = None,
    neg_sampling: NegativeSampling | None = None,
) -> Output:
    """PyG's ``edge_sample``: ``sample`` around the links' ends (and negatives); metadata with
    local label indices (see ``seeds.plan_links``)."""
    links = seeds.Links(_numpy(inputs.row), _numpy(inputs.col), _numpy(inputs.label), _numpy(inputs.time),
                        inputs.input_type)
    negatives = None
    if neg_sampling is not None:
        def draw(count: int, endpoint: str, num: int) -> np.ndarray:
            return neg_sampling.sample(count, endpoint, num).numpy()

        negatives = seeds.Negatives(neg_sampling.is_triplet(), neg_sampling.amount, draw)
    return to_pyg(seeds.sample_links(
        sample, links, num_nodes, disjoint, node_time, negatives, _numpy(inputs.input_id)
    ))


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


def _numpy(tensor: Tensor | None) -> np.ndarray | None:
    return None if tensor is None else tensor.detach().cpu().numpy()


def _tensors(arrays: dict) -> dict[object, Tensor]:
    return {key: _tensor(a) for key, a in arrays.items()}


def _tensor(array: np.ndarray) -> Tensor:
    return torch.from_numpy(np.ascontiguousarray(array))
