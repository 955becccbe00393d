"""Rows read straight from the disk, many at once: ``O_DIRECT`` reads submitted with Linux AIO.

When the features are larger than the page cache may hold (a server under a container's memory
limit), a row read through the page cache costs a page fault (or a ``pread``), a page charged
to the server's memory and, at the limit, the reclaim of another; measured on the development
VM, ~50 µs of CPU a 4 KiB row, one read in flight per thread. The server knows every row a
batch needs before it reads any, so ``DirectRows`` reads them the way databases do: each row's
page-aligned span (the tier's rows start on a page boundary: a 4 KiB row is one page) is an
``O_DIRECT`` read into a page-aligned buffer, ``QUEUE_BYTES`` of them submitted with one
``io_submit`` and collected with ``io_getevents``, by up to ``READERS`` threads at once. The
device sees thousands of reads at once, nothing enters the page cache, and a row costs ~6 µs
of CPU (same VM). Then the rows are copied from the buffers into the reply, and offered to the
array's ``RowCache`` (what the server may hold of them in its own memory, in place of the page
cache).

Linux AIO through ``syscall`` (no library to install): ``io_setup``/``io_submit``/
``io_getevents`` with the kernel's own ``struct iocb`` layout. ``DirectRows.open`` answers
``None`` (with the reason) where a file cannot be read so (tmpfs refuses ``O_DIRECT``; a
sandbox may refuse AIO); the tier then reads it through the page cache.
"""
from __future__ import annotations

import ctypes
import errno
import logging
import mmap
import os
import platform
import queue
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numba
import numpy as np

from gnnstore.backend.features.mapped_reads import ReadPool
from gnnstore.backend.features.row_cache import RowCache
from gnnstore.common.errors import PreconditionError

logger = logging.getLogger(__name__)

ALIGN = 4096
"""Offsets, lengths and buffers of ``O_DIRECT`` reads are multiples of this (any device's block)."""

QUEUE_BYTES = 4 << 20
"""Bytes of spans one ``io_submit`` asks for (a 4 KiB row: 1,024 reads in flight)."""

READERS = 4
"""Threads one gather's reads spread over, each submitting its own queue: one thread waiting
for a whole queue before it sends the next leaves the device idle at each queue's tail
(measured on the development VM, 4 KiB rows: 82k rows/s with one thread, 122k with four)."""

_SYSCALLS = {"x86_64": (206, 208, 209, 207), "aarch64": (0, 4, 2, 1)}  # io_setup, _getevents, _submit, _destroy
_IOCB = np.dtype([
    ("data", "<u8"), ("key", "<u4"), ("rw_flags", "<u4"), ("opcode", "<u2"), ("reqprio", "<i2"),
    ("fildes", "<u4"), ("buf", "<u8"), ("nbytes", "<u8"), ("offset", "<i8"), ("reserved2", "<u8"),
    ("flags", "<u4"), ("resfd", "<u4"),
])  # struct iocb of linux/aio_abi.h (little-endian); opcode 0 is IOCB_CMD_PREAD
_EVENT = np.dtype([("data", "<u8"), ("obj", "<u8"), ("res", "<i8"), ("res2", "<i8")])
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class DirectRows:
    """Rows of ``row_bytes`` each from byte ``offset`` of a file (``fd``, opened ``O_DIRECT``),
    the ones read again and again kept in ``cache``."""

    def __init__(self, fd: int, offset: int, row_bytes: int, pool: ReadPool, cache: RowCache | None = None) -> None:
        self._fd, self._offset, self._row_bytes, self._pool = fd, offset, row_bytes, pool
        self.cache = cache
        self.source = (os.fstat(fd).st_dev, os.fstat(fd).st_ino)
        aligned = offset % ALIGN == 0 and row_bytes % ALIGN == 0
        self._span = row_bytes if aligned else _align_up(row_bytes) + ALIGN  # what one row's read may cover
        self._rows_a_queue = max(1, QUEUE_BYTES // self._span)
        # rows are moved as the widest words that divide both a row and where rows start in a page
        self.word = np.dtype(f"u{next(w for w in (8, 4, 2, 1) if row_bytes % w == 0 and offset % w == 0)}")
        weakref.finalize(self, os.close, fd)

    @classmethod
    def open(
        cls, file: Path, offset: int, shape: tuple[int, ...], row_bytes: int, pool: ReadPool, cache_bytes: int
    ) -> DirectRows | None:
        """Rows of ``file`` read directly, with a ``RowCache`` of about ``cache_bytes``; or
        ``None`` (logged) where the file or the system does not allow direct reads."""
        if platform.machine() not in _SYSCALLS:
            logger.info("feature tier: no Linux AIO on %s; reading %s through the page cache",
                        platform.machine(), file.name)
            return None
        try:
            fd = os.open(file, os.O_RDONLY | os.O_DIRECT)
        except OSError as exc:
            logger.info("feature tier: %s cannot be read directly (%s); reading it through the page cache",
                        file.name, exc.strerror)
            return None
        rows = cls(fd, offset, row_bytes, pool)
        try:
            probe = np.empty((1, row_bytes), dtype=np.uint8)
            rows.copy(probe, np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))
        except (OSError, PreconditionError) as exc:
            logger.info("feature tier: %s cannot be read directly (%s); reading it through the page cache",
                        file.name, exc)
            return None
        # the table of a slot per row, then a row and its slot's two entries per slot
        capacity = min(shape[0], max(0, cache_bytes - 4 * shape[0]) // (row_bytes + 9))
        rows.cache = RowCache(shape[0], row_bytes // rows.word.itemsize, rows.word, capacity) if capacity > 0 else None
        return rows

    def copy(self, dst: np.ndarray, dst_at: np.ndarray, src_at: np.ndarray) -> None:
        """``dst[dst_at[j]] = row src_at[j]`` (``dst``: rows as words or bytes): cached rows
        from the cache, the others read from disk and offered to the cache.

        Raises:
            ServerUnavailableError: the server is stopping (the rows are incomplete).
            PreconditionError: the file is shorter than its rows (damaged).
        """
        dst = dst.view(np.uint8).view(self.word)
        if self.cache is not None:
            missed = self.cache.take(dst, dst_at, src_at)
            dst_at, src_at = dst_at[missed], src_at[missed]
        order = np.argsort(src_at, kind="stable")  # file order: neighbouring reads may merge
        dst_at, src_at = dst_at[order], src_at[order]
        n = src_at.shape[0]
        if n:
            step = max(self._rows_a_queue // 4, -(-n // READERS))  # a few rows are not worth a thread
            self._pool.spread(lambda part: self._read(dst, dst_at[part], src_at[part]), n, step)
        if self.cache is not None:
            self.cache.admit(dst, dst_at, src_at)

    def _read(self, dst: np.ndarray, dst_at: np.ndarray, src_at: np.ndarray) -> None:
        """``copy``'s reads from disk, a queue at a time, on one thread."""
        size = self.word.itemsize
        with _QUEUES.lend(self._span) as lent:
            for i in range(0, src_at.shape[0], self._rows_a_queue):
                if self._pool.stopping:
                    return
                ids = src_at[i : i + self._rows_a_queue]
                where = self._offset + ids.astype(np.int64) * self._row_bytes
                starts = where & ~(ALIGN - 1)
                lengths = _align_up(where + self._row_bytes) - starts
                lent.read(self._fd, starts, lengths, where + self._row_bytes - starts, self._span)
                _rows_from_spans(dst, dst_at[i : i + self._rows_a_queue], lent.spans.view(self.word),
                                 self._span // size, (where - starts) // size)


def _align_up(value: int | np.ndarray) -> int | np.ndarray:
    return (value + ALIGN - 1) & ~(ALIGN - 1)


class _Queue:
    """One thread's AIO context, its ``iocb``s and the page-aligned buffer the spans land in."""

    def __init__(self, buffer_bytes: int) -> None:
        setup, _, _, _ = _SYSCALLS[platform.machine()]
        self.capacity = max(1, buffer_bytes // ALIGN)  # spans are at least a page
        context = ctypes.c_ulong(0)
        if _libc.syscall(setup, self.capacity, ctypes.byref(context)) != 0:
            raise OSError(ctypes.get_errno(), f"io_setup: {os.strerror(ctypes.get_errno())}")
        self._context = context
        self._buffer = mmap.mmap(-1, buffer_bytes)  # page-aligned, as O_DIRECT needs
        self.spans = np.frombuffer(self._buffer, dtype=np.uint8)
        self._iocbs = np.zeros(self.capacity, dtype=_IOCB)
        self._pointers = self._iocbs.ctypes.data + np.arange(self.capacity, dtype=np.uint64) * _IOCB.itemsize
        self._events = np.zeros(self.capacity, dtype=_EVENT)

    def read(self, fd: int, starts: np.ndarray, lengths: np.ndarray, needed: np.ndarray, span: int) -> None:
        """Read ``lengths[k]`` bytes at ``starts[k]`` of ``fd`` to byte ``k * span`` of
        ``spans``, all submitted at once; at least ``needed[k]`` must come back (the last
        page of a file may be partial).

        Raises:
            OSError: a read failed.
            PreconditionError: a read came back short (the file is shorter than its rows).
        """
        _, getevents, submit, _ = _SYSCALLS[platform.machine()]
        k = starts.shape[0]
        iocbs = self._iocbs[:k]
        iocbs["fildes"], iocbs["offset"], iocbs["nbytes"] = fd, starts, lengths
        iocbs["buf"] = self.spans.ctypes.data + np.arange(k, dtype=np.uint64) * span
        iocbs["data"] = np.arange(k)
        sent = done = 0
        while sent < k:
            pointers = ctypes.c_void_p(self._pointers.ctypes.data + sent * 8)
            count = _libc.syscall(submit, self._context, k - sent, pointers)
            if count < 0:
                raise OSError(ctypes.get_errno(), f"io_submit: {os.strerror(ctypes.get_errno())}")
            sent += count
        while done < k:
            count = _libc.syscall(getevents, self._context, k - done, k - done,
                                  ctypes.c_void_p(self._events.ctypes.data), None)
            if count < 0:
                if ctypes.get_errno() == errno.EINTR:  # a signal arrived; the reads are still in flight
                    continue
                raise OSError(ctypes.get_errno(), f"io_getevents: {os.strerror(ctypes.get_errno())}")
            events = self._events[:count]
            short = events["res"] < needed[events["data"].astype(np.int64)]
            if short.any():
                result = int(events["res"][short][0])
                if result < 0:
                    raise OSError(-result, os.strerror(-result))
                raise PreconditionError("a feature tier file is shorter than its rows; delete the tier and restart")
            done += count

    def close(self) -> None:
        """Release the AIO context (nothing is in flight between reads)."""
        _libc.syscall(_SYSCALLS[platform.machine()][3], self._context)


class _Queues:
    """At most ``count`` queues, each lent to one reading thread at a time (their buffers are
    the server's memory: a bounded number, whatever the number of threads reading)."""

    def __init__(self, count: int) -> None:
        self._free: queue.LifoQueue[_Queue] = queue.LifoQueue()
        self._unmade = count
        self._lock = threading.Lock()

    @contextmanager
    def lend(self, span: int) -> Iterator[_Queue]:
        """A queue with room for at least one span of ``span`` bytes, until the block ends."""
        with self._lock:
            make = self._unmade > 0 and self._free.empty()
            self._unmade -= make
        try:
            lent = _Queue(max(QUEUE_BYTES, span)) if make else self._free.get()
        except BaseException:
            with self._lock:
                self._unmade += 1
            raise
        if lent.spans.nbytes < span:
            lent.close()
            lent = _Queue(max(QUEUE_BYTES, span))
        try:
            yield lent
        finally:
            self._free.put(lent)


_QUEUES = _Queues(2 * READERS)


@numba.njit(cache=True, nogil=True)
def _rows_from_spans(dst: np.ndarray, dst_at: np.ndarray, spans: np.ndarray, span: int, inner: np.ndarray) -> None:
    """``dst[dst_at[k]]`` = the row at ``inner[k]`` of span ``k`` (in words, ``spans`` flat)."""
    width = dst.shape[1]
    for k in range(dst_at.shape[0]):
        start, d = k * span + inner[k], dst_at[k]
        for j in range(width):  # an explicit loop: a slice assignment per row costs 3x more (row_copy.py)
            dst[d, j] = spans[start + j]
