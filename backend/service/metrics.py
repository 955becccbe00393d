"""Per-method and per-client request counts, latencies and bytes, recorded by a server interceptor for Stats."""
from __future__ import annotations

import bisect
import dataclasses
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np

from gnnstore.backend.service.auth import ANONYMOUS, Principal
from gnnstore.proto import graph_pb2
from gnnstore.proto.metadata_keys import RETRY_KEY
from gnnstore.proto.reply_payload import ReplyWithPayload

LATENCY_WINDOW = 10_000
"""Latencies kept per method for the percentiles (the most recent ones)."""

SERVICE_PREFIX = "/gnnstore.v1."
"""Only gnnstore's own services are measured (health watches are long-lived streams)."""

LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Upper bounds of the latency histogram's buckets (a last one takes the rest)."""

UNPARSABLE = object()
"""A request body protobuf could not parse (answered INVALID_ARGUMENT, not grpcio's INTERNAL)."""


@dataclass
class MethodRecord:
    """Counters of one RPC method since the server started."""

    requests: int = 0
    errors: int = 0
    bytes_received: int = 0
    bytes_sent: int = 0
    bytes_shared: int = 0
    retries: int = 0
    latencies_s: deque = field(default_factory=lambda: deque(maxlen=LATENCY_WINDOW))
    latency_counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_S) + 1))
    """Calls per latency bucket since the start (``LATENCY_BUCKETS_S``, then the rest)."""
    latency_sum_s: float = 0.0

    def percentile_ms(self, q: float) -> float:
        """The ``q``-th latency percentile in milliseconds (0.0 before the first request)."""
        return float(np.percentile(self.latencies_s, q)) * 1e3 if self.latencies_s else 0.0

    def mean_ms(self) -> float:
        """Mean latency of the window in milliseconds."""
        return float(np.mean(self.latencies_s)) * 1e3 if self.latencies_s else 0.0


@dataclass
class ClientRecord:
    """Counters of one client identity (a token's name) since the server started."""

    role: str
    requests: int = 0
    errors: int = 0
    bytes_received: int = 0
    bytes_sent: int = 0
    retries: int = 0


class Metrics:
    """Thread-safe counters per method and per client; ``snapshot()`` and ``clients()`` copy
    them for the Stats RPC."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._methods: dict[str, MethodRecord] = {}
        self._clients: dict[str, ClientRecord] = {}

    def record(
        self,
        method: str,
        seconds: float,
        received: int,
        ok: bool,
        client: Principal = ANONYMOUS,
        *,
        retry: bool = False,
    ) -> None:
        """Count one finished call (its replies' bytes are counted by ``record_sent``);
        ``retry``: the client sent it again after the server was unreachable."""
        with self._lock:
            rec = self._methods.setdefault(method, MethodRecord())
            rec.requests += 1
            rec.errors += 0 if ok else 1
            rec.bytes_received += received
            rec.retries += retry
            rec.latencies_s.append(seconds)
            rec.latency_counts[bisect.bisect_left(LATENCY_BUCKETS_S, seconds)] += 1
            rec.latency_sum_s += seconds
            by_client = self._client(client)
            by_client.requests += 1
            by_client.errors += 0 if ok else 1
            by_client.bytes_received += received
            by_client.retries += retry

    def record_sent(self, method: str, sent: int, client: Principal = ANONYMOUS) -> None:
        """Count the bytes of one reply message as it is serialised."""
        with self._lock:
            self._methods.setdefault(method, MethodRecord()).bytes_sent += sent
            self._client(client).bytes_sent += sent

    def record_shared(self, method: str, placed: int) -> None:
        """Count the bytes of one reply written into the client's reply segment."""
        with self._lock:
            self._methods.setdefault(method, MethodRecord()).bytes_shared += placed

    def snapshot(self) -> dict[str, MethodRecord]:
        """A consistent copy of every method's counters."""
        with self._lock:
            return {
                name: dataclasses.replace(r, latencies_s=deque(r.latencies_s), latency_counts=list(r.latency_counts))
                for name, r in self._methods.items()
            }

    def clients(self) -> dict[str, ClientRecord]:
        """A consistent copy of every client's counters."""
        with self._lock:
            return {name: dataclasses.replace(r) for name, r in self._clients.items()}

    def _client(self, client: Principal) -> ClientRecord:
        """The record of ``client`` (call under the lock)."""
        record = self._clients.get(client.name)
        if record is None:
            record = self._clients[client.name] = ClientRecord(client.role)
        return record

    def uptime_s(self) -> float:
        """Seconds since the counters started."""
        return time.monotonic() - self.started


class MetricsInterceptor(grpc.ServerInterceptor):
    """Times every gnnstore call and counts its message bytes into ``metrics``, per method and
    per client (``identify`` tells who made a call; default: everyone is ``ANONYMOUS``).

    Bytes are counted where the messages are (de)serialised, so no message is encoded twice
    just to be measured; a sampling reply with a payload (``ReplyWithPayload``) serialises
    itself here, and one whose payload waits on the data port (``data_port_ticket``) counts it as sent.
    Since every request (the health check's too) is parsed here, a body that does not parse is
    answered here: ``INVALID_ARGUMENT`` saying so, where grpcio would answer ``INTERNAL``.
    """

    def __init__(
        self, metrics: Metrics, identify: Callable[[grpc.HandlerCallDetails], Principal] | None = None
    ) -> None:
        self._metrics = metrics
        self._identify = identify or (lambda details: ANONYMOUS)

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None:
            return handler
        measured = method.startswith(SERVICE_PREFIX)  # others (health) are only parse-checked
        client = self._identify(handler_call_details) if measured else ANONYMOUS
        retry = any(key == RETRY_KEY for key, _ in handler_call_details.invocation_metadata or ())

        def finished(seconds: float, received: int, ok: bool) -> None:
            if measured:
                self._metrics.record(method, seconds, received, ok, client, retry=retry)

        deserialize = handler.request_deserializer or (lambda data: data)
        serialize = handler.response_serializer or (lambda message: message)

        def read(data: bytes) -> tuple[int, Any]:
            try:
                return len(data), deserialize(data)
            except Exception:  # any parse failure of a stranger's bytes is the request's fault
                return len(data), UNPARSABLE

        def write(message: Any) -> bytes:
            data = message.serialize() if isinstance(message, ReplyWithPayload) else serialize(message)
            if measured:
                held = message.data_port_ticket.size if isinstance(message, graph_pb2.SampleResponse) else 0
                self._metrics.record_sent(method, len(data) + held, client)
            return data

        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(method, handler.unary_unary, finished), request_deserializer=read,
                response_serializer=write,
            )
        if handler.unary_stream is not None:
            behaviour = handler.unary_stream
            # health's Watch sends from callbacks, without a handler thread: a wrapper that
            # dropped that flag held one thread per open Watch, so strangers could take them all
            wrapped = (self._non_blocking(method, behaviour) if getattr(behaviour, "experimental_non_blocking", False)
                       else self._streaming(method, behaviour, finished))
            return grpc.unary_stream_rpc_method_handler(wrapped, request_deserializer=read, response_serializer=write)
        return handler

    @staticmethod
    def _unary(method: str, behaviour: Callable, finished: Callable[[float, int, bool], None]) -> Callable:
        def timed(sized_request: tuple[int, Any], context: grpc.ServicerContext) -> Any:
            (received, request), started, ok = sized_request, time.perf_counter(), False
            try:
                _refuse_unparsable(request, method, context)
                response = behaviour(request, context)
                ok = True
                return response
            finally:
                finished(time.perf_counter() - started, received, ok)

        return timed

    @staticmethod
    def _streaming(method: str, behaviour: Callable, finished: Callable[[float, int, bool], None]) -> Callable:
        def timed(sized_request: tuple[int, Any], context: grpc.ServicerContext) -> Iterator[Any]:
            (received, request), started, ok = sized_request, time.perf_counter(), False
            try:
                _refuse_unparsable(request, method, context)
                yield from behaviour(request, context)
                ok = True
            finally:
                finished(time.perf_counter() - started, received, ok)

        return timed


    @staticmethod
    def _non_blocking(method: str, behaviour: Callable) -> Callable:
        """A non-blocking streaming ``behaviour`` (it answers through ``send_response_callback``),
        parse-checked and still non-blocking (such calls are not measured)."""

        def checked(sized_request: tuple[int, Any], context: grpc.ServicerContext,
                    send_response_callback: Callable[[Any], None]) -> None:
            _refuse_unparsable(sized_request[1], method, context)
            behaviour(sized_request[1], context, send_response_callback=send_response_callback)

        checked.experimental_non_blocking = True
        checked.experimental_thread_pool = getattr(behaviour, "experimental_thread_pool", None)
        return checked


def _refuse_unparsable(request: Any, method: str, context: grpc.ServicerContext) -> None:
    if request is UNPARSABLE:
        context.abort(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"the server could not parse the {method.rsplit('/', 1)[-1]} request: client and server "
            "versions differ, or the message is not a gnnstore one",
        )
