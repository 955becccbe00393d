"""gnnstore: a database-backed remote backend for PyTorch Geometric.

Import the room you need: ``gnnstore.stores`` (PyG stores over LadybugDB, Kùzu, Neo4j and RocksDB),
``gnnstore.ingest``, ``gnnstore.backend`` (the gRPC service) and ``gnnstore.client``.
"""
from gnnstore.common.errors import (
    AuthenticationError,
    GnnStoreError,
    InvalidRequestError,
    MalformedFileError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionError,
    ResourceExhaustedError,
    ServerUnavailableError,
)

__version__ = "0.1.0"

__all__ = [
    "AuthenticationError",
    "GnnStoreError",
    "InvalidRequestError",
    "MalformedFileError",
    "NotFoundError",
    "PermissionDeniedError",
    "PreconditionError",
    "ResourceExhaustedError",
    "ServerUnavailableError",
    "__version__",
]
