"""Edge features through the server: ingested from PyG objects, stored by edge id, and added to
every batch by ``EdgeFeatures`` from the rows that rode with its sample."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from served import ServerProcess, ingest_into_neo4j, requests_made, serve_graph, start_neo4j_server
from torch_geometric.data import Data, HeteroData
from torch_geometric.loader import LinkNeighborLoader, NodeLoader

from gnnstore.client import Connection, EdgeFeatures, Prefetcher, RemoteNeighborSampler, connect
from gnnstore.client.feature_cache import FeatureCache
from gnnstore.client.hot_set import warm_hot_set
from gnnstore.common.errors import InvalidRequestError, NotFoundError
from gnnstore.proto import graph_pb2
from gnnstore.proto.codec import ids_to_proto
from gnnstore.proto.feature_request import IdBitmap, compact_ids, feature_request_to_proto
from gnnstore.proto.sampling_options import options_to_proto

N, E = 300, 3000
MULTIGET = "/gnnstore.v1.FeatureService/MultiGet"


def _homogeneous() -> Data:
    g = torch.Generator().manual_seed(5)
    return Data(
        x=torch.randn(N, 4, generator=g),
        edge_index=torch.randint(0, N, (2, E), generator=g),
        edge_attr=torch.randn(E, 3, generator=g),
        edge_weight=torch.rand(E, generator=g),
    )


def _heterogeneous() -> HeteroData:
    g = torch.Generator().manual_seed(6)
    data = HeteroData()
    data["user"].x = torch.randn(100, 4, generator=g)
    data["item"].x = torch.randn(80, 2, generator=g)
    data["user", "buys", "item"].edge_index = torch.stack(
        [torch.randint(0, 100, (900,), generator=g), torch.randint(0, 80, (900,), generator=g)])
    data["user", "buys", "item"].edge_attr = torch.arange(900 * 2, dtype=torch.float32).view(900, 2)
    data["item", "rev_buys", "user"].edge_index = data["user", "buys", "item"].edge_index.flip(0)
    data["item", "rev_buys", "user"].edge_attr = -torch.arange(900, dtype=torch.int64)
    data["user", "knows", "user"].edge_index = torch.randint(0, 100, (2, 400), generator=g)  # no edge attrs
    return data


@pytest.fixture(scope="module")
def homo() -> Data:
    return _homogeneous()


@pytest.fixture(scope="module")
def hetero() -> HeteroData:
    return _heterogeneous()


@pytest.fixture(scope="module")
def homo_server(homo: Data, tmp_path_factory: pytest.TempPathFactory) -> ServerProcess:
    with serve_graph(homo, tmp_path_factory.mktemp("edge-homo")) as process:
        yield process


@pytest.fixture(scope="module")
def hetero_server(hetero: HeteroData, tmp_path_factory: pytest.TempPathFactory) -> ServerProcess:
    with serve_graph(hetero, tmp_path_factory.mktemp("edge-hetero")) as process:
        yield process


def test_edge_attributes_are_stored_by_edge_id_and_listed_apart_from_node_attributes(
    homo_server: ServerProcess, homo: Data
) -> None:
    fs, _ = connect(homo_server.address)
    edge_schema = {s.attr_name: s for s in fs.schema() if s.is_edge}
    assert {n: (s.group_name, s.shape) for n, s in edge_schema.items()} == {
        "edge_attr": ((None, None), (E, 3)), "edge_weight": ((None, None), (E,))}
    assert {(a.group_name, a.attr_name) for a in fs.get_all_tensor_attrs()} == {(None, "x")}  # as PyG's Data lists
    assert torch.equal(fs[(None, None), "edge_attr", None], homo.edge_attr)
    ids = torch.tensor([7, 0, 7, E - 1])
    assert torch.equal(fs.get_tensor(group_name=(None, None), attr_name="edge_weight", index=ids), homo.edge_weight[ids])


@pytest.mark.parametrize("cache_bytes, prefetch, shared_memory", [
    (0, False, True), (20_000, False, True), (0, True, True), (20_000, True, True),
    (20_000, True, False),  # the rows in the reply's payload instead of a shared-memory segment
])
def test_every_homogeneous_batch_carries_the_rows_of_its_e_id_in_the_sampling_reply(
    homo_server: ServerProcess, homo: Data, cache_bytes: int, prefetch: bool, shared_memory: bool
) -> None:
    fs, gs = connect(homo_server.address, cache_bytes=cache_bytes, shared_memory=shared_memory)
    sampler = RemoteNeighborSampler(fs, [5, 3], feature_store=fs)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(N), batch_size=40,
                        transform=EdgeFeatures(fs))
    before = requests_made(homo_server.address, MULTIGET)
    batches = list(Prefetcher(loader, depth=2) if prefetch else loader)
    assert len(batches) == (N + 39) // 40
    for batch in batches:
        assert batch.e_id.numel() > 0
        assert torch.equal(batch.edge_attr, homo.edge_attr[batch.e_id])
        assert torch.equal(batch.edge_weight, homo.edge_weight[batch.e_id])
        assert torch.equal(batch.x, homo.x[batch.n_id])
    assert requests_made(homo_server.address, MULTIGET) == before  # every row rode with its sample


def test_heterogeneous_batches_carry_each_edge_types_rows_and_links_too(
    hetero_server: ServerProcess, hetero: HeteroData
) -> None:
    fs, gs = connect(hetero_server.address, cache_bytes=10_000)
    sampler = RemoteNeighborSampler(fs, [4, 2], feature_store=fs)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes="user", batch_size=32,
                        transform=EdgeFeatures(fs, ["edge_attr"]))
    for batch in loader:
        for et in (("user", "buys", "item"), ("item", "rev_buys", "user")):
            assert torch.equal(batch[et].edge_attr, hetero[et].edge_attr[batch[et].e_id])
        assert "edge_attr" not in batch["user", "knows", "user"]
        assert batch["user", "knows", "user"].e_id.numel() > 0

    links = LinkNeighborLoader((fs, gs), [3, 2], edge_label_index=(("user", "buys", "item"), None),
                               batch_size=64, neg_sampling_ratio=1.0,
                               neighbor_sampler=RemoteNeighborSampler(fs, [3, 2], feature_store=fs),
                               transform=EdgeFeatures(fs))
    for batch in links:
        et = ("user", "buys", "item")
        assert torch.equal(batch[et].edge_attr, hetero[et].edge_attr[batch[et].e_id])


def test_an_edge_cache_sends_only_its_misses_and_every_batch_keeps_the_rows_of_its_e_id(
    homo_server: ServerProcess, homo: Data
) -> None:
    fs, gs = connect(homo_server.address)  # no node cache: every node row travels, and is counted
    edges = EdgeFeatures(fs, cache_bytes=16_000)  # a third of the edges' 48 kB
    sampler = RemoteNeighborSampler(fs, [5, 3], feature_store=fs)
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(N), batch_size=30,
                        shuffle=True, transform=edges)
    before = requests_made(homo_server.address, MULTIGET)
    sampled_edge_rows = node_rows = 0
    for _ in range(2):
        for batch in loader:
            assert torch.equal(batch.edge_attr, homo.edge_attr[batch.e_id])
            assert torch.equal(batch.edge_weight, homo.edge_weight[batch.e_id])
            assert torch.equal(batch.x, homo.x[batch.n_id])
            sampled_edge_rows += 2 * batch.e_id.unique().numel()
            node_rows += batch.n_id.unique().numel()
    stats = edges.cache.stats()
    edge_rows_sent = fs.exchange.delivered_rows - node_rows
    assert stats.hits > 0 and edge_rows_sent == 2 * stats.misses < sampled_edge_rows
    assert requests_made(homo_server.address, MULTIGET) == before  # no row needed a second trip


def test_an_edge_cache_serves_every_edge_type_and_loader_workers_and_prefetch(
    hetero_server: ServerProcess, hetero: HeteroData
) -> None:
    fs, gs = connect(hetero_server.address, cache_bytes=10_000)
    edges = EdgeFeatures(fs, ["edge_attr"], cache_bytes=6_000, cache_policy="lru")
    assert sorted(edges.cache.groups()) == [("item", "rev_buys", "user"), ("user", "buys", "item")]
    sampler = RemoteNeighborSampler(fs, [4, 2], feature_store=fs)
    for workers in (0, 2):
        loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes="user", batch_size=16,
                            transform=edges, num_workers=workers)
        for batch in Prefetcher(loader, depth=3) if workers == 0 else loader:
            for et in (("user", "buys", "item"), ("item", "rev_buys", "user")):
                assert torch.equal(batch[et].edge_attr, hetero[et].edge_attr[batch[et].e_id])
    assert edges.cache.hits > 0  # the workers' copies count in their own processes


def test_a_node_cache_built_over_the_whole_schema_warms_only_node_types(homo_server: ServerProcess, homo: Data) -> None:
    fs, gs = connect(homo_server.address)
    fs.exchange.cache = FeatureCache(20_000, fs.schema())  # edge attributes too, as older docs had it
    assert list(warm_hot_set(fs)) == [None]
    loader = NodeLoader((fs, gs), node_sampler=RemoteNeighborSampler(fs, [3], feature_store=fs),
                        input_nodes=torch.arange(N), batch_size=100, transform=EdgeFeatures(fs))
    for batch in loader:
        assert torch.equal(batch.x, homo.x[batch.n_id]) and torch.equal(batch.edge_attr, homo.edge_attr[batch.e_id])


def test_without_rows_from_the_sample_edge_features_are_read_by_e_id(
    homo_server: ServerProcess, homo: Data
) -> None:
    fs, gs = connect(homo_server.address)
    sampler = RemoteNeighborSampler(fs, [4], disjoint=True)  # no feature_store: nothing rides along
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(60), batch_size=30,
                        transform=EdgeFeatures(fs, ["edge_weight"]))
    for batch in loader:
        assert torch.equal(batch.edge_weight, homo.edge_weight[batch.e_id])
        assert torch.equal(batch.x, homo.x[batch.n_id])


def test_a_strangers_edge_row_requests_get_named_errors_or_nothing(homo_server: ServerProcess) -> None:
    connection = Connection(homo_server.address)
    request = graph_pb2.SampleFromNodesRequest(
        options=options_to_proto([3], replace=False, disjoint=False, seed=1), node=ids_to_proto(torch.arange(5)))
    request.input_type.homogeneous = True
    request.features.CopyFrom(feature_request_to_proto([((None, None), "nope")], {}))
    with pytest.raises(NotFoundError, match="nope"):
        connection.call("GraphService", "SampleFromNodes", request)
    request.features.CopyFrom(feature_request_to_proto([(("a", "b", "c"), "edge_attr")], {}))  # no such edges
    reply = connection.call("GraphService", "SampleFromNodes", request).message
    assert not reply.features and reply.edges[0].edge.shape[0] > 0
    request.features.attrs[0].group.name = "a"  # a node type and an edge type at once
    with pytest.raises(InvalidRequestError, match="not both"):
        connection.call("GraphService", "SampleFromNodes", request)


def test_edge_features_refuses_unknown_names(homo_server: ServerProcess) -> None:
    fs, _ = connect(homo_server.address)
    with pytest.raises(NotFoundError, match=r"\['nope'\].*stored: \['edge_attr', 'edge_weight'\]"):
        EdgeFeatures(fs, ["nope"])
    with pytest.raises(InvalidRequestError, match="non-empty str"):
        EdgeFeatures(fs, [""])
    with pytest.raises(InvalidRequestError, match="batch.e_id"):
        EdgeFeatures(fs)(Data(x=torch.zeros(2, 1)))
    with pytest.raises(InvalidRequestError, match=r"no hot set\), got .static."):
        EdgeFeatures(fs, cache_bytes=1000, cache_policy="static")


def test_a_strangers_known_edge_ids_are_checked_before_any_work(homo_server: ServerProcess) -> None:
    connection = Connection(homo_server.address)
    request = graph_pb2.SampleFromNodesRequest(
        options=options_to_proto([3], replace=False, disjoint=False, seed=1), node=ids_to_proto(torch.arange(5)))
    request.input_type.homogeneous = True
    for known, error in [(-1, "known edge id -1 of the homogeneous graph's edges is out of range"),
                         (E, rf"known edge id {E} .*\(valid ids: 0\.\.{E - 1}\)"), (2**62, "out of range")]:
        request.features.CopyFrom(feature_request_to_proto(
            [((None, None), "edge_attr")], {(None, None): torch.tensor([0, known])}))
        with pytest.raises(InvalidRequestError, match=error):
            connection.call("GraphService", "SampleFromNodes", request)
    for start, size, error in [(-8, 2, "known edge id -8 "), (E - 7, 2, f"known edge id {E + 1} ")]:
        request.features.CopyFrom(feature_request_to_proto(
            [((None, None), "edge_attr")], {(None, None): IdBitmap(start, np.full(size, 255, dtype=np.uint8))}))
        with pytest.raises(InvalidRequestError, match=error):
            connection.call("GraphService", "SampleFromNodes", request)
    request.features.known[0].ids.CopyFrom(ids_to_proto(torch.tensor([1])))
    with pytest.raises(InvalidRequestError, match="known ids come as a list or as a bitmap, not both"):
        connection.call("GraphService", "SampleFromNodes", request)
    for every_edge in (torch.arange(E), compact_ids(torch.arange(E))):  # as a list, and as a bitmap
        request.features.CopyFrom(feature_request_to_proto([((None, None), "edge_attr")], {(None, None): every_edge}))
        reply = connection.call("GraphService", "SampleFromNodes", request).message
        assert reply.edges[0].edge.shape[0] > 0 and [r.ids.shape[0] for r in reply.features] == [0]


def test_known_ids_travel_as_a_bitmap_when_that_is_smaller() -> None:
    sparse, dense = torch.tensor([5, 900, 70_000]), torch.tensor([3, 4, 9, 10, 11, 40, 3])
    assert compact_ids(sparse) is sparse
    bitmap = compact_ids(dense)
    assert isinstance(bitmap, IdBitmap) and bitmap.start == 3 and bitmap.bits.size == 5
    probe = np.arange(-2, 50)
    assert np.array_equal(probe[bitmap.holds(probe)], [3, 4, 9, 10, 11, 40])


@pytest.mark.neo4j
@pytest.mark.parametrize("sampling", ["snapshot", "live"])
def test_edges_in_neo4j_keep_their_edge_ids_for_their_features(
    neo4j_server: tuple, homo: Data, tmp_path: Path, sampling: str
) -> None:
    data_dir = ingest_into_neo4j(homo, tmp_path / "data", *neo4j_server)
    with start_neo4j_server(data_dir, *neo4j_server, sampling=sampling) as server:
        fs, gs = connect(server.address, cache_bytes=N * 16 // 5)
        # By default the cache is a hot set where the server ranks nodes; live, it has no ranking.
        assert fs.cache.policy == {"snapshot": "static", "live": "sieve"}[sampling]
        sampler = RemoteNeighborSampler(fs, [4, 2], feature_store=fs)
        edges = EdgeFeatures(fs, cache_bytes=16_000)  # live sampling: the server knows no edge id count
        loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(0, N, 2), batch_size=50,
                            transform=edges)
        for batch in loader:
            assert batch.e_id.numel() > 0
            assert torch.equal(batch.x, homo.x[batch.n_id])
            assert torch.equal(batch.edge_attr, homo.edge_attr[batch.e_id])
            src, dst = batch.n_id[batch.edge_index]
            assert torch.equal(torch.stack([src, dst]), homo.edge_index[:, batch.e_id])  # the ids are the edges'
        assert edges.cache.hits > 0 and fs.cache.hits > 0
