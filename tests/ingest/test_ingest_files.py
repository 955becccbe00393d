"""ingest_files into real stores: a round trip, and malformed files that leave the stores unchanged."""
from __future__ import annotations

import pandas as pd
import pytest
import torch
from ingest_state import assert_same_state, store_state, stored_edges
from pyg_views import features_of, graph_of

from gnnstore.common.errors import MalformedFileError
from gnnstore.ingest.file_source import ingest_files
from gnnstore.stores.data_dir import open_stores


@pytest.fixture()
def files(tmp_path):
    """A typed graph on disk: papers (Parquet, str keys), authors (CSV, int keys), two edge files."""
    pd.DataFrame({"key": ["p1", "p2", "p3"], "f0": [1.0, 2.0, 3.0], "f1": [0.0, 0.5, 1.0],
                  "y": [2, 0, 1], "train_mask": [True, True, False]}).to_parquet(
        tmp_path / "papers.parquet", index=False)
    pd.DataFrame({"key": [101, 102], "age": [30.0, 40.0]}).to_csv(tmp_path / "authors.csv", index=False)
    pd.DataFrame({"src": [102, 101, 102], "dst": ["p3", "p1", "p1"], "share": [0.5, 1.0, 0.25],
                  "order": [2, 1, 1]}).to_csv(tmp_path / "writes.csv", index=False)
    pd.DataFrame({"src": ["p2", "p3"], "dst": ["p1", "p1"]}).to_parquet(tmp_path / "cites.parquet", index=False)
    return {
        "nodes": {"paper": tmp_path / "papers.parquet", "author": tmp_path / "authors.csv"},
        "edges": {("author", "writes", "paper"): tmp_path / "writes.csv",
                  ("paper", "cites", "paper"): tmp_path / "cites.parquet"},
    }


def test_files_round_trip(tmp_path, files):
    with open_stores(tmp_path / "data") as stores:
        ingest_files(stores, **files)
        fs = features_of(stores)
        assert torch.equal(fs.get_tensor("paper", "x", None), torch.tensor([[1.0, 0.0], [2.0, 0.5], [3.0, 1.0]]))
        assert torch.equal(fs.get_tensor("paper", "y", None), torch.tensor([2, 0, 1]))
        assert torch.equal(fs.get_tensor("paper", "train_mask", None), torch.tensor([True, True, False]))
        assert stores.id_map.to_keys("author", [0, 1]) == [101, 102]
        edges, _ = stored_edges(graph_of(stores), ("author", "writes", "paper"))
        assert torch.equal(edges, torch.tensor([[1, 0, 1], [2, 0, 0]]))
        # the extra columns, in file order, are the edge type's edge_attr, a row per edge id
        writes = fs.get_tensor(("author", "writes", "paper"), "edge_attr", None)
        assert torch.equal(writes, torch.tensor([[0.5, 2.0], [1.0, 1.0], [0.25, 1.0]]))
        edges, _ = stored_edges(graph_of(stores), ("paper", "cites", "paper"))
        assert torch.equal(edges, torch.tensor([[1, 2], [0, 0]]))
        assert not [s for s in fs.tensor_schema() if s.group_name == ("paper", "cites", "paper")]


def test_an_untyped_edge_file_gives_the_homogeneous_edge_attributes(tmp_path):
    pd.DataFrame({"key": ["a", "b"], "f": [1.0, 2.0]}).to_csv(tmp_path / "nodes.csv", index=False)
    pd.DataFrame({"src": ["a", "b", "b"], "dst": ["b", "a", "b"], "w": [3.0, 4.0, 5.0]}).to_csv(
        tmp_path / "edges.csv", index=False)
    with open_stores(tmp_path / "data") as stores:
        ingest_files(stores, nodes={None: tmp_path / "nodes.csv"}, edges={None: tmp_path / "edges.csv"})
        fs = features_of(stores)
        assert torch.equal(fs.get_tensor((None, None), "edge_attr", None), torch.tensor([[3.0], [4.0], [5.0]]))
        assert [(a.group_name, a.attr_name) for a in fs.get_all_tensor_attrs()] == [(None, "x")]


@pytest.mark.parametrize(
    "breakage, fragment",
    [
        (lambda d: (d / "writes.csv").write_text("src,dst\n101,p1\n102,p9\n"),
         r"writes.csv: line 3, column 'dst': key 'p9' is not a node of type 'paper'"),
        (lambda d: (d / "writes.csv").write_text("src,dst\n101,p1\n102,p2,p3\n"),
         r"writes.csv: line 3: expected 2 fields"),
        (lambda d: (d / "writes.csv").write_text("src,dst,share\n101,p1,0.5\n102,p2,half\n"),
         r"writes.csv: line 3, column 'share': 'half' is not a number"),
        (lambda d: (d / "authors.csv").write_text("key,age\n101,30\n102,forty\n"),
         r"authors.csv: line 3, column 'age': 'forty' is not a number"),
        (lambda d: pd.DataFrame({"key": ["p1", "p2", "p3"], "f0": ["1", "x", "3"]}).to_parquet(
            d / "papers.parquet", index=False),
         r"papers.parquet: row 1 \(0-based\), column 'f0'"),
        (lambda d: pd.DataFrame({"from": ["p2"], "dst": ["p1"]}).to_parquet(d / "cites.parquet", index=False),
         r"cites.parquet: schema: missing column 'src'"),
    ],
)
def test_a_malformed_file_commits_nothing(tmp_path, files, breakage, fragment):
    with open_stores(tmp_path / "data") as stores:
        ingest_files(stores, **files)
        before = store_state(stores)
        versions = features_of(stores).version(), graph_of(stores).version()
        breakage(tmp_path)
        with pytest.raises(MalformedFileError, match=fragment):
            ingest_files(stores, **files)
        assert_same_state(before, store_state(stores))
        assert (features_of(stores).version(), graph_of(stores).version()) == versions
