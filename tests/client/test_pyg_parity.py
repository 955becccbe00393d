"""What PyG's own samplers and stores allow, gnnstore allows too (gaps found by PyG's tests)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from pyg_views import features_of
from served import ServerProcess, ingest, serve_graph, start_server
from torch_geometric.data import Data, HeteroData, TensorAttr
from torch_geometric.loader import NodeLoader
from torch_geometric.sampler import NodeSamplerInput

from gnnstore.backend.engine.sampler import SnapshotNeighborSampler
from gnnstore.backend.engine.topology import TopologySnapshot
from gnnstore.client import RemoteNeighborSampler, connect
from gnnstore.stores.data_dir import open_stores


def test_zero_hops_samples_the_seeds_alone_as_in_memory(homo_server: ServerProcess, homo_graph: Data) -> None:
    fs, gs = connect(homo_server.address)
    seeds = torch.tensor([7, 3, 250, 11])
    remote = RemoteNeighborSampler(fs, [], seed=1).sample_from_nodes(NodeSamplerInput(None, seeds))
    local = SnapshotNeighborSampler(TopologySnapshot.from_data(homo_graph), []).sample_from_nodes(
        NodeSamplerInput(None, seeds)
    )
    assert torch.equal(remote.node, seeds) and torch.equal(local.node, seeds)
    assert remote.row.numel() == remote.col.numel() == 0
    assert remote.num_sampled_nodes == local.num_sampled_nodes == [4]

    sampler = RemoteNeighborSampler(fs, [], feature_store=fs)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(40), batch_size=16)
    seen = []
    for batch in loader:  # an MLP baseline's batches: seeds and their rows, no edges
        assert batch.edge_index.shape == (2, 0)
        assert torch.equal(batch.x, homo_graph.x[batch.n_id])
        assert batch.n_id.numel() == batch.batch_size
        seen.append(batch.n_id)
    assert torch.equal(torch.cat(seen), torch.arange(40))


def test_a_graph_of_node_types_without_edge_types_is_served(tmp_path: Path) -> None:
    graph = HeteroData()
    graph["user"].x = torch.randn(30, 4)
    graph["item"].x = torch.randn(20, 4)
    with serve_graph(graph, tmp_path / "data", "--read-only") as server:
        fs, gs = connect(server.address)
        assert gs.get_all_edge_attrs() == []
        for hops in ([], [3, 2]):  # PyG samples such a graph too: every hop finds nothing
            sampler = RemoteNeighborSampler(fs, hops, feature_store=fs)
            loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=("item", torch.arange(20)),
                                batch_size=8)
            batches = list(loader)
            assert [b["item"].batch_size for b in batches] == [8, 8, 4]
            for batch in batches:
                assert torch.equal(batch["item"].x, graph["item"].x[batch["item"].n_id])
                assert batch.edge_types == []


def test_attr_name_none_is_served(tmp_path: Path) -> None:
    graph = HeteroData()
    graph["user"].x = torch.randn(30, 4)
    data_dir = ingest(graph, tmp_path / "data")
    unnamed = torch.randn(30, 2)
    with open_stores(data_dir) as stores:
        features_of(stores)["user", None, None] = unnamed  # as PyG's reference store allows
    with start_server(data_dir, "--read-only") as server:
        fs, _ = connect(server.address)
        assert {(s.attr_name, tuple(s.shape)) for s in fs.schema()} == {("x", (30, 4)), (None, (30, 2))}
        assert torch.equal(fs["user"](), unnamed)
        both = fs.multi_get_tensor([TensorAttr("user", None, torch.tensor([3, 1])),
                                    TensorAttr("user", "x", torch.tensor([3, 1]))])
        assert torch.equal(both[0], unnamed[[3, 1]]) and torch.equal(both[1], graph["user"].x[[3, 1]])
        assert fs.get_tensor_size("user", None) == (30, 2)


def test_a_pair_naming_several_edge_types_is_refused_naming_them(
    hetero_server: ServerProcess, hetero_graph: HeteroData
) -> None:
    from torch_geometric.sampler import EdgeSamplerInput

    from gnnstore.common.errors import InvalidRequestError

    pairs = [(src, dst) for src, _, dst in hetero_graph.edge_types]
    ambiguous = next(pair for pair in pairs if pairs.count(pair) > 1)
    links = EdgeSamplerInput(None, torch.tensor([0]), torch.tensor([0]), input_type=ambiguous)
    with pytest.raises(InvalidRequestError, match="is ambiguous: the graph has"):
        RemoteNeighborSampler(hetero_server.address, [2]).sample_from_edges(links)
