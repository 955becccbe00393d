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
as before) and in time. Connections are bounded in number, in all and from one host, and each
frame has a deadline for the whole of it, however slowly its bytes come: a new connection's TLS
handshake and first ticket, each later ticket, each payload's send. When the port is full, a
client that holds no connection to it gets its payload in the gRPC reply, which says why
(``data_port_full``), so no sample is drawn twice.
"""
from __future__ import annotations

import contextlib
import logging
import secrets
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gnnstore.backend.service.auth import TokenTable
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

HOST_SHARE = 0.25
"""The share of those connections one host (address) may hold, so one host cannot fill the port."""

IDLE_S = 60.0
"""How long a connection may take from one payload to the end of its next ticket."""

IO_TIMEOUT_S = 30.0
"""How long a new connection may take for its TLS handshake and first ticket, and a payload's
send to a client that reads slowly."""

REAP_EVERY_S = 0.5
"""How often connections past their frame's deadline are cut."""


@dataclass
class _Held:
    payload: PayloadWriter
    owner: str
    expires: float
    allowed: Callable[[], bool] | None  # asked at the read: is the caller's token still valid?


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

    def issue(
        self, payload: PayloadWriter, owner: str = "", allowed: Callable[[], bool] | None = None
    ) -> bytes | None:
        """Hold ``payload`` for ``owner`` (a client) and return its ticket; ``None`` when it would
        exceed the bytes held in all or by that client. ``allowed`` is asked when the ticket is
        presented: a payload whose caller lost its right since (a revoked token) is not given."""
        with self._lock:
            self._expire()
            owned = self._by_owner.get(owner, 0)
            if self.held_bytes + payload.size > self.max_held_bytes or owned + payload.size > self.max_owner_bytes:
                return None
            ticket = secrets.token_bytes(TICKET_BYTES)
            self._held[ticket] = _Held(payload, owner, self._clock() + self._ttl_s, allowed)
            self._count(owner, payload.size)
            return ticket

    def take(self, ticket: bytes) -> tuple[str, PayloadWriter] | None:
        """The owner and payload held under ``ticket``, which is then forgotten; ``None`` if there
        is none."""
        with self._lock:
            self._expire()
            held = self._held.pop(ticket, None)
            if held is None:
                return None
            self._count(held.owner, -held.payload.size)
        if held.allowed is not None and not held.allowed():
            logger.info("a ticket was presented after its caller's token was revoked; refused")
            return None
        return held.owner, held.payload

    def expire(self) -> None:
        """Forget payloads past their time now (their memory is freed without waiting for the
        next ticket issued or taken)."""
        with self._lock:
            self._expire()

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


@dataclass
class _Connection:
    host: str  # the peer's address
    deadline: float  # the current frame must be done by then (time.monotonic), else it is cut
    owner: str = ""  # the client whose tickets it presented ("": none yet)


class DataPort:
    """The data port's listener and its connections; ``hold`` is what the sampling servicer calls.

    Args:
        host: interface to bind (the gRPC port's).
        port: port to bind; 0 picks a free one.
        tls: the server side of TLS (``None``: plaintext, as the gRPC port).
        public_port: the port clients reach (behind a port mapping); default the bound one.
        max_held_bytes: payload bytes held for clients at once.
        tokens: the server's tokens (``None``: none): a ticket is read only while the token of
            the call that got it is still one of them.
        max_connections: connections open at once.
        max_host_connections: connections from one host (address) at once; default
            ``HOST_SHARE`` of ``max_connections``.
        idle_s, io_timeout_s: frame deadlines (``IDLE_S``, ``IO_TIMEOUT_S``).
        ticket_ttl_s: how long a payload waits for its client (``TICKET_TTL_S``).
    """

    def __init__(
        self, host: str, port: int = 0, *, tls: ssl.SSLContext | None = None, public_port: int | None = None,
        max_held_bytes: int = DEFAULT_HELD_BYTES, tokens: TokenTable | None = None,
        max_connections: int = MAX_CONNECTIONS,
        max_host_connections: int | None = None, idle_s: float = IDLE_S, io_timeout_s: float = IO_TIMEOUT_S,
        ticket_ttl_s: float = TICKET_TTL_S,
    ) -> None:
        self.tickets = PayloadTickets(max_held_bytes, ttl_s=ticket_ttl_s)
        self._tokens = tokens
        self._host, self._requested_port, self._public_port = host, port, public_port
        self._tls = tls
        self._max_connections, self._idle_s, self._io_timeout_s = max_connections, idle_s, io_timeout_s
        self._max_host_connections = max_host_connections or max(1, int(max_connections * HOST_SHARE))
        self._listener: socket.socket | None = None
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._open: dict[socket.socket, _Connection] = {}
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
        threading.Thread(target=self._reap_loop, name="gnnstore-data-reaper", daemon=True).start()
        return self.port

    def full_for(self, owner: str) -> bool:
        """Whether ``owner`` (a client) could not read a payload now: it holds no connection and
        the port takes no more."""
        with self._lock:
            return len(self._open) >= self._max_connections and all(c.owner != owner for c in self._open.values())

    def hold(
        self, payload: PayloadWriter, owner: str = "", metadata: Sequence[tuple[str, str]] = ()
    ) -> graph_pb2.DataPortTicket | None:
        """The ticket the reply to ``owner`` (a client; ``metadata``: its call's) carries instead
        of ``payload``; ``None``: send it through gRPC (too small to be worth it, too many bytes
        held already, or a full port ``owner`` holds no connection to: see ``full_for``)."""
        if payload.size < MIN_DATA_PORT_BYTES or self.port is None or self.full_for(owner):
            return None
        tokens = self._tokens
        allowed = None if tokens is None else lambda: tokens.authenticate(metadata) is not None
        ticket = self.tickets.issue(payload, owner, allowed)
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
                conn, address = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if not self._closed.is_set():
                    logger.exception("the data port stopped accepting")
                return
            host = address[0]
            with self._lock:
                from_host = sum(c.host == host for c in self._open.values())
                refused = ("closed" if self._closed.is_set() else
                           f"{self._max_connections} connections open" if len(self._open) >= self._max_connections else
                           f"{from_host} connections from that host" if from_host >= self._max_host_connections else
                           None)
                if refused is None:
                    self._open[conn] = _Connection(host, time.monotonic() + self._io_timeout_s)
            if refused is not None:
                logger.warning("data port: %s, refusing one more", refused)
                conn.close()
                continue
            threading.Thread(target=self._serve, args=(conn,), name="gnnstore-data", daemon=True).start()

    def _reap_loop(self) -> None:
        """Cut every connection whose current frame is past its deadline (its thread then ends),
        and drop the payloads no client came for in time."""
        while not self._closed.wait(REAP_EVERY_S):
            self.tickets.expire()
            now = time.monotonic()
            with self._lock:
                late = [conn for conn, state in self._open.items() if state.deadline < now]
            for conn in late:
                logger.info("data port: a connection missed its frame's deadline; cut")
                _shut(conn)

    def _frame(self, conn: socket.socket, seconds: float, owner: str | None = None) -> None:
        """Start a frame on ``conn`` that must be done within ``seconds``; note its owner."""
        with self._lock:
            state = self._open.get(conn)
            if state is not None:
                state.deadline = time.monotonic() + seconds
                if owner is not None:
                    state.owner = owner

    def _serve(self, conn: socket.socket) -> None:
        """Answer tickets on one connection until the client leaves, idles, errs or the port closes.

        The accept gave the connection ``io_timeout_s`` for its TLS handshake and first ticket;
        each later ticket must arrive whole within ``idle_s`` of the last payload, and each
        payload be taken within ``io_timeout_s``. The socket timeouts only wake a thread whose
        connection the reaper cut.
        """
        raw = conn
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.settimeout(max(self._idle_s, self._io_timeout_s))
            if self._tls is not None:
                conn = self._tls.wrap_socket(conn, server_side=True)
            while True:
                ticket = _recv_exact(conn, TICKET_BYTES)
                if ticket is None:
                    return
                taken = self.tickets.take(ticket)
                if taken is None:
                    conn.sendall(HEADER.pack(UNKNOWN, 0))
                    return
                owner, payload = taken
                self._frame(raw, self._io_timeout_s, owner)
                _send_payload(conn, payload)
                taken = payload = None  # sent: its rows' memory is free while the next ticket comes
                self._frame(raw, self._idle_s)
        except (OSError, ssl.SSLError) as exc:  # the client left, stalled or spoke no TLS: its loss alone
            logger.info("data port connection closed: %s", exc)
        finally:
            with self._lock:
                self._open.pop(raw, None)
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
