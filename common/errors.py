"""gnnstore's error family, shared by server and client.

Each class derives from the built-in exception a PyG user already catches and names the gRPC
status the server answers with (``status``: a ``grpc.StatusCode`` member's name; this module
does not import gRPC, so the stores and ingest never load it). The client maps a status back
through the closed ``ERRORS_BY_NAME`` table, never by importing a class the server names.
"""
from __future__ import annotations

from typing import ClassVar


class GnnStoreError(Exception):
    """Base of every error gnnstore raises on purpose."""

    status: ClassVar[str] = "INTERNAL"


class InvalidRequestError(GnnStoreError, ValueError):
    """Bad input: wrong dtype or shape, ids out of range, absurd options."""

    status = "INVALID_ARGUMENT"


class MalformedFileError(InvalidRequestError):
    """An input file that cannot be read as declared; the message names file, line and column."""


class CommandInputError(InvalidRequestError):
    """What a command was given to start from (its config file, its data directory) cannot be
    used; ``gnnstore`` exits with status 2 for it, as for an unknown option."""


class NotFoundError(GnnStoreError, KeyError):
    """An unknown node type, edge type, attribute or external key."""

    status = "NOT_FOUND"
    __str__ = Exception.__str__  # KeyError would print the message in quotes


class PreconditionError(GnnStoreError, RuntimeError):
    """The store is not in a state to answer: missing or corrupt data directory, locked, stale."""

    status = "FAILED_PRECONDITION"


class ServerUnavailableError(GnnStoreError, ConnectionError):
    """The server cannot be reached, or did not answer within the call's deadline."""

    status = "UNAVAILABLE"


class ResourceExhaustedError(GnnStoreError, RuntimeError):
    """A request over one of the server's work limits, or the server out of a resource (disk);
    the message names the limit and how to raise it (``RESOURCE_EXHAUSTED``)."""

    status = "RESOURCE_EXHAUSTED"


class AuthenticationError(GnnStoreError, PermissionError):
    """The call carried no token, or one the server does not know (``UNAUTHENTICATED``)."""

    status = "UNAUTHENTICATED"


class PermissionDeniedError(GnnStoreError, PermissionError):
    """The token's role may not make this call, e.g. a reader's Put (``PERMISSION_DENIED``)."""

    status = "PERMISSION_DENIED"


ERROR_CLASS_KEY = "gnnstore-error-class"
"""Trailing-metadata key under which the server names the error class it raised."""

ERRORS_BY_NAME: dict[str, type[GnnStoreError]] = {
    cls.__name__: cls
    for cls in (
        GnnStoreError,
        InvalidRequestError,
        MalformedFileError,
        NotFoundError,
        PreconditionError,
        ServerUnavailableError,
        ResourceExhaustedError,
        AuthenticationError,
        PermissionDeniedError,
    )
}

ERRORS_BY_STATUS: dict[str, type[GnnStoreError]] = {
    "INVALID_ARGUMENT": InvalidRequestError,
    "OUT_OF_RANGE": InvalidRequestError,
    "NOT_FOUND": NotFoundError,
    "FAILED_PRECONDITION": PreconditionError,
    "UNAVAILABLE": ServerUnavailableError,
    "DEADLINE_EXCEEDED": ServerUnavailableError,
    "RESOURCE_EXHAUSTED": ResourceExhaustedError,
    "UNAUTHENTICATED": AuthenticationError,
    "PERMISSION_DENIED": PermissionDeniedError,
}
