"""Converting a data directory's graph database to another engine, in place (``gnnstore migrate``).

The two engines cannot share a process (``graph_engines.py``), so a child process reads the old
database into plain arrays and this one writes the new database from them, beside the old one.
Until graph-engine.json names the new engine, the directory opens with the old one; so a kill at
any point leaves the old graph serving, and running the migration again finishes or redoes it:

1. the child dumps the old database into ``graph-migration/dump/`` (``EmbeddedGraphStore.dump``);
2. the new database is built in ``graph-migration/`` and checkpointed (same tables, records and
   version: snapshots built from the old graph stay valid);
3. graph-engine.json is written naming the old engine (directories made before the record);
4. the new database is renamed into the directory;
5. graph-engine.json is replaced, naming the new engine: **the switch**;
6. the old database and ``graph-migration/`` are removed.
"""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

from gnnstore.common.durable_file import sync_directory
from gnnstore.common.errors import CommandInputError, PreconditionError
from gnnstore.stores.data_dir import EDGE_FILES, GRAPH_ENGINE, graph_kind, record_engine
from gnnstore.stores.embedded_graph_store import EmbeddedGraphStore
from gnnstore.stores.graph_engines import ENGINES, GraphEngine, engine_named

logger = logging.getLogger(__name__)

WORK = "graph-migration"


def migrate(data_dir: str | os.PathLike, to: str) -> str:
    """Convert ``data_dir``'s graph database to engine ``to``; returns what was done, in words.

    Raises:
        CommandInputError: no graph there (not a data directory).
        PreconditionError: the graph is kept as edge files, the old database
            cannot be read (in use by a writer, damaged), or the new one cannot be written.
    """
    root, target = Path(data_dir), engine_named(to)
    kind = graph_kind(root)
    if kind is None:
        raise CommandInputError(f"data directory {root} holds no graph: there is no database to migrate")
    if kind == EDGE_FILES:
        raise PreconditionError(f"data directory {root} holds its graph as edge files, which no engine reads: "
                                "there is no database to migrate")
    work = root / WORK
    if kind == target.name:  # done before, maybe killed before its clean-up
        left = _remove_other_databases(root, target) + ([WORK] if work.exists() else [])
        shutil.rmtree(work, ignore_errors=True)
        done = f"{root} already keeps its graph in {target.label}"
        return done + (f"; removed {', '.join(left)} left by an earlier migration" if left else "")
    source = ENGINES[kind]
    shutil.rmtree(work, ignore_errors=True)
    _dump_in_child(root / source.file_name, source, work / "dump")
    EmbeddedGraphStore.load(work / "dump", work / target.file_name, target).close()
    if not (root / GRAPH_ENGINE).is_file():
        record_engine(root, source)
    os.replace(work / target.file_name, root / target.file_name)
    sync_directory(root)
    record_engine(root, target)
    _remove_other_databases(root, target)
    shutil.rmtree(work, ignore_errors=True)
    return f"{root}: graph moved from {source.label} to {target.label} {target.version()}"


def _dump_in_child(path: Path, engine: GraphEngine, folder: Path) -> None:
    """``EmbeddedGraphStore.dump`` of ``path`` in a child process (it loads ``engine``, this one
    may have loaded the other)."""
    command = [sys.executable, "-m", "gnnstore.stores.engine_migration", str(path), engine.name, str(folder)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise PreconditionError(f"reading the {engine.label} graph failed: {last}")


def _remove_other_databases(root: Path, keep: GraphEngine) -> list[str]:
    """Remove the databases (and their write-ahead logs) of engines other than ``keep``."""
    removed = []
    for engine in ENGINES.values():
        if engine is keep:
            continue
        for name in (engine.file_name, engine.file_name + ".wal"):
            if (root / name).exists():
                (root / name).unlink()
                removed.append(name)
    if removed:
        sync_directory(root)
    return removed


def _dump_main(path: str, engine: str, folder: str) -> None:
    try:
        with EmbeddedGraphStore(path, engine=engine, read_only=True) as store:
            store.dump(Path(folder))
    except PreconditionError as exc:
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    _dump_main(*sys.argv[1:4])
