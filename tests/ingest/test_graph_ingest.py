"""ingest_graph on real LadybugDB + RocksDB: round trips, ids by key, idempotence, nothing lost on bad input."""
from __future__ import annotations

import pytest
import torch
from ingest_state import assert_same_state, store_state, stored_edges
from pyg_views import features_of, graph_of
from torch_geometric.data import Data

from gnnstore.common.errors import InvalidRequestError, MalformedFileError
from gnnstore.ingest import graph_ingest
from gnnstore.ingest.generator import generate_hetero_graph
from gnnstore.ingest.graph_ingest import ingest_graph
from gnnstore.ingest.planetoid import load_planetoid
from gnnstore.stores.data_dir import open_stores


@pytest.fixture(scope="module")
def cora(cora_raw):
    return load_planetoid(cora_raw, "Cora")


def test_cora_reads_back_bit_identical_after_reopen(tmp_path, cora):
    with open_stores(tmp_path) as stores:
        report = ingest_graph(cora, stores)
    assert report.rows("edges") == cora.num_edges and report.rows("nodes") == cora.num_nodes
    with open_stores(tmp_path, read_only=True) as stores:
        for name in ("x", "y", "train_mask", "val_mask", "test_mask"):
            stored = features_of(stores).get_tensor(None, name, None)
            assert stored.dtype == cora[name].dtype and torch.equal(stored, cora[name]), name
        edges, e_id = stored_edges(graph_of(stores), None)
        assert torch.equal(edges, cora.edge_index)
        assert torch.equal(e_id, torch.arange(cora.num_edges))
        (attr,) = graph_of(stores).get_all_edge_attrs()
        assert tuple(attr.size) == (2708, 2708)
        assert stores.id_map.num_nodes(None) == 2708
        assert stores.id_map.to_keys(None, torch.tensor([0, 1234, 2707])) == [0, 1234, 2707]
        assert stores.id_map.to_ids(None, [2707, 5]).tolist() == [2707, 5]


def test_hetero_graph_round_trips_through_keys_and_the_id_map_survives_reopen(tmp_path):
    data = generate_hetero_graph(seed=2)
    author_keys = [f"author-{i}" for i in range(data["author"].num_nodes)]
    with open_stores(tmp_path) as stores:
        stores.id_map.map_keys("author", ["author-7", "author-3"])  # known before: ids 0 and 1
        ingest_graph(data, stores, keys={"author": author_keys})
    with open_stores(tmp_path, read_only=True) as stores:
        author_ids = torch.from_numpy(stores.id_map.to_ids("author", author_keys))
        assert author_ids[[7, 3]].tolist() == [0, 1]
        assert sorted(author_ids.tolist()) == list(range(len(author_keys)))
        assert stores.id_map.to_keys("author", [0, 1]) == ["author-7", "author-3"]
        fs = features_of(stores)
        assert torch.equal(fs.get_tensor("author", "x", author_ids), data["author"].x)
        assert torch.equal(fs.get_tensor("paper", "y", None), data["paper"].y)
        assert torch.equal(fs.get_tensor("institution", "year", None), data["institution"].year)
        ids = {"author": author_ids}
        sizes = {a.edge_type: tuple(a.size) for a in graph_of(stores).get_all_edge_attrs()}
        assert set(sizes) == set(data.edge_types)
        for edge_type in data.edge_types:
            src, _, dst = edge_type
            local = data[edge_type].edge_index
            expected = torch.stack([
                ids.get(src, torch.arange(data[src].num_nodes))[local[0]],
                ids.get(dst, torch.arange(data[dst].num_nodes))[local[1]],
            ])
            assert torch.equal(stored_edges(graph_of(stores), edge_type)[0], expected), edge_type
            assert sizes[edge_type] == (data[src].num_nodes, data[dst].num_nodes)


def test_re_ingest_keeps_ids_and_does_not_duplicate_edges(tmp_path):
    data = generate_hetero_graph(seed=4)
    keys = {"paper": [f"p{i}" for i in range(data["paper"].num_nodes)]}
    with open_stores(tmp_path) as stores:
        ingest_graph(data, stores, keys=keys)
        first = store_state(stores)
        ingest_graph(data, stores, keys=keys)
        assert_same_state(first, store_state(stores))
        counts = {et: e.size(1) for et, (e, _) in store_state(stores)["edges"].items()}
    assert counts == {et: data[et].edge_index.size(1) for et in data.edge_types}


def test_edge_attributes_are_stored_by_edge_id_and_replaced_with_their_edge_type(tmp_path):
    edge_index = torch.tensor([[0, 1, 2, 2], [1, 2, 0, 1]])
    data = Data(x=torch.zeros(3, 1), edge_index=edge_index, edge_attr=torch.arange(8.0).view(4, 2),
                edge_weight=torch.tensor([0.1, 0.2, 0.3, 0.4]), edge_label_index=torch.tensor([[0], [2]]))
    with open_stores(tmp_path) as stores:
        ingest_graph(data, stores)
        fs = features_of(stores)
        assert torch.equal(fs.get_tensor((None, None), "edge_attr", None), data.edge_attr)
        assert torch.equal(fs.get_tensor((None, None), "edge_weight", torch.tensor([3, 0])), torch.tensor([0.4, 0.1]))
        assert {s.attr_name for s in fs.tensor_schema() if s.is_edge} == {"edge_attr", "edge_weight"}
        # the edge type again, now without weights: its new edge ids must not read the old rows
        again = Data(x=torch.zeros(3, 1), edge_index=edge_index.flip(1), edge_attr=data.edge_attr.flip(0))
        ingest_graph(again, stores)
        assert {s.attr_name for s in fs.tensor_schema() if s.is_edge} == {"edge_attr"}
        assert torch.equal(fs.get_tensor((None, None), "edge_attr", None), data.edge_attr.flip(0))
        bad = Data(x=torch.zeros(3, 1), edge_index=edge_index, edge_attr=torch.zeros(4, dtype=torch.uint16))
        before = store_state(stores)
        with pytest.raises(InvalidRequestError, match="attr 'edge_attr' has dtype torch.uint16"):
            ingest_graph(bad, stores)
        assert_same_state(before, store_state(stores))


def test_new_keys_update_known_rows_and_append_new_ones(tmp_path):
    with open_stores(tmp_path) as stores:
        ingest_graph(Data(x=torch.tensor([[1.0], [2.0], [3.0]]), num_nodes=3), stores,
                     keys={None: ["a", "b", "c"]})
        ingest_graph(Data(x=torch.tensor([[30.0], [40.0]]), num_nodes=2), stores,
                     keys={None: ["c", "d"]})
        assert stores.id_map.to_keys(None, torch.arange(4)) == ["a", "b", "c", "d"]
        assert torch.equal(features_of(stores).get_tensor(None, "x", None),
                           torch.tensor([[1.0], [2.0], [30.0], [40.0]]))


@pytest.mark.parametrize("edge_files", [False, True], ids=["database", "edge-files"])
def test_edges_of_known_keys_in_a_new_order_are_translated_in_chunks(tmp_path, monkeypatch, edge_files):
    monkeypatch.setattr(graph_ingest, "TRANSLATE_CHUNK", 3)  # 10 edges: four chunks
    keys = [f"k{i}" for i in range(6)]
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5, 0, 2, 4, 1], [1, 2, 3, 4, 5, 0, 3, 5, 1, 4]])
    with open_stores(tmp_path, edge_files=edge_files) as stores:
        ingest_graph(Data(x=torch.ones(6, 1), edge_index=edge_index), stores, keys={None: keys})
        shuffled = [keys[i] for i in (5, 3, 1, 0, 2, 4)]  # local position p now holds shuffled[p]
        local = torch.tensor([shuffled.index(k) for k in keys])
        ingest_graph(Data(x=torch.ones(6, 1), edge_index=local[edge_index]), stores, keys={None: shuffled})
        row, col = graph_of(stores).get_edge_index(None, "coo")
        assert torch.equal(torch.stack([row, col]), edge_index)  # the same edges by key, so by id


def test_bad_input_raises_before_anything_is_written(tmp_path):
    data = generate_hetero_graph(seed=6)
    with open_stores(tmp_path) as stores:
        ingest_graph(data, stores)
        before = store_state(stores)
        broken = generate_hetero_graph(seed=7)
        broken["author", "writes", "paper"].edge_index[1, 5] = 10_000
        with pytest.raises(InvalidRequestError, match=r"edge #5 has destination 10000, outside node type 'paper'"):
            ingest_graph(broken, stores)
        with pytest.raises(InvalidRequestError, match="key 'k0' appears more than once"):
            ingest_graph(generate_hetero_graph(seed=7), stores,
                         keys={"institution": ["k0"] * data["institution"].num_nodes})
        with pytest.raises(InvalidRequestError, match="expected 15 keys"):
            ingest_graph(generate_hetero_graph(seed=7), stores, keys={"institution": ["k0"]})
        featureless = generate_hetero_graph(seed=7)
        del featureless["institution"].x, featureless["institution"].year
        featureless["institution"].num_nodes = 15
        with pytest.raises(InvalidRequestError, match="'institution' has no node-level tensor"):
            ingest_graph(featureless, stores)
        assert_same_state(before, store_state(stores))


def test_rows_that_do_not_fit_the_stored_attrs_are_refused(tmp_path):
    with open_stores(tmp_path) as stores:
        ingest_graph(Data(x=torch.ones(3, 2), y=torch.zeros(3, dtype=torch.long), num_nodes=3),
                     stores, keys={None: ["a", "b", "c"]})
        before = store_state(stores)
        with pytest.raises(InvalidRequestError, match="attr 'x' is stored as float32"):
            ingest_graph(Data(x=torch.ones(2, 2, dtype=torch.float64), num_nodes=2), stores,
                         keys={None: ["b", "a"]})
        assert_same_state(before, store_state(stores))
        with pytest.raises(InvalidRequestError, match="attr 'y' would have no row for 1 of its 4"):
            ingest_graph(Data(x=torch.ones(2, 2), num_nodes=2), stores, keys={None: ["a", "d"]})
        assert_same_state(before, store_state(stores))  # the new key 'd' got no id
        with pytest.raises(InvalidRequestError, match=r"attr 'x' is stored as float32 rows of shape \[2\], got float32 rows of shape \[3\]"):
            ingest_graph(Data(x=torch.ones(3, 3), y=torch.zeros(3, dtype=torch.long), num_nodes=3),
                         stores, keys={None: ["e", "a", "f"]})
        assert_same_state(before, store_state(stores))
        assert stores.id_map.lookup(None, ["d", "e", "f", "a"]).tolist() == [-1, -1, -1, 0]


def test_new_keys_of_a_known_type_get_the_planned_ids(tmp_path):
    with open_stores(tmp_path) as stores:
        stores.id_map.identity(None, 2)
        ingest_graph(Data(x=torch.tensor([[0.0], [1.0]]), num_nodes=2), stores)
        ingest_graph(Data(x=torch.tensor([[5.0], [1.5], [4.0], [3.0]]), num_nodes=4), stores,
                     keys={None: ["z", 1, "y", 7]})
        assert stores.id_map.to_keys(None, torch.arange(5)) == [0, 1, "z", "y", 7]
        assert torch.equal(features_of(stores).get_tensor(None, "x", None),
                           torch.tensor([[0.0], [1.5], [5.0], [4.0], [3.0]]))


def test_planetoid_without_its_raw_files_is_a_clear_error(tmp_path):
    with pytest.raises(MalformedFileError, match=r"Planetoid 'Cora': missing raw file.*ind\.cora\.x"):
        load_planetoid(tmp_path, "Cora")
