"""The server's mappings of clients' reply segments, kept for reuse and bounded in number.

Mapping a segment for every reply would fault in its pages again each time; a trainer reuses
a few segments for a whole run, so the server keeps the most recent ``capacity`` mappings.
Mappings of a process that exited, or unused for ``idle_s`` seconds, are dropped (checked at
most once a second, when a request comes), so clients that come and go do not pin their
memory in the server. A dropped mapping is not closed: a request still writing into it keeps
it alive, and the kernel frees the memory once neither side maps it.
"""
from __future__ import annotations

import logging
import mmap
import threading
import time
from collections import OrderedDict

from gnnstore.common.processes import process_exists
from gnnstore.proto import graph_pb2
from gnnstore.proto.reply_segment import ReplyWriter, check_nonce, open_for_writing

logger = logging.getLogger(__name__)

MAPPED_SEGMENTS = 64
"""Client segments kept mapped at once (a trainer holds one per sampling call in flight)."""

IDLE_S = 120.0
"""A mapping unused this long is dropped (its client reconnects at the cost of one re-map)."""

_SWEEP_EVERY_S = 1.0


class ReplySegments:
    """Writers into the reply segments requests offer."""

    def __init__(self, capacity: int = MAPPED_SEGMENTS, idle_s: float = IDLE_S) -> None:
        self._capacity = capacity
        self._idle_s = idle_s
        self._lock = threading.Lock()
        self._mapped: OrderedDict[tuple[int, int, int, int], mmap.mmap] = OrderedDict()
        self._used: dict[tuple[int, int, int, int], float] = {}
        self._swept = time.monotonic()

    def __len__(self) -> int:
        """Mappings held now."""
        return len(self._mapped)

    def writer(self, message: graph_pb2.ReplySegment) -> ReplyWriter:
        """A writer at the start of the segment ``message`` names.

        Raises:
            SegmentRefused: the segment cannot be used, or the request does not prove it owns
                it (the reason is for the client).
        """
        key = (message.pid, message.fd, message.inode, message.size)
        now = time.monotonic()
        with self._lock:
            self._sweep(now)
            mapping = self._mapped.get(key)
            if mapping is not None:
                self._mapped.move_to_end(key)
                self._used[key] = now
        if mapping is not None:
            check_nonce(mapping, message)  # every request, not only the one that mapped it
            return ReplyWriter(mapping)
        mapping = open_for_writing(message)
        with self._lock:
            self._mapped[key] = mapping
            self._used[key] = now
            while len(self._mapped) > self._capacity:
                self._used.pop(self._mapped.popitem(last=False)[0], None)
        logger.debug(
            "mapped reply segment fd %d of process %d (%d bytes)", message.fd, message.pid, message.size
        )
        return ReplyWriter(mapping)

    def _sweep(self, now: float) -> None:
        """Drop mappings of exited processes and idle ones (call under the lock)."""
        if now - self._swept < _SWEEP_EVERY_S:
            return
        self._swept = now
        for key in list(self._mapped):
            if now - self._used.get(key, now) > self._idle_s or not process_exists(key[0]):
                del self._mapped[key]
                self._used.pop(key, None)
                logger.debug("dropped the reply segment mapping of process %d", key[0])

