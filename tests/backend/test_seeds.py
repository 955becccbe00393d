"""``seeds`` (through PyG's ``SnapshotNeighborSampler``) against PyG's own ``edge_sample`` and
``node_sample``: the same seeds reach the sampler and the same metadata comes out, mode by mode,
with the same negatives drawn from torch's generator."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from torch_geometric.data import Data, HeteroData
from torch_geometric.sampler import EdgeSamplerInput, NegativeSampling, NodeSamplerInput
from torch_geometric.sampler.neighbor_sampler import edge_sample, node_sample

from gnnstore.backend.engine.sampler import SamplingEngine, SnapshotNeighborSampler, to_pyg
from gnnstore.backend.engine.seeds import plan_links
from gnnstore.backend.engine.topology import TopologySnapshot
from gnnstore.common.sample import Links, Negatives

N = 60


def _homo() -> Data:
    generator = torch.Generator().manual_seed(1)
    return Data(edge_index=torch.randint(0, N, (2, 400), generator=generator), num_nodes=N)


def _hetero() -> HeteroData:
    generator = torch.Generator().manual_seed(2)
    data = HeteroData()
    data["user"].num_nodes, data["item"].num_nodes = N, N // 2
    data["user", "buys", "item"].edge_index = torch.stack([
        torch.randint(0, N, (300,), generator=generator), torch.randint(0, N // 2, (300,), generator=generator)])
    data["item", "rev_buys", "user"].edge_index = data["user", "buys", "item"].edge_index.flip(0)
    data["user", "follows", "user"].edge_index = torch.randint(0, N, (2, 300), generator=generator)
    return data


GRAPHS = {"homogeneous": (_homo, None), "two node types": (_hetero, ("user", "buys", "item")),
          "one node type": (_hetero, ("user", "follows", "user"))}
NEGATIVES = {"none": None, "binary 1": ("binary", 1), "binary 1.5": ("binary", 1.5), "triplet 1": ("triplet", 1),
             "triplet 3": ("triplet", 3)}


class _Recording:
    """A PyG sampler whose numpy sampler keeps the seeds each call was given (as tensors); called
    itself, it is the sampling function PyG's ``edge_sample`` / ``node_sample`` take."""

    def __init__(self, sampler: SnapshotNeighborSampler) -> None:
        self.pyg, self.core, self.calls = sampler, sampler.core, []
        self.disjoint, self.num_nodes, self.check_links = self.core.disjoint, self.core.num_nodes, self.core.check_links
        sampler.core = self

    def sample_seeds(self, seed, seed_time=None):  # noqa: ANN001, ANN201
        self.calls.append((_tensors(seed), _tensors(seed_time)))
        return self.core.sample_seeds(seed, seed_time)

    def __call__(self, seed, seed_time=None):  # noqa: ANN001, ANN204
        return to_pyg(self.sample_seeds(seed, seed_time))


def _tensors(value):  # noqa: ANN001, ANN202
    if isinstance(value, dict):
        return {key: _tensors(v) for key, v in value.items()}
    return torch.from_numpy(value) if isinstance(value, np.ndarray) else value


def _links(graph: str, labelled: bool, timed: bool) -> EdgeSamplerInput:
    _, input_type = GRAPHS[graph]
    src_count, dst_count = (N, N // 2) if graph == "two node types" else (N, N)
    generator = torch.Generator().manual_seed(7)
    row = torch.randint(0, src_count, (9,), generator=generator)
    col = torch.randint(0, dst_count, (9,), generator=generator)
    row[3], col[3] = row[0], col[0]  # a repeated end: unique seeds differ from one per end
    label = torch.randint(0, 3, (9,), generator=generator) if labelled else None
    time = torch.randint(0, 100, (9,), generator=generator) if timed else None
    return EdgeSamplerInput(torch.arange(9), row, col, label, time, input_type)


def _same(a, b) -> None:  # noqa: ANN001
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _same(a[key], b[key])
    elif a is None or b is None:
        assert a is None and b is None
    else:
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), (a, b)


@pytest.mark.parametrize("graph", list(GRAPHS))
@pytest.mark.parametrize("negatives", list(NEGATIVES))
@pytest.mark.parametrize("disjoint", [False, True])
@pytest.mark.parametrize("labelled", [False, True])
def test_links_reach_the_sampler_and_come_back_as_pyg_makes_them(
    graph: str, negatives: str, disjoint: bool, labelled: bool
) -> None:
    make, _ = GRAPHS[graph]
    spec = NEGATIVES[negatives]
    if spec and spec[0] == "triplet" and labelled:
        pytest.skip("PyG takes no labels with triplet negatives")
    engine = SamplingEngine(TopologySnapshot.from_data(make()))
    ours, theirs = (_Recording(SnapshotNeighborSampler(engine, [3, 2], disjoint=disjoint, seed=5)) for _ in range(2))
    inputs = _links(graph, labelled, timed=False)
    neg = None if spec is None else NegativeSampling(*spec)
    torch.manual_seed(11)
    got = ours.pyg.sample_from_edges(inputs, neg)
    torch.manual_seed(11)
    want = edge_sample(inputs, theirs, engine.num_nodes, disjoint, None, neg)
    _same(ours.calls[0][0], theirs.calls[0][0])
    assert len(got.metadata) == len(want.metadata)
    for a, b in zip(got.metadata, want.metadata, strict=True):
        _same(a, b)
    _same(got.node, want.node)
    _same(got.batch, want.batch)


@pytest.mark.parametrize("negatives", ["binary 1", "binary 1.5", "triplet 3"])
def test_temporal_links_redraw_negatives_later_than_their_link_as_pyg(negatives: str) -> None:
    data = _homo()
    node_time = torch.randint(0, 100, (N,), generator=torch.Generator().manual_seed(4))
    engine = SamplingEngine(TopologySnapshot.from_data(data))
    temporal = engine.temporal_index({None: node_time.numpy()})
    ours, theirs = (_Recording(SnapshotNeighborSampler(engine, [3, 2], temporal=temporal, seed=5)) for _ in range(2))
    inputs = _links("homogeneous", labelled=False, timed=True)
    neg = NegativeSampling(*NEGATIVES[negatives])
    torch.manual_seed(12)
    got = ours.pyg.sample_from_edges(inputs, neg)
    torch.manual_seed(12)
    want = edge_sample(inputs, theirs, N, True, node_time, neg)
    for a, b in itertools.chain(zip(ours.calls[0], theirs.calls[0]), zip(got.metadata, want.metadata, strict=True)):
        _same(a, b)
    _same(got.batch, want.batch)


@pytest.mark.parametrize("graph", ["homogeneous", "two node types"])
def test_nodes_reach_the_sampler_with_their_times_and_metadata_as_pyg(graph: str) -> None:
    make, input_type = GRAPHS[graph]
    engine = SamplingEngine(TopologySnapshot.from_data(make()))
    ours, theirs = (_Recording(SnapshotNeighborSampler(engine, [3, 2], seed=5)) for _ in range(2))
    node_type = None if input_type is None else input_type[0]
    inputs = NodeSamplerInput(torch.arange(4), torch.tensor([5, 1, 5, 9]), None, node_type)
    got, want = ours.pyg.sample_from_nodes(inputs), node_sample(inputs, theirs)
    _same(ours.calls[0][0], theirs.calls[0][0])
    _same(got.metadata[0], want.metadata[0])
    assert want.metadata[1] is None and got.metadata[1] is None
    _same(got.node, want.node)


def test_a_plan_without_torch_names_every_end_once_and_its_negatives_by_their_link() -> None:
    draws = iter([np.array([7, 8]), np.array([9, 7])])
    plan = plan_links(Links(np.array([1, 2]), np.array([2, 3])), 10, False, None, Negatives(triplet=False, amount=1),
                      lambda count, endpoint, num: next(draws))
    assert plan.seed.tolist() == [1, 2, 3, 7, 8, 9]  # unique ends, sorted
    edge_label_index, edge_label, src_time = plan.labels
    assert plan.seed[edge_label_index].tolist() == [[1, 2, 7, 8], [2, 3, 9, 7]]
    assert edge_label.tolist() == [1, 1, 0, 0] and edge_label.dtype == np.float32 and src_time is None
