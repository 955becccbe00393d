"""The engine against reference samplers: the pure-torch one in tests/reference, and PyG's own when installed."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch
from sampler_checks import hetero_graph, power_law_edge_index
from torch_geometric.data import Data, HeteroData

from gnnstore.backend.engine.sampler import SamplingEngine, SnapshotNeighborSampler, to_pyg
from gnnstore.backend.engine.topology import TopologySnapshot

EXAMPLES = Path(__file__).resolve().parents[1] / "reference"
N, E = 250, 2500


def _reference_module():  # noqa: ANN202 (a module loaded by path)
    if not (EXAMPLES / "torch_sampler.py").is_file():
        pytest.fail(f"the reference sampler is missing: expected {EXAMPLES}/torch_sampler.py")
    sys.path.insert(0, str(EXAMPLES))  # torch_sampler imports pyg_testing_stores beside it
    try:
        import torch_sampler
    finally:
        sys.path.remove(str(EXAMPLES))
    return torch_sampler


@pytest.fixture(scope="module")
def ref():  # noqa: ANN201
    return _reference_module()


def _store_pair(ref, data: Data | HeteroData):  # noqa: ANN001, ANN202
    fs, gs = ref.MyFeatureStore(), ref.MyGraphStore()
    if isinstance(data, HeteroData):
        for nt in data.node_types:
            fs.put_tensor(data[nt].x, group_name=nt, attr_name="x", index=None)
        for et in data.edge_types:
            size = (data[et[0]].num_nodes, data[et[-1]].num_nodes)
            gs.put_edge_index(tuple(data[et].edge_index), edge_type=et, layout="coo", size=size)
    else:
        fs.put_tensor(data.x, group_name=None, attr_name="x", index=None)
        gs.put_edge_index(tuple(data.edge_index), edge_type=None, layout="coo", size=(N, N))
    return fs, gs


@pytest.fixture(scope="module")
def graph() -> Data:
    return Data(x=torch.zeros(N, 1), edge_index=power_law_edge_index(N, E, seed=11), num_nodes=N)


def _hop_sets(nodes: torch.Tensor, counts: list[int]) -> list[set[int]]:
    bounds = [0, *torch.tensor(counts).cumsum(0).tolist()]
    return [set(nodes[a:b].tolist()) for a, b in zip(bounds, bounds[1:])]


def test_all_neighbours_give_the_reference_batch(ref, graph: Data) -> None:  # noqa: ANN001
    """Same nodes hop by hop, same edges; only the order within a hop may differ (PyG's CSC
    sort is not stable, so neighbours of one node come in another order)."""
    torch_sampler = ref.TorchNeighborSampler(_store_pair(ref, graph), [-1, -1])
    engine = SamplingEngine(TopologySnapshot.from_data(graph))
    perm = torch_sampler.perm
    for start in range(0, N, 50):
        seeds = torch.arange(start, start + 7)
        want = torch_sampler._sample(seeds)
        got = to_pyg(engine.sample(seeds, [-1, -1], random_seed=0))
        want_edge = want.edge if perm is None else perm[want.edge]
        assert got.num_sampled_nodes == want.num_sampled_nodes
        assert got.num_sampled_edges == want.num_sampled_edges
        assert _hop_sets(got.node, got.num_sampled_nodes) == _hop_sets(want.node, want.num_sampled_nodes)
        assert torch.equal(got.edge.sort().values, want_edge.sort().values)
        got_pairs = set(zip(got.node[got.row].tolist(), got.node[got.col].tolist(), got.edge.tolist()))
        want_pairs = set(zip(want.node[want.row].tolist(), want.node[want.col].tolist(), want_edge.tolist()))
        assert got_pairs == want_pairs


def test_hetero_all_neighbours_give_the_reference_sets(ref) -> None:  # noqa: ANN001
    data = hetero_graph(seed=5)
    torch_sampler = ref.TorchNeighborSampler(_store_pair(ref, data), [-1, -1])
    engine = SamplingEngine(TopologySnapshot.from_data(data))
    seeds = {"paper": torch.arange(10, 20)}
    want, got = torch_sampler._sample(seeds), to_pyg(engine.sample(seeds, [-1, -1], random_seed=0))
    for nt in data.node_types:
        assert got.num_sampled_nodes[nt] == want.num_sampled_nodes[nt]
        assert _hop_sets(got.node[nt], got.num_sampled_nodes[nt]) == _hop_sets(
            want.node[nt], want.num_sampled_nodes[nt]
        )
    for et in data.edge_types:
        perm = torch_sampler.perm[et]
        perm = torch.arange(data[et].num_edges) if perm is None else perm
        assert got.num_sampled_edges[et] == want.num_sampled_edges[et]
        assert set(got.edge[et].tolist()) == set(perm[want.edge[et]].tolist())


def test_sampled_degrees_and_pick_frequencies_match_the_reference(ref, graph: Data) -> None:  # noqa: ANN001
    torch.manual_seed(0)
    torch_sampler = ref.TorchNeighborSampler(_store_pair(ref, graph), [5, 3])
    engine = SamplingEngine(TopologySnapshot.from_data(graph))
    deg = torch.bincount(graph.edge_index[1], minlength=N)
    hub = int(deg.argmax())
    hub_edges = (graph.edge_index[1] == hub).nonzero().view(-1)
    seeds = torch.tensor([hub, 1, 2, 3, 50, 120])
    runs = 400
    picks = {"ref": torch.zeros(E), "engine": torch.zeros(E)}
    hop1 = {"ref": 0.0, "engine": 0.0}
    for i in range(runs):
        perm = torch_sampler.perm
        want = torch_sampler._sample(seeds)
        got = to_pyg(engine.sample(seeds, [5, 3], random_seed=i))
        assert got.num_sampled_edges[0] == want.num_sampled_edges[0]  # sum of min(5, deg): exact
        want_edge = want.edge if perm is None else perm[want.edge]
        for name, out, eids in (("ref", want, want_edge), ("engine", got, got.edge)):
            picks[name][eids[: out.num_sampled_edges[0]]] += 1
            hop1[name] += out.num_sampled_edges[1] / runs
    expected = runs * 5 / deg[hub]
    for name in picks:  # each in-edge of the hub is picked with probability 5 / deg
        freq = picks[name][hub_edges]
        assert float(freq.mean()) == pytest.approx(float(expected))  # exactly 5 per run
        assert float((freq - expected).abs().max()) < 6 * float(expected) ** 0.5
    assert abs(hop1["ref"] - hop1["engine"]) < 0.05 * hop1["ref"]


def _pyg_kernel_missing() -> str | None:
    for name in ("pyg_lib", "torch_sparse"):
        if importlib.util.find_spec(name) is not None:
            return None
    return ("PyG's NeighborSampler needs pyg-lib (not on the package index) or torch-sparse (a source "
            "build); neither is installed, so the comparison with PyG's own kernel cannot run")


@pytest.mark.skipif(_pyg_kernel_missing() is not None, reason=str(_pyg_kernel_missing()))
def test_batches_match_pygs_own_sampler(graph: Data) -> None:
    from torch_geometric.sampler import NeighborSampler, NodeSamplerInput


    pyg = NeighborSampler(graph, [-1, 4])
    ours = SnapshotNeighborSampler(TopologySnapshot.from_data(graph), [-1, 4], seed=0)
    for start in range(0, N, 50):
        inp = NodeSamplerInput(None, torch.arange(start, start + 10))
        want, got = pyg.sample_from_nodes(inp), ours.sample_from_nodes(inp)
        perm = pyg.edge_permutation
        want_edge = want.edge if perm is None else perm[want.edge]
        assert torch.equal(got.node[:10], want.node[:10])
        hop0 = {"got": got.col < 10, "want": want.col < 10}
        assert torch.equal(got.edge[hop0["got"]].sort().values, want_edge[hop0["want"]].sort().values)
        assert set(got.node[got.row[hop0["got"]]].tolist()) == set(want.node[want.row[hop0["want"]]].tolist())
        assert got.row.numel() == want.row.numel()  # hop 2 yields min(4, deg) per node: same total
