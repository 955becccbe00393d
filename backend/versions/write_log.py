"""The durable log of graph writes: one file per write, each making the next graph version.

Version 0 is the topology snapshot the server built from its graph store; version ``v`` is
version 0 with writes ``1 .. v`` applied. On disk, in the data directory's ``graph_writes/``::

    base.json              {"base": <the version of the snapshot the writes apply to>}
    000000000001.npz       write 1: its node counts and, per edge type, added and removed edges

A write is published with ``write_durably`` (a fsynced part file renamed into place, then the
folder fsynced), so a process killed at any instruction leaves the log at the old version or
the new one. The log belongs to one base: after a new ``gnnstore ingest`` it no longer
applies, and ingest removes it.
"""
from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gnnstore.backend.engine.topology import edge_type_from_json, node_type_from_json
from gnnstore.common.durable_file import PART_PREFIX, PART_SUFFIX, write_durably
from gnnstore.common.errors import MalformedFileError, PreconditionError
from gnnstore.common.graph_types import EdgeType, NodeType

BASE_FILE = "base.json"
_RECORD = re.compile(r"^(\d{12})\.npz$")


@dataclass(frozen=True)
class EdgeChanges:
    """One edge type's changes in one write: edges added (global ids, with the edge ids they
    were given) and edge ids removed; every array int64 and 1-D."""

    add_src: np.ndarray
    add_dst: np.ndarray
    add_e_id: np.ndarray
    remove: np.ndarray


@dataclass(frozen=True)
class WriteRecord:
    """One write: the version it made, node counts of the types that grew, and edge changes."""

    version: int
    num_nodes: dict[NodeType | None, int] = field(default_factory=dict)
    edges: dict[EdgeType | None, EdgeChanges] = field(default_factory=dict)


class WriteLog:
    """The writes made over one base snapshot, in version order.

    Args:
        folder: the log's folder (created on the first write unless ``read_only``).
        base: the version of the snapshot the writes apply to.
        read_only: never write (a read-only server).

    Raises:
        PreconditionError: the folder's log was written over another base.
        MalformedFileError: a record cannot be read, or versions are missing.
    """

    def __init__(self, folder: Path, base: str, *, read_only: bool = False) -> None:
        self.folder = folder
        self.read_only = read_only
        self.base = base
        self.records: list[WriteRecord] = []
        if not read_only and (folder / BASE_FILE).is_file():
            for leftover in folder.glob(f"{PART_PREFIX}*{PART_SUFFIX}"):
                leftover.unlink()
        self.adopt(self.unread())

    def unread(self) -> list[WriteRecord]:
        """The records on disk after ``newest`` (written by another process: a replica's primary).

        Raises:
            PreconditionError: the folder's log was written over another base.
            MalformedFileError: a record cannot be read, or versions are missing.
        """
        base_file = self.folder / BASE_FILE
        if not base_file.is_file():
            return []
        try:
            logged = str(json.loads(base_file.read_text())["base"])
        except (ValueError, KeyError, TypeError) as exc:
            raise MalformedFileError(f"{base_file}: not a write log description ({exc})") from None
        if logged != self.base:
            raise PreconditionError(
                f"the graph writes in {self.folder} were made over graph version {logged}, but the graph store "
                f"is at {self.base}; move that folder away to serve the store as it is"
            )
        files = sorted(f for f in self.folder.iterdir() if _RECORD.match(f.name))
        records = []
        for expected, file in enumerate(files[self.newest:], start=self.newest + 1):
            if int(_RECORD.match(file.name).group(1)) != expected:
                raise MalformedFileError(f"{self.folder}: write {expected} is missing (found {file.name})")
            records.append(_load(file, expected))
        return records

    def adopt(self, records: list[WriteRecord]) -> None:
        """Take ``records`` (from ``unread``, in order) as the next versions."""
        for record in records:
            if record.version != self.newest + 1:
                raise PreconditionError(f"write {record.version} is not the next version ({self.newest + 1})")
            self.records.append(record)

    @property
    def newest(self) -> int:
        """The newest version (0: no writes)."""
        return len(self.records)

    def append(self, record: WriteRecord) -> None:
        """Make ``record`` durable as the next version.

        Raises:
            PreconditionError: the log is read-only, or ``record`` is not the next version.
        """
        if self.read_only:
            raise PreconditionError("this server is read-only: it takes no graph writes")
        if record.version != self.newest + 1:
            raise PreconditionError(f"write {record.version} is not the next version ({self.newest + 1})")
        self.folder.mkdir(parents=True, exist_ok=True)
        if not (self.folder / BASE_FILE).is_file():
            write_durably(self.folder / BASE_FILE, json.dumps({"base": self.base}).encode())
        write_durably(self.folder / record_name(record.version), _encode(record))
        self.records.append(record)


def record_name(version: int) -> str:
    """The file name of the write that made ``version``."""
    return f"{version:012d}.npz"


def logged_versions(folder: Path) -> int:
    """How many write records ``folder`` holds now (another process may be adding more)."""
    return sum(1 for f in folder.iterdir() if _RECORD.match(f.name)) if folder.is_dir() else 0


def _encode(record: WriteRecord) -> bytes:
    meta = {
        "version": record.version,
        "num_nodes": [[nt, n] for nt, n in record.num_nodes.items()],
        "edge_types": [None if et is None else list(et) for et in record.edges],
    }
    arrays = {"meta": np.frombuffer(json.dumps(meta).encode(), np.uint8)}
    for i, changes in enumerate(record.edges.values()):
        for name in ("add_src", "add_dst", "add_e_id", "remove"):
            arrays[f"e{i}.{name}"] = getattr(changes, name)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _load(file: Path, version: int) -> WriteRecord:
    try:
        with np.load(file, allow_pickle=False) as arrays:
            meta = json.loads(arrays["meta"].tobytes())
            edges = {
                edge_type_from_json(et): EdgeChanges(
                    *(np.asarray(arrays[f"e{i}.{name}"], np.int64) for name in ("add_src", "add_dst", "add_e_id", "remove"))
                )
                for i, et in enumerate(meta["edge_types"])
            }
            num_nodes = {node_type_from_json(nt): int(n) for nt, n in meta["num_nodes"]}
            if int(meta["version"]) != version:
                raise ValueError(f"it says version {meta['version']}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MalformedFileError(f"{file}: not a graph write record ({exc})") from None
    return WriteRecord(version, num_nodes, edges)

