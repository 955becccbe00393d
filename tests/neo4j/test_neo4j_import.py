"""A new graph through Neo4j's offline importer: files written by gnnstore, imported by
``neo4j-admin`` from the suite's own jars into a fresh database, then adopted and read."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import warm_launcher
from graph_store_contract import random_coo
from neo4j_server import LocalNeo4j
from served import start_neo4j_server
from torch_geometric.sampler import NodeSamplerInput

from gnnstore.backend.engine.sampler import SnapshotNeighborSampler
from gnnstore.backend.engine.snapshot_builder import build_snapshot
from gnnstore.client import RemoteNeighborSampler, connect
from gnnstore.common.errors import InvalidRequestError, PreconditionError
from gnnstore.stores.neo4j_graph_store import Neo4jGraphStore
from gnnstore.stores.neo4j_import import ImportFilesGraphStore, admin_import_args, write_import_files

pytestmark = pytest.mark.neo4j

COUNTS = {"paper": 40, "author": 25, "user's type": 7}
EDGES = {
    ("author", "writes", "paper"): random_coo(25, 40, 120, seed=1),
    ("paper", "cites", "paper"): random_coo(40, 40, 200, seed=2),
    ("paper", "written_by", "author"): random_coo(40, 25, 120, seed=3),
    ("user's type", "likes", "paper"): random_coo(7, 40, 15, seed=4),
}


def test_an_imported_graph_reads_back_and_samples_as_a_put_one(tmp_path: Path) -> None:
    files = tmp_path / "import"
    plan = write_import_files(EDGES, COUNTS, files)
    assert [e["count"] for e in plan["edges"]] == [120, 200, 120, 15]
    with pytest.raises(PreconditionError, match="is not empty"):
        write_import_files(EDGES, COUNTS, files)

    neo4j = LocalNeo4j(tmp_path / "neo4j")
    report = neo4j.admin(admin_import_args(files))
    assert "IMPORT DONE" in report
    neo4j.start()
    try:
        store = Neo4jGraphStore(neo4j.uri, None)
        plan_file = files / "import-plan.json"
        good = plan_file.read_text()
        plan["edges"][1]["count"] += 1  # an import that lost a relationship is named, not served
        plan_file.write_text(json.dumps(plan))
        with pytest.raises(PreconditionError, match="relationships 'cites' from 'paper': 200 in Neo4j, 201"):
            store.adopt_import(files)
        assert store.edge_attrs() == []
        plan_file.write_text(good)
        store.adopt_import(files)
        version = store.version()
        store.adopt_import(files)  # again, as after an adopt cut off half-way: it finishes; the edges stay as imported
        assert {a.edge_type for a in store.edge_attrs()} == set(EDGES) and store.version() != version
        assert {a.edge_type: tuple(a.size) for a in store.edge_attrs()} == {
            et: (COUNTS[et[0]], COUNTS[et[-1]]) for et in EDGES
        }
        for edge_type, (row, col) in EDGES.items():
            got_row, got_col = store.edge_index(edge_type, "coo")
            assert np.array_equal(got_row, row.numpy()) and np.array_equal(got_col, col.numpy())  # eid order kept
        snapshot = build_snapshot(store, tmp_path / "snapshots")
        out = SnapshotNeighborSampler(snapshot, [-1]).sample_from_nodes(
            NodeSamplerInput(None, torch.tensor([3]), input_type="paper"))
        row, col = EDGES[("paper", "cites", "paper")]
        assert sorted(out.node["paper"][1:].tolist()) == sorted(set(row[col == 3].tolist()) - {3})
        live_row, _, live_eid = store.sample_in_neighbors(("paper", "cites", "paper"), np.array([3]), -1)
        assert sorted(live_eid.tolist()) == torch.nonzero(col == 3).flatten().tolist()  # ids are integers
        assert sorted(live_row.tolist()) == sorted(row[col == 3].tolist())

        version = store.version()  # a later put replaces an imported edge type as any other
        store.put_edges(random_coo(40, 40, 50, seed=9), ("paper", "cites", "paper"), "coo", (40, 40))
        assert store.version() != version
        assert store.edge_index(("paper", "cites", "paper"), "coo")[0].size == 50
        with pytest.raises(PreconditionError, match="holds a gnnstore graph other than this import"):
            store.adopt_import(files)  # the graph changed since: adopting would clobber it
        store.close()
    finally:
        neo4j.stop()


def test_bad_import_input_is_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequestError, match="its source node type has no count"):
        write_import_files({("venue", "hosts", "paper"): random_coo(3, 40, 5, seed=0)}, COUNTS, tmp_path / "a")
    with pytest.raises(InvalidRequestError, match=r"a destination id is outside \[0, 40\)"):
        write_import_files({("paper", "cites", "paper"): (torch.tensor([0]), torch.tensor([40]))}, COUNTS,
                           tmp_path / "b")
    with pytest.raises(PreconditionError, match="no import-plan.json"):
        admin_import_args(tmp_path / "nowhere")
    partial = ImportFilesGraphStore(tmp_path / "c")  # an ingest that failed before finish()
    partial.put_edges(random_coo(40, 40, 5), ("paper", "cites", "paper"), "coo", (40, 40))
    partial.close()
    with pytest.raises(PreconditionError, match="no import-plan.json"):
        admin_import_args(tmp_path / "c")


def test_ingest_to_import_files_then_adopt_then_serve(tmp_path: Path) -> None:
    """The user's path: `gnnstore ingest --neo4j-import-dir`, neo4j-admin, `gnnstore neo4j-adopt`,
    `gnnstore serve`; a trainer then samples the imported graph with the ingested features."""
    data_dir, files = tmp_path / "data", tmp_path / "import"
    ingest = warm_launcher.run(
        [sys.executable, "-m", "gnnstore", "ingest", "generate", "--nodes", "300", "--avg-degree", "4",
         "--features", "8", "--classes", "3", "--data-dir", str(data_dir), "--graph-backend", "neo4j",
         "--neo4j-import-dir", str(files)],
        capture_output=True, text=True, timeout=300,
    )
    assert ingest.returncode == 0, ingest.stderr[-2000:]
    assert "neo4j-admin database import full neo4j --id-type=integer" in ingest.stdout
    assert "gnnstore neo4j-adopt --import-dir" in ingest.stdout
    refused = warm_launcher.run([sys.executable, "-m", "gnnstore", "ingest", "generate", "--nodes", "10",
                              "--data-dir", str(tmp_path / "other"), "--neo4j-import-dir", str(tmp_path / "f")],
                             capture_output=True, text=True, timeout=300)
    assert refused.returncode == 1 and "add --graph-backend neo4j" in refused.stderr

    neo4j = LocalNeo4j(tmp_path / "neo4j")
    neo4j.admin(admin_import_args(files))
    neo4j.start()
    try:
        adopt = warm_launcher.run([sys.executable, "-m", "gnnstore", "neo4j-adopt", "--import-dir", str(files),
                                "--neo4j-uri", neo4j.uri], capture_output=True, text=True, timeout=300)
        assert adopt.returncode == 0, adopt.stderr[-2000:]
        assert "adopted the imported graph" in adopt.stdout
        with start_neo4j_server(data_dir, neo4j.uri, None, "--read-only") as server:
            fs, gs = connect(server.address)
            (attr,) = gs.get_all_edge_attrs()
            assert attr.edge_type is None and tuple(attr.size) == (300, 300)
            row, col = gs.get_edge_index(edge_type=None, layout="coo")
            assert row.numel() == 1200
            out = RemoteNeighborSampler(fs, [-1], feature_store=fs).sample_from_nodes(
                NodeSamplerInput(None, torch.tensor([5])))
            assert sorted(out.node[1:].tolist()) == sorted(set(row[col == 5].tolist()) - {5})
    finally:
        neo4j.stop()
