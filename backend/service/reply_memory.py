"""The server memory that replies' rows may take at once, over every client.

Rows gathered for a reply that travels in a payload (in the gRPC reply, or held for the data
port) live in the server's memory until the reply is sent. Under a container's memory limit a
few large replies built at once would get the server killed, whatever the feature tier's
budget: a 1024-seed batch of 1024-d float32 rows is ~110 MB. So a gather reserves its reply's
row bytes here before it reads a row, and the reservation ends when the reply's payload is
freed (sent, or its data-port ticket expired). A reply that does not fit waits for others to
be sent, up to ``WAIT_S``, then is refused with ``RESOURCE_EXHAUSTED``; one larger than the
whole budget runs alone. Rows written into a client's shared-memory segment take none of it.
"""
from __future__ import annotations

import threading
import time
import weakref

from gnnstore.backend.features.mapped_reads import STOPPING
from gnnstore.common.errors import ResourceExhaustedError, ServerUnavailableError

SHARE = 4
"""Replies' rows may take 1/SHARE of the memory a server has left once it has started (the
feature tier takes a quarter, or half to cache rows read from disk; the rest is for a gRPC
reply's serialised copy, the samples themselves, and the interpreter)."""

WAIT_S = 10.0
"""How long a reply waits for room (others are sent in far less unless a client stopped reading)."""


class ReplyMemory:
    """Up to ``capacity`` bytes of replies' rows at once (``reserve``)."""

    def __init__(self, capacity: int, wait_s: float = WAIT_S) -> None:
        self.capacity = capacity
        self._wait_s = wait_s
        self._used = 0
        self._closed = False
        self._room = threading.Condition()

    @property
    def used(self) -> int:
        """Bytes reserved now."""
        with self._room:
            return self._used

    def reserve(self, nbytes: int, owner: object) -> None:
        """Hold ``nbytes`` until ``owner`` (the reply's payload) is freed; wait for room first.

        Raises:
            ResourceExhaustedError: no room came within ``wait_s``.
            ServerUnavailableError: the server is stopping.
        """
        if nbytes <= 0:
            return
        deadline = time.monotonic() + self._wait_s
        with self._room:
            while not self._closed and self._used and self._used + nbytes > self.capacity:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ResourceExhaustedError(
                        f"the server's memory for replies is taken ({self._used / 2**20:.0f} of "
                        f"{self.capacity / 2**20:.0f} MiB by replies not yet sent; this one needs "
                        f"{nbytes / 2**20:.0f} MiB); retry, or ask for fewer seeds a batch"
                    )
                self._room.wait(left)
            if self._closed:
                raise ServerUnavailableError(STOPPING)
            self._used += nbytes
        weakref.finalize(owner, self._release, nbytes)

    def close(self) -> None:
        """Refuse the replies waiting for room, and any later one (a stopping server)."""
        with self._room:
            self._closed = True
            self._room.notify_all()

    def _release(self, nbytes: int) -> None:
        with self._room:
            self._used -= nbytes
            self._room.notify_all()
