"""Homogeneous sampling: batch invariants over a sweep of seeds, determinism, PyG loaders, bad input."""
from __future__ import annotations

import math
import threading

import numpy as np
import pytest
import torch
from sampler_checks import check_batch, power_law_edge_index
from torch_geometric.data import Data
from torch_geometric.loader import LinkNeighborLoader, NeighborLoader, NodeLoader
from torch_geometric.sampler import EdgeSamplerInput, NegativeSampling, NodeSamplerInput

from gnnstore.backend.engine.sampler import SamplingEngine, SnapshotNeighborSampler, to_pyg
from gnnstore.backend.engine.snapshot_builder import build_snapshot
from gnnstore.backend.engine.topology import TopologySnapshot
from gnnstore.common.errors import InvalidRequestError, NotFoundError
from gnnstore.stores.embedded_graph_store import EmbeddedGraphStore
from gnnstore.stores.pyg_graph_store import PyGGraphStore
from gnnstore.stores.rocksdb_feature_store import RocksDBFeatureStore

N, E = 300, 3000


@pytest.fixture(scope="module")
def graph() -> Data:
    ei = power_law_edge_index(N, E, seed=7)
    return Data(x=torch.arange(N, dtype=torch.float32).view(-1, 1), edge_index=ei, num_nodes=N)


@pytest.fixture(scope="module")
def engine(graph: Data) -> SamplingEngine:
    return SamplingEngine(TopologySnapshot.from_data(graph))


# fanouts that reach every kernel path: take-all (-1, k >= deg), linear-scan rejection (k <= 16),
# hash rejection (k > 16, 2k <= deg), partial Fisher-Yates (k close to deg), zero
FANOUTS = [[5, 3], [-1, 2], [20, -1], [40], [2, 0, 4], []]


@pytest.mark.parametrize("fanouts", FANOUTS)
@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("disjoint", [False, True])
def test_every_batch_of_a_seed_sweep_keeps_the_invariants(
    graph: Data, engine: SamplingEngine, fanouts: list[int], replace: bool, disjoint: bool
) -> None:
    src, dst = graph.edge_index
    hub = torch.bincount(dst, minlength=N).argmax().view(1)
    for start in range(0, N, 37):
        seeds = torch.cat([hub, torch.arange(start, min(start + 37, N))]).unique_consecutive()
        seeds = seeds[torch.randperm(seeds.numel(), generator=torch.Generator().manual_seed(start))]
        out = to_pyg(engine.sample(seeds, fanouts, replace=replace, disjoint=disjoint, random_seed=start))
        check_batch(out, {None: (src, dst)}, {None: N}, {None: fanouts}, {None: seeds},
                    replace=replace, disjoint=disjoint)


def test_high_fanouts_keep_every_neighbour(graph: Data, engine: SamplingEngine) -> None:
    seeds = torch.arange(0, N, 5)
    all_in = to_pyg(engine.sample(seeds, [-1], random_seed=1))
    big = to_pyg(engine.sample(seeds, [10_000], random_seed=2))
    want = torch.isin(graph.edge_index[1], seeds).nonzero().view(-1)
    assert torch.equal(all_in.edge.sort().values, want)
    assert torch.equal(big.edge.sort().values, want)


def test_duplicate_seeds_keep_their_positions(engine: SamplingEngine) -> None:
    seeds = torch.tensor([4, 9, 4, 0])
    out = to_pyg(engine.sample(seeds, [3], random_seed=0))
    assert torch.equal(out.node[:4], seeds)
    assert out.num_sampled_nodes[0] == 4


def test_same_seed_same_batch_and_another_seed_another(engine: SamplingEngine) -> None:
    seeds = torch.arange(0, 64)
    one = [to_pyg(engine.sample(seeds, [10, 5], random_seed=s)) for s in (3, 3, 4)]
    for field in ("node", "row", "col", "edge"):
        assert torch.equal(getattr(one[0], field), getattr(one[1], field))
    assert not torch.equal(one[0].edge, one[2].edge)
    a = SnapshotNeighborSampler(engine, [10, 5], seed=11)
    b = SnapshotNeighborSampler(engine, [10, 5], seed=11)
    inp = NodeSamplerInput(input_id=None, node=seeds)
    for _ in range(3):
        assert torch.equal(a.sample_from_nodes(inp).edge, b.sample_from_nodes(inp).edge)
    torch.manual_seed(5)
    first = SnapshotNeighborSampler(engine, [10, 5]).sample_from_nodes(inp)
    torch.manual_seed(5)
    again = SnapshotNeighborSampler(engine, [10, 5]).sample_from_nodes(inp)
    assert torch.equal(first.edge, again.edge)


@pytest.mark.parametrize("disjoint", [False, True])
def test_outputs_are_made_by_the_given_allocator(engine: SamplingEngine, disjoint: bool) -> None:
    made: list[np.ndarray] = []

    def make_ids(n: int) -> np.ndarray:
        made.append(np.full(n, -7, np.int64))  # stale bytes must all be overwritten
        return made[-1]

    seeds = torch.arange(0, 64)
    plain = to_pyg(engine.sample(seeds, [10, 5], disjoint=disjoint, random_seed=3))
    sampler = SnapshotNeighborSampler(engine, [10, 5], disjoint=disjoint, seed=3, make_ids=make_ids)
    placed = sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=seeds))
    fields = ("node", "row", "col", "edge", *(("batch",) if disjoint else ()))
    for field in fields:
        tensor = getattr(placed, field)
        assert any(tensor.data_ptr() == m.ctypes.data for m in made), field
    again = to_pyg(engine.sample(seeds, [10, 5], disjoint=disjoint, random_seed=3, make_ids=make_ids))
    for field in fields:
        assert torch.equal(getattr(again, field), getattr(plain, field)), field


def test_threads_share_one_engine(graph: Data, engine: SamplingEngine) -> None:
    src, dst = graph.edge_index
    expected = {s: to_pyg(engine.sample(torch.arange(s, s + 40), [8, 4], random_seed=s)) for s in range(8)}
    errors: list[BaseException] = []

    def work(s: int) -> None:
        try:
            for _ in range(20):
                out = to_pyg(engine.sample(torch.arange(s, s + 40), [8, 4], random_seed=s))
                assert torch.equal(out.edge, expected[s].edge) and torch.equal(out.row, expected[s].row)
                seeds = {None: torch.arange(s, s + 40)}
                check_batch(out, {None: (src, dst)}, {None: N}, {None: [8, 4]}, seeds)
        except BaseException as exc:  # noqa: BLE001 (reported by the main thread)
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_node_loaders_build_pyg_batches(graph: Data, engine: SamplingEngine) -> None:
    sampler = SnapshotNeighborSampler(engine, [6, 3], seed=0)
    input_nodes = torch.arange(10, 110)
    for loader in (
        NodeLoader(graph, node_sampler=sampler, input_nodes=input_nodes, batch_size=32),
        NeighborLoader(graph, [6, 3], neighbor_sampler=sampler, input_nodes=input_nodes, batch_size=32),
    ):
        seen = []
        for batch in loader:
            assert torch.equal(batch.n_id[: batch.batch_size], input_nodes[batch.input_id])
            assert torch.equal(batch.n_id[batch.edge_index], graph.edge_index[:, batch.e_id])
            assert torch.equal(batch.x.view(-1), graph.x.view(-1)[batch.n_id])
            assert sum(batch.num_sampled_nodes) == batch.num_nodes
            assert sum(batch.num_sampled_edges) == batch.num_edges
            seen.append(batch.input_id)
        assert torch.equal(torch.cat(seen), torch.arange(100))


@pytest.mark.parametrize("disjoint", [False, True])
@pytest.mark.parametrize("mode, amount", [("binary", 2), ("triplet", 1), ("triplet", 3)])
def test_link_loader_labels_are_local_and_map_to_the_right_ids(
    graph: Data, engine: SamplingEngine, disjoint: bool, mode: str, amount: int
) -> None:
    sampler = SnapshotNeighborSampler(engine, [4, 2], disjoint=disjoint, seed=1)
    label_index = graph.edge_index[:, :200]
    loader = LinkNeighborLoader(
        graph, [4, 2], neighbor_sampler=sampler, edge_label_index=label_index, batch_size=25,
        neg_sampling=NegativeSampling(mode, amount),
    )
    for batch in loader:
        pos = label_index[:, batch.input_id]
        assert torch.equal(batch.n_id[batch.edge_index], graph.edge_index[:, batch.e_id])
        if mode == "binary":
            p = batch.input_id.numel()
            assert torch.equal(batch.n_id[batch.edge_label_index[:, :p]], pos)
            assert batch.edge_label_index.size(1) == p * (1 + amount)
            assert torch.equal(batch.edge_label, torch.cat([torch.ones(p), torch.zeros(p * amount)]))
        else:
            assert torch.equal(batch.n_id[batch.src_index], pos[0])
            assert torch.equal(batch.n_id[batch.dst_pos_index], pos[1])
            assert batch.dst_neg_index.shape == ((pos.size(1),) if amount == 1 else (pos.size(1), amount))


@pytest.mark.parametrize("mode", ["binary", "triplet"])
def test_negatives_are_the_global_ids_pyg_drew(engine: SamplingEngine, mode: str) -> None:
    sampler = SnapshotNeighborSampler(engine, [3])
    neg = NegativeSampling(mode, 2)
    row, col = torch.tensor([1, 5, 7, 9]), torch.tensor([2, 2, 8, 0])
    torch.manual_seed(42)
    out = sampler.sample_from_edges(EdgeSamplerInput(None, row, col), neg)
    torch.manual_seed(42)
    num_neg = math.ceil(row.numel() * neg.amount)
    if mode == "binary":
        src_neg, dst_neg = neg.sample(num_neg, "src", N), neg.sample(num_neg, "dst", N)
        _, label_index, label, _ = out.metadata
        want = torch.stack([torch.cat([row, src_neg]), torch.cat([col, dst_neg])])
        assert torch.equal(out.node[label_index], want)
        assert label.tolist() == [1] * 4 + [0] * num_neg
    else:
        dst_neg = neg.sample(num_neg, "dst", N)
        _, src_index, pos_index, neg_index, _ = out.metadata
        assert torch.equal(out.node[src_index], row) and torch.equal(out.node[pos_index], col)
        assert torch.equal(out.node[neg_index], dst_neg.view(4, 2))


def test_sampler_reports_pyg_attributes(engine: SamplingEngine) -> None:
    sampler = SnapshotNeighborSampler(engine.snapshot, [2])
    assert sampler.edge_permutation is None
    assert sampler.num_nodes == N
    assert sampler.fanouts.per_edge_type == {None: (2,)}


@pytest.mark.parametrize(
    "seed, fragment",
    [
        (torch.tensor([0, N]), f"seed id {N} of node type None is out of range [0, {N})"),
        (torch.tensor([-1, 2]), "seed id -1"),
        (torch.tensor([[1, 2]]), "must be a 1-D array"),
        ([1, 2], "must be a 1-D array, got list"),
        (torch.tensor([1.0]), "must be integer ids"),
        ({"paper": torch.tensor([1])}, "homogeneous graph takes seeds as one array"),
    ],
)
def test_bad_seeds_are_refused_by_name(engine: SamplingEngine, seed: object, fragment: str) -> None:
    with pytest.raises(InvalidRequestError, match=fragment.replace("[", r"\[").replace(")", r"\)")):
        engine.sample(seed, [2])
    assert to_pyg(engine.sample(torch.tensor([0, 1]), [2], random_seed=0)).node[:2].tolist() == [0, 1]


@pytest.mark.parametrize(
    "fanouts, fragment",
    [
        ([3, -2], "hop 1: fanout must be an int >= -1"),
        ([2.5], "got 2.5"),
        ([True], "got True"),
        ({("a", "b", "c"): [1]}, "homogeneous graph is one list"),
        ("15", "must be a list of ints"),
    ],
)
def test_absurd_fanouts_are_refused(engine: SamplingEngine, fanouts: object, fragment: str) -> None:
    with pytest.raises(InvalidRequestError, match=fragment):
        SnapshotNeighborSampler(engine, fanouts)


def test_bad_link_input_is_refused(engine: SamplingEngine) -> None:
    sampler = SnapshotNeighborSampler(engine, [2])
    with pytest.raises(InvalidRequestError, match=f"link destination id {N} "):
        sampler.sample_from_edges(EdgeSamplerInput(None, torch.tensor([0]), torch.tensor([N])))
    with pytest.raises(InvalidRequestError, match="homogeneous graph takes seed links without"):
        sampler.sample_from_edges(
            EdgeSamplerInput(None, torch.tensor([0]), torch.tensor([1]), input_type=("a", "b", "c"))
        )
    with pytest.raises(InvalidRequestError, match="no time attribute"):
        sampler.sample_from_nodes(NodeSamplerInput(None, torch.tensor([0]), time=torch.tensor([1])))
    hetero = TopologySnapshot.from_edge_index({("a", "r", "b"): torch.tensor([[0], [0]])}, {"a": 1, "b": 1})
    with pytest.raises(NotFoundError, match="node type 'c' is not in the graph"):
        SamplingEngine(hetero).sample({"c": torch.tensor([0])}, [1])


def test_loaders_over_a_store_pair_with_a_mapped_snapshot(tmp_path, graph: Data) -> None:
    """RocksDB features + LadybugDB edges, sampled through a snapshot built from that store."""
    with PyGGraphStore(EmbeddedGraphStore(tmp_path / "graph.lbug")) as graph_store, \
            RocksDBFeatureStore(tmp_path / "features") as feature_store:
        graph_store.put_edge_index(graph.edge_index, edge_type=None, layout="coo", size=(N, N))
        snapshot = build_snapshot(graph_store.store, tmp_path / "snapshots", chunk_size=500)
        sampler = SnapshotNeighborSampler(snapshot, [4, 2], seed=3)
        feature_store.put_tensor(graph.x, group_name=None, attr_name="x", index=None)
        node_loader = NodeLoader((feature_store, graph_store), node_sampler=sampler,
                                 input_nodes=torch.arange(64), batch_size=16)
        link_loader = LinkNeighborLoader((feature_store, graph_store), [4, 2], neighbor_sampler=sampler,
                                         edge_label_index=(None, graph.edge_index[:, :48]), batch_size=16,
                                         neg_sampling="binary")
        for batch in [*node_loader, *link_loader]:
            assert torch.equal(batch.n_id[batch.edge_index], graph.edge_index[:, batch.e_id])
            assert torch.equal(batch.x.view(-1), graph.x.view(-1)[batch.n_id])
