"""Streamed replies that cannot hold every handler thread.

A sync gRPC server sends each message of a streamed reply from the handler's own thread and
waits there until the client has taken it: a caller that stops reading holds that thread, and
ten such callers of ``GetTensor`` (one chunk read, then nothing) made a server with eight
handler threads unreachable. ``StreamGuard`` bounds both sides of that: at most ``max_streams``
streamed replies run at once (the next is refused with ``RESOURCE_EXHAUSTED`` at once, so the
other threads stay free for every other call), and a stream whose client has not taken a
message for ``stall_s`` seconds is cancelled, which frees its thread. Health's ``Watch`` is
left alone: it holds no data and a watcher waits on it for as long as the server runs.
"""
from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc

logger = logging.getLogger(__name__)

HEALTH = "/grpc.health.v1.Health/"
"""Health's ``Watch`` stream idles by design until the status changes; it is not a data stream."""


class StreamGuard(grpc.ServerInterceptor):
    """Caps the streamed replies running at once and cancels those their client stopped reading.

    Args:
        max_streams: streamed replies that may run at once.
        stall_s: seconds a stream may wait for its client to take a message.
    """

    def __init__(self, max_streams: int, stall_s: float) -> None:
        self.max_streams = max_streams
        self.stall_s = stall_s
        self._lock = threading.Lock()
        self._running = 0
        self._waiting_since: dict[int, tuple[float, grpc.ServicerContext]] = {}
        self._keys = itertools.count()
        self._stopped = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="gnnstore-stream-guard", daemon=True)
        self._watcher.start()

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_stream is None or handler_call_details.method.startswith(HEALTH):
            return handler
        return grpc.unary_stream_rpc_method_handler(
            self._guarded(handler.unary_stream), request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    def close(self) -> None:
        """Stop watching (the server has stopped)."""
        self._stopped.set()
        self._watcher.join()

    def _guarded(self, behaviour: Callable[[Any, grpc.ServicerContext], Iterator[Any]]) -> Callable:
        def guarded(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            with self._lock:
                admitted = self._running < self.max_streams
                if admitted:
                    self._running += 1
            if not admitted:
                context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"{self.max_streams} streamed replies are being sent already (the server's limit); "
                    "try again when one has finished",
                )
            key = next(self._keys)
            try:
                for message in behaviour(request, context):
                    with self._lock:  # from here until gRPC asks for the next one, the client reads
                        self._waiting_since[key] = (time.monotonic(), context)
                    yield message
                    with self._lock:
                        del self._waiting_since[key]
            finally:
                with self._lock:
                    self._running -= 1
                    self._waiting_since.pop(key, None)

        return guarded

    def _watch(self) -> None:
        while not self._stopped.wait(min(1.0, self.stall_s / 4)):
            now = time.monotonic()
            with self._lock:
                stalled = [context for since, context in self._waiting_since.values() if now - since > self.stall_s]
            for context in stalled:
                logger.info("cancelled a streamed reply its client took nothing of for %g s", self.stall_s)
                context.cancel()
