"""The two embedded engines: Kùzu directories keep serving, `gnnstore migrate` converts them
atomically, and one process never loads both.

This process may have loaded LadybugDB (the default), so everything that opens Kùzu runs in a
child process: the store contract under Kùzu is a child pytest of test_embedded_graph_stores.py.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import warm_launcher

from gnnstore.common.errors import PreconditionError
from gnnstore.stores.data_dir import GRAPH_ENGINE, graph_kind
from gnnstore.stores.graph_engines import KUZU, LADYBUG

HERE = Path(__file__).parent

# Prints the directory's graph kind, store version and a digest of every stored edge list.
DIGEST = """
import hashlib, sys
from gnnstore.stores.data_dir import open_stores
with open_stores(sys.argv[1], read_only=True) as stores:
    graph, digest = stores.graph_store, hashlib.sha256()
    for attr in sorted(graph.edge_attrs(), key=lambda a: repr(a.edge_type)):
        for array in graph.edge_index(attr.edge_type, attr.layout):
            digest.update(array.tobytes())
    print(graph.engine.name, graph.version(), digest.hexdigest(), stores.id_map.num_nodes("paper"))
"""

# Makes a Kùzu data directory the way gnnstore did before LadybugDB (no graph-engine.json).
MAKE = """
import sys, torch
from gnnstore.stores.data_dir import open_stores
with open_stores(sys.argv[1], engine="kuzu") as stores:
    g = torch.Generator().manual_seed(0)
    for rel, n in (("cites", int(sys.argv[2])), ("refs", 500)):
        edges = (torch.randint(0, 4000, (n,), generator=g), torch.randint(0, 4000, (n,), generator=g))
        stores.graph_store.put_edges(edges, ("paper", rel, "paper"), "coo", (4000, 4000))
    csr = (torch.arange(4001), torch.randint(0, 4000, (4000,), generator=g))
    stores.graph_store.put_edges(csr, ("paper", "refs", "paper"), "csr", (4000, 4000))
    stores.id_map.identity("paper", 4000)
"""


def _python(code: str, *args: object, **kwargs: object) -> str:
    done = warm_launcher.run([sys.executable, "-W", "ignore", "-c", code, *map(str, args)], capture_output=True,
                          text=True, timeout=300, **kwargs)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def _gnnstore(*args: object) -> subprocess.CompletedProcess:
    return warm_launcher.run([sys.executable, "-W", "ignore", "-m", "gnnstore", *map(str, args)], capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def kuzu_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Kùzu directory of 50k edges, as made before LadybugDB (keep a copy before changing it)."""
    data_dir = tmp_path_factory.mktemp("kuzu") / "data"
    _python(MAKE, data_dir, 50_000)
    (data_dir / GRAPH_ENGINE).unlink()
    return data_dir


def _copy(source: Path, target: Path) -> Path:
    subprocess.run(["cp", "-a", str(source), str(target)], check=True)
    return target


def test_the_store_contract_holds_on_kuzu_too() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(HERE / "test_embedded_graph_stores.py")],
        capture_output=True, text=True, timeout=900, env={**os.environ, "GNNSTORE_TEST_ENGINE": "kuzu"}, cwd=HERE,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    summary = done.stdout.splitlines()[-1]
    assert "failed" not in summary and int(summary.split(" passed")[0].split()[-1]) >= 40, summary


def test_a_kuzu_directory_made_before_the_record_still_opens_as_kuzu(kuzu_dir: Path) -> None:
    assert graph_kind(kuzu_dir) == "kuzu" and not (kuzu_dir / GRAPH_ENGINE).exists()
    engine, version, digest, nodes = _python(DIGEST, kuzu_dir).split()
    assert engine == "kuzu" and nodes == "4000" and len(digest) == 64


def test_one_process_never_loads_both_engines() -> None:
    LADYBUG.module()  # this process's engine
    with pytest.raises(PreconditionError, match="Kùzu cannot be opened in a process that has loaded LadybugDB"):
        KUZU.module()
    assert "kuzu" not in sys.modules


def test_migrate_keeps_every_edge_the_version_and_the_snapshot(kuzu_dir: Path, tmp_path: Path) -> None:
    data_dir = _copy(kuzu_dir, tmp_path / "data")
    _, version, digest, _ = _python(DIGEST, data_dir).split()
    done = _gnnstore("migrate", "--data-dir", data_dir, "--to", "ladybug")
    assert done.returncode == 0, done.stderr
    assert "graph moved from Kùzu to LadybugDB" in done.stdout
    assert sorted(p.name for p in data_dir.iterdir()) == ["features", "graph-engine.json", "graph.lbug", "idmap"]
    assert json.loads((data_dir / GRAPH_ENGINE).read_text())["engine"] == "ladybug"
    assert _python(DIGEST, data_dir).split()[:3] == ["ladybug", version, digest]
    again = _gnnstore("migrate", "--data-dir", data_dir, "--to", "ladybug")
    assert again.returncode == 0 and "already keeps its graph in LadybugDB" in again.stdout
    back = _gnnstore("migrate", "--data-dir", data_dir, "--to", "kuzu")  # and back, by the same steps
    assert back.returncode == 0, back.stderr
    assert _python(DIGEST, data_dir).split()[:3] == ["kuzu", version, digest]


def test_a_migration_killed_at_any_point_leaves_the_old_graph_serving(kuzu_dir: Path, tmp_path: Path) -> None:
    data_dir = _copy(kuzu_dir, tmp_path / "data")
    _, version, digest, _ = _python(DIGEST, data_dir).split()
    work = data_dir / "graph-migration"
    # killed as soon as each step shows on disk: reading the old graph, writing the new, renamed in
    for step in (work / "dump", work / "graph.lbug", data_dir / "graph.lbug"):
        proc = warm_launcher.popen([sys.executable, "-W", "ignore", "-m", "gnnstore", "migrate", "--data-dir",
                                 str(data_dir), "--to", "ladybug"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while not step.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        engine, got_version, got_digest, _ = _python(DIGEST, data_dir).split()
        assert (got_version, got_digest) == (version, digest), f"killed at {step.name}: read by {engine}"
        if engine == "ladybug":  # the kill came after the switch
            break
        assert not (data_dir / "graph.lbug").exists() or step.parent == data_dir
    done = _gnnstore("migrate", "--data-dir", data_dir, "--to", "ladybug")  # finishes, or redoes it
    assert done.returncode == 0, done.stderr
    assert _python(DIGEST, data_dir).split()[:3] == ["ladybug", version, digest]
    assert not (data_dir / "graph.kuzu").exists() and not work.exists()


def test_migrate_refuses_what_it_cannot_convert(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    done = _gnnstore("migrate", "--data-dir", empty, "--to", "ladybug")
    assert done.returncode == 2 and "holds no graph: there is no database to migrate" in done.stderr
    assert "Traceback" not in done.stderr
    unknown = _gnnstore("migrate", "--data-dir", empty, "--to", "sqlite")
    assert unknown.returncode == 2 and "'sqlite' is not one of 'kuzu', 'ladybug'" in unknown.stderr


def test_a_damaged_kuzu_database_is_named_and_changes_nothing(kuzu_dir: Path, tmp_path: Path) -> None:
    data_dir = _copy(kuzu_dir, tmp_path / "data")
    (data_dir / "graph.kuzu").write_bytes(b"damaged")
    done = _gnnstore("migrate", "--data-dir", data_dir, "--to", "ladybug")
    assert done.returncode == 1 and "reading the Kùzu graph failed" in done.stderr
    assert "is not a Kùzu 0.11.3 database" in done.stderr and "Traceback" not in done.stderr
    assert graph_kind(data_dir) == "kuzu" and not (data_dir / "graph.lbug").exists()
    assert hashlib.sha256((data_dir / "graph.kuzu").read_bytes()).hexdigest() == hashlib.sha256(b"damaged").hexdigest()


def test_the_demo_ingests_serves_and_trains_on_kuzu(tmp_path: Path) -> None:
    done = _gnnstore("demo", "--nodes", 2000, "--epochs", 1, "--graph-backend", "kuzu", "--report-dir", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "(Kùzu + RocksDB)" in done.stdout
    assert "gnnstore serving on 127.0.0.1:" in done.stdout and " | kuzu " in done.stdout
