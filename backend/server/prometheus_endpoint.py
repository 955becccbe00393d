"""The server's counters for Prometheus: ``--metrics-port`` serves them at ``/metrics``.

Nothing is counted twice: at each scrape a collector reads the same ``Metrics`` the Stats RPC
reports, the sampling scheduler's queue and the reply segments held. Every series is prefixed
``gnnstore_``; methods are labelled ``Service/Method``, clients by their token's name
(``anonymous`` without tokens). The process's CPU, memory and open files come from
prometheus-client's own ``process_`` series.

The endpoint has no authentication, so it is bounded like the other ports: at most
``MAX_CONNECTIONS`` connections at once (a further one is closed at once, so it never takes the
file descriptors gRPC and the data port need), each cut ``REQUEST_DEADLINE_S`` after it opened
however slowly it sends, and only ``/metrics`` answers (404 elsewhere).
"""
from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from gnnstore.backend.service.metrics import LATENCY_BUCKETS_S, SERVICE_PREFIX, Metrics
from gnnstore.common.loopback import is_loopback

logger = logging.getLogger(__name__)

MAX_CONNECTIONS = 8
REQUEST_DEADLINE_S = 5.0


@dataclass
class ServerGauges:
    """What the collector reads besides ``Metrics``, each at scrape time."""

    sampling_load: Callable[[], tuple[int, int]]
    """``(waiting, running)`` sampling requests."""
    reply_segments: Callable[[], int]
    """Clients' shared-memory reply segments the server maps."""
    data_port: Callable[[], tuple[int, int]]
    """``(payload bytes held, connections open)`` on the data port (zeros without one)."""
    info: dict[str, str]
    """Server version, graph backend, snapshot version, role (primary, replica, read-only)."""
    replica_lag_s: Callable[[], float | None]
    """A replica's seconds since its last catch-up with the primary began (``None``: not a replica)."""


class GnnstoreCollector(Collector):
    """Turns ``Metrics`` and ``ServerGauges`` into Prometheus series at each scrape."""

    def __init__(self, metrics: Metrics, gauges: ServerGauges) -> None:
        self._metrics, self._gauges = metrics, gauges

    def collect(self) -> Iterator[Metric]:
        yield InfoMetricFamily("gnnstore_server", "The server's version, graph backend, snapshot version and role.",
                               value=self._gauges.info)
        lag = self._gauges.replica_lag_s()
        if lag is not None:
            yield GaugeMetricFamily("gnnstore_replica_lag_seconds",
                                    "Seconds since this replica's last catch-up with its primary began.", value=lag)
        yield GaugeMetricFamily("gnnstore_uptime_seconds", "Seconds since the server started.",
                                value=self._metrics.uptime_s())
        waiting, running = self._gauges.sampling_load()
        yield GaugeMetricFamily("gnnstore_sampling_queued_requests", "Sampling requests waiting for a thread.",
                                value=waiting)
        yield GaugeMetricFamily("gnnstore_sampling_running_requests", "Sampling requests running now.",
                                value=running)
        yield GaugeMetricFamily("gnnstore_reply_segments_mapped",
                                "Clients' shared-memory reply segments the server maps.",
                                value=self._gauges.reply_segments())
        held, connections = self._gauges.data_port()
        yield GaugeMetricFamily("gnnstore_data_port_held_bytes",
                                "Payload bytes waiting on the data port for their client.", value=held)
        yield GaugeMetricFamily("gnnstore_data_port_connections", "Connections open on the data port.",
                                value=connections)
        yield from self._per_method()
        yield from self._per_client()

    def _per_method(self) -> Iterator[Metric]:
        records = self._metrics.snapshot()
        counters = {
            "requests": "Calls finished.",
            "errors": "Calls that ended with an error status.",
            "retries": "Calls a client sent again after the server was unreachable (flapping).",
            "bytes_received": "Request bytes received.",
            "bytes_sent": "Reply bytes sent through the socket.",
            "bytes_shared": "Reply bytes written into clients' shared-memory reply segments.",
        }
        for field, help_text in counters.items():
            family = CounterMetricFamily(f"gnnstore_{field}", help_text, labels=["method"])
            for method, record in records.items():
                family.add_metric([_method_label(method)], getattr(record, field))
            yield family
        latency = HistogramMetricFamily("gnnstore_request_latency_seconds", "Time to answer a call.",
                                        labels=["method"])
        for method, record in records.items():
            cumulative, buckets = 0, []
            for bound, count in zip((*map(str, LATENCY_BUCKETS_S), "+Inf"), record.latency_counts):
                cumulative += count
                buckets.append((bound, cumulative))
            latency.add_metric([_method_label(method)], buckets, record.latency_sum_s)
        yield latency

    def _per_client(self) -> Iterator[Metric]:
        clients = self._metrics.clients()
        for field, help_text in {
            "requests": "Calls finished, per client.",
            "errors": "Calls that ended with an error status, per client.",
            "retries": "Calls sent again after the server was unreachable, per client.",
            "bytes_received": "Request bytes received, per client.",
            "bytes_sent": "Reply bytes sent through the socket, per client.",
        }.items():
            family = CounterMetricFamily(f"gnnstore_client_{field}", help_text, labels=["client", "role"])
            for client, record in clients.items():
                family.add_metric([client, record.role], getattr(record, field))
            yield family


def _method_label(method: str) -> str:
    """``GraphService/SampleFromNodes`` for ``/gnnstore.v1.GraphService/SampleFromNodes``."""
    return method.removeprefix(SERVICE_PREFIX)


def start_metrics_endpoint(
    host: str, port: int, metrics: Metrics, gauges: ServerGauges
) -> tuple[ThreadingHTTPServer, int]:
    """Serve ``/metrics`` on ``host:port`` on a thread of its own; the server and its bound port.

    Raises:
        OSError: the port cannot be bound.
    """
    registry = CollectorRegistry()
    registry.register(GnnstoreCollector(metrics, gauges))
    ProcessCollector(registry=registry)
    server = _BoundedHTTPServer((host, port), _handler_for(registry))
    threading.Thread(target=server.serve_forever, name="gnnstore-metrics", daemon=True).start()
    bound = server.server_address[1]
    if not is_loopback(host):
        logger.warning("Prometheus metrics on %s:%d are open to anyone who reaches it (no authentication)",
                       host, bound)
    logger.info("Prometheus metrics at http://%s:%d/metrics", host, bound)
    return server, bound


class _BoundedHTTPServer(ThreadingHTTPServer):
    """A thread per connection, at most ``MAX_CONNECTIONS`` of them, and one more thread that
    cuts each at its deadline."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._deadlines: dict[int, tuple[float, socket.socket]] = {}
        self._closed = threading.Event()
        super().__init__(address, handler)  # a port in use raises here, after server_close()
        threading.Thread(target=self._cut_late, name="gnnstore-metrics-deadlines", daemon=True).start()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # full: closed at once, holding nothing
            return
        self._deadlines[id(request)] = (time.monotonic() + REQUEST_DEADLINE_S, request)
        try:
            super().process_request(request, client_address)  # its thread runs process_request_thread
        except BaseException:
            self._release(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release(request)

    def server_close(self) -> None:
        self._closed.set()
        super().server_close()

    def _release(self, request: Any) -> None:
        self._deadlines.pop(id(request), None)
        self._slots.release()

    def _cut_late(self) -> None:
        while not self._closed.wait(0.25):
            now = time.monotonic()
            for deadline, request in list(self._deadlines.values()):
                if now > deadline:
                    _cut(request)


def _cut(request: socket.socket) -> None:
    """End a connection past its deadline: its handler's next read returns nothing."""
    try:
        request.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed


def _handler_for(registry: CollectorRegistry) -> type[BaseHTTPRequestHandler]:
    class MetricsHandler(BaseHTTPRequestHandler):
        timeout = REQUEST_DEADLINE_S  # each read; the server's timer bounds the whole connection

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404, "only /metrics is served here")
                return
            body = generate_latest(registry)
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's name)
            logger.debug("metrics endpoint: " + format, *args)

    return MetricsHandler

