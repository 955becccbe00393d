"""Feature rows in RocksDB, read and written as numpy arrays: one fixed-width row per (group,
attr, global id). ``RocksDBFeatureStore`` (``rocksdb_feature_store.py``) is PyG's FeatureStore
over it; the server reads and writes it directly, without torch.

A group is a node type, or for edge attributes an edge type (``(None, None)`` when homogeneous)
whose rows are indexed by edge id.

Layout (raw-mode rocksdict, all integers big-endian so byte order is numeric order):

* ``b"\\x00m" + json([group_name, attr_name])`` -> json metadata ``{slot, dtype, shape}``;
* ``b"\\x00n"`` -> the next free slot, ``b"\\x00v"`` -> ``"<db uuid>-<counter>"`` (the version);
* ``b"\\x00p" + slot`` marks a slot being bulk-loaded (removed on commit, swept on open);
* ``b"\\x01" + slot (4 bytes) + id (8 bytes)`` -> the row's raw bytes (native little-endian).

Writes are serialised by one lock per store (slot counter, version counter and metadata are
read-modify-write), so concurrent writers never share a slot or lose a version bump.
A (group, attr) owns one slot, so its rows are contiguous. A whole write (``index=None``)
writes the rows into a fresh slot through an SST file, then switches the metadata to it,
bumps the version and deletes the old slot's range in one WriteBatch: readers see the old
rows or the new ones, never a mix. A write with an index and a remove are one WriteBatch.
"""
from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

import numpy as np
from rocksdict import ReadOptions, SstFileWriter, WriteBatch

from gnnstore.common.attr_schema import AttrSchema
from gnnstore.common.dtypes import ITEMSIZE, storage_dtype
from gnnstore.common.errors import (
    InvalidRequestError,
    NotFoundError,
    PreconditionError,
)
from gnnstore.stores.rocks_db import (
    RocksDBHandle,
    disk_full_as_error,
    open_rdict,
    rocksdb_options,
    scan_prefix,
)
from gnnstore.stores.row_index import GroupName, check_group_name, resolve_index

logger = logging.getLogger(__name__)

_META = b"\x00m"
_NEXT_SLOT = b"\x00n"
_VERSION = b"\x00v"
_PENDING = b"\x00p"
_ROW = b"\x01"
_KEY = np.dtype([("p", "u1"), ("slot", ">u4"), ("id", ">u8")])
_SST_MIN_ROWS = 4096  # below this a whole put goes through one WriteBatch
_SST_CHUNK_BYTES = 16 << 20  # row bytes held as Python bytes at once while an SST file is written...
_SST_CHUNK_ROWS = 1 << 16  # ...and rows: a Python bytes object costs ~35 bytes beside a narrow row
_BULK_READ = ReadOptions()
_BULK_READ.fill_cache(False)



@dataclass
class _Meta:
    slot: int
    dtype: str  # its name
    shape: tuple[int, ...]

    @property
    def row_bytes(self) -> int:
        return int(np.prod(self.shape[1:], dtype=np.int64)) * ITEMSIZE[self.dtype]

    def to_json(self) -> bytes:
        return json.dumps({"slot": self.slot, "dtype": self.dtype, "shape": list(self.shape)}).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> "_Meta":
        d = json.loads(raw)
        return cls(int(d["slot"]), d["dtype"], tuple(int(s) for s in d["shape"]))


def _meta_key(group: GroupName, attr: str) -> bytes:
    return _META + json.dumps([group, attr]).encode()


def _row_keys(slot: int, ids: np.ndarray) -> list[bytes]:
    keys = np.empty(len(ids), _KEY)
    keys["p"], keys["slot"], keys["id"] = _ROW[0], slot, ids
    return keys.view("V13").tolist()


def _slot_range(slot: int) -> tuple[bytes, bytes]:
    return _ROW + slot.to_bytes(4, "big"), _ROW + (slot + 1).to_bytes(4, "big")


def _rows_to_bytes(rows: np.ndarray, row_bytes: int) -> list[bytes]:
    n = rows.shape[0]
    if row_bytes == 0:
        return [b""] * n
    flat = np.ascontiguousarray(rows).reshape(-1).view(np.uint8)
    return flat.reshape(n, row_bytes).view(f"V{row_bytes}").ravel().tolist()


def _rows(meta: _Meta, rows: np.ndarray, start: int, stop: int) -> Iterator[tuple[bytes, bytes]]:
    """(key, value) of rows ``start .. stop-1`` of a whole put into ``meta``'s slot."""
    keys = _row_keys(meta.slot, np.arange(start, stop, dtype=np.int64))
    return zip(keys, _rows_to_bytes(rows[start:stop], meta.row_bytes))


class RocksDBRows(RocksDBHandle):
    """Fixed-width rows keyed by global id in RocksDB (rocksdict), as numpy arrays: each dtype's
    own, ``bfloat16`` rows as their raw 16-bit words (``common/dtypes.py``).

    Args:
        path: the RocksDB directory (created when missing unless ``read_only``).
        read_only: open without the write lock; puts and removes raise ``PreconditionError``.
        follow: read-only, following another process's writes (``catch_up``).
    """

    def __init__(self, path: str | os.PathLike, *, read_only: bool = False, follow: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only or follow
        self._db = open_rdict(self.path, read_only=self.read_only, what="feature store", follow=follow)
        self._write_lock = threading.Lock()
        if not self.read_only:
            self._init_db()
        self._metas = self._load_metas()

    # ---- lifecycle -------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({str(self.path)!r})"

    def _init_db(self) -> None:
        """Create the version and slot counter on first open; sweep half-done bulk loads."""
        wb = WriteBatch(raw_mode=True)
        if self._db.get(_VERSION) is None:
            wb.put(_VERSION, f"{uuid.uuid4().hex}-0".encode())
            wb.put(_NEXT_SLOT, (0).to_bytes(4, "big"))
        for key, _ in list(scan_prefix(self._db, _PENDING)):
            begin, end = _slot_range(int.from_bytes(key[len(_PENDING):], "big"))
            wb.delete_range(begin, end)
            wb.delete(key)
            logger.info("feature store %s: swept an unfinished bulk load", self.path)
        if not wb.is_empty():
            self._db.write(wb)
        for leftover in self.path.glob("ingest-*.sst"):
            leftover.unlink()

    def _caught_up(self) -> None:
        self._metas = self._load_metas()

    def _load_metas(self) -> dict[tuple[GroupName, str], _Meta]:
        metas = {}
        for key, value in scan_prefix(self._db, _META):
            group, attr = json.loads(key[len(_META):])
            if isinstance(group, list):
                group = tuple(group)
            metas[(group, attr)] = _Meta.from_json(value)
        return metas

    # ---- public extras ---------------------------------------------------------------------

    def version(self) -> str:
        """An opaque token that changes on every put and remove and survives reopening."""
        return self._db[_VERSION].decode()

    def tensor_schema(self) -> list[AttrSchema]:
        """Dtype and shape of every stored (group_name, attr_name), read from metadata."""
        return [
            AttrSchema(group, attr, meta.dtype, meta.shape)
            for (group, attr), meta in sorted(self._metas.items(), key=lambda kv: repr(kv[0]))
        ]

    def dtype(self, group: object, name: str | None) -> str:
        """The name of (group, name)'s dtype.

        Raises:
            NotFoundError: no such (group, name).
        """
        return self._meta(check_group_name(group), name).dtype

    def size(self, group: object, name: str | None) -> tuple[int, ...] | None:
        """The full shape of (group, name), or ``None`` when it is not stored."""
        meta = self._metas.get((check_group_name(group), name))
        return None if meta is None else meta.shape

    def write(self, group: object, name: str | None, rows: np.ndarray, dtype: str, index: object = None) -> bool:
        """Write ``rows`` (of dtype ``dtype``, held as ``storage_dtype(dtype)``) as (group,
        name) whole (``index`` None), or at the ids ``index`` selects (PyG's index forms; ids
        just past the stored rows append).

        Raises:
            InvalidRequestError: a bad group, name, dtype, shape or index, naming it.
            PreconditionError: the store is read-only.
            ResourceExhaustedError: the disk is full.
        """
        self._check_writable()
        group = check_group_name(group)
        name = _check_attr_name(name)
        rows = _checked_array(rows, dtype, group, name)
        with self._write_lock, disk_full_as_error(f"feature {group!r}.{name!r}"):
            meta = self._metas.get((group, name))
            if index is None or (meta is None and _is_full_slice(index)):
                self._put_whole(group, name, rows, dtype)
                return True
            if meta is None:
                meta = _Meta(-1, dtype, (0, *rows.shape[1:]))
            ids = resolve_index(index, meta.shape[0], group, name, allow_append=True)
            if ids.ndim == 0:
                ids = ids.reshape(1)
                if tuple(rows.shape) == meta.shape[1:]:
                    rows = rows[None]
            _check_rows(group, name, meta, rows, dtype, len(ids))
            self._put_rows(group, name, meta, ids, rows)
            return True

    def read(self, group: object, name: str | None, index: object = None) -> np.ndarray:
        """Rows of (group, name) at the ids ``index`` selects (PyG's index forms: an int gives
        one row without the leading dimension), order and duplicates kept.

        Raises:
            NotFoundError: no such (group, name).
            InvalidRequestError: a bad index or an id out of range.
        """
        group = check_group_name(group)
        meta = self._meta(group, name)
        ids = resolve_index(index, meta.shape[0], group, name)
        if ids.ndim == 0:
            return self._read(meta, ids.reshape(1))[0]
        return self._read(meta, ids)

    def remove(self, group: object, name: str | None) -> bool:
        """Delete (group, name); whether it was stored."""
        self._check_writable()
        group = check_group_name(group)
        with self._write_lock, disk_full_as_error(f"removal of feature {group!r}.{name!r}"):
            meta = self._metas.get((group, name))
            if meta is None:
                return False
            wb = WriteBatch(raw_mode=True)
            wb.delete(_meta_key(group, name))
            wb.delete_range(*_slot_range(meta.slot))
            self._bump_version(wb)
            self._db.write(wb)
            del self._metas[(group, name)]
        logger.info("feature %r.%r removed", group, name)
        return True

    # ---- internals -------------------------------------------------------------------------

    def _meta(self, group: GroupName, name: str) -> _Meta:
        meta = self._metas.get((group, name))
        if meta is None:
            have = sorted(f"{g!r}.{a!r}" for g, a in self._metas)
            raise NotFoundError(
                f"no feature {name!r} for node type {group!r} (stored: {', '.join(have) or 'none'})"
            )
        return meta

    def _check_writable(self) -> None:
        if self.read_only:
            raise PreconditionError(f"feature store {self.path} is open read-only")

    def _read(self, meta: _Meta, ids: np.ndarray) -> np.ndarray:
        """Rows ``ids`` (validated, in order, duplicates kept): one range scan or one multi-get."""
        n = len(ids)
        if n == 0 or meta.row_bytes == 0:
            return np.zeros((n, *meta.shape[1:]), dtype=storage_dtype(meta.dtype))
        if ids[-1] - ids[0] == n - 1 and np.all(np.diff(ids) == 1):  # a run: one range scan
            # a bulk read (an export of the tier): its blocks would only evict the cached ones
            values = islice(self._db.values(from_key=_row_keys(meta.slot, ids[:1])[0], read_opt=_BULK_READ), n)
        else:
            values = self._db[_row_keys(meta.slot, ids)]
        raw = np.frombuffer(b"".join(values), dtype=np.uint8)
        if raw.size != n * meta.row_bytes:
            raise PreconditionError(
                f"feature store {self.path}: rows of slot {meta.slot} are missing or truncated "
                "(the database is corrupt; re-run `gnnstore ingest`)"
            )
        return raw.view(storage_dtype(meta.dtype)).reshape(n, *meta.shape[1:]).copy()

    def _next_slot(self, wb: WriteBatch) -> int:
        slot = int.from_bytes(self._db[_NEXT_SLOT], "big")
        wb.put(_NEXT_SLOT, (slot + 1).to_bytes(4, "big"))
        return slot

    def _bump_version(self, wb: WriteBatch) -> None:
        db_id, counter = self._db[_VERSION].decode().rsplit("-", 1)
        wb.put(_VERSION, f"{db_id}-{int(counter) + 1}".encode())

    def _put_whole(self, group: GroupName, name: str, array: np.ndarray, dtype: str) -> None:
        """Replace (group, name) by ``array``: rows into a fresh slot, then one switch."""
        old = self._metas.get((group, name))
        reserve = WriteBatch(raw_mode=True)
        meta = _Meta(self._next_slot(reserve), dtype, tuple(array.shape))
        rows = array.shape[0]
        commit = WriteBatch(raw_mode=True)
        if rows >= _SST_MIN_ROWS:
            pending = _PENDING + meta.slot.to_bytes(4, "big")
            reserve.put(pending, b"")
            self._db.write(reserve)
            self._ingest(meta, array)
            commit.delete(pending)
        else:
            self._db.write(reserve)
            for key, value in _rows(meta, array, 0, rows):
                commit.put(key, value)
        commit.put(_meta_key(group, name), meta.to_json())
        if old is not None:
            commit.delete_range(*_slot_range(old.slot))
        self._bump_version(commit)
        self._db.write(commit)
        self._metas[(group, name)] = meta
        logger.info("feature %r.%r put: %d rows of %s", group, name, rows, meta.dtype)

    def _ingest(self, meta: _Meta, array: np.ndarray) -> None:
        """Write the rows into one SST file and ingest it (keys ascend by slot, id). The rows go
        a chunk at a time: a Python bytes object per row costs ~110 bytes beside a 4-byte value."""
        fd, sst = tempfile.mkstemp(prefix="ingest-", suffix=".sst", dir=self.path)
        os.close(fd)
        try:
            writer = SstFileWriter(options=rocksdb_options())
            writer.open(sst)
            step = max(1, min(_SST_CHUNK_ROWS, _SST_CHUNK_BYTES // max(1, meta.row_bytes)))
            for start in range(0, array.shape[0], step):
                for key, value in _rows(meta, array, start, min(array.shape[0], start + step)):
                    writer[key] = value
            writer.finish()
            self._db.ingest_external_file([sst])
        finally:
            if os.path.exists(sst):
                os.remove(sst)

    def _put_rows(self, group: GroupName, name: str, meta: _Meta, ids: np.ndarray, rows: np.ndarray) -> None:
        """Update rows ``ids`` (and append contiguous new ones) in one WriteBatch."""
        wb = WriteBatch(raw_mode=True)
        if meta.slot < 0:
            meta = _Meta(self._next_slot(wb), meta.dtype, meta.shape)
        n = max(meta.shape[0], int(ids.max()) + 1 if len(ids) else 0)
        new = _Meta(meta.slot, meta.dtype, (n, *meta.shape[1:]))
        for key, value in zip(_row_keys(meta.slot, ids), _rows_to_bytes(rows, meta.row_bytes)):
            wb.put(key, value)
        wb.put(_meta_key(group, name), new.to_json())
        self._bump_version(wb)
        self._db.write(wb)
        self._metas[(group, name)] = new
        logger.info("feature %r.%r: %d rows updated", group, name, len(ids))



def _check_attr_name(name: object) -> str | None:
    """A non-empty str, or None (PyG's ``TensorAttr`` allows it: ``store['A', None, None] = x``)."""
    if name is not None and (not isinstance(name, str) or not name):
        raise InvalidRequestError(f"attr_name must be a non-empty str or None, got {name!r}")
    return name


def _checked_array(rows: object, dtype: str, group: GroupName, name: str | None) -> np.ndarray:
    """``rows`` if they are an array of ``dtype``'s storage with a row dimension."""
    if dtype not in ITEMSIZE:
        raise InvalidRequestError(f"feature {group!r}.{name!r}: unsupported dtype {dtype}")
    if not isinstance(rows, np.ndarray) or rows.dtype != storage_dtype(dtype):
        got = getattr(rows, "dtype", type(rows).__name__)
        raise InvalidRequestError(
            f"feature {group!r}.{name!r}: rows of {dtype} must come as {storage_dtype(dtype)}, got {got}"
        )
    if rows.ndim == 0:
        raise InvalidRequestError(f"feature {group!r}.{name!r}: expected shape [N, *], got a scalar")
    return rows


def _check_rows(group: GroupName, name: str, meta: _Meta, rows: np.ndarray, dtype: str, num_ids: int) -> None:
    if dtype != meta.dtype:
        raise InvalidRequestError(f"feature {group!r}.{name!r} holds {meta.dtype}, got {dtype}")
    if tuple(rows.shape[1:]) != meta.shape[1:]:
        raise InvalidRequestError(
            f"feature {group!r}.{name!r} has rows of shape {list(meta.shape[1:])}, got a tensor "
            f"of shape {list(rows.shape)}"
        )
    if rows.shape[0] != num_ids:
        raise InvalidRequestError(
            f"feature {group!r}.{name!r}: index selects {num_ids} rows but the tensor has "
            f"{rows.shape[0]}"
        )


def _is_full_slice(index: object) -> bool:
    return isinstance(index, slice) and index == slice(None)
