"""``live`` and ``snapshot`` sampling over Neo4j give valid samples: edges exist, degree bounds hold."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch_geometric.sampler import HeteroSamplerOutput, NodeSamplerInput, SamplerOutput

from gnnstore.backend.engine.sampler import Neo4jLiveSampler, SnapshotNeighborSampler
from gnnstore.backend.engine.snapshot_builder import build_snapshot
from gnnstore.common.errors import InvalidRequestError, NotFoundError
from gnnstore.stores.neo4j_graph_store import Neo4jGraphStore

pytestmark = pytest.mark.neo4j

N = 60
FANOUTS = [4, 3]


@pytest.fixture
def graph(neo4j_clean: tuple) -> tuple[Neo4jGraphStore, torch.Tensor, torch.Tensor]:
    """A homogeneous graph with hubs (in-degree up to ~30) and nodes with no in-edges."""
    gen = torch.Generator().manual_seed(0)
    row = torch.randint(N, (400,), generator=gen)
    col = torch.minimum(torch.randint(N, (400,), generator=gen), torch.randint(N, (400,), generator=gen))
    store = Neo4jGraphStore(*neo4j_clean)
    store.put_edges((row, col), None, "coo", (N, N))
    yield store, row, col
    store.close()


def check_sample(out: SamplerOutput, seeds: torch.Tensor, row: torch.Tensor, col: torch.Tensor) -> None:
    """Seeds first; every sampled edge is the stored edge its e_id names; in-degree = min(k, deg)."""
    assert torch.equal(out.node[: len(seeds)], seeds)
    assert out.node.unique().numel() == out.node.numel()
    assert torch.equal(out.node[out.row], row[out.edge]) and torch.equal(out.node[out.col], col[out.edge])
    assert out.edge.unique().numel() == out.edge.numel()  # without replacement
    in_degree = torch.bincount(col, minlength=N)
    assert sum(out.num_sampled_nodes) == out.node.numel()
    assert sum(out.num_sampled_edges) == out.row.numel()
    node_lo, edge_lo = 0, 0
    for hop, k in enumerate(FANOUTS):
        node_hi = node_lo + out.num_sampled_nodes[hop]
        edge_hi = edge_lo + out.num_sampled_edges[hop]
        front = torch.arange(node_lo, node_hi)
        got = torch.bincount(out.col[edge_lo:edge_hi] - node_lo, minlength=len(front))
        assert torch.equal(got, torch.clamp(in_degree[out.node[front]], max=k)), f"hop {hop}"
        assert bool((out.row[edge_lo:edge_hi] < node_hi + out.num_sampled_nodes[hop + 1]).all())
        node_lo, edge_lo = node_hi, edge_hi


def test_live_samples_are_valid(graph: tuple) -> None:
    store, row, col = graph
    sampler = Neo4jLiveSampler(store, FANOUTS)
    assert sampler.num_nodes == N
    seeds = torch.tensor([0, 5, 1, 59, 30])
    for _ in range(3):
        out = sampler.sample_from_nodes(NodeSamplerInput(input_id=torch.arange(5), node=seeds))
        check_sample(out, seeds, row, col)


def test_live_sampling_sees_writes_at_once(graph: tuple) -> None:
    store, _, _ = graph
    sampler = Neo4jLiveSampler(store, [-1])
    new_row, new_col = torch.tensor([7, 8, 9]), torch.tensor([59, 59, 59])
    store.put_edges((new_row, new_col), None, "coo", (N, N))
    out = sampler.sample_from_nodes(NodeSamplerInput(input_id=torch.arange(1), node=torch.tensor([59])))
    assert sorted(out.node[out.row].tolist()) == [7, 8, 9] and torch.equal(out.edge.sort().values, torch.arange(3))


def test_snapshot_samples_from_neo4j_are_valid(graph: tuple, tmp_path: Path) -> None:
    store, row, col = graph
    snapshot = build_snapshot(store, tmp_path / "snapshots", chunk_size=97)
    assert snapshot.version == store.version()
    sampler = SnapshotNeighborSampler(snapshot, FANOUTS, seed=1)
    seeds = torch.tensor([3, 0, 44])
    out = sampler.sample_from_nodes(NodeSamplerInput(input_id=torch.arange(3), node=seeds))
    check_sample(out, seeds, row, col)


def test_hetero_live_samples_follow_edge_types(neo4j_clean: tuple) -> None:
    store = Neo4jGraphStore(*neo4j_clean)
    gen = torch.Generator().manual_seed(1)
    edges = {("author", "writes", "paper"): (torch.randint(10, (50,), generator=gen), torch.randint(20, (50,), generator=gen)),
             ("paper", "cites", "paper"): (torch.randint(20, (80,), generator=gen), torch.randint(20, (80,), generator=gen))}  # fmt: skip
    for et, coo in edges.items():
        store.put_edges(coo, et, "coo", (10 if et[0] == "author" else 20, 20))
    sampler = Neo4jLiveSampler(store, {et: [3, 2] for et in edges})
    out = sampler.sample_from_nodes(
        NodeSamplerInput(input_id=torch.arange(2), node=torch.tensor([4, 11]), input_type="paper")
    )
    assert isinstance(out, HeteroSamplerOutput)
    assert torch.equal(out.node["paper"][:2], torch.tensor([4, 11]))
    for et, (row, col) in edges.items():
        src, dst = out.node[et[0]], out.node[et[2]]
        assert torch.equal(src[out.row[et]], row[out.edge[et]]) and torch.equal(dst[out.col[et]], col[out.edge[et]])
    assert out.num_sampled_nodes["author"][0] == 0 and out.row[("author", "writes", "paper")].numel() > 0
    store.close()


def test_bad_sampler_input_is_refused(graph: tuple) -> None:
    store, _, _ = graph
    with pytest.raises(InvalidRequestError, match="fanouts"):
        Neo4jLiveSampler(store, [2, -3])
    with pytest.raises(NotFoundError, match="edge types"):
        Neo4jLiveSampler(store, {("a", "r", "b"): [2]})
    with pytest.raises(InvalidRequestError, match="outside 0..59"):
        Neo4jLiveSampler(store, [2]).sample_from_nodes(NodeSamplerInput(input_id=torch.arange(1), node=torch.tensor([60])))
