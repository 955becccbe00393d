"""Rows of tier arrays that are not held in memory: the reads' shared pool, and mapped rows.

When the features outgrow what the server may hold, a row missing from memory waits for the
disk. ``ReadPool`` is what every such read of one tier shares: a pool of threads, and the stop
that makes reads still running give up between chunks (so a server that is reading honours
its shutdown grace). Two readers use it:

- ``MappedRows`` (here), while the features fit in the page cache: the file is mapped with
  ``MADV_RANDOM`` (by default the kernel reads a window around every faulting page, megabytes
  on some devices; a batch's rows are scattered, so almost all of that is wasted), and a
  gather is split into chunks, in file order, copied by the pool's threads, so up to
  ``READ_THREADS`` page faults wait on the disk at once. The copy kernel releases the GIL.
- ``DirectRows`` (``direct_reads.py``), when they do not: reads that bypass the page cache.
"""
from __future__ import annotations

import mmap
import threading
from collections.abc import Callable
from concurrent.futures import CancelledError, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from gnnstore.common.errors import ServerUnavailableError
from gnnstore.common.row_copy import copy_rows

READ_THREADS = 32
"""Threads a gather from mapped rows spreads over: the page faults outstanding at once."""

CHUNK_ROWS = 256
"""Rows a thread copies at a time (and the least a gather spreads over threads)."""

STOPPING = "the server is stopping; retry on another server or after its restart"


class ReadPool:
    """Threads for reads from disk (started on first use), and the stop they all obey."""

    def __init__(self, threads: int = READ_THREADS) -> None:
        self.threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    def check(self) -> None:
        """Raise ``ServerUnavailableError`` once ``stop()`` was called."""
        if self._stopping.is_set():
            raise ServerUnavailableError(STOPPING)

    @property
    def stopping(self) -> bool:
        """Whether ``stop()`` was called."""
        return self._stopping.is_set()

    def executor(self) -> ThreadPoolExecutor:
        """The pool's threads."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="gnnstore-tier-read")
            return self._pool

    def spread(self, read: Callable[[slice], None], n: int, step: int) -> None:
        """``read(part)`` for each ``step`` consecutive items of ``range(n)``, on the pool's
        threads at once; returns when every part is done.

        Raises:
            ServerUnavailableError: the server is stopping (some parts may not have run).
        """
        try:
            executor = self.executor()
            jobs = [executor.submit(read, slice(i, i + step)) for i in range(0, n, step)]
            for job in jobs:
                job.result()
        except (CancelledError, RuntimeError):  # cancelled, or submitted after the pool shut down
            if not self.stopping:
                raise
        self.check()

    def stop(self) -> None:
        """Make running and later reads give up; end the threads."""
        self._stopping.set()
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)


def map_rows(file: Path, dtype: np.dtype, shape: tuple[int, ...], offset: int) -> np.ndarray:
    """A read-only array over ``file``'s bytes from ``offset``, mapped with random-access advice."""
    with open(file, "rb") as handle:
        mapping = mmap.mmap(handle.fileno(), 0, prot=mmap.PROT_READ)
    mapping.madvise(mmap.MADV_RANDOM)
    return np.frombuffer(mapping, dtype=dtype, count=int(np.prod(shape)), offset=offset).reshape(shape)


class MappedRows:
    """Gathers from ``rows`` (mapped by ``map_rows``, as words: ``row_words``) over ``pool``'s threads."""

    def __init__(self, rows: np.ndarray, pool: ReadPool) -> None:
        self._rows = rows
        self._pool = pool

    def copy(self, dst: np.ndarray, dst_at: np.ndarray, src_at: np.ndarray) -> None:
        """``dst[dst_at[j]] = rows[src_at[j]]``, in file order, over the pool's threads.

        Raises:
            ServerUnavailableError: the server is stopping (the rows are incomplete).
        """
        self._pool.check()
        n = src_at.shape[0]
        if n < 2 * CHUNK_ROWS:
            copy_rows(dst, dst_at, self._rows, src_at)
            return
        order = np.argsort(src_at, kind="stable")
        dst_at, src_at = dst_at[order], src_at[order]
        self._pool.spread(lambda part: self._copy_chunk(dst, dst_at[part], src_at[part]), n,
                          max(CHUNK_ROWS, -(-n // self._pool.threads)))

    def _copy_chunk(self, dst: np.ndarray, dst_at: np.ndarray, src_at: np.ndarray) -> None:
        for i in range(0, src_at.shape[0], CHUNK_ROWS):
            if self._pool.stopping:
                return
            copy_rows(dst, dst_at[i : i + CHUNK_ROWS], self._rows, src_at[i : i + CHUNK_ROWS])
