"""``gnnstore ingest --graph-backend neo4j``: edges in Neo4j, features and ids in --data-dir, re-runs safe."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import torch
from click.testing import CliRunner
from neo4j import GraphDatabase
from pyg_views import features_of

from gnnstore.ingest.cli import ingest_command
from gnnstore.ingest.generator import generate_graph
from gnnstore.stores.data_dir import open_stores
from gnnstore.stores.neo4j_graph_store import Neo4jGraphStore
from gnnstore.stores.pyg_graph_store import PyGGraphStore

pytestmark = pytest.mark.neo4j


def neo4j_env(uri: str, auth: tuple | None) -> dict[str, str]:
    """The variables the server reads, as docker-compose.yml sets them."""
    env = {"GNNSTORE_NEO4J_URI": uri}
    if auth is not None:
        env |= {"GNNSTORE_NEO4J_USER": auth[0], "GNNSTORE_NEO4J_PASSWORD": auth[1]}
    return env


def counts(uri: str, auth: tuple | None) -> tuple[int, int]:
    """All relationships and all nodes in the database."""
    with GraphDatabase.driver(uri, auth=auth) as driver:
        rels = driver.execute_query("MATCH ()-[r]->() RETURN count(r) AS n").records[0]["n"]
        nodes = driver.execute_query("MATCH (n) RETURN count(n) AS n").records[0]["n"]
    return rels, nodes


def test_generate_into_neo4j_then_rerun_changes_nothing(neo4j_clean: tuple, tmp_path: Path) -> None:
    uri, auth = neo4j_clean
    data_dir = tmp_path / "data"
    args = ["generate", "--nodes", "300", "--avg-degree", "4", "--features", "8", "--classes", "3",
            "--seed", "2", "--data-dir", str(data_dir), "--graph-backend", "neo4j"]  # fmt: skip
    runner = CliRunner(env=neo4j_env(uri, auth))
    graph = generate_graph(300, 4.0, 8, 3, seed=2)
    results = []
    for _ in range(2):
        result = runner.invoke(ingest_command, args)
        assert result.exit_code == 0, result.output
        assert any(line.split()[:3] == ["edges", "None", "1,200"] for line in result.stdout.splitlines())
        assert sorted(p.name for p in data_dir.iterdir()) == ["features", "idmap", "ingest-record.json"]  # no graph.kuzu
        with PyGGraphStore(Neo4jGraphStore(uri, auth)) as graph_store:
            assert torch.equal(torch.stack(graph_store.get_edge_index(None, "coo")), graph.edge_index)
            (attr,) = graph_store.get_all_edge_attrs()
            assert tuple(attr.size) == (300, 300)
        results.append(counts(uri, auth))
    assert results[0] == results[1] and results[0][0] == 1200  # the re-run added nothing
    skipped = runner.invoke(ingest_command, [*args, "--skip-if-done"])  # as compose re-runs it
    assert skipped.exit_code == 0 and skipped.stdout.startswith("nothing to do:"), skipped.output
    other_uri = runner.invoke(ingest_command, [*args, "--skip-if-done", "--neo4j-uri", "bolt://127.0.0.1:1"])
    assert other_uri.exit_code != 0  # another graph target is not "done": it is tried (and fails here)
    with open_stores(data_dir, read_only=True, graph_store=Neo4jGraphStore(uri, auth)) as stores:
        assert stores.id_map.num_nodes(None) == 300
        assert torch.equal(features_of(stores).get_tensor(None, "x", None), graph.x)


def test_environment_alone_selects_neo4j_for_typed_files(neo4j_clean: tuple, tmp_path: Path) -> None:
    uri, auth = neo4j_clean
    pd.DataFrame({"key": ["p1", "p2", "p3"], "f": [1.0, 2.0, 3.0]}).to_csv(tmp_path / "papers.csv", index=False)
    pd.DataFrame({"key": [7, 8], "age": [30.0, 40.0]}).to_csv(tmp_path / "authors.csv", index=False)
    pd.DataFrame({"src": [8, 7, 8], "dst": ["p3", "p1", "p1"]}).to_csv(tmp_path / "writes.csv", index=False)
    runner = CliRunner(env={"GNNSTORE_GRAPH_BACKEND": "neo4j", **neo4j_env(uri, auth)})
    result = runner.invoke(ingest_command, [
        "files", "--nodes", f"paper={tmp_path / 'papers.csv'}", "--nodes", f"author={tmp_path / 'authors.csv'}",
        "--edges", f"author,writes,paper={tmp_path / 'writes.csv'}", "--data-dir", str(tmp_path / "data"),
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "data" / "graph.kuzu").exists()
    with PyGGraphStore(Neo4jGraphStore(uri, auth)) as graph_store:
        row, col = graph_store.get_edge_index(("author", "writes", "paper"), "coo")
        assert torch.equal(torch.stack([row, col]), torch.tensor([[1, 0, 1], [2, 0, 0]]))
