"""The feature cache and the prefetcher through a real server: exact batches, only misses travel."""
from __future__ import annotations

import threading
import time

import pytest
import torch
from served import ServerProcess, requests_made
from torch import Tensor
from torch_geometric.data import Data, HeteroData, TensorAttr
from torch_geometric.loader import NodeLoader

from gnnstore.client import (
    POLICY_NAMES,
    Prefetcher,
    RemoteFeatureStore,
    RemoteNeighborSampler,
    connect,
    server_info,
    server_stats,
)
from gnnstore.client.prefetch import THREAD_NAME
from gnnstore.common.errors import InvalidRequestError
from gnnstore.proto import graph_pb2
from gnnstore.proto.codec import node_type_to_proto
from gnnstore.proto.feature_request import HotPrefix
from gnnstore.proto.tensor_codec import ids_from_proto

SAMPLE = "/gnnstore.v1.GraphService/SampleFromNodes"
LIST_ATTRS = "/gnnstore.v1.FeatureService/ListTensorAttrs"
MULTI_GET = "/gnnstore.v1.FeatureService/MultiGet"
ROW_BYTES = 8 * 4 + 8 + 3  # x (8 float32), y (int64) and three bool masks of the homo graph


def hottest(edge_index: Tensor, num_nodes: int) -> Tensor:
    """Global ids by out-degree, highest first, ties by ascending id."""
    degree = torch.bincount(edge_index[0], minlength=num_nodes)
    return torch.sort(-degree, stable=True).indices


def reply_bytes(address: str) -> int:
    """Bytes of sampling replies so far, through the socket or clients' shared memory (0 before
    the server's first sampling call)."""
    stats = server_stats(address).get(SAMPLE)
    return 0 if stats is None else stats.bytes_sent + stats.bytes_shared


def loader(fs: RemoteFeatureStore, gs: object, seeds: Tensor, **kwargs: object) -> NodeLoader:
    sampler = RemoteNeighborSampler(fs, [5, 3], feature_store=fs, seed=kwargs.pop("seed", None))
    return NodeLoader((fs, gs), node_sampler=sampler, input_nodes=seeds, batch_size=40, **kwargs)


@pytest.mark.parametrize("policy", POLICY_NAMES)
@pytest.mark.parametrize("rows", [6, 120], ids=["smaller-than-a-batch", "30-percent"])
@pytest.mark.parametrize("shared_memory", [True, False], ids=["aligned-in-segment", "socket"])
def test_batches_are_exact_and_only_misses_travel(
    homo_server: ServerProcess, homo_graph: Data, policy: str, rows: int, shared_memory: bool
) -> None:
    fs, gs = connect(
        homo_server.address, cache_bytes=rows * ROW_BYTES, cache_policy=policy, shared_memory=shared_memory
    )
    cache = fs.cache
    distinct = 0
    samples, multi_gets = requests_made(homo_server.address, SAMPLE), requests_made(homo_server.address, MULTI_GET)
    batches = 0
    for _ in range(2):
        for batch in loader(fs, gs, torch.arange(0, 400, 2), shuffle=True):
            for attr in ("x", "y", "train_mask", "val_mask", "test_mask"):
                assert torch.equal(batch[attr], homo_graph[attr][batch.n_id]), attr
            distinct += torch.unique(batch.n_id).numel()  # one lookup per node serves all 5 attrs
            batches += 1
    total = cache.total()
    assert total.hits + total.misses == distinct
    assert total.static_hits + total.dynamic_hits == total.hits
    assert fs.exchange.delivered_rows == 5 * total.misses  # rows that travelled = misses, per attr
    assert fs.exchange.fetched_rows == 0
    assert requests_made(homo_server.address, SAMPLE) - samples == batches  # one round trip per batch
    assert requests_made(homo_server.address, MULTI_GET) == multi_gets
    assert cache.nbytes <= rows * ROW_BYTES
    if policy == "static":
        assert total.dynamic_hits == 0 and total.static_hits > 0
    if policy in ("lru", "sieve"):
        assert total.static_hits == 0 and total.dynamic_hits > 0


@pytest.mark.parametrize("shared_memory", [True, False], ids=["aligned-in-segment", "socket"])
def test_disjoint_batches_repeat_nodes_and_stay_exact(
    homo_server: ServerProcess, homo_graph: Data, shared_memory: bool
) -> None:
    fs, gs = connect(homo_server.address, cache_bytes=60 * ROW_BYTES, cache_policy="static+sieve",
                     shared_memory=shared_memory)
    sampler = RemoteNeighborSampler(fs, [5, 3], feature_store=fs, disjoint=True)
    batches = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(0, 400, 2), batch_size=40)
    repeated = 0
    for batch in Prefetcher(batches, depth=2):
        for attr in ("x", "y", "train_mask"):
            assert torch.equal(batch[attr], homo_graph[attr][batch.n_id]), attr
        repeated += batch.n_id.numel() - torch.unique(batch.n_id).numel()
    assert repeated > 0 and fs.cache.total().hits > 0  # the node lists did repeat nodes


@pytest.mark.parametrize("shared_memory", [True, False], ids=["aligned-in-segment", "socket"])
def test_a_batch_naming_a_seed_twice_stays_exact(
    homo_server: ServerProcess, homo_graph: Data, shared_memory: bool
) -> None:
    fs, gs = connect(homo_server.address, cache_bytes=60 * ROW_BYTES, cache_policy="static",
                     shared_memory=shared_memory)
    cold = hottest(homo_graph.edge_index, homo_graph.num_nodes)[-3:]  # never in the hot set: their rows travel
    seeds = cold[[0, 1, 0, 2, 1, 0]]
    (batch,) = loader(fs, gs, seeds)
    assert batch.n_id[: seeds.numel()].tolist() == seeds.tolist()  # the node list repeats them
    for attr in ("x", "y", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(batch[attr], homo_graph[attr][batch.n_id]), attr


def test_the_hot_set_is_the_top_out_degree_nodes_and_saves_bytes(
    homo_server: ServerProcess, homo_graph: Data
) -> None:
    schema_calls = requests_made(homo_server.address, LIST_ATTRS)
    fs, gs = connect(homo_server.address, cache_bytes=100 * ROW_BYTES, cache_policy="static")
    assert requests_made(homo_server.address, LIST_ATTRS) - schema_calls == 1  # the cache's schema serves the store
    expected = hottest(homo_graph.edge_index, homo_graph.num_nodes)[:100]
    assert fs.cache.hot_prefix(None) == HotPrefix(100, server_info(homo_server.address).snapshot_id)
    assert torch.equal(torch.sort(fs.cache.known_ids(None)).values, torch.sort(expected).values)
    plain_fs, plain_gs = connect(homo_server.address)
    sent = []
    for store, graph_store in ((plain_fs, plain_gs), (fs, gs)):
        before = reply_bytes(homo_server.address)
        for batch in loader(store, graph_store, torch.arange(400), seed=7):
            assert torch.equal(batch.x, homo_graph.x[batch.n_id])
        sent.append(reply_bytes(homo_server.address) - before)
    assert sent[1] < sent[0] - 0.2 * fs.cache.total().static_hits * 8 * 4  # the hot rows stayed home
    assert fs.cache.total().static_hits > 0


def test_hot_nodes_rpc_ranks_by_out_degree(homo_server: ServerProcess, homo_graph: Data) -> None:
    fs, _ = connect(homo_server.address)
    reply = fs.connection.call(
        "GraphService", "HotNodes", graph_pb2.HotNodesRequest(node_type=node_type_to_proto(None), k=1000)
    )
    assert torch.equal(ids_from_proto(reply.ids), hottest(homo_graph.edge_index, homo_graph.num_nodes))


@pytest.mark.parametrize("policy", ["static", "static+sieve"])
@pytest.mark.parametrize("shared_memory", [True, False], ids=["aligned-in-segment", "socket"])
def test_a_cache_cleared_between_request_and_reply_never_gives_a_stale_or_missing_row(
    homo_server: ServerProcess, homo_graph: Data, policy: str, shared_memory: bool
) -> None:
    fs, gs = connect(homo_server.address, cache_bytes=120 * ROW_BYTES, cache_policy=policy,
                     shared_memory=shared_memory)
    batches = loader(fs, gs, torch.arange(0, 400, 4), seed=3)
    sampler = batches.node_sampler
    sample = sampler.sample_nodes

    def sample_then_clear(*args: object, **kwargs: object) -> object:
        out = sample(*args, **kwargs)  # the request named the cached rows, so the reply left them out
        fs.cache.clear()
        return out

    sampler.sample_nodes = sample_then_clear
    for batch in batches:
        for attr in ("x", "y", "train_mask", "val_mask", "test_mask"):
            assert torch.equal(batch[attr], homo_graph[attr][batch.n_id]), attr
    assert fs.exchange.fetched_rows > 0  # the rows the cleared cache no longer had came in a second call


def test_a_stale_or_foreign_hot_prefix_is_ignored_and_rows_stay_exact(
    homo_server: ServerProcess, homo_graph: Data
) -> None:
    fs, gs = connect(homo_server.address, cache_bytes=100 * ROW_BYTES, cache_policy="static")
    hot = fs.cache.known_ids(None)  # warmed again with the same rows, as if ranked by another snapshot
    names = fs.cache.attr_names(None)
    fs.cache.warm(None, hot, dict(zip(names, fs.fetch_rows([TensorAttr(None, n, hot) for n in names]))),
                  ranking="another-version")
    assert fs.cache.hot_prefix(None).snapshot_id == "another-version"
    for batch in loader(fs, gs, torch.arange(0, 400, 4)):
        assert torch.equal(batch.x, homo_graph.x[batch.n_id])
    assert fs.exchange.fetched_rows == 0  # the server sent every row; hits were still served
    assert fs.exchange.delivered_rows > fs.cache.total().misses


def test_hetero_batches_are_exact_with_a_cache(
    hetero_server: ServerProcess, hetero_graph: HeteroData
) -> None:
    fs, gs = connect(hetero_server.address, cache_bytes=4000, cache_policy="static+sieve")
    assert {t for t in fs.cache.groups() if fs.cache.hot_prefix(t)} == {"paper", "author", "institution"}
    sampler = RemoteNeighborSampler(fs, [3, 2], feature_store=fs)
    delivered_nodes = []
    deliver = fs.exchange.deliver
    fs.exchange.deliver = lambda out, rows, *schema: (delivered_nodes.extend(r.ids.numel() for r in rows), deliver(out, rows, *schema))[1]
    for _ in range(2):
        for batch in NodeLoader((fs, gs), node_sampler=sampler, input_nodes=("paper", torch.arange(80)),
                                batch_size=16, shuffle=True):
            for node_type in hetero_graph.node_types:
                n_id = batch[node_type].n_id
                assert torch.equal(batch[node_type].x, hetero_graph[node_type].x[n_id]), node_type
            assert torch.equal(batch["paper"].y, hetero_graph["paper"].y[batch["paper"].n_id])
    assert sum(delivered_nodes) == fs.cache.total().misses  # the nodes whose rows travelled = misses
    assert fs.cache.total().hits > 0


def test_prefetcher_yields_the_same_batches_in_the_same_order(
    homo_server: ServerProcess, homo_graph: Data
) -> None:
    def epoch(prefetch: bool) -> list[Data]:
        fs, gs = connect(homo_server.address, cache_bytes=60 * ROW_BYTES)
        batches = loader(fs, gs, torch.arange(0, 400, 3), seed=11)
        return list(Prefetcher(batches, depth=2) if prefetch else batches)

    plain, prefetched = epoch(False), epoch(True)
    assert len(plain) == len(prefetched) == 4
    for a, b in zip(plain, prefetched):
        assert torch.equal(a.n_id, b.n_id) and torch.equal(a.edge_index, b.edge_index)
        assert torch.equal(a.x, b.x) and torch.equal(b.x, homo_graph.x[b.n_id])


def test_stall_and_hit_rate_are_reported_per_epoch(homo_server: ServerProcess) -> None:
    fs, gs = connect(homo_server.address, cache_bytes=100 * ROW_BYTES)
    pf = Prefetcher(loader(fs, gs, torch.arange(400)), depth=2)
    rates = []
    for _ in range(2):
        fs.cache.start_epoch()
        assert sum(1 for _ in pf) == 10
        assert pf.timing.batches == 10 and 0.0 <= pf.stall_fraction <= 1.0
        assert 0.0 < pf.stall_seconds <= pf.timing.wall_seconds
        rates.append(fs.cache.stats().hit_rate)
    assert all(0.0 < rate < 1.0 for rate in rates)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_loader_error_reaches_the_training_loop_at_its_batch_and_the_epoch_goes_on(
    homo_server: ServerProcess, homo_graph: Data, num_workers: int
) -> None:
    fs, gs = connect(homo_server.address, cache_bytes=100 * ROW_BYTES)
    bad = torch.cat([torch.arange(39), torch.tensor([10_000])])  # the second batch has a bad id
    seeds = torch.cat([torch.arange(40, 80), bad, torch.arange(80, 160)])
    pf = Prefetcher(loader(fs, gs, seeds, num_workers=num_workers), depth=2)
    taken, errors = [], []
    epoch = iter(pf)
    while True:
        try:
            batch = next(epoch)
        except InvalidRequestError as error:  # a trainer that logs a bad batch and goes on
            errors.append((len(taken), str(error)))
            continue
        except StopIteration:
            break
        taken.append(batch.n_id[: batch.batch_size])
        assert torch.equal(batch.x, homo_graph.x[batch.n_id])
    assert len(errors) == 1 and errors[0][0] == 1 and "10000" in errors[0][1]
    assert torch.equal(torch.cat(taken), torch.cat([torch.arange(40, 80), torch.arange(80, 160)]))
    pf.close()
    assert not [t for t in threading.enumerate() if t.name.startswith(THREAD_NAME)]


def test_prefetching_a_remote_loader_keeps_two_samples_in_flight_and_torch_seeded_batches(
    homo_server: ServerProcess, homo_graph: Data
) -> None:
    def epoch(prefetch: bool, trainer_draws: bool) -> tuple[list[Data], int]:
        torch.manual_seed(5)  # seed=None: request seeds come from torch's generator
        fs, gs = connect(homo_server.address, cache_bytes=60 * ROW_BYTES)
        batches = loader(fs, gs, torch.arange(0, 400, 2), shuffle=True)
        active, most, lock = [0], [0], threading.Lock()
        call = batches.node_sampler.connection.call

        def slow_call(*args: object, **kwargs: object) -> object:
            with lock:
                active[0] += 1
                most[0] = max(most[0], active[0])
            time.sleep(0.05)  # long enough for the next batch's request to start meanwhile
            try:
                return call(*args, **kwargs)
            finally:
                with lock:
                    active[0] -= 1

        batches.node_sampler.connection.call = slow_call
        taken = []
        for batch in Prefetcher(batches, depth=2) if prefetch else batches:
            taken.append(batch)
            if trainer_draws:
                torch.rand(100)  # as dropout on the CPU does
        return taken, most[0]

    (plain, one), (prefetched, two), (drawn, three) = epoch(False, False), epoch(True, False), epoch(True, True)
    assert (one, two, three) == (1, 2, 2) and len(plain) == len(prefetched) == len(drawn) == 5
    assert not all(torch.equal(a.n_id, b.n_id) for a, b in zip(plain, prefetched))  # its own stream
    assert torch.equal(torch.cat([b.n_id[:b.batch_size] for b in prefetched]).sort().values,
                       torch.arange(0, 400, 2))
    for a, b in zip(prefetched, drawn):  # what the trainer draws between batches changes none
        assert torch.equal(a.n_id, b.n_id) and torch.equal(a.edge_index, b.edge_index)
        assert torch.equal(b.x, homo_graph.x[b.n_id]) and torch.equal(b.y, homo_graph.y[b.n_id])


@pytest.mark.parametrize("policy", ["lru", "sieve", "static+sieve"])
def test_prefetching_with_a_dynamic_tier_keeps_one_round_trip_per_batch(
    homo_server: ServerProcess, homo_graph: Data, policy: str
) -> None:
    fs, gs = connect(homo_server.address, cache_bytes=60 * ROW_BYTES, cache_policy=policy)
    multi_gets = requests_made(homo_server.address, MULTI_GET)
    for _ in range(3):
        for batch in Prefetcher(loader(fs, gs, torch.arange(400), shuffle=True), depth=2):
            assert torch.equal(batch.x, homo_graph.x[batch.n_id])
    # rows the next reads would evict were never named as held, so none had to be fetched again
    assert fs.exchange.fetched_rows == 0 and requests_made(homo_server.address, MULTI_GET) == multi_gets
    assert fs.cache.total().dynamic_hits > 0


def test_leaving_a_prefetched_remote_epoch_early_ends_its_threads(homo_server: ServerProcess) -> None:
    fs, gs = connect(homo_server.address, cache_bytes=60 * ROW_BYTES)
    pf = Prefetcher(loader(fs, gs, torch.arange(400)), depth=3)
    for i, _ in enumerate(pf):
        if i == 1:
            break
    pf.close()
    assert not [t for t in threading.enumerate() if t.name.startswith(THREAD_NAME)]


def test_connect_refuses_a_bad_cache(homo_server: ServerProcess) -> None:
    with pytest.raises(InvalidRequestError, match="unknown cache policy"):
        connect(homo_server.address, cache_bytes=1000, cache_policy="fifo")
    with pytest.raises(InvalidRequestError, match="capacity_bytes"):
        connect(homo_server.address, cache_bytes=-1)
    fs, _ = connect(homo_server.address)
    assert fs.cache is None
