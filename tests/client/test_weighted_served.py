"""Weighted sampling through the server: the weights are a stored edge attribute that never
travels to the trainer, and a seeded request samples what the in-process sampler samples."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from served import ServerProcess, serve_graph
from torch_geometric.data import Data
from torch_geometric.loader import NodeLoader
from torch_geometric.sampler import NodeSamplerInput

from gnnstore.backend.engine.sampler import SnapshotNeighborSampler
from gnnstore.backend.engine.sampling_engine import SamplingEngine
from gnnstore.backend.engine.topology import TopologySnapshot
from gnnstore.client import RemoteNeighborSampler, connect
from gnnstore.common.errors import InvalidRequestError, NotFoundError

N, E = 300, 4000


@pytest.fixture(scope="module")
def graph() -> Data:
    g = torch.Generator().manual_seed(8)
    weight = torch.rand(E, generator=g) * 3
    weight[torch.rand(E, generator=g) < 0.3] = 0.0  # these edges must never be sampled
    return Data(x=torch.randn(N, 4, generator=g), edge_index=torch.randint(0, N, (2, E), generator=g),
                edge_weight=weight, time=torch.arange(N))


@pytest.fixture(scope="module")
def server(graph: Data, tmp_path_factory: pytest.TempPathFactory) -> ServerProcess:
    with serve_graph(graph, tmp_path_factory.mktemp("weighted")) as process:
        yield process


def test_a_seeded_weighted_sample_is_the_in_process_one_and_skips_zero_weights(
    server: ServerProcess, graph: Data
) -> None:
    fs, gs = connect(server.address)
    engine = SamplingEngine(TopologySnapshot.from_data(graph))
    weights = engine.weight_index({None: graph.edge_weight.double().numpy()})
    seeds = NodeSamplerInput(None, torch.arange(0, N, 3))
    for replace in (False, True):
        remote = RemoteNeighborSampler(fs, [6, 3], replace=replace, weight_attr="edge_weight")
        local = SnapshotNeighborSampler(engine, [6, 3], replace=replace, weights=weights, seed=1234)
        got, want = remote.sample_nodes(seeds, seed=1234), local.sample_from_nodes(seeds)
        assert torch.equal(got.node, want.node) and torch.equal(got.edge, want.edge)
        assert (graph.edge_weight[got.edge] > 0).all()

    sampler = RemoteNeighborSampler(fs, [-1], weight_attr="edge_weight", feature_store=fs)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(N), batch_size=50)
    sampled = torch.cat([batch.e_id for batch in loader])
    positive = graph.edge_weight > 0
    assert set(sampled.tolist()) == set(torch.nonzero(positive).flatten().tolist())  # -1: each positive edge


def test_an_unknown_or_unusable_weight_attribute_is_named(server: ServerProcess) -> None:
    fs, _ = connect(server.address)
    seeds = NodeSamplerInput(None, torch.arange(4))
    with pytest.raises(NotFoundError, match="no edge type has an edge feature 'nope'"):
        RemoteNeighborSampler(fs, [2], weight_attr="nope").sample_from_nodes(seeds)
    with pytest.raises(NotFoundError, match="no edge type has an edge feature 'x'"):  # a node attribute
        RemoteNeighborSampler(fs, [2], weight_attr="x").sample_from_nodes(seeds)
    with pytest.raises(InvalidRequestError, match="cannot be combined"):
        RemoteNeighborSampler(fs, [2], weight_attr="edge_weight", time_attr="time")
    fs[(None, None), "bad_weight", None] = -torch.ones(E)
    with pytest.raises(InvalidRequestError, match=r"'bad_weight'.*edge 0 has weight -1.0"):
        RemoteNeighborSampler(fs, [2], weight_attr="bad_weight").sample_from_nodes(seeds)
    assert np.isclose(float(fs[(None, None), "bad_weight", torch.tensor([3])]), -1.0)
