"""Opens rocksdict databases with the same explicit options on creation and on every reopen."""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Self

from rocksdict import AccessType, BlockBasedOptions, Cache, Options, Rdict

from gnnstore.proto.errors import PreconditionError


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


def open_rdict(path: str | os.PathLike, *, read_only: bool, what: str) -> Rdict:
    """Open the RocksDB at ``path`` (created when missing unless ``read_only``).

    Raises:
        PreconditionError: a read-only open of a missing database, a database locked by
            another writer, or one RocksDB cannot read.
    """
    path = Path(path)
    if read_only and not (path / "CURRENT").is_file():
        raise PreconditionError(f"{what} {path} does not exist (run `gnnstore ingest` first)")
    access = AccessType.read_only(False) if read_only else AccessType.read_write()
    try:
        return Rdict(
            str(path), rocksdb_options(),
            column_families={"default": rocksdb_options()}, access_type=access,
        )
    except Exception as exc:  # rocksdict raises a bare Exception for lock and corruption errors
        raise PreconditionError(f"cannot open {what} {path}: {exc}") from exc


def scan_prefix(db: Rdict, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
    """Every ``(key, value)`` whose key starts with ``prefix``, in key order."""
    for key, value in db.items(from_key=prefix):
        if not key.startswith(prefix):
            return
        yield key, value


class RocksDBHandle:
    """Lifecycle shared by the stores that own one rocksdict database as ``self._db``."""

    read_only: bool

    def close(self) -> None:
        """Flush and close the database; the store is unusable afterwards."""
        if getattr(self, "_db", None) is not None:
            if not self.read_only:
                self._db.flush()
            self._db.close()
            self._db = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
