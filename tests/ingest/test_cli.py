"""``gnnstore ingest``: each source end to end into a data dir, summary on stdout, one-line errors."""
from __future__ import annotations

import socket
import sys

import pandas as pd
import pytest
import torch
import warm_launcher
from click.testing import CliRunner
from pyg_views import features_of, graph_of

from gnnstore.common.errors import InvalidRequestError
from gnnstore.ingest.cli import Target, ingest_command, resolve_target
from gnnstore.stores.data_dir import open_stores
from gnnstore.stores.neo4j_attached import AttachedSchema


def test_generate_ingests_and_prints_one_line_per_step(tmp_path):
    data_dir = tmp_path / "data"
    result = CliRunner().invoke(ingest_command, [
        "generate", "--nodes", "400", "--avg-degree", "3", "--features", "8", "--classes", "4",
        "--seed", "1", "--data-dir", str(data_dir),
    ])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert any(line.split()[:3] == ["nodes", "None", "400"] for line in lines)
    assert any(line.split()[:3] == ["features", "x", "400"] for line in lines)
    assert any(line.split()[:3] == ["edges", "None", "1,200"] for line in lines)
    assert lines[-1].startswith("total") and all("rows/s" in line for line in lines[:-1])
    with open_stores(data_dir, read_only=True) as stores:
        assert stores.id_map.num_nodes(None) == 400
        assert features_of(stores).get_tensor_size(None, "x") == (400, 8)
        (attr,) = graph_of(stores).get_all_edge_attrs()
        assert tuple(attr.size) == (400, 400)


def test_an_ingest_makes_an_attached_folder_its_own(tmp_path):
    data_dir = tmp_path / "data"
    generate = ["generate", "--nodes", "50", "--data-dir", str(data_dir)]
    assert CliRunner().invoke(ingest_command, generate).exit_code == 0
    AttachedSchema({"User": "uid"}, [("User", "R", "User")]).save(data_dir)  # as an attach leaves it
    assert AttachedSchema.load(data_dir) == AttachedSchema({"User": "uid"}, [("User", "R", "User")])
    result = CliRunner().invoke(ingest_command, generate + ["--seed", "2"])
    assert result.exit_code == 0, result.output
    assert AttachedSchema.load(data_dir) is None  # a neo4j live server must not read it as the user's graph


def test_planetoid_ingests_cora(tmp_path, cora_raw):
    result = CliRunner().invoke(ingest_command, [
        "planetoid", str(cora_raw), "--name", "Cora", "--data-dir", str(tmp_path / "data"),
    ])
    assert result.exit_code == 0, result.output
    assert any(line.split()[:3] == ["edges", "None", "10,556"] for line in result.stdout.splitlines())


def test_typed_files_ingest(tmp_path):
    pd.DataFrame({"key": ["p1", "p2", "p3"], "f": [1.0, 2.0, 3.0], "y": [0, 1, 0]}).to_parquet(
        tmp_path / "papers.parquet", index=False)
    pd.DataFrame({"key": [7, 8], "age": [30.0, 40.0]}).to_csv(tmp_path / "authors.csv", index=False)
    pd.DataFrame({"src": [8, 7, 8], "dst": ["p3", "p1", "p1"]}).to_csv(tmp_path / "writes.csv", index=False)
    data_dir = tmp_path / "data"
    result = CliRunner().invoke(ingest_command, [
        "files", "--nodes", f"paper={tmp_path / 'papers.parquet'}",
        "--nodes", f"author={tmp_path / 'authors.csv'}",
        "--edges", f"author,writes,paper={tmp_path / 'writes.csv'}", "--data-dir", str(data_dir),
    ])
    assert result.exit_code == 0, result.output
    with open_stores(data_dir, read_only=True) as stores:
        assert stores.id_map.to_keys("paper", [0, 1, 2]) == ["p1", "p2", "p3"]
        assert torch.equal(features_of(stores).get_tensor("author", "x", None), torch.tensor([[30.0], [40.0]]))
        chunks = list(graph_of(stores).iter_edge_index(("author", "writes", "paper")))
        assert torch.equal(torch.stack(chunks[0][:2]), torch.tensor([[1, 0, 1], [2, 0, 0]]))


def test_conflicting_options_fail_before_any_work(tmp_path):
    (tmp_path / "n.csv").write_text("key,f\n1,1.0\n")
    runner = CliRunner()
    result = runner.invoke(ingest_command, [
        "files", "--nodes", str(tmp_path / "n.csv"), "--edges", f"a,r,b={tmp_path / 'n.csv'}",
        "--data-dir", str(tmp_path / "data"),
    ])
    assert result.exit_code == 2 and "type all of them or none" in result.output
    result = runner.invoke(ingest_command, ["files", "--edges", "a,b=x.csv"])
    assert result.exit_code == 2
    assert not (tmp_path / "data").exists()


def test_help_shows_the_default_data_dir():
    result = CliRunner().invoke(ingest_command, ["generate", "--help"])
    assert result.exit_code == 0 and "gnnstore-data" in result.output


def test_malformed_file_is_one_line_on_stderr_exit_1_and_nothing_stored(tmp_path):
    (tmp_path / "nodes.csv").write_text("key,f0\n1,0.5\n2,zero\n")
    data_dir = tmp_path / "data"
    proc = warm_launcher.run(
        [sys.executable, "-m", "gnnstore", "ingest", "files", "--nodes", str(tmp_path / "nodes.csv"),
         "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    error_lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1 and "nodes.csv: line 3, column 'f0'" in error_lines[0]
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    with open_stores(data_dir) as stores:
        assert stores.id_map.node_types() == [] and features_of(stores).get_all_tensor_attrs() == []


def test_target_reads_flags_then_the_servers_environment_names(tmp_path):
    env = {"GNNSTORE_GRAPH_BACKEND": "neo4j", "GNNSTORE_NEO4J_URI": "bolt://db:7687",
           "GNNSTORE_NEO4J_USER": "loader", "GNNSTORE_NEO4J_PASSWORD": "s3cret-pw"}
    target = resolve_target(tmp_path, env, graph_backend=None, neo4j_uri=None, neo4j_user=None)
    assert target == Target(tmp_path, "neo4j", "bolt://db:7687", ("loader", "s3cret-pw"))
    assert "s3cret-pw" not in repr(target)
    target = resolve_target(tmp_path, env, graph_backend="kuzu", neo4j_uri="bolt://x:1", neo4j_user="me")
    assert (target.graph_backend, target.neo4j_uri) == ("kuzu", "bolt://x:1")
    assert target.neo4j_auth == ("me", "s3cret-pw")
    assert resolve_target(tmp_path, {}, graph_backend=None, neo4j_uri=None, neo4j_user=None) == Target(tmp_path)
    with pytest.raises(InvalidRequestError, match="graph_backend must be one of"):
        resolve_target(tmp_path, {"GNNSTORE_GRAPH_BACKEND": "postgres"}, graph_backend=None,
                       neo4j_uri=None, neo4j_user=None)


def test_password_is_never_a_flag(tmp_path):
    args = ["generate", "--neo4j-password", "x", "--data-dir", str(tmp_path)]
    result = CliRunner().invoke(ingest_command, args)
    assert result.exit_code == 2 and "No such option '--neo4j-password'" in result.output


def test_unreachable_neo4j_is_one_line_and_nothing_is_written(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once closed
    data_dir = tmp_path / "data"
    proc = warm_launcher.run(
        [sys.executable, "-m", "gnnstore", "ingest", "generate", "--nodes", "50", "--data-dir", str(data_dir),
         "--graph-backend", "neo4j", "--neo4j-uri", f"bolt://127.0.0.1:{port}"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert f"Neo4j at bolt://127.0.0.1:{port} (auth off) cannot be used" in line
    assert "GNNSTORE_NEO4J_URI" in line
    assert "Traceback" not in proc.stderr and not data_dir.exists()


def _generate(data_dir, *extra: str):
    return CliRunner().invoke(ingest_command, [
        "generate", "--nodes", "300", "--avg-degree", "2", "--features", "4", "--classes", "3",
        "--data-dir", str(data_dir), *extra,
    ])


def test_skip_if_done_skips_a_finished_ingest_without_opening_the_stores(tmp_path):
    data_dir = tmp_path / "data"
    assert _generate(data_dir, "--skip-if-done").exit_code == 0  # nothing recorded yet: runs
    with open_stores(data_dir):  # a running server holds the write lock, as in `compose up`
        again = _generate(data_dir, "--skip-if-done")
        assert again.exit_code == 0, again.output
        assert again.stdout.startswith("nothing to do:")
        other_seed = _generate(data_dir, "--skip-if-done", "--seed", "7")  # new input: must write
        assert other_seed.exit_code == 1
        assert "another process holds its write lock" in str(other_seed.exception)
    without_flag = _generate(data_dir)
    assert without_flag.exit_code == 0 and "nothing to do" not in without_flag.stdout


def test_a_failed_ingest_leaves_no_record_so_the_next_run_redoes_it(tmp_path):
    data_dir = tmp_path / "data"
    assert _generate(data_dir).exit_code == 0
    nodes = tmp_path / "nodes.csv"
    pd.DataFrame({"key": [1, 2], "f0": [0.5, 1.5]}).to_csv(nodes, index=False)
    edges = tmp_path / "edges.csv"
    pd.DataFrame({"src": [1], "dst": [99]}).to_csv(edges, index=False)  # 99 is no node's key
    failed = CliRunner().invoke(ingest_command, ["files", "--nodes", str(nodes), "--edges",
                                                 str(edges), "--data-dir", str(data_dir)])
    assert failed.exit_code == 1, failed.output
    redone = _generate(data_dir, "--skip-if-done")
    assert redone.exit_code == 0 and "nothing to do" not in redone.stdout


@pytest.mark.parametrize("junk", [b"", b"{not json", b"[1, 2]", b"\xff\xfe binary"])
def test_a_junk_ingest_record_is_no_record_and_the_ingest_runs(tmp_path, junk: bytes):
    data_dir = tmp_path / "data"
    assert _generate(data_dir).exit_code == 0
    (data_dir / "ingest-record.json").write_bytes(junk)
    redone = _generate(data_dir, "--skip-if-done")
    assert redone.exit_code == 0 and "nothing to do" not in redone.stdout, redone.output
    assert _generate(data_dir, "--skip-if-done").stdout.startswith("nothing to do:")  # rewritten whole
