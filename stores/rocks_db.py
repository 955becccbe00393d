"""Opens rocksdict databases with the same explicit options on creation and on every reopen."""
from __future__ import annotations

import atexit
import errno
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Self

from rocksdict import AccessType, BlockBasedOptions, Cache, Options, Rdict, WriteBatch

from gnnstore.common.errors import PreconditionError, ResourceExhaustedError
from gnnstore.common.processes import process_exists

logger = logging.getLogger(__name__)


def rocksdb_options() -> Options:
    """Raw-mode options; passed for the default column family too, or a reopen drops them."""
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.set_write_buffer_size(64 << 20)
    table = BlockBasedOptions()
    table.set_block_cache(Cache(256 << 20))
    table.set_bloom_filter(10, False)
    opts.set_block_based_table_factory(table)
    return opts


def open_rdict(path: str | os.PathLike, *, read_only: bool, what: str, follow: bool = False) -> Rdict:
    """Open the RocksDB at ``path`` (created when missing unless ``read_only``).

    With ``follow`` (and ``read_only``) it is a RocksDB *secondary instance*: it reads the
    files the writer of ``path`` writes and sees its later writes after ``try_catch_up_with_primary``
    (its own info log goes to a temporary folder, removed by ``close_rdict`` or at exit).

    Raises:
        PreconditionError: a read-only open of a missing database, a database locked by
            another writer, or one RocksDB cannot read.
    """
    path = Path(path)
    if read_only and not (path / "CURRENT").is_file():
        raise PreconditionError(f"{what} {path} does not exist (run `gnnstore ingest` first)")
    folder = None  # a temporary folder this database uses, removed when it closes
    opened = path
    if follow:
        folder = _temporary_folder("gnnstore-secondary-")
        access = AccessType.secondary(str(folder))
    else:
        access = AccessType.read_only(False) if read_only else AccessType.read_write()
        if read_only and not os.access(path, os.W_OK):
            opened = folder = _read_only_view(path)
    try:
        db = Rdict(
            str(opened), rocksdb_options(),
            column_families={"default": rocksdb_options()}, access_type=access,
        )
    except Exception as exc:  # rocksdict raises a bare Exception for lock and corruption errors
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        if "lock" in str(exc).lower():
            raise PreconditionError(
                f"cannot open {what} {path}: another process holds its write lock (a running "
                "`gnnstore serve` or ingest); stop it first, or write through the server"
            ) from exc
        raise PreconditionError(f"cannot open {what} {path}: {exc}") from exc
    if folder is not None:
        _FOLDER_OF[id(db)] = folder
    return db


def close_rdict(db: Rdict) -> None:
    """Close ``db`` and remove the temporary folder it used (a replica waiting for its primary
    opens and closes its databases every second: each left a folder until the process exited)."""
    db.close()
    folder = _FOLDER_OF.pop(id(db), None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


_FOLDER_OF: dict[int, Path] = {}
"""The temporary folder of each open database that has one, by the database's ``id``."""


@atexit.register
def _remove_folders() -> None:
    """At exit, the folders of databases never closed (a kill leaves them to ``_temporary_folder``);
    a forked child that exits leaves its parent's alone."""
    for folder in _FOLDER_OF.values():
        if f"-{os.getpid()}-" in folder.name:
            shutil.rmtree(folder, ignore_errors=True)


_ROCKSDICT_CONFIG = "rocksdict-config.json"
_COPY_BATCH_BYTES = 16 << 20


def _read_only_view(path: Path) -> Path:
    """A temporary folder of links to the database's files, for a database on a read-only mount.

    rocksdict writes its config file on every open, which a read-only filesystem refuses; the
    view takes that write, and RocksDB only reads the real files through the links. The view
    is removed when the database closes.
    """
    view = _temporary_folder("gnnstore-read-only-")
    for entry in path.iterdir():
        if entry.name not in ("LOCK", _ROCKSDICT_CONFIG) and not entry.name.startswith("LOG"):
            (view / entry.name).symlink_to(entry)
    return view


def _temporary_folder(prefix: str) -> Path:
    """A new folder named with this process's id; ones left by processes that were killed (no
    exit handlers ran) are removed first."""
    for left in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        pid = left.name[len(prefix):].split("-")[0]
        if pid.isdigit() and not process_exists(int(pid)):
            shutil.rmtree(left, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


@contextmanager
def disk_full_as_error(what: str) -> Iterator[None]:
    """Turn a full disk during a write into ``ResourceExhaustedError`` (no path in the message).

    RocksDB applies a write batch whole or not at all, so the store is as it was before.
    """
    try:
        yield
    except Exception as exc:  # rocksdict raises a bare Exception carrying RocksDB's status text
        full = (isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)) or "No space left" in str(exc)
        if not full:
            raise
        raise ResourceExhaustedError(f"no space left on the disk for the {what}; nothing was written") from None


def scan_prefix(db: Rdict, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
    """Every ``(key, value)`` whose key starts with ``prefix``, in key order."""
    for key, value in db.items(from_key=prefix):
        if not key.startswith(prefix):
            return
        yield key, value


class RocksDBHandle:
    """Lifecycle shared by the stores that own one rocksdict database as ``self._db``."""

    read_only: bool

    def catch_up(self) -> None:
        """Read what the writer of a followed database (``follow=True``) wrote since the last call."""
        self._db.try_catch_up_with_primary()
        self._caught_up()

    def _caught_up(self) -> None:
        """Reload what the store keeps in memory from the database (after ``catch_up``)."""

    def copy_to(self, path: Path) -> None:
        """Write every key and value, one consistent view of them, into a new database at ``path``."""
        target = open_rdict(path, read_only=False, what="copy")
        try:
            batch, size = WriteBatch(raw_mode=True), 0
            for key, value in self._db.items():
                batch.put(key, value)
                size += len(key) + len(value)
                if size >= _COPY_BATCH_BYTES:
                    target.write(batch)
                    batch, size = WriteBatch(raw_mode=True), 0
            target.write(batch)
            target.flush()
        finally:
            target.close()

    def close(self) -> None:
        """Flush and close the database; the store is unusable afterwards.

        A flush RocksDB refuses (a full disk, or the error a failed write left) is logged, not
        raised: every acknowledged write is in the write-ahead log, which the next open replays.
        """
        if getattr(self, "_db", None) is not None:
            if not self.read_only:
                try:
                    self._db.flush()
                except Exception as exc:  # rocksdict raises a bare Exception carrying RocksDB's status
                    logger.warning("could not flush %s (%s); its write-ahead log keeps every acknowledged write",
                                   type(self).__name__, exc)
            close_rdict(self._db)
            self._db = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
