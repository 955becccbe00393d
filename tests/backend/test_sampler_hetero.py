"""Heterogeneous sampling (3 node types, 6 edge types with reverses): invariants, fanout forms, loaders."""
from __future__ import annotations

import pytest
import torch
from sampler_checks import check_batch, hetero_graph
from torch_geometric.data import HeteroData
from torch_geometric.loader import LinkNeighborLoader, NeighborLoader
from torch_geometric.sampler import EdgeSamplerInput, NegativeSampling, NumNeighbors

from gnnstore.backend.engine.sampler import SamplingEngine, SnapshotNeighborSampler, to_pyg
from gnnstore.backend.engine.topology import TopologySnapshot
from gnnstore.common.errors import InvalidRequestError, NotFoundError


@pytest.fixture(scope="module")
def graph() -> HeteroData:
    return hetero_graph(seed=3)


@pytest.fixture(scope="module")
def engine(graph: HeteroData) -> SamplingEngine:
    return SamplingEngine(TopologySnapshot.from_data(graph))


def _coo(graph: HeteroData) -> dict:
    return {et: tuple(graph[et].edge_index) for et in graph.edge_types}


def _counts(graph: HeteroData) -> dict:
    return {nt: graph[nt].num_nodes for nt in graph.node_types}


def _per_type(graph: HeteroData, hops: list[int]) -> dict:
    """Distinct fanouts per edge type so a mix-up between types shows."""
    return {et: [k if k < 0 else k + i % 3 for k in hops] for i, et in enumerate(graph.edge_types)}


@pytest.mark.parametrize("hops", [[4, 2], [-1, 3], [20, 0]])
@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("disjoint", [False, True])
def test_every_batch_keeps_the_invariants_per_type(
    graph: HeteroData, engine: SamplingEngine, hops: list[int], replace: bool, disjoint: bool
) -> None:
    fanouts = _per_type(graph, hops)
    for start in range(0, 120, 30):
        seeds = {"paper": torch.arange(start, start + 30).flip(0), "venue": torch.tensor([start % 7])}
        out = to_pyg(engine.sample(seeds, fanouts, replace=replace, disjoint=disjoint, random_seed=start))
        assert set(out.node) == set(graph.node_types) and set(out.row) == set(graph.edge_types)
        check_batch(out, _coo(graph), _counts(graph), fanouts, seeds, replace=replace, disjoint=disjoint)


def test_fanout_forms_pyg_accepts(graph: HeteroData, engine: SamplingEngine) -> None:
    as_list = engine.fanouts([3, 2])
    assert as_list.per_edge_type == {et: (3, 2) for et in graph.edge_types}
    as_strings = engine.fanouts({"__".join(et): [1] for et in graph.edge_types})
    assert as_strings.per_edge_type == {et: (1,) for et in graph.edge_types}
    with_default = SnapshotNeighborSampler(engine, NumNeighbors({graph.edge_types[0]: [5]}, default=[1])).fanouts
    assert with_default.per_edge_type[graph.edge_types[0]] == (5,)
    assert with_default.per_edge_type[graph.edge_types[1]] == (1,)


def test_bad_fanouts_name_the_edge_type(graph: HeteroData, engine: SamplingEngine) -> None:
    full = {et: [2, 2] for et in graph.edge_types}
    with pytest.raises(NotFoundError, match="'paper', 'likes', 'paper'"):
        engine.fanouts({**full, ("paper", "likes", "paper"): [1, 1]})
    with pytest.raises(InvalidRequestError, match="no list for edge types"):
        engine.fanouts({graph.edge_types[0]: [1]})
    with pytest.raises(InvalidRequestError, match="one length"):
        engine.fanouts({**full, graph.edge_types[2]: [1]})
    with pytest.raises(InvalidRequestError, match=r"hop 0: fanout must be an int >= -1"):
        engine.fanouts({**full, graph.edge_types[1]: [-5, 1]})


def test_bad_seeds_name_the_node_type(engine: SamplingEngine) -> None:
    with pytest.raises(NotFoundError, match="node type 'journal' is not in the graph"):
        engine.sample({"journal": torch.tensor([0])}, [1])
    with pytest.raises(InvalidRequestError, match=r"seed id 7 of node type 'venue' is out of range \[0, 7\)"):
        engine.sample({"venue": torch.tensor([6, 7])}, [1])
    with pytest.raises(InvalidRequestError, match="takes seeds as a dict"):
        engine.sample(torch.tensor([0]), [1])


def test_neighbor_loader_builds_hetero_batches(graph: HeteroData, engine: SamplingEngine) -> None:
    sampler = SnapshotNeighborSampler(engine, [5, 3], seed=0)
    loader = NeighborLoader(graph, [5, 3], neighbor_sampler=sampler, input_nodes=("author", torch.arange(40)),
                            batch_size=16)
    for batch in loader:
        assert torch.equal(batch["author"].n_id[: batch["author"].batch_size], batch["author"].input_id)
        for et in graph.edge_types:
            local = batch[et].edge_index
            glob = torch.stack([batch[et[0]].n_id[local[0]], batch[et[-1]].n_id[local[1]]])
            assert torch.equal(glob, graph[et].edge_index[:, batch[et].e_id])
        for nt in graph.node_types:
            assert torch.equal(batch[nt].x, graph[nt].x[batch[nt].n_id])


@pytest.mark.parametrize("edge_type", [("author", "writes", "paper"), ("paper", "cites", "paper")])
@pytest.mark.parametrize("mode", ["binary", "triplet"])
@pytest.mark.parametrize("disjoint", [False, True])
def test_link_loader_on_distinct_and_equal_endpoint_types(
    graph: HeteroData, engine: SamplingEngine, edge_type: tuple, mode: str, disjoint: bool
) -> None:
    sampler = SnapshotNeighborSampler(engine, [3, 2], disjoint=disjoint, seed=2)
    label_index = graph[edge_type].edge_index[:, :60]
    loader = LinkNeighborLoader(
        graph, [3, 2], neighbor_sampler=sampler, edge_label_index=(edge_type, label_index),
        batch_size=20, neg_sampling=NegativeSampling(mode, 2),
    )
    src_t, dst_t = edge_type[0], edge_type[-1]
    for batch in loader:
        pos = label_index[:, batch[edge_type].input_id]
        if mode == "binary":
            eli = batch[edge_type].edge_label_index
            p = pos.size(1)
            assert torch.equal(batch[src_t].n_id[eli[0, :p]], pos[0])
            assert torch.equal(batch[dst_t].n_id[eli[1, :p]], pos[1])
            assert int(eli[0].max()) < batch[src_t].num_nodes and int(eli[1].max()) < batch[dst_t].num_nodes
        else:
            assert torch.equal(batch[src_t].n_id[batch[src_t].src_index], pos[0])
            assert torch.equal(batch[dst_t].n_id[batch[dst_t].dst_pos_index], pos[1])
            assert batch[dst_t].dst_neg_index.shape == (pos.size(1), 2)


def test_negatives_of_a_hetero_link_are_the_ids_pyg_drew(engine: SamplingEngine) -> None:
    et = ("author", "writes", "paper")
    sampler = SnapshotNeighborSampler(engine, [2])
    neg = NegativeSampling("triplet", 3)
    row, col = torch.tensor([3, 70]), torch.tensor([5, 119])
    torch.manual_seed(9)
    out = sampler.sample_from_edges(EdgeSamplerInput(None, row, col, input_type=et), neg)
    torch.manual_seed(9)
    dst_neg = neg.sample(6, "dst", 120)
    _, src_index, pos_index, neg_index, _ = out.metadata
    assert torch.equal(out.node["author"][src_index], row)
    assert torch.equal(out.node["paper"][pos_index], col)
    assert torch.equal(out.node["paper"][neg_index], dst_neg.view(2, 3))


def test_link_input_with_an_unknown_endpoint_type_is_refused(engine: SamplingEngine) -> None:
    sampler = SnapshotNeighborSampler(engine, [2])
    with pytest.raises(NotFoundError, match="'journal'"):
        sampler.sample_from_edges(EdgeSamplerInput(None, torch.tensor([0]), torch.tensor([0]),
                                                   input_type=("paper", "in", "journal")))
    with pytest.raises(InvalidRequestError, match="link source id 80 of node type 'author'"):
        sampler.sample_from_edges(EdgeSamplerInput(None, torch.tensor([80]), torch.tensor([0]),
                                                   input_type=("author", "writes", "paper")))
