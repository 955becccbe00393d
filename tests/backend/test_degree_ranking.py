"""DegreeRanking: nodes by out-degree summed over the edge types they are the source of."""
from __future__ import annotations

import pytest
import torch

from gnnstore.backend.engine.degree_ranking import DegreeRanking
from gnnstore.backend.engine.topology import TopologySnapshot
from gnnstore.common.errors import InvalidRequestError, NotFoundError


def test_homogeneous_ranking_by_out_degree_ties_by_id() -> None:
    edge_index = torch.tensor([[3, 3, 3, 1, 1, 4, 0], [0, 1, 2, 0, 2, 3, 4]])
    ranking = DegreeRanking(TopologySnapshot.from_edge_index(edge_index, 6, version="v7"))
    assert ranking.top(None, 6).tolist() == [3, 1, 0, 4, 2, 5]  # 0 and 4 tie: lower id first
    assert ranking.top(None, 2).tolist() == [3, 1] and ranking.top(None, 99).size == 6
    assert ranking.hot_mask(None, 2).tolist() == [False, True, False, True, False, False]
    assert ranking.hot_mask(None, 0).sum() == 0 and ranking.hot_mask(None, 99).all()
    assert ranking.snapshot_id == "v7"


def test_heterogeneous_out_degree_sums_every_edge_type_a_node_type_sources() -> None:
    edges = {
        ("a", "to", "b"): torch.tensor([[0, 0, 1], [0, 1, 1]]),
        ("a", "likes", "a"): torch.tensor([[1, 1, 1], [0, 2, 0]]),
        ("b", "back", "a"): torch.tensor([[1, 1, 0], [0, 0, 0]]),
    }
    ranking = DegreeRanking(TopologySnapshot.from_edge_index(edges, {"a": 3, "b": 2}))
    assert ranking.top("a", 3).tolist() == [1, 0, 2]  # 1: 1 + 3 edges, 0: 2 edges, 2: none
    assert ranking.top("b", 2).tolist() == [1, 0]  # in-edges from a do not count for b


def test_bad_requests_are_refused() -> None:
    ranking = DegreeRanking(TopologySnapshot.from_edge_index(torch.tensor([[0], [1]]), 2))
    with pytest.raises(NotFoundError, match="'paper'"):
        ranking.top("paper", 1)
    with pytest.raises(InvalidRequestError, match="k must be >= 0"):
        ranking.top(None, -1)
