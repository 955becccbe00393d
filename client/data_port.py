"""Reading a sampling reply's payload from the server's data port (``backend/service/data_port.py``).

A reply whose payload waits behind a ``DataPortTicket`` is read here: over a connection to the
address's host at the ticket's port (reused between batches, one per payload in flight), the
ticket goes out and the payload comes straight into the buffer the batch's tensors view, with
no protobuf in between. TLS when the gRPC connection has it, checking the server's certificate
against the same CA and host name. Framing: ``proto/data_port_wire.py``.
"""
from __future__ import annotations

import logging
import os
import socket
import ssl
import threading

import torch

from gnnstore.common.errors import ServerUnavailableError
from gnnstore.proto import graph_pb2
from gnnstore.proto.data_port_wire import FOUND, HEADER, TICKET_BYTES

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 3.0
"""How long a new data-port connection may take: a firewalled port must not cost a whole deadline."""


class DataPortUnreachable(ServerUnavailableError):
    """No connection to the data port could be made (a firewall, an unpublished port)."""


class DataPortClient:
    """The payload reader of one server (one process's: made after fork, never shared across it).

    Args:
        host: the servers' host.
        tls: the client side of TLS (``None``: plaintext, as the gRPC connection).
        one_server: the connection has one server, so a ticket naming another port means it
            restarted there: idle connections to its old port are closed. With several servers
            on the host, each keeps its own.
    """

    def __init__(self, host: str, tls: ssl.SSLContext | None, *, one_server: bool = True) -> None:
        self._host, self._tls, self._one_server = host, tls, one_server
        self._lock = threading.Lock()
        self._idle: dict[int, list[socket.socket]] = {}
        self.fetched = 0
        """Payloads read so far."""

    def fetch(self, ticket: graph_pb2.DataPortTicket, timeout: float) -> memoryview:
        """The payload held under ``ticket``, in a new writable buffer.

        Raises:
            DataPortUnreachable: no connection to the port could be made.
            ServerUnavailableError: the server did not hand the payload over (expired, already
                read, or the connection broke midway).
        """
        if len(ticket.ticket) != TICKET_BYTES:
            raise ServerUnavailableError(f"the server sent a {len(ticket.ticket)}-byte data-port ticket")
        while (conn := self._take(ticket.port)) is not None:  # reused: the server may have closed it
            try:
                return self._exchange(conn, ticket, timeout)
            except _ClosedBeforeAnswer:
                conn.close()
        conn = self._connect(ticket.port, timeout)
        try:
            return self._exchange(conn, ticket, timeout)
        except _ClosedBeforeAnswer:
            conn.close()
            raise ServerUnavailableError(
                f"the data port {self._host}:{ticket.port} closed the connection without an answer"
            ) from None

    def close(self) -> None:
        """Close the idle connections."""
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()

    def _take(self, port: int) -> socket.socket | None:
        """An idle connection to ``port``; with one server, closing those to any other: a server
        has one data port, so they lead to one that restarted elsewhere."""
        with self._lock:
            stale = [conn for other, conns in self._idle.items() if other != port for conn in conns]
            if self._one_server:
                self._idle = {port: self._idle.get(port, [])}
            else:
                stale = []
            conns = self._idle.setdefault(port, [])
            taken = conns.pop() if conns else None
        for conn in stale:
            conn.close()
        return taken

    def _connect(self, port: int, timeout: float) -> socket.socket:
        try:
            conn = socket.create_connection((self._host, port), timeout=min(timeout, CONNECT_TIMEOUT_S))
        except OSError as exc:
            raise DataPortUnreachable(
                f"cannot connect to the gnnstore data port {self._host}:{port} ({exc.strerror or exc}); "
                "open or publish that port (the server's --data-port / --data-public-port), or serve "
                "with --no-serve-data-port"
            ) from None
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._tls is None:
            return conn
        try:
            conn.settimeout(timeout)
            return self._tls.wrap_socket(conn, server_hostname=self._host)
        except (OSError, ssl.SSLError) as exc:
            conn.close()
            raise DataPortUnreachable(f"TLS with the gnnstore data port {self._host}:{port} failed ({exc})") from None

    def _exchange(self, conn: socket.socket, ticket: graph_pb2.DataPortTicket, timeout: float) -> memoryview:
        """Send the ticket and read the payload; the connection goes back to the pool after.

        Raises:
            _ClosedBeforeAnswer: the connection was closed before any answer byte (retry elsewhere).
            ServerUnavailableError: anything else went wrong (the connection is closed).
        """
        try:
            conn.settimeout(timeout)
            header = bytearray(HEADER.size)
            try:
                conn.sendall(ticket.ticket)
                answered = _recv_into(conn, memoryview(header), first_may_end=True)
            except TimeoutError:
                raise
            except (ConnectionError, ssl.SSLError):  # reset or broken pipe: closed on its side
                answered = False
            if not answered:
                raise _ClosedBeforeAnswer
            status, size = HEADER.unpack(header)
            if status != FOUND:
                raise ServerUnavailableError(
                    f"the data port {self._host}:{ticket.port} holds no payload under this ticket "
                    "(it expired, or the server restarted)"
                )
            if size != ticket.size:
                raise ServerUnavailableError(
                    f"the data port {self._host}:{ticket.port} sent {size} bytes where {ticket.size} were due"
                )
            buffer = memoryview(torch.empty(size, dtype=torch.uint8).numpy())  # every byte is read into
            _recv_into(conn, buffer, first_may_end=False)
        except _ClosedBeforeAnswer:
            raise
        except BaseException as exc:
            conn.close()
            if isinstance(exc, (OSError, ssl.SSLError)) and not isinstance(exc, ServerUnavailableError):
                raise ServerUnavailableError(
                    f"reading from the data port {self._host}:{ticket.port} failed ({exc})"
                ) from None
            raise
        with self._lock:
            self._idle.setdefault(ticket.port, []).append(conn)
            self.fetched += 1
        return buffer


class _ClosedBeforeAnswer(Exception):
    """The server closed an idle connection before this ticket reached it: the ticket is unread."""


def _recv_into(conn: socket.socket, buffer: memoryview, *, first_may_end: bool) -> bool:
    """Fill ``buffer``; False if the peer closed before its first byte and ``first_may_end``.

    Raises:
        ConnectionError: the peer closed midway.
    """
    filled = 0
    while filled < len(buffer):
        got = conn.recv_into(buffer[filled:])
        if not got:
            if filled == 0 and first_may_end:
                return False
            raise ConnectionError(f"the connection closed after {filled} of {len(buffer)} bytes")
        filled += got
    return True


def client_tls(root_pem: bytes | None, key_pem: bytes | None = None, chain_pem: bytes | None = None) -> ssl.SSLContext:
    """TLS that trusts ``root_pem`` (``None``: the system's CAs), checks the host name and, for
    mutual TLS, presents ``chain_pem`` with its ``key_pem``.

    Raises:
        DataPortUnreachable: the client certificate does not load.
    """
    context = ssl.create_default_context(cadata=None if root_pem is None else root_pem.decode())
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if chain_pem is not None:
        # ssl loads certificates only from files: an anonymous in-memory one, never on disk.
        fd = os.memfd_create("gnnstore-client-cert", os.MFD_CLOEXEC)
        try:
            os.write(fd, chain_pem + b"\n" + key_pem)
            context.load_cert_chain(f"/proc/self/fd/{fd}")
        except (OSError, ssl.SSLError) as exc:
            raise DataPortUnreachable(f"the client certificate does not load for the data port ({exc})") from None
        finally:
            os.close(fd)
    return context

