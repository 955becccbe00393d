"""Reply segments: shared memory through which a sample's arrays skip the socket on one host.

A client on the server's host creates a memfd named ``gnnstore-reply``, sealed against
shrinking and growing, writes a random 128-bit nonce into its first bytes, keeps it open and
names it in a sampling request by (pid, fd, inode, size, nonce). The server opens
``/proc/<pid>/fd/<fd>`` read-only, checks it is a sealed gnnstore segment of that inode and
size, compares the nonce in constant time, and only then maps it writable (through its own
read-only descriptor, so the file it checked is the file it writes) and writes the reply's
arrays after the header; their ``Tensor`` messages carry an offset instead of bytes. The nonce
makes the segment a capability: a process that cannot read the owner's memory cannot aim the
server at it, even knowing pid, fd, inode and size. Every request is checked again, also
against a mapping the server keeps. The seal matters too: a segment that could shrink under
the server's mapping would make its writes fault. Where the server cannot open the segment
(another host, container or user) it says why, naming no path, and sends every array inline.
A segment serves one call at a time; the client reuses it only after a reply arrived, so a
late write of a timed-out call never lands in another batch. The client decodes a reply in
place: the batch's tensors are views of the segment, so the client lends it again only once
none of them is referenced any more.
"""
from __future__ import annotations

import fcntl
import hmac
import math
import mmap
import os
import secrets
import stat
import weakref
from typing import Protocol

import numpy as np

from . import graph_pb2

SEGMENT_NAME = "gnnstore-reply"
ALIGNMENT = 64
NONCE_BYTES = 16
HEADER_BYTES = ALIGNMENT
"""The segment's first bytes hold the nonce; the server writes only past them."""
_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


class ArrayWriter(Protocol):
    """Where a reply's arrays go instead of protobuf ``bytes`` fields: a reply segment
    (``ReplyWriter``) or the reply's payload (``reply_payload.PayloadWriter``)."""

    narrow_ids: bool
    """Whether ids that fit travel as int32 (bytes that cross the network) or stay int64."""

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray: ...

    def ids(self, n: int) -> np.ndarray: ...

    def free_bytes(self) -> int: ...

    def place(self, raw: np.ndarray) -> int | None: ...


class SegmentRefused(Exception):
    """The server cannot write into the segment a request offered; the message says why."""


def aligned(nbytes: int) -> int:
    """``nbytes`` rounded up to the segment's alignment."""
    return -(-nbytes // ALIGNMENT) * ALIGNMENT


class ReplySegment:
    """The client's side: a sealed memfd of ``size`` bytes, mapped read-write, its nonce in the header.

    Pages cost memory only once written. ``view`` is the whole segment as bytes (writable: the
    tensors decoded from it are a batch's own, which a trainer may change in place);
    ``close()`` (or garbage collection) closes the fd, the mapping goes with its last view.
    """

    def __init__(self, size: int) -> None:
        fd = os.memfd_create(SEGMENT_NAME, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, size)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
            self._map = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        self.size = size
        self.fd = fd
        self.view = np.frombuffer(self._map, dtype=np.uint8)
        nonce = secrets.token_bytes(NONCE_BYTES)
        self.view[:NONCE_BYTES] = np.frombuffer(nonce, dtype=np.uint8)
        self.message = graph_pb2.ReplySegment(
            pid=os.getpid(), fd=fd, inode=os.fstat(fd).st_ino, size=size, nonce=nonce
        )
        self._close = weakref.finalize(self, os.close, fd)

    def close(self) -> None:
        """Close the fd; the mapping goes with the last view of it."""
        self.view = None
        self._close()


def open_for_writing(message: graph_pb2.ReplySegment) -> mmap.mmap:
    """The server's side: map the client's segment writable, once it proved it owns it.

    Raises:
        SegmentRefused: the segment is not reachable from this process, is not a sealed
            gnnstore reply segment of the announced inode and size, or the request's nonce is
            not the segment's. The message names no path.
    """
    where = f"the reply segment (pid {message.pid}, fd {message.fd})"
    if message.size <= HEADER_BYTES or len(message.nonce) != NONCE_BYTES:
        raise SegmentRefused(f"{where}: a segment needs more than {HEADER_BYTES} bytes and a "
                             f"{NONCE_BYTES}-byte nonce")
    path = f"/proc/{message.pid}/fd/{message.fd}"
    try:
        # Only regular files are opened at all: a FIFO or device named by a stranger could
        # block the open or act on it.
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise SegmentRefused(f"{where} is not a reply segment")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise SegmentRefused(f"cannot open {where}: {exc.strerror} (is the client on this host?)") from None
    try:
        info = os.fstat(fd)
        if info.st_ino != message.inode or not os.readlink(path).startswith(f"/memfd:{SEGMENT_NAME}"):
            raise SegmentRefused(f"{where} is not the client's reply segment")
        if info.st_size < message.size:
            raise SegmentRefused(f"{where} holds {info.st_size} bytes, not the {message.size} announced")
        if fcntl.fcntl(fd, fcntl.F_GET_SEALS) & fcntl.F_SEAL_SHRINK == 0:
            raise SegmentRefused(f"{where} is not sealed against shrinking")
        with mmap.mmap(fd, HEADER_BYTES, prot=mmap.PROT_READ) as header:
            check_nonce(header, message)
        # Reopening our own descriptor writes to the very file checked above.
        writable = os.open(f"/proc/self/fd/{fd}", os.O_RDWR | os.O_CLOEXEC)
        try:
            return mmap.mmap(writable, message.size)
        finally:
            os.close(writable)
    except OSError as exc:
        raise SegmentRefused(f"cannot map {where}: {exc.strerror}") from None
    finally:
        os.close(fd)


def check_nonce(mapping: mmap.mmap, message: graph_pb2.ReplySegment) -> None:
    """Refuse unless the request's nonce is the one in the segment's header (constant time).

    Raises:
        SegmentRefused: the nonces differ: the request does not come from the segment's owner.
    """
    if not hmac.compare_digest(mapping[:NONCE_BYTES], message.nonce):
        raise SegmentRefused(
            f"the reply segment (pid {message.pid}, fd {message.fd}): the request's nonce is not "
            "the segment's (only the process that made the segment may offer it)"
        )


class ReplyWriter:
    """Places a reply's arrays one after another in a mapped segment (64-byte aligned).

    An array is either built in the segment (``empty``, e.g. the gathered feature rows) or
    copied there (``place``). One that does not fit travels inline, and ``needed_bytes``
    says how big a segment would have held the whole reply.
    """

    narrow_ids = False
    """Ids stay int64: in shared memory bytes cost nothing to move, and int64 ids decode as views."""

    def __init__(self, mapping: mmap.mmap) -> None:
        self._view = np.frombuffer(mapping, dtype=np.uint8)
        self._base = self._view.ctypes.data
        self._end = HEADER_BYTES
        self.needed_bytes, self.placed_bytes = HEADER_BYTES, 0

    def use(self) -> graph_pb2.ReplySegmentUse:
        """What the reply reports about the segment."""
        return graph_pb2.ReplySegmentUse(
            used=self.placed_bytes > 0, needed_bytes=self.needed_bytes, placed_bytes=self.placed_bytes
        )

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """An uninitialised array in the segment, or an ordinary one when it does not fit."""
        dtype = np.dtype(dtype)
        target = self._fresh(math.prod(shape) * dtype.itemsize)
        if target is None:
            return np.empty(shape, dtype)  # ``place`` counts it in ``needed_bytes``
        return target.view(dtype).reshape(shape)

    def ids(self, n: int) -> np.ndarray:
        """An uninitialised int64 array of ``n`` ids, as ``empty`` makes it."""
        return self.empty((n,), np.int64)

    def _fresh(self, nbytes: int) -> np.ndarray | None:
        """``nbytes`` reserved in the segment, or None when there are none or they do not fit."""
        if not nbytes or aligned(self._end) + nbytes > self._view.size:
            return None
        return self.reserve(nbytes)[1]

    def free_bytes(self) -> int:
        """Bytes still free past the last array placed (the next one starts 64-byte aligned)."""
        return max(0, self._view.size - aligned(self._end))

    def place(self, raw: np.ndarray) -> int | None:
        """The offset of ``raw`` (contiguous bytes) in the segment, copying it there unless
        ``empty`` made it there; None when it does not fit."""
        offset = raw.ctypes.data - self._base
        if HEADER_BYTES <= offset and offset + raw.size <= self._end:
            return offset
        placed = self.reserve(raw.size)
        if placed is None:
            return None
        placed[1][:] = raw
        return placed[0]

    def reserve(self, nbytes: int) -> tuple[int, np.ndarray] | None:
        """``(offset, bytes)`` of a fresh ``nbytes`` stretch, or None when it does not fit."""
        self.needed_bytes += aligned(nbytes)
        start = aligned(self._end)
        if start + nbytes > self._view.size:
            return None
        self._end = start + nbytes
        self.placed_bytes += nbytes
        return start, self._view[start : start + nbytes]
