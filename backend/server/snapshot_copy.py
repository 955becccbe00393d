"""A consistent copy of a data directory's newest version, made while a primary serves it.

For hosts that share no filesystem with the primary: ``gnnstore snapshot create --data-dir D OUT``
writes OUT, which ``gnnstore serve --data-dir OUT`` serves on any host. The copy reads D as a
replica does (RocksDB secondary instances for the feature store and id map, the primary's
write log, topology snapshots and feature tier) and never writes D.

Consistency follows the primary's order of work: a graph write stores its new keys and rows
before it logs itself. The copy counts the logged writes first (its version ``v``), then takes
one consistent view of the feature store and of the id map, so every node of version ``v`` has
its key and rows in the copy. Writes that finished later may have left keys or rows of nodes
that are in no copied version, as a primary killed before logging a write does: they keep their
ids for the next write that names them. Feature rows are the store's as of the copy (they are
not versioned with the graph, on the primary either).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from gnnstore.backend.engine.snapshot_folder import sweep_dead_builds
from gnnstore.backend.features.feature_tier import CURRENT, MANIFEST
from gnnstore.backend.versions.write_log import BASE_FILE, WriteLog, logged_versions, record_name
from gnnstore.common.errors import CommandInputError
from gnnstore.stores.data_dir import FEATURE_TIER, FEATURES, GRAPH_WRITES, IDMAP, SNAPSHOTS, missing_parts, open_stores

logger = logging.getLogger(__name__)

_OWN_COPY = (FEATURES, IDMAP, GRAPH_WRITES, FEATURE_TIER, SNAPSHOTS)  # copied part by part below


@dataclass(frozen=True)
class CopiedVersion:
    """What a copy holds: its graph version and its feature store version."""

    graph_version: int
    feature_version: str


def copy_newest_version(data_dir: Path, out: Path) -> CopiedVersion:
    """Copy ``data_dir``'s newest version to ``out`` (a new directory, renamed into place whole).

    Raises:
        CommandInputError: ``out`` exists, or ``data_dir`` is not a data directory with its graph.
        PreconditionError: a store cannot be opened (the message names it).
        MalformedFileError: a write record cannot be read.
    """
    if out.exists():
        raise CommandInputError(f"{out} exists; snapshot create writes a new directory")
    if not data_dir.is_dir():
        raise CommandInputError(f"data directory {data_dir} does not exist")
    missing = missing_parts(data_dir)
    if missing:
        raise CommandInputError(
            f"data directory {data_dir} lacks {', '.join(missing)}: snapshot create copies a data directory "
            "`gnnstore ingest` wrote, with its graph in it"
        )
    # Named as a snapshot build is, so a copy killed half-way is swept by the next one.
    staging = out.parent / f".building-{os.getpid()}-{out.name}-{uuid.uuid4().hex[:8]}"
    sweep_dead_builds(out.parent, out.name)
    try:
        with open_stores(data_dir, follow=True) as stores:
            graph_version = logged_versions(data_dir / GRAPH_WRITES)  # before the stores' views: see above
            stores.feature_store.catch_up()
            stores.id_map.catch_up()
            copied = CopiedVersion(graph_version, stores.feature_store.version())
            staging.mkdir(parents=True)
            stores.feature_store.copy_to(staging / FEATURES)
            stores.id_map.copy_to(staging / IDMAP)
        _copy_log(data_dir / GRAPH_WRITES, staging / GRAPH_WRITES, graph_version)
        for entry in data_dir.iterdir():
            if entry.name in _OWN_COPY or entry.name.startswith("."):
                continue
            (shutil.copytree if entry.is_dir() else shutil.copy2)(entry, staging / entry.name)
        if (data_dir / SNAPSHOTS).is_dir():
            for folder in (data_dir / SNAPSHOTS).iterdir():
                if not folder.name.startswith("."):  # a staged build is not a snapshot yet
                    shutil.copytree(folder, staging / SNAPSHOTS / folder.name)
        _copy_tier(data_dir / FEATURE_TIER, staging / FEATURE_TIER, copied.feature_version)
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    logger.info("copied graph version %d of %s to %s", graph_version, data_dir, out)
    return copied


def _copy_log(log: Path, out: Path, newest: int) -> None:
    """Writes 1 .. ``newest`` of ``log`` (and its base), checked to read as a log."""
    if not newest:
        return
    out.mkdir()
    shutil.copy2(log / BASE_FILE, out / BASE_FILE)
    for version in range(1, newest + 1):
        shutil.copy2(log / record_name(version), out / record_name(version))
    WriteLog(out, str(json.loads((out / BASE_FILE).read_text())["base"]), read_only=True)  # raises if unreadable


def _copy_tier(tier: Path, out: Path, feature_version: str) -> None:
    """The tier version exported from ``feature_version``, if it is the live one (else the copy's
    first server exports its own)."""
    pointer = tier / CURRENT
    if not pointer.is_file():
        return
    folder = tier / pointer.read_text().strip()
    try:
        if json.loads((folder / MANIFEST).read_text())["version"] != feature_version:
            return
        shutil.copytree(folder, out / folder.name)
    except FileNotFoundError:  # swept by the primary after a newer export: not this version's
        shutil.rmtree(out, ignore_errors=True)
        return
    (out / CURRENT).write_text(folder.name)
