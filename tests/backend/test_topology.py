"""Topology snapshots: CSC/CSR layout, streamed builds from a graph store, the folder format, staleness."""
from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from sampler_checks import hetero_graph, power_law_edge_index
from torch import Tensor

from gnnstore.backend.engine.sampler import SamplingEngine
from gnnstore.backend.engine.snapshot_builder import build_snapshot
from gnnstore.backend.engine.topology import TopologySnapshot
from gnnstore.common.errors import InvalidRequestError, MalformedFileError, NotFoundError, PreconditionError
from gnnstore.stores.base import DEFAULT_CHUNK_EDGES, BaseGraphStore, StoredEdgeAttr
from gnnstore.stores.embedded_graph_store import EmbeddedGraphStore

N, E = 200, 1500


def _db_store(path: Path, edges: dict) -> EmbeddedGraphStore:
    """A EmbeddedGraphStore at ``path`` holding ``{edge_type: (edge_index, (n_src, n_dst))}`` as COO."""
    store = EmbeddedGraphStore(path)
    for et, (ei, size) in edges.items():
        store.put_edges(ei, et, "coo", size)
    return store


@pytest.fixture(scope="module")
def homo_ei() -> Tensor:
    return power_law_edge_index(N, E, seed=3)


@pytest.fixture(scope="module")
def homo_store(tmp_path_factory, homo_ei: Tensor) -> Iterator[EmbeddedGraphStore]:
    """One homogeneous graph database, read (never written) by the tests that share it."""
    with _db_store(tmp_path_factory.mktemp("homo") / "graph.lbug", {None: (homo_ei, (N, N))}) as store:
        yield store


class InconsistentGraphStore(BaseGraphStore):
    """A store whose edge attrs contradict its edges: an id beyond the declared size, or no size.

    EmbeddedGraphStore checks every put against its size, so it can produce neither; this stand-in
    serves one homogeneous COO as declared, to test that the builder refuses such a store.
    """

    def __init__(self, edge_index: Tensor, size: tuple[int, int] | None) -> None:
        super().__init__()
        self.edge_index, self.size = edge_index, size

    def put_edges(self, edge_index, edge_type, layout, size=None, is_sorted=False) -> bool:  # noqa: ANN001
        raise NotImplementedError

    def edge_index(self, edge_type, layout):  # noqa: ANN001, ANN202
        return tuple(self.edge_index.numpy())

    def remove_edges(self, edge_type, layout) -> bool:  # noqa: ANN001
        raise NotImplementedError

    def edge_attrs(self) -> list[StoredEdgeAttr]:
        return [StoredEdgeAttr(None, "coo", False, self.size)]

    def iter_edge_index(
        self, edge_type: None, chunk_size: int = DEFAULT_CHUNK_EDGES
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        for start in range(0, self.edge_index.size(1), chunk_size):
            part = self.edge_index[:, start:start + chunk_size].numpy()
            yield part[0], part[1], np.arange(start, start + part.shape[1])

    def version(self) -> str:
        return "inconsistent"


def _assert_csc_matches(topo, src: torch.Tensor, dst: torch.Tensor) -> None:
    """colptr/row/e_id equal PyG's stable sort of the COO by destination."""
    perm = torch.sort(dst, stable=True).indices
    counts = np.bincount(dst, minlength=topo.num_dst)
    assert np.array_equal(topo.colptr, np.concatenate([[0], np.cumsum(counts)]))
    assert np.array_equal(topo.e_id, perm.numpy())
    assert np.array_equal(topo.row, src[perm].numpy())


def _assert_csr_matches(topo, src: torch.Tensor, dst: torch.Tensor) -> None:
    perm = torch.sort(src, stable=True).indices
    counts = np.bincount(src, minlength=topo.num_src)
    assert np.array_equal(topo.rowptr, np.concatenate([[0], np.cumsum(counts)]))
    assert np.array_equal(topo.csr_e_id, perm.numpy())
    assert np.array_equal(topo.col, dst[perm].numpy())


def test_from_edge_index_builds_a_stable_csc_and_csr() -> None:
    ei = power_law_edge_index(N, E, seed=1)
    snap = TopologySnapshot.from_edge_index(ei, N, csr=True)
    topo = snap.edge(None)
    assert not snap.is_hetero and snap.num_nodes == {None: N}
    assert topo.row.dtype == np.int32 and topo.colptr.dtype == np.int64 and topo.e_id.dtype == np.int64
    _assert_csc_matches(topo, *ei)
    _assert_csr_matches(topo, *ei)


def test_hetero_data_gives_one_csc_per_edge_type() -> None:
    data = hetero_graph(seed=2)
    snap = TopologySnapshot.from_data(data)
    assert snap.is_hetero and set(snap.edge_types) == set(data.edge_types)
    assert snap.num_nodes == {nt: data[nt].num_nodes for nt in data.node_types}
    for et in data.edge_types:
        _assert_csc_matches(snap.edge(et), *data[et].edge_index)
    with pytest.raises(NotFoundError, match="'paper', 'likes', 'paper'"):
        snap.edge(("paper", "likes", "paper"))


@pytest.mark.parametrize("chunk_size", [1, 7, 1 << 20])
def test_build_streams_chunks_into_a_memory_mapped_folder(
    tmp_path, homo_store: EmbeddedGraphStore, homo_ei: Tensor, chunk_size: int
) -> None:
    version = homo_store.version()
    snap = build_snapshot(homo_store, tmp_path / "snapshots", csr=True, chunk_size=chunk_size)
    topo = snap.edge(None)
    assert snap.path == tmp_path / "snapshots" / version and snap.version == version
    assert isinstance(topo.row, np.memmap) and isinstance(topo.e_id, np.memmap)
    _assert_csc_matches(topo, *homo_ei)
    _assert_csr_matches(topo, *homo_ei)
    assert sorted(p.name for p in (tmp_path / "snapshots").iterdir()) == [version]  # no staging folder left


def test_hetero_store_build_matches_the_in_memory_snapshot(tmp_path) -> None:
    data = hetero_graph(seed=4)
    edges = {
        et: (data[et].edge_index, (data[et[0]].num_nodes, data[et[-1]].num_nodes))
        for et in data.edge_types
    }
    with _db_store(tmp_path / "graph.lbug", edges) as store:
        snap = build_snapshot(store, tmp_path / "snapshots", chunk_size=50)
    mem = TopologySnapshot.from_data(data)
    assert snap.num_nodes == mem.num_nodes
    for et in data.edge_types:
        for name in ("colptr", "row", "e_id"):
            assert np.array_equal(getattr(snap.edge(et), name), getattr(mem.edge(et), name))
    reopened = TopologySnapshot.open(snap.path)
    assert reopened.edge_types == snap.edge_types and reopened.built_at == snap.built_at


def test_same_version_is_reused_and_a_new_version_is_stale(tmp_path) -> None:
    ei = power_law_edge_index(N, E, seed=5)
    snapshots = tmp_path / "snapshots"
    with _db_store(tmp_path / "graph.lbug", {None: (ei, (N, N))}) as store:
        first = build_snapshot(store, snapshots)
        assert build_snapshot(store, snapshots).built_at == first.built_at
        assert not first.is_stale(store)
        store.put_edges(ei[:, :100], None, "coo", (N, N))
        assert first.is_stale(store)
        second = build_snapshot(store, snapshots)
        assert second.version == store.version() != first.version
        assert second.edge(None).num_edges == 100
        assert first.edge(None).num_edges == E  # the old version stays readable
        rebuilt = build_snapshot(store, snapshots, rebuild=True)
        assert rebuilt.built_at > second.built_at and rebuilt.edge(None).num_edges == 100
        with_csr = build_snapshot(store, snapshots, csr=True)
        assert with_csr.edge(None).has_csr and not second.edge(None).has_csr


def test_node_counts_from_outside_the_edges_widen_the_snapshot(tmp_path) -> None:
    ei = torch.tensor([[0, 1], [1, 2]])
    with _db_store(tmp_path / "graph.lbug", {None: (ei, (3, 3))}) as store:
        snap = build_snapshot(store, tmp_path / "snapshots", num_nodes={None: 10})
    assert snap.num_nodes == {None: 10} and snap.edge(None).colptr.shape == (11,)
    out = SamplingEngine(snap).sample(torch.tensor([9, 2]), [-1], random_seed=0)
    assert out.node[None].tolist() == [9, 2, 1] and out.edge[None].tolist() == [1]


def test_a_snapshot_saved_from_memory_samples_like_the_original(tmp_path) -> None:
    ei = power_law_edge_index(N, E, seed=6)
    mem = TopologySnapshot.from_edge_index(ei, N, version="m1")
    disk = mem.save(tmp_path)
    seeds = torch.arange(0, 50)
    a = SamplingEngine(mem).sample(seeds, [5, 5], random_seed=3)
    b = SamplingEngine(disk).sample(seeds, [5, 5], random_seed=3)
    assert (a.node[None] == b.node[None]).all() and (a.edge[None] == b.edge[None]).all()


def test_a_mapped_snapshot_pickles_as_its_path(tmp_path) -> None:
    ei = power_law_edge_index(N, 20_000, seed=7)
    with _db_store(tmp_path / "graph.lbug", {None: (ei, (N, N))}) as store:
        snap = build_snapshot(store, tmp_path / "snapshots")
    blob = pickle.dumps(SamplingEngine(snap))
    assert len(blob) < 2_000
    engine = pickle.loads(blob)
    assert np.array_equal(engine.snapshot.edge(None).row, snap.edge(None).row)


def test_an_out_of_range_id_from_the_store_publishes_nothing(tmp_path) -> None:
    ei = torch.tensor([[0, 1, 5], [1, 2, 0]])
    with pytest.raises(PreconditionError, match=r"source id 5, outside its size \[0, 3\)"):
        build_snapshot(InconsistentGraphStore(ei, (3, 3)), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_missing_sizes_and_empty_stores_are_refused(tmp_path) -> None:
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    with EmbeddedGraphStore(tmp_path / "graph.lbug") as empty:
        with pytest.raises(PreconditionError, match="no edge types"):
            build_snapshot(empty, snapshots)
    with pytest.raises(PreconditionError, match="edge type None has no size"):
        build_snapshot(InconsistentGraphStore(torch.tensor([[0], [1]]), None), snapshots)
    assert list(snapshots.iterdir()) == []


def test_broken_folders_are_named(tmp_path) -> None:
    with pytest.raises(PreconditionError, match="meta.json is missing"):
        TopologySnapshot.open(tmp_path / "nothing")
    snap = TopologySnapshot.from_edge_index(torch.tensor([[0], [1]]), 2, version="x").save(tmp_path)
    meta = json.loads((snap.path / "meta.json").read_text())
    (snap.path / "e0.row.npy").write_bytes(b"garbage")
    with pytest.raises(MalformedFileError, match="e0.row.npy"):
        TopologySnapshot.open(snap.path)
    meta["node_types"] = "oops"
    (snap.path / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(MalformedFileError, match="meta.json"):
        TopologySnapshot.open(snap.path)


@pytest.mark.parametrize(
    "edge_index, num_nodes, fragment",
    [
        (torch.tensor([[0, 3], [1, 1]]), 3, r"source id 3 is out of range \[0, 3\)"),
        (torch.tensor([[0, 1], [1, -1]]), 3, "destination id -1"),
        (torch.tensor([0, 1]), 3, r"must be a \[2, E\] array, got \(2,\)"),
        ([[0], [1]], 3, r"must be a \[2, E\] array, got list"),
        (torch.tensor([[0.0], [1.0]]), 3, "must hold integers"),
        (torch.tensor([[0], [1]]), -2, "num_nodes of node type None must be an int >= 0"),
    ],
)
def test_bad_in_memory_input_is_refused(edge_index, num_nodes, fragment: str) -> None:
    with pytest.raises(InvalidRequestError, match=fragment):
        TopologySnapshot.from_edge_index(edge_index, num_nodes)


def test_layouts_with_different_sizes_snapshot_the_canonical_edges(tmp_path):
    """A CSC put before a wider COO of the same edge type must not narrow the snapshot."""
    store = EmbeddedGraphStore(tmp_path / "graph.lbug")
    csc_row, colptr = torch.tensor([0, 1, 2]), torch.tensor([0, 1, 2, 3])
    store.put_edges((csc_row, colptr), None, "csc", (3, 3))
    coo = torch.tensor([[5, 0, 4], [0, 2, 1]])
    store.put_edges((coo[0], coo[1]), None, "coo", (6, 3))
    snap = build_snapshot(store, tmp_path / "snapshots")
    assert snap.num_nodes[None] == 6
    topo = snap.edge(None)
    dst = np.repeat(np.arange(topo.num_dst), np.diff(np.asarray(topo.colptr)))
    got = sorted(zip(np.asarray(topo.row).tolist(), dst.tolist(), np.asarray(topo.e_id).tolist()))
    assert got == sorted(zip(coo[0].tolist(), coo[1].tolist(), range(3)))
    store.close()
