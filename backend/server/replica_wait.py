"""A replica started before its primary has prepared the data directory waits for it.

Replicas and their primary start in any order (a compose project, a Kubernetes rollout). A
replica whose directory cannot be opened yet (not ingested, the feature tier not exported, a
file missing or damaged) binds its port, answers health checks NOT_SERVING and every other call
UNAVAILABLE, logs why, and tries again every ``RETRY_S``. Exiting instead would leave an
orchestrator restarting it in a loop, with nothing on its port to say why.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from concurrent import futures
from dataclasses import replace

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from gnnstore.backend.service.served_data import ServedData, open_served_data
from gnnstore.common.errors import GnnStoreError, PreconditionError
from gnnstore.config import ServerConfig

logger = logging.getLogger(__name__)

RETRY_S = 1.0
"""Seconds between two attempts to open the data directory."""

WAITING = (
    "this replica is waiting for its primary to prepare the data directory it serves; "
    "send the call to another server"
)


class StopRequested(Exception):
    """A stop signal came while the replica waited for its primary."""


def open_when_prepared(
    config: ServerConfig,
    credentials: grpc.ServerCredentials | None,
    service_names: Iterable[str],
    stop_requested: Callable[[float], bool],
) -> tuple[ServedData, ServerConfig]:
    """Open ``config``'s data directory, waiting on its port while it cannot be opened.

    Args:
        config: a replica's configuration.
        credentials: the server's TLS credentials (``None``: plaintext), for the waiting port too.
        service_names: the services health reports NOT_SERVING for, besides the server's "".
        stop_requested: waits up to the given seconds for a stop; True if one came.

    Returns:
        The opened data, and ``config`` with the port the waiting port bound (so the server
        binds the same one when ``config.port`` was 0).

    Raises:
        StopRequested: a stop came first.
    """
    waiting: tuple[grpc.Server, futures.ThreadPoolExecutor] | None = None
    reason = None
    try:
        while True:
            try:
                return open_served_data(config), config
            except GnnStoreError as exc:
                if waiting is None:
                    server, handlers, port = _waiting_port(config, credentials, service_names)
                    waiting, config = (server, handlers), replace(config, port=port)
                if str(exc) != reason:
                    reason = str(exc)
                    logger.warning(
                        "replica: %s; NOT_SERVING on %s until it can be opened (trying every %g s)",
                        reason, config.address, RETRY_S,
                    )
            if stop_requested(RETRY_S):
                raise StopRequested
    finally:
        if waiting is not None:
            server, handlers = waiting
            server.stop(0).wait()
            handlers.shutdown()


def _waiting_port(
    config: ServerConfig, credentials: grpc.ServerCredentials | None, service_names: Iterable[str]
) -> tuple[grpc.Server, futures.ThreadPoolExecutor, int]:
    """Bind the port: health says NOT_SERVING, other calls get UNAVAILABLE naming the wait."""
    handlers = futures.ThreadPoolExecutor(2, thread_name_prefix="gnnstore-waiting")
    server = grpc.server(handlers, maximum_concurrent_rpcs=max(4, config.max_concurrent_rpcs // 4))
    servicer = health.HealthServicer(experimental_non_blocking=True)  # a Watch holds no thread
    for name in ("", *service_names):
        servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    server.add_generic_rpc_handlers([_Unavailable()])
    try:
        if credentials is None:
            port = server.add_insecure_port(config.address)
        else:
            port = server.add_secure_port(config.address, credentials)
    except RuntimeError as exc:
        raise PreconditionError(f"cannot listen on {config.address}: {exc}") from None
    server.start()
    return server, handlers, port


class _Unavailable(grpc.GenericRpcHandler):
    """Every method but health's: UNAVAILABLE, which clients retry on another server."""

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(_refuse)


def _refuse(request: bytes, context: grpc.ServicerContext) -> None:
    context.abort(grpc.StatusCode.UNAVAILABLE, WAITING)
