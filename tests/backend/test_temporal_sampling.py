"""Temporal sampling in the engine: against a by-definition reference of PyG's semantics."""
from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data, HeteroData
from torch_geometric.sampler import EdgeSamplerInput, NegativeSampling, NodeSamplerInput

from gnnstore.backend.engine.sampler import SamplingEngine, SnapshotNeighborSampler
from gnnstore.backend.engine.topology import TopologySnapshot
from gnnstore.common.errors import InvalidRequestError

N = 300


@pytest.fixture(scope="module")
def graph() -> tuple[Data, torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    data = Data(edge_index=torch.randint(0, N, (2, 6000), generator=generator), num_nodes=N)
    return data, torch.randperm(N, generator=generator)  # distinct times: "the last k" is one set


def _reference(data: Data, time: torch.Tensor, seeds: list[int], seed_time: list[int], fanouts: list[int],
               edge_time: torch.Tensor | None = None):
    """Per seed ``b``: its subtree's ``(b, node)`` and ``(b, source, destination, e_id)``, picking the
    ``k`` latest in-neighbours no later than the seed time (all of them for -1); with
    ``edge_time``, the ``k`` latest in-edges by their own times."""
    src, dst = data.edge_index.tolist()
    if edge_time is not None:
        time = edge_time
    nodes, edges = set(), set()
    for b, (seed, t) in enumerate(zip(seeds, seed_time)):
        seen, frontier = {seed}, [seed]
        nodes.add((b, seed))
        for k in fanouts:
            new = []
            for v in frontier:
                allowed = sorted(
                    (int(time[e if edge_time is not None else u]), u, e)
                    for e, (u, w) in enumerate(zip(src, dst))
                    if w == v and time[e if edge_time is not None else u] <= t
                )
                for _, u, e in (allowed if k < 0 else allowed[-k:] if k else []):
                    edges.add((b, u, v, e))
                    if u not in seen:
                        seen.add(u)
                        new.append(u)
                        nodes.add((b, u))
            frontier = new
    return nodes, edges


def _sampled(out) -> tuple[set, set]:  # noqa: ANN001
    node, batch = out.node.tolist(), out.batch.tolist()
    nodes = set(zip(batch, node))
    edges = {(batch[c], node[r], node[c], e) for r, c, e in zip(out.row.tolist(), out.col.tolist(), out.edge.tolist())}
    assert len(nodes) == len(node)  # a node appears once per subtree
    return nodes, edges


@pytest.mark.parametrize("fanouts", [[3, 2], [-1, 2], [5, 0, 4]])
def test_last_picks_exactly_the_latest_allowed_neighbours(graph: tuple[Data, torch.Tensor], fanouts: list[int]) -> None:
    data, time = graph
    engine = SamplingEngine(TopologySnapshot.from_data(data))
    sampler = SnapshotNeighborSampler(engine, fanouts, temporal=engine.temporal_index({None: time.numpy()}),
                                      temporal_strategy="last")
    seeds, seed_time = list(range(0, N, 7)), [(17 * i) % N for i in range(0, N, 7)]
    out = sampler.sample_from_nodes(NodeSamplerInput(None, torch.tensor(seeds), time=torch.tensor(seed_time)))
    assert _sampled(out) == _reference(data, time, seeds, seed_time, fanouts)
    assert out.metadata[1].tolist() == seed_time


def test_uniform_draws_only_allowed_neighbours_and_all_of_them_for_minus_one(graph: tuple[Data, torch.Tensor]) -> None:
    data, time = graph
    engine = SamplingEngine(TopologySnapshot.from_data(data))
    index = engine.temporal_index({None: time.numpy()})
    seeds = torch.arange(0, N, 3)
    every = SnapshotNeighborSampler(engine, [-1, -1], temporal=index)
    out = every.sample_from_nodes(NodeSamplerInput(None, seeds))  # seed times: the seeds' own times
    assert _sampled(out) == _reference(data, time, seeds.tolist(), time[seeds].tolist(), [-1, -1])
    sampler = SnapshotNeighborSampler(engine, [4, 3], temporal=index, seed=1)
    seed_time = torch.randint(0, N, (seeds.numel(),), generator=torch.Generator().manual_seed(0))
    out = sampler.sample_from_nodes(NodeSamplerInput(None, seeds, time=seed_time))
    picked_time = time[out.node[out.row]]
    assert (picked_time <= seed_time[out.batch[out.col]]).all()
    _, allowed = _reference(data, time, seeds.tolist(), seed_time.tolist(), [-1, -1])
    _, edges = _sampled(out)
    assert edges <= allowed and len(edges) > seeds.numel()
    per_node = torch.bincount(out.col[: out.num_sampled_edges[0]], minlength=seeds.numel())
    for b, v in enumerate(seeds.tolist()):  # the first hop takes min(4, allowed in-degree) of each seed
        degree = len({e for (tree, _, w, e) in allowed if tree == b and w == v})
        assert per_node[b] == min(4, degree)


def test_temporal_links_and_negatives_respect_link_times(graph: tuple[Data, torch.Tensor]) -> None:
    data, time = graph
    engine = SamplingEngine(TopologySnapshot.from_data(data))
    sampler = SnapshotNeighborSampler(engine, [5, 5], temporal=engine.temporal_index({None: time.numpy()}))
    late = data.edge_index[:, torch.maximum(time[data.edge_index[0]], time[data.edge_index[1]]) >= 0.9 * N]
    row, col = late[:, :64]  # late links: PyG's greedy redraw of too-late negatives then succeeds
    link_time = torch.maximum(time[row], time[col])  # each link exists once both ends do
    torch.manual_seed(0)
    out = sampler.sample_from_edges(EdgeSamplerInput(None, row, col, time=link_time),
                                    NegativeSampling("binary", 1))
    assert out.batch is not None  # temporal is disjoint; PyG maps each subtree to its positive link
    assert (time[out.node[out.row]] <= link_time[out.batch[out.col]]).all()
    edge_label_index, label_time = out.metadata[1], out.metadata[-1]
    assert torch.equal(label_time, link_time.repeat(2))  # a negative has its positive's time
    negatives = out.node[edge_label_index[1, 64:]]  # local ids of the negatives' destinations
    assert (time[negatives] <= link_time).all()
    with pytest.raises(InvalidRequestError, match="needs both a time attribute"):
        sampler.sample_from_edges(EdgeSamplerInput(None, row, col))


def test_hetero_filters_only_types_with_times_and_names_bad_input() -> None:
    data = HeteroData()
    data["user"].num_nodes, data["item"].num_nodes = 40, 60
    generator = torch.Generator().manual_seed(5)
    data["user", "buys", "item"].edge_index = torch.stack([torch.randint(0, 40, (400,), generator=generator),
                                                         torch.randint(0, 60, (400,), generator=generator)])
    data["item", "rev_buys", "user"].edge_index = data["user", "buys", "item"].edge_index.flip(0)
    engine = SamplingEngine(TopologySnapshot.from_data(data))
    item_time = torch.randperm(60, generator=generator)
    index = engine.temporal_index({"item": item_time.numpy()})  # users have no times: not filtered
    sampler = SnapshotNeighborSampler(engine, [-1, -1], temporal=index)
    out = sampler.sample_from_nodes(NodeSamplerInput(None, torch.arange(20), time=torch.full((20,), 30),
                                                     input_type="user"))
    items = out.node["item"]
    assert items.numel() and (item_time[items] <= 30).all()
    users_seen = out.node["user"][20:]
    assert users_seen.numel()  # reached through items, unfiltered
    with pytest.raises(InvalidRequestError, match="seeds of node type 'user' have no time attribute"):
        sampler.sample_from_nodes(NodeSamplerInput(None, torch.arange(3), input_type="user"))
    with pytest.raises(InvalidRequestError, match="one integer per seed"):
        sampler.sample_from_nodes(NodeSamplerInput(None, torch.arange(3), time=torch.zeros(2, dtype=torch.long),
                                                   input_type="user"))
    with pytest.raises(InvalidRequestError, match="temporal_strategy must be one of"):
        SnapshotNeighborSampler(engine, [2], temporal=index, temporal_strategy="first")
    with pytest.raises(InvalidRequestError, match="has 60 nodes but 5 times"):
        engine.temporal_index({"item": item_time[:5].numpy()})
    plain = SnapshotNeighborSampler(engine, [2])
    with pytest.raises(InvalidRequestError, match="no time attribute"):
        plain.sample_from_nodes(NodeSamplerInput(None, torch.arange(3), time=torch.zeros(3), input_type="user"))


@pytest.mark.parametrize("fanouts", [[3, 2], [-1, 2]])
def test_edge_times_pick_the_latest_allowed_edges_by_their_own_times(
    graph: tuple[Data, torch.Tensor], fanouts: list[int]
) -> None:
    data, node_time = graph
    edge_time = torch.randperm(data.num_edges, generator=torch.Generator().manual_seed(4))
    engine = SamplingEngine(TopologySnapshot.from_data(data))
    index = engine.temporal_index({}, {None: edge_time.numpy()})
    seeds, seed_time = list(range(0, N, 25)), [int(t) for t in torch.arange(0, N, 25) * 20]
    sampler = SnapshotNeighborSampler(engine, fanouts, temporal=index, temporal_strategy="last")
    out = sampler.sample_from_nodes(NodeSamplerInput(None, torch.tensor(seeds), time=torch.tensor(seed_time)))
    assert _sampled(out) == _reference(data, node_time, seeds, seed_time, fanouts, edge_time)
    uniform = SnapshotNeighborSampler(engine, [4, 4], temporal=index).sample_from_nodes(
        NodeSamplerInput(None, torch.tensor(seeds), time=torch.tensor(seed_time)))
    assert (edge_time[uniform.edge] <= torch.tensor(seed_time)[uniform.batch[uniform.col]]).all()
    with pytest.raises(InvalidRequestError, match="have no time attribute; give seed times"):
        sampler.sample_from_nodes(NodeSamplerInput(None, torch.tensor(seeds)))  # edge times give seeds none
    with pytest.raises(InvalidRequestError, match=f"has {data.num_edges} edge ids but 3 times"):
        engine.temporal_index({}, {None: edge_time[:3].numpy()})
