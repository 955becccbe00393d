"""Reply segments: shared memory through which a sample's arrays skip the socket on one host.

A client on the server's host creates a memfd named ``gnnstore-reply``, sealed against
shrinking and growing, keeps it open and names it in a sampling request by (pid, fd, inode,
size). The server opens ``/proc/<pid>/fd/<fd>``, checks inode, size, seals and name, maps it,
and writes the reply's arrays there; their ``Tensor`` messages carry an offset instead of
bytes. The seal matters: a segment that could shrink under the server's mapping would make
its writes fault. Where the server cannot open the segment (another host, container or user)
it says why and sends every array inline. A segment serves one call at a time; the client
reuses it only after a reply arrived, so a late write of a timed-out call never lands in
another batch. The client decodes a reply in place: the batch's tensors are views of the
segment, so the client lends it again only once none of them is referenced any more.
"""
from __future__ import annotations

import fcntl
import math
import mmap
import os
import weakref
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from . import graph_pb2

SEGMENT_NAME = "gnnstore-reply"
ALIGNMENT = 64
_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


class Allocate(Protocol):
    """Makes an uninitialised tensor, as ``torch.empty`` does (or in a reply segment: ``ReplyWriter.empty``)."""

    def __call__(self, shape: tuple[int, ...], *, dtype: torch.dtype) -> Tensor: ...


class SegmentRefused(Exception):
    """The server cannot write into the segment a request offered; the message says why."""


def aligned(nbytes: int) -> int:
    """``nbytes`` rounded up to the segment's alignment."""
    return -(-nbytes // ALIGNMENT) * ALIGNMENT


class ReplySegment:
    """The client's side: a sealed memfd of ``size`` bytes, mapped read-write.

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
        self.message = graph_pb2.ReplySegment(
            pid=os.getpid(), fd=fd, inode=os.fstat(fd).st_ino, size=size
        )
        self._close = weakref.finalize(self, os.close, fd)

    def close(self) -> None:
        """Close the fd; the mapping goes with the last view of it."""
        self.view = None
        self._close()


def open_for_writing(message: graph_pb2.ReplySegment) -> mmap.mmap:
    """The server's side: map the client's segment writable.

    Raises:
        SegmentRefused: the segment is not reachable from this process, or is not a sealed
            gnnstore reply segment of the announced inode and size.
    """
    path = f"/proc/{message.pid}/fd/{message.fd}"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        raise SegmentRefused(
            f"cannot open {path}: {exc.strerror} (is the client on this host?)"
        ) from None
    try:
        target = os.readlink(path)
        stat = os.fstat(fd)
        if stat.st_ino != message.inode or not target.startswith(f"/memfd:{SEGMENT_NAME}"):
            raise SegmentRefused(f"{path} is not the client's reply segment (it is {target})")
        if stat.st_size < message.size or message.size == 0:
            raise SegmentRefused(f"{path} holds {stat.st_size} bytes, not the {message.size} announced")
        if fcntl.fcntl(fd, fcntl.F_GET_SEALS) & fcntl.F_SEAL_SHRINK == 0:
            raise SegmentRefused(f"{path} is not sealed against shrinking")
        return mmap.mmap(fd, message.size)
    except OSError as exc:
        raise SegmentRefused(f"cannot map {path}: {exc.strerror}") from None
    finally:
        os.close(fd)


class ReplyWriter:
    """Places a reply's arrays one after another in a mapped segment (64-byte aligned).

    An array is either built in the segment (``empty``, e.g. the gathered feature rows) or
    copied there (``place``). One that does not fit travels inline, and ``needed_bytes``
    says how big a segment would have held the whole reply.
    """

    def __init__(self, mapping: mmap.mmap) -> None:
        self._view = np.frombuffer(mapping, dtype=np.uint8)
        self._base = self._view.ctypes.data
        self._end = 0
        self.needed_bytes = self.placed_bytes = 0

    def use(self) -> graph_pb2.ReplySegmentUse:
        """What the reply reports about the segment."""
        return graph_pb2.ReplySegmentUse(
            used=self.placed_bytes > 0, needed_bytes=self.needed_bytes, placed_bytes=self.placed_bytes
        )

    def empty(self, shape: tuple[int, ...], *, dtype: torch.dtype) -> Tensor:
        """An uninitialised tensor in the segment, or an ordinary one when it does not fit."""
        nbytes = math.prod(shape) * dtype.itemsize
        if not nbytes or aligned(self._end) + nbytes > self._view.size:
            return torch.empty(shape, dtype=dtype)  # ``place`` counts it in ``needed_bytes``
        _, target = self.reserve(nbytes)
        return torch.from_numpy(target).view(dtype).reshape(shape)

    def free_bytes(self) -> int:
        """Bytes still free past the last array placed (the next one starts 64-byte aligned)."""
        return max(0, self._view.size - aligned(self._end))

    def place(self, raw: np.ndarray) -> int | None:
        """The offset of ``raw`` (contiguous bytes) in the segment, copying it there unless
        ``empty`` made it there; None when it does not fit."""
        offset = raw.ctypes.data - self._base
        if 0 <= offset and offset + raw.size <= self._end:
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
