"""Node and edge files: CSV and Parquet read into a graph; malformed files name file, line, column."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from gnnstore.common.errors import InvalidRequestError, MalformedFileError
from gnnstore.ingest.file_source import read_graph_files


def write(path: Path, frame: pd.DataFrame) -> Path:
    if path.suffix == ".csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path, index=False)
    return path


def node_frame() -> pd.DataFrame:
    return pd.DataFrame({
        "key": [10, 20, 30, 40],
        "f0": [0.5, 1.5, 2.5, 3.5],
        "f1": [-1.0, 0.0, 1.0, 2.0],
        "y": [0, 1, 1, 0],
        "train_mask": [True, False, True, False],
    })


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_homogeneous_files_give_keys_features_labels_masks_and_local_edges(tmp_path, suffix):
    nodes = write(tmp_path / f"nodes{suffix}", node_frame())
    edges = write(tmp_path / f"edges{suffix}", pd.DataFrame({"src": [10, 40, 30], "dst": [20, 10, 30]}))
    data, keys = read_graph_files(nodes={None: nodes}, edges={None: edges})
    assert keys[None].tolist() == [10, 20, 30, 40]
    assert torch.equal(data.x, torch.tensor([[0.5, -1.0], [1.5, 0.0], [2.5, 1.0], [3.5, 2.0]]))
    assert data.x.dtype == torch.float32
    assert torch.equal(data.y, torch.tensor([0, 1, 1, 0]))
    assert torch.equal(data.train_mask, torch.tensor([True, False, True, False]))
    assert torch.equal(data.edge_index, torch.tensor([[0, 3, 2], [1, 0, 2]]))


def test_typed_files_with_string_keys_and_a_npy_matrix(tmp_path):
    papers = write(tmp_path / "papers.parquet", pd.DataFrame({"key": ["p1", "p2"], "y": [3, 4]}))
    authors = write(tmp_path / "authors.csv", pd.DataFrame({"key": ["a1", "a2", "a3"], "age": [30, 40, 50]}))
    matrix = np.arange(6, dtype=np.float16).reshape(2, 3)
    np.save(tmp_path / "papers.npy", matrix)
    writes = write(tmp_path / "writes.csv", pd.DataFrame({"src": ["a3", "a1"], "dst": ["p2", "p2"]}))
    data, keys = read_graph_files(
        nodes={"paper": papers, "author": authors},
        features={"paper": tmp_path / "papers.npy"},
        edges={("author", "writes", "paper"): writes},
    )
    assert keys["paper"].tolist() == ["p1", "p2"] and keys["author"].tolist() == ["a1", "a2", "a3"]
    assert torch.equal(data["paper"].x, torch.from_numpy(matrix))
    assert torch.equal(data["author"].x, torch.tensor([[30.0], [40.0], [50.0]]))
    assert torch.equal(data["author", "writes", "paper"].edge_index, torch.tensor([[2, 0], [1, 1]]))


def test_a_npy_matrix_alone_gives_nodes_0_to_n(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((5, 2), dtype=np.float32))
    edges = write(tmp_path / "edges.csv", pd.DataFrame({"src": [4], "dst": [0]}))
    data, keys = read_graph_files(features={None: tmp_path / "x.npy"}, edges={None: edges})
    assert keys[None] is None and data.num_nodes == 5
    assert torch.equal(data.edge_index, torch.tensor([[4], [0]]))


def malformed_csv(tmp_path: Path, nodes_text: str, edges_text: str = "src,dst\n10,20\n") -> tuple[Path, Path]:
    nodes, edges = tmp_path / "nodes.csv", tmp_path / "edges.csv"
    nodes.write_text(nodes_text)
    edges.write_text(edges_text)
    return nodes, edges


GOOD_NODES = "key,f0,y\n10,1.0,0\n20,2.0,1\n30,3.0,1\n"


@pytest.mark.parametrize(
    "nodes_text, edges_text, fragments",
    [
        ("key,f0,y\n10,1.0,0\n20,abc,1\n", None, ["nodes.csv", "line 3", "'f0'", "'abc'"]),
        ("key,f0,y\n10,1.0,0\n20,2.0,1,7\n", None, ["nodes.csv", "line 3", "expected 3 fields"]),
        ("key,f0,y\n10,1.0,0\n20,2.0,1.5\n", None, ["nodes.csv", "line 3", "'y'", "not an integer"]),
        ("key,f0,y\n10,1.0,0\n20,,1\n", None, ["nodes.csv", "line 3", "'f0'", "empty value"]),
        ("key,f0,y\n10,1.0,0\n10,2.0,1\n", None, ["nodes.csv", "line 3", "'key'", "appears twice"]),
        ("id,f0\n10,1.0\n", None, ["nodes.csv", "line 1", "missing column 'key'"]),
        (GOOD_NODES, "src,dst\n10,20\n30,99\n", ["edges.csv", "line 3", "'dst'", "99", "not a node"]),
        (GOOD_NODES, "src,dst\n10,20\nx,30\n", ["edges.csv", "line 3", "'src'", "'x'"]),
        (GOOD_NODES, "src,target\n10,20\n", ["edges.csv", "line 1", "missing column 'dst'"]),
        (GOOD_NODES, 'src,dst\n10,20\n"30\n",20\n20,10\n40,10\n', ["edges.csv", "line 3", "'src'"]),
    ],
)
def test_malformed_csv_names_file_line_and_column(tmp_path, nodes_text, edges_text, fragments):
    nodes, edges = malformed_csv(tmp_path, nodes_text, edges_text or "src,dst\n10,20\n")
    with pytest.raises(MalformedFileError) as info:
        read_graph_files(nodes={None: nodes}, edges={None: edges})
    for fragment in fragments:
        assert fragment in str(info.value)


@pytest.mark.parametrize(
    "frame, fragments",
    [
        (pd.DataFrame({"key": [1, 2, 3], "f0": ["1.0", "2.0", "oops"]}), ["row 2", "'f0'", "'oops'"]),
        (pd.DataFrame({"key": [1, 2, 3], "f0": [1.0, None, 3.0]}), ["row 1", "'f0'", "empty value"]),
        (pd.DataFrame({"key": [1.5, 2.5], "f0": [1.0, 2.0]}), ["'key'", "double"]),
        (pd.DataFrame({"key": [1, 2], "y": [0.0, 0.5]}), ["row 1", "'y'"]),
        (pd.DataFrame({"node": [1, 2], "f0": [0.0, 0.5]}), ["schema", "missing column 'key'"]),
    ],
)
def test_malformed_parquet_names_file_row_and_column(tmp_path, frame, fragments):
    nodes = write(tmp_path / "nodes.parquet", frame)
    with pytest.raises(MalformedFileError) as info:
        read_graph_files(nodes={None: nodes})
    assert "nodes.parquet" in str(info.value)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_parquet_edge_to_an_unknown_node_names_the_row(tmp_path):
    nodes = write(tmp_path / "nodes.parquet", node_frame())
    edges = write(tmp_path / "edges.parquet", pd.DataFrame({"src": [10, 20, 77], "dst": [20, 30, 40]}))
    with pytest.raises(MalformedFileError, match=r"edges.parquet: row 2 \(0-based\), column 'src': key 77"):
        read_graph_files(nodes={None: nodes}, edges={None: edges})


def test_npy_with_wrong_row_count_and_unknown_suffix(tmp_path):
    nodes = write(tmp_path / "nodes.csv", pd.DataFrame({"key": [1, 2, 3]}))
    np.save(tmp_path / "x.npy", np.zeros((2, 4), dtype=np.float32))
    with pytest.raises(MalformedFileError, match="x.npy: has 2 rows but .*nodes.csv has 3 nodes"):
        read_graph_files(nodes={None: nodes}, features={None: tmp_path / "x.npy"})
    (tmp_path / "nodes.json").write_text("{}")
    with pytest.raises(MalformedFileError, match="unknown file type '.json'"):
        read_graph_files(nodes={None: tmp_path / "nodes.json"})


def test_edge_type_without_node_file_and_mixed_typing_are_rejected(tmp_path):
    nodes = write(tmp_path / "nodes.csv", node_frame())
    edges = write(tmp_path / "edges.csv", pd.DataFrame({"src": [10], "dst": [20]}))
    with pytest.raises(InvalidRequestError, match="node type 'venue' has no node file"):
        read_graph_files(nodes={"paper": nodes}, edges={("paper", "in", "venue"): edges})
    with pytest.raises(InvalidRequestError, match="not both"):
        read_graph_files(nodes={"paper": nodes}, edges={None: edges})
