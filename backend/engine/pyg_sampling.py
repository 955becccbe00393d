"""PyG's ``node_sample`` and ``edge_sample`` for the in-process samplers, over :mod:`link_seeds`.

``SnapshotNeighborSampler`` and ``Neo4jLiveSampler`` turn PyG's sampler inputs into one call
of their sampling function each, and write the metadata a PyG loader reads, exactly as PyG's
own functions do (negatives come from ``NegativeSampling.sample``, so from torch's generator).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

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

from gnnstore.backend.engine.link_seeds import Links, Negatives, plan_links
from gnnstore.common.graph_types import NodeType

Output = SamplerOutput | HeteroSamplerOutput
SampleFn = Callable[[Tensor | dict[NodeType, Tensor], object], Output]
"""``sample(seed, seed_time)``: one sampling call around global seed ids."""


def sample_nodes(inputs: NodeSamplerInput, sample: SampleFn) -> Output:
    """PyG's ``node_sample``: ``sample`` around the seed nodes; metadata ``(input_id, time)``."""
    seed, seed_time = inputs.node, inputs.time
    if inputs.input_type is not None:
        seed = {inputs.input_type: seed}
        seed_time = None if seed_time is None else {inputs.input_type: seed_time}
    out = sample(seed, seed_time)
    out.metadata = (inputs.input_id, inputs.time)
    return out


def sample_links(
    inputs: EdgeSamplerInput,
    sample: SampleFn,
    num_nodes: int | dict[NodeType, int],
    disjoint: bool,
    node_time: np.ndarray | dict[NodeType, np.ndarray] | None = None,
    neg_sampling: NegativeSampling | None = None,
) -> Output:
    """PyG's ``edge_sample``: ``sample`` around the links' ends (and negatives); metadata with
    local label indices (see ``link_seeds.plan_links``)."""
    links = Links(inputs.row.numpy(), inputs.col.numpy(), _numpy(inputs.label), _numpy(inputs.time),
                  inputs.input_type)
    negatives = None
    if neg_sampling is not None:
        def draw(count: int, endpoint: str, num: int) -> np.ndarray:
            return neg_sampling.sample(count, endpoint, num).numpy()

        negatives = Negatives(neg_sampling.is_triplet(), neg_sampling.amount, draw)
    plan = plan_links(links, num_nodes, disjoint, node_time, negatives)
    out = sample(_tensors(plan.seed), _tensors(plan.seed_time))
    if disjoint:
        if isinstance(out.batch, Mapping):
            out.batch = {nt: batch % plan.num_pos for nt, batch in out.batch.items()}
        else:
            out.batch = out.batch % plan.num_pos
    out.metadata = (inputs.input_id, *(_tensors(x) for x in plan.labels))
    return out


def _numpy(tensor: Tensor | None) -> np.ndarray | None:
    return None if tensor is None else tensor.numpy()


def _tensors(arrays: np.ndarray | dict | None) -> Tensor | dict | None:
    """``arrays`` (one, a dict of them, or ``None``) as tensors sharing their memory where they can."""
    if arrays is None:
        return None
    if isinstance(arrays, dict):
        return {key: _tensors(a) for key, a in arrays.items()}
    return torch.from_numpy(np.ascontiguousarray(arrays))
