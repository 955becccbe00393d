"""One lazily opened gRPC channel per process, with a deadline on every call and the error map.

A ``Connection`` is what remote stores and samplers hold instead of a channel: it opens the
channel on first use in each process (a channel made before ``fork()`` must not be used in the
child) and drops it when pickled, so PyG's loaders can copy it into workers under fork and
spawn. Its per-process ``reply_segments()`` pool lets a trainer on the server's host receive
sampling replies through shared memory (see ``segment_pool.py``). Every call carries the
bearer token (``token=`` or ``$GNNSTORE_TOKEN``), over TLS when asked (``tls=True`` trusts the
system's CAs, a path names the CA that signed the server's certificate; ``client_cert`` and
``client_key`` answer a server that wants mutual TLS). The certificates are read once, so a
loader's worker processes need no access to the files. A ``grpc.RpcError`` never leaves this
module: it becomes a ``GnnStoreError``, looked up by the class name the server sent in the
closed ``ERRORS_BY_NAME`` table, else by status.

A server that restarts mid-epoch is ridden through: once a process's connection has reached
the server (its first call checks in with Info and notes the graph version it serves), an
idempotent call (``retry.IDEMPOTENT_CALLS``) that finds the server unreachable is sent again
with backoff for up to ``retry_timeout`` seconds. Before each new try the connection asks Info
again: a server that came back serving another graph version gets a ``PreconditionError``
naming both, not the request. Every try after the first carries its number (``gnnstore-retry``),
so the server's Stats count them per client; ``Connection.retries`` counts them per process.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gnnstore.client.data_port import DataPortClient, DataPortUnreachable, client_tls
from gnnstore.client.retry import DEFAULT_RETRY_TIMEOUT_S, IDEMPOTENT_CALLS, Backoff
from gnnstore.client.segment_pool import ReplySegmentPool
from gnnstore.client.targets import parse_target
from gnnstore.common.errors import (
    ERROR_CLASS_KEY,
    ERRORS_BY_NAME,
    ERRORS_BY_STATUS,
    GnnStoreError,
    InvalidRequestError,
    PreconditionError,
    ServerUnavailableError,
)
from gnnstore.common.loopback import is_loopback
from gnnstore.common.pem_files import read_pem
from gnnstore.proto import admin_pb2, admin_pb2_grpc, feature_pb2_grpc, idmap_pb2_grpc
from gnnstore.proto.limits import DEFAULT_MAX_MESSAGE_BYTES
from gnnstore.proto.metadata_keys import RETRY_KEY
from gnnstore.proto.reply_payload import graph_stub

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 30.0
"""Deadline of one call unless the caller gives another."""

BALANCED_SERVICE_CONFIG = json.dumps({
    "loadBalancingConfig": [{"round_robin": {}}],
    "healthCheckConfig": {"serviceName": ""},  # gRPC's client-side health checks: skip NOT_SERVING servers
})
"""The service config of a channel over several servers."""

TOKEN_ENV = "GNNSTORE_TOKEN"
TLS_CA_ENV = "GNNSTORE_TLS_CA"
_TLS_WORDS = ("ssl", "tls", "handshake", "certificate")

_STUBS = {
    "FeatureService": feature_pb2_grpc.FeatureServiceStub,
    "GraphService": graph_stub,
    "IdMapService": idmap_pb2_grpc.IdMapServiceStub,
    "AdminService": admin_pb2_grpc.AdminServiceStub,
    "Health": health_pb2_grpc.HealthStub,
}


class Connection:
    """The client side of one gnnstore server address; cheap to pickle, safe across fork.

    Args:
        address: ``"host:port"`` of a running ``gnnstore serve``; or several servers of one
            graph, as a list of ``"host:port"`` or a gRPC target (``"dns:///name:port"``,
            ``"ipv4:a:p,b:p"``): calls then go round robin over them (see ``targets.py``).
        timeout: deadline in seconds of each call that gives none (default 30).
        max_message_bytes: send and receive limit, mirroring the server's (default 256 MiB).
        shared_memory: offer shared-memory reply segments to sampling calls; ``None`` (default)
            does when the address is a loopback one and the platform has ``memfd_create``.
        token: the bearer token every call carries (default ``$GNNSTORE_TOKEN``; none if unset).
        tls: ``False`` plaintext; ``True`` TLS trusting the system's CAs; a path: TLS trusting
            that PEM CA. ``None`` (default) is ``$GNNSTORE_TLS_CA`` if set, else plaintext.
        client_cert: this client's PEM certificate, for mutual TLS.
        client_key: its PEM key.
        retry_timeout: seconds an idempotent call keeps retrying while a server this process
            has reached is unreachable (default 60; 0: never retry).
        use_data_port: read large sampling replies from the server's data port when it offers one
            (default ``True``; see ``data_port.py``). A process that never reached the port warns
            once and receives them through gRPC (see ``fetch_payload``).

    Raises:
        InvalidRequestError: a bad address, timeout or retry_timeout, a certificate file that
            cannot be read, or a client certificate without TLS.
    """

    def __init__(
        self,
        address: str | Sequence[str],
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        shared_memory: bool | None = None,
        token: str | None = None,
        tls: bool | str | os.PathLike | None = None,
        client_cert: str | os.PathLike | None = None,
        client_key: str | os.PathLike | None = None,
        retry_timeout: float = DEFAULT_RETRY_TIMEOUT_S,
        use_data_port: bool = True,
    ) -> None:
        target = parse_target(address)
        if not timeout > 0:
            raise InvalidRequestError(f"timeout must be > 0 seconds, got {timeout}")
        if not retry_timeout >= 0 or retry_timeout == float("inf"):
            raise InvalidRequestError(f"retry_timeout must be finite seconds >= 0, got {retry_timeout}")
        self.target = target
        self.address = target.address
        self.timeout = float(timeout)
        self.retry_timeout = float(retry_timeout)
        self.max_message_bytes = int(max_message_bytes)
        self.shared_memory = (
            target.host is not None and is_loopback(target.host) and hasattr(os, "memfd_create")
            if shared_memory is None else bool(shared_memory)
        )
        token = os.environ.get(TOKEN_ENV) if token is None else token
        self._metadata = () if not token else (("authorization", f"Bearer {token}"),)
        self._tls = _tls_material(tls, client_cert, client_key)
        if token and self._tls is None and not (target.host is not None and is_loopback(target.host)):
            logger.warning("the token to %s travels in plaintext: connect with tls=... where the server has TLS",
                           target.address)
        self._lock = threading.Lock()
        self._channel: grpc.Channel | None = None
        self._pid: int | None = None
        self._stubs: dict[str, Any] = {}
        self._segments: ReplySegmentPool | None = None
        self.use_data_port = bool(use_data_port)
        self._data_port: DataPortClient | None = None
        self._told_data_port_full = False
        self.snapshot_id: str | None = None
        """The topology snapshot the server served at this connection's first call (``None``
        before it); inherited by loader workers."""
        self.retries = 0
        """Tries this process sent again because the server was unreachable."""

    def __repr__(self) -> str:
        return f"Connection({self.address!r}, timeout={self.timeout}, tls={self._tls is not None})"

    @property
    def uses_tls(self) -> bool:
        """Whether calls travel over TLS."""
        return self._tls is not None

    def __getstate__(self) -> dict[str, Any]:
        # Never ship a channel across fork or pickle: the other process opens its own.
        state = self.__dict__.copy()
        state.update(_lock=None, _channel=None, _pid=None, _stubs={}, _segments=None, _data_port=None, retries=0)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def call(self, service: str, method: str, request: Any, *, timeout: float | None = None) -> Any:
        """Make one unary call with a deadline, retried as the module doc says.

        Raises:
            GnnStoreError: the server's error, as the class it named or its status maps to.
            ServerUnavailableError: the server is unreachable or missed the deadline (after
                ``retry_timeout`` seconds of retries where the call is retried).
            PreconditionError: the server came back from a restart serving another graph version.
        """
        return self._invoke(
            service, method, lambda rpc, deadline, metadata: rpc(request, timeout=deadline, metadata=metadata),
            timeout,
        )

    def stream_all(
        self, service: str, method: str, request: Any, *, timeout: float | None = None
    ) -> list[Any]:
        """Make one server-streaming call and return every message; the deadline covers the
        whole stream, and a retry asks for the whole stream again.

        Raises:
            GnnStoreError: as for ``call``, also when the stream breaks midway.
        """
        return self._invoke(
            service, method,
            lambda rpc, deadline, metadata: list(rpc(request, timeout=deadline, metadata=metadata)),
            timeout,
        )

    def _invoke(
        self, service: str, method: str, send: Callable[[Any, float, tuple], Any], timeout: float | None
    ) -> Any:
        """``send(rpc, deadline, metadata)``, tried again while the module doc says so."""
        name, deadline = f"{service}.{method}", self.timeout if timeout is None else timeout
        retried = self.retry_timeout > 0 and name in IDEMPOTENT_CALLS
        if retried and self.snapshot_id is None:
            try:
                self.snapshot_id = self._served_snapshot(deadline)
            except grpc.RpcError as exc:  # never reached: a wrong address or TLS, not a restart
                raise self._error(exc, "AdminService.Info", deadline) from None
        backoff, tries = None, 0
        while True:
            try:
                metadata = self._metadata
                if tries:
                    self._expect_same_data(deadline)
                    metadata = (*metadata, (RETRY_KEY, str(tries)))
                reply = send(getattr(self._stub(service), method), deadline, metadata)
                if tries:
                    logger.info("%s: the server at %s answered again, after %d retries",
                                   name, self.address, tries)
                return reply
            except grpc.RpcError as exc:
                error = self._error(exc, name, deadline)
                if not (retried and self._worth_retrying(exc)):
                    raise error from None
                backoff = backoff or Backoff(self.retry_timeout)
                delay = backoff.next_delay()
                if delay is None:
                    raise ServerUnavailableError(
                        f"{error} (retried for {self.retry_timeout:g} s, the connection's retry_timeout)"
                    ) from None
                tries += 1
                with self._lock:
                    self.retries += 1
                if tries == 1:
                    logger.warning("%s: %s; retrying for up to %g s", name, error, self.retry_timeout)
                logger.debug("%s: try %d in %.2f s", name, tries + 1, delay)
                time.sleep(delay)

    def _served_snapshot(self, deadline: float) -> str:
        """The snapshot the server serves now: one Info call, not retried.

        Raises:
            grpc.RpcError: the call failed.
        """
        info = self._stub("AdminService").Info(admin_pb2.InfoRequest(), timeout=deadline, metadata=self._metadata)
        return info.snapshot_id

    def _expect_same_data(self, deadline: float) -> None:
        """Raise ``PreconditionError`` if the server now serves another snapshot than the one
        this connection began with (a failed Info call raises ``grpc.RpcError``)."""
        snapshot_id = self._served_snapshot(deadline)
        if snapshot_id != self.snapshot_id:
            raise PreconditionError(
                f"the gnnstore server at {self.address} came back from a restart serving snapshot "
                f"{snapshot_id}, but this client began with snapshot {self.snapshot_id}; "
                "its batches would mix two graphs. Connect again (connect(...)) to train on the "
                "new graph."
            )

    def _worth_retrying(self, exc: grpc.RpcError, *, probe: bool = True) -> bool:
        """Whether ``exc`` says the server is down (not that the call was refused); a missed
        deadline counts where ``probe`` and a health check says so."""
        if exc.code() == grpc.StatusCode.UNAVAILABLE:
            return not _is_tls_failure(exc.details() or "")
        if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:  # down, or only slow at this call?
            return not probe or not self.is_serving()
        return False

    def is_serving(self, *, timeout: float = 2.0) -> bool:
        """Whether the server answers the standard health check with SERVING."""
        try:
            reply = self.call("Health", "Check", health_pb2.HealthCheckRequest(), timeout=timeout)
        except ServerUnavailableError:
            return False
        return reply.status == health_pb2.HealthCheckResponse.SERVING

    def reply_segments(self) -> ReplySegmentPool | None:
        """This process's pool of shared-memory reply segments (``None``: not offered)."""
        if not self.shared_memory:
            return None
        with self._lock:
            self._open_in_this_process()
            if self._segments is None:
                self._segments = ReplySegmentPool()
            return self._segments

    def data_port(self) -> DataPortClient | None:
        """This process's reader of the servers' data ports (``None``: not used, also where the
        servers are on several hosts: a ticket names its port, not its host)."""
        if not self.use_data_port or self.target.host is None:
            return None
        with self._lock:
            self._open_in_this_process()
            if self._data_port is None:
                tls = None if self._tls is None else client_tls(*self._tls)
                self._data_port = DataPortClient(self.target.host, tls, one_server=not self.target.balanced)
            return self._data_port

    def check_servers_agree(self) -> None:
        """Ask each server the target lists which snapshot it serves, one by one.

        Raises:
            PreconditionError: two of them serve different graphs; the message names them.
            ServerUnavailableError: none of them answered.
        """
        served: dict[str, str] = {}
        last_error = ""
        for server in self.target.servers:
            # One server, no health checks: its own error (a refused certificate) is what to report
            with self._new_channel(server, server.rpartition(":")[0].strip("[]"), one_server=True) as channel:
                stub = admin_pb2_grpc.AdminServiceStub(channel)
                try:
                    served[server] = stub.Info(admin_pb2.InfoRequest(), timeout=self.timeout,
                                               metadata=self._metadata).snapshot_id
                except grpc.RpcError as exc:
                    if not self._worth_retrying(exc, probe=False):
                        raise self._error(exc, "AdminService.Info", self.timeout) from None
                    last_error = exc.details() or exc.code().name
                    logger.warning("the gnnstore server at %s does not answer (%s); calls go to the others",
                                   server, last_error)
        if not served:
            # A refused certificate can show as a closed socket, without the TLS words
            hint = "" if self._tls is None else "; over TLS, check that tls= names the CA that signed them"
            raise ServerUnavailableError(
                f"none of the gnnstore servers {self.address} answered (the last: {last_error}){hint}"
            )
        if len(set(served.values())) > 1:
            raise PreconditionError(
                "the gnnstore servers serve different graphs, so their batches would mix them: "
                + ", ".join(f"{server} serves snapshot {snapshot}" for server, snapshot in served.items())
            )

    def fetch_payload(self, ticket: Any, timeout: float | None = None) -> memoryview | None:
        """The payload a sampling reply left on the data port; ``None`` when it could not be read
        (the caller asks again through gRPC). A port this process never reached is not tried
        again; one it has read from before is tried again at the next reply (the server may
        have restarted, on another data port)."""
        port = None
        try:
            port = self.data_port()
            return None if port is None else port.fetch(ticket, self.timeout if timeout is None else timeout)
        except DataPortUnreachable as exc:
            if port is not None and port.fetched:
                logger.info("%s; asking again through gRPC", exc)
            else:
                logger.warning("%s; receiving sampling replies through gRPC instead (slower)", exc)
                self.use_data_port = False  # this process's copy only: workers try for themselves
        except ServerUnavailableError as exc:
            logger.info("%s; asking again through gRPC", exc)
        return None

    def note_data_port_full(self) -> None:
        """A reply came through gRPC because the server's data port was full: say so once."""
        if not self._told_data_port_full:
            self._told_data_port_full = True
            logger.warning("the server's data port is full (every connection it allows is taken); sampling replies "
                           "come through gRPC until this process holds a connection to it (slower)")

    def close(self) -> None:
        """Close this process's channel, idle segments and data-port connections; the next call
        opens new ones."""
        with self._lock:
            if self._pid == os.getpid():
                if self._channel is not None:
                    self._channel.close()
                if self._segments is not None:
                    self._segments.close()
                if self._data_port is not None:
                    self._data_port.close()
            self._channel, self._pid, self._stubs, self._segments, self._data_port = None, None, {}, None, None

    def _open_in_this_process(self) -> None:
        """Open the channel, and forget what a parent process opened (call under the lock)."""
        pid = os.getpid()
        if self._channel is None or self._pid != pid:
            # What is inherited through fork belongs to the parent: leave it alone.
            self._channel = self._new_channel(self.target.grpc_target, self.target.authority)
            self._pid, self._stubs, self._segments, self._data_port = pid, {}, None, None
            logger.debug("opened channel to %s in process %d", self.address, pid)

    def _stub(self, service: str) -> Any:
        with self._lock:
            self._open_in_this_process()
            stub = self._stubs.get(service)
            if stub is None:
                stub = self._stubs[service] = _STUBS[service](self._channel)
            return stub

    def _new_channel(self, target: str, authority: str, *, one_server: bool = False) -> grpc.Channel:
        """A channel to ``target``; over several servers (not ``one_server``), round robin over
        those that answer the health check SERVING."""
        options = self._options()
        if self.target.balanced and not one_server:
            options.append(("grpc.service_config", BALANCED_SERVICE_CONFIG))
        if self._tls is None:
            return grpc.insecure_channel(target, options=options)
        if self.target.balanced:  # a listed target holds addresses: certificates name the first host
            options.append(("grpc.ssl_target_name_override", authority))
        return grpc.secure_channel(target, grpc.ssl_channel_credentials(*self._tls), options=options)

    def _options(self) -> list[tuple[str, Any]]:
        return [
            ("grpc.max_send_message_length", self.max_message_bytes),
            ("grpc.max_receive_message_length", self.max_message_bytes),
            # Keepalive finds a dead server on an idle connection; the server permits this rate.
            ("grpc.keepalive_time_ms", 30_000),
            ("grpc.keepalive_timeout_ms", 10_000),
            # A restarted server is reconnected to within half a second (grpc's default: up to 2 min).
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 500),
            # A new connection tries at once, not after another channel's reconnect backoff.
            ("grpc.use_local_subchannel_pool", 1),
        ]

    def _error(self, exc: grpc.RpcError, rpc: str, deadline: float) -> GnnStoreError:
        code, details = exc.code(), exc.details() or ""
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return ServerUnavailableError(
                f"gnnstore server at {self.address} did not answer {rpc} within {deadline:g} s"
            )
        if code == grpc.StatusCode.UNAVAILABLE:
            if _is_tls_failure(details):
                return ServerUnavailableError(
                    f"TLS with the gnnstore server at {self.address} failed ({details}); check "
                    "that tls= names the CA that signed the server's certificate, and client_cert/"
                    "client_key where the server wants mutual TLS"
                )
            hint = (
                " (if it serves TLS, connect with tls=True or the CA's path)" if self._tls is None
                else " (this client speaks TLS: if the server wants mutual TLS, pass client_cert and "
                "client_key; if it serves plaintext, tls=False)"
            )
            return ServerUnavailableError(
                f"gnnstore server at {self.address} is unavailable ({details}); "
                f"is `gnnstore serve` running there?{hint}"
            )
        name = dict(exc.trailing_metadata() or ()).get(ERROR_CLASS_KEY)
        cls = ERRORS_BY_NAME.get(name) or ERRORS_BY_STATUS.get(code.name, GnnStoreError)
        return cls(details or f"{rpc} failed with {code.name}")


def _is_tls_failure(details: str) -> bool:
    return any(word in details.lower() for word in _TLS_WORDS)


def _tls_material(
    tls: bool | str | os.PathLike | None,
    client_cert: str | os.PathLike | None,
    client_key: str | os.PathLike | None,
) -> tuple[bytes | None, bytes | None, bytes | None] | None:
    """``(root CA, client key, client chain)`` for ``grpc.ssl_channel_credentials``, or ``None``.

    Raises:
        InvalidRequestError: a file cannot be read, or a client certificate without TLS or key.
    """
    if tls is None:
        tls = os.environ.get(TLS_CA_ENV) or False
    if (client_cert is None) != (client_key is None):
        raise InvalidRequestError("client_cert and client_key come together (mutual TLS)")
    if tls is False:
        if client_cert is not None:
            raise InvalidRequestError("client_cert needs TLS: pass tls=True or the CA's path too")
        return None
    root = None if tls is True else read_pem(tls, "tls")
    if client_cert is None:
        return root, None, None
    return root, read_pem(client_key, "client_key"), read_pem(client_cert, "client_cert")


def as_connection(connection: Connection | str) -> Connection:
    """``connection`` itself, or a new :class:`Connection` to a ``"host:port"`` address."""
    return connection if isinstance(connection, Connection) else Connection(connection)
