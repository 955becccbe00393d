"""Weighted neighbour sampling: picks in proportion to edge weights, as PyG's weight_attr asks."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.data import Data, HeteroData
from torch_geometric.sampler import NodeSamplerInput

from gnnstore.backend.engine.sampler import SnapshotNeighborSampler
from gnnstore.backend.engine.sampling_engine import SamplingEngine
from gnnstore.backend.engine.topology import TopologySnapshot
from gnnstore.backend.engine.weight_index import edge_weights
from gnnstore.common.errors import InvalidRequestError

DRAWS = 20_000
WEIGHTS = np.array([0.0, 1.0, 2.0, 3.0, 4.0])  # the in-edges of node 0 from nodes 1..5


@pytest.fixture(scope="module")
def star() -> SamplingEngine:
    # A second in-neighbour list (node 6 from 7, 8) shows weights follow edge ids, not positions.
    edge_index = torch.tensor([[7, 1, 2, 8, 3, 4, 5], [6, 0, 0, 6, 0, 0, 0]])
    return SamplingEngine(TopologySnapshot.from_data(Data(edge_index=edge_index, num_nodes=9)))


def _inclusion(star: SamplingEngine, k: int, replace: bool, disjoint: bool = True) -> np.ndarray:
    """How often each in-edge of node 0 is picked per draw (``DRAWS`` subtrees of seed 0)."""
    weights = star.weight_index({None: np.array([5.0, *WEIGHTS[:2], 5.0, *WEIGHTS[2:]])})
    sampler = SnapshotNeighborSampler(star, [k], replace=replace, disjoint=disjoint, weights=weights, seed=3)
    out = sampler.sample_from_nodes(NodeSamplerInput(None, torch.zeros(DRAWS, dtype=torch.long)))
    picked = np.bincount(out.edge.numpy(), minlength=7) / DRAWS
    assert picked[[0, 3]].sum() == 0  # node 6's edges are not node 0's
    return picked[[1, 2, 4, 5, 6]]


def _successive_inclusion(w: np.ndarray, k: int) -> np.ndarray:
    """Exact inclusion probabilities of k picks without replacement, each in proportion to the
    remaining weights (what torch.multinomial and PyG's weighted sampling draw)."""
    def visit(left: np.ndarray, picks: int, p: float, into: np.ndarray) -> None:
        if picks == 0 or left.sum() == 0:
            return
        for i in np.flatnonzero(left):
            q = p * left[i] / left.sum()
            into[i] += q
            rest = left.copy()
            rest[i] = 0
            visit(rest, picks - 1, q, into)

    into = np.zeros_like(w)
    visit(w.copy(), k, 1.0, into)
    return into


@pytest.mark.parametrize("k", [1, 2, 3])
def test_without_replacement_edges_are_included_as_successive_weighted_picks_are(star: SamplingEngine, k: int) -> None:
    got = _inclusion(star, k, replace=False)
    assert got[0] == 0, "an edge of weight 0 is never picked"
    assert np.allclose(got, _successive_inclusion(WEIGHTS, k), atol=0.015), got


def test_flat_weights_take_the_redraw_path_and_draw_the_same_distribution() -> None:
    weights = np.array([1.0, 2.0, 3.0, 0.0, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 1.0, 5.0])  # 3 * 2 * 5 <= 24
    edge_index = torch.stack([torch.arange(1, 13), torch.zeros(12, dtype=torch.long)])
    engine = SamplingEngine(TopologySnapshot.from_data(Data(edge_index=edge_index, num_nodes=13)))
    sampler = SnapshotNeighborSampler(engine, [2], disjoint=True, weights=engine.weight_index({None: weights}), seed=5)
    out = sampler.sample_from_nodes(NodeSamplerInput(None, torch.zeros(DRAWS, dtype=torch.long)))
    got = np.bincount(out.edge.numpy(), minlength=12) / DRAWS
    assert np.allclose(got, _successive_inclusion(weights, 2), atol=0.015), got


def test_with_replacement_each_pick_follows_the_weights(star: SamplingEngine) -> None:
    got = _inclusion(star, 3, replace=True)
    assert np.allclose(got / 3, WEIGHTS / WEIGHTS.sum(), atol=0.01), got


def test_all_neighbours_means_every_edge_of_positive_weight(star: SamplingEngine) -> None:
    for k in (-1, 4, 10):
        assert np.array_equal(_inclusion(star, k, replace=False), [0, 1, 1, 1, 1])


def test_the_shared_mode_picks_by_weight_too(star: SamplingEngine) -> None:
    weights = star.weight_index({None: np.array([1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0])})
    out = SnapshotNeighborSampler(star, [2, 1], weights=weights).sample_from_nodes(
        NodeSamplerInput(None, torch.tensor([0, 6])))
    assert sorted(out.edge.tolist()) == [0, 3, 6]  # the only edges of positive weight


def test_edge_types_without_weights_are_sampled_uniformly() -> None:
    data = HeteroData()
    data["a"].num_nodes, data["b"].num_nodes = 4, 4
    data["a", "x", "b"].edge_index = torch.tensor([[0, 1, 2, 3], [0, 0, 0, 0]])
    data["b", "y", "a"].edge_index = torch.tensor([[1, 2, 3], [0, 0, 0]])
    engine = SamplingEngine(TopologySnapshot.from_data(data))
    weights = engine.weight_index({("a", "x", "b"): np.array([0.0, 0.0, 0.0, 1.0])})
    sampler = SnapshotNeighborSampler(engine, [1], disjoint=True, weights=weights, seed=0)
    out = sampler.sample_from_nodes(NodeSamplerInput(None, torch.zeros(3000, dtype=torch.long), input_type="b"))
    assert set(out.edge["a", "x", "b"].tolist()) == {3}
    seeds_a = sampler.sample_from_nodes(NodeSamplerInput(None, torch.zeros(3000, dtype=torch.long), input_type="a"))
    assert set(seeds_a.edge["b", "y", "a"].tolist()) == {0, 1, 2}


@pytest.mark.parametrize("values, message", [
    (torch.tensor([1.0, -1.0, 2.0]), r"edge 1 has weight -1.0; weights must be finite and >= 0"),
    (torch.tensor([1.0, float("nan"), 2.0]), r"edge 1 has weight nan"),
    (torch.ones(3, 2), r"one number per edge \(\[E\] or \[E, 1\]\), got float32 \[3, 2\]"),
    (torch.ones(4), r"has 4 rows for 3 edge ids"),
    (torch.ones(3, dtype=torch.bool), r"one number per edge"),
])
def test_weights_that_are_not_one_finite_non_negative_number_per_edge_are_named(values: torch.Tensor, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        edge_weights(values, ("a", "x", "b"), "w", 3)


def test_weighted_and_temporal_together_are_refused(star: SamplingEngine) -> None:
    weights = star.weight_index({None: np.ones(7)})
    temporal = star.temporal_index({None: np.zeros(9, dtype=np.int64)})
    with pytest.raises(InvalidRequestError, match="cannot be combined"):
        SnapshotNeighborSampler(star, [1], weights=weights, temporal=temporal)


def test_weights_of_any_numeric_dtype_are_read_as_float64_bfloat16_included() -> None:
    bf16 = torch.tensor([1.5, 0.0, 3.0]).bfloat16()
    for values in (torch.tensor([1, 0, 3]), torch.tensor([[1.5], [0.0], [3.0]]), bf16):
        weights = edge_weights(values, ("a", "x", "b"), "w", 3)
        assert weights.dtype == np.float64 and weights.tolist() == values.float().view(-1).tolist()
