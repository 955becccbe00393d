"""A GNN that needs edge features learns through the server what it learns in memory.

The graph's node features are noise; each edge's attributes carry its destination's class, so
only a model that reads ``edge_attr`` (here ``GINEConv``) can learn the labels.
"""
from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from served import ServerProcess, serve_graph
from torch import Tensor, nn
from torch_geometric.data import Data
from torch_geometric.loader import NodeLoader
from torch_geometric.nn import GINEConv

from gnnstore.backend.engine.sampler import SnapshotNeighborSampler
from gnnstore.backend.engine.sampling_engine import SamplingEngine
from gnnstore.backend.engine.topology import TopologySnapshot
from gnnstore.client import EdgeFeatures, Prefetcher, RemoteNeighborSampler, connect

N, CLASSES, IN_DEGREE = 1500, 4, 6
FANOUTS = [6, 4]


def _graph() -> Data:
    g = torch.Generator().manual_seed(21)
    y = torch.randint(0, CLASSES, (N,), generator=g)
    dst = torch.arange(N).repeat_interleave(IN_DEGREE)
    src = torch.randint(0, N, (dst.numel(),), generator=g)
    signal = F.one_hot(y[dst], CLASSES).float()
    edge_attr = signal + 0.8 * torch.randn(dst.numel(), CLASSES, generator=g)
    train = torch.rand(N, generator=g) < 0.6
    return Data(x=torch.randn(N, 8, generator=g), y=y, edge_index=torch.stack([src, dst]),
                edge_attr=edge_attr, train_mask=train, test_mask=~train)


class _Gine(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.ModuleList(
            GINEConv(nn.Sequential(nn.Linear(d, 32), nn.ReLU(), nn.Linear(32, 32)), edge_dim=CLASSES)
            for d in (8, 32)
        )
        self.head = nn.Linear(32, CLASSES)

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor) -> Tensor:
        for conv in self.convs:
            x = conv(x, edge_index, edge_attr).relu()
        return self.head(x)


def _train_and_test(loader_for: Callable[[Tensor, bool], NodeLoader], data: Data, use_edges: bool = True) -> float:
    """Test accuracy after a few epochs; without ``use_edges`` the edge attributes are zeros."""
    torch.manual_seed(0)
    model = _Gine()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    ids = torch.arange(N)

    def step(batch: Data) -> Tensor:
        edge_attr = batch.edge_attr if use_edges else torch.zeros_like(batch.edge_attr)
        return model(batch.x, batch.edge_index, edge_attr)[: batch.batch_size]

    for _ in range(4):
        model.train()
        for batch in loader_for(ids[data.train_mask], True):
            optimizer.zero_grad()
            F.cross_entropy(step(batch), batch.y[: batch.batch_size]).backward()
            optimizer.step()
    model.eval()
    correct = 0
    with torch.no_grad():
        for batch in loader_for(ids[data.test_mask], False):
            correct += int((step(batch).argmax(-1) == batch.y[: batch.batch_size]).sum())
    return correct / int(data.test_mask.sum())


@pytest.fixture(scope="module")
def graph() -> Data:
    return _graph()


@pytest.fixture(scope="module")
def server(graph: Data, tmp_path_factory: pytest.TempPathFactory) -> ServerProcess:
    with serve_graph(graph, tmp_path_factory.mktemp("gine")) as process:
        yield process


def test_gine_trained_through_the_server_matches_in_memory(server: ServerProcess, graph: Data) -> None:
    fs, gs = connect(server.address, cache_bytes=N * 8 * 4 // 5)
    features = EdgeFeatures(fs)

    def remote(seeds: Tensor, shuffle: bool) -> Prefetcher:
        sampler = RemoteNeighborSampler(fs, FANOUTS, feature_store=fs)
        loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=seeds, batch_size=64,
                            shuffle=shuffle, transform=features)
        return Prefetcher(loader, depth=2)

    engine = SamplingEngine(TopologySnapshot.from_data(graph))

    def in_memory(seeds: Tensor, shuffle: bool) -> NodeLoader:  # PyG slices edge_attr by e_id itself
        return NodeLoader(graph, node_sampler=SnapshotNeighborSampler(engine, FANOUTS), input_nodes=seeds,
                          batch_size=64, shuffle=shuffle)

    through_server = _train_and_test(remote, graph)
    local = _train_and_test(in_memory, graph)
    blind = _train_and_test(in_memory, graph, use_edges=False)
    print(f"GINE test accuracy: through the server {through_server:.3f}, in memory {local:.3f}, blind {blind:.3f}")
    assert local >= 0.8, f"in memory GINE reached only {local:.3f}"
    assert abs(through_server - local) <= 0.03, f"through the server {through_server:.3f} vs in memory {local:.3f}"
    assert blind <= 0.4, f"without edge features the labels should be out of reach, got {blind:.3f}"
