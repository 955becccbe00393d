"""Graph writes while trainers sample: every batch is one graph version, a sampler moves to the
newest at an epoch boundary, and new nodes keep their ids and rows across a restart."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch
from served import ingest, start_server
from torch_geometric.data import Data
from torch_geometric.loader import NodeLoader
from torch_geometric.sampler import NodeSamplerInput

from gnnstore.client import (
    GraphWriter,
    Prefetcher,
    RemoteGraphStore,
    RemoteIdMap,
    RemoteNeighborSampler,
    connect,
    server_info,
)
from gnnstore.common.errors import InvalidRequestError, NotFoundError, PreconditionError
from gnnstore.proto import graph_pb2
from gnnstore.proto.codec import edge_type_to_proto
from gnnstore.proto.tensor_codec import tensor_to_proto

N, E = 200, 1500


@pytest.fixture
def graph() -> Data:
    g = torch.Generator().manual_seed(3)
    return Data(x=torch.randn(N, 4, generator=g), edge_index=torch.randint(0, N, (2, E), generator=g))


@pytest.fixture
def data_dir(graph: Data, tmp_path: Path) -> Path:
    return ingest(graph, tmp_path / "data")


def edges_of(graph: Data) -> dict[int, tuple[int, int]]:
    """Edge id -> (src, dst) of the ingested graph (edge ids are positions)."""
    return {e: (int(s), int(d)) for e, (s, d) in enumerate(graph.edge_index.t().tolist())}


def in_edges(alive: dict[int, tuple[int, int]], seeds: set[int]) -> set[int]:
    return {e for e, (_, d) in alive.items() if d in seeds}


def test_batches_are_one_version_while_a_writer_adds_and_removes_edges(graph: Data, data_dir: Path) -> None:
    versions = {0: edges_of(graph)}
    with start_server(data_dir) as server:
        fs, gs = connect(server.address)
        writer = GraphWriter(fs)
        samplers = [RemoteNeighborSampler(fs, [-1], feature_store=fs) for _ in range(2)]
        epochs: list[list[tuple[set[int], set[int], list[tuple[int, int]]]]] = []
        failures: list[BaseException] = []

        def train(sampler: RemoteNeighborSampler) -> None:
            try:
                loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(N), batch_size=40)
                for _ in range(4):
                    epoch = []
                    for batch in Prefetcher(loader, depth=2):
                        n_id, ends = batch.n_id, batch.edge_index
                        pairs = list(zip(n_id[ends[0]].tolist(), n_id[ends[1]].tolist()))
                        epoch.append((set(batch.n_id[: batch.batch_size].tolist()), set(batch.e_id.tolist()), pairs,
                                      batch.e_id.tolist()))
                        assert torch.equal(batch.x, graph.x[batch.n_id])
                    epochs.append(epoch)
            except BaseException as exc:  # the main thread reports it
                failures.append(exc)

        trainers = [threading.Thread(target=train, args=(s,)) for s in samplers]
        for t in trainers:
            t.start()
        g = torch.Generator().manual_seed(4)
        for _ in range(6):
            alive = dict(versions[max(versions)])
            gone = torch.tensor(sorted(alive))[torch.randperm(len(alive), generator=g)[:40]]
            src, dst = torch.randint(0, N, (2, 60), generator=g)
            done = writer.write(add_edges={None: (src, dst)}, remove_edges={None: gone})
            for e in gone.tolist():
                del alive[e]
            alive.update(zip(done.edge_ids[None].tolist(), zip(src.tolist(), dst.tolist())))
            versions[done.version] = alive
        for t in trainers:
            t.join(300)
        assert not failures, failures
        assert max(versions) == 6 and server_info(fs.connection).graph_version == 6

        read = set()
        for epoch in epochs:
            fits = set(versions)
            for seeds, e_ids, pairs, order in epoch:  # each batch: all in-edges of its seeds in one version
                fits &= {v for v, alive in versions.items() if in_edges(alive, seeds) == e_ids}
                assert fits, "a batch matches no single graph version, or the epoch's batches differ"
                v = min(fits)
                assert pairs == [versions[v][e] for e in order]
            read |= fits
        assert read & {1, 2, 3, 4, 5, 6}, "no epoch read a written version"

        sampler = samplers[0]
        assert sampler.switch_version() == 6
        out = sampler.sample_nodes(NodeSamplerInput(None, torch.arange(N)), seed=1)
        assert set(out.edge.tolist()) == set(versions[6])  # -1 over every node: each edge of version 6
        sampler.switch_version(0)  # an old version stays readable on request
        out = sampler.sample_nodes(NodeSamplerInput(None, torch.arange(N)), seed=1)
        assert set(out.edge.tolist()) == set(range(E))

        zero = RemoteGraphStore(fs.connection, graph_version=0)
        assert torch.equal(torch.stack(zero.get_edge_index(None, "coo")), graph.edge_index)
        assert gs.switch_version() == 6
        newest = [versions[6][e] for e in sorted(versions[6])]  # version 6's edges, by edge id
        assert torch.stack(gs.get_edge_index(None, "coo")).t().tolist() == [list(pair) for pair in newest]
        assert [a.size for a in gs.get_all_edge_attrs()] == [(N, N)]
        pinned = RemoteGraphStore(fs.connection, graph_version=3)
        three = [versions[3][e] for e in sorted(versions[3])]
        assert torch.stack(pinned.get_edge_index(None, "coo")).t().tolist() == [list(pair) for pair in three]
        with pytest.raises(NotFoundError, match="7"):
            RemoteGraphStore(fs.connection, graph_version=7).get_edge_index(None, "coo")


def test_new_nodes_keep_their_ids_rows_and_edges_across_a_kill(graph: Data, data_dir: Path) -> None:
    with start_server(data_dir) as server:
        fs, _ = connect(server.address)
        writer = GraphWriter(fs)
        keys = [N + 7, "paper-a", N + 7]
        given = torch.tensor([[1.0] * 4, [2.0] * 4, [3.0] * 4])  # a row per key: the first of N + 7's is kept
        for rows, problem in [(None, "carries a row of each of its attributes, one per key; missing: x"),
                              ({"x": given[:2]}, r"\(2, 4\) float32 given; 3 key\(s\) need \(3, 4\)"),
                              ({"x": given.double()}, "float64 given; 3 key\\(s\\) need \\(3, 4\\) float32"),
                              ({"x": given, "nope": given}, "has no attribute 'nope'")]:
            with pytest.raises(InvalidRequestError, match=problem):
                writer.write(nodes={None: keys}, rows=None if rows is None else {None: rows})
        assert server_info(fs.connection).graph_version == 0  # refused writes stored nothing
        done = writer.write(nodes={None: keys}, rows={None: {"x": given}})
        new = done.node_ids[None]
        assert new.tolist() == [N, N + 1, N] and done.version == 1
        rows = given[:2]
        assert torch.equal(fs[None, "x", torch.tensor([N, N + 1])], rows)  # same write: never a node without rows
        done = writer.write(add_edges={None: (torch.tensor([N, 0]), torch.tensor([N + 1, N]))})
        assert done.edge_ids[None].tolist() == [E, E + 1] and done.version == 2
        sampler = RemoteNeighborSampler(fs, [-1, -1], feature_store=fs)
        batch_before = sampler.sample_nodes(NodeSamplerInput(None, torch.tensor([N + 1])), seed=5)
        assert batch_before.node[:3].tolist() == [N + 1, N, 0]
        server.proc.kill()  # kill -9: what a write returned is durable without a clean stop
        server.proc.wait()

    with start_server(data_dir) as server:
        fs, gs = connect(server.address, cache_bytes=1 << 12)  # a cache sized before the new nodes grows
        assert server_info(fs.connection).graph_version == 2
        assert server_info(fs.connection).num_nodes[None] == N + 2
        assert RemoteIdMap(fs.connection).to_ids(None, ["paper-a", N + 7]).tolist() == [N + 1, N]
        sampler = RemoteNeighborSampler(fs, [-1, -1], feature_store=fs)
        again = sampler.sample_nodes(NodeSamplerInput(None, torch.tensor([N + 1])), seed=5)
        assert torch.equal(again.node, batch_before.node) and torch.equal(again.edge, batch_before.edge)
        loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.tensor([N + 1]), batch_size=1)
        for _ in range(2):  # the second time from the cache
            batch = next(iter(loader))
            assert torch.equal(batch.x[:2], rows.flip(0))  # the new nodes' own rows, from the store
        sampler.switch_version(1)  # before the edges: the new node has no neighbours
        assert sampler.sample_nodes(NodeSamplerInput(None, torch.tensor([N + 1])), seed=5).edge.numel() == 0
        sampler.switch_version(0)  # before the nodes, which the cache holds: no reason to refuse a request
        old = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=torch.arange(N), batch_size=N)
        batch = next(iter(old))
        assert batch.n_id.max() < N and torch.equal(batch.x, graph.x[batch.n_id])

        done = GraphWriter(fs).write(remove_nodes={None: torch.tensor([N, 5])})
        touching = {e for e, (s, d) in edges_of(graph).items() if 5 in (s, d)} | {E, E + 1}
        assert set(done.removed_edge_ids[None].tolist()) == touching and done.version == 3
        assert gs.graph_version is None and len(list(Prefetcher(loader))) == 1  # not read yet
        assert sampler.graph_version == gs.graph_version == 3  # an epoch moved both to the newest
        out = sampler.sample_nodes(NodeSamplerInput(None, torch.arange(N + 2)), seed=1)
        assert set(out.edge.tolist()) == set(range(E)) - touching  # -1 twice over every node: every edge left
        assert [a.size for a in gs.get_all_edge_attrs()] == [(N + 2, N + 2)]
        row, col = gs.get_edge_index(None, "coo")
        kept = sorted(set(range(E)) - touching)
        assert torch.equal(torch.stack([row, col]), graph.edge_index[:, kept])
        assert RemoteIdMap(fs.connection).to_ids(None, [N + 7]).tolist() == [N]  # the node keeps its key
        again = GraphWriter(fs).write(nodes={None: ["paper-a"]}, rows={None: {"x": torch.zeros(1, 4)}})
        assert again.node_ids[None].tolist() == [N + 1]
        assert torch.equal(fs[None, "x", torch.tensor([N + 1])], rows[1:]), "a node that has rows keeps them"
        assert GraphWriter(fs).write(nodes={None: [N + 7]}).node_ids[None].tolist() == [N], "known keys need no rows"


def test_strangers_get_clear_errors_and_change_nothing(data_dir: Path) -> None:
    with start_server(data_dir) as server:
        fs, _ = connect(server.address)
        writer = GraphWriter(fs)
        cases = [
            (dict(add_edges={None: (torch.tensor([N]), torch.tensor([0]))}), InvalidRequestError,
             r"the homogeneous graph's edges: source id 200 is out of range \(ids 0..199 in the version"),
            (dict(remove_edges={None: torch.tensor([E])}), InvalidRequestError, "edge id 1500 is not in graph version 0"),
            (dict(remove_edges={None: torch.tensor([2**63 - 1, -1])}), InvalidRequestError, "is not in graph version 0"),
            (dict(add_edges={("a", "b", "c"): (torch.tensor([0]), torch.tensor([0]))}), InvalidRequestError,
             "is not in the graph"),
            (dict(nodes={"paper": ["x"]}), InvalidRequestError, "node type 'paper' is not in the graph"),
            (dict(add_edges={None: (torch.tensor([0.5]), torch.tensor([0]))}), InvalidRequestError,
             "sources must be integer ids, got torch.float32"),
        ]
        cases.append((dict(), InvalidRequestError, "nothing to write"))
        for kwargs, error, message in cases:
            with pytest.raises(error, match=message):
                writer.write(**kwargs)
        bad = graph_pb2.WriteGraphRequest()
        change = bad.edges.add(edge_type=edge_type_to_proto(None))
        change.add_src.CopyFrom(tensor_to_proto(torch.zeros(2, 2, dtype=torch.long)))
        with pytest.raises(InvalidRequestError, match="add_src must be 1-D"):
            fs.connection.call("GraphService", "WriteGraph", bad)
        change.add_src.CopyFrom(tensor_to_proto(torch.zeros(2, dtype=torch.float64)))
        with pytest.raises(InvalidRequestError, match="add_src must be int64 or int32 ids"):
            fs.connection.call("GraphService", "WriteGraph", bad)
        sampler = RemoteNeighborSampler(fs, [2])
        sampler.switch_version(3)
        with pytest.raises(NotFoundError, match="graph version 3 does not exist"):
            sampler.sample_nodes(NodeSamplerInput(None, torch.tensor([0])), seed=1)
        assert server_info(fs.connection).graph_version == 0
        assert not (data_dir / "graph_writes").exists()

    with start_server(data_dir, "--read-only") as server:
        fs, _ = connect(server.address)
        with pytest.raises(PreconditionError, match="read-only"):
            GraphWriter(fs).write(add_edges={None: (torch.tensor([0]), torch.tensor([1]))})


def test_weighted_and_temporal_sampling_read_a_written_version_once_its_rows_are_put(data_dir: Path) -> None:
    seeds = NodeSamplerInput(None, torch.tensor([9]))
    with start_server(data_dir) as server:
        fs, _ = connect(server.address)
        writer = GraphWriter(fs)
        fs[(None, None), "w", None] = torch.zeros(E)  # no edge of the ingested graph may be picked
        writer.write(add_edges={None: (torch.tensor([0, 1]), torch.tensor([9, 9]))})
        weighted = RemoteNeighborSampler(fs, [5], weight_attr="w")
        with pytest.raises(InvalidRequestError, match=f"has {E} rows for {E + 2} edge ids"):
            weighted.sample_nodes(seeds, seed=1)
        fs[(None, None), "w", torch.tensor([E, E + 1])] = torch.tensor([0.0, 2.0])  # the added edges' rows
        assert weighted.sample_nodes(seeds, seed=1).edge.tolist() == [E + 1]
        writer.write(remove_edges={None: torch.tensor([E + 1])})  # its id stays given: rows still fit
        weighted.switch_version()
        assert weighted.sample_nodes(seeds, seed=1).edge.numel() == 0

        fs[None, "t", None] = torch.zeros(N, dtype=torch.long)
        with pytest.raises(InvalidRequestError, match="missing: t"):  # the node's time comes with it
            writer.write(nodes={None: ["late"]}, rows={None: {"x": torch.zeros(1, 4)}})
        late = {"x": torch.zeros(1, 4), "t": torch.tensor([5])}  # later than node 9 (time 0): never its neighbour
        new = writer.write(nodes={None: ["late"]}, rows={None: late}).node_ids[None]
        writer.write(add_edges={None: (new, torch.tensor([9]))})
        timed = RemoteNeighborSampler(fs, [-1], time_attr="t")
        out = timed.sample_nodes(seeds, seed=1)
        assert int(new) not in out.node.tolist() and 0 in out.node.tolist()
