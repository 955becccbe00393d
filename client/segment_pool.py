"""Reply segments a trainer on the server's host offers: one per sampling call in flight.

A segment is lent to one call, and its reply is decoded in place (``lend``): the batch's
tensors are views of the segment, which comes back to the pool only once none of them is
referenced any more, so reuse never changes a batch a caller still holds. Once ``MAX_LENT``
segments are held by batches (a caller keeping many of them), a reply's bytes are copied out
instead and its segment comes back at once. A call that fails discards its segment, because
the server may still be writing into it. (The memory is shared: a process forked while it
holds a batch shares that batch's segment too, and sees it change once this one reuses it.)
Segments start at ``INITIAL_SEGMENT_BYTES`` (pages cost memory only once written) and grow
when a reply says it needed more. The first refusal (server on another host or in another
container, or too old to know segments) turns the pool off for good and is logged once:
replies then travel inline, as they do without a pool.
"""
from __future__ import annotations

import logging
import threading
import weakref

from gnnstore.proto import graph_pb2
from gnnstore.proto.reply_segment import ReplySegment

logger = logging.getLogger(__name__)

INITIAL_SEGMENT_BYTES = 64 << 20
"""Size of a new segment: a few times a default batch's reply, and only virtual until used."""

KEPT_FREE = 8
"""Idle segments kept for reuse; more are closed when they come back."""

MAX_LENT = 16
"""Segments batches may hold at once; past it, replies are copied out of their segments."""


class ReplySegmentPool:
    """The segments of one process (a pool never crosses fork; ``Connection`` makes one per process).

    Attributes:
        refused: why the server could not use a segment (``None`` while segments work).
        placed_bytes: bytes of replies that arrived through segments.
    """

    def __init__(self, initial_bytes: int | None = None) -> None:
        # Re-entrant: a batch dropped while the lock is held gives its segment back.
        self._lock = threading.RLock()
        self._free: list[ReplySegment] = []
        self._lent = 0
        self._size = INITIAL_SEGMENT_BYTES if initial_bytes is None else initial_bytes
        self.refused: str | None = None
        self.placed_bytes = 0

    @property
    def idle(self) -> int:
        """Segments waiting to be lent."""
        return len(self._free)

    @property
    def lent(self) -> int:
        """Segments held by the tensors of decoded replies."""
        return self._lent

    @property
    def segment_bytes(self) -> int:
        """The size new segments get (grown when a reply needed more)."""
        return self._size

    def acquire(self) -> ReplySegment | None:
        """A segment for one call, or ``None`` once segments were refused."""
        with self._lock:
            if self.refused is not None:
                return None
            if self._free:
                return self._free.pop()
            size = self._size
        try:
            return ReplySegment(size)
        except OSError as exc:
            self._refuse(f"this process cannot create shared memory: {exc}")
            return None

    def lend(self, segment: ReplySegment, reply: graph_pb2.SampleResponse) -> memoryview | None:
        """The bytes to decode ``reply`` from: ``segment`` itself, or a copy of its used part
        once ``MAX_LENT`` segments are held; ``None`` when the server placed nothing there.

        The segment returns to the pool once no tensor decoded from it is referenced any more.
        """
        self._learn(reply)
        use = reply.reply_segment
        with self._lock:
            in_place = use.used and self._lent < MAX_LENT
            if in_place:
                self._lent += 1
        if not in_place:
            used = min(segment.size, use.needed_bytes) if use.used else 0
            copy = memoryview(segment.view[:used].copy()) if used else None
            self._give_back(segment)
            return copy
        lease = segment.view[:]  # every decoded array holds a view of this very array
        weakref.finalize(lease, self._returned, segment)
        return memoryview(lease)

    def discard(self, segment: ReplySegment) -> None:
        """Drop the segment of a failed call: the server may still write into it."""
        segment.close()

    def close(self) -> None:
        """Close every idle segment (lent ones close when their batches are gone)."""
        with self._lock:
            free, self._free = self._free, []
        for segment in free:
            segment.close()

    def _learn(self, reply: graph_pb2.SampleResponse) -> None:
        """Note a refusal, the bytes placed, and the size the reply needed."""
        if not reply.HasField("reply_segment"):
            self._refuse("the server does not know reply segments")
        use = reply.reply_segment
        if use.refused:
            self._refuse(use.refused)
        with self._lock:
            self.placed_bytes += use.placed_bytes
            if use.needed_bytes > self._size:
                self._size = use.needed_bytes + use.needed_bytes // 4

    def _returned(self, segment: ReplySegment) -> None:
        with self._lock:
            self._lent -= 1
        self._give_back(segment)

    def _give_back(self, segment: ReplySegment) -> None:
        with self._lock:
            if self.refused is None and segment.size >= self._size and len(self._free) < KEPT_FREE:
                self._free.append(segment)
                return
        segment.close()

    def _refuse(self, reason: str) -> None:
        with self._lock:
            if self.refused is not None:
                return
            self.refused = reason
        logger.info("sampling replies travel over the socket: %s", reason)
