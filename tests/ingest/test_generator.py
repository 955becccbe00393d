"""The generator: deterministic, heavy-tailed, homophilous, learnable, with valid splits."""
from __future__ import annotations

import pytest
import torch

from gnnstore.common.errors import InvalidRequestError
from gnnstore.ingest.generator import generate_graph, generate_hetero_graph


@pytest.fixture(scope="module")
def graph():
    return generate_graph(5000, 10, 32, 8, seed=3)


def test_same_seed_same_graph_other_seed_other_graph(graph):
    again = generate_graph(5000, 10, 32, 8, seed=3)
    other = generate_graph(5000, 10, 32, 8, seed=4)
    for key in ("x", "y", "edge_index", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(graph[key], again[key]), key
    assert not torch.equal(graph.edge_index, other.edge_index)


def test_shapes_and_dtypes(graph):
    assert graph.num_nodes == 5000
    assert graph.x.shape == (5000, 32) and graph.x.dtype == torch.float32
    assert graph.y.dtype == torch.int64 and set(graph.y.unique().tolist()) == set(range(8))
    assert graph.edge_index.shape == (2, 50000) and graph.edge_index.dtype == torch.int64
    assert int(graph.edge_index.min()) >= 0 and int(graph.edge_index.max()) < 5000


def test_degrees_are_heavy_tailed(graph):
    in_degree = torch.bincount(graph.edge_index[1], minlength=5000).float()
    out_degree = torch.bincount(graph.edge_index[0], minlength=5000).float()
    assert in_degree.max() > 20 * in_degree.mean()
    assert out_degree.max() > 5 * out_degree.mean()


def test_most_edges_stay_inside_a_class(graph):
    src, dst = graph.edge_index
    assert float((graph.y[src] == graph.y[dst]).float().mean()) > 0.7


def test_masks_are_disjoint_and_cover_every_node(graph):
    total = graph.train_mask.long() + graph.val_mask.long() + graph.test_mask.long()
    assert torch.equal(total, torch.ones(5000, dtype=torch.long))
    assert int(graph.train_mask.sum()) == 3000 and int(graph.val_mask.sum()) == 1000


def test_labels_are_learnable_from_features_but_not_trivially(graph):
    torch.manual_seed(0)
    probe = torch.nn.Linear(32, 8)
    opt = torch.optim.Adam(probe.parameters(), lr=0.05)
    x, y, train, test = graph.x, graph.y, graph.train_mask, graph.test_mask
    for _ in range(150):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(probe(x[train]), y[train]).backward()
        opt.step()
    accuracy = float((probe(x[test]).argmax(1) == y[test]).float().mean())
    chance = float(torch.bincount(y).max()) / len(y)
    assert chance + 0.15 < accuracy < 0.95


def test_hetero_graph_has_three_node_types_and_parallel_relations():
    data = generate_hetero_graph(seed=1)
    data.validate()
    assert set(data.node_types) == {"paper", "author", "institution"}
    assert len(data.edge_types) == 6
    assert ("author", "writes", "paper") in data.edge_types
    assert ("author", "reviews", "paper") in data.edge_types
    writes = data["author", "writes", "paper"].edge_index
    assert torch.equal(data["paper", "rev_writes", "author"].edge_index, writes.flip(0))
    assert torch.equal(generate_hetero_graph(seed=1)["author"].x, data["author"].x)


@pytest.mark.parametrize(
    "args, fragment",
    [((0, 5, 4, 2), "num_nodes"), ((10, -1, 4, 2), "avg_degree"), ((10, 5, 0, 2), "num_features"),
     ((10, 5, 4, 11), "num_classes")],
)
def test_bad_sizes_are_rejected(args, fragment):
    with pytest.raises(InvalidRequestError, match=fragment):
        generate_graph(*args)


def test_a_lower_out_degree_exponent_concentrates_edges_on_fewer_sources():
    def top_share(exponent: float) -> float:
        g = generate_graph(5000, 10, 4, 2, seed=3, out_degree_exponent=exponent)
        out_degree = torch.bincount(g.edge_index[0], minlength=5000)
        return float(out_degree.sort(descending=True).values[:1000].sum()) / g.num_edges

    default = generate_graph(5000, 10, 4, 2, seed=3)
    explicit = generate_graph(5000, 10, 4, 2, seed=3, out_degree_exponent=3.0)
    assert torch.equal(default.edge_index, explicit.edge_index)
    assert top_share(2.0) > top_share(3.0) + 0.15  # the top 20% of sources own far more edges


@pytest.mark.parametrize("exponent", [1.0, 0.5, -2.0])
def test_an_out_degree_exponent_of_one_or_less_is_refused(exponent):
    with pytest.raises(InvalidRequestError, match="out_degree_exponent must be > 1"):
        generate_graph(100, 2, 4, 2, out_degree_exponent=exponent)
