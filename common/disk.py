"""Files the server writes through memory maps, with their space reserved first.

A page of a memory-mapped file that the filesystem cannot back (a full disk) kills the process
with SIGBUS when written: no message, no chance to keep serving. ``preallocated_npy`` reserves
the whole file with ``posix_fallocate`` before the map is written, so a full disk is an
``OSError`` up front, raised as ``ResourceExhaustedError`` saying how much space was needed.
``full_disk_as_error`` does the same for the ordinary writes around those maps (numpy's short
writes carry no errno, so the free space decides).
"""
from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from gnnstore.common.errors import ResourceExhaustedError

PAGE_BYTES = 4096
"""Where a preallocated array's data starts in its file: a row of a page's size (or a divisor
of it) then lies in one page, one disk read when it is not cached (numpy's own header would
start the data at byte 128 and put every 4 KiB row across two pages)."""


def preallocated_npy(file: str | os.PathLike, dtype: np.dtype, shape: tuple[int, ...]) -> np.memmap:
    """A writable ``.npy`` memory map of ``shape`` whose blocks the filesystem has reserved,
    its data starting at ``PAGE_BYTES`` (``np.load`` reads it as any ``.npy``).

    Raises:
        ResourceExhaustedError: the filesystem has too little space (the file is removed); the
            message names the folder and the bytes needed.
    """
    dtype = np.dtype(dtype)
    size = PAGE_BYTES + dtype.itemsize * int(np.prod(shape))
    try:
        with open(file, "wb") as handle:
            handle.write(_page_header(dtype, shape))
            os.posix_fallocate(handle.fileno(), 0, size)
    except OSError as exc:
        Path(file).unlink(missing_ok=True)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise ResourceExhaustedError(
                f"no space left on {Path(file).parent}: need {size:,} bytes for one array"
            ) from None
        raise
    return np.memmap(file, dtype=dtype, mode="r+", offset=PAGE_BYTES, shape=shape)


def _page_header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    """A version 1.0 ``.npy`` header padded with spaces to ``PAGE_BYTES`` (the format allows it)."""
    fields = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": tuple(shape)}
    text = repr(fields).encode("latin1")
    prefix = np.lib.format.MAGIC_PREFIX + bytes([1, 0])
    length = PAGE_BYTES - len(prefix) - 2
    return prefix + length.to_bytes(2, "little") + text.ljust(length - 1) + b"\n"


ALMOST_FULL_BYTES = 1 << 20
"""A write that failed with less free space than this failed for want of space."""


@contextmanager
def full_disk_as_error(folder: str | os.PathLike, what: str, *, say_where: bool = True) -> Iterator[None]:
    """Raise an ``OSError`` of a full filesystem in the block as ``ResourceExhaustedError``.

    ``say_where=False`` leaves the folder out of the message (one a client reads).

    Raises:
        ResourceExhaustedError: the write failed and ``folder``'s filesystem is (nearly) full.
    """
    try:
        yield
    except OSError as exc:
        free = shutil.disk_usage(folder).free
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT) and free >= ALMOST_FULL_BYTES:
            raise
        where = f"on {folder} " if say_where else "on the disk "
        raise ResourceExhaustedError(f"no space left {where}for the {what}: {free:,} bytes free") from None


def ensure_free(folder: str | os.PathLike, needed: int, what: str) -> None:
    """Refuse work that will write about ``needed`` bytes under ``folder`` before any is written.

    Raises:
        ResourceExhaustedError: fewer bytes are free there (the message gives both sizes, not
            the folder: a client may read it).
    """
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise ResourceExhaustedError(
            f"no space left on the disk for {what}: it needs about {needed:,} bytes and {free:,} are free; "
            "nothing was written"
        )
