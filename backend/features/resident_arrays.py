"""Feature arrays held in the server's memory instead of memory-mapped from their files.

A sampling reply reads its rows at random positions. Through a file's map every row costs a
walk of the page tables for 4 KiB pages, which the kernel does not back with huge pages; an
array numpy allocates is anonymous memory that it asks the kernel to back with huge pages
(``MADV_HUGEPAGE``). Measured on the benchmark's 1M x 100 float32 tier with cold CPU caches:
11.5k rows of five attrs in 5.6 ms from the maps, 3.6 ms from memory. The price is the
arrays' bytes a second time while the page cache still holds the files, so the tier keeps
arrays resident only within a budget (``resident_budget``).
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np

from gnnstore.backend.features.memory_limit import MemoryLimit

COPY_CHUNK_BYTES = 64 << 20
"""Bytes copied from a file's map at a time (the page cache may drop them once copied)."""

AUTO_SHARE = 4
"""With no budget given, the arrays may take 1/AUTO_SHARE of the memory this process may use
beyond what it already holds (its libraries, the topology): the rest is for the replies in
flight and a write's second copy of an array."""

ROW_CACHE_SHARE = 2
"""With no budget given, the rows read from disk may be cached in 1/ROW_CACHE_SHARE of that
memory (``row_cache.py``): a write never holds such a cache twice (a new version's cache fills
as it is read), and replies' rows take at most a quarter (``reply_memory.py``). Measured on the
development VM (``benchmarks.out_of_core``), a server under a 1.84 GiB limit with a 0.77 GiB
cache peaked at 1.55 GiB resident."""

MAX_SHARE = 2
"""A configured budget is held to 1/MAX_SHARE of the memory this process may use."""

logger = logging.getLogger(__name__)


def resident_budget(
    configured: int | None, limit: MemoryLimit, in_use: int | None = None, share: int = AUTO_SHARE
) -> int:
    """Bytes of feature arrays to hold in memory: ``configured``, or by default 1/``share`` of
    what ``limit``, the memory this process may use (``memory_limit.py``), leaves beside the
    ``in_use`` bytes it holds already (default: its resident memory now).

    A configured budget over half that memory is lowered to half, with a warning: arrays
    copied until the process runs out of memory would take the server down, and a write
    briefly holds an array it replaces twice.
    """
    usable = limit.bytes
    if configured is None:
        return memory_left(limit, in_use) // share
    if configured > usable // MAX_SHARE:
        logger.warning(
            "resident feature budget of %d bytes is over half of the %d bytes this server may use (%s); "
            "holding at most %d bytes of features in memory", configured, usable, limit.source, usable // MAX_SHARE,
        )
        return usable // MAX_SHARE
    return configured


def memory_left(limit: MemoryLimit, in_use: int | None = None) -> int:
    """What ``limit`` leaves beside the ``in_use`` bytes this process holds (default: its
    resident memory now)."""
    return max(0, limit.bytes - (resident_bytes_now() if in_use is None else in_use))


def resident_bytes_now() -> int:
    """This process's resident memory (``/proc/self/statm``)."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def in_memory(rows: np.ndarray) -> np.ndarray:
    """A read-only copy of ``rows`` (e.g. a file's map) in anonymous memory, copied in chunks."""
    out = np.empty(rows.shape, dtype=rows.dtype)
    step = max(1, COPY_CHUNK_BYTES // max(1, rows[:1].nbytes))
    for start in range(0, rows.shape[0], step):
        out[start : start + step] = rows[start : start + step]
    out.flags.writeable = False
    return out


def file_identity(path: Path) -> tuple[int, int]:
    """(device, inode) of ``path``: a hard link to an unchanged array's file shares them."""
    stat = path.stat()
    return stat.st_dev, stat.st_ino
