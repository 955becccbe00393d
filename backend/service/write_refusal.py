"""Refuses every write on a server that takes none (``--read-only``, ``--replica``), saying why."""
from __future__ import annotations

from collections.abc import Callable

import grpc

from gnnstore.backend.service.auth import refusal, required_role


class WriteRefusal(grpc.ServerInterceptor):
    """Answers the methods that change data (those the ``writer`` role is for) with
    ``FAILED_PRECONDITION`` and ``message``, before their request is parsed.

    Args:
        message: why this server takes no writes, and where they go instead.
    """

    def __init__(self, message: str) -> None:
        self._message = message

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        if required_role(handler_call_details.method) == "writer":
            return refusal(continuation(handler_call_details), grpc.StatusCode.FAILED_PRECONDITION, self._message)
        return continuation(handler_call_details)
