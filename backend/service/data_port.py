"""The data port: large sampling payloads sent over a plain (or TLS) socket instead of through gRPC.

gRPC-Python costs the trainer ~6 ms of CPU to receive a 6.6 MB reply and the server a copy
into the message before that; a socket read into the batch's buffer costs ~2 ms and the server
sends the reply's arrays where they lie (``sendmsg``, no copy). So a sampling reply whose
payload is large (``MIN_DATA_PORT_BYTES``) and whose request accepts it (``accept_data_port``) is held
here under a one-use random ticket (``PayloadTickets``) and the gRPC reply carries only the
ticket (``DataPortTicket``); the client reads the payload from this port (framing:
``proto/data_port_wire.py``).

The ticket is the authorisation: only the caller that passed the gRPC server's token and TLS
checks learns it, it is good for one read within ``TICKET_TTL_S``, and the port answers
nothing else. With TLS on the gRPC port, the data port speaks TLS with the same certificate,
and under mutual TLS asks for a certificate from the same client CA. Held payloads are bounded
in bytes (``max_held_bytes``, a quarter of it per client; past it replies travel through gRPC
as before) and in time; connections are bounded in number, in idle time and in how long a
client may take to read.
"""
from __future__ import annotations

import contextlib
import logging
import secrets
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from gnnstore.proto import graph_pb2
from gnnstore.proto.data_port_wire import FOUND, HEADER, TICKET_BYTES, UNKNOWN
from gnnstore.proto.reply_payload import PayloadWriter

logger = logging.getLogger(__name__)

MIN_DATA_PORT_BYTES = 256 * 1024
"""Smaller payloads stay in the gRPC reply: the second round trip would cost more than it saves."""

TICKET_TTL_S = 30.0
"""How long a payload waits for its client."""

DEFAULT_HELD_BYTES = 1 << 30
"""Payload bytes held for clients at once, by default."""

OWNER_SHARE = 0.25
"""The share of the held bytes one client's payloads may take."""

MAX_CONNECTIONS = 256
"""Open data-port connections at once; more are closed as they arrive."""

IDLE_S = 60.0
"""How long a connection may wait between tickets (or take to send one) before it is closed."""

IO_TIMEOUT_S = 30.0
"""How long one send to a client that does not read may block (a TLS handshake too)."""


@dataclass
class _Held:
    payload: PayloadWriter
    owner: str
    expires: float


class PayloadTickets:
    """Payloads waiting for their client, by one-use ticket; bounded in bytes (in all and per
    client) and in time. Thread-safe.

    Args:
        max_held_bytes: payload bytes held at once.
        max_owner_share: the fraction of those one client's payloads may take, so a client that
            asks and never reads leaves the others the data port.
        ttl_s: how long a payload waits.
    """

    def __init__(
        self, max_held_bytes: int = DEFAULT_HELD_BYTES, max_owner_share: float = OWNER_SHARE,
        ttl_s: float = TICKET_TTL_S, clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_held_bytes = max_held_bytes
        self.max_owner_bytes = int(max_held_bytes * max_owner_share)
        self._ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._held: dict[bytes, _Held] = {}  # insertion order is expiry order: the TTL is fixed
        self._by_owner: dict[str, int] = {}
        self.held_bytes = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)

    def issue(self, payload: PayloadWriter, owner: str = "") -> bytes | None:
        """Hold ``payload`` for ``owner`` (a client) and return its ticket; ``None`` when it would
        exceed the bytes held in all or by that client."""
        with self._lock:
            self._expire()
            owned = self._by_owner.get(owner, 0)
            if self.held_bytes + payload.size > self.max_held_bytes or owned + payload.size > self.max_owner_bytes:
                return None
            ticket = secrets.token_bytes(TICKET_BYTES)
            self._held[ticket] = _Held(payload, owner, self._clock() + self._ttl_s)
            self._count(owner, payload.size)
            return ticket

    def take(self, ticket: bytes) -> PayloadWriter | None:
        """The payload held under ``ticket``, which is then forgotten; ``None`` if there is none."""
        with self._lock:
            self._expire()
            held = self._held.pop(ticket, None)
            if held is None:
                return None
            self._count(held.owner, -held.payload.size)
            return held.payload

    def _count(self, owner: str, size: int) -> None:
        """Add ``size`` bytes to those held, in all and by ``owner`` (call under the lock)."""
        self.held_bytes += size
        owned = self._by_owner.get(owner, 0) + size
        if owned:
            self._by_owner[owner] = owned
        else:
            del self._by_owner[owner]

    def _expire(self) -> None:
        """Forget payloads past their time (call under the lock)."""
        now = self._clock()
        while self._held:
            ticket, held = next(iter(self._held.items()))
            if held.expires > now:
                return
            del self._held[ticket]
            self._count(held.owner, -held.payload.size)
            logger.info("a %d-byte payload was not read within %.0f s; dropped", held.payload.size, self._ttl_s)


class DataPort:
    """The data port's listener and its connections; ``hold`` is what the sampling servicer calls.

    Args:
        host: interface to bind (the gRPC port's).
        port: port to bind; 0 picks a free one.
        tls: the server side of TLS (``None``: plaintext, as the gRPC port).
        public_port: the port clients reach (behind a port mapping); default the bound one.
        max_held_bytes: payload bytes held for clients at once.
    """

    def __init__(
        self, host: str, port: int = 0, *, tls: ssl.SSLContext | None = None, public_port: int | None = None,
        max_held_bytes: int = DEFAULT_HELD_BYTES, max_connections: int = MAX_CONNECTIONS,
        idle_s: float = IDLE_S, io_timeout_s: float = IO_TIMEOUT_S,
    ) -> None:
        self.tickets = PayloadTickets(max_held_bytes)
        self._host, self._requested_port, self._public_port = host, port, public_port
        self._tls = tls
        self._max_connections, self._idle_s, self._io_timeout_s = max_connections, idle_s, io_timeout_s
        self._listener: socket.socket | None = None
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self.port: int | None = None
        """The bound port (``None`` before ``start``)."""

    def start(self) -> int:
        """Bind, start accepting, and return the bound port.

        Raises:
            OSError: the port cannot be bound.
        """
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        listener = socket.create_server(
            (self._host.strip("[]"), self._requested_port), family=family, backlog=self._max_connections
        )
        listener.settimeout(0.5)  # the accept loop notices close() within this
        self._listener, self.port = listener, listener.getsockname()[1]
        threading.Thread(target=self._accept_loop, name="gnnstore-data-accept", daemon=True).start()
        return self.port

    def hold(self, payload: PayloadWriter, owner: str = "") -> graph_pb2.DataPortTicket | None:
        """The ticket the reply to ``owner`` (a client) carries instead of ``payload``; ``None``:
        send it through gRPC (too small to be worth it, or too many bytes held already)."""
        if payload.size < MIN_DATA_PORT_BYTES or self.port is None:
            return None
        ticket = self.tickets.issue(payload, owner)
        if ticket is None:
            return None
        return graph_pb2.DataPortTicket(ticket=ticket, port=self._public_port or self.port, size=payload.size)

    def close(self) -> None:
        """Stop accepting and cut every open connection."""
        self._closed.set()
        if self._listener is not None:
            _shut(self._listener)  # stops listening now: a close alone waits for the accept's poll
            self._listener.close()
        with self._lock:
            for conn in self._open:
                _shut(conn)

    def connections(self) -> int:
        """Connections open now."""
        with self._lock:
            return len(self._open)

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if not self._closed.is_set():
                    logger.exception("the data port stopped accepting")
                return
            with self._lock:
                admitted = len(self._open) < self._max_connections and not self._closed.is_set()
                if admitted:
                    self._open.add(conn)
            if not admitted:
                logger.warning("data port: %d connections open, refusing one more", self._max_connections)
                conn.close()
                continue
            threading.Thread(target=self._serve, args=(conn,), name="gnnstore-data", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        """Answer tickets on one connection until the client leaves, idles, errs or the port closes."""
        raw = conn
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls is not None:
                conn.settimeout(self._io_timeout_s)
                conn = self._tls.wrap_socket(conn, server_side=True)
            while True:
                conn.settimeout(self._idle_s)
                ticket = _recv_exact(conn, TICKET_BYTES)
                if ticket is None:
                    return
                conn.settimeout(self._io_timeout_s)
                payload = self.tickets.take(ticket)
                if payload is None:
                    conn.sendall(HEADER.pack(UNKNOWN, 0))
                    return
                _send_payload(conn, payload)
        except (OSError, ssl.SSLError) as exc:  # the client left, stalled or spoke no TLS: its loss alone
            logger.info("data port connection closed: %s", exc)
        finally:
            with self._lock:
                self._open.discard(raw)
            conn.close()


def _recv_exact(conn: socket.socket, size: int) -> bytes | None:
    """``size`` bytes, or ``None`` if the client closed the connection before the first one.

    Raises:
        ConnectionError: the client closed it midway.
    """
    data = bytearray()
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            if data:
                raise ConnectionError("the client closed the connection inside a ticket")
            return None
        data += chunk
    return bytes(data)


def _send_payload(conn: socket.socket, payload: PayloadWriter) -> None:
    """The header, then the payload's arrays where they lie, zeros in the alignment gaps."""
    pieces: list[memoryview] = [memoryview(HEADER.pack(FOUND, payload.size))]
    end = 0
    for offset, raw in payload.arrays:
        if offset > end:
            pieces.append(memoryview(bytes(offset - end)))
        pieces.append(memoryview(raw).cast("B"))
        end = offset + raw.size
    pieces = [p for p in pieces if len(p)]  # an empty array would make sendmsg send nothing forever
    if isinstance(conn, ssl.SSLSocket):  # no sendmsg under TLS: each piece is its own records
        for piece in pieces:
            conn.sendall(piece)
        return
    while pieces:
        sent = conn.sendmsg(pieces[:_IOV_MAX])
        while sent:
            if sent >= len(pieces[0]):
                sent -= len(pieces.pop(0))
            else:
                pieces[0], sent = pieces[0][sent:], 0


_IOV_MAX = 1024
"""Buffers one ``sendmsg`` may take (Linux's limit)."""


def _shut(conn: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed by its thread: nothing left to cut
        conn.shutdown(socket.SHUT_RDWR)
