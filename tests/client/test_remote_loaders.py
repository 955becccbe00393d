"""PyG's loaders over a served graph, from an embedded database and from Neo4j: every batch equals the store, one
round trip per batch."""
from __future__ import annotations

import pytest
import torch
from served import ServerProcess, requests_made
from torch_geometric.data import Data, HeteroData
from torch_geometric.loader import LinkNeighborLoader, NeighborLoader, NodeLoader
from torch_geometric.sampler import NegativeSampling, NodeSamplerInput

from gnnstore.client import Prefetcher, RemoteNeighborSampler, connect

MULTI_GET = "/gnnstore.v1.FeatureService/MultiGet"


def _check_homo_batch(batch: Data, graph: Data) -> None:
    assert torch.equal(batch.x, graph.x[batch.n_id])
    assert torch.equal(batch.y, graph.y[batch.n_id])
    assert torch.equal(batch.n_id[batch.edge_index], graph.edge_index[:, batch.e_id])


@pytest.mark.parametrize("with_features", [True, False])
def test_node_loader_batches_equal_the_store(
    served_homo: ServerProcess, homo_graph: Data, with_features: bool
) -> None:
    fs, gs = connect(served_homo.address)
    sampler = RemoteNeighborSampler(fs, [5, 3], feature_store=fs if with_features else None)
    seeds = torch.arange(10, 130)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=seeds, batch_size=32)
    before = requests_made(served_homo.address, MULTI_GET)
    batches = 0
    for i, batch in enumerate(loader):
        _check_homo_batch(batch, homo_graph)
        size = batch.batch_size
        assert torch.equal(batch.n_id[:size], seeds[32 * i : 32 * i + size])  # seeds first, global
        assert torch.equal(batch.input_id, torch.arange(32 * i, 32 * i + size))
        assert batch.e_id.dtype == torch.long
        batches += 1
    extra_calls = requests_made(served_homo.address, MULTI_GET) - before
    assert extra_calls == (0 if with_features else batches)  # rows rode with the sample


def test_neighbor_loader_accepts_the_remote_sampler(served_homo: ServerProcess, homo_graph: Data) -> None:
    fs, gs = connect(served_homo.address)
    sampler = RemoteNeighborSampler(gs, [4, 2], feature_store=fs)
    loader = NeighborLoader((fs, gs), num_neighbors=[4, 2], neighbor_sampler=sampler,
                            input_nodes=torch.arange(50), batch_size=25)
    batches = list(loader)
    assert len(batches) == 2
    for batch in batches:
        _check_homo_batch(batch, homo_graph)


def test_disjoint_sampling_gives_each_seed_its_tree(served_homo: ServerProcess, homo_graph: Data) -> None:
    fs, gs = connect(served_homo.address)
    sampler = RemoteNeighborSampler(fs, [3, 2], disjoint=True, feature_store=fs)
    batch = next(iter(NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(16), batch_size=16)))
    _check_homo_batch(batch, homo_graph)
    assert batch.batch.shape == batch.n_id.shape
    assert torch.equal(batch.batch[:16], torch.arange(16))


def test_seeds_without_input_id_sample_as_pygs_own_sampler_allows(served_homo: ServerProcess) -> None:
    sampler = RemoteNeighborSampler(served_homo.address, [3, 2])
    seeds = torch.tensor([5, 9, 2])
    out = sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=seeds))
    assert torch.equal(out.node[:3], seeds)
    assert out.metadata[0] is None  # PyG's metadata is (input_id, time)


def test_a_seed_repeats_the_batches(served_homo: ServerProcess) -> None:
    fs, gs = connect(served_homo.address)

    def first_batch() -> Data:
        sampler = RemoteNeighborSampler(fs, [5, 5], seed=7)
        loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(64), batch_size=64)
        return next(iter(loader))

    a, b = first_batch(), first_batch()
    assert torch.equal(a.n_id, b.n_id) and torch.equal(a.e_id, b.e_id)


def test_link_loader_binary_negatives_are_local_and_carry_features(
    served_homo: ServerProcess, homo_graph: Data
) -> None:
    fs, gs = connect(served_homo.address)
    sampler = RemoteNeighborSampler(fs, [4, 2], feature_store=fs)
    links = homo_graph.edge_index[:, :90]
    loader = LinkNeighborLoader((fs, gs), num_neighbors=[4, 2], neighbor_sampler=sampler,
                                edge_label_index=(None, links), batch_size=32,
                                neg_sampling=NegativeSampling("binary", 2))
    num_nodes = homo_graph.num_nodes
    for i, batch in enumerate(loader):
        _check_homo_batch(batch, homo_graph)
        num_pos = batch.input_id.numel()
        label_index = batch.edge_label_index  # local
        assert label_index.shape == (2, 3 * num_pos)
        assert torch.equal(batch.n_id[label_index[:, :num_pos]], links[:, 32 * i : 32 * i + num_pos])
        assert torch.equal(batch.edge_label, torch.cat([torch.ones(num_pos), torch.zeros(2 * num_pos)]))
        negatives = batch.n_id[label_index[:, num_pos:]]  # global ids of the negatives
        assert int(negatives.max()) < num_nodes
        assert torch.equal(batch.x[label_index[1]], homo_graph.x[batch.n_id[label_index[1]]])


def test_a_prefetched_link_loader_gives_the_plain_loops_batches(
    served_homo: ServerProcess, homo_graph: Data
) -> None:
    fs, gs = connect(served_homo.address)

    def link_loader() -> LinkNeighborLoader:
        sampler = RemoteNeighborSampler(fs, [4, 2], feature_store=fs, seed=3)
        return LinkNeighborLoader((fs, gs), num_neighbors=[4, 2], neighbor_sampler=sampler,
                                  edge_label_index=(None, homo_graph.edge_index[:, :100]), batch_size=20,
                                  neg_sampling=NegativeSampling("binary", 1))

    plain, prefetched = list(link_loader()), list(Prefetcher(link_loader(), depth=3))
    assert len(plain) == len(prefetched) == 5
    for a, b in zip(plain, prefetched):
        _check_homo_batch(b, homo_graph)
        assert torch.equal(a.n_id, b.n_id) and torch.equal(a.edge_label_index, b.edge_label_index)
        assert torch.equal(a.edge_label, b.edge_label)


@pytest.mark.parametrize("amount", [1, 3])
def test_link_loader_triplet_indices_map_to_global_ids(
    served_homo: ServerProcess, homo_graph: Data, amount: int
) -> None:
    fs, gs = connect(served_homo.address)
    sampler = RemoteNeighborSampler(fs, [4, 2], feature_store=fs)
    links = homo_graph.edge_index[:, 100:160]
    loader = LinkNeighborLoader((fs, gs), num_neighbors=[4, 2], neighbor_sampler=sampler,
                                edge_label_index=(None, links), batch_size=20,
                                neg_sampling=NegativeSampling("triplet", amount))
    for i, batch in enumerate(loader):
        _check_homo_batch(batch, homo_graph)
        num_pos = batch.input_id.numel()
        pos = links[:, 20 * i : 20 * i + num_pos]
        assert torch.equal(batch.n_id[batch.src_index], pos[0])
        assert torch.equal(batch.n_id[batch.dst_pos_index], pos[1])
        assert batch.dst_neg_index.shape == ((num_pos,) if amount == 1 else (num_pos, amount))
        neg_global = batch.n_id[batch.dst_neg_index]  # the negatives' global ids
        assert torch.equal(batch.x[batch.dst_neg_index], homo_graph.x[neg_global])
        assert "edge_label_index" not in batch


def _check_hetero_batch(batch: HeteroData, graph: HeteroData) -> None:
    for node_type in graph.node_types:
        n_id = batch[node_type].n_id
        assert torch.equal(batch[node_type].x, graph[node_type].x[n_id])
    assert torch.equal(batch["institution"].year, graph["institution"].year[batch["institution"].n_id])
    for edge_type in graph.edge_types:
        src, _, dst = edge_type
        local = batch[edge_type].edge_index
        glob = torch.stack([batch[src].n_id[local[0]], batch[dst].n_id[local[1]]])
        assert torch.equal(glob, graph[edge_type].edge_index[:, batch[edge_type].e_id]), edge_type


def test_hetero_node_loader(served_hetero: ServerProcess, hetero_graph: HeteroData) -> None:
    fs, gs = connect(served_hetero.address)
    sampler = RemoteNeighborSampler(fs, [3, 2], feature_store=fs)
    seeds = torch.arange(5, 65)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=("paper", seeds), batch_size=16)
    before = requests_made(served_hetero.address, MULTI_GET)
    for i, batch in enumerate(loader):
        _check_hetero_batch(batch, hetero_graph)
        size = batch["paper"].batch_size
        assert torch.equal(batch["paper"].n_id[:size], seeds[16 * i : 16 * i + size])
        assert torch.equal(batch["paper"].y, hetero_graph["paper"].y[batch["paper"].n_id])
    assert requests_made(served_hetero.address, MULTI_GET) == before


def test_hetero_node_loader_with_per_edge_type_fanouts(
    served_hetero: ServerProcess, hetero_graph: HeteroData
) -> None:
    fs, gs = connect(served_hetero.address)
    fanouts = {et: [2, 1] for et in hetero_graph.edge_types}
    fanouts[("paper", "cites", "paper")] = [-1, 0]
    sampler = RemoteNeighborSampler(fs, fanouts, feature_store=fs)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes="author", batch_size=25)
    batches = list(loader)
    assert len(batches) == 2  # every author, their count inferred from the edge sizes
    for batch in batches:
        _check_hetero_batch(batch, hetero_graph)


@pytest.mark.parametrize("mode", ["binary", "triplet"])
@pytest.mark.parametrize("edge_type", [("author", "writes", "paper"), ("paper", "cites", "paper")])
def test_hetero_link_loader(
    served_hetero: ServerProcess, hetero_graph: HeteroData, mode: str, edge_type: tuple
) -> None:
    fs, gs = connect(served_hetero.address)
    sampler = RemoteNeighborSampler(fs, [3, 2], feature_store=fs)
    src, _, dst = edge_type
    links = hetero_graph[edge_type].edge_index[:, :40]
    loader = LinkNeighborLoader((fs, gs), num_neighbors=[3, 2], neighbor_sampler=sampler,
                                edge_label_index=(edge_type, links), batch_size=16,
                                neg_sampling=NegativeSampling(mode, 2))
    for i, batch in enumerate(loader):
        _check_hetero_batch(batch, hetero_graph)
        num_pos = batch[edge_type].input_id.numel()
        pos = links[:, 16 * i : 16 * i + num_pos]
        if mode == "binary":
            label_index = batch[edge_type].edge_label_index
            assert torch.equal(batch[src].n_id[label_index[0, :num_pos]], pos[0])
            assert torch.equal(batch[dst].n_id[label_index[1, :num_pos]], pos[1])
            assert label_index.size(1) == 3 * num_pos
        else:
            assert torch.equal(batch[src].n_id[batch[src].src_index], pos[0])
            assert torch.equal(batch[dst].n_id[batch[dst].dst_pos_index], pos[1])
            neg_global = batch[dst].n_id[batch[dst].dst_neg_index]
            assert neg_global.shape == (num_pos, 2)
            assert torch.equal(batch[dst].x[batch[dst].dst_neg_index], hetero_graph[dst].x[neg_global])
