"""A graph store over plain ``.npy`` edge lists in a folder, written and read in bounded memory.

Kùzu's ``COPY`` of a rel table holds a put's edges in memory (~100 bytes an edge at 20M), so a
graph of a billion edges does not fit. This store writes a put's COO expansion to two int64
``.npy`` files a chunk at a time and reads them memory-mapped: a put of edges that are
themselves memory-mapped (an attach's spilled edges) and a scan for the topology snapshot
each hold one chunk, not the edge list. It keeps no node tables; sizes live in the metadata.

The folder holds ``meta.json`` (``version``, ``next_file`` and the edge records of
``edge_records``, each naming its ``file``) and per stored (edge type, layout)
``<file>.row.npy`` and ``<file>.col.npy``, edge ``i`` at position ``i``.

Atomicity: a put writes fresh files and fsyncs them, then replaces ``meta.json`` durably, then
removes the old files. A kill at any instruction leaves the previous metadata and files or the
new ones; files no metadata names (a put killed before its switch) are removed when the store
is next opened for writing. One process writes at a time (an exclusive ``flock`` on ``lock``).
"""
from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from gnnstore.common.durable_file import sync_directory, write_durably
from gnnstore.common.errors import PreconditionError, ResourceExhaustedError
from gnnstore.stores.base import DEFAULT_CHUNK_EDGES, checked_layout
from gnnstore.stores.edge_layout import EdgeTypeKey, check_edge_type, to_coo
from gnnstore.stores.edge_records import RecordedGraphStore, edge_key

logger = logging.getLogger(__name__)

META_FILE = "meta.json"
_LOCK_FILE = "lock"
_WRITE_CHUNK = 1 << 22
"""Edges copied into a file per write: 32 MB of int64."""


class EdgeFileGraphStore(RecordedGraphStore):
    """Edges by (edge type, layout), streamed and versioned, as ``.npy`` edge lists in ``path``.

    Args:
        path: the folder (created when missing unless ``read_only``).
        read_only: open without the write lock; puts and removes raise ``PreconditionError``.

    Raises:
        PreconditionError: a read-only open of a missing folder, a folder without readable
            metadata, or a writable open while another process writes.
    """

    def __init__(self, path: str | os.PathLike, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self._lock = threading.Lock()
        self._lock_file: BinaryIO | None = None
        if not read_only:
            self.path.mkdir(parents=True, exist_ok=True)
            self._lock_file = _exclusive_lock(self.path / _LOCK_FILE)
        try:
            self._meta = self._load_meta()
            if not read_only:
                self._remove_unnamed_files()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Release the write lock (a writer's files are already durable)."""
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({str(self.path)!r})"

    # ---- reads -----------------------------------------------------------------------------

    def version(self) -> str:
        """An opaque token that changes on every put and remove and survives reopening."""
        return "edge-files-" + self._meta["version"]

    def iter_edge_index(
        self, edge_type: EdgeTypeKey, chunk_size: int = DEFAULT_CHUNK_EDGES
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Yield ``(row, col, e_id)`` chunks (global ids) of ``edge_type`` in edge-id order.

        The canonical edge list is the COO layout if one was put, else the first layout put.

        Raises:
            NotFoundError: no edges of ``edge_type`` are stored.
            InvalidRequestError: ``chunk_size`` below 1 or a malformed edge type.
        """
        row, col = self._open_edges(self._scan_record(edge_type, chunk_size))
        for low in range(0, row.shape[0], chunk_size):
            high = min(row.shape[0], low + chunk_size)
            yield np.array(row[low:high]), np.array(col[low:high]), np.arange(low, high, dtype=np.int64)

    # ---- writes ----------------------------------------------------------------------------

    def put_edges(
        self, edge_index: object, edge_type: EdgeTypeKey, layout: str,
        size: tuple[int, int] | None = None, is_sorted: bool = False,
    ) -> bool:
        """Store ``edge_index`` as ``edge_type``'s edges in ``layout`` (``BaseGraphStore.put_edges``)."""
        self._check_writable()
        edge_type, layout = check_edge_type(edge_type), checked_layout(layout)
        edges = to_coo(edge_index, edge_type, layout, size, bool(is_sorted))
        key = edge_key(edge_type, layout)
        with self._lock:
            old = self._meta.get(key)
            file = f"e{self._meta['next_file']}"
            meta = {**self._meta, "next_file": self._meta["next_file"] + 1}
            try:
                for side, ids in (("row", edges.row), ("col", edges.col)):
                    _write_ids(self.path / f"{file}.{side}.npy", ids, edge_type)
                sync_directory(self.path)
                meta[key] = {"file": file, "size": list(edges.size), "is_sorted": bool(is_sorted),
                             "num_edges": int(edges.row.size), "seq": old["seq"] if old else meta["next_file"]}
                self._switch(meta)
            except BaseException:
                self._remove_files(file)
                raise
            if old is not None:
                self._remove_files(old["file"])
        logger.info("edge type %r (%s): %d edges put into %s", edge_type, layout, edges.row.size, file)
        return True

    def remove_edges(self, edge_type: EdgeTypeKey, layout: str) -> bool:
        """Delete ``edge_type``'s edges in ``layout``; whether they were stored."""
        self._check_writable()
        edge_type, layout = check_edge_type(edge_type), checked_layout(layout)
        key = edge_key(edge_type, layout)
        with self._lock:
            info = self._meta.get(key)
            if info is None:
                return False
            self._switch({k: v for k, v in self._meta.items() if k != key})
            self._remove_files(info["file"])
        logger.info("edge type %r (%s) removed", edge_type, layout)
        return True

    # ---- internals -------------------------------------------------------------------------

    def _load_meta(self) -> dict:
        file = self.path / META_FILE
        if not file.is_file():
            if self.read_only:
                raise PreconditionError(f"graph store {self.path} does not exist (run `gnnstore ingest`)")
            meta = {"version": f"{uuid.uuid4().hex}-0", "next_file": 0}
            write_durably(file, json.dumps(meta).encode())
            return meta
        try:
            return json.loads(file.read_bytes())
        except (OSError, ValueError) as exc:
            raise PreconditionError(f"graph store {self.path}: {META_FILE} is unreadable ({exc})") from None

    def _switch(self, meta: dict) -> None:
        """Make ``meta`` (with the version bumped) the store's metadata, durably and atomically."""
        store_id, counter = self._meta["version"].rsplit("-", 1)
        meta["version"] = f"{store_id}-{int(counter) + 1}"
        write_durably(self.path / META_FILE, json.dumps(meta).encode())
        self._meta = meta

    def _all_edges(self, info: dict) -> tuple[np.ndarray, np.ndarray]:
        row, col = self._open_edges(info)
        return np.array(row), np.array(col)

    def _open_edges(self, info: dict) -> tuple[np.ndarray, np.ndarray]:
        """``(row, col)`` of one record, memory-mapped read-only.

        Raises:
            PreconditionError: the files are gone (a writer replaced them after this reader
                read the metadata) or damaged (short, or not int64 ``.npy``).
        """
        where = f"graph store {self.path}: the edge files {info['file']}.*"
        try:
            ends = [np.load(self.path / f"{info['file']}.{side}.npy", mmap_mode="r") for side in ("row", "col")]
        except FileNotFoundError:
            raise PreconditionError(f"{where} are gone: a writer replaced them; open the store again") from None
        except (OSError, ValueError):
            ends = []
        if not ends or any(ids.shape != (info["num_edges"],) or ids.dtype != np.int64 for ids in ends):
            raise PreconditionError(f"{where} are damaged")
        return ends[0], ends[1]

    def _remove_files(self, file: str) -> None:
        for side in ("row", "col"):
            (self.path / f"{file}.{side}.npy").unlink(missing_ok=True)

    def _remove_unnamed_files(self) -> None:
        """Remove the edge files of puts that never switched to them (killed or failed)."""
        named = {info["file"] for info in self._meta.values() if isinstance(info, dict)}
        for entry in sorted(self.path.glob("e*.npy")):
            if entry.name.split(".", 1)[0] not in named:
                logger.warning("%s: removing %s, left by an unfinished put", self.path, entry.name)
                entry.unlink()


def _write_ids(file: Path, ids: np.ndarray, edge_type: EdgeTypeKey) -> None:
    """``ids`` as a durable int64 ``.npy`` file, copied a chunk at a time.

    Raises:
        ResourceExhaustedError: the filesystem is full (the caller removes the part written).
    """
    try:
        with open(file, "xb") as out:
            header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.int64)), "fortran_order": False,
                      "shape": (int(ids.size),)}
            np.lib.format.write_array_header_1_0(out, header)
            for low in range(0, ids.size, _WRITE_CHUNK):
                out.write(np.ascontiguousarray(ids[low:low + _WRITE_CHUNK], dtype=np.int64).data)
            out.flush()
            os.fsync(out.fileno())
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise ResourceExhaustedError(
                f"no space left for the {ids.size:,} edges of edge type {edge_type!r}: need {16 * ids.size:,} bytes"
            ) from None
        raise


def _exclusive_lock(file: Path) -> BinaryIO:
    """An open handle holding an exclusive ``flock`` on ``file``.

    Raises:
        PreconditionError: another process holds it.
    """
    handle = open(file, "a+b")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise PreconditionError(f"graph store {file.parent} is open for writing by another process") from None
    return handle
