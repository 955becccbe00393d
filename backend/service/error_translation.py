"""The one place where exceptions become gRPC statuses: ``translate_errors``.

Every servicer method runs inside it. A ``GnnStoreError`` aborts the call with its class's
status, its message as the details and its class name in trailing metadata (the client looks the
name up in a closed table). Anything else is a bug: it is logged with its traceback here and the
client gets ``INTERNAL`` with a short message. Either way the server keeps serving.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import grpc

from gnnstore.common.errors import ERROR_CLASS_KEY, GnnStoreError

logger = logging.getLogger(__name__)


@contextmanager
def translate_errors(context: grpc.ServicerContext, rpc: str) -> Iterator[None]:
    """Abort ``context`` with the status of any exception raised in the block.

    Args:
        context: the call's servicer context.
        rpc: ``"Service.Method"``, for log lines.
    """
    try:
        yield
    except GnnStoreError as exc:
        logger.info("[%s] %s: %s", rpc, type(exc).__name__, exc)
        context.set_trailing_metadata(((ERROR_CLASS_KEY, type(exc).__name__),))
        context.abort(grpc.StatusCode[exc.status], str(exc))
    except Exception as exc:
        logger.exception("[%s] unexpected error", rpc)
        context.abort(
            grpc.StatusCode.INTERNAL,
            f"{rpc} failed on the server ({type(exc).__name__}); the server log has the details",
        )

