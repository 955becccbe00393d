"""open_stores: the data directory layout, creation, reopening and what it refuses (on the default
engine; tests/stores/test_graph_engines.py covers the other)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from pyg_views import features_of, graph_of

from gnnstore.common.errors import PreconditionError
from gnnstore.stores import EdgeFileGraphStore, EmbeddedGraphStore, open_stores
from gnnstore.stores.data_dir import GRAPH, GRAPH_EDGES, GRAPH_ENGINE, graph_kind, missing_parts
from gnnstore.stores.graph_engines import DEFAULT_ENGINE

DB = DEFAULT_ENGINE.file_name


def test_writer_creates_then_reader_reopens(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with open_stores(data_dir) as stores:
        features_of(stores).put_tensor(torch.ones(3, 2), group_name="paper", attr_name="x", index=None)
        graph_of(stores).put_edge_index((torch.tensor([0, 1]), torch.tensor([2, 0])),
                                          ("paper", "cites", "paper"), "coo", size=(3, 3))
        stores.id_map.map_keys("paper", ["a", "b", "c"])
    assert {"features", DB, "idmap", GRAPH_ENGINE} <= {p.name for p in data_dir.iterdir()}
    assert json.loads((data_dir / GRAPH_ENGINE).read_text()) == {
        "engine": DEFAULT_ENGINE.name, "version": DEFAULT_ENGINE.version()
    }
    assert graph_kind(data_dir) == DEFAULT_ENGINE.name
    with open_stores(data_dir, read_only=True) as stores:
        assert torch.equal(features_of(stores).get_tensor("paper", "x", None), torch.ones(3, 2))
        assert graph_of(stores).get_all_edge_attrs()[0].size == (3, 3)
        assert stores.id_map.to_ids("paper", ["c"]).tolist() == [2]


def test_a_graph_created_as_edge_files_stays_edge_files(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    assert missing_parts(data_dir) == [GRAPH, "features", "idmap"]
    with open_stores(data_dir, edge_files=True) as stores:
        assert isinstance(stores.graph_store, EdgeFileGraphStore)
        graph_of(stores).put_edge_index((torch.tensor([0, 1]), torch.tensor([2, 0])), None, "coo", size=(3, 3))
    assert (data_dir / GRAPH_EDGES).is_dir() and not (data_dir / DB).exists()
    assert missing_parts(data_dir) == []
    with open_stores(data_dir, read_only=True) as stores:  # no flag needed to find them again
        assert isinstance(stores.graph_store, EdgeFileGraphStore)
        assert graph_of(stores).get_all_edge_attrs()[0].size == (3, 3)
    db_dir = tmp_path / "db"
    open_stores(db_dir).close()
    with open_stores(db_dir, edge_files=True) as stores:  # a directory keeps the kind it has
        assert isinstance(stores.graph_store, EmbeddedGraphStore)


def test_read_only_of_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(PreconditionError, match="does not exist; run `gnnstore ingest"):
        open_stores(tmp_path / "nowhere", read_only=True)
    assert not (tmp_path / "nowhere").exists()


def test_directory_missing_a_part(tmp_path: Path) -> None:
    with open_stores(tmp_path / "data"):
        pass
    (tmp_path / "data" / DB).unlink()
    for mode in (False, True):
        with pytest.raises(PreconditionError, match="is missing graph; run `gnnstore ingest"):
            open_stores(tmp_path / "data", read_only=mode)


def test_corrupt_parts(tmp_path: Path) -> None:
    with open_stores(tmp_path / "data"):
        pass
    (tmp_path / "data" / "idmap" / "CURRENT").unlink()
    with pytest.raises(PreconditionError, match="idmap/ is not a RocksDB database"):
        open_stores(tmp_path / "data")
    other = tmp_path / "other"
    with open_stores(other):
        pass
    (other / DB).write_bytes(b"not a database")
    with pytest.raises(PreconditionError, match=r"data directory .*other: graph store .* is not a LadybugDB .* "
                                                r"database .* made by another engine or another version"):
        open_stores(other, read_only=True)


def test_unrelated_folder_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(PreconditionError, match="is missing features, graph, idmap"):
        open_stores(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_second_writer_is_refused(tmp_path: Path) -> None:
    with open_stores(tmp_path / "data"):
        with pytest.raises(PreconditionError, match="cannot open"):
            open_stores(tmp_path / "data")


def test_graph_store_kept_elsewhere(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    edges = (torch.tensor([0, 1]), torch.tensor([1, 0]))
    with open_stores(data_dir, graph_store=EmbeddedGraphStore(tmp_path / "elsewhere.lbug")) as stores:
        graph_of(stores).put_edge_index(edges, None, "coo", size=(2, 2))
        stores.id_map.map_keys(None, ["a", "b"])
    assert sorted(p.name for p in data_dir.iterdir()) == ["features", "idmap"]
    graph = EmbeddedGraphStore(tmp_path / "elsewhere.lbug", read_only=True)
    with open_stores(data_dir, read_only=True, graph_store=graph) as stores:
        assert stores.graph_store is graph
        assert stores.id_map.to_ids(None, ["b"]).tolist() == [1]
        assert torch.equal(torch.stack(graph_of(stores).get_edge_index(None, "coo")), torch.stack(edges))


def test_graph_store_kept_elsewhere_is_closed_when_the_directory_is_refused(tmp_path: Path) -> None:
    with open_stores(tmp_path / "data", graph_store=EmbeddedGraphStore(tmp_path / "g.lbug")):
        pass
    (tmp_path / "data" / DB).write_bytes(b"ignored: the graph lives elsewhere")
    shutil.rmtree(tmp_path / "data" / "idmap")
    graph = EmbeddedGraphStore(tmp_path / "g.lbug")
    with pytest.raises(PreconditionError, match=r"data directory .*data is missing idmap; run"):
        open_stores(tmp_path / "data", graph_store=graph)
    assert graph._conn is None  # closed: the refused Stores owned it


def test_a_directory_made_by_one_engine_is_refused_by_name_to_another(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    open_stores(data_dir).close()
    for mode in (False, True):  # refused before the other engine is loaded (it cannot share this process)
        with pytest.raises(PreconditionError, match=r"its graph was made with LadybugDB \(graph\.lbug\), not Kùzu: "
                                                    r"serve it with --graph-backend ladybug .* `gnnstore migrate "
                                                    r"--data-dir .* --to kuzu`"):
            open_stores(data_dir, read_only=mode, engine="kuzu")
    open_stores(data_dir, read_only=True, engine=DEFAULT_ENGINE.name).close()  # its own engine, by name
    with pytest.raises(PreconditionError, match=r"unknown graph engine 'sqlite'; one of \['kuzu', 'ladybug'\]"):
        open_stores(tmp_path / "new", engine="sqlite")


def test_a_recorded_engine_version_is_named_when_the_database_will_not_open(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    open_stores(data_dir).close()
    (data_dir / GRAPH_ENGINE).write_text(json.dumps({"engine": DEFAULT_ENGINE.name, "version": "0.1.0"}))
    (data_dir / DB).write_bytes(b"a database file of another format")
    with pytest.raises(PreconditionError, match=r"LadybugDB 0\.1\.0 made it; this install has .*: install ladybug==0\.1\.0"):
        open_stores(data_dir, read_only=True)
