"""Loaders with num_workers=2 under fork and spawn: each process opens its own channel."""
from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.loader import LinkNeighborLoader, NodeLoader

from gnnstore.client import RemoteNeighborSampler, connect
from served import ServerProcess, requests_made

MULTI_GET = "/gnnstore.v1.FeatureService/MultiGet"


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_node_loader_with_two_workers(homo_server: ServerProcess, homo_graph: Data, context: str) -> None:
    fs, gs = connect(homo_server.address)
    fs.schema()  # the main process holds a live channel before the workers start
    sampler = RemoteNeighborSampler(fs, [4, 2], feature_store=fs)
    seeds = torch.arange(200)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=seeds, batch_size=25,
                        num_workers=2, multiprocessing_context=context)
    before = requests_made(homo_server.address, MULTI_GET)
    input_ids = []
    for batch in loader:
        assert torch.equal(batch.x, homo_graph.x[batch.n_id])
        assert torch.equal(batch.n_id[batch.edge_index], homo_graph.edge_index[:, batch.e_id])
        input_ids.append(batch.input_id)
    assert torch.equal(torch.cat(input_ids).sort().values, seeds)
    assert requests_made(homo_server.address, MULTI_GET) == before  # rows rode with the samples, in the workers


def test_features_fetched_in_the_main_process_still_match(homo_server: ServerProcess, homo_graph: Data) -> None:
    fs, gs = connect(homo_server.address)
    sampler = RemoteNeighborSampler(fs, [4, 2], feature_store=fs)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(60), batch_size=30,
                        num_workers=2, multiprocessing_context="fork", filter_per_worker=False)
    batches = list(loader)
    assert len(batches) == 2
    for batch in batches:  # sampled in a worker, rows read by the main process over MultiGet
        assert torch.equal(batch.x, homo_graph.x[batch.n_id])


def test_link_loader_with_two_spawned_workers(homo_server: ServerProcess, homo_graph: Data) -> None:
    fs, gs = connect(homo_server.address)
    sampler = RemoteNeighborSampler(fs, [3, 2], feature_store=fs)
    links = homo_graph.edge_index[:, :64]
    loader = LinkNeighborLoader((fs, gs), num_neighbors=[3, 2], neighbor_sampler=sampler,
                                edge_label_index=(None, links), batch_size=16, neg_sampling="triplet",
                                num_workers=2, multiprocessing_context="spawn")
    count = 0
    for batch in loader:
        assert torch.equal(batch.x, homo_graph.x[batch.n_id])
        assert torch.equal(batch.x[batch.dst_neg_index], homo_graph.x[batch.n_id[batch.dst_neg_index]])
        count += batch.input_id.numel()
    assert count == 64
