"""RemoteFeatureStore / RemoteGraphStore / RemoteIdMap against a real server: PyG's store contract."""
from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from served import ServerProcess, serve_graph
from torch_geometric.data import Data, HeteroData

from gnnstore.client import RemoteIdMap, connect, server_info
from gnnstore.common.errors import InvalidRequestError, NotFoundError
from gnnstore.ingest.generator import generate_graph

INDEX_FORMS = {
    "none": None,
    "slice": slice(2, 9),
    "int": 5,
    "int64": torch.tensor([7, 0, 3]),
    "int32": torch.tensor([7, 0, 3], dtype=torch.int32),
    "duplicates": torch.tensor([4, 4, 1, 4]),
    "empty": torch.empty(0, dtype=torch.long),
}


@pytest.mark.parametrize("form", sorted(INDEX_FORMS))
def test_every_index_form_gives_the_rows_pyg_expects(
    homo_server: ServerProcess, homo_graph: Data, form: str
) -> None:
    fs, _ = connect(homo_server.address)
    index = INDEX_FORMS[form]
    got = fs.get_tensor(group_name=None, attr_name="x", index=index)
    if index is None:
        want = homo_graph.x
    elif isinstance(index, torch.Tensor):
        want = homo_graph.x[index.long()]
    else:
        want = homo_graph.x[index]
    assert got.shape == want.shape
    assert torch.equal(got, want)


def test_multi_get_keeps_order_across_attrs(homo_server: ServerProcess, homo_graph: Data) -> None:
    fs, _ = connect(homo_server.address)
    idx = torch.tensor([3, 1, 3])
    x, y, mask = fs.multi_get_tensor([(None, "x", idx), (None, "y", idx), (None, "train_mask", None)])
    assert torch.equal(x, homo_graph.x[idx])
    assert torch.equal(y, homo_graph.y[idx])
    assert torch.equal(mask, homo_graph.train_mask)


def test_tensor_attrs_are_fresh_objects_and_sizes_come_from_the_schema(homo_server: ServerProcess) -> None:
    fs, _ = connect(homo_server.address)
    first = fs.get_all_tensor_attrs()
    first[0].index = torch.arange(3)  # the loaders mutate what they get
    second = fs.get_all_tensor_attrs()
    assert {(a.group_name, a.attr_name) for a in second} >= {(None, "x"), (None, "y")}
    assert all(not isinstance(a.index, torch.Tensor) for a in second)
    assert fs.get_tensor_size(group_name=None, attr_name="x") == (400, 8)
    assert fs.get_tensor_size(group_name=None, attr_name="nope") is None
    with pytest.raises(InvalidRequestError, match=r"needs group_name \(group_name=None for a homogeneous"):
        fs.get_tensor_size(attr_name="x")


def test_unknown_attr_is_a_key_error(homo_server: ServerProcess) -> None:
    fs, _ = connect(homo_server.address)
    with pytest.raises(KeyError, match="nope"):
        fs.get_tensor(group_name=None, attr_name="nope", index=torch.tensor([0]))


def test_homogeneous_edge_attrs_and_edge_index(homo_server: ServerProcess, homo_graph: Data) -> None:
    fs, gs = connect(homo_server.address)
    (attr,) = gs.get_all_edge_attrs()
    assert attr.edge_type is None
    assert attr.size == (400, 400)
    row, col = gs.get_edge_index(edge_type=None, layout="coo")
    assert torch.equal(torch.stack([row, col]), homo_graph.edge_index)  # in edge-id order


def test_hetero_edge_types_decode_to_tuples_with_sizes(
    hetero_server: ServerProcess, hetero_graph: HeteroData
) -> None:
    _, gs = connect(hetero_server.address)
    attrs = {a.edge_type: a for a in gs.get_all_edge_attrs()}
    assert set(attrs) == set(hetero_graph.edge_types)
    for edge_type, attr in attrs.items():
        assert type(edge_type) is tuple
        src, _, dst = edge_type
        assert attr.size == (hetero_graph[src].num_nodes, hetero_graph[dst].num_nodes)


def test_stores_pickle_without_their_channel(homo_server: ServerProcess, homo_graph: Data) -> None:
    fs, gs = connect(homo_server.address)
    fs.get_tensor(group_name=None, attr_name="x", index=torch.tensor([0]))  # opens the channel
    fs2, gs2 = pickle.loads(pickle.dumps((fs, gs)))
    assert fs2.connection is gs2.connection  # still shared after the trip
    assert fs2.connection._channel is None
    assert torch.equal(fs2.get_tensor(group_name=None, attr_name="x", index=torch.tensor([1])), homo_graph.x[[1]])


def test_id_map_and_info(homo_server: ServerProcess, homo_graph: Data) -> None:
    ids = RemoteIdMap(homo_server.address)
    assert ids.to_ids(None, [3, 7]).tolist() == [3, 7]
    assert ids.to_keys(None, torch.tensor([5, 0])) == [5, 0]
    with pytest.raises(NotFoundError, match="10000"):
        ids.to_ids(None, [10_000])
    with pytest.raises(InvalidRequestError, match="out of range"):
        ids.to_keys(None, [400])
    info = server_info(homo_server.address)
    assert info.num_nodes == {None: 400}
    assert info.num_edges == {None: homo_graph.num_edges}
    assert info.graph_backend == "ladybug" and info.snapshot_id
    assert any(f.attr_name == "x" and f.shape == (400, 8) for f in info.features)


@pytest.fixture(scope="module")
def writable_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A read-write server over its own small graph, for Put and Remove."""
    server = serve_graph(generate_graph(60, 3.0, 4, 2, seed=1), tmp_path_factory.mktemp("writable"))
    yield server
    server.stop()


def test_put_update_and_remove_over_the_wire(writable_server: ServerProcess) -> None:
    fs, _ = connect(writable_server.address)
    z = torch.randn(60, 3)
    assert fs.put_tensor(z, group_name=None, attr_name="z", index=None)
    assert torch.equal(fs.get_tensor(group_name=None, attr_name="z", index=None), z)
    rows = torch.ones(2, 3)
    fs.put_tensor(rows, group_name=None, attr_name="z", index=torch.tensor([4, 9]))
    got = fs.get_tensor(group_name=None, attr_name="z", index=torch.tensor([4, 9, 5]))
    assert torch.equal(got, torch.cat([rows, z[[5]]]))
    assert fs.get_tensor_size(group_name=None, attr_name="z") == (60, 3)
    assert fs.remove_tensor(group_name=None, attr_name="z", index=None)
    with pytest.raises(KeyError):
        fs.get_tensor(group_name=None, attr_name="z", index=torch.tensor([0]))


def test_a_bad_put_changes_nothing(writable_server: ServerProcess) -> None:
    fs, _ = connect(writable_server.address)
    before = fs.get_tensor(group_name=None, attr_name="x", index=None)
    with pytest.raises(InvalidRequestError):
        fs.put_tensor(torch.ones(2, 99), group_name=None, attr_name="x", index=torch.tensor([0, 1]))
    assert torch.equal(fs.get_tensor(group_name=None, attr_name="x", index=None), before)


def test_edges_cannot_be_written_through_the_service(writable_server: ServerProcess, tmp_path: Path) -> None:
    _, gs = connect(writable_server.address)
    with pytest.raises(NotImplementedError, match="gnnstore ingest"):
        gs.put_edge_index((torch.tensor([0]), torch.tensor([1])), edge_type=None, layout="coo", size=(60, 60))
