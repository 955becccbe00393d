"""The gnnstore gRPC server: opens the stores, prepares sampling and serves four services plus health.

``GnnStoreServer(config).start()`` returns the bound address; ``serve(config, announce)`` also
waits for SIGTERM/SIGINT and stops gracefully (in-flight calls get ``shutdown_grace_s`` to
finish), and re-reads the auth file on SIGHUP. This module alone builds the ``grpc.server``:
its interceptors (metrics, then tokens and roles), its TLS credentials, and the rule that a
server without tokens binds loopback only unless told ``insecure``. The servicers only translate.
"""
from __future__ import annotations

import logging
import os
import signal
import ssl
import threading
from collections.abc import Callable
from concurrent import futures
from http.server import ThreadingHTTPServer
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from gnnstore import __version__
from gnnstore.backend.server.prometheus_endpoint import ServerGauges, start_metrics_endpoint
from gnnstore.backend.server.replica_wait import StopRequested, open_when_prepared
from gnnstore.backend.server.signal_wait import SignalWait
from gnnstore.backend.server.stream_guard import StreamGuard
from gnnstore.backend.service.admin_service import AdminServicer
from gnnstore.backend.service.auth import AuthInterceptor, TokenTable, identify, load_tokens
from gnnstore.backend.service.data_port import DataPort
from gnnstore.backend.service.fair_scheduler import SamplingPools
from gnnstore.backend.service.feature_service import FeatureServicer
from gnnstore.backend.service.graph_service import GraphServicer
from gnnstore.backend.service.idmap_service import IdMapServicer
from gnnstore.backend.service.metrics import Metrics, MetricsInterceptor
from gnnstore.backend.service.replica_follower import ReplicaFollower
from gnnstore.backend.service.reply_segments import ReplySegments
from gnnstore.backend.service.row_gathering import RowGatherer
from gnnstore.backend.service.sampling_runner import SamplingLimits, SamplingRunner
from gnnstore.backend.service.served_data import ServedData, open_served_data
from gnnstore.backend.service.write_applier import WriteApplier
from gnnstore.backend.service.write_refusal import WriteRefusal
from gnnstore.common.errors import InvalidRequestError, PreconditionError
from gnnstore.common.loopback import is_loopback
from gnnstore.common.pem_files import read_pem
from gnnstore.config import ServerConfig
from gnnstore.proto import admin_pb2_grpc, feature_pb2_grpc, graph_pb2_grpc, idmap_pb2_grpc

logger = logging.getLogger(__name__)

SERVICE_NAMES = (
    "gnnstore.v1.FeatureService",
    "gnnstore.v1.GraphService",
    "gnnstore.v1.IdMapService",
    "gnnstore.v1.AdminService",
)


class GnnStoreServer:
    """One server process's stores, engine and ``grpc.Server``.

    Args:
        config: the server configuration.
        data: already opened data to serve (default: open ``config.data_dir`` on start).
    """

    def __init__(self, config: ServerConfig, data: ServedData | None = None) -> None:
        self.config = config
        self.address: str | None = None
        self.data = data
        self.metrics = Metrics()
        self.tokens: TokenTable | None = None
        self._server: grpc.Server | None = None
        self._handlers: futures.ThreadPoolExecutor | None = None
        self._sampling: SamplingPools | None = None
        self._stream_guard: StreamGuard | None = None
        self._segments: ReplySegments | None = None
        self._metrics_endpoint: ThreadingHTTPServer | None = None
        self.data_port_server: DataPort | None = None
        self.metrics_port: int | None = None
        """The bound port of the Prometheus endpoint (``None``: not served)."""
        self._health = health.HealthServicer(experimental_non_blocking=True)
        self._follower: ReplicaFollower | None = None

    def start(self, stop_requested: Callable[[float], bool] | None = None) -> str:
        """Open the data, bind, start serving and return the bound ``host:port``.

        Args:
            stop_requested: given to a replica, it waits for a data directory that cannot be
                opened yet, on its port, NOT_SERVING (``replica_wait``); this waits up to the
                given seconds for a stop and says whether one came. Without it, it raises.

        Raises:
            StopRequested: a stop came while the replica waited.
            InvalidRequestError: the tokens or TLS files do not fit, or a non-loopback bind
                without tokens and without ``insecure``.
            PreconditionError: the data directory is missing or unreadable, or the port is taken.
        """
        config = self.config
        self.tokens = load_tokens(config.auth_file, config.auth_tokens)
        _check_exposure(config, self.tokens)
        credentials = _server_credentials(config)
        if config.serve_data_port:
            self.data_port_server = DataPort(
                config.host, config.data_port, tls=_data_port_tls(config), public_port=config.data_public_port,
                tokens=self.tokens,
            )
        if self.data is None and config.replica and stop_requested is not None:
            self.data, config = open_when_prepared(config, credentials, SERVICE_NAMES, stop_requested)
            self.config = config  # the port it waited on
        elif self.data is None:
            self.data = open_served_data(config)
        try:
            self._server = self._build(self.data)
            if credentials is None:
                port = self._server.add_insecure_port(config.address)
            else:
                port = self._server.add_secure_port(config.address, credentials)
        except RuntimeError as exc:
            self._server = None
            self.stop()  # the sampling threads, the handler pool and the data
            raise PreconditionError(f"cannot listen on {config.address}: {exc}") from None
        self.address = f"{config.host}:{port}"
        if self.data_port_server is not None:
            self._open_data_port()
        self._server.start()
        if config.metrics_port is not None:
            self._serve_metrics()
        if config.replica:
            self._follower = ReplicaFollower(self.data, config.max_lag_s, self._set_serving)
            try:
                self._follower.start()
            except BaseException:
                self.stop()
                raise
        else:
            self._set_serving(True)
        logger.info(
            "serving on %s (%s, %s; data port %s)", self.address,
            "no tokens" if self.tokens is None else f"{len(self.tokens)} token(s)",
            "plaintext" if credentials is None else "mutual TLS" if config.tls_client_ca else "TLS",
            "off" if self.data_port_server is None else self.data_port_server.port,
        )
        return self.address

    def _open_data_port(self) -> None:
        """Bind the data port.

        Raises:
            PreconditionError: it cannot be bound (the server is stopped then).
        """
        try:
            self.data_port_server.start()
        except OSError as exc:
            self.stop(0)
            raise PreconditionError(
                f"cannot open the data port {self.config.host}:{self.config.data_port}: {exc.strerror} "
                "(choose another with --data-port, or --no-serve-data-port)"
            ) from None

    def _serve_metrics(self) -> None:
        """Start the Prometheus endpoint.

        Raises:
            PreconditionError: its port cannot be bound (the server is stopped then).
        """
        config = self.config
        gauges = ServerGauges(
            self._sampling.load,
            lambda: len(self._segments or ()),
            lambda: (0, 0) if self.data_port_server is None else (
                self.data_port_server.tickets.held_bytes, self.data_port_server.connections()
            ),
            {"version": __version__, "graph_backend": self.data.graph_backend,
             "snapshot_id": self.data.summary.snapshot_id,
             "role": "replica" if config.replica else "read-only" if config.read_only else "primary"},
            lambda: None if self._follower is None else self._follower.lag_s(),
        )
        try:
            self._metrics_endpoint, self.metrics_port = start_metrics_endpoint(
                config.metrics_host, config.metrics_port, self.metrics, gauges
            )
        except OSError as exc:
            self.stop(0)
            raise PreconditionError(
                f"cannot serve metrics on {config.metrics_host}:{config.metrics_port}: {exc.strerror}"
            ) from None

    def reload_tokens(self) -> None:
        """Re-read the auth file (SIGHUP); a server started without tokens keeps having none."""
        if self.tokens is None:
            logger.warning("SIGHUP: this server was started without tokens; nothing to reload")
        else:
            self.tokens.reload()

    def startup_line(self) -> str:
        """One line: the bound address, the backend, the graph version, counts, feature schema,
        where feature rows are read from and the memory limit found."""
        data = self.data
        summary = data.summary
        nodes = ", ".join(_label(nt, n) for nt, n in summary.num_nodes.items())
        edges = ", ".join(_label(et, n) for et, n in summary.num_edges.items())
        features = ", ".join(
            f"{'' if s.group_name is None else f'{s.group_name}.'}{s.attr_name}:"
            f"{s.dtype}{list(s.shape)}"
            for s in data.feature_reader.tensor_schema()
        )
        return (
            f"gnnstore serving on {self.address} | {data.graph_backend} "
            f"{self.config.data_dir} | {summary.sampling} {summary.snapshot_id} graph version "
            f"{data.summary_now().graph_version} | nodes: {nodes} | "
            f"edges: {edges} | features: {features} | feature tier: {data.feature_reader.tier.describe()} | "
            f"memory limit: {data.memory} | replies' rows: at most {data.replies.capacity / 2**30:.2f} GiB at once"
        )

    def _set_serving(self, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ("", *SERVICE_NAMES):
            self._health.set(name, status)

    def stop(self, grace: float | None = None) -> None:
        """Stop accepting calls, let in-flight ones finish within ``grace`` s, close the data.

        A handler whose call was cancelled (its client gave up, or the grace ran out) still runs
        to its end in Python; the data closes only after the handlers ended (waiting at most
        ``grace`` + ``HANDLER_DRAIN_S`` more), so a Put is never cut off by the store closing.
        """
        grace = self.config.shutdown_grace_s if grace is None else grace
        if self._follower is not None:
            self._follower.stop()
            self._follower = None
        if self._metrics_endpoint is not None:
            self._metrics_endpoint.shutdown()
            self._metrics_endpoint.server_close()
            self._metrics_endpoint = None
        if self._server is not None:
            self._health.enter_graceful_shutdown()
            self._server.stop(grace).wait()
            self._server = None
            if self.data is not None:  # calls past the grace stop reading rows from disk or waiting for room
                self.data.feature_reader.tier.stop_reads()
                self.data.replies.close()
            _drain(self._handlers, grace + HANDLER_DRAIN_S)
            self._handlers = None
            logger.info("stopped serving on %s", self.address)
        if self.data_port_server is not None:  # after the calls' grace: their clients had it to read
            self.data_port_server.close()
            self.data_port_server = None
        if self._stream_guard is not None:
            self._stream_guard.close()
            self._stream_guard = None
        if self._sampling is not None:
            self._sampling.shutdown()
            self._sampling = None
        if self.data is not None:
            self.data.close()
            self.data = None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server stops (or ``timeout`` passes); True if it stopped."""
        return self._server is None or self._server.wait_for_termination(timeout)

    def __enter__(self) -> "GnnStoreServer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _build(self, data: ServedData) -> grpc.Server:
        config = self.config
        self._handlers = futures.ThreadPoolExecutor(config.workers, thread_name_prefix="gnnstore-rpc")
        self._stream_guard = StreamGuard(max(1, config.workers // 2), config.stream_stall_s)
        refused = (
            "this server is a replica: it takes no writes (Put, Remove, WriteGraph); send them to the "
            "primary, the `gnnstore serve` without --replica over the same data directory" if config.replica
            else "this server is read-only: it takes no writes (Put, Remove, WriteGraph)" if config.read_only
            else None
        )
        server = grpc.server(
            self._handlers,
            # Metrics first, so refused calls are counted too (as errors of "anonymous"); the
            # stream guard last, so only admitted callers take a stream's place.
            interceptors=[
                MetricsInterceptor(self.metrics, identify(self.tokens)),
                *([] if self.tokens is None else [AuthInterceptor(self.tokens)]),
                *([] if refused is None else [WriteRefusal(refused)]),
                self._stream_guard,
            ],
            options=_server_options(config),
            # Admit a bounded number of calls; beyond it callers get RESOURCE_EXHAUSTED at once
            # instead of queueing without limit behind slow samples.
            maximum_concurrent_rpcs=config.max_concurrent_rpcs,
        )
        limits = SamplingLimits(
            config.max_seeds, config.max_hops, config.max_fanout, config.max_sample_edges, config.max_reply_bytes
        )
        runner = SamplingRunner(data.sampling, limits)
        rows = RowGatherer(data.feature_reader, limits.max_reply_bytes, data.ranking, data.replies)
        self._sampling = SamplingPools.start(sampling_threads(config), config.bulk_sample_edges)
        logger.info(
            "sampling on %d thread(s), at most %d for one client; requests of over %d edges on %d more, "
            "at a lower priority", self._sampling.ordinary.threads, self._sampling.ordinary.per_client,
            config.bulk_sample_edges, self._sampling.bulk.threads,
        )
        feature_pb2_grpc.add_FeatureServiceServicer_to_server(
            FeatureServicer(
                data.feature_reader, min(config.max_message_bytes, config.max_reply_bytes), config.max_put_rows
            ),
            server,
        )
        segments = self._segments = ReplySegments()
        graph_pb2_grpc.add_GraphServiceServicer_to_server(
            GraphServicer(
                data.graph_store, runner, rows, self._sampling, data.summary, self.metrics, segments, self.data_port_server,
                None if data.versions is None else WriteApplier(data.versions, data.id_map, data.feature_reader),
                data.versions,
            ),
            server,
        )
        idmap_pb2_grpc.add_IdMapServiceServicer_to_server(IdMapServicer(data.id_map), server)
        admin_pb2_grpc.add_AdminServiceServicer_to_server(
            AdminServicer(
                data.summary_now,
                data.feature_reader,
                self.metrics,
                graph_backend=data.graph_backend,
                max_message_bytes=config.max_message_bytes,
                segments=segments,
            ),
            server,
        )
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        return server


HANDLER_DRAIN_S = 30.0
"""How long a stop waits, past the grace, for handlers still running before closing the data."""


def _drain(handlers: futures.ThreadPoolExecutor | None, timeout: float) -> None:
    """Wait up to ``timeout`` s for the handler threads to finish what they run."""
    if handlers is None:
        return
    waiter = threading.Thread(target=handlers.shutdown, kwargs={"wait": True}, daemon=True)
    waiter.start()
    waiter.join(timeout)
    if waiter.is_alive():
        logger.warning("handlers still running %.0f s after the stop; closing the data under them", timeout)


def sampling_threads(config: ServerConfig) -> int:
    """Threads one client's sampling may use: ``config.sampling_threads``, or half the CPUs this
    process may run on (at least 1) for 0. The server keeps one more thread for other clients."""
    return config.sampling_threads or max(1, len(os.sched_getaffinity(0)) // 2)


def _label(key: object, count: int) -> str:
    """``"3000"`` for the homogeneous graph, ``"paper=3000"`` or ``"a__to__b=10"`` otherwise."""
    if key is None:
        return str(count)
    return f"{key if isinstance(key, str) else '__'.join(key)}={count}"


def _check_exposure(config: ServerConfig, tokens: TokenTable | None) -> None:
    """Refuse to open a non-loopback port without tokens unless ``insecure`` says to (then warn).

    Raises:
        InvalidRequestError: a non-loopback host, no tokens and no ``insecure``.
    """
    if is_loopback(config.host):
        return
    if tokens is None and not config.insecure:
        raise InvalidRequestError(
            f"refusing to serve on {config.host} without tokens: anyone who reaches the port could "
            "read and change the data. Add a token (a file of 'TOKEN ROLE' lines, roles reader, "
            "writer, admin, given with --auth-file, or GNNSTORE_AUTH_TOKENS='TOKEN admin'; make "
            "one with `python -c 'import secrets; print(secrets.token_urlsafe(32))'`), or pass "
            "--insecure to serve an open port on purpose"
        )
    if tokens is None:
        logger.warning("--insecure: serving %s without tokens; anyone who reaches it can read and change the data",
                       config.host)
    elif config.tls_cert is None:
        logger.warning("serving %s without TLS: tokens and data cross the network in plaintext", config.host)


def _server_credentials(config: ServerConfig) -> grpc.ServerCredentials | None:
    """TLS credentials from the configured PEM files (``None``: plaintext).

    Raises:
        InvalidRequestError: a file cannot be read (named by its setting, not its path).
    """
    if config.tls_cert is None:
        return None
    chain, key = read_pem(config.tls_cert, "tls_cert"), read_pem(config.tls_key, "tls_key")
    client_ca = None if config.tls_client_ca is None else read_pem(config.tls_client_ca, "tls_client_ca")
    return grpc.ssl_server_credentials(
        [(key, chain)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )


def _data_port_tls(config: ServerConfig) -> ssl.SSLContext | None:
    """The data port's TLS, with the gRPC port's certificate (``None``: plaintext, as that port).

    Raises:
        InvalidRequestError: the certificate, key or client CA do not load (named by setting, not path).
    """
    if config.tls_cert is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(config.tls_cert, config.tls_key)
        if config.tls_client_ca is not None:  # mutual TLS on this port too
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(config.tls_client_ca)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidRequestError(
            f"tls_cert, tls_key and tls_client_ca do not load as a PEM certificate chain, its key and a "
            f"CA ({exc.__class__.__name__})"
        ) from None
    return context


def _server_options(config: ServerConfig) -> list[tuple[str, Any]]:
    return [
        # A mini-batch with its feature rows is tens of MB; gRPC's 4 MB default refuses it.
        ("grpc.max_send_message_length", config.max_message_bytes),
        ("grpc.max_receive_message_length", config.max_message_bytes),
        # Clients ping every 30 s to notice a dead server; accept that rate instead of GOAWAY.
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
        # Ping idle clients too, so connections of crashed trainers are dropped.
        ("grpc.keepalive_time_ms", 60_000),
        ("grpc.keepalive_timeout_ms", 20_000),
        # Two servers must never share a port by accident (tests bind port 0 side by side).
        ("grpc.so_reuseport", 0),
    ] + ([] if not config.max_connection_age_s else [
        # GOAWAY to each client after this age: it reconnects, and round_robin over a name then
        # includes servers that came up since (else new replicas idle until clients restart).
        ("grpc.max_connection_age_ms", int(config.max_connection_age_s * 1000)),
        ("grpc.max_connection_age_grace_ms", int(config.shutdown_grace_s * 1000)),
    ])


def serve(config: ServerConfig, announce: Callable[[str], None]) -> None:
    """Start, ``announce`` the start-up line, serve until SIGTERM/SIGINT, then stop gracefully.

    Must run in the main thread (signal handlers are installed there).
    """
    server = GnnStoreServer(config)
    with SignalWait((signal.SIGTERM, signal.SIGINT, signal.SIGHUP)) as signals:

        def stop_requested(timeout: float) -> bool:
            received = signals.next(timeout)
            if received == signal.SIGHUP:
                server.reload_tokens()
            return received in (signal.SIGTERM, signal.SIGINT)

        try:
            try:
                server.start(stop_requested)
            except StopRequested:
                logger.info("stopped while waiting for the primary")
                return
            announce(server.startup_line())
            while (received := signals.next()) == signal.SIGHUP:
                server.reload_tokens()
            logger.info("received %s; stopping (grace %.1f s)", received.name, config.shutdown_grace_s)
        finally:
            server.stop()
