"""The server's mappings of clients' reply segments, kept for reuse and bounded in number.

Mapping a segment for every reply would fault in its pages again each time; a trainer reuses
a few segments for a whole run, so the server keeps the most recent ``capacity`` mappings.
An evicted mapping is dropped, not closed: a request still writing into it keeps it alive,
and the kernel frees the memory once neither side maps it.
"""
from __future__ import annotations

import logging
import mmap
import threading
from collections import OrderedDict

from gnnstore.proto import graph_pb2
from gnnstore.proto.reply_segment import ReplyWriter, check_nonce, open_for_writing

logger = logging.getLogger(__name__)

MAPPED_SEGMENTS = 64
"""Client segments kept mapped at once (a trainer holds one per sampling call in flight)."""


class ReplySegments:
    """Writers into the reply segments requests offer."""

    def __init__(self, capacity: int = MAPPED_SEGMENTS) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._mapped: OrderedDict[tuple[int, int, int, int], mmap.mmap] = OrderedDict()

    def writer(self, message: graph_pb2.ReplySegment) -> ReplyWriter:
        """A writer at the start of the segment ``message`` names.

        Raises:
            SegmentRefused: the segment cannot be used, or the request does not prove it owns
                it (the reason is for the client).
        """
        key = (message.pid, message.fd, message.inode, message.size)
        with self._lock:
            mapping = self._mapped.get(key)
            if mapping is not None:
                self._mapped.move_to_end(key)
        if mapping is not None:
            check_nonce(mapping, message)  # every request, not only the one that mapped it
            return ReplyWriter(mapping)
        mapping = open_for_writing(message)
        with self._lock:
            self._mapped[key] = mapping
            while len(self._mapped) > self._capacity:
                self._mapped.popitem(last=False)
        logger.debug(
            "mapped reply segment fd %d of process %d (%d bytes)", message.fd, message.pid, message.size
        )
        return ReplyWriter(mapping)
