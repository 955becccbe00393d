"""Per-method request counts, latencies and bytes, recorded by a server interceptor for Stats."""
from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np

LATENCY_WINDOW = 10_000
"""Latencies kept per method for the percentiles (the most recent ones)."""

SERVICE_PREFIX = "/gnnstore.v1."
"""Only gnnstore's own services are measured (health watches are long-lived streams)."""


@dataclass
class MethodRecord:
    """Counters of one RPC method since the server started."""

    requests: int = 0
    errors: int = 0
    bytes_received: int = 0
    bytes_sent: int = 0
    latencies_s: deque = field(default_factory=lambda: deque(maxlen=LATENCY_WINDOW))

    def percentile_ms(self, q: float) -> float:
        """The ``q``-th latency percentile in milliseconds (0.0 before the first request)."""
        return float(np.percentile(self.latencies_s, q)) * 1e3 if self.latencies_s else 0.0

    def mean_ms(self) -> float:
        """Mean latency of the window in milliseconds."""
        return float(np.mean(self.latencies_s)) * 1e3 if self.latencies_s else 0.0


class Metrics:
    """Thread-safe counters per method; ``snapshot()`` copies them for the Stats RPC."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._methods: dict[str, MethodRecord] = {}

    def record(self, method: str, seconds: float, received: int, sent: int, ok: bool) -> None:
        """Count one finished call."""
        with self._lock:
            rec = self._methods.setdefault(method, MethodRecord())
            rec.requests += 1
            rec.errors += 0 if ok else 1
            rec.bytes_received += received
            rec.bytes_sent += sent
            rec.latencies_s.append(seconds)

    def snapshot(self) -> dict[str, MethodRecord]:
        """A consistent copy of every method's counters."""
        with self._lock:
            return {
                name: MethodRecord(
                    r.requests, r.errors, r.bytes_received, r.bytes_sent, deque(r.latencies_s)
                )
                for name, r in self._methods.items()
            }

    def uptime_s(self) -> float:
        """Seconds since the counters started."""
        return time.monotonic() - self.started


class MetricsInterceptor(grpc.ServerInterceptor):
    """Times every gnnstore call and counts its message bytes into ``metrics``."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or not method.startswith(SERVICE_PREFIX):
            return handler
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(method, handler.unary_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._streaming(method, handler.unary_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler

    def _unary(self, method: str, behaviour: Callable) -> Callable:
        def timed(request: Any, context: grpc.ServicerContext) -> Any:
            started, ok, sent = time.perf_counter(), False, 0
            try:
                response = behaviour(request, context)
                ok, sent = True, response.ByteSize()
                return response
            finally:
                self._metrics.record(
                    method, time.perf_counter() - started, request.ByteSize(), sent, ok
                )

        return timed

    def _streaming(self, method: str, behaviour: Callable) -> Callable:
        def timed(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            started, ok, sent = time.perf_counter(), False, 0
            try:
                for response in behaviour(request, context):
                    sent += response.ByteSize()
                    yield response
                ok = True
            finally:
                self._metrics.record(
                    method, time.perf_counter() - started, request.ByteSize(), sent, ok
                )

        return timed
