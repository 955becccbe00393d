"""Temporal sampling through the server: PyG's loaders with input and link times, node times
read from the feature store and never sent whole to the trainer."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from served import ServerProcess, serve_graph
from torch_geometric.data import Data
from torch_geometric.loader import LinkLoader, NodeLoader
from torch_geometric.sampler import NodeSamplerInput

from gnnstore.backend.engine.sampler import SnapshotNeighborSampler
from gnnstore.backend.engine.sampling_engine import SamplingEngine
from gnnstore.backend.engine.topology import TopologySnapshot
from gnnstore.client import RemoteNeighborSampler, connect
from gnnstore.common.errors import InvalidRequestError, NotFoundError

N = 400


@pytest.fixture(scope="module")
def graph() -> Data:
    generator = torch.Generator().manual_seed(11)
    return Data(x=torch.randn(N, 8, generator=generator), edge_index=torch.randint(0, N, (2, 5000), generator=generator),
                time=torch.randperm(N, generator=generator))


@pytest.fixture(scope="module")
def server(graph: Data, tmp_path_factory: pytest.TempPathFactory) -> ServerProcess:
    with serve_graph(graph, tmp_path_factory.mktemp("temporal")) as process:
        yield process


def test_last_matches_the_in_process_engine_and_loaders_respect_seed_times(server: ServerProcess, graph: Data) -> None:
    fs, gs = connect(server.address)
    seeds, seed_time = torch.arange(0, N, 9), torch.arange(0, N, 9) % 300 + 50
    remote = RemoteNeighborSampler(fs, [4, 3], time_attr="time", temporal_strategy="last")
    assert remote.disjoint  # temporal means disjoint, as in PyG
    engine = SamplingEngine(TopologySnapshot.from_data(graph))
    local = SnapshotNeighborSampler(engine, [4, 3], temporal=engine.temporal_index({None: graph.time.numpy()}),
                                    temporal_strategy="last")
    got, want = (s.sample_from_nodes(NodeSamplerInput(None, seeds, time=seed_time)) for s in (remote, local))
    assert torch.equal(got.node, want.node) and torch.equal(got.batch, want.batch)  # 'last' has no randomness
    assert torch.equal(got.edge, want.edge) and torch.equal(got.metadata[1], seed_time)

    sampler = RemoteNeighborSampler(fs, [5, 5], feature_store=fs, time_attr="time")
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=seeds, input_time=seed_time, batch_size=16)
    for batch in loader:  # the stored times come back as the batch's `time` rows, like any feature
        assert torch.equal(batch.time, graph.time[batch.n_id]) and torch.equal(batch.x, graph.x[batch.n_id])
        src, dst = batch.edge_index
        assert (batch.time[src] <= batch.seed_time[batch.batch[dst]]).all()


def test_temporal_link_prediction_batches_hold_no_future_neighbour(server: ServerProcess, graph: Data) -> None:
    fs, gs = connect(server.address)
    link_time = torch.maximum(graph.time[graph.edge_index[0]], graph.time[graph.edge_index[1]])
    late = link_time >= N // 2  # links once both ends exist, late enough for PyG's negative redraws
    sampler = RemoteNeighborSampler(fs, [5, 5], feature_store=fs, time_attr="time")
    loader = LinkLoader((fs, gs), link_sampler=sampler, edge_label_index=(None, graph.edge_index[:, late][:, :96]),
                                edge_label_time=link_time[late][:96], neg_sampling="binary", batch_size=32,
                                shuffle=True)
    batches = list(loader)
    assert len(batches) == 3
    for batch in batches:  # each subtree (batch.batch) is one positive link's and its negative's
        src, dst = batch.edge_index
        assert (batch.time[src] <= batch.edge_label_time[batch.batch[dst]]).all()
        ends = batch.n_id[batch.edge_label_index]
        assert (graph.time[ends].max(0).values <= batch.edge_label_time).all()  # negatives too


def test_bad_time_attributes_are_named(server: ServerProcess) -> None:
    fs, _ = connect(server.address)
    seeds = NodeSamplerInput(None, torch.arange(4))
    with pytest.raises(NotFoundError, match="no node type or edge type has a feature 'when'"):
        RemoteNeighborSampler(fs, [2], time_attr="when").sample_from_nodes(seeds)
    with pytest.raises(InvalidRequestError, match=r"time attribute 'x' of node type None must hold one integer per row \(\[N\] or \[N, 1\]\)"):
        RemoteNeighborSampler(fs, [2], time_attr="x").sample_from_nodes(seeds)
    with pytest.raises(InvalidRequestError, match="temporal_strategy must be one of"):
        RemoteNeighborSampler(fs, [2], time_attr="time", temporal_strategy="first")
    with pytest.raises(InvalidRequestError, match="no time attribute"):
        RemoteNeighborSampler(fs, [2]).sample_from_nodes(
            NodeSamplerInput(None, torch.arange(4), time=torch.zeros(4, dtype=torch.long)))
    with pytest.raises(InvalidRequestError, match="times must be integers, got torch.float32"):
        RemoteNeighborSampler(fs, [2], time_attr="time").sample_from_nodes(
            NodeSamplerInput(None, torch.arange(4), time=torch.zeros(4)))
    with pytest.raises(InvalidRequestError, match="time has 3 entries for 4 seed nodes"):
        RemoteNeighborSampler(fs, [2], time_attr="time").sample_from_nodes(
            NodeSamplerInput(None, torch.arange(4), time=torch.zeros(3, dtype=torch.long)))


def test_new_times_put_through_the_server_are_sampled_by(graph: Data, tmp_path: Path) -> None:
    with serve_graph(graph, tmp_path) as server:
        fs, _ = connect(server.address)
        sampler = RemoteNeighborSampler(fs, [-1], time_attr="time")
        seeds = NodeSamplerInput(None, torch.arange(20), time=torch.zeros(20, dtype=torch.long))
        before = sampler.sample_from_nodes(seeds)
        assert before.edge.numel() <= 20  # at time 0 at most the node with time 0 is a neighbour
        fs.put_tensor(torch.zeros(N, dtype=torch.long), group_name=None, attr_name="time", index=None)
        after = sampler.sample_from_nodes(seeds)  # every node now exists at time 0
        in_degree = torch.bincount(graph.edge_index[1], minlength=N)[:20]
        assert after.edge.numel() == int(in_degree.sum())


def test_concurrent_first_temporal_requests_share_one_index_build(graph: Data, tmp_path: Path) -> None:
    with serve_graph(graph, tmp_path, "--read-only") as server:  # no index yet: the first callers race to build it
        fs, _ = connect(server.address)
        engine = SamplingEngine(TopologySnapshot.from_data(graph))
        local = SnapshotNeighborSampler(engine, [3, 2], temporal=engine.temporal_index({None: graph.time.numpy()}),
                                        temporal_strategy="last")
        seeds = NodeSamplerInput(None, torch.arange(0, N, 13), time=torch.arange(0, N, 13) % 250 + 100)
        want = local.sample_from_nodes(seeds)
        remote = RemoteNeighborSampler(fs, [3, 2], time_attr="time", temporal_strategy="last")
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda _: remote.sample_from_nodes(seeds), range(8)))
        for got in results:
            assert torch.equal(got.node, want.node) and torch.equal(got.edge, want.edge)
        assert server.log.read_text().count("temporal index by 'time' built") == 1


def test_edge_level_times_filter_each_edge_by_its_own_time(tmp_path: Path) -> None:
    generator = torch.Generator().manual_seed(12)
    edge_index = torch.randint(0, N, (2, 5000), generator=generator)
    edge_time = torch.randint(0, 1000, (5000,), generator=generator)
    graph = Data(x=torch.randn(N, 4, generator=generator), edge_index=edge_index, edge_time=edge_time)
    with serve_graph(graph, tmp_path) as server:
        fs, gs = connect(server.address)
        sampler = RemoteNeighborSampler(fs, [5, 5], feature_store=fs, time_attr="edge_time")
        seeds, seed_time = torch.arange(0, N, 4), torch.arange(0, N, 4) * 3
        loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=seeds, input_time=seed_time, batch_size=25)
        for batch in loader:
            assert batch.e_id.numel() > 0
            assert (edge_time[batch.e_id] <= batch.seed_time[batch.batch[batch.edge_index[1]]]).all()
        links = LinkLoader((fs, gs), link_sampler=sampler, edge_label_index=(None, edge_index[:, :64]),
                           edge_label_time=edge_time[:64], batch_size=32)
        for batch in links:
            assert (edge_time[batch.e_id] <= batch.edge_label_time[batch.batch[batch.edge_index[1]]]).all()


def test_a_homogeneous_graphs_times_under_a_group_of_their_own_follow_pyg(tmp_path: Path, graph: Data) -> None:
    """PyG's sampler takes a homogeneous graph's ``time_attr`` from whatever group holds it (its
    upstream temporal tests store it under ``group_name='default'``): node times when it is
    called ``time``, else edge times."""
    plain = Data(x=graph.x, edge_index=graph.edge_index)
    edge_time = torch.randperm(graph.edge_index.size(1), generator=torch.Generator().manual_seed(2))
    with serve_graph(plain, tmp_path) as process:
        fs, _ = connect(process.address)
        fs.put_tensor(graph.time, group_name="default", attr_name="time", index=None)
        fs.put_tensor(edge_time, group_name="default", attr_name="edge_time", index=None)
        engine = SamplingEngine(TopologySnapshot.from_data(graph))
        seeds, seed_time = torch.arange(0, N, 9), torch.arange(0, N, 9) % 300 + 50
        for name, index in (("time", engine.temporal_index({None: graph.time.numpy()})),
                            ("edge_time", engine.temporal_index({}, {None: edge_time.numpy()}))):
            remote = RemoteNeighborSampler(fs, [4, 3], time_attr=name, temporal_strategy="last")
            local = SnapshotNeighborSampler(engine, [4, 3], temporal=index, temporal_strategy="last")
            got, want = (s.sample_from_nodes(NodeSamplerInput(None, seeds, time=seed_time)) for s in (remote, local))
            assert torch.equal(got.node, want.node) and torch.equal(got.edge, want.edge), name
        fs.put_tensor(graph.time, group_name="other", attr_name="time", index=None)  # now two: which one?
        with pytest.raises(NotFoundError, match=r"under 'default', 'other'; PyG reads exactly one"):
            RemoteNeighborSampler(fs, [4, 3], time_attr="time").sample_from_nodes(
                NodeSamplerInput(None, seeds, time=seed_time))
