"""The server's feature read tier: per (node type, attr) an array exported from RocksDB.

RocksDB stays the durable, updatable truth; its point reads are far too slow for training
(~230k rows/s), so reads come from contiguous ``.npy`` arrays exported from it in bulk, held
in memory within the tier's budget, the others read from disk as rows (``TierSnapshot.open``:
a feature set bigger than the server's memory is served from disk). The tier is
versioned with the store: ``refresh(store)`` compares ``store.version()`` with the tier's and,
when they differ, exports a new version folder and swaps it in. Told what one write changed
(a ``Change``: rows of one attr, or one attr whole or removed) and holding the version that
write started from, it builds the new version from the live one instead: every other array is
a hard link to the live file, a whole attr is exported alone, and a few changed rows are a copy
of the live file with those rows rewritten. A one-row Put then costs one array's copy, not an
export of every feature.

Layout of ``directory``::

    CURRENT              the live version folder's name (replaced atomically)
    v-<uuid>/            manifest.json (store version, one entry per array) and <k>.npy
    .build-<uuid>/       a version being exported (renamed to v-<uuid> when complete)

A swap renames a complete folder into place and then replaces ``CURRENT``; a reader that
holds the old version (``snapshot()`` or a running ``gather``) keeps reading its own
arrays (maps stay valid after the old folder is deleted).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from gnnstore.backend.features.direct_reads import DirectRows
from gnnstore.backend.features.mapped_reads import MappedRows, ReadPool, map_rows
from gnnstore.backend.features.resident_arrays import file_identity, in_memory
from gnnstore.common.allocate import Allocate
from gnnstore.common.disk import full_disk_as_error, preallocated_npy
from gnnstore.common.dtypes import storage_dtype
from gnnstore.common.errors import InvalidRequestError, NotFoundError, PreconditionError
from gnnstore.common.row_copy import copy_rows, row_words

logger = logging.getLogger(__name__)


CURRENT = "CURRENT"
MANIFEST = "manifest.json"
EXPORT_CHUNK_BYTES = 16 << 20
"""Bytes of rows an export reads from the store at a time (a server under a memory limit
exports its tier at start-up)..."""
EXPORT_CHUNK_ROWS = 1 << 16
"""...and rows: the store reads each row as a Python bytes object."""
_EXPORT_ATTEMPTS = 3


class VersionedFeatureStore(Protocol):
    """What the tier needs of a feature store (``RocksDBRows`` provides it)."""

    def version(self) -> str: ...

    def tensor_schema(self) -> list[Any]: ...

    def read(self, group: Any, name: str | None, index: Any = None) -> np.ndarray: ...


def allocated(empty: Allocate | None, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """An uninitialised array of the dtype named ``dtype`` (``storage_dtype``'s), made by
    ``empty`` or by numpy."""
    return (empty or np.empty)(shape, storage_dtype(dtype))


def _group_key(group: Any) -> Any:
    """A group name read back from JSON: edge types come back as lists."""
    return tuple(group) if isinstance(group, list) else group


@dataclass(frozen=True)
class TierArray:
    """One exported (node type, attr): its rows, read-only, held in memory (``resident_from``:
    the (device, inode) of the file they were read from) or memory-mapped, read from the disk
    by ``reads`` (``MappedRows`` through the page cache, or ``DirectRows`` around it). ``dtype``
    names the rows' dtype (``rows`` holds ``bfloat16`` as raw words)."""

    group_name: Any
    attr_name: str | None
    dtype: str
    rows: np.ndarray
    resident_from: tuple[int, int] | None = None
    reads: MappedRows | DirectRows | None = None

    def gather(
        self, ids: np.ndarray, empty: Allocate | None = None, placement: tuple[np.ndarray, int] | None = None
    ) -> np.ndarray:
        """Rows of ``ids`` (global) in order, duplicates kept; range-checked once.

        ``empty(shape, dtype)`` allocates the result (default: ``np.empty``). With
        ``placement = (at, length)`` the result has ``length`` rows and the row of ``ids[j]`` is
        written at ``at[j]``; the other rows are left as allocated.

        Raises:
            InvalidRequestError: ids that are not integers, or out of ``0 .. N-1``.
        """
        ids = np.asarray(ids).reshape(-1)
        if ids.dtype.kind not in "iu" and ids.size:
            raise InvalidRequestError(
                f"feature tier: ids for node type {self.group_name!r}, attr {self.attr_name!r} "
                f"must be integers; got {ids.dtype}"
            )
        at, length = placement if placement is not None else (np.arange(ids.size), ids.size)
        if not ids.size:
            return allocated(empty, (length, *self.rows.shape[1:]), self.dtype)
        n, low, high = self.rows.shape[0], int(ids.min()), int(ids.max())
        if low < 0 or high >= n:
            bad = low if low < 0 else high
            raise InvalidRequestError(
                f"feature tier: id {bad} is out of range for node type {self.group_name!r}, "
                f"attr {self.attr_name!r} (valid ids: 0..{n - 1})"
            )
        out = allocated(empty, (length, *self.rows.shape[1:]), self.dtype)
        if out.size:
            ids = ids.astype(np.int64, copy=False)
            if self.reads is None:
                copy_rows(row_words(out), at, row_words(self.rows), ids)
            else:
                self.reads.copy(row_words(out), at, ids)
        return out


@dataclass(frozen=True)
class TierSnapshot:
    """One consistent version of the tier: the store version it was exported from, and arrays."""

    version: str
    path: Path
    arrays: dict[tuple[Any, str | None], TierArray]

    def array(self, group_name: Any, attr_name: str | None) -> TierArray:
        """The array of (node type, attr).

        Raises:
            NotFoundError: the tier holds no such (node type, attr).
        """
        found = self.arrays.get((group_name, attr_name))
        if found is None:
            have = sorted(f"{g!r}.{a!r}" for g, a in self.arrays)
            raise NotFoundError(
                f"the feature tier (store version {self.version}) has no attr "
                f"{attr_name!r} of node type {group_name!r} (has: {', '.join(have) or 'none'})"
            )
        return found

    @property
    def nbytes(self) -> int:
        """Bytes of every array's rows."""
        return sum(a.rows.nbytes for a in self.arrays.values())

    @property
    def resident(self) -> bool:
        """Whether every array is held in memory."""
        return all(a.resident_from is not None for a in self.arrays.values())

    def describe(self) -> str:
        """Where the rows are read from, e.g. ``0.01 GiB in memory, 4.58 GiB read straight from
        disk (a cache of 0.79 GiB)``."""
        where = dict.fromkeys(("in memory", "read through the page cache", "read straight from disk"), 0)
        cached = 0
        for a in self.arrays.values():
            how = "in memory" if a.reads is None else (
                "read straight from disk" if isinstance(a.reads, DirectRows) else "read through the page cache"
            )
            where[how] += a.rows.nbytes
            if isinstance(a.reads, DirectRows) and a.reads.cache is not None:
                cached += a.reads.cache.nbytes
        said = ", ".join(f"{n / 2**30:.2f} GiB {how}" for how, n in where.items() if n) or "no rows"
        return said + (f" (a cache of {cached / 2**30:.2f} GiB)" if cached else "")

    @classmethod
    def open(
        cls, path: Path, resident_bytes: int = 0, previous: TierSnapshot | None = None,
        pool: ReadPool | None = None, page_cache_bytes: int | None = None, cache_bytes: int | None = None,
    ) -> TierSnapshot:
        """Open a complete version folder, holding in memory as many arrays as fit in
        ``resident_bytes`` together, those of narrowest rows first (labels and masks before
        features: a row read from disk costs the same whatever its width). The others are
        memory-mapped and read by the threads of ``pool`` (default: a new one), through the page
        cache while the tier's bytes fit in ``page_cache_bytes`` (``None``: always), else
        straight from disk where the file allows (``direct_reads.py``), what ``cache_bytes``
        (default: ``resident_bytes``) leaves beside the arrays held caching the rows read again
        (``row_cache.py``). An array whose file is the one ``previous`` read (a hard link:
        unchanged by the write) keeps the copy, or the reader and its cache, ``previous`` holds.

        Raises:
            PreconditionError: a missing or unreadable manifest or array.
        """
        try:
            manifest = json.loads((path / MANIFEST).read_text())
            arrays, files = {}, {}
            for entry in manifest["arrays"]:
                group, attr = _group_key(entry["group_name"]), entry["attr_name"]
                shape = tuple(entry["shape"])
                files[(group, attr)] = file = path / entry["file"]
                # an empty file cannot be memory-mapped; it holds no rows to page in anyway
                rows = np.load(file, mmap_mode="r" if np.prod(shape) else None)
                if rows.shape != shape:
                    raise ValueError(f"{file}: shape {rows.shape}, manifest says {shape}")
                arrays[(group, attr)] = TierArray(group, attr, entry["dtype"], rows)
            total = sum(a.rows.nbytes for a in arrays.values())
            direct = page_cache_bytes is not None and total > page_cache_bytes
            held = {} if previous is None else {a.resident_from: a.rows for a in previous.arrays.values()}
            room, on_disk = resident_bytes, []
            for key, array in sorted(arrays.items(), key=lambda item: item[1].rows[:1].nbytes):
                if array.rows.nbytes <= room or not isinstance(array.rows, np.memmap):
                    room -= array.rows.nbytes
                    source = file_identity(files[key])
                    rows = held[source] if source in held else in_memory(array.rows)
                    arrays[key] = replace(array, rows=rows, resident_from=source)
                else:
                    on_disk.append(key)
            disk_bytes = sum(arrays[key].rows.nbytes for key in on_disk)
            held_bytes = resident_bytes - room
            room = max(0, (resident_bytes if cache_bytes is None else cache_bytes) - held_bytes)
            reused = {} if previous is None else {
                a.reads.source: a.reads for a in previous.arrays.values() if isinstance(a.reads, DirectRows)
            }
            for key in on_disk:  # the room left caches the rows read from disk, by their share of the bytes
                pool = pool or ReadPool()
                its_share = room * arrays[key].rows.nbytes // disk_bytes
                arrays[key] = _read_from_disk(arrays[key], files[key], pool, direct, its_share, reused)
            return cls(manifest["version"], path, arrays)
        except (OSError, ValueError, KeyError) as exc:
            raise PreconditionError(
                f"feature tier version {path} is unreadable ({exc}); delete it and refresh"
            ) from exc


def _read_from_disk(
    array: TierArray, file: Path, pool: ReadPool, direct: bool, cache_bytes: int,
    reused: dict[tuple[int, int], DirectRows],
) -> TierArray:
    """``array`` memory-mapped, read straight from disk (``direct``, where the file allows; a
    ``RowCache`` of ``cache_bytes``, or the one of ``reused`` of the same file) or through the
    page cache."""
    mapped = array.rows
    rows = map_rows(file, mapped.dtype, mapped.shape, mapped.offset)
    reads = None
    if direct:
        reads = reused.get(file_identity(file)) or DirectRows.open(
            file, mapped.offset, mapped.shape, mapped[:1].nbytes, pool, cache_bytes
        )
    return replace(array, rows=rows, reads=reads or MappedRows(row_words(rows), pool))


@dataclass(frozen=True)
class Change:
    """What one write did to the store: rows ``ids`` of (``group_name``, ``attr_name``), or the
    whole attr (``ids`` is ``None``: put whole, or removed), starting from ``base_version``."""

    base_version: str
    group_name: Any
    attr_name: str
    ids: np.ndarray | None = None


PATCH_FRACTION = 8
"""Rows are rewritten in a copy of the live array when at most 1/8 of them changed; else the
attr is exported again (a sequential export beats many scattered writes)."""


def export_change(store: VersionedFeatureStore, directory: Path, base: TierSnapshot, change: Change) -> Path | None:
    """A new version folder: ``base`` with ``change`` applied; ``None`` if the store moved on
    meanwhile (then a full export is needed)."""
    version = store.version()
    build = directory / f".build-{uuid.uuid4().hex}"
    build.mkdir(parents=True)
    files = {
        (_group_key(e["group_name"]), e["attr_name"]): base.path / e["file"]
        for e in json.loads((base.path / MANIFEST).read_text())["arrays"]
    }
    changed = (change.group_name, change.attr_name)
    entries = []
    for k, schema in enumerate(store.tensor_schema()):
        key = (schema.group_name, schema.attr_name)
        old = files.get(key)
        same_layout = key in base.arrays and base.arrays[key].rows.shape == tuple(schema.shape) and (
            base.arrays[key].dtype == schema.dtype
        )
        if key != changed and old is not None and same_layout:
            entries.append(_linked(old, build / f"{k}.npy", schema))
        elif key == changed and change.ids is not None and old is not None and same_layout and (
            len(change.ids) * PATCH_FRACTION <= schema.shape[0]
        ):
            entries.append(_patched(store, old, build / f"{k}.npy", schema, change.ids))
        else:
            entries.append(_export_array(store, schema, build, k))
    if store.version() != version:
        shutil.rmtree(build)
        return None
    (build / MANIFEST).write_text(json.dumps({"version": version, "arrays": entries}))
    final = directory / f"v-{build.name.removeprefix('.build-')}"
    os.rename(build, final)
    return final


def _entry(schema: Any, file: Path) -> dict:
    return {
        "group_name": schema.group_name,
        "attr_name": schema.attr_name,
        "dtype": schema.dtype,
        "shape": list(schema.shape),
        "file": file.name,
    }


def _linked(old: Path, new: Path, schema: Any) -> dict:
    """``new`` as a hard link to the unchanged ``old`` (a copy where links are refused)."""
    try:
        os.link(old, new)
    except OSError:
        shutil.copyfile(old, new)
    return _entry(schema, new)


def _patched(store: VersionedFeatureStore, old: Path, new: Path, schema: Any, ids: np.ndarray) -> dict:
    """``new`` as a copy of ``old`` with rows ``ids`` read again from the store, written with
    ``pwrite`` (the copy's blocks exist, so no write through a map can fault on a full disk)."""
    shutil.copyfile(old, new)
    ids = np.unique(ids)
    rows = store.read(schema.group_name, schema.attr_name, ids)
    raw = np.ascontiguousarray(rows).reshape(len(ids), -1).view(np.uint8)
    start, width = np.load(new, mmap_mode="r").offset, raw.shape[1]  # the .npy header's length
    with open(new, "r+b") as handle:
        for row, at in zip(raw, ids.tolist()):
            os.pwrite(handle.fileno(), row.tobytes(), start + at * width)
    return _entry(schema, new)


def export_snapshot(store: VersionedFeatureStore, directory: Path) -> Path:
    """Export every attr of ``store`` into a new complete version folder under ``directory``.

    Rows are copied ``EXPORT_CHUNK_BYTES`` at a time, so memory stays flat however big the
    features are. The store's version is read before and after; an export that overlapped a
    write is discarded and retried.

    Raises:
        PreconditionError: the store kept changing through every attempt.
    """
    for _ in range(_EXPORT_ATTEMPTS):
        version = store.version()
        build = directory / f".build-{uuid.uuid4().hex}"
        build.mkdir(parents=True)
        entries = [_export_array(store, schema, build, k) for k, schema in enumerate(store.tensor_schema())]
        if store.version() != version:
            shutil.rmtree(build)
            logger.info("feature tier: store changed during export, retrying")
            continue
        (build / MANIFEST).write_text(json.dumps({"version": version, "arrays": entries}))
        final = directory / f"v-{build.name.removeprefix('.build-')}"
        os.rename(build, final)
        return final
    raise PreconditionError(
        f"feature tier {directory}: the store changed during each of {_EXPORT_ATTEMPTS} exports; "
        "refresh when writes pause"
    )


def _export_array(store: VersionedFeatureStore, schema: Any, build: Path, k: int) -> dict:
    """Copy one (node type, attr) into ``build/<k>.npy``; return its manifest entry."""
    shape, dtype = tuple(schema.shape), schema.dtype
    file = build / f"{k}.npy"
    storage = storage_dtype(dtype)
    if np.prod(shape) == 0:
        np.save(file, np.empty(shape, dtype=storage))
    else:
        out = preallocated_npy(file, storage, shape)
        step = max(1, min(EXPORT_CHUNK_ROWS, EXPORT_CHUNK_BYTES // max(1, schema.row_bytes)))
        for start in range(0, shape[0], step):
            stop = min(start + step, shape[0])
            out[start:stop] = store.read(schema.group_name, schema.attr_name, slice(start, stop))
        out.flush()
        del out
    return _entry(schema, file)


class FeatureTier:
    """Feature arrays in ``directory``, rebuilt from the store when it changes: held in memory
    within ``resident_bytes`` (``resident_arrays.py``), the others read from disk, through the
    page cache while the tier fits in ``page_cache_bytes`` (``None``: always), else straight
    from disk, the rows read again cached within ``cache_bytes`` (default: ``resident_bytes``)
    beside the arrays held (``TierSnapshot.open``).

    Opening maps the live version (cheap, and safe in many processes); ``refresh`` opens it as
    configured, or first exports a new one. Only one process should ``refresh``.
    """

    def __init__(
        self, directory: str | os.PathLike, resident_bytes: int = 0, page_cache_bytes: int | None = None,
        cache_bytes: int | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.resident_bytes = resident_bytes
        self.page_cache_bytes = page_cache_bytes
        self.cache_bytes = cache_bytes
        self._pool = ReadPool()
        self._snapshot: TierSnapshot | None = None
        self._provisional = False  # opened mapped, until a refresh finds it current
        pointer = self.directory / CURRENT
        if pointer.is_file():  # mapped: a stale version is not worth a copy in memory
            self._snapshot = TierSnapshot.open(self.directory / pointer.read_text().strip(), pool=self._pool)
            self._provisional = True

    @property
    def version(self) -> str | None:
        """The store version the live arrays were exported from (``None`` before a refresh)."""
        return self._snapshot.version if self._snapshot is not None else None

    def snapshot(self) -> TierSnapshot:
        """The live version; keep it to read one consistent version across several gathers.

        Raises:
            PreconditionError: nothing has been exported yet.
        """
        snap = self._snapshot
        if snap is None:
            raise PreconditionError(
                f"feature tier {self.directory} is empty; call refresh(store) first"
            )
        return snap

    def is_current(self, store: VersionedFeatureStore) -> bool:
        """Whether the live arrays hold exactly the store's current rows."""
        return self.version is not None and self.version == store.version()

    def gather(self, group_name: Any, attr_name: str | None, ids: np.ndarray) -> np.ndarray:
        """Rows of ``ids`` (global) of one (node type, attr) from the live version.

        Raises:
            NotFoundError: unknown (node type, attr).
            InvalidRequestError: ids not integers or out of range.
            PreconditionError: nothing has been exported yet.
        """
        return self.snapshot().array(group_name, attr_name).gather(ids)

    def refresh(self, store: VersionedFeatureStore, change: Change | None = None) -> bool:
        """Swap in a new version if the store changed; return whether it did. A current version
        opened mapped is brought into memory when it fits.

        With ``change`` (what the one write since ``change.base_version`` did) and the live
        version at that base, only what changed is written; otherwise every attr is exported.
        """
        if self.is_current(store):
            if self._provisional:
                self._snapshot = self._open(self.snapshot().path)
                self._provisional = False
            self._log_live()
            return False
        self.directory.mkdir(parents=True, exist_ok=True)
        self._sweep(keep=())
        base = self._snapshot
        with full_disk_as_error(self.directory, "feature tier"):
            folder = None
            if change is not None and base is not None and base.version == change.base_version:
                folder = export_change(store, self.directory, base, change)
            if folder is None:
                folder = export_snapshot(store, self.directory)
        snap = self._open(folder, previous=base)
        self._provisional = False
        pointer = self.directory / f".{CURRENT}-{uuid.uuid4().hex}"
        pointer.write_text(folder.name)
        os.replace(pointer, self.directory / CURRENT)
        self._snapshot = snap
        self._sweep(keep=(folder.name,))
        self._log_live()
        return True

    def follow(self) -> bool:
        """Open the version ``CURRENT`` names if it is not the live one; return whether it was
        not. For a replica, whose primary exports the versions (a replica never writes here).

        Raises:
            PreconditionError: no version was exported yet.
            OSError: the named version was deleted before it was opened (call again).
        """
        pointer = self.directory / CURRENT
        if not pointer.is_file():
            raise PreconditionError(f"feature tier {self.directory.name} has no version yet: its primary exports one")
        folder = self.directory / pointer.read_text().strip()
        live = self._snapshot
        if live is not None and live.path == folder and not self._provisional:
            return False
        self._snapshot = self._open(folder, previous=live)
        self._provisional = False
        self._log_live()
        return True

    def _open(self, folder: Path, previous: TierSnapshot | None = None) -> TierSnapshot:
        return TierSnapshot.open(
            folder, self.resident_bytes, previous, self._pool, self.page_cache_bytes, self.cache_bytes
        )

    def describe(self) -> str:
        """Where the live arrays are read from, e.g. ``1.20 GiB in memory``."""
        return self.snapshot().describe()

    def stop_reads(self) -> None:
        """Make gathers from disk give up (a stopping server): they raise ``ServerUnavailableError``."""
        self._pool.stop()

    def _log_live(self) -> None:
        snap = self.snapshot()
        logger.info(
            "feature tier %s: at store version %s, %d arrays, %s",
            self.directory, snap.version, len(snap.arrays), self.describe(),
        )

    def _sweep(self, keep: Iterable[str]) -> None:
        """Delete version and build folders other than ``keep`` (open memory-maps stay valid)."""
        live = set(keep)
        if (self.directory / CURRENT).is_file():
            live.add((self.directory / CURRENT).read_text().strip())
        for path in self.directory.iterdir():
            if path.is_dir() and path.name not in live and path.name.startswith(("v-", ".build-")):
                shutil.rmtree(path, ignore_errors=True)
